//! histfit's own reader for the histograms HistFactory configurations point at: a ROOT file's
//! header, its directories and keys (TKey), the compressed records behind them, and the streamer
//! of one-dimensional histograms (TH1C/S/I/F/D), and TTrees of flat numeric branches ([`tree`]).
//! No ROOT installation is needed, and nothing else in a ROOT file (functions, fitted results,
//! RNTuples) is read.
//!
//! The layout facts used here are those of ROOT's documented file format: a header at byte 0
//! (`root`, version, first key, …), a directory record after the top key, a list of keys per
//! directory, and objects streamed big-endian with a byte count before each versioned part.

mod compression;
mod cursor;
mod hist;
pub mod tree;

pub use hist::Histogram;
pub use tree::{Branch, LeafKind, Tree};

use cursor::{Cursor, Truncated};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Errors name the file (and the object) and the rule: the crate's one error type.
use crate::ImportError as RootError;

/// ROOT marks files whose seek pointers need 64 bits by adding one million to the version.
const WIDE_FILE_VERSION: i32 = 1_000_000;
/// Keys and directory records with versions above 1000 carry 64-bit seek pointers.
const WIDE_RECORD_VERSION: i16 = 1000;
/// The largest object this reader inflates (a histogram of 10⁸ double bins is 800 MB).
const MAX_OBJECT_BYTES: usize = 1 << 30;

/// One entry of a directory: a named, versioned (cycle) object of some class.
#[derive(Debug, Clone)]
pub struct Key {
    pub class_name: String,
    pub name: String,
    pub title: String,
    pub cycle: i16,
    obj_len: usize,
    n_bytes: usize,
    key_len: usize,
    seek_key: u64,
}

/// What a ROOT file is read from: a file on disk, or bytes in memory.
trait Source: Read + Seek + Send {}
impl<T: Read + Seek + Send> Source for T {}

/// An open ROOT file: its directories are read when first asked for and kept.
pub struct RootFile {
    path: PathBuf,
    file: Box<dyn Source>,
    size: u64,
    top_keys_at: u64,
    directories: HashMap<String, Vec<Key>>,
}

impl RootFile {
    pub fn open(path: &Path) -> Result<RootFile, RootError> {
        let place = path.display().to_string();
        let file =
            File::open(path).map_err(|e| RootError::new(&place, format!("cannot open: {e}")))?;
        let size = file
            .metadata()
            .map_err(|e| RootError::new(&place, format!("cannot read: {e}")))?
            .len();
        RootFile::from_source(path, Box::new(file), size)
    }

    /// A ROOT file held in memory (`name` is what messages call it).
    pub fn from_bytes(name: &Path, bytes: Vec<u8>) -> Result<RootFile, RootError> {
        let size = bytes.len() as u64;
        RootFile::from_source(name, Box::new(std::io::Cursor::new(bytes)), size)
    }

    fn from_source(path: &Path, file: Box<dyn Source>, size: u64) -> Result<RootFile, RootError> {
        let mut root = RootFile {
            path: path.to_path_buf(),
            file,
            size,
            top_keys_at: 0,
            directories: HashMap::new(),
        };
        let head = root.read_at(0, 64.min(size as usize), "the file header")?;
        root.top_keys_at = root.parse_header(&head)?;
        Ok(root)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, rule: impl Into<String>) -> RootError {
        RootError::new(self.path.display().to_string(), rule)
    }

    fn truncated(&self, t: Truncated) -> RootError {
        self.error(format!(
            "truncated or corrupt ({} runs past its record)",
            t.0
        ))
    }

    fn read_at(&mut self, pos: u64, len: usize, what: &str) -> Result<Vec<u8>, RootError> {
        if pos
            .checked_add(len as u64)
            .is_none_or(|end| end > self.size)
        {
            return Err(self.error(format!(
                "{what} at byte {pos} ({len} bytes) lies past the end of the file ({} bytes): truncated or not a ROOT file",
                self.size
            )));
        }
        let mut buf = vec![0u8; len];
        let io = self
            .file
            .seek(SeekFrom::Start(pos))
            .and_then(|_| self.file.read_exact(&mut buf));
        io.map_err(|e| self.error(format!("cannot read {what}: {e}")))?;
        Ok(buf)
    }

    /// The file header: checks the magic and returns where the top directory's keys are listed.
    fn parse_header(&mut self, head: &[u8]) -> Result<u64, RootError> {
        if head.len() < 4 || &head[..4] != b"root" {
            return Err(self.error("not a ROOT file (it does not start with \"root\")"));
        }
        let mut c = Cursor::at(head, 4);
        let parsed = (|| {
            let version = c.i32("the file version")?;
            let begin = c.i32("the first key's position")?.max(0) as u64;
            let wide = version >= WIDE_FILE_VERSION;
            c.seek_pointer(wide, "fEND")?;
            c.seek_pointer(wide, "fSeekFree")?;
            c.i32("fNbytesFree")?;
            c.i32("nfree")?;
            let n_bytes_name = c.i32("fNbytesName")?.max(0) as u64;
            Ok((begin, n_bytes_name))
        })();
        let (begin, n_bytes_name) = parsed.map_err(|t| self.truncated(t))?;
        let at = begin + n_bytes_name;
        let record = self.read_at(
            at,
            42.min((self.size.saturating_sub(at)) as usize),
            "the top directory",
        )?;
        self.directory_keys_at(&record)
    }

    /// A directory record (TDirectory's streamer): where its list of keys is.
    fn directory_keys_at(&self, record: &[u8]) -> Result<u64, RootError> {
        let mut c = Cursor::new(record);
        let parsed = (|| {
            let version = c.i16("the directory version")?;
            let wide = version > WIDE_RECORD_VERSION;
            c.u32("fDatimeC")?;
            c.u32("fDatimeM")?;
            c.i32("fNbytesKeys")?;
            c.i32("fNbytesName")?;
            c.seek_pointer(wide, "fSeekDir")?;
            c.seek_pointer(wide, "fSeekParent")?;
            c.seek_pointer(wide, "fSeekKeys")
        })();
        parsed.map_err(|t| self.truncated(t))
    }

    /// The keys listed at `at`: a key for the list itself, a count, then that many key headers.
    fn keys_at(&mut self, at: u64) -> Result<Vec<Key>, RootError> {
        if at == 0 || at >= self.size {
            return Err(self.error(format!(
                "a directory's list of keys at byte {at} lies outside the file"
            )));
        }
        let head = self.read_at(at, 4, "a list of keys")?;
        let n_bytes = Cursor::new(&head)
            .i32("a list of keys")
            .map_err(|t| self.truncated(t))?
            .max(0) as usize;
        let record = self.read_at(at, n_bytes, "a list of keys")?;
        let mut c = Cursor::new(&record);
        let parsed = (|| {
            let own = key_header(&mut c)?;
            c.seek(own.key_len, "the list's own key")?;
            let n = c.i32("the number of keys")?;
            // Each key header is at least 26 bytes: a count that cannot fit is corrupt.
            if n < 0 || n as usize > record.len() / 26 {
                return Err(Truncated("the number of keys"));
            }
            (0..n)
                .map(|_| key_header(&mut c))
                .collect::<Result<Vec<_>, _>>()
        })();
        parsed.map_err(|t| self.truncated(t))
    }

    /// The keys of the directory at `dir` ("" is the top; components separated by '/').
    pub fn keys(&mut self, dir: &str) -> Result<&[Key], RootError> {
        let dir = dir.trim_matches('/').to_string();
        if !self.directories.contains_key(&dir) {
            let keys = match dir.rsplit_once('/') {
                _ if dir.is_empty() => self.keys_at(self.top_keys_at)?,
                split => {
                    let (parent, name) = split.unwrap_or(("", &dir));
                    let key = self
                        .find_key(parent, name)?
                        .ok_or_else(|| self.error(format!("no directory \"{dir}\"")))?;
                    if !key.class_name.starts_with("TDirectory") {
                        return Err(self.error(format!(
                            "\"{dir}\" is a {}, not a directory",
                            key.class_name
                        )));
                    }
                    let record = self.read_at(
                        key.seek_key + key.key_len as u64,
                        key.n_bytes.saturating_sub(key.key_len).min(64),
                        "a directory record",
                    )?;
                    let at = self.directory_keys_at(&record)?;
                    self.keys_at(at)?
                }
            };
            self.directories.insert(dir.clone(), keys);
        }
        Ok(&self.directories[&dir])
    }

    /// The key named `name` in directory `dir` with the highest cycle, if any.
    fn find_key(&mut self, dir: &str, name: &str) -> Result<Option<Key>, RootError> {
        Ok(self
            .keys(dir)?
            .iter()
            .filter(|k| k.name == name)
            .max_by_key(|k| k.cycle)
            .cloned())
    }

    /// Whether an object exists at `path` ("dir/sub/name"). A directory that is not there is
    /// just "no"; one that cannot be read is an error.
    pub fn contains(&mut self, path: &str) -> Result<bool, RootError> {
        let (dir, name) = split_path(path);
        let mut at = String::new();
        for part in dir.split('/').filter(|p| !p.is_empty()) {
            match self.find_key(&at, part)? {
                Some(k) if k.class_name.starts_with("TDirectory") => {}
                _ => return Ok(false),
            }
            at = if at.is_empty() {
                part.to_string()
            } else {
                format!("{at}/{part}")
            };
        }
        Ok(self.find_key(dir, name)?.is_some())
    }

    /// The object's uncompressed bytes.
    fn object_bytes(&mut self, key: &Key) -> Result<Vec<u8>, RootError> {
        let stored = key.n_bytes.checked_sub(key.key_len).ok_or_else(|| {
            self.error(format!(
                "object \"{}\": its key is longer than the object",
                key.name
            ))
        })?;
        if key.obj_len > MAX_OBJECT_BYTES {
            return Err(self.error(format!(
                "object \"{}\": {} bytes uncompressed, more than this reader inflates ({MAX_OBJECT_BYTES})",
                key.name, key.obj_len
            )));
        }
        let raw = self.read_at(key.seek_key + key.key_len as u64, stored, "an object")?;
        if key.obj_len <= stored {
            return Ok(raw);
        }
        compression::decompress(&raw, key.obj_len)
            .map_err(|rule| self.error(format!("object \"{}\": {rule}", key.name)))
    }

    /// The one-dimensional histogram at `path` ("dir/name" or "name").
    pub fn histogram(&mut self, path: &str) -> Result<Histogram, RootError> {
        let (dir, name) = split_path(path);
        let key = self
            .find_key(dir, name)?
            .ok_or_else(|| self.error(format!("no object \"{}\"", path.trim_matches('/'))))?;
        let bytes = self.object_bytes(&key)?;
        hist::read(&key.class_name, &bytes).map_err(|rule| {
            self.error(format!(
                "object \"{}\" ({}): {rule}",
                path.trim_matches('/'),
                key.class_name
            ))
        })
    }
}

impl RootFile {
    /// The TTree at `path` ("dir/name" or "name"): its entries and branches.
    pub fn tree(&mut self, path: &str) -> Result<Tree, RootError> {
        let (dir, name) = split_path(path);
        let Some(key) = self.find_key(dir, name)? else {
            let trees: Vec<String> = self
                .keys(dir)?
                .iter()
                .filter(|k| k.class_name == "TTree" || k.class_name.starts_with("TDirectory"))
                .map(|k| match k.class_name.as_str() {
                    "TTree" => k.name.clone(),
                    _ => format!("{}/ (a directory)", k.name),
                })
                .collect();
            return Err(self.error(format!(
                "no tree \"{}\" (here: {})",
                path.trim_matches('/'),
                if trees.is_empty() {
                    "no trees".to_string()
                } else {
                    trees.join(", ")
                }
            )));
        };
        if key.class_name != "TTree" {
            return Err(self.error(format!(
                "\"{}\" is a {}, not a TTree",
                path.trim_matches('/'),
                key.class_name
            )));
        }
        let bytes = self.object_bytes(&key)?;
        tree::read(&bytes, key.key_len)
            .map_err(|rule| self.error(format!("tree \"{}\": {rule}", path.trim_matches('/'))))
    }

    /// The values of the flat branch `name` of `tree`, one an entry, as f64.
    pub fn branch_values(&mut self, tree: &Tree, name: &str) -> Result<Vec<f64>, RootError> {
        let place = |rule: String| format!("tree \"{}\", branch \"{name}\": {rule}", tree.name);
        let branch = tree.branch(name).ok_or_else(|| {
            let names: Vec<&str> = tree.branches.iter().map(|b| b.name.as_str()).collect();
            self.error(place(format!(
                "no such branch (it has {})",
                names.join(", ")
            )))
        })?;
        let kind = branch.kind.clone().map_err(|why| self.error(place(why)))?;
        let mut out = Vec::with_capacity(tree.entries.min(1 << 24) as usize);
        for (i, b) in branch.baskets.iter().enumerate() {
            let payload = self
                .basket_payload(b.seek, b.bytes, b.entries, kind.size())
                .map_err(|rule| self.error(place(format!("basket {i}: {rule}"))))?;
            tree::basket_values(kind, &payload, b.entries, &mut out)
                .map_err(|rule| self.error(place(format!("basket {i}: {rule}"))))?;
        }
        Ok(out)
    }

    /// A basket's payload, inflated: the key header (with the basket's own fields) read, its
    /// entry count checked against the branch's `entries` of `size` bytes each.
    fn basket_payload(
        &mut self,
        seek: u64,
        bytes: usize,
        entries: u64,
        size: usize,
    ) -> Result<Vec<u8>, String> {
        let raw = self.read_at(seek, bytes, "a basket").map_err(|e| e.rule)?;
        let mut c = Cursor::new(&raw);
        let key = key_header(&mut c).map_err(String::from)?;
        let parsed = (|| {
            c.i16("the basket's version")?;
            c.i32("fBufferSize")?;
            let entry_size = c.i32("fNevBufSize")?;
            let n = c.i32("fNevBuf")?;
            let last = c.i32("fLast")?;
            Ok::<_, Truncated>((entry_size, n, last))
        })();
        let (entry_size, n, last) = parsed.map_err(String::from)?;
        if u64::try_from(n).ok() != Some(entries) || usize::try_from(entry_size).ok() != Some(size)
        {
            return Err(format!(
                "{n} entries of {entry_size} bytes where the branch says {entries} of {size}"
            ));
        }
        let stored = raw
            .get(key.key_len..key.n_bytes.min(raw.len()))
            .ok_or("its key is longer than the basket")?;
        if key.obj_len > MAX_OBJECT_BYTES {
            return Err(format!(
                "{} bytes uncompressed, more than this reader inflates ({MAX_OBJECT_BYTES})",
                key.obj_len
            ));
        }
        let payload = if key.obj_len <= stored.len() {
            stored.to_vec()
        } else {
            compression::decompress(stored, key.obj_len)?
        };
        // The entries' values end at fLast (counted from the key's start); offsets may follow.
        let values_end = usize::try_from(last)
            .ok()
            .and_then(|l| l.checked_sub(key.key_len))
            .ok_or_else(|| format!("fLast {last} lies inside the key's header"))?;
        payload
            .get(..values_end)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| {
                format!(
                    "fLast {last} lies past the basket's {} bytes",
                    payload.len()
                )
            })
    }
}

fn split_path(path: &str) -> (&str, &str) {
    path.trim_matches('/')
        .rsplit_once('/')
        .unwrap_or(("", path.trim_matches('/')))
}

/// A key header (TKey's streamer).
fn key_header(c: &mut Cursor) -> Result<Key, Truncated> {
    let start = c.pos();
    let n_bytes = c.i32("a key's size")?;
    let version = c.i16("a key's version")?;
    let obj_len = c.i32("a key's object length")?;
    c.u32("a key's date")?;
    let key_len = c.i16("a key's header length")?;
    let cycle = c.i16("a key's cycle")?;
    let wide = version > WIDE_RECORD_VERSION;
    let seek_key = c.seek_pointer(wide, "a key's position")?;
    c.seek_pointer(wide, "a key's directory")?;
    let class_name = c.string("a key's class name")?;
    let name = c.string("a key's name")?;
    let title = c.string("a key's title")?;
    if n_bytes < 0 || obj_len < 0 || key_len < 0 || (key_len as usize) < c.pos() - start {
        return Err(Truncated("a key header (negative or inconsistent sizes)"));
    }
    Ok(Key {
        class_name,
        name,
        title,
        cycle,
        obj_len: obj_len as usize,
        n_bytes: n_bytes as usize,
        key_len: key_len as usize,
        seek_key,
    })
}

//! TTrees of flat numeric branches: the tree's streamer (TTree version 20, ROOT ≥ 6.12), its
//! branches (TBranch version 13) with one leaf each (TLeafD/F/L/I/S/B/O, signed or unsigned, one
//! value an entry), and their baskets, read into f64 columns. Branches of classes, arrays,
//! strings and ROOT's packed Float16/Double32 are listed but refused when read, with the reason.
//!
//! The layout facts are ROOT's streamer information for these classes: each versioned part
//! starts with a byte count; object pointers (the branches and leaves of an array) are written as
//! a tag — 0 for none, `0xFFFFFFFF` followed by the class name for the first object of a class,
//! `0x80000000 | offset` for a later one of a class already named at that offset — and arrays
//! sized by another member (`[fMaxBaskets]`) are preceded by one byte. A basket is a key whose
//! header carries the basket's own fields; its payload holds the entries' values big-endian.

use super::cursor::{named, object, skip, Cursor, Header};
use std::collections::HashMap;

/// The byte-count flag of a pointer's tag, the new-class tag, the class-reference flag, and the
/// offset ROOT adds to positions in its map of classes (facts of ROOT's TBufferFile format).
const BYTE_COUNT: u32 = 0x4000_0000;
const NEW_CLASS: u32 = 0xFFFF_FFFF;
const CLASS_REF: u32 = 0x8000_0000;
const MAP_OFFSET: usize = 2;
/// How deeply objects may nest through pointers (a tree's branches hold leaves, a leaf its
/// count leaf): a bound on recursion for hostile files.
const MAX_NESTING: usize = 32;

/// The type of a flat branch's one value per entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafKind {
    F64,
    F32,
    I64,
    U64,
    I32,
    U32,
    I16,
    U16,
    I8,
    U8,
    Bool,
}

impl LeafKind {
    fn of(class: &str, unsigned: bool) -> Option<LeafKind> {
        use LeafKind::*;
        Some(match (class, unsigned) {
            ("TLeafD", _) => F64,
            ("TLeafF", _) => F32,
            ("TLeafL", false) => I64,
            ("TLeafL", true) => U64,
            ("TLeafI", false) => I32,
            ("TLeafI", true) => U32,
            ("TLeafS", false) => I16,
            ("TLeafS", true) => U16,
            ("TLeafB", false) => I8,
            ("TLeafB", true) => U8,
            ("TLeafO", _) => Bool,
            _ => return None,
        })
    }

    /// Bytes a value.
    pub fn size(self) -> usize {
        use LeafKind::*;
        match self {
            F64 | I64 | U64 => 8,
            F32 | I32 | U32 => 4,
            I16 | U16 => 2,
            I8 | U8 | Bool => 1,
        }
    }

    /// One big-endian value as f64 (64-bit integers beyond 2⁵³ round, as any f64 column does).
    fn value(self, b: &[u8]) -> f64 {
        use LeafKind::*;
        match self {
            F64 => f64::from_be_bytes(b.try_into().expect("8 bytes")),
            F32 => f32::from_be_bytes(b.try_into().expect("4 bytes")) as f64,
            I64 => i64::from_be_bytes(b.try_into().expect("8 bytes")) as f64,
            U64 => u64::from_be_bytes(b.try_into().expect("8 bytes")) as f64,
            I32 => i32::from_be_bytes(b.try_into().expect("4 bytes")) as f64,
            U32 => u32::from_be_bytes(b.try_into().expect("4 bytes")) as f64,
            I16 => i16::from_be_bytes(b.try_into().expect("2 bytes")) as f64,
            U16 => u16::from_be_bytes(b.try_into().expect("2 bytes")) as f64,
            I8 => b[0] as i8 as f64,
            U8 | Bool => b[0] as f64,
        }
    }
}

/// One basket on file: where, how many bytes, and its entries.
#[derive(Debug, Clone)]
pub(super) struct BasketRef {
    pub seek: u64,
    pub bytes: usize,
    pub first: u64,
    pub entries: u64,
}

/// A branch of a tree: its name and, where it is flat, its value type and baskets; otherwise
/// why it is not read.
#[derive(Debug, Clone)]
pub struct Branch {
    pub name: String,
    pub kind: Result<LeafKind, String>,
    pub(super) baskets: Vec<BasketRef>,
}

/// A tree's entries and branches (the values are read per branch, on request).
#[derive(Debug, Clone)]
pub struct Tree {
    pub name: String,
    pub entries: u64,
    pub branches: Vec<Branch>,
}

impl Tree {
    pub fn branch(&self, name: &str) -> Option<&Branch> {
        self.branches.iter().find(|b| b.name == name)
    }
}

/// Reads a TTree object (the key's uncompressed bytes; `key_len` is the key's header length,
/// which ROOT's class map positions count from).
pub(super) fn read(bytes: &[u8], key_len: usize) -> Result<Tree, String> {
    let mut r = Reader {
        c: Cursor::new(bytes),
        classes: HashMap::new(),
        key_len,
        depth: 0,
    };
    let tree = r.tree()?;
    Ok(tree)
}

struct Reader<'a> {
    c: Cursor<'a>,
    /// Class names by their position in the record (+ the key length and MAP_OFFSET).
    classes: HashMap<usize, String>,
    key_len: usize,
    /// Pointers being read, one inside another.
    depth: usize,
}

/// What a pointer in an array held.
enum Pointed {
    Null,
    Branch(Branch),
    Leaf(Result<LeafKind, String>),
    /// An object of another class (its name), skipped.
    Other(String),
}

impl Reader<'_> {
    fn end_of(&mut self, h: Header, what: &'static str) -> Result<(), String> {
        match h.end {
            Some(end) => Ok(self.c.seek(end, what)?),
            None => Err(format!("{what} written without a byte count")),
        }
    }

    fn tree(&mut self) -> Result<Tree, String> {
        let c = &mut self.c;
        let h = c.header("the TTree")?;
        if h.version != 20 {
            return Err(format!(
                "TTree version {} (this reader reads version 20, written by ROOT 6.12 and later)",
                h.version
            ));
        }
        let (name, _) = named(c)?;
        for what in ["TAttLine", "TAttFill", "TAttMarker"] {
            if skip(c, what)?.is_none() {
                return Err(format!("{what} written without a byte count"));
            }
        }
        let entries = c.i64("fEntries")?;
        for what in ["fTotBytes", "fZipBytes", "fSavedBytes", "fFlushedBytes"] {
            c.i64(what)?;
        }
        c.f64("fWeight")?;
        for what in [
            "fTimerInterval",
            "fScanField",
            "fUpdate",
            "fDefaultEntryOffsetLen",
        ] {
            c.i32(what)?;
        }
        let n_ranges = c.i32("fNClusterRange")?;
        for what in [
            "fMaxEntries",
            "fMaxEntryLoop",
            "fMaxVirtualSize",
            "fAutoSave",
            "fAutoFlush",
            "fEstimate",
        ] {
            c.i64(what)?;
        }
        for what in ["fClusterRangeEnd", "fClusterSize"] {
            c.u8(what)?;
            c.counted(n_ranges, 8, what)?;
        }
        if skip(c, "fIOFeatures")?.is_none() {
            return Err("fIOFeatures written without a byte count".into());
        }
        let entries = u64::try_from(entries).map_err(|_| format!("{entries} entries"))?;
        let mut branches = Vec::new();
        for p in self.array("fBranches")? {
            match p {
                Pointed::Branch(b) => branches.push(b),
                Pointed::Other(class) => branches.push(Branch {
                    name: format!("(a {class})"),
                    kind: Err(format!("a {class}, not a flat branch")),
                    baskets: Vec::new(),
                }),
                Pointed::Null | Pointed::Leaf(_) => {}
            }
        }
        // (fLeaves, aliases, indices, friends and user information are not needed.)
        for b in &mut branches {
            if b.kind.is_ok() {
                check_baskets(b, entries)?;
            }
        }
        Ok(Tree {
            name,
            entries,
            branches,
        })
    }

    /// A TObjArray: its objects, each read by class (branches, leaves) or skipped.
    fn array(&mut self, what: &'static str) -> Result<Vec<Pointed>, String> {
        let h = self.c.header(what)?;
        object(&mut self.c)?;
        self.c.string(what)?;
        let n = self.c.i32(what)?;
        self.c.i32(what)?;
        // Each object takes at least 4 bytes: a count that cannot fit is corrupt.
        if n < 0 || n as usize > self.c.left() / 4 {
            return Err(format!("{what}: {n} objects"));
        }
        let objects = (0..n)
            .map(|_| self.pointer(what))
            .collect::<Result<Vec<_>, _>>()?;
        self.end_of(h, what)?;
        Ok(objects)
    }

    /// An object written through a pointer.
    fn pointer(&mut self, what: &'static str) -> Result<Pointed, String> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(format!(
                "{what}: objects nested more than {MAX_NESTING} deep"
            ));
        }
        let read = self.pointed(what);
        self.depth -= 1;
        read
    }

    fn pointed(&mut self, what: &'static str) -> Result<Pointed, String> {
        let first = self.c.u32(what)?;
        let (tag, end) = if first & BYTE_COUNT != 0 && first != NEW_CLASS {
            let start = self.c.pos();
            let count = (first & !BYTE_COUNT) as usize;
            (self.c.u32(what)?, Some(start + count))
        } else {
            (first, None)
        };
        let class = if tag == 0 {
            return Ok(Pointed::Null);
        } else if tag == NEW_CLASS {
            let at = self.c.pos() - 4;
            let class = self.c.cstring(what)?;
            self.classes
                .insert(at + self.key_len + MAP_OFFSET, class.clone());
            class
        } else if tag & CLASS_REF != 0 {
            let at = (tag & !CLASS_REF) as usize;
            self.classes
                .get(&at)
                .cloned()
                .ok_or_else(|| format!("{what}: a reference to an unknown class ({at})"))?
        } else {
            // A reference to an object read before (the tree's list of its branches' leaves).
            return Ok(Pointed::Other("reference".into()));
        };
        let pointed = match class.as_str() {
            "TBranch" => Pointed::Branch(self.branch()?),
            // Branches of classes and std::vectors: named by their TBranch part, not read.
            "TBranchElement" | "TBranchObject" => {
                let h = self.c.header("a branch of objects")?;
                let mut b = self.branch()?;
                self.end_of(h, "a branch of objects")?;
                b.kind = Err(format!(
                    "a {class} (objects, a std::vector or a class), not a flat branch of numbers"
                ));
                b.baskets.clear();
                Pointed::Branch(b)
            }
            c if c.starts_with("TLeaf") => Pointed::Leaf(self.leaf(c)?),
            _ => Pointed::Other(class.clone()),
        };
        match end {
            Some(end) => self.c.seek(end, what)?,
            None if matches!(pointed, Pointed::Other(_)) => {
                return Err(format!("{what}: a {class} written without a byte count"))
            }
            None => {}
        }
        Ok(pointed)
    }

    fn branch(&mut self) -> Result<Branch, String> {
        let h = self.c.header("a TBranch")?;
        if h.version != 13 {
            return Err(format!(
                "TBranch version {} (this reader reads version 13, ROOT 6.12 and later)",
                h.version
            ));
        }
        let c = &mut self.c;
        let (name, _) = named(c)?;
        if skip(c, "TAttFill")?.is_none() {
            return Err("TAttFill written without a byte count".into());
        }
        for what in ["fCompress", "fBasketSize", "fEntryOffsetLen"] {
            c.i32(what)?;
        }
        let written = c.i32("fWriteBasket")?;
        c.i64("fEntryNumber")?;
        if skip(c, "fIOFeatures")?.is_none() {
            return Err("fIOFeatures written without a byte count".into());
        }
        c.i32("fOffset")?;
        let max_baskets = c.i32("fMaxBaskets")?;
        c.i32("fSplitLevel")?;
        let entries = c.i64("fEntries")?;
        for what in ["fFirstEntry", "fTotBytes", "fZipBytes"] {
            c.i64(what)?;
        }
        let sub = self.array("fBranches")?;
        let leaves = self.array("fLeaves")?;
        let h_baskets = self.c.header("fBaskets")?;
        self.end_of(h_baskets, "fBaskets")?;
        let c = &mut self.c;
        // Each array sized by fMaxBaskets follows a byte saying whether it was written at all.
        let mut sized = |size: usize, what: &'static str| -> Result<&[u8], String> {
            Ok(match c.u8(what)? {
                0 => &[],
                _ => c.counted(max_baskets, size, what)?,
            })
        };
        let bytes = sized(4, "fBasketBytes")?;
        let first = sized(8, "fBasketEntry")?;
        let seek = sized(8, "fBasketSeek")?;
        let listed = bytes.len() / 4;
        if first.len() / 8 != listed || seek.len() / 8 != listed {
            return Err(format!(
                "branch \"{name}\": its basket tables differ in length"
            ));
        }
        self.end_of(h, "a TBranch")?;
        let kind = if sub.iter().any(|p| !matches!(p, Pointed::Null)) {
            Err("a branch with sub-branches (a class split into members), not a flat branch".into())
        } else {
            let mut kinds = leaves.into_iter().filter_map(|p| match p {
                Pointed::Leaf(k) => Some(k),
                _ => None,
            });
            match (kinds.next(), kinds.next()) {
                (Some(k), None) => k,
                (None, _) => Err("no leaf".into()),
                (Some(_), Some(_)) => {
                    Err("several leaves (a leaf list such as \"a/D:b/F\"), not one value".into())
                }
            }
        };
        let n = usize::try_from(written).unwrap_or(0).min(listed);
        let i32_at =
            |b: &[u8], i: usize| i32::from_be_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
        let i64_at =
            |b: &[u8], i: usize| i64::from_be_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
        let mut baskets = Vec::with_capacity(n);
        for i in 0..n {
            let start = i64_at(first, i);
            // ROOT keeps the entry after the last written basket in the table: where a basket
            // was never written to file, its entries are not claimed by the one before it.
            let stop = if i + 1 < listed {
                i64_at(first, i + 1)
            } else {
                entries
            };
            let (Ok(start), Ok(stop), Ok(at), Ok(len)) = (
                u64::try_from(start),
                u64::try_from(stop),
                u64::try_from(i64_at(seek, i)),
                usize::try_from(i32_at(bytes, i)),
            ) else {
                return Err(format!(
                    "branch \"{name}\": basket {i} has negative entries or position"
                ));
            };
            if stop < start {
                return Err(format!(
                    "branch \"{name}\": basket {i} ends before it starts"
                ));
            }
            baskets.push(BasketRef {
                seek: at,
                bytes: len,
                first: start,
                entries: stop - start,
            });
        }
        Ok(Branch {
            name,
            kind,
            baskets,
        })
    }

    /// A leaf: its value type, or why the branch is not flat.
    fn leaf(&mut self, class: &str) -> Result<Result<LeafKind, String>, String> {
        let h = self.c.header("a leaf")?;
        let h_leaf = self.c.header("TLeaf")?;
        let (name, _) = named(&mut self.c)?;
        let len = self.c.i32("fLen")?;
        self.c.i32("fLenType")?;
        self.c.i32("fOffset")?;
        self.c.u8("fIsRange")?;
        let unsigned = self.c.u8("fIsUnsigned")? != 0;
        let count = self.pointer("fLeafCount")?;
        self.end_of(h_leaf, "TLeaf")?;
        self.end_of(h, "a leaf")?;
        Ok(if !matches!(count, Pointed::Null) || len != 1 {
            Err(format!(
                "leaf \"{name}\" holds an array, not one value an entry"
            ))
        } else {
            LeafKind::of(class, unsigned).ok_or_else(|| {
                format!("leaf \"{name}\" is a {class}, not a number this reader reads (double, float, integers, bool)")
            })
        })
    }
}

/// The baskets of a flat branch cover its entries in order and the tree's.
fn check_baskets(b: &Branch, entries: u64) -> Result<(), String> {
    let mut next = 0;
    for (i, k) in b.baskets.iter().enumerate() {
        if k.first != next {
            return Err(format!(
                "branch \"{}\": basket {i} starts at entry {} where {next} was expected",
                b.name, k.first
            ));
        }
        if k.seek == 0 {
            return Err(format!(
                "branch \"{}\": basket {i} is kept inside the tree's own record (a tree saved without flushing its baskets), which this reader does not read",
                b.name
            ));
        }
        next += k.entries;
    }
    if next != entries {
        return Err(format!(
            "branch \"{}\": its baskets on file hold {next} of the tree's {entries} entries (the rest kept inside the tree's own record, which this reader does not read)",
            b.name
        ));
    }
    Ok(())
}

/// The values of one basket (the key's bytes as stored, `raw`, already inflated into `payload`
/// by the caller) appended to `out` as f64.
pub(super) fn basket_values(
    kind: LeafKind,
    payload: &[u8],
    entries: u64,
    out: &mut Vec<f64>,
) -> Result<(), String> {
    let size = kind.size();
    let need = usize::try_from(entries)
        .ok()
        .and_then(|n| n.checked_mul(size))
        .ok_or("a basket's entry count overflows")?;
    let data = payload.get(..need).ok_or_else(|| {
        format!(
            "a basket holds {} bytes for {entries} entries of {size} bytes",
            payload.len()
        )
    })?;
    out.extend(data.chunks_exact(size).map(|b| kind.value(b)));
    Ok(())
}

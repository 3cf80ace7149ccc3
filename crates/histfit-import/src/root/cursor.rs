//! A bounds-checked big-endian reader over one record of a ROOT file (ROOT writes every number
//! big-endian). Every read that would run past the record's end is an error, never a panic, so a
//! truncated or hostile file cannot index out of bounds.

/// The record ended before a read: carries what was being read, for the caller's message.
#[derive(Debug, Clone, PartialEq)]
pub struct Truncated(pub &'static str);

pub type Read<T> = Result<T, Truncated>;

/// Where a versioned object ends: ROOT writes a byte count before each streamed object (with the
/// flag `0x40000000`), which lets a reader skip what it does not need.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub version: i16,
    /// Position just past the object, when the writer recorded a byte count.
    pub end: Option<usize>,
}

const BYTE_COUNT_FLAG: u32 = 0x4000_0000;

pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    pub fn at(bytes: &'a [u8], pos: usize) -> Self {
        Cursor { bytes, pos }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left after the position.
    pub fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// A NUL-terminated string (class names of object pointers).
    pub fn cstring(&mut self, what: &'static str) -> Read<String> {
        let rest = self.bytes.get(self.pos..).ok_or(Truncated(what))?;
        let len = rest.iter().position(|&b| b == 0).ok_or(Truncated(what))?;
        let s = String::from_utf8_lossy(&rest[..len]).into_owned();
        self.pos += len + 1;
        Ok(s)
    }

    pub fn take(&mut self, n: usize, what: &'static str) -> Read<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(Truncated(what))?;
        let slice = self.bytes.get(self.pos..end).ok_or(Truncated(what))?;
        self.pos = end;
        Ok(slice)
    }

    pub fn seek(&mut self, pos: usize, what: &'static str) -> Read<()> {
        if pos > self.bytes.len() {
            return Err(Truncated(what));
        }
        self.pos = pos;
        Ok(())
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Read<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    pub fn u8(&mut self, what: &'static str) -> Read<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn i16(&mut self, what: &'static str) -> Read<i16> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }
    pub fn u16(&mut self, what: &'static str) -> Read<u16> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }
    pub fn i32(&mut self, what: &'static str) -> Read<i32> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }
    pub fn u32(&mut self, what: &'static str) -> Read<u32> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }
    pub fn i64(&mut self, what: &'static str) -> Read<i64> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }
    pub fn f64(&mut self, what: &'static str) -> Read<f64> {
        Ok(f64::from_be_bytes(self.array(what)?))
    }

    /// A seek pointer: 32 bits in small files and records, 64 bits where the writer said so.
    pub fn seek_pointer(&mut self, wide: bool, what: &'static str) -> Read<u64> {
        if wide {
            Ok(self.i64(what)?.max(0) as u64)
        } else {
            Ok(self.i32(what)?.max(0) as u64)
        }
    }

    /// ROOT's TString: one length byte, or 255 followed by a 32-bit length.
    pub fn string(&mut self, what: &'static str) -> Read<String> {
        let short = self.u8(what)?;
        let len = if short == 255 {
            self.u32(what)? as usize
        } else {
            short as usize
        };
        Ok(String::from_utf8_lossy(self.take(len, what)?).into_owned())
    }

    /// The version (and byte count, if written) that starts a streamed object.
    pub fn header(&mut self, what: &'static str) -> Read<Header> {
        let start = self.pos;
        let first = self.u32(what)?;
        if first & BYTE_COUNT_FLAG != 0 {
            let count = (first & !BYTE_COUNT_FLAG) as usize;
            let end = start + 4 + count;
            if end > self.bytes.len() {
                return Err(Truncated(what));
            }
            let version = self.i16(what)?;
            Ok(Header {
                version,
                end: Some(end),
            })
        } else {
            self.pos = start;
            Ok(Header {
                version: self.i16(what)?,
                end: None,
            })
        }
    }

    /// `n` values of `size` bytes each, checked against what is left before anything is allocated.
    pub fn counted(&mut self, n: i32, size: usize, what: &'static str) -> Read<&'a [u8]> {
        let n = usize::try_from(n).map_err(|_| Truncated(what))?;
        self.take(n.checked_mul(size).ok_or(Truncated(what))?, what)
    }

    /// A TArrayD (or a TArrayF, TArrayI, …): a 32-bit length and that many values.
    pub fn array_f64(&mut self, what: &'static str) -> Read<Vec<f64>> {
        let n = self.i32(what)?;
        let raw = self.counted(n, 8, what)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| f64::from_be_bytes(c.try_into().expect("chunks of 8")))
            .collect())
    }
}

/// TObject's bits: the object is referenced (a process id follows).
const IS_REFERENCED: u32 = 1 << 4;
/// A version whose top bits are set is the upper half of a byte count.
const BYTE_COUNT_IN_VERSION: i16 = 0x4000;

/// Skips a versioned part by its byte count; `None` when the writer recorded none.
pub fn skip(c: &mut Cursor, what: &'static str) -> Result<Option<Header>, Truncated> {
    let header = c.header(what)?;
    match header.end {
        Some(end) => {
            c.seek(end, what)?;
            Ok(Some(header))
        }
        None => Ok(None),
    }
}

/// TNamed: the TObject part (version, unique id, bits, a process id if referenced), name, title.
pub fn named(c: &mut Cursor) -> Result<(String, String), Truncated> {
    let header = c.header("TNamed")?;
    object(c)?;
    let name = c.string("the object's name")?;
    let title = c.string("the object's title")?;
    if let Some(end) = header.end {
        c.seek(end, "TNamed")?;
    }
    Ok((name, title))
}

/// TObject's own part (no byte count): version, unique id, bits, a process id if referenced.
pub fn object(c: &mut Cursor) -> Result<(), Truncated> {
    let version = c.i16("TObject's version")?;
    if version & BYTE_COUNT_IN_VERSION != 0 {
        // That was the upper half of a byte count: the version follows it.
        c.take(4, "TObject's version")?;
    }
    c.u32("TObject's unique id")?;
    let bits = c.u32("TObject's bits")?;
    if bits & IS_REFERENCED != 0 {
        c.u16("TObject's process id")?;
    }
    Ok(())
}

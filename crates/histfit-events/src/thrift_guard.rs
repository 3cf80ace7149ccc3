//! A bound on the work of the parquet crate's Thrift decoding, checked before it runs.
//!
//! A Parquet file's footer and page headers are Thrift structures (compact protocol). The
//! parquet crate (60.1) skips fields it does not know by walking them, one turn of a loop per
//! element of a list or map, and some turns read no byte: a boolean element (booleans take none
//! as struct fields, one each as elements), and — reading a page header from its stream — a
//! double, string or UUID skipped past the end (no error there). A 5-byte list header claiming
//! 2³¹ such elements holds it for seconds, nested ones for minutes — the fuzz target's
//! timeouts. [`check_footer`] and [`check_page_header`] make the same walk over the same bytes, counting every element a
//! collection claims as it opens, and refuses a structure that would take more steps than a
//! well-formed one of its length could: a few per byte. Anything else it does not judge — a structure cut short, an unknown type — is left to
//! the crate, which reports it.

/// Steps allowed per byte of the structure, and in all beyond that.
const STEPS_PER_BYTE: u64 = 4;
const STEPS_FREE: u64 = 4096;

/// Nesting the crate follows (its skip depth).
const DEPTH: u32 = 64;

/// Where the walk stopped: the structure's end (its length in bytes) and, for a top-level
/// struct, its i32 field 3 where it has one (a page header's compressed size).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Walked {
    pub len: usize,
    pub field3: Option<i32>,
}

/// The outcome of a walk: a structure that would cost the decoder more than its length
/// allows is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Walked to its end.
    Whole(Walked),
    /// Malformed before its end (cut short, an unknown type): the crate says what.
    Unjudged,
    /// The walk needs more steps than its length allows.
    TooCostly,
}

struct Walk<'a> {
    buf: &'a [u8],
    pos: usize,
    steps: u64,
    budget: u64,
}

/// A stop the walk makes: malformed, or over budget.
enum Stop {
    Malformed,
    Budget,
}

type Step<T> = Result<T, Stop>;

impl Walk<'_> {
    fn byte(&mut self) -> Step<u8> {
        let b = *self.buf.get(self.pos).ok_or(Stop::Malformed)?;
        self.pos += 1;
        Ok(b)
    }
    fn varint(&mut self) -> Step<u64> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Stop::Malformed)
    }
    /// Skips n bytes; past the end it stops there without an error, as the crate's skip of a
    /// page header's stream does (the next read fails).
    fn skip(&mut self, n: u64) -> Step<()> {
        let end = (self.pos as u64).saturating_add(n);
        self.pos = end.min(self.buf.len() as u64) as usize;
        Ok(())
    }
    fn charge(&mut self, n: u64) -> Step<()> {
        self.steps = self.steps.saturating_add(n);
        if self.steps > self.budget {
            Err(Stop::Budget)
        } else {
            Ok(())
        }
    }

    /// One value of compact type `t`, as the crate's skip reads it.
    fn value(&mut self, t: u8, depth: u32) -> Step<()> {
        self.charge(1)?;
        if depth == 0 {
            return Err(Stop::Malformed);
        }
        match t {
            // In a struct a boolean is its field header; the crate skips list elements the same.
            1 | 2 => Ok(()),
            3 => self.skip(1),
            4..=6 => self.varint().map(|_| ()),
            7 => self.skip(8),
            8 => {
                let n = self.varint()?;
                self.skip(n)
            }
            9 | 10 => {
                let h = self.byte()?;
                if h == 0 {
                    return Ok(());
                }
                let et = h & 0x0f;
                let size = match h >> 4 {
                    15 => self.varint()?,
                    s => u64::from(s),
                };
                self.elements(size, &[et], depth)
            }
            11 => {
                let size = self.varint()?;
                if size == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                self.elements(size, &[kv >> 4, kv & 0x0f], depth)
            }
            12 => self.fields(depth),
            13 => self.skip(16),
            _ => Err(Stop::Malformed),
        }
    }

    /// `size` elements of the types `ts` each.
    fn elements(&mut self, size: u64, ts: &[u8], depth: u32) -> Step<()> {
        if size > i32::MAX as u64 {
            return Err(Stop::Malformed);
        }
        // Every element is a turn of the crate's loop whether or not it reads a byte: booleans
        // read none, and reading from a page's stream, a double, a string or a UUID skipped
        // past the end reads none without an error either.
        self.charge(size * ts.len() as u64)?;
        if ts.iter().all(|&t| t == 1 || t == 2) {
            return Ok(());
        }
        for _ in 0..size {
            for &t in ts {
                self.value(t, depth - 1)?;
            }
        }
        Ok(())
    }

    /// A struct's fields up to its stop, each walked by its header.
    fn fields(&mut self, depth: u32) -> Step<()> {
        let mut last = 0;
        loop {
            let (id, t) = self.field(last)?;
            if t == 0 {
                return Ok(());
            }
            last = id;
            self.value(t, depth - 1)?;
        }
    }
}

impl<'a> Walk<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Walk {
            buf,
            pos: 0,
            steps: 0,
            budget: STEPS_PER_BYTE
                .saturating_mul(buf.len() as u64)
                .saturating_add(STEPS_FREE),
        }
    }

    /// A zigzag varint.
    fn zigzag(&mut self) -> Step<i64> {
        let z = self.varint()?;
        Ok(((z >> 1) as i64) ^ -((z & 1) as i64))
    }

    /// A field header after field `last`: its id and type (type 0 at the stop). Ids are i16,
    /// as the crate keeps them: one past its range is malformed.
    fn field(&mut self, last: i64) -> Step<(i64, u8)> {
        let h = self.byte()?;
        let t = h & 0x0f;
        if t == 0 {
            return Ok((last, 0));
        }
        let id = match h >> 4 {
            0 => self.zigzag()?,
            d => last + i64::from(d),
        };
        if i16::try_from(id).is_err() {
            return Err(Stop::Malformed);
        }
        Ok((id, t))
    }
}

/// The verdict on a walk that ended with `result` at byte `len`.
fn verdict(result: Step<Option<i32>>, len: usize) -> Verdict {
    match result {
        Ok(field3) => Verdict::Whole(Walked { len, field3 }),
        Err(Stop::Malformed) => Verdict::Unjudged,
        Err(Stop::Budget) => Verdict::TooCostly,
    }
}

/// The structures of a page header, for [`check_page_header`].
#[derive(Clone, Copy)]
enum Shape {
    PageHeader,
    DataPage,
    IndexPage,
    DictionaryPage,
    DataPageV2,
    Statistics,
}

/// What a page header's known field holds (compact types: 1/2 boolean, 5 i32, 6 i64, 8 binary,
/// 12 struct), as Parquet's format defines it; None for an id the crate does not know.
fn expected(shape: Shape, id: i64) -> Option<(u8, Option<Shape>)> {
    use Shape::*;
    let i32_ = Some((5, None));
    let bool_ = Some((1, None));
    let nested = |s| Some((12, Some(s)));
    match (shape, id) {
        (PageHeader, 1..=4) => i32_,
        (PageHeader, 5) => nested(DataPage),
        (PageHeader, 6) => nested(IndexPage),
        (PageHeader, 7) => nested(DictionaryPage),
        (PageHeader, 8) => nested(DataPageV2),
        (DataPage, 1..=4) => i32_,
        (DataPage, 5) => nested(Statistics),
        (DictionaryPage, 1 | 2) => i32_,
        (DictionaryPage, 3) => bool_,
        (DataPageV2, 1..=6) => i32_,
        (DataPageV2, 7) => bool_,
        (DataPageV2, 8) => nested(Statistics),
        (Statistics, 1 | 2 | 5 | 6) => Some((8, None)),
        (Statistics, 3 | 4) => Some((6, None)),
        (Statistics, 7 | 8) => bool_,
        _ => None,
    }
}

impl Walk<'_> {
    /// A struct of `shape`: every known field of the type the format gives it (the crate reads
    /// a known field as its type whatever its header says, so a header that says otherwise
    /// would be read differently from this walk: refused as malformed), the others walked as
    /// their headers say. Field 3 of a page header (its compressed size) is returned.
    fn typed(&mut self, shape: Shape, depth: u32) -> Step<Option<i32>> {
        let mut last = 0;
        let mut field3 = None;
        loop {
            let (id, t) = self.field(last)?;
            if t == 0 {
                return Ok(field3);
            }
            last = id;
            match expected(shape, id) {
                None => self.value(t, depth - 1)?,
                Some((want, nested)) => {
                    let same = t == want || (want == 1 && t == 2);
                    if !same {
                        return Err(Stop::Malformed);
                    }
                    match nested {
                        Some(inner) => {
                            self.charge(1)?;
                            self.typed(inner, depth - 1)?;
                        }
                        None if matches!(shape, Shape::PageHeader) && id == 3 => {
                            self.charge(1)?;
                            field3 = i32::try_from(self.zigzag()?).ok();
                        }
                        None => self.value(t, depth - 1)?,
                    }
                }
            }
        }
    }
}

/// A page header at the start of `buf` (the rest of the file: the crate reads it from a stream
/// that runs on to the end), walked as the crate reads it: [`Verdict::Unjudged`] means
/// malformed — cut short, a type unknown, or a known field of another type than the format's.
pub fn check_page_header(buf: &[u8]) -> Verdict {
    let mut w = Walk::new(buf);
    let result = w.typed(Shape::PageHeader, DEPTH);
    verdict(result, w.pos)
}

/// A file's footer (FileMetaData), each field walked by its header, and its schema's child counts
/// (SchemaElement field 5, `num_children`) held to the number of elements the schema lists: the
/// crate sizes the schema tree's buffers from them (a claim of 2²⁸ children in a 1 kB footer
/// allocated 6.4 GB).
pub fn check_footer(buf: &[u8]) -> Verdict {
    let mut w = Walk::new(buf);
    // The crate reads the schema as a list of SchemaElements, and each one's field 5 as an
    // i32, whatever their headers say: read so here too.
    let schema = |w: &mut Walk| -> Step<bool> {
        let h = w.byte()?;
        let size = match h >> 4 {
            15 => w.varint()?,
            s => u64::from(s),
        };
        w.charge(size)?;
        for _ in 0..size {
            let mut last = 0;
            loop {
                let (id, t) = w.field(last)?;
                if t == 0 {
                    break;
                }
                last = id;
                if id == 5 {
                    let children = w.zigzag()?;
                    if children < 0 || children as u64 > size {
                        return Ok(false);
                    }
                } else {
                    w.value(t, DEPTH - 2)?;
                }
            }
        }
        Ok(true)
    };
    let walk = |w: &mut Walk| -> Step<bool> {
        let mut last = 0;
        loop {
            let (id, t) = w.field(last)?;
            if t == 0 {
                return Ok(true);
            }
            last = id;
            if id == 2 && t == 9 {
                if !schema(w)? {
                    return Ok(false);
                }
            } else {
                w.value(t, DEPTH - 1)?;
            }
        }
    };
    // A schema claiming too many children counts as over budget.
    let result = walk(&mut w).and_then(|ok| if ok { Ok(None) } else { Err(Stop::Budget) });
    verdict(result, w.pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_claiming_billions_of_booleans_is_too_costly() {
        // a page header's unknown field 9: list<bool> of 2^31 − 1 (a 7-byte list header)
        let buf = [0x99, 0xf1, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00];
        assert_eq!(check_page_header(&buf), Verdict::TooCostly);
    }

    #[test]
    fn a_schema_claiming_more_children_than_it_lists_is_refused() {
        // FileMetaData { 1: version 2, 2: schema [ { 4: name "s", 5: num_children 2^27 } ] }
        let buf = [
            0x15, 0x04, 0x19, 0x1c, 0x48, 0x01, b's', 0x15, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00,
            0x00,
        ];
        assert_eq!(check_footer(&buf), Verdict::TooCostly);
        let fine = [
            0x15, 0x04, 0x19, 0x1c, 0x48, 0x01, b's', 0x15, 0x00, 0x00, 0x00,
        ];
        assert!(matches!(check_footer(&fine), Verdict::Whole(_)));
    }

    /// A long-form field id beyond i16 (then a delta after it) is malformed, not an overflow.
    #[test]
    fn field_ids_beyond_i16_are_malformed() {
        let buf = [
            0x05, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00, 0x15, 0x00,
            0x00,
        ];
        assert_eq!(check_page_header(&buf), Verdict::Unjudged);
        assert_eq!(check_footer(&buf), Verdict::Unjudged);
    }

    #[test]
    fn a_list_claiming_billions_of_doubles_past_the_end_is_too_costly() {
        // a page header's unknown field 9: list<double> of 2^31 − 1, nothing after the header
        let buf = [0x99, 0xf7, 0xff, 0xff, 0xff, 0xff, 0x07];
        assert_eq!(check_page_header(&buf), Verdict::TooCostly);
    }

    #[test]
    fn a_page_header_walks_to_its_end_with_its_compressed_size() {
        // PageHeader { 1: type = 0 (i32), 2: uncompressed 100, 3: compressed 96,
        //              5: data_page_header { 1: num_values 12 } }
        let buf = [
            0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0xc0, 0x01, 0x2c, 0x15, 0x18, 0x00, 0x00,
        ];
        assert_eq!(
            check_page_header(&buf),
            Verdict::Whole(Walked {
                len: 13,
                field3: Some(96)
            })
        );
        assert_eq!(check_page_header(&buf[..7]), Verdict::Unjudged);
    }
}

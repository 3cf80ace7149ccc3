//! A bound on the work of the parquet crate's Thrift decoding, checked before it runs.
//!
//! A Parquet file's footer and page headers are Thrift structures (compact protocol). The
//! parquet crate (60.1) skips fields it does not know by walking them, one turn of a loop per
//! element of a list or map, and some turns read no byte: a boolean element (booleans take none
//! as struct fields, one each as elements), and — reading a page header from its stream — a
//! double, string or UUID skipped past the end (no error there). A 5-byte list header claiming
//! 2³¹ such elements holds it for seconds, nested ones for minutes — the fuzz target's
//! timeouts. The crate reads every field it knows by the format's type, whatever the field's
//! header says, and skips the others by their headers: [`check_footer`] and
//! [`check_page_header`] make the same walk over the same bytes, counting every element a
//! collection claims as it opens, and refuse a structure that would take more steps than a
//! well-formed one of its length could (a few per byte), and one malformed where the walk
//! stops (cut short, an unknown type, …) — where the crate would stop with an error too.

/// Steps allowed per byte of the structure, and in all beyond that.
const STEPS_PER_BYTE: u64 = 4;
const STEPS_FREE: u64 = 4096;

/// Nesting the crate follows (its skip depth).
const DEPTH: u32 = 64;

/// The deepest schema tree accepted (the crate builds it recursively).
const SCHEMA_DEPTH: usize = 100;

/// The bytes of the leaves' paths (names, and a string's 32 bytes a level) a footer's byte may
/// make the crate copy, beyond a MiB.
const PATH_BYTES_PER_BYTE: u64 = 64;

/// The steps a column chunk's page headers may take together, for a chunk of `bytes`.
pub fn page_budget(bytes: usize) -> u64 {
    STEPS_PER_BYTE
        .saturating_mul(bytes as u64)
        .saturating_add(STEPS_FREE)
}

/// Where the walk stopped: the structure's end (its length in bytes) and, for a page header,
/// the sizes it claims where it gives them: its body's bytes compressed and uncompressed, and
/// its values (of its data or dictionary page header).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Walked {
    pub len: usize,
    /// The page's type (0 a data page, 1 an index page, 2 a dictionary page, 3 a version-2
    /// data page).
    pub kind: Option<i32>,
    pub compressed: Option<i32>,
    pub uncompressed: Option<i32>,
    /// The fewest values any of its page headers claims (a header may carry several; the
    /// crate reads the one its type names): what bounds the uncompressed size.
    pub values: Option<i32>,
    /// The rows the crate skips the page by: a data page's values, a version-2 page's rows.
    pub rows: Option<i32>,
    /// A version-2 data page's definition and repetition level bytes, which precede its values
    /// uncompressed, and whether the values are compressed (absent: they are).
    pub def_levels: Option<i32>,
    pub rep_levels: Option<i32>,
    pub v2_compressed: Option<bool>,
    /// The steps the walk took (the crate's loop turns).
    pub steps: u64,
}

/// The outcome of a walk: a structure that would cost the decoder more than its length
/// allows is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Walked to its end.
    Whole(Walked),
    /// Malformed at this byte (cut short, an unknown type, …).
    Malformed(usize),
    /// The walk needs more steps than its length allows.
    TooCostly,
}

struct Walk<'a> {
    buf: &'a [u8],
    pos: usize,
    steps: u64,
    budget: u64,
    /// A page header's sizes, as the walk passes them.
    sizes: Walked,
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
    /// A varint as the crate reads it: any number of bytes, bits past 64 wrapped.
    fn varint(&mut self) -> Step<u64> {
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).wrapping_shl(shift);
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift = shift.wrapping_add(7);
        }
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

    /// A struct's fields up to its stop, each walked by its header (the crate's skip reads
    /// every field id from 0: the ids themselves do not matter to it).
    fn fields(&mut self, depth: u32) -> Step<()> {
        loop {
            let (_, t) = self.field(0)?;
            if t == 0 {
                return Ok(());
            }
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
            sizes: Walked::default(),
        }
    }

    /// A zigzag varint.
    fn zigzag(&mut self) -> Step<i64> {
        let z = self.varint()?;
        Ok(((z >> 1) as i64) ^ -((z & 1) as i64))
    }

    /// A field header after field `last`: its id and type (type 0 at the stop), as the crate
    /// reads them: ids are i16, a long-form id is truncated to it, a delta past it is an error.
    fn field(&mut self, last: i16) -> Step<(i16, u8)> {
        let h = self.byte()?;
        let t = h & 0x0f;
        if t == 0 {
            return Ok((last, 0));
        }
        if t > 13 {
            // Not a type: the crate stops here.
            return Err(Stop::Malformed);
        }
        let id = match h >> 4 {
            0 => self.zigzag()? as i16,
            d => last.checked_add(i16::from(d)).ok_or(Stop::Malformed)?,
        };
        Ok((id, t))
    }
}

/// The verdict on a walk `w` that ended with `result`.
fn verdict(result: Step<()>, w: &Walk) -> Verdict {
    match result {
        Ok(()) => Verdict::Whole(Walked {
            len: w.pos,
            steps: w.steps,
            ..w.sizes
        }),
        Err(Stop::Malformed) => Verdict::Malformed(w.pos),
        Err(Stop::Budget) => Verdict::TooCostly,
    }
}

/// A value the crate reads by the format's type, whatever its field header says.
#[derive(Clone, Copy, PartialEq)]
enum Ty {
    Bool,
    Byte,
    I16,
    I32,
    I64,
    Double,
    Binary,
    Struct(Shape),
    Union(Shape),
    List(&'static Ty),
}

impl Ty {
    /// The compact protocol's type code (a boolean's is 1 or 2).
    fn code(self) -> u8 {
        match self {
            Ty::Bool => 1,
            Ty::Byte => 3,
            Ty::I16 => 4,
            Ty::I32 => 5,
            Ty::I64 => 6,
            Ty::Double => 7,
            Ty::Binary => 8,
            Ty::List(_) => 9,
            Ty::Struct(_) | Ty::Union(_) => 12,
        }
    }
}

/// The structures the crate reads by their types: a page header's, and a footer's
/// (FileMetaData and everything in it), as Parquet's format defines them.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    PageHeader,
    DataPage,
    IndexPage,
    DictionaryPage,
    DataPageV2,
    Statistics,
    FileMetaData,
    SchemaElement,
    RowGroup,
    ColumnChunk,
    ColumnMetaData,
    KeyValue,
    SortingColumn,
    PageEncodingStats,
    SizeStatistics,
    GeospatialStatistics,
    BoundingBox,
    DecimalType,
    TimeType,
    IntType,
    VariantType,
    GeometryType,
    GeographyType,
    ColumnIndex,
    OffsetIndex,
    PageLocation,
    // unions
    LogicalType,
    TimeUnit,
    ColumnOrder,
}

/// The type the crate reads field `id` of `shape` as; None for a field it skips by its header.
/// (The crate is built without encryption: those fields are skipped.)
fn known(shape: Shape, id: i16) -> Option<Ty> {
    use Shape::*;
    use Ty::{Binary, Bool, Byte, Double, List, I16, I32, I64};
    let st = |s| Some(Ty::Struct(s));
    match (shape, id) {
        (PageHeader, 1..=4) => Some(I32),
        (PageHeader, 5) => st(DataPage),
        (PageHeader, 6) => st(IndexPage),
        (PageHeader, 7) => st(DictionaryPage),
        (PageHeader, 8) => st(DataPageV2),
        (DataPage, 1..=4) => Some(I32),
        (DataPage, 5) => st(Statistics),
        (DictionaryPage, 1 | 2) => Some(I32),
        (DictionaryPage, 3) => Some(Bool),
        (DataPageV2, 1..=6) => Some(I32),
        (DataPageV2, 7) => Some(Bool),
        (DataPageV2, 8) => st(Statistics),
        (Statistics, 1 | 2 | 5 | 6) => Some(Binary),
        (Statistics, 3 | 4 | 9) => Some(I64),
        (Statistics, 7 | 8) => Some(Bool),
        (FileMetaData, 1) => Some(I32),
        (FileMetaData, 2) => Some(List(&Ty::Struct(SchemaElement))),
        (FileMetaData, 3) => Some(I64),
        (FileMetaData, 4) => Some(List(&Ty::Struct(RowGroup))),
        (FileMetaData, 5) => Some(List(&Ty::Struct(KeyValue))),
        (FileMetaData, 6) => Some(Binary),
        (FileMetaData, 7) => Some(List(&Ty::Union(ColumnOrder))),
        (SchemaElement, 1..=3 | 5..=9) => Some(I32),
        (SchemaElement, 4) => Some(Binary),
        (SchemaElement, 10) => Some(Ty::Union(LogicalType)),
        (RowGroup, 1) => Some(List(&Ty::Struct(ColumnChunk))),
        (RowGroup, 2 | 3 | 5) => Some(I64),
        (RowGroup, 4) => Some(List(&Ty::Struct(SortingColumn))),
        (RowGroup, 7) => Some(I16),
        (ColumnChunk, 1) => Some(Binary),
        (ColumnChunk, 2 | 4 | 6) => Some(I64),
        (ColumnChunk, 3) => st(ColumnMetaData),
        (ColumnChunk, 5 | 7) => Some(I32),
        (ColumnMetaData, 1 | 4 | 15) => Some(I32),
        (ColumnMetaData, 2) => Some(List(&I32)),
        (ColumnMetaData, 5..=7 | 9..=11 | 14) => Some(I64),
        (ColumnMetaData, 12) => st(Statistics),
        (ColumnMetaData, 13) => Some(List(&Ty::Struct(PageEncodingStats))),
        (ColumnMetaData, 16) => st(SizeStatistics),
        (ColumnMetaData, 17) => st(GeospatialStatistics),
        (KeyValue, 1 | 2) => Some(Binary),
        (SortingColumn, 1) => Some(I32),
        (SortingColumn, 2 | 3) => Some(Bool),
        (PageEncodingStats, 1..=3) => Some(I32),
        (SizeStatistics, 1) => Some(I64),
        (SizeStatistics, 2 | 3) => Some(List(&I64)),
        (GeospatialStatistics, 1) => st(BoundingBox),
        (GeospatialStatistics, 2) => Some(List(&I32)),
        (BoundingBox, 1..=8) => Some(Double),
        (DecimalType, 1 | 2) => Some(I32),
        (TimeType, 1) => Some(Bool),
        (TimeType, 2) => Some(Ty::Union(TimeUnit)),
        (IntType, 1) => Some(Byte),
        (IntType, 2) => Some(Bool),
        (VariantType, 1) => Some(Byte),
        (GeometryType, 1) => Some(Binary),
        (GeographyType, 1) => Some(Binary),
        (GeographyType, 2) => Some(I32),
        (ColumnIndex, 1) => Some(List(&Bool)),
        (ColumnIndex, 2 | 3) => Some(List(&Binary)),
        (ColumnIndex, 4) => Some(I32),
        (ColumnIndex, 5..=8) => Some(List(&I64)),
        (OffsetIndex, 1) => Some(List(&Ty::Struct(PageLocation))),
        (OffsetIndex, 2) => Some(List(&I64)),
        (PageLocation, 1 | 3) => Some(I64),
        (PageLocation, 2) => Some(I32),
        _ => None,
    }
}

/// A union's variant `id`: Some(None) for an empty struct, Some(Some(shape)) for a struct, None
/// for an id it does not have.
fn variant(union: Shape, id: i16) -> Option<Option<Shape>> {
    use Shape::*;
    match (union, id) {
        (LogicalType, 1..=4 | 6 | 11..=15 | 19) => Some(None),
        (LogicalType, 5) => Some(Some(DecimalType)),
        (LogicalType, 7 | 8) => Some(Some(TimeType)),
        (LogicalType, 10) => Some(Some(IntType)),
        (LogicalType, 16) => Some(Some(VariantType)),
        (LogicalType, 17) => Some(Some(GeometryType)),
        (LogicalType, 18) => Some(Some(GeographyType)),
        (TimeUnit | ColumnOrder, 1..=3) => Some(None),
        _ => None,
    }
}

/// How a walk treats a known field whose header gives another type than the format's.
#[derive(Clone, Copy, PartialEq)]
enum Headers {
    /// Read by the format's type, as the crate reads it.
    Ignored,
    /// Refused as malformed (a page header: what no writer makes).
    Checked,
}

impl Walk<'_> {
    /// A value of the format's type `ty`, as the crate reads it.
    fn typed(&mut self, ty: Ty, headers: Headers, depth: u32) -> Step<()> {
        self.charge(1)?;
        if depth == 0 {
            return Err(Stop::Malformed);
        }
        match ty {
            // A struct field's boolean is its header (a list's elements are read below).
            Ty::Bool => Ok(()),
            Ty::Byte => self.byte().map(|_| ()),
            Ty::I16 | Ty::I32 | Ty::I64 => self.varint().map(|_| ()),
            Ty::Double => self.bytes(8),
            Ty::Binary => {
                let n = self.varint()?;
                self.bytes(n)
            }
            Ty::Struct(shape) => self.typed_struct(shape, headers, depth),
            Ty::Union(shape) => self.union(shape, headers, depth),
            Ty::List(elem) => {
                // An empty list may be written as one zero byte: the crate takes its elements
                // as bytes, and refuses it where it expects others.
                let h = self.byte()?;
                let (et, size) = match h {
                    0 => (3, 0),
                    h if h >> 4 == 15 => (h & 0x0f, self.varint()?),
                    h => (h & 0x0f, u64::from(h >> 4)),
                };
                let same = et == elem.code() || (*elem == Ty::Bool && et == 2);
                if !same || size > i32::MAX as u64 {
                    return Err(Stop::Malformed);
                }
                for _ in 0..size {
                    if *elem == Ty::Bool {
                        // A boolean element is a byte of its own.
                        self.charge(1)?;
                        self.byte()?;
                    } else {
                        self.typed(*elem, headers, depth - 1)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// A struct of `shape`: its known fields read by the format's types, the others skipped by
    /// their headers (the crate's skip starts at its full depth). A page header's sizes are kept
    /// ([`Walked`]).
    fn typed_struct(&mut self, shape: Shape, headers: Headers, depth: u32) -> Step<()> {
        // A page header given twice replaces the first whole, as the crate reads it.
        match shape {
            Shape::DataPageV2 => {
                let z = &mut self.sizes;
                (z.rows, z.def_levels, z.rep_levels, z.v2_compressed) = (None, None, None, None);
            }
            Shape::DataPage => self.sizes.rows = None,
            _ => {}
        }
        let mut last = 0;
        loop {
            let (id, t) = self.field(last)?;
            if t == 0 {
                return Ok(());
            }
            last = id;
            match known(shape, id) {
                None => self.value(t, DEPTH)?,
                // The schema, read element by element for its tree.
                Some(_) if (shape, id) == (Shape::FileMetaData, 2) => self.schema()?,
                Some(ty) => {
                    let same = t == ty.code() || (ty == Ty::Bool && t == 2);
                    if ty == Ty::Bool && !same {
                        // The crate takes a boolean from its header: any other is an error.
                        return Err(Stop::Malformed);
                    }
                    if headers == Headers::Checked && !same {
                        return Err(Stop::Malformed);
                    }
                    use Shape::{DataPage, DataPageV2, DictionaryPage, PageHeader};
                    // A repeated field's last value is the one the crate keeps.
                    if (shape, id) == (DataPageV2, 7) {
                        self.sizes.v2_compressed = Some(t == 1);
                    }
                    let size = matches!(
                        (shape, id),
                        (PageHeader, 1..=3)
                            | (DataPage | DictionaryPage | DataPageV2, 1)
                            | (DataPageV2, 3 | 5 | 6)
                    );
                    match size {
                        true => {
                            // An i32 as the crate reads it: the varint's low 32 bits.
                            self.charge(1)?;
                            let v = Some(self.zigzag()? as i32);
                            let z = &mut self.sizes;
                            match (shape, id) {
                                (PageHeader, 1) => z.kind = v,
                                (PageHeader, 2) => z.uncompressed = v,
                                (PageHeader, 3) => z.compressed = v,
                                (DataPageV2, 3) => z.rows = v,
                                (DataPageV2, 5) => z.def_levels = v,
                                (DataPageV2, 6) => z.rep_levels = v,
                                _ => {
                                    z.values = z.values.min(v).or(v);
                                    if shape == DataPage {
                                        z.rows = v;
                                    }
                                }
                            }
                        }
                        false => self.typed(ty, headers, depth - 1)?,
                    }
                }
            }
        }
    }

    /// A union: one field, then the struct's stop.
    fn union(&mut self, shape: Shape, headers: Headers, depth: u32) -> Step<()> {
        let (id, t) = self.field(0)?;
        match (t, variant(shape, id)) {
            (0, _) => return Err(Stop::Malformed),
            // An empty struct: its stop byte.
            (_, Some(None)) => {
                if self.byte()? != 0 {
                    return Err(Stop::Malformed);
                }
            }
            (_, Some(Some(inner))) => {
                self.typed_struct(inner, headers, depth - 1)?;
            }
            // Logical types and column orders the crate does not know are skipped; a time
            // unit's are an error.
            (_, None) if shape == Shape::TimeUnit => return Err(Stop::Malformed),
            (_, None) => self.value(t, DEPTH)?,
        }
        match self.field(id)? {
            (_, 0) => Ok(()),
            _ => Err(Stop::Malformed),
        }
    }

    /// `n` bytes that must be there (the footer is read from a slice).
    fn bytes(&mut self, n: u64) -> Step<()> {
        if (self.buf.len() - self.pos) as u64 >= n {
            self.pos += n as usize;
            Ok(())
        } else {
            Err(Stop::Malformed)
        }
    }
}

/// A page header at the start of `buf` (the rest of the file: the crate reads it from a stream
/// that runs on to the end), walked as the crate reads it: [`Verdict::Malformed`] means
/// malformed — cut short, a type unknown, or a known field of another type than the format's.
///
/// `budget`: the steps left to the column chunk's headers, all of them together (a few per
/// byte of the chunk): the stream runs on to the file's end, so a budget from its length would
/// let one small header near the start of a large file claim millions of elements.
pub fn check_page_header(buf: &[u8], budget: u64) -> Verdict {
    let mut w = Walk::new(buf);
    w.budget = budget;
    let result = w.typed_struct(Shape::PageHeader, Headers::Checked, DEPTH);
    verdict(result, &w)
}

/// A file's footer (FileMetaData), walked as the crate reads it: every known field of every
/// structure in it by the format's type, whatever its header says (as the crate reads them),
/// the others skipped by their headers; and its schema's child counts (SchemaElement field 5,
/// `num_children`) held to the number of elements the schema lists: the crate sizes the schema
/// tree's buffers from them (a claim of 2²⁸ children in a 1 kB footer allocated 6.4 GB).
/// [`Verdict::Malformed`] means the crate stops there with an error (or reads the bytes
/// otherwise than this walk does: refused either way).
pub fn check_footer(buf: &[u8]) -> Verdict {
    let mut w = Walk::new(buf);
    let result = w.typed_struct(Shape::FileMetaData, Headers::Ignored, DEPTH);
    verdict(result, &w)
}

/// A column chunk's page index — its ColumnIndex (`offset: false`) or OffsetIndex — walked
/// as the crate decodes it, from a slice of exactly its bytes.
pub fn check_page_index(buf: &[u8], offset: bool) -> Verdict {
    let mut w = Walk::new(buf);
    let shape = if offset {
        Shape::OffsetIndex
    } else {
        Shape::ColumnIndex
    };
    let result = w.typed_struct(shape, Headers::Ignored, DEPTH);
    verdict(result, &w)
}

impl Walk<'_> {
    /// The schema: a list of SchemaElements, the depth-first flattening of a tree whose groups
    /// say their `num_children`. The crate builds that tree recursively and gives every leaf a
    /// copy of its path, its ancestors' names (the root's aside) and its own: each child count is
    /// held to the list's length (the crate sizes buffers by it), the tree's depth to
    /// [`SCHEMA_DEPTH`] (a chain of 10⁵ one-child groups would overflow the stack, an abort
    /// nothing catches), and the paths' bytes summed to [`PATH_BYTES_PER_BYTE`] a byte of the
    /// footer (a group with a 512 kB name over 65 000 leaves would copy 32 GB); more counts as
    /// over budget. An element beyond the tree, or a tree the list ends inside, is malformed.
    fn schema(&mut self) -> Step<()> {
        let h = self.byte()?;
        let size = match h >> 4 {
            15 => self.varint()?,
            s => u64::from(s),
        };
        if h & 0x0f != 12 || size > i32::MAX as u64 {
            return Err(Stop::Malformed);
        }
        self.charge(size)?;
        let path_budget = PATH_BYTES_PER_BYTE
            .saturating_mul(self.buf.len() as u64)
            .saturating_add(1 << 20);
        let mut path_bytes = 0u64;
        // Each open group: its children still to come and its name's bytes, innermost last;
        // and the names' bytes of the open groups below the root.
        let mut open: Vec<(u64, u64)> = Vec::new();
        let mut names = 0u64;
        for i in 0..size {
            let mut last = 0;
            let (mut children, mut name) = (0u64, 0u64);
            loop {
                let (id, t) = self.field(last)?;
                if t == 0 {
                    break;
                }
                last = id;
                match known(Shape::SchemaElement, id) {
                    Some(_) if id == 5 => {
                        let c = self.zigzag()? as i32;
                        if c < 0 || c as u64 > size {
                            return Err(Stop::Budget);
                        }
                        children = c as u64;
                    }
                    Some(_) if id == 4 => {
                        self.charge(1)?;
                        name = self.varint()?;
                        self.bytes(name)?;
                    }
                    Some(ty) => self.typed(ty, Headers::Ignored, DEPTH - 2)?,
                    None => self.value(t, DEPTH)?,
                }
            }
            if i > 0 {
                match open.last_mut() {
                    Some(left) => left.0 -= 1,
                    None => return Err(Stop::Malformed),
                }
            }
            if children > 0 {
                if i > 0 {
                    names += name;
                }
                open.push((children, if i > 0 { name } else { 0 }));
                if open.len() > SCHEMA_DEPTH {
                    return Err(Stop::Budget);
                }
            } else {
                // A leaf: the crate copies its path, a string a level.
                path_bytes = path_bytes
                    .saturating_add(names + name)
                    .saturating_add(32 * open.len() as u64);
                if path_bytes > path_budget {
                    return Err(Stop::Budget);
                }
            }
            while open.last().is_some_and(|g| g.0 == 0) {
                let (_, name) = open.pop().expect("an open group");
                names -= name;
            }
        }
        if open.is_empty() {
            Ok(())
        } else {
            Err(Stop::Malformed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_claiming_billions_of_booleans_is_too_costly() {
        // a page header's unknown field 9: list<bool> of 2^31 − 1 (a 7-byte list header)
        let buf = [0x99, 0xf1, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00];
        assert_eq!(
            check_page_header(&buf, page_budget(buf.len())),
            Verdict::TooCostly
        );
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

    /// A known field is read by the format's type whatever its header says: a footer's
    /// `created_by` (binary) under a boolean's header takes a byte, and what follows is then a
    /// field skipped by the crate — a list claiming 2³¹ − 1 booleans (a walk by the headers saw
    /// the footer's stop there: the fuzz target's timeouts 2c9c2275 and a12d6ad6).
    #[test]
    fn a_footer_is_walked_by_the_types_the_crate_reads() {
        let buf = [0x61, 0x00, 0x39, 0xf1, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00];
        assert_eq!(check_footer(&buf), Verdict::TooCostly);
        // The same under the right header: a string of length 0, the list, the stop.
        let buf = [0x68, 0x00, 0x39, 0xf1, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00];
        assert_eq!(check_footer(&buf), Verdict::TooCostly);
        let fine = [0x68, 0x01, b'h', 0x00];
        assert!(matches!(check_footer(&fine), Verdict::Whole(_)));
    }

    /// A long-form field id is truncated to i16 as the crate reads it; a delta past i16 is
    /// malformed, not an overflow.
    #[test]
    fn field_ids_are_read_as_i16() {
        // field id 2^63 − 1 (truncated: −1) of type i32, then field 0 of type i32, stop
        let buf = [
            0x05, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00, 0x15, 0x00,
            0x00,
        ];
        assert!(matches!(
            check_page_header(&buf, page_budget(buf.len())),
            Verdict::Whole(_)
        ));
        // field id 32767 of type i32, then a delta of 1
        let buf = [0x05, 0xfe, 0xff, 0x03, 0x00, 0x15, 0x00, 0x00];
        assert_eq!(
            check_page_header(&buf, page_budget(buf.len())),
            Verdict::Malformed(6)
        );
        assert_eq!(check_footer(&buf), Verdict::Malformed(6));
    }

    #[test]
    fn a_list_claiming_billions_of_doubles_past_the_end_is_too_costly() {
        // a page header's unknown field 9: list<double> of 2^31 − 1, nothing after the header
        let buf = [0x99, 0xf7, 0xff, 0xff, 0xff, 0xff, 0x07];
        assert_eq!(
            check_page_header(&buf, page_budget(buf.len())),
            Verdict::TooCostly
        );
    }

    #[test]
    fn a_page_header_walks_to_its_end_with_its_compressed_size() {
        // PageHeader { 1: type = 0 (i32), 2: uncompressed 100, 3: compressed 96,
        //              5: data_page_header { 1: num_values 12 } }
        let buf = [
            0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0xc0, 0x01, 0x2c, 0x15, 0x18, 0x00, 0x00,
        ];
        let Verdict::Whole(w) = check_page_header(&buf, page_budget(buf.len())) else {
            panic!("not whole")
        };
        assert_eq!(
            (w.len, w.compressed, w.uncompressed, w.values),
            (13, Some(96), Some(100), Some(12))
        );
        assert!(w.steps > 0 && w.steps < 20);
        assert_eq!(
            check_page_header(&buf[..7], page_budget(7)),
            Verdict::Malformed(7)
        );
        // The budget is what the chunk's headers have left, not the stream's length.
        assert_eq!(check_page_header(&buf, w.steps - 1), Verdict::TooCostly);
    }

    /// A second page header inside one (a dictionary page's after a data page's) cannot raise
    /// the values the uncompressed size is held to: the fewest count.
    #[test]
    fn the_fewest_values_a_header_claims_count() {
        // PageHeader { 1: 0, 2: 100, 3: 96, 5: { 1: 12 }, 7: { 1: 2^27, 2: 0 } }
        let buf = [
            0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0xc0, 0x01, 0x2c, 0x15, 0x18, 0x00, 0x2c, 0x15,
            0x80, 0x80, 0x80, 0x80, 0x01, 0x15, 0x00, 0x00, 0x00,
        ];
        let Verdict::Whole(w) = check_page_header(&buf, page_budget(buf.len())) else {
            panic!("not whole")
        };
        assert_eq!(w.values, Some(12));
    }

    /// A version-2 page header's fields as the crate keeps them: a repeated field's last value,
    /// its rows, and whether its values are compressed.
    #[test]
    fn version_2_page_headers_keep_the_last_value() {
        // PageHeader { 1: 3, 2: 100, 3: 96, 8: { 1: 12, 2: 0, 3: 12, 4: 0, 5: 10, 6: 0,
        //              5 (again, long form): 0, 7: false } }
        let buf = [
            0x15, 0x06, 0x15, 0xc8, 0x01, 0x15, 0xc0, 0x01, 0x5c, 0x15, 0x18, 0x15, 0x00, 0x15,
            0x18, 0x15, 0x00, 0x15, 0x14, 0x15, 0x00, 0x05, 0x0a, 0x00, 0x22, 0x00, 0x00,
        ];
        let Verdict::Whole(w) = check_page_header(&buf, page_budget(buf.len())) else {
            panic!("not whole")
        };
        assert_eq!(w.kind, Some(3));
        assert_eq!(
            (w.rows, w.def_levels, w.rep_levels),
            (Some(12), Some(0), Some(0))
        );
        assert_eq!(w.v2_compressed, Some(false));
    }

    /// Field types 14 and 15 are no types: the crate stops there.
    #[test]
    fn field_types_past_13_are_malformed() {
        assert_eq!(check_footer(&[0x1e, 0x00]), Verdict::Malformed(1));
        assert_eq!(
            check_page_header(&[0x1f], page_budget(1)),
            Verdict::Malformed(1)
        );
    }

    /// A schema is a tree: deeper than SCHEMA_DEPTH is refused, as is an element beyond it or
    /// a tree the list ends inside; a root with two leaves walks.
    #[test]
    fn schemas_are_walked_as_trees() {
        // FileMetaData { 2: schema [elements] } with each element { 4: name "s", 5: children }
        let footer = |children: &[Option<u8>]| {
            let mut b = vec![0x29, 0xfc];
            let mut n = children.len() as u32;
            loop {
                let byte = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    b.push(byte);
                    break;
                }
                b.push(byte | 0x80);
            }
            for c in children {
                b.extend([0x48, 0x01, b's']);
                if let Some(c) = c {
                    b.extend([0x15, 2 * c]);
                }
                b.push(0x00);
            }
            b.push(0x00);
            b
        };
        assert!(matches!(
            check_footer(&footer(&[Some(2), None, None])),
            Verdict::Whole(_)
        ));
        assert!(matches!(
            check_footer(&footer(&[Some(1), None, None])),
            Verdict::Malformed(_)
        ));
        assert!(matches!(
            check_footer(&footer(&[Some(3), None, None])),
            Verdict::Malformed(_)
        ));
        let chain: Vec<Option<u8>> = (0..150).map(|_| Some(1)).chain([None]).collect();
        assert_eq!(check_footer(&footer(&chain)), Verdict::TooCostly);
        let fine: Vec<Option<u8>> = (0..50).map(|_| Some(1)).chain([None]).collect();
        assert!(matches!(check_footer(&footer(&fine)), Verdict::Whole(_)));
        // A group named by 20 kB over 4 000 leaves: 80 MB of paths from a 32 kB footer.
        let mut b = vec![0x29, 0xfc, 0xa2, 0x1f]; // 4 002 elements
        b.extend([0x48, 0x01, b'r', 0x15, 0x02, 0x00]); // the root, one child
        b.extend([0x48, 0xa0, 0x9c, 0x01]); // the group's name: 20 000 bytes
        b.extend(std::iter::repeat_n(b'g', 20_000));
        b.extend([0x15, 0xc0, 0x3e, 0x00]); // 4 000 children
        for _ in 0..4000 {
            b.extend([0x48, 0x01, b'l', 0x00]);
        }
        b.push(0x00);
        assert_eq!(check_footer(&b), Verdict::TooCostly);
    }

    /// A page index as pyarrow writes it walks whole (its booleans a byte each); cut short, it
    /// is malformed.
    #[test]
    fn page_indexes_walk_by_their_types() {
        // ColumnIndex { 1: [false, false], 2: ["a", "b"], 3: ["c", "d"], 4: 1, 5: [0, 0] }
        let ci = [
            0x19, 0x22, 0x00, 0x00, 0x19, 0x28, 0x01, b'a', 0x01, b'b', 0x19, 0x28, 0x01, b'c',
            0x01, b'd', 0x15, 0x02, 0x19, 0x26, 0x00, 0x00, 0x00,
        ];
        let Verdict::Whole(w) = check_page_index(&ci, false) else {
            panic!("not whole")
        };
        assert_eq!(w.len, ci.len());
        assert_eq!(check_page_index(&ci[..5], false), Verdict::Malformed(5));
        // OffsetIndex { 1: [PageLocation { 1: 4, 2: 100, 3: 0 }] }
        let oi = [
            0x19, 0x1c, 0x16, 0x08, 0x15, 0xc8, 0x01, 0x16, 0x00, 0x00, 0x00,
        ];
        assert!(matches!(check_page_index(&oi, true), Verdict::Whole(_)));
        // A location list claiming 2^31 − 1 elements in a few bytes: cut short.
        let big = [0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00];
        assert!(!matches!(check_page_index(&big, true), Verdict::Whole(_)));
    }
}

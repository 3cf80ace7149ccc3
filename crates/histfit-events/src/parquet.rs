//! Events read from Parquet files. A dataset of an HS3 document names them through histfit's
//! extension (HS3 has no way to point at event files; `histfit-unbinned` reads it into a
//! [`SourceSpec`]):
//!
//! ```json
//! {"type": "unbinned", "name": "data", "axes": [{"name": "x", "min": 60, "max": 120}],
//!  "histfit_source": {"format": "parquet", "file": "events.parquet",
//!                     "columns": {"x": "mass"}, "weight": "w", "outside": "drop"}}
//! ```
//!
//! `file` is relative to the HS3 document's directory; `columns` maps an observable to its column
//! (default: the observable's own name); `weight` names an optional weight column; `outside`
//! says what an event outside an observable's domain (the axis' `[min, max]`) is: `"error"`
//! (the default: one message naming the column and how many) or `"drop"` (the domains are the
//! fit range: row groups whose statistics lie outside are not read, nor — where the file has a
//! page index — the rows of pages whose minimum and maximum lie outside (a page wholly among
//! them is not even decompressed), the rows left are filtered exactly, and the count dropped is
//! said). Rows not read are not checked: a null or a bad weight there drops with its event.
//!
//! Parquet columns of doubles, floats and 32/64-bit integers are read into f64 columns (SoA), only
//! the columns named (projection), row groups in parallel (a single large row group's columns
//! in parallel), each value checked against its column's domain as it is read; a null in a used column, a negative
//! or non-finite weight, a missing column or one that holds no numbers is an error naming it.

use crate::thrift_guard::{Verdict, Walked};
use histfit_seam::EventTable;
use parquet::basic::{ConvertedType, Encoding, LogicalType, Type as Physical};
use parquet::column::page::Page;
use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::data_type::DataType;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::{FileReader, RowGroupReader, SerializedFileReader};
use parquet::file::statistics::Statistics;
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// Values (rows × columns) from which a single row group's columns are read, and checked
/// against their domains, on several threads.
const PARALLEL_VALUES: usize = 1 << 17;

/// The most values a column's buffer is sized for before its pages are read: a footer's count
/// is checked against the column chunks' but not against the bytes, so a larger count grows
/// the buffer as values actually arrive instead of reserving memory a file only claims.
const PREALLOCATE: usize = 1 << 22;

/// What to read: one observable's column and its domain.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnRequest {
    pub observable: String,
    pub column: String,
    pub lo: f64,
    pub hi: f64,
}

/// A dataset's `histfit_source`, read.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSpec {
    pub file: PathBuf,
    pub columns: Vec<ColumnRequest>,
    pub weight: Option<String>,
    pub drop_outside: bool,
}

/// The events read, and what was left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub table: EventTable,
    /// Events outside the domains, dropped (`outside: "drop"`), whole row groups included.
    pub dropped: usize,
    /// Row groups not read: their statistics put every row outside a domain.
    pub row_groups_skipped: usize,
    /// Rows of the groups read that their page indexes put outside a domain: not decoded (their
    /// pages not even decompressed where a page lies wholly among them), counted in `dropped`.
    pub page_rows_skipped: usize,
}

/// Why a file's events could not be read: the file, and the rule broken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {rule}")]
pub struct SourceError {
    pub file: String,
    pub rule: String,
}

fn fail(file: &Path, rule: impl Into<String>) -> SourceError {
    SourceError {
        file: file.display().to_string(),
        rule: rule.into(),
    }
}

/// Reads the events `spec` names from its Parquet file, memory-mapped: only the pages of the
/// column chunks used are read from disk, and row groups are decoded in parallel from one map
/// (a `File` would share one seek position between them).
pub fn read_parquet(spec: &SourceSpec) -> Result<Loaded, SourceError> {
    let handle = std::fs::File::open(&spec.file)
        .map_err(|e| fail(&spec.file, format!("cannot open: {e}")))?;
    // SAFETY: the map is only read; a file changed by another process while it is read gives
    // wrong bytes, which the Parquet decoder checks like any other bytes (lengths, Thrift),
    // never memory outside the map.
    let map = unsafe { memmap2::Mmap::map(&handle) }
        .map_err(|e| fail(&spec.file, format!("cannot read: {e}")))?;
    read_from(bytes::Bytes::from_owner(map), spec)
}

/// Reads the events `spec` names from a Parquet file held in memory (`spec.file` names it in
/// messages): what the fuzz target drives, and the decoding alone for the benchmark.
pub fn read_parquet_bytes(
    bytes: impl Into<bytes::Bytes>,
    spec: &SourceSpec,
) -> Result<Loaded, SourceError> {
    read_from(bytes.into(), spec)
}

fn read_from(input: bytes::Bytes, spec: &SourceSpec) -> Result<Loaded, SourceError> {
    crate::guarded(|| decode(input, spec)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("malformed data");
        Err(fail(
            &spec.file,
            format!("not a readable Parquet file: its decoder gave up ({why})"),
        ))
    })
}

fn decode(input: bytes::Bytes, spec: &SourceSpec) -> Result<Loaded, SourceError> {
    let file = &spec.file;
    guard_footer(&input).map_err(|rule| fail(file, rule))?;
    let reader = SerializedFileReader::new(input.clone())
        .map_err(|e| fail(file, format!("not a readable Parquet file: {e}")))?;
    let meta = reader.metadata();
    let schema = meta.file_metadata().schema_descr();
    let names: Vec<String> = (0..schema.num_columns())
        .map(|i| schema.column(i).path().string())
        .collect();
    let find = |name: &str| -> Result<usize, SourceError> {
        let i = names.iter().position(|n| n == name).ok_or_else(|| {
            fail(
                file,
                format!("no column \"{name}\" (it has {})", names.join(", ")),
            )
        })?;
        let c = schema.column(i);
        if c.max_rep_level() > 0 {
            return Err(fail(
                file,
                format!("column \"{name}\" is repeated (a list); an event has one value"),
            ));
        }
        // Integers whose meaning is not their signed value (unsigned, scaled decimals) would
        // be read as wrong numbers.
        let unsigned_or_decimal = matches!(
            c.converted_type(),
            ConvertedType::UINT_8
                | ConvertedType::UINT_16
                | ConvertedType::UINT_32
                | ConvertedType::UINT_64
                | ConvertedType::DECIMAL
        ) || match c.logical_type_ref() {
            Some(LogicalType::Integer(int)) => !int.is_signed,
            Some(LogicalType::Decimal(_)) => true,
            _ => false,
        };
        if unsigned_or_decimal {
            return Err(fail(
                file,
                format!("column \"{name}\" holds unsigned or decimal integers, which are not read (write doubles or signed integers)"),
            ));
        }
        match c.physical_type() {
            Physical::DOUBLE | Physical::FLOAT | Physical::INT32 | Physical::INT64 => Ok(i),
            t => Err(fail(
                file,
                format!("column \"{name}\" holds {t}, not numbers (double, float, int32, int64)"),
            )),
        }
    };
    let observed: Vec<usize> = spec
        .columns
        .iter()
        .map(|c| find(&c.column))
        .collect::<Result<_, _>>()?;
    let weight = spec.weight.as_deref().map(find).transpose()?;
    let wanted: Vec<usize> = observed.iter().copied().chain(weight).collect();
    // Row counts as the footer gives them, checked against each used column chunk's count (an
    // untrusted number sizes the buffers below).
    let rows: Vec<usize> = (0..reader.num_row_groups())
        .map(|g| {
            let group = meta.row_group(g);
            let n = usize::try_from(group.num_rows())
                .map_err(|_| fail(file, format!("row group {g}: {} rows", group.num_rows())))?;
            for &i in &wanted {
                let values = group.column(i).num_values();
                if usize::try_from(values) != Ok(n) {
                    return Err(fail(
                        file,
                        format!(
                            "row group {g}: {n} rows, but column \"{}\" holds {values} values",
                            names[i]
                        ),
                    ));
                }
            }
            Ok(n)
        })
        .collect::<Result<_, _>>()?;
    // Row groups whose statistics put every row outside some domain hold nothing to fit.
    let keep: Vec<usize> = (0..reader.num_row_groups())
        .filter(|&g| {
            !spec.drop_outside
                || !spec.columns.iter().zip(&observed).any(|(c, &i)| {
                    range(meta.row_group(g).column(i).statistics())
                        .is_some_and(|(min, max)| max < c.lo || min > c.hi)
                })
        })
        .collect();
    let skipped_rows = (0..reader.num_row_groups())
        .filter(|g| !keep.contains(g))
        .fold(0usize, |sum, g| sum.saturating_add(rows[g]));
    // Every page header of the chunks read, walked before the crate reads one: each data
    // page's values, by row group and wanted column.
    let counts: Vec<Vec<Vec<u64>>> = keep
        .iter()
        .map(|&g| {
            wanted
                .iter()
                .map(|&i| {
                    guard_pages(&input, meta.row_group(g).column(i))
                        .map_err(|rule| fail(file, format!("column \"{}\": {rule}", names[i])))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<_, _>>()?;
    // Within the groups read, the rows their page indexes put outside a domain.
    let skips: Vec<Vec<(usize, usize)>> = keep
        .iter()
        .zip(&counts)
        .map(|(&g, counts)| match spec.drop_outside {
            true => page_skips(&input, meta.row_group(g), spec, &observed, counts, rows[g]),
            false => Vec::new(),
        })
        .collect();
    let page_rows_skipped: usize = skips.iter().flatten().map(|(start, end)| end - start).sum();
    // One column chunk of a row group (its own reader of the group, so that the columns of
    // one group can be read on several threads).
    let read_chunk = |g: usize,
                      i: usize,
                      skips: &Vec<(usize, usize)>|
     -> Result<Vec<f64>, SourceError> {
        let rows = rows[g];
        let group = reader
            .get_row_group(g)
            .map_err(|e| fail(file, format!("row group {g}: {e}")))?;
        let in_column = |rule: String| fail(file, format!("column \"{}\": {rule}", names[i]));
        let c = schema.column(i);
        // Levels precede the values of a nullable column's pages; skipped when
        // the chunk's statistics say it holds no null.
        let levels = match c.max_def_level() {
            0 => Some(false),
            _ => meta
                .row_group(g)
                .column(i)
                .statistics()
                .and_then(Statistics::null_count_opt)
                .filter(|&n| n == 0)
                .map(|_| true),
        };
        if let (Physical::DOUBLE, Some(levels), true) =
            (c.physical_type(), levels, skips.is_empty())
        {
            if let Some(v) = plain_doubles(group.as_ref(), i, rows, levels).map_err(in_column)? {
                return Ok(v);
            }
        }
        check_dictionary(group.as_ref(), i, c.physical_type()).map_err(in_column)?;
        let column = group
            .get_column_reader(i)
            .map_err(|e| fail(file, format!("row group {g}: {e}")))?;
        read_column(column, rows, skips).map_err(in_column)
    };
    // A single row group's columns in parallel where they hold enough values to pay for the
    // hand-over (decoding is a copy bound by memory: one core's bandwidth, not the arithmetic).
    // (The row count is the footer's, untrusted: saturating.)
    let spread = keep.len() == 1 && rows[keep[0]].saturating_mul(wanted.len()) >= PARALLEL_VALUES;
    // A chunk with its count of values outside the column's domain, taken while the values
    // are still in cache (where the domains are checked rather than applied).
    let checked_chunk = |g: usize,
                         j: usize,
                         skips: &Vec<(usize, usize)>|
     -> Result<(Vec<f64>, usize), SourceError> {
        let values = read_chunk(g, wanted[j], skips)?;
        let outside = match spec.columns.get(j) {
            Some(c) if !spec.drop_outside => count_outside(&values, c.lo, c.hi),
            _ => 0,
        };
        Ok((values, outside))
    };
    type Chunks = Vec<(Vec<f64>, usize)>;
    // Results are gathered whole and their first error taken in order (of the group, then the
    // column), so that the error named does not depend on which thread failed first.
    let read_group = |(&g, skips): (&usize, &Vec<(usize, usize)>)| -> Result<Chunks, SourceError> {
        let chunks: Vec<Result<(Vec<f64>, usize), SourceError>> = if spread {
            (0..wanted.len())
                .into_par_iter()
                .map(|j| checked_chunk(g, j, skips))
                .collect()
        } else {
            (0..wanted.len())
                .map(|j| checked_chunk(g, j, skips))
                .collect()
        };
        chunks.into_iter().collect()
    };
    // Row groups in parallel where there are several (one goes without the pool's hand-over).
    let groups: Vec<Result<Chunks, SourceError>> = if keep.len() > 1 {
        keep.par_iter().zip(&skips).map(read_group).collect()
    } else {
        keep.iter().zip(&skips).map(read_group).collect()
    };
    let groups: Vec<Chunks> = groups.into_iter().collect::<Result<_, _>>()?;
    let mut outside = vec![0; wanted.len()];
    for g in &groups {
        for (sum, (_, n)) in outside.iter_mut().zip(g) {
            *sum += n;
        }
    }
    let mut columns: Vec<Vec<f64>> = match <[_; 1]>::try_from(groups) {
        Ok([one]) => one.into_iter().map(|(v, _)| v).collect(),
        Err(groups) => {
            let total: usize = groups.iter().map(|g| g[0].0.len()).sum();
            let mut columns = vec![Vec::with_capacity(total); wanted.len()];
            for g in groups {
                for (out, (part, _)) in columns.iter_mut().zip(g) {
                    out.extend_from_slice(&part);
                }
            }
            columns
        }
    };
    let weights = weight.map(|_| columns.pop().expect("the weight column was read last"));
    let mut table = EventTable {
        names: spec.columns.iter().map(|c| c.observable.clone()).collect(),
        columns,
        weights,
    };
    let dropped = select(&mut table, spec, &outside).map_err(|rule| fail(file, rule))?;
    check_weights(&table, spec.weight.as_deref()).map_err(|rule| fail(file, rule))?;
    Ok(Loaded {
        table,
        dropped: dropped + skipped_rows + page_rows_skipped,
        row_groups_skipped: reader.num_row_groups() - keep.len(),
        page_rows_skipped,
    })
}

/// The footer's metadata, walked before the parquet crate decodes it ([`thrift_guard`]): one
/// that is malformed or would hold its decoder far longer than its length allows is refused.
fn guard_footer(input: &bytes::Bytes) -> Result<(), String> {
    let len = input.len();
    let Some(tail) = len.checked_sub(8).map(|t| &input[t..]) else {
        return Ok(());
    };
    let meta_len = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as usize;
    let Some(start) = (len - 8).checked_sub(meta_len) else {
        return Ok(());
    };
    match crate::thrift_guard::check_footer(&input[start..len - 8]) {
        Verdict::Whole(_) => Ok(()),
        Verdict::TooCostly => Err(
            "not a readable Parquet file: its footer claims more elements than its bytes hold"
                .into(),
        ),
        // Where the walk stops, the crate stops with an error too, or reads the bytes otherwise
        // than they say: refused here, before the crate spends seconds on it.
        Verdict::Malformed(at) => Err(format!(
            "not a readable Parquet file: its footer is malformed at byte {}",
            start + at
        )),
    }
}

/// The most bytes a page's value of a column read here takes uncompressed, with its levels.
const MOST_PER_VALUE: i64 = 16;

/// The page headers of a column chunk, walked in turn as the parquet crate will read them
/// ([`thrift_guard::check_page_header`]) before it does: one that is malformed or would hold
/// the crate far longer than its length allows is refused.
fn guard_pages(input: &bytes::Bytes, chunk: &ColumnChunkMetaData) -> Result<Vec<u64>, String> {
    let start = chunk
        .dictionary_page_offset()
        .unwrap_or(chunk.data_page_offset());
    let (Ok(start), Ok(size)) = (
        usize::try_from(start),
        usize::try_from(chunk.compressed_size()),
    ) else {
        return Ok(Vec::new());
    };
    // The crate reads each header from a stream that runs on to the file's end, not the
    // chunk's.
    let Some(bytes) = input.get(start..) else {
        return Ok(Vec::new());
    };
    // Each data page's values, in order.
    let mut counts = Vec::new();
    let mut at = 0;
    // The chunk's size as the footer claims it, held to the file: the budget is the bytes'.
    let mut budget = crate::thrift_guard::page_budget(size.min(bytes.len()));
    while at < size.min(bytes.len()) {
        let walked = crate::thrift_guard::check_page_header(&bytes[at..], budget);
        if let Verdict::Whole(w) = walked {
            budget -= w.steps.min(budget);
        }
        match walked {
            // The crate reserves the uncompressed size before it decompresses: no more than
            // the page's values could take (a value of a column read here is at most 8 bytes,
            // its levels and run headers well under 8 more; a fuzzed 1.9 kB file claimed 1.6 GB).
            Verdict::Whole(Walked {
                uncompressed: Some(u),
                values,
                ..
            }) if i64::from(u) > MOST_PER_VALUE * i64::from(values.unwrap_or(0).max(0)) + 4096 => {
                return Err(format!(
                    "a page header at byte {} claims {u} bytes for {} values",
                    start + at,
                    values.unwrap_or(0)
                ))
            }
            Verdict::Whole(
                w @ Walked {
                    len,
                    compressed: Some(body),
                    uncompressed: Some(u),
                    ..
                },
            ) if body >= 0 && u >= 0 => {
                if matches!(w.kind, Some(0 | 3)) {
                    counts.push(w.rows.map_or(0, |v| v.max(0) as u64));
                }
                let body_at = (at + len).min(bytes.len());
                let page = &bytes[body_at..(body_at + body as usize).min(bytes.len())];
                // What the crate decompresses: not an index page (skipped), nor a version-2
                // page's values written uncompressed; after a version-2 page's levels.
                let levels = match w.kind {
                    Some(3) => {
                        i64::from(w.def_levels.unwrap_or(0)) + i64::from(w.rep_levels.unwrap_or(0))
                    }
                    _ => 0,
                };
                let decompressed = w.kind != Some(1) && w.v2_compressed != Some(false);
                let values = usize::try_from(levels).ok().and_then(|l| page.get(l..));
                if decompressed
                    && values.is_some_and(|v| inflates_past(chunk.compression(), v, u as u64))
                {
                    return Err(format!(
                        "the page at byte {} decompresses to more than the {u} bytes its header says",
                        start + at
                    ));
                }
                at += len + body as usize
            }
            Verdict::TooCostly => {
                return Err(format!(
                    "a page header at byte {} claims more elements than its bytes hold",
                    start + at
                ))
            }
            // Malformed (what no writer makes, and what the crate would read otherwise than
            // its bytes say): refused here, before the crate spends minutes on it.
            _ => return Err(format!("a page header at byte {} is malformed", start + at)),
        }
    }
    Ok(counts)
}

/// Whether a page body of a codec the parquet crate decompresses to its end, whatever the
/// header says (gzip; LZ4's frame format, the crate's fallback for the deprecated LZ4 codec),
/// holds more than `most` bytes: decompressed here, stopping one byte past it, so that a small
/// file cannot make the crate write gigabytes. The other codecs decompress into the size the
/// header gives.
fn inflates_past(codec: parquet::basic::Compression, page: &[u8], most: u64) -> bool {
    use parquet::basic::Compression;
    use std::io::Read;
    let mut decoder: Box<dyn Read> = match codec {
        Compression::GZIP(_) => Box::new(flate2::read::MultiGzDecoder::new(page)),
        Compression::LZ4 => Box::new(lz4_flex::frame::FrameDecoder::new(page)),
        _ => return false,
    };
    // Counted as it comes: a body that stops decompressing partway (the crate's to report)
    // has still produced what it produced.
    let mut buf = [0u8; 8192];
    let mut produced = 0u64;
    while produced <= most {
        match decoder.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => produced += n as u64,
        }
    }
    produced > most
}

/// A column chunk's minimum and maximum as f64, where its statistics give both.
fn range(stats: Option<&Statistics>) -> Option<(f64, f64)> {
    let pair = |min: Option<f64>, max: Option<f64>| min.zip(max);
    match stats? {
        Statistics::Double(s) => pair(s.min_opt().copied(), s.max_opt().copied()),
        Statistics::Float(s) => pair(
            s.min_opt().map(|&v| v as f64),
            s.max_opt().map(|&v| v as f64),
        ),
        Statistics::Int32(s) => pair(
            s.min_opt().map(|&v| v as f64),
            s.max_opt().map(|&v| v as f64),
        ),
        Statistics::Int64(s) => pair(
            s.min_opt().map(|&v| v as f64),
            s.max_opt().map(|&v| v as f64),
        ),
        _ => None,
    }
    .filter(|(min, max)| !min.is_nan() && !max.is_nan())
}

/// The common layouts read without the general decoder: a chunk of doubles whose data pages
/// are PLAIN-encoded — each page's values copied straight into the column (the general decoder
/// zero-fills, decodes, then copies) — or dictionary-encoded over a PLAIN dictionary page
/// (what pyarrow writes by default: the first pages as indices into a dictionary, the rest
/// PLAIN once the dictionary is full), and hold no null. `None` where the chunk is laid out
/// otherwise (another encoding, levels that are not skipped, an index past the dictionary, a
/// count that does not add up): the general decoder reads it then, and says what is wrong.
/// `levels`: the pages begin with definition levels (all "present").
fn plain_doubles(
    group: &dyn RowGroupReader,
    column: usize,
    rows: usize,
    levels: bool,
) -> Result<Option<Vec<f64>>, String> {
    let mut pages = group
        .get_column_page_reader(column)
        .map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(rows.min(PREALLOCATE));
    let mut dictionary: Option<Vec<f64>> = None;
    while let Some(page) = pages.get_next_page().map_err(|e| e.to_string())? {
        let (values, n, encoding) = match &page {
            Page::DictionaryPage {
                buf,
                num_values,
                encoding: Encoding::PLAIN | Encoding::PLAIN_DICTIONARY,
                ..
            } if dictionary.is_none() && buf.len() == 8 * *num_values as usize => {
                let mut d = Vec::new();
                append_le_doubles(&mut d, buf);
                dictionary = Some(d);
                continue;
            }
            Page::DataPage {
                buf,
                num_values,
                encoding,
                ..
            } => {
                // V1: the levels (RLE, after their 4-byte length) come first.
                let skip = match (levels, buf.get(..4)) {
                    (false, _) => 0,
                    (true, Some(len)) => {
                        4 + u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize
                    }
                    (true, None) => return Ok(None),
                };
                (buf.get(skip..), *num_values as usize, *encoding)
            }
            Page::DataPageV2 {
                buf,
                num_values,
                encoding,
                num_nulls: 0,
                def_levels_byte_len,
                rep_levels_byte_len,
                ..
            } => (
                buf.get(
                    (*def_levels_byte_len as usize).saturating_add(*rep_levels_byte_len as usize)..,
                ),
                *num_values as usize,
                *encoding,
            ),
            _ => return Ok(None),
        };
        let Some(values) = values else {
            return Ok(None);
        };
        let read = match (encoding, &dictionary) {
            (Encoding::PLAIN, _) if values.len() == 8 * n => {
                append_le_doubles(&mut out, values);
                true
            }
            // A page claiming more values than the row group has left is malformed: checked
            // before a buffer is sized from its count (a 123-byte file claimed 2²⁷).
            (Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY, Some(d))
                if n <= rows - out.len() =>
            {
                append_dictionary_values(&mut out, values, n, d)
            }
            _ => false,
        };
        if !read || out.len() > rows {
            return Ok(None);
        }
    }
    Ok((out.len() == rows).then_some(out))
}

/// Appends the `n` values a dictionary-encoded page's indices name (Parquet's RLE /
/// bit-packed hybrid after a byte giving the indices' width: runs of one repeated index, and
/// groups of eight packed ones, least significant bit first). False where the indices do not
/// decode to `n` values of the dictionary (`out` then holds a partial page: the caller reads
/// the chunk again with the general decoder).
fn append_dictionary_values(out: &mut Vec<f64>, page: &[u8], n: usize, dictionary: &[f64]) -> bool {
    let Some((&width, mut rest)) = page.split_first() else {
        return n == 0;
    };
    let width = width as usize;
    if width > 32 {
        return false;
    }
    let bytes = width.div_ceil(8);
    let mask = (1u64 << width) - 1;
    let want = out.len() + n;
    out.reserve(n);
    while out.len() < want {
        // The run's header: a ULEB128 integer.
        let mut header = 0u64;
        let mut shift = 0;
        loop {
            let Some((&b, r)) = rest.split_first() else {
                return false;
            };
            rest = r;
            header |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 56 {
                return false;
            }
        }
        if header & 1 == 0 {
            // A run of one index, held in `bytes` little-endian bytes.
            let count = (header >> 1) as usize;
            // An empty run is malformed (and would never end the loop); so is one past the
            // page's values.
            if count == 0 || count > want - out.len() {
                return false;
            }
            let Some(held) = rest.get(..bytes) else {
                return false;
            };
            rest = &rest[bytes..];
            let mut index = 0usize;
            for (k, &b) in held.iter().enumerate() {
                index |= (b as usize) << (8 * k);
            }
            let Some(&v) = dictionary.get(index) else {
                return false;
            };
            out.extend(std::iter::repeat_n(v, count));
        } else {
            // Groups of eight indices of `width` bits each.
            let groups = (header >> 1) as usize;
            // Empty, or more groups than the page's values fill (the last may be padding).
            if groups == 0 || groups > (want - out.len()).div_ceil(8) {
                return false;
            }
            let Some(len) = groups.checked_mul(width) else {
                return false;
            };
            let Some(packed) = rest.get(..len) else {
                return false;
            };
            rest = &rest[len..];
            // The last group may be padding past the page's values.
            let count = (8 * groups).min(want - out.len());
            for k in 0..count {
                let bit = k * width;
                let mut window = [0u8; 8];
                let at = bit / 8;
                let end = (at + 8).min(packed.len());
                window[..end - at].copy_from_slice(&packed[at..end]);
                let index = (u64::from_le_bytes(window) >> (bit % 8)) & mask;
                let Some(&v) = dictionary.get(index as usize) else {
                    return false;
                };
                out.push(v);
            }
        }
    }
    true
}

/// Appends little-endian doubles: one copy of the bytes on a little-endian machine.
fn append_le_doubles(out: &mut Vec<f64>, bytes: &[u8]) {
    let n = bytes.len() / 8;
    if cfg!(target_endian = "little") {
        out.reserve(n);
        // SAFETY: `reserve` made room for n more f64 after `len`; the source holds 8n bytes,
        // which on a little-endian machine are those doubles' bytes as they lie in memory;
        // byte-wise copying needs no alignment of the source, and every bit pattern is an f64.
        unsafe {
            let at = out.as_mut_ptr().add(out.len()) as *mut u8;
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, 8 * n);
            out.set_len(out.len() + n);
        }
    } else {
        out.extend(
            bytes
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))),
        );
    }
}

/// A chunk's dictionary page (its first, where it has one) holds no more values than its bytes
/// can: the parquet crate sizes the dictionary from the count the page claims before decoding
/// it (a 3.4 kB file claimed 2·10⁹ values: 16 GB; fuzz/open/parquet_events).
fn check_dictionary(
    group: &dyn RowGroupReader,
    column: usize,
    kind: Physical,
) -> Result<(), String> {
    let width = match kind {
        Physical::DOUBLE | Physical::INT64 => 8,
        Physical::FLOAT | Physical::INT32 => 4,
        _ => return Ok(()),
    };
    let mut pages = group
        .get_column_page_reader(column)
        .map_err(|e| e.to_string())?;
    if let Some(Page::DictionaryPage {
        buf, num_values, ..
    }) = pages.get_next_page().map_err(|e| e.to_string())?
    {
        if (num_values as usize).saturating_mul(width) > buf.len() {
            return Err(format!(
                "a dictionary page claims {num_values} values in {} bytes",
                buf.len()
            ));
        }
    }
    Ok(())
}

/// One column chunk of `rows` rows as f64, but for the row ranges `skips` (sorted, disjoint).
fn read_column(
    column: ColumnReader,
    rows: usize,
    skips: &[(usize, usize)],
) -> Result<Vec<f64>, String> {
    match column {
        ColumnReader::DoubleColumnReader(r) => read_typed(r, rows, skips, |v: f64| v),
        ColumnReader::FloatColumnReader(r) => read_typed(r, rows, skips, |v: f32| v as f64),
        ColumnReader::Int32ColumnReader(r) => read_typed(r, rows, skips, |v: i32| v as f64),
        ColumnReader::Int64ColumnReader(r) => read_typed(r, rows, skips, |v: i64| v as f64),
        _ => Err("not a column of numbers".into()),
    }
}

/// [`read_column`] of one physical type: the rows between the skipped ranges read, the
/// skipped ones passed over (the crate skips a page whole, undecompressed, where it lies
/// among them).
fn read_typed<T, F>(
    mut r: ColumnReaderImpl<T>,
    rows: usize,
    skips: &[(usize, usize)],
    to_f64: F,
) -> Result<Vec<f64>, String>
where
    T: DataType,
    T::T: Copy,
    F: Fn(T::T) -> f64,
{
    let skipped: usize = skips.iter().map(|(a, b)| b - a).sum();
    let wanted = rows - skipped;
    let mut values: Vec<T::T> = Vec::with_capacity(wanted.min(PREALLOCATE));
    let mut levels: Vec<i16> = Vec::with_capacity(wanted.min(PREALLOCATE));
    let short = |at: usize| format!("{at} values where the row group has {rows} rows");
    let mut at = 0;
    for &(start, end) in skips.iter().chain(std::iter::once(&(rows, rows))) {
        while at < start {
            let (n, _, _) = r
                .read_records(start - at, Some(&mut levels), None, &mut values)
                .map_err(|e| e.to_string())?;
            if n == 0 {
                return Err(short(at));
            }
            at += n;
        }
        if end > start {
            let n = r.skip_records(end - start).map_err(|e| e.to_string())?;
            if n != end - start {
                return Err(short(at + n));
            }
            at = end;
        }
    }
    if values.len() < wanted {
        return Err(format!(
            "{} null values; every event needs a value here",
            wanted - values.len()
        ));
    }
    Ok(values.into_iter().map(to_f64).collect())
}

/// The rows of a row group that the page indexes of its observed columns put outside a domain:
/// a page whose minimum and maximum both lie on one side of its column's domain, and that holds
/// no null (a null is an error wherever it is read), as sorted, disjoint row ranges. A column
/// without a page index, or whose index is malformed or disagrees with itself, skips nothing:
/// it is read whole, as without an index.
fn page_skips(
    input: &bytes::Bytes,
    group: &parquet::file::metadata::RowGroupMetaData,
    spec: &SourceSpec,
    observed: &[usize],
    counts: &[Vec<u64>],
    rows: usize,
) -> Vec<(usize, usize)> {
    // `counts` is by wanted column, the observed ones first.
    let mut ranges: Vec<(usize, usize)> = spec
        .columns
        .iter()
        .zip(observed)
        .zip(counts)
        .flat_map(|((c, &i), counts)| {
            outside_pages(input, group.column(i), c, counts, rows).unwrap_or_default()
        })
        .collect();
    ranges.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// The row ranges of one column chunk's pages that lie wholly outside `c`'s domain; None where
/// the chunk has no usable page index. `counts`: its data pages' values as their headers say
/// (the crate skips a page by that count, undecoded): an index whose pages hold other row
/// counts is not used.
fn outside_pages(
    input: &bytes::Bytes,
    chunk: &ColumnChunkMetaData,
    c: &ColumnRequest,
    counts: &[u64],
    rows: usize,
) -> Option<Vec<(usize, usize)>> {
    use parquet::file::page_index::column_index::ColumnIndexMetaData as Index;
    let bytes_of = |range: Option<std::ops::Range<u64>>| {
        let r = range?;
        input.get(usize::try_from(r.start).ok()?..usize::try_from(r.end).ok()?)
    };
    let (ci, oi) = (
        bytes_of(chunk.column_index_range())?,
        bytes_of(chunk.offset_index_range())?,
    );
    // Walked first, as the footer is: the crate's decoding of a hostile index could loop.
    let whole = |v| matches!(v, Verdict::Whole(_));
    if !whole(crate::thrift_guard::check_page_index(ci, false))
        || !whole(crate::thrift_guard::check_page_index(oi, true))
    {
        return None;
    }
    let index =
        parquet::file::page_index::index_reader::decode_column_index(ci, chunk.column_type())
            .ok()?;
    let offsets = parquet::file::page_index::index_reader::decode_offset_index(oi).ok()?;
    let firsts: Vec<usize> = offsets
        .page_locations()
        .iter()
        .map(|p| usize::try_from(p.first_row_index).ok())
        .collect::<Option<_>>()?;
    let pages = firsts.len();
    let ascending = firsts.first() == Some(&0)
        && firsts.windows(2).all(|w| w[0] < w[1])
        && firsts.last().is_some_and(|&f| f < rows);
    if !ascending {
        return None;
    }
    let ends = firsts.iter().skip(1).copied().chain([rows]);
    let agree = counts.len() == pages
        && firsts
            .iter()
            .zip(ends)
            .zip(counts)
            .all(|((&first, end), &n)| (end - first) as u64 == n);
    if !agree || index.num_pages() != pages as u64 {
        return None;
    }
    let bounds = |k: usize| -> Option<(f64, f64)> {
        let pair = |min: Option<f64>, max: Option<f64>| min.zip(max);
        match &index {
            Index::DOUBLE(x) => pair(x.min_value(k).copied(), x.max_value(k).copied()),
            Index::FLOAT(x) => pair(
                x.min_value(k).map(|&v| v as f64),
                x.max_value(k).map(|&v| v as f64),
            ),
            Index::INT32(x) => pair(
                x.min_value(k).map(|&v| v as f64),
                x.max_value(k).map(|&v| v as f64),
            ),
            Index::INT64(x) => pair(
                x.min_value(k).map(|&v| v as f64),
                x.max_value(k).map(|&v| v as f64),
            ),
            _ => None,
        }
    };
    let out = (0..pages)
        .filter(|&k| {
            !index.is_null_page(k)
                && index.null_count(k) == Some(0)
                && bounds(k).is_some_and(|(min, max)| max < c.lo || min > c.hi)
        })
        .map(|k| (firsts[k], firsts.get(k + 1).copied().unwrap_or(rows)))
        .collect();
    Some(out)
}

/// How many values lie outside [lo, hi] (NaN included): a count without branches, in lanes the
/// compiler vectorises — with AVX-512's or AVX2's instructions where the processor has them
/// (the crate's baseline build has two lanes; this pass took a third of a read's time).
pub fn count_outside(values: &[f64], lo: f64, hi: f64) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
        {
            // SAFETY: the processor has the instructions this build uses.
            return unsafe { count_outside_avx512(values, lo, hi) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            return unsafe { count_outside_avx2(values, lo, hi) };
        }
    }
    count_outside_body(values, lo, hi)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2")]
unsafe fn count_outside_avx512(values: &[f64], lo: f64, hi: f64) -> usize {
    count_outside_body(values, lo, hi)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn count_outside_avx2(values: &[f64], lo: f64, hi: f64) -> usize {
    count_outside_body(values, lo, hi)
}

#[inline(always)]
fn count_outside_body(values: &[f64], lo: f64, hi: f64) -> usize {
    // An integer sum: the compiler keeps it in vector lanes (the order does not matter). NaN
    // fails both comparisons.
    values
        .iter()
        .map(|&x| u64::from(!(x >= lo && x <= hi)))
        .sum::<u64>() as usize
}

/// Applies the domains: drops the events outside them, or says how many of a column's values lie
/// outside its domain (`outside`, counted as the columns were read) where they are not dropped.
fn select(table: &mut EventTable, spec: &SourceSpec, outside: &[usize]) -> Result<usize, String> {
    let n = table.len();
    let inside = |c: &ColumnRequest, x: f64| x >= c.lo && x <= c.hi;
    if !spec.drop_outside {
        for (c, &outside) in spec.columns.iter().zip(outside) {
            if outside > 0 {
                return Err(format!(
                    "{outside} of {n} events with column \"{}\" outside the domain of \"{}\", [{}, {}] \
                     (\"outside\": \"drop\" drops them)",
                    c.column, c.observable, c.lo, c.hi
                ));
            }
        }
        return Ok(0);
    }
    let keep: Vec<bool> = (0..n)
        .map(|e| {
            spec.columns
                .iter()
                .zip(&table.columns)
                .all(|(c, col)| inside(c, col[e]))
        })
        .collect();
    let kept = keep.iter().filter(|&&k| k).count();
    if kept < n {
        let filter = |v: &mut Vec<f64>| {
            let mut k = keep.iter();
            v.retain(|_| *k.next().expect("one flag per event"));
        };
        table.columns.iter_mut().for_each(filter);
        if let Some(w) = table.weights.as_mut() {
            filter(w);
        }
    }
    Ok(n - kept)
}

/// A weight is a finite number ≥ 0.
fn check_weights(table: &EventTable, column: Option<&str>) -> Result<(), String> {
    let (Some(w), Some(name)) = (&table.weights, column) else {
        return Ok(());
    };
    let bad = w.iter().filter(|v| !(v.is_finite() && **v >= 0.0)).count();
    if bad > 0 {
        let first = w
            .iter()
            .position(|v| !(v.is_finite() && *v >= 0.0))
            .unwrap_or(0);
        return Err(format!(
            "weight column \"{name}\": {bad} weights negative or not finite (the first, event {first}: {})",
            w[first]
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of one row group, four columns ("a" … "d", "c" and "d" nullable) of `n` rows:
    /// `value(column, row)`, `None` a null.
    fn write_columns(n: usize, value: impl Fn(usize, usize) -> Option<f64>) -> bytes::Bytes {
        use parquet::data_type::DoubleType;
        use parquet::file::properties::WriterProperties;
        use parquet::file::writer::SerializedFileWriter;
        let schema = std::sync::Arc::new(
            parquet::schema::parser::parse_message_type(
                "message t { REQUIRED DOUBLE a; REQUIRED DOUBLE b; OPTIONAL DOUBLE c; OPTIONAL DOUBLE d; }",
            )
            .unwrap(),
        );
        let props = std::sync::Arc::new(
            WriterProperties::builder()
                .set_dictionary_enabled(false)
                .build(),
        );
        let mut out = Vec::new();
        let mut writer = SerializedFileWriter::new(&mut out, schema, props).unwrap();
        let mut group = writer.next_row_group().unwrap();
        let mut k = 0;
        while let Some(mut column) = group.next_column().unwrap() {
            let cells: Vec<Option<f64>> = (0..n).map(|r| value(k, r)).collect();
            let values: Vec<f64> = cells.iter().flatten().copied().collect();
            let levels: Vec<i16> = cells.iter().map(|c| i16::from(c.is_some())).collect();
            let levels = (k >= 2).then_some(&levels[..]);
            column
                .typed::<DoubleType>()
                .write_batch(&values, levels, None)
                .unwrap();
            column.close().unwrap();
            k += 1;
        }
        group.close().unwrap();
        writer.close().unwrap();
        bytes::Bytes::from(out)
    }

    fn request(drop_outside: bool) -> SourceSpec {
        SourceSpec {
            file: "columns.parquet".into(),
            columns: ["a", "b", "c", "d"]
                .iter()
                .map(|c| ColumnRequest {
                    observable: c.to_string(),
                    column: c.to_string(),
                    lo: 0.0,
                    hi: 10.0,
                })
                .collect(),
            weight: None,
            drop_outside,
        }
    }

    /// A single row group large enough that its columns are read in parallel: the same table,
    /// counts and errors as on one thread — among several failing columns, always the first
    /// named, whichever thread fails first.
    #[test]
    fn a_large_row_group_reads_alike_on_one_thread_and_on_several() {
        let n = 40_000;
        assert!(n * 4 >= PARALLEL_VALUES);
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let two = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let good = write_columns(n, |k, r| Some(((r * 7 + k * 3) % 100) as f64 / 10.0));
        let on = |pool: &rayon::ThreadPool, bytes: &bytes::Bytes, drop: bool| {
            pool.install(|| read_parquet_bytes(bytes.clone(), &request(drop)))
        };
        let a = on(&one, &good, false).unwrap();
        let b = on(&two, &good, false).unwrap();
        assert_eq!(a.table, b.table);
        assert_eq!(a.table.len(), n);
        // Values outside the domain in "b" (3) and "d" (5): the first column's count named.
        let outside = write_columns(n, |k, r| {
            Some(match (k, r) {
                (1, 10 | 20 | 30) | (3, 1..=5) => 11.0,
                _ => 1.0,
            })
        });
        for pool in [&one, &two] {
            let e = on(pool, &outside, false).unwrap_err().to_string();
            assert!(e.contains("3 of 40000 events with column \"b\""), "{e}");
            let kept = on(pool, &outside, true).unwrap();
            assert_eq!((kept.dropped, kept.table.len()), (8, n - 8));
        }
        // A null in "c" and in "d": "c" named, every time.
        let nulls = write_columns(n, |k, r| (k < 2 || r != 100 + k).then_some(1.0));
        for _ in 0..20 {
            for pool in [&one, &two] {
                let e = on(pool, &nulls, false).unwrap_err().to_string();
                assert!(e.contains("column \"c\""), "{e}");
            }
        }
    }

    /// A gzip or LZ4-frame page body that holds more than its header says is caught before the
    /// crate reads it to its end; one that holds what it says passes.
    #[test]
    fn bodies_that_decompress_past_their_size_are_caught() {
        use parquet::basic::{Compression, GzipLevel};
        use std::io::Write;
        let zeros = vec![0u8; 1 << 20];
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&zeros).unwrap();
        let gz = gz.finish().unwrap();
        let mut lz = lz4_flex::frame::FrameEncoder::new(Vec::new());
        lz.write_all(&zeros).unwrap();
        let lz = lz.finish().unwrap();
        for (codec, body) in [
            (Compression::GZIP(GzipLevel::default()), &gz),
            (Compression::LZ4, &lz),
        ] {
            assert!(inflates_past(codec, body, 1000), "{codec}");
            assert!(!inflates_past(codec, body, 1 << 20), "{codec}");
        }
        // A gzip body cut short: what it gave before stopping still counts.
        let cut = &gz[..gz.len() / 2];
        assert!(inflates_past(
            Compression::GZIP(GzipLevel::default()),
            cut,
            1000
        ));
        assert!(!inflates_past(Compression::SNAPPY, &gz, 0));
    }

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/events")
            .join(name)
    }

    /// The fast path's values, where it takes the chunk, against the general decoder's.
    fn fast_against_general(bytes: bytes::Bytes, levels: bool) -> Option<usize> {
        let reader = SerializedFileReader::new(bytes).unwrap();
        let group = reader.get_row_group(0).unwrap();
        let rows = reader.metadata().row_group(0).num_rows() as usize;
        let fast = plain_doubles(group.as_ref(), 0, rows, levels).unwrap()?;
        let general = read_column(group.get_column_reader(0).unwrap(), rows, &[]).unwrap();
        assert_eq!(fast.len(), general.len());
        for (k, (a, b)) in fast.iter().zip(&general).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "value {k}");
        }
        Some(rows)
    }

    /// The fast path reads PLAIN pages of doubles — data pages of both formats, with levels
    /// (nullable columns without nulls) and without (required columns) — and dictionary pages
    /// (pyarrow's default), each value as the general decoder reads it.
    #[test]
    fn plain_and_dictionary_pages_are_read_as_the_general_decoder_reads_them() {
        for (file, levels) in [
            ("gauss_exp_plain_v1.parquet", true),
            ("gauss_exp_plain_v2.parquet", true),
            ("gauss_exp_required.parquet", false),
            ("gauss_exp.parquet", true),
        ] {
            let bytes = bytes::Bytes::from(std::fs::read(fixture(file)).unwrap());
            assert!(fast_against_general(bytes, levels).is_some(), "{file}");
        }
    }

    /// A chunk whose dictionary fills up (runs of one index, packed groups of 1 to 12 bits,
    /// then PLAIN pages): every value as the general decoder reads it.
    #[test]
    fn a_dictionary_that_fills_up_is_read_across_its_pages() {
        use parquet::data_type::DoubleType;
        use parquet::file::properties::WriterProperties;
        use parquet::file::writer::SerializedFileWriter;
        use std::sync::Arc;
        let schema = Arc::new(
            parquet::schema::parser::parse_message_type("message e { REQUIRED DOUBLE x; }")
                .unwrap(),
        );
        let props = Arc::new(
            WriterProperties::builder()
                .set_compression(parquet::basic::Compression::SNAPPY)
                .set_dictionary_page_size_limit(8 * 3000)
                .set_data_page_size_limit(4096)
                .build(),
        );
        // Repeats first (runs), then ever more distinct values (widths growing to 12 bits),
        // then past the dictionary's room (PLAIN).
        let values: Vec<f64> = (0..20_000)
            .map(|i: i32| match i {
                0..2_000 => (i / 100) as f64,
                2_000..10_000 => 0.5 + ((i * 7919) % (i - 1_990)) as f64,
                _ => i as f64 * 0.37,
            })
            .collect();
        let mut file = Vec::new();
        let mut writer = SerializedFileWriter::new(&mut file, schema, props).unwrap();
        let mut group = writer.next_row_group().unwrap();
        let mut column = group.next_column().unwrap().unwrap();
        column
            .typed::<DoubleType>()
            .write_batch(&values, None, None)
            .unwrap();
        column.close().unwrap();
        group.close().unwrap();
        writer.close().unwrap();
        let bytes = bytes::Bytes::from(file);
        let meta = SerializedFileReader::new(bytes.clone()).unwrap();
        let encodings = meta
            .metadata()
            .row_group(0)
            .column(0)
            .encodings()
            .collect::<Vec<_>>();
        assert!(
            encodings.contains(&Encoding::RLE_DICTIONARY),
            "{encodings:?}"
        );
        assert!(encodings.contains(&Encoding::PLAIN), "{encodings:?}");
        assert_eq!(fast_against_general(bytes, false), Some(values.len()));
    }

    /// Dictionary indices that are malformed — a width past 32, a header cut short, an empty
    /// run, runs past the page's count (a count that would size gigabytes, a group count whose
    /// byte length would overflow), an index past the dictionary — leave the page to the
    /// general decoder (false), never a panic; well-formed runs and packed groups decode.
    #[test]
    fn malformed_dictionary_indices_are_handed_back() {
        let dict = [10.0, 11.0, 12.0, 13.0];
        let run = |bytes: &[u8], n: usize| {
            let mut out = Vec::new();
            let ok = append_dictionary_values(&mut out, bytes, n, &dict);
            (ok, out)
        };
        // Width 2: an RLE run of 3 × index 1 (header 3 << 1 = 6), then one packed group of
        // 8 indices (header 1 << 1 | 1 = 3): 0, 1, 2, 3, 3, 2, 1, 0 in 2 bits each, LSB first.
        let packed = [0b11_10_01_00u8, 0b00_01_10_11];
        let mut good = vec![2u8, 6, 1, 3];
        good.extend(packed);
        let (ok, out) = run(&good, 3 + 8);
        assert!(ok);
        assert_eq!(
            out,
            [11.0, 11.0, 11.0, 10.0, 11.0, 12.0, 13.0, 13.0, 12.0, 11.0, 10.0]
        );
        // The last group's padding past the page's count is not read as values.
        let (ok, out) = run(&good, 3 + 5);
        assert!(ok && out.len() == 8);
        // Width 0: every index is 0.
        assert_eq!(run(&[0, 3], 6), (true, vec![10.0; 6]));
        for (bytes, n, why) in [
            (vec![33u8, 2, 0, 0, 0, 0, 0], 1, "width past 32"),
            (vec![], 1, "no width byte"),
            (vec![2, 0x80], 1, "header cut short"),
            (vec![2, 0, 1], 1, "an empty run"),
            (vec![2, 10, 1], 3, "a run past the page's count"),
            (vec![2, 0x80, 0x80, 0x80, 0x80, 0x02, 1], 3, "a run of 2²⁷"),
            (
                vec![0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
                8,
                "2⁶² packed groups of width 0",
            ),
            (
                vec![
                    2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
                ],
                1,
                "a header past 64 bits",
            ),
            (vec![3, 2, 7], 1, "an index past the dictionary"),
            (vec![2, 3, 0xff], 8, "a packed group cut short"),
        ] {
            assert!(!run(&bytes, n).0, "{why}");
        }
    }
}

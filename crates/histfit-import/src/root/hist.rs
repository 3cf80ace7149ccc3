//! The streamer of ROOT's one-dimensional histograms (TH1 version 5 and later, as every ROOT 5 and
//! 6 writes): the TH1 part (name, bin count, x axis, sums and the per-bin sums of squared weights)
//! and the bin contents of the TH1C/S/I/F/D array. What HistFactory does not use (the other axes,
//! attributes, functions) is skipped by its byte count.

use super::cursor::{named, skip, Cursor, Truncated};

/// A read past the object's end, as the message the caller shows.
impl From<Truncated> for String {
    fn from(t: Truncated) -> String {
        format!("truncated or corrupt ({} runs past the object)", t.0)
    }
}

/// A one-dimensional histogram: the in-range bins only (ROOT's under- and overflow are dropped, as
/// HistFactory does).
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub class_name: String,
    pub name: String,
    pub title: String,
    /// Bin edges, `contents.len() + 1` of them.
    pub edges: Vec<f64>,
    pub contents: Vec<f64>,
    /// Per-bin sums of squared weights, when the histogram was filled with weights (`Sumw2`).
    pub sumw2: Option<Vec<f64>>,
    pub entries: f64,
}

impl Histogram {
    /// The bin uncertainties HistFactory uses: √(Σw²) for weighted histograms, else √(content),
    /// the square root taken in the precision of the stored contents (f32 for TH1F, f64 for TH1D),
    /// as the reference importer (pyhf through uproot and NumPy) does.
    pub fn errors(&self) -> Vec<f64> {
        match &self.sumw2 {
            Some(sumw2) => sumw2.iter().map(|v| v.sqrt()).collect(),
            None if self.class_name == "TH1D" || self.class_name == "TH1I" => {
                self.contents.iter().map(|v| v.sqrt()).collect()
            }
            None => self
                .contents
                .iter()
                .map(|&v| (v as f32).sqrt() as f64)
                .collect(),
        }
    }
}

/// Bytes per bin of each class's array, or why the class is not read.
fn element_size(class_name: &str) -> Result<usize, String> {
    match class_name {
        "TH1C" => Ok(1),
        "TH1S" => Ok(2),
        "TH1I" | "TH1F" => Ok(4),
        "TH1D" => Ok(8),
        other if other.starts_with("TH2") || other.starts_with("TH3") => Err(format!(
            "a {}-dimensional histogram: HistFactory inputs must be one-dimensional (TH1)",
            &other[2..3]
        )),
        _ => Err("not a one-dimensional histogram (TH1C, TH1S, TH1I, TH1F or TH1D)".into()),
    }
}

fn element(class_name: &str, raw: &[u8]) -> f64 {
    match class_name {
        "TH1C" => raw[0] as i8 as f64,
        "TH1S" => i16::from_be_bytes([raw[0], raw[1]]) as f64,
        "TH1I" => i32::from_be_bytes(raw.try_into().expect("4 bytes")) as f64,
        "TH1F" => f32::from_be_bytes(raw.try_into().expect("4 bytes")) as f64,
        _ => f64::from_be_bytes(raw.try_into().expect("8 bytes")),
    }
}

/// Reads a histogram object's bytes (the key's uncompressed record).
pub fn read(class_name: &str, bytes: &[u8]) -> Result<Histogram, String> {
    let size = element_size(class_name)?;
    let mut c = Cursor::new(bytes);
    let parsed = (|| -> Result<Histogram, String> {
        c.header("the histogram's version")?;
        let th1 = c.header("the TH1 part")?;
        if th1.version < 5 {
            return Err(format!(
                "TH1 version {} (ROOT before 5.0) is not supported",
                th1.version
            ));
        }
        let (name, title) = named(&mut c)?;
        for what in ["TAttLine", "TAttFill", "TAttMarker"] {
            if skip(&mut c, what)?.is_none() {
                return Err(format!("{what} written without a byte count"));
            }
        }
        let n_cells = c.i32("fNcells")?;
        let axis = axis(&mut c)?;
        for what in ["fYaxis", "fZaxis"] {
            if skip(&mut c, what)?.is_none() {
                return Err(format!("{what} written without a byte count"));
            }
        }
        c.i16("fBarOffset")?;
        c.i16("fBarWidth")?;
        let entries = c.f64("fEntries")?;
        for what in [
            "fTsumw",
            "fTsumw2",
            "fTsumwx",
            "fTsumwx2",
            "fMaximum",
            "fMinimum",
            "fNormFactor",
        ] {
            c.f64(what)?;
        }
        c.array_f64("fContour")?;
        let sumw2 = c.array_f64("fSumw2")?;
        match th1.end {
            Some(end) => c.seek(end, "the TH1 part")?,
            None => return Err("the TH1 part written without a byte count".into()),
        }
        let n = c.i32("the number of bins")?;
        let raw = c.counted(n, size, "the bin contents")?;
        let n_bins = axis.n_bins as usize;
        if n != n_cells || n as usize != n_bins + 2 {
            return Err(format!(
                "{n} stored bins where the x axis has {} (+2 for under- and overflow) and fNcells is {n_cells}",
                axis.n_bins
            ));
        }
        let cells: Vec<f64> = raw
            .chunks_exact(size)
            .map(|b| element(class_name, b))
            .collect();
        let edges = if axis.edges.is_empty() {
            let width = (axis.max - axis.min) / n_bins as f64;
            (0..=n_bins).map(|i| axis.min + width * i as f64).collect()
        } else if axis.edges.len() == n_bins + 1 {
            axis.edges
        } else {
            return Err(format!(
                "{} variable bin edges for {n_bins} bins",
                axis.edges.len()
            ));
        };
        // ROOT keeps Σw² per cell once Sumw2() was called; an array of another length is unused.
        let sumw2 = (sumw2.len() == cells.len()).then(|| sumw2[1..=n_bins].to_vec());
        Ok(Histogram {
            class_name: class_name.to_string(),
            name,
            title,
            edges,
            contents: cells[1..=n_bins].to_vec(),
            sumw2,
            entries,
        })
    })();
    parsed
}

struct Axis {
    n_bins: i32,
    min: f64,
    max: f64,
    edges: Vec<f64>,
}

/// TAxis: bin count, range and variable edges; the rest (labels, time format) skipped.
fn axis(c: &mut Cursor) -> Result<Axis, String> {
    let header = c.header("fXaxis")?;
    for what in ["the axis' TNamed part", "TAttAxis"] {
        if skip(c, what)?.is_none() {
            return Err(format!("{what} written without a byte count"));
        }
    }
    let n_bins = c.i32("the number of x bins")?;
    let min = c.f64("the x axis' minimum")?;
    let max = c.f64("the x axis' maximum")?;
    let edges = c.array_f64("the x axis' bin edges")?;
    if n_bins < 1 {
        return Err(format!("an x axis with {n_bins} bins"));
    }
    match header.end {
        Some(end) => c.seek(end, "fXaxis")?,
        None => return Err("fXaxis written without a byte count".into()),
    }
    Ok(Axis {
        n_bins,
        min,
        max,
        edges,
    })
}

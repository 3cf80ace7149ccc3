//! `histfit-plot`: plots drawn from the JSON documents histfit's commands write, so a plot can be
//! redrawn without refitting. Each kind reads one command's document:
//!
//! | kind | document |
//! |---|---|
//! | `brazil` | `histfit limit --json` (CLs against μ: observed, expected, ±1σ/±2σ, limits marked) |
//! | `scan` | `histfit scan --json` (2ΔNLL against μ, 1σ and 2σ lines) |
//! | `pulls` | `histfit fit --json` (pulls and constraints of constrained parameters) |
//! | `ranking` | `histfit ranking --json` (pre-/post-fit impacts, pulls on a second axis) |
//! | `correlation` | `histfit fit --json` (the correlation matrix, pruned to its largest entries) |
//! | `yields` | `histfit yields [--postfit] --json` (stacked samples, data, band, ratio panel) |
//! | `contour` | `histfit limit BKG --patchset … --json` (exclusion contour over the patch values) |
//! | `distributions` | `histfit distributions --json` (event-level fits: events histogrammed, the fit and its components, pulls) |
//!
//! [`figure`] turns a document into a [`Figure`] (data coordinates; tests read it back against
//! the document), [`render`] draws it as SVG or PNG with an embedded font.

pub mod contour;
pub mod figure;
mod kinds;
#[cfg(feature = "render")]
pub mod render;
pub mod style;

pub use figure::Figure;
pub use style::Style;

use serde_json::Value;
#[cfg(feature = "render")]
use std::path::Path;

/// Why a plot could not be made: the document lacks what the kind needs, or drawing failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlotError {
    #[error("{0}")]
    Document(String),
    #[error("drawing failed: {0}")]
    Render(String),
    #[error("{path}: {rule}")]
    Output { path: String, rule: String },
}

/// The plot kinds, by their CLI names.
pub const KINDS: [&str; 8] = [
    "brazil",
    "scan",
    "pulls",
    "ranking",
    "correlation",
    "yields",
    "contour",
    "distributions",
];

/// Choices a plot takes beyond its document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Options {
    /// How many parameters the ranking, pulls and correlation plots show (largest first).
    pub top: Option<usize>,
    /// Pixel size; each kind picks one from its content when `None`.
    pub size: Option<(u32, u32)>,
    /// Labels, units, log axes, sample colours and order, experiment label ([`style`]).
    pub style: Option<Style>,
    /// Draw only this region (channel) of a `yields` or `distributions` document: one figure
    /// per region, its samples in the colours the whole document gives them.
    pub region: Option<String>,
}

/// The figure of plot `kind` drawn from `doc`.
pub fn figure(kind: &str, doc: &Value, opts: &Options) -> Result<Figure, PlotError> {
    let full = doc;
    let one;
    let doc = match &opts.region {
        None => doc,
        Some(r) => {
            one = region(kind, doc, r)?;
            &one
        }
    };
    let mut fig = match kind {
        "brazil" => kinds::brazil(doc)?,
        "scan" => kinds::scan(doc)?,
        "pulls" => kinds::pulls(doc, opts.top)?,
        "ranking" => kinds::ranking(doc, opts.top.unwrap_or(20))?,
        "correlation" => kinds::correlation(doc, opts.top.unwrap_or(25))?,
        "yields" => kinds::yields(doc, full, opts.style.as_ref())?,
        "contour" => contour::figure(doc)?,
        "distributions" => kinds::distributions(doc)?,
        other => {
            return Err(PlotError::Document(format!(
                "unknown plot kind \"{other}\": expected one of {}",
                KINDS.join(", ")
            )))
        }
    };
    if let Some((w, h)) = opts.size {
        // Text grows with the picture: by the smaller of the two stretches, so that it still
        // fits the side that grew least.
        let stretch = (w as f64 / fig.width as f64).min(h as f64 / fig.height as f64);
        fig.font_scale = stretch.clamp(0.5, 4.0);
        fig.width = w;
        fig.height = h;
    }
    if let Some(style) = &opts.style {
        style.apply(&mut fig)?;
    }
    // Sizes chosen from the content grow with it (a pull per row): keep them drawable.
    fig.width = fig.width.clamp(100, MAX_PIXELS);
    fig.height = fig.height.clamp(100, MAX_PIXELS);
    Ok(fig)
}

/// The kinds whose documents hold regions (channels) that can be drawn one figure each.
pub const REGION_KINDS: [&str; 2] = ["yields", "distributions"];

/// The names of the regions (channels) of a `yields` or `distributions` document, in order.
pub fn regions(kind: &str, doc: &Value) -> Result<Vec<String>, PlotError> {
    if !REGION_KINDS.contains(&kind) {
        return Err(PlotError::Document(format!(
            "{kind} plots have no regions: one figure per region is drawn for {}",
            REGION_KINDS.join(" and ")
        )));
    }
    let command = format!("histfit {kind}");
    let channels = list_field(doc, "channels", kind, &command)?;
    Ok(channels
        .iter()
        .enumerate()
        .map(|(i, ch)| {
            ch["name"]
                .as_str()
                .map_or_else(|| format!("region{i}"), str::to_string)
        })
        .collect())
}

/// The document with only region `name`'s channel.
fn region(kind: &str, doc: &Value, name: &str) -> Result<Value, PlotError> {
    let names = regions(kind, doc)?;
    let i = names.iter().position(|n| n == name).ok_or_else(|| {
        PlotError::Document(format!(
            "region \"{name}\": no such channel (the document has {})",
            names.join(", ")
        ))
    })?;
    let mut one = doc.clone();
    one["channels"] = Value::Array(vec![doc["channels"][i].clone()]);
    Ok(one)
}

/// The largest picture drawn, in pixels per side (a PNG of 10⁴ × 10⁴ is 400 MB in memory).
pub const MAX_PIXELS: u32 = 10_000;

/// Draws `figure` to `path`: SVG or PNG by its extension.
#[cfg(feature = "render")]
pub fn write(figure: &Figure, path: &Path) -> Result<(), PlotError> {
    let out = |rule: String| PlotError::Output {
        path: path.display().to_string(),
        rule,
    };
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
    {
        Some(e) if e == "svg" => {
            let text = render::svg(figure)?;
            std::fs::write(path, text).map_err(|e| out(format!("cannot write: {e}")))
        }
        Some(e) if e == "png" => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                if !parent.is_dir() {
                    return Err(out("its directory does not exist".into()));
                }
            }
            render::png(figure, path)
        }
        _ => Err(out("the file name must end in .svg or .png".into())),
    }
}

/// A field every document of `kind` has, or an error saying which command writes such documents.
pub(crate) fn field<'a>(
    doc: &'a Value,
    key: &str,
    kind: &str,
    command: &str,
) -> Result<&'a Value, PlotError> {
    doc.get(key).filter(|v| !v.is_null()).ok_or_else(|| {
        PlotError::Document(format!(
            "the document has no \"{key}\": {kind} plots are drawn from the JSON of `{command}`"
        ))
    })
}

/// A list every document of `kind` has, or an error saying which command writes such documents.
pub(crate) fn list_field<'a>(
    doc: &'a Value,
    key: &str,
    kind: &str,
    command: &str,
) -> Result<&'a Vec<Value>, PlotError> {
    field(doc, key, kind, command)?.as_array().ok_or_else(|| {
        PlotError::Document(format!(
            "the document's \"{key}\" is not a list: {kind} plots are drawn from the JSON of `{command}`"
        ))
    })
}

/// A number of a document, or an error naming it.
pub(crate) fn number(v: &Value, what: &str) -> Result<f64, PlotError> {
    v.as_f64()
        .ok_or_else(|| PlotError::Document(format!("{what}: expected a number, got {v}")))
}

/// A list of numbers of a document, or an error naming it.
pub(crate) fn numbers(v: &Value, what: &str) -> Result<Vec<f64>, PlotError> {
    v.as_array()
        .ok_or_else(|| PlotError::Document(format!("{what}: expected a list of numbers")))?
        .iter()
        .enumerate()
        .map(|(i, x)| number(x, &format!("{what}[{i}]")))
        .collect()
}

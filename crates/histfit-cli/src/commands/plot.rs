//! `histfit plot KIND DOC.json -o FILE.svg|png`: a plot drawn from the JSON document of the command
//! that made its numbers (histfit-plot does the drawing), so plots are redrawn without refitting.

use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// brazil (limit), scan (scan), pulls (fit), ranking (ranking), correlation (fit),
    /// yields (yields), contour (limit --patchset), distributions (distributions: event-level fits).
    #[arg(value_parser = histfit_plot::KINDS)]
    kind: String,
    /// The JSON document of the command the plot is drawn from (`--json` output).
    document: String,
    /// The picture: FILE.svg or FILE.png.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// Parameters shown by ranking, pulls and correlation plots (largest first).
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// Picture size in pixels, WIDTHxHEIGHT (default: chosen from the content).
    #[arg(long, value_name = "WxH")]
    size: Option<String>,
    /// A style file (JSON): axis labels and units, log-y, sample colours, labels and stack
    /// order, an experiment label, per-region overrides (docs/plots.md).
    #[arg(long, value_name = "FILE")]
    style: Option<String>,
    /// One figure per region (yields, distributions): FILE_<region>.png for each channel.
    #[arg(long)]
    per_region: bool,
    /// Print what was drawn (each series and its values) as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let doc: Value = histfit_model::read_json(&a.document)?;
    let size = match &a.size {
        None => None,
        Some(s) => {
            let parsed = s
                .split_once('x')
                .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)));
            match parsed {
                Some((w, h)) if (100..=10000).contains(&w) && (100..=10000).contains(&h) => {
                    Some((w, h))
                }
                _ => bail!(
                    "--size {s}: expected WIDTHxHEIGHT in pixels (100 to 10000), e.g. 800x600"
                ),
            }
        }
    };
    let style = match &a.style {
        None => None,
        Some(path) => {
            let v: Value = histfit_model::read_json(path)?;
            Some(histfit_plot::Style::from_value(&v).map_err(|e| anyhow::anyhow!("{path}: {e}"))?)
        }
    };
    let opts = histfit_plot::Options {
        top: a.top,
        size,
        style,
        region: None,
    };
    let pictures: Vec<(PathBuf, Option<String>)> = if a.per_region {
        histfit_plot::regions(&a.kind, &doc)
            .map_err(|e| anyhow::anyhow!("{}: {e}", a.document))?
            .into_iter()
            .map(|region| (region_path(&a.output, &region), Some(region)))
            .collect()
    } else {
        vec![(a.output.clone(), None)]
    };
    // Two regions whose names differ only in characters a file name does not keep would
    // write one file: refused rather than one figure lost.
    for (i, (path, _)) in pictures.iter().enumerate() {
        if pictures[..i].iter().any(|(p, _)| p == path) {
            bail!(
                "--per-region: two regions would both be written to {}",
                path.display()
            );
        }
    }
    if let Some(style) = &opts.style {
        for w in style.unmatched(&a.kind, &doc) {
            eprintln!("warning: {w}");
        }
    }
    let mut drawn_figures = Vec::new();
    for (path, region) in &pictures {
        let opts = histfit_plot::Options {
            region: region.clone(),
            ..opts.clone()
        };
        let figure = histfit_plot::figure(&a.kind, &doc, &opts)
            .map_err(|e| anyhow::anyhow!("{}: {e}", a.document))?;
        histfit_plot::write(&figure, path)?;
        drawn_figures.push(json!({"output": path, "figure": figure}));
        if !a.json {
            eprintln!("wrote {}", path.display());
        }
    }
    if a.json {
        let mut out = json!({"kind": a.kind, "document": a.document});
        if a.per_region {
            out["figures"] = Value::Array(drawn_figures);
        } else if let Some(one) = drawn_figures.pop() {
            out["output"] = one["output"].clone();
            out["figure"] = one["figure"].clone();
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// FILE.png → FILE_<region>.png, the region's name kept to letters, digits, '-', '_' and '.'.
fn region_path(output: &std::path::Path, region: &str) -> PathBuf {
    let safe: String = region
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let stem = output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = output
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    output.with_file_name(format!("{stem}_{safe}{ext}"))
}

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
    let opts = histfit_plot::Options { top: a.top, size };
    let figure = histfit_plot::figure(&a.kind, &doc, &opts)
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.document))?;
    histfit_plot::write(&figure, &a.output)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&drawn(&a, &figure))?);
    } else {
        eprintln!("wrote {}", a.output.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// What was drawn: the figure (panels, axes, every element with its values) and where.
fn drawn(a: &Args, figure: &histfit_plot::Figure) -> Value {
    json!({
        "kind": a.kind,
        "document": a.document,
        "output": a.output,
        "figure": figure,
    })
}

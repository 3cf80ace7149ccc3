//! `histfit distributions`: the plot every event-level fit is shown with, as numbers — per
//! channel of one observable, the events histogrammed (Σw, √Σw²) against the expected counts
//! per bin at the fit (or pre-fit), in total and per component (a mixture's summands), with the
//! pulls. `histfit plot distributions` draws the document.

use super::OutputArgs;
use crate::model_args::{FitArgs, ModelArgs};
use crate::output;
use anyhow::{bail, Result};
use histfit_device::Likelihood;
use histfit_unbinned::histogram::{histograms, ChannelHistogram};
use serde_json::json;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    fit: FitArgs,
    /// Equal bins over each observable's domain.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    bins: u32,
    /// The expectation at the initial parameters (with --init and --fix) instead of the fit.
    #[arg(long)]
    prefit: bool,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (model, source, data, mut eval, base) = a.model.prepare_fit(&a.fit)?;
    if let Likelihood::HistFactory(_) = &model {
        bail!(
            "distributions draws event-level (HS3) models; a binned workspace's counts per bin are `histfit yields`"
        );
    }
    if a.fit.asimov {
        bail!("distributions draws the observed events; the Asimov dataset is not drawn yet");
    }
    let e = histfit_infer::parameter_estimate(&mut eval, &data, &base, !a.prefit)?;
    if let Some(r) = e.fit.as_ref().filter(|r| !r.converged) {
        eprintln!("warning: the fit did not converge: {}", r.reason);
    }
    let (events, at) = model
        .events_view(&e.params)
        .expect("an event-level model (checked above)");
    let (channels, notes) =
        histograms(events, &at, a.bins as usize).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    if channels.is_empty() {
        bail!("no channel of one observable to histogram");
    }
    let doc: Vec<_> = channels.iter().map(ChannelHistogram::document).collect();
    let names = &histfit_compute::Evaluator::space(&eval).names;
    a.out.emit(
        || {
            output::json(
                &source,
                &model,
                &json!({"kind": "distributions", "postfit": !a.prefit, "par_names": names,
                        "parameters": e.params, "channels": doc, "notes": notes}),
            )
        },
        || text(&channels, !a.prefit),
    )?;
    Ok(ExitCode::SUCCESS)
}

fn text(channels: &[ChannelHistogram], postfit: bool) -> String {
    let mut s = format!(
        "{} expected counts against the events (Σw ± √Σw²)\n",
        if postfit { "post-fit" } else { "pre-fit" }
    );
    for c in channels {
        s.push_str(&format!(
            "\nchannel {} ({} in [{}, {}], {} bins)\n{:>12} {:>12} {:>10} {:>12} {:>8}\n",
            c.channel,
            c.observable,
            c.edges[0],
            c.edges[c.edges.len() - 1],
            c.counts.len(),
            "bin low",
            "events",
            "±",
            "expected",
            "pull"
        ));
        for k in 0..c.counts.len() {
            s.push_str(&format!(
                "{:>12.6} {:>12.4} {:>10.4} {:>12.4} {:>8.3}\n",
                c.edges[k], c.counts[k], c.errors[k], c.expected[k], c.pulls[k]
            ));
        }
        let (n, e): (f64, f64) = (c.counts.iter().sum(), c.expected.iter().sum());
        s.push_str(&format!("{:>12} {n:>12.4} {:>10} {e:>12.4}\n", "total", ""));
    }
    s
}

//! `histfit yields`: pre-fit or post-fit yields per channel, sample and bin, with uncertainties
//! propagated through the full covariance (pre-fit: the constraints' widths; post-fit: the fit's
//! covariance), the channel totals with the correlations between samples, and the data.

use super::OutputArgs;
use crate::model_args::{FitArgs, ModelArgs};
use crate::output;
use anyhow::Result;
use histfit_compute::histfactory::{yields, ChannelYields};
use histfit_compute::CpuEvaluator;
use serde_json::json;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    fit: FitArgs,
    /// Post-fit yields (at the fit, with its covariance) instead of pre-fit ones.
    #[arg(long)]
    postfit: bool,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (model, source, data, mut eval, base) = a.model.prepare_fit(&a.fit)?;
    let binned = model.binned("yields")?.clone();
    let e = histfit_infer::parameter_estimate(&mut eval, &data, &base, a.postfit)?;
    if let Some(r) = e.fit.as_ref().filter(|r| !r.converged) {
        eprintln!("warning: the fit did not converge: {}", r.reason);
    }
    let main = data.to_vec()[..binned.n_main].to_vec();
    let table = yields(
        &mut CpuEvaluator::new(binned.clone()),
        &e.params,
        &e.covariance,
        &main,
    )?;
    a.out.emit(
        || {
            output::json(
                &source,
                &model,
                &json!({"kind": "yields", "postfit": a.postfit, "channels": table}),
            )
        },
        || text(&table, a.postfit),
    )?;
    Ok(ExitCode::SUCCESS)
}

fn text(channels: &[ChannelYields], postfit: bool) -> String {
    let mut s = format!(
        "{} yields (± propagated through the {} covariance)\n",
        if postfit { "post-fit" } else { "pre-fit" },
        if postfit { "fit's" } else { "constraints'" }
    );
    for c in channels {
        let width = c
            .samples
            .iter()
            .map(|x| x.name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        s.push_str(&format!("\nchannel {}\n", c.name));
        let cell =
            |y: f64, u: f64| format!("{:>12} ± {:<10}", format!("{y:.4}"), format!("{u:.4}"));
        for x in c.samples.iter().chain(std::iter::once(&c.total)) {
            s.push_str(&format!("  {:<width$}", x.name));
            for (y, u) in x.yields.iter().zip(&x.uncertainties) {
                s.push_str(&cell(*y, *u));
            }
            s.push('\n');
        }
        s.push_str(&format!("  {:<width$}", "data"));
        for d in &c.data {
            s.push_str(&format!("{:>12}   {:<10}", d, ""));
        }
        s.push('\n');
    }
    s
}

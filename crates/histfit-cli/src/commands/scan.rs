//! `histfit scan`: the profile likelihood scan of the POI.

use super::OutputArgs;
use crate::model_args::{FitArgs, ModelArgs};
use crate::{output, progress};
use anyhow::Result;
use histfit_infer::ScanResult;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    fit: FitArgs,
    /// POI range LO:HI [default: μ̂ ± 3σ̂ from a free fit, within the POI's bounds].
    #[arg(long = "poi-range", value_name = "LO:HI", allow_hyphen_values = true)]
    poi_range: Option<String>,
    /// Number of points (at least 1).
    #[arg(long, default_value_t = 21, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    points: usize,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (model, source, data, mut eval, base) = a.model.prepare_fit(&a.fit)?;
    let (lo, hi) = match &a.poi_range {
        Some(r) => super::parse_range(r)?,
        None => histfit_infer::scan::range_around_best_fit(&mut eval, &data, &base, 3.0)?,
    };
    let values = histfit_infer::linspace(lo, hi, a.points);
    let bar = progress::Bar::new("scan", values.len() + 1);
    let r = histfit_infer::profile_scan(&mut eval, &data, &values, &base, &mut |d, _| bar.set(d))?;
    bar.finish();
    if r.failed_fits() > 0 {
        eprintln!(
            "warning: {} of {} fits did not converge (see \"converged\" per point)",
            r.failed_fits(),
            values.len() + 1
        );
    }
    a.out
        .emit(|| output::json(&source, &model, &r), || table(&r))?;
    Ok(ExitCode::SUCCESS)
}

fn table(r: &ScanResult) -> String {
    let mut s = format!(
        "profile scan of {}: μ̂ = {:.6}, min twice_nll = {:.8}\n\n",
        r.poi, r.mu_hat, r.twice_nll_min
    );
    s.push_str(&format!(
        "{:>12}  {:>14}  {:>12}  {}\n",
        r.poi, "2ΔNLL", "twice_nll", "converged"
    ));
    for p in &r.points {
        s.push_str(&format!(
            "{:>12.6}  {:>14.8}  {:>12.6}  {}\n",
            p.mu,
            p.delta_twice_nll,
            p.twice_nll,
            if p.converged { "yes" } else { "NO" }
        ));
    }
    s
}

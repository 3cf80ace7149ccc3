//! `histfit ranking`: nuisance parameters ranked by their impact on the POI.

use super::OutputArgs;
use crate::model_args::{FitArgs, ModelArgs};
use crate::{output, progress};
use anyhow::Result;
use histfit_compute::Evaluator;
use histfit_infer::Ranking;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    fit: FitArgs,
    /// Show only the N highest-ranked parameters in the table (JSON has all).
    #[arg(long, default_value_t = 20)]
    top: usize,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (model, source, data, eval, base) = a.model.prepare_fit(&a.fit)?;
    let space = eval.space();
    let n = histfit_infer::ranking::ranked_parameters(space, &space.fixed).len();
    let bar = progress::Bar::new("ranking", 4 * n);
    let r = histfit_infer::ranking(&eval, &data, &base, &|d, _| bar.set(d))?;
    bar.finish();
    if r.failed_fits > 0 {
        eprintln!(
            "warning: {} of {} refits did not converge (entries with \"converged\": false)",
            r.failed_fits,
            4 * r.entries.len()
        );
    }
    a.out
        .emit(|| output::json(&source, &model, &r), || table(&r, a.top))?;
    Ok(ExitCode::SUCCESS)
}

fn table(r: &Ranking, top: usize) -> String {
    let width = r
        .entries
        .iter()
        .map(|e| e.name.len())
        .max()
        .unwrap_or(9)
        .max(9);
    let mut s = format!(
        "ranking of {} nuisance parameters: {} = {:.6} ± {:.6}\n\n",
        r.entries.len(),
        r.poi,
        r.mu_hat,
        r.mu_uncertainty
    );
    s.push_str(&format!(
        "{:<width$}  {:>8}  {:>10}  {:>11}  {:>11}  {:>11}  {:>11}\n",
        "parameter", "pull", "constraint", "post-fit +", "post-fit -", "pre-fit +", "pre-fit -"
    ));
    for e in r.entries.iter().take(top) {
        s.push_str(&format!(
            "{:<width$}  {:>+8.3}  {:>10.3}  {:>+11.5}  {:>+11.5}  {:>+11.5}  {:>+11.5}{}\n",
            e.name,
            e.pull,
            e.constraint,
            e.impact_postfit_up,
            e.impact_postfit_down,
            e.impact_prefit_up,
            e.impact_prefit_down,
            if e.converged {
                ""
            } else {
                "  (a refit did not converge)"
            }
        ));
    }
    s
}

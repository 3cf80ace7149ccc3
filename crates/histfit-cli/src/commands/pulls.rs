//! `histfit pulls`: a pull study — toys drawn at a fit and fitted with uncertainties, each free
//! parameter's pulls (θ̂ − θ_gen)/σ̂ summarised by mean and width with their standard errors.

use super::OutputArgs;
use crate::model_args::{FitArgs, ModelArgs};
use crate::{device, output, progress, timing};
use anyhow::Result;
use histfit_infer::toys::ToyRunner;
use histfit_infer::{GenPoint, PullStudy, Starts};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    fit: FitArgs,
    /// Toys in the study.
    #[arg(long = "n-toys", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(2..))]
    n_toys: u64,
    /// Seed of the toys (toy i of seed s is the `toys` command's toy i).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Generate at the conditional fit with the POI at this value (default: the free fit).
    #[arg(long, allow_negative_numbers = true)]
    mu: Option<f64>,
    /// Further starts of every toy's fit (as `fit --starts`; default: the model's).
    #[arg(long, value_name = "N")]
    starts: Option<usize>,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (model, source, data, eval, base) = a.model.prepare_fit_for_ensembles(&a.fit)?;
    let at = a.mu.map_or(GenPoint::FreeFit, GenPoint::ConditionalFit);
    let batcher = device::batcher(&eval);
    let runner = device::AnyRunner::new(&eval, batcher.as_ref());
    let gen = histfit_infer::generation_point(&mut *runner.single(), &data, &at, &base)?;
    timing::mark("generation point fitted");
    let bar = progress::Bar::new("pulls", a.n_toys as usize);
    let opts = histfit_infer::FitOptions {
        starts: a.starts.map_or(base.starts, Starts::Count),
        ..base
    };
    let study = histfit_infer::pull_study(&runner, &gen, a.seed, 0..a.n_toys, &opts, &|d, _| {
        bar.set(d)
    })?;
    bar.finish();
    timing::mark("toys fitted");
    if study.left_out > 0 {
        eprintln!(
            "warning: {} of {} toys left out of the pulls (a fit that failed or did not converge, or a Hessian not positive definite; each toy says why)",
            study.left_out,
            study.toys.len()
        );
    }
    a.out.emit(
        || output::json(&source, &model, &Doc::from(study.clone())),
        || table(&study),
    )?;
    timing::mark("output written");
    Ok(ExitCode::SUCCESS)
}

/// The `pulls --json` document.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Doc {
    pub kind: String,
    #[serde(flatten)]
    pub study: PullStudy,
}

impl From<PullStudy> for Doc {
    fn from(study: PullStudy) -> Self {
        Doc {
            kind: "pulls".into(),
            study,
        }
    }
}

fn table(s: &PullStudy) -> String {
    let mut t = format!(
        "pulls over {} toys (seed {}; {} left out)\n\n{:<20} {:>14} {:>18} {:>18}\n",
        s.used, s.seed, s.left_out, "parameter", "generated", "mean", "width"
    );
    for p in &s.parameters {
        t += &format!(
            "{:<20} {:>14.6} {:>9.4} ± {:<6.4} {:>9.4} ± {:<6.4}\n",
            p.name, p.generated, p.mean, p.mean_error, p.width, p.width_error
        );
    }
    t
}

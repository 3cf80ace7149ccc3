//! `histfit toys`: a toy ensemble generated at a fit and fitted, on the CPU or a GPU, in shards
//! if asked; its `--json` document is what `merge-toys` reads back.

use super::OutputArgs;
use crate::model_args::{FitArgs, ModelArgs};
use crate::{device, output, progress, timing};
use anyhow::Result;
use histfit_infer::toys::ToyRunner;
use histfit_infer::{GenPoint, Starts, ToyEnsemble};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    fit: FitArgs,
    /// Toys in the ensemble.
    #[arg(long = "n-toys", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    n_toys: u64,
    /// Seed of the toys: toy i of seed s is the same on every device and in every shard.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Generate at the conditional fit with the POI at this value (default: the free fit).
    #[arg(long, allow_negative_numbers = true)]
    mu: Option<f64>,
    /// Further starts of every toy's fit: on a model of up to 64 free parameters the fit's own
    /// (as `fit --starts`); above, N points around the model's initial point and a fit in the
    /// likelihood's own units besides the ensemble's basin probe and mirror starts, the lowest
    /// minimum kept (0: one start only). Default: by model size, and above 64 free parameters 32
    /// and the fit in the likelihood's own units where the probe finds a lower basin, none
    /// elsewhere.
    #[arg(long, value_name = "N")]
    starts: Option<usize>,
    /// Run only block K of N of the ensemble (merge the outputs with merge-toys).
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (model, source, data, eval, base) = a.model.prepare_fit_for_ensembles(&a.fit)?;
    let range = super::parse_shard(a.shard.as_deref(), a.n_toys)?;
    let at = a.mu.map_or(GenPoint::FreeFit, GenPoint::ConditionalFit);
    let batcher = device::batcher(&eval);
    let runner = device::AnyRunner::new(&eval, batcher.as_ref());
    // The generating point from the runner's one-off evaluator (the host's on a GPU, as every
    // baseline fit around an ensemble): the same point, hence the same toys, on every device.
    let gen = histfit_infer::generation_point(&mut *runner.single(), &data, &at, &base)?;
    timing::mark("generation point fitted");
    let bar = progress::Bar::new("toys", (range.end - range.start) as usize);
    // The asked starts are the toys' fits' (the generating point's fit is made without them:
    // the same toys either way).
    let toy_fits = histfit_infer::FitOptions {
        starts: a.starts.map_or(base.starts, Starts::Count),
        ..base
    };
    let fits = histfit_infer::toys::fit_toys_on(
        &runner,
        &gen,
        a.seed,
        a.n_toys,
        range,
        &toy_fits,
        &|d, _| bar.set(d),
    )?;
    bar.finish();
    timing::mark("ensemble fitted");
    let doc = ToyEnsemble::new(a.seed, a.n_toys, gen, fits).with_starts(toy_fits.starts);
    if doc.summary.failed > 0 {
        eprintln!(
            "warning: {} of {} toy fits did not converge (counted in \"failed\", flagged per toy)",
            doc.summary.failed, doc.summary.n
        );
    }
    if doc.summary.lower_basins > 0 {
        eprintln!(
            "warning: the likelihood has several minima near these toys: starts beyond the generating point (the mirror of its fit through it; where the two disagree, the model's initial point and points around it; those asked with --starts) found a lower minimum on {} of {} toys fitted from more than one start (each reports its lowest; \"second_start\" per toy says by how much)",
            doc.summary.lower_basins, doc.summary.second_starts
        );
    }
    a.out.emit(
        || output::json(&source, &model, &Doc::from(doc.clone())),
        || table(&doc),
    )?;
    timing::mark("output written");
    Ok(ExitCode::SUCCESS)
}

/// The `toys --json` document (also what `merge-toys` reads back): the ensemble of
/// histfit-infer with its kind.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Doc {
    pub kind: String,
    #[serde(flatten)]
    pub ensemble: ToyEnsemble,
}

impl From<ToyEnsemble> for Doc {
    fn from(ensemble: ToyEnsemble) -> Self {
        Doc {
            kind: "toys".into(),
            ensemble,
        }
    }
}

pub fn table(d: &ToyEnsemble) -> String {
    let s = &d.summary;
    // Converged toys without a fitted POI: the likelihood names none.
    let poi = if s.converged > 0 && d.toys.iter().all(|t| t.poi.is_nan()) {
        "fitted POI: none (the likelihood names no parameter of interest; --poi NAME chooses one)"
            .to_owned()
    } else {
        format!(
            "fitted POI: mean {:.6}, standard deviation {:.6}",
            s.poi_mean, s.poi_std
        )
    };
    format!(
        "{} toys (seed {}): {} converged, {} failed\n{poi}\n{}",
        s.n,
        d.seed,
        s.converged,
        s.failed,
        match s.second_starts {
            0 => String::new(),
            k => format!(
                "second starts: {k} toys, {} in a lower basin\n",
                s.lower_basins
            ),
        }
    )
}

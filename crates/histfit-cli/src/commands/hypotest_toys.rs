//! `histfit hypotest-toys`: CLs from signal+background and background-only toy ensembles.

use super::OutputArgs;
use crate::model_args::{FitArgs, ModelArgs};
use crate::output::{self, band_line};
use crate::{device, progress, timing};
use anyhow::Result;
use histfit_infer::{TestStat, ToyHypotest};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    fit: FitArgs,
    /// POI value to test (default 1; q0 tests 0).
    #[arg(long, allow_negative_numbers = true)]
    mu: Option<f64>,
    /// Toys in each of the two ensembles (signal+background and background-only).
    #[arg(long = "n-toys", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    n_toys: u64,
    /// Seed of the toys: toy i of seed s is the same on every device and in every shard.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Test statistic: qtilde (pyhf's default), q, q0 (discovery: the test of μ = 0), tmu or
    /// tmu_tilde (two-sided).
    #[arg(long = "test-stat", default_value = "qtilde")]
    test_stat: TestStat,
    #[command(flatten)]
    expected: super::ExpectedAt,
    /// Further starts of every toy's fit: on a model of up to 64 free parameters the fit's own
    /// (as `fit --starts`); above, N points around the model's initial point and a fit in the
    /// likelihood's own units besides the ensemble's basin probe and mirror starts, the lowest
    /// minimum kept (0: one start only). Default: by model size, and above 64 free parameters 32
    /// and the fit in the likelihood's own units where the probe finds a lower basin, none
    /// elsewhere.
    #[arg(long, value_name = "N")]
    starts: Option<usize>,
    /// Run only block K of N of both ensembles (merge the outputs with merge-toys).
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (model, source, data, eval, mut base) = a.model.prepare_fit_for_ensembles(&a.fit)?;
    if let Some(k) = a.starts {
        base.starts = histfit_infer::Starts::Count(k);
    }
    let range = super::parse_shard(a.shard.as_deref(), a.n_toys)?;
    let bar = progress::Bar::new("toys", 2 * (range.end - range.start) as usize);
    let batcher = device::batcher(&eval);
    let r = histfit_infer::toys::hypotest_toys_on(
        &device::AnyRunner::new(&eval, batcher.as_ref()),
        &data,
        super::tested_mu(a.mu, a.test_stat),
        a.test_stat,
        match a.test_stat {
            TestStat::Q0 => a.expected.resolve(&model),
            _ => None,
        },
        a.seed,
        a.n_toys,
        range,
        &base,
        &|d, _| bar.set(d),
    )?;
    bar.finish();
    timing::mark("baseline fits and both ensembles fitted");
    let failed = r.summary.failed_sb + r.summary.failed_b;
    if failed > 0 {
        eprintln!("warning: {failed} toys had a fit that did not converge; they are left out of the p-values and counted in failed_sb/failed_b");
    }
    if r.summary.lower_basins > 0 {
        eprintln!(
            "warning: the likelihood has several minima near these toys: starts beyond the generating point found a lower minimum for a fit of {} of {} toys fitted from more than one start (each statistic uses the lowest; \"second_start\" per toy says by how much)",
            r.summary.lower_basins, r.summary.second_starts
        );
    }
    a.out.emit(
        || output::json(&source, &model, &Doc::from(r.clone())),
        || table(&r),
    )?;
    timing::mark("output written");
    Ok(ExitCode::SUCCESS)
}

/// The `hypotest-toys --json` document.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Doc {
    pub kind: String,
    #[serde(flatten)]
    pub result: ToyHypotest,
}

impl From<ToyHypotest> for Doc {
    fn from(result: ToyHypotest) -> Self {
        Doc {
            kind: "hypotest_toys".into(),
            result,
        }
    }
}

pub fn table(r: &ToyHypotest) -> String {
    let s = &r.summary;
    let mut out = format!(
        "toy hypotest at μ = {} ({}, seed {}): q_obs = {:.6}\n",
        r.mu, r.test_stat, r.seed, r.q_obs
    );
    out.push_str(&format!(
        "CLs = {:.6}   CLs+b = {:.6} ± {:.6}   CLb = {:.6} ± {:.6}\n",
        s.cls_obs, s.clsb_obs, s.clsb_err, s.clb_obs, s.clb_err
    ));
    out.push_str(&band_line("expected CLs", &s.cls_exp));
    out.push_str(&format!(
        "toys: {} s+b, {} b-only used; failed fits: {} s+b, {} b-only\n",
        s.n_sb, s.n_b, s.failed_sb, s.failed_b
    ));
    if s.second_starts > 0 {
        out.push_str(&format!(
            "second starts: {} toys, {} in a lower basin\n",
            s.second_starts, s.lower_basins
        ));
    }
    out
}

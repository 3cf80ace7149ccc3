//! `histfit limit`: observed and expected CLs upper limits on the POI.

use super::grid::{self, GridArgs};
use super::OutputArgs;
use crate::model_args::{FitArgs, ModelArgs};
use crate::output::{self, band_line};
use crate::progress;
use anyhow::Result;
use histfit_infer::{TestStat, UpperLimit};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    fit: FitArgs,
    /// The CLs level of the limit (0.05: 95 % CL).
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// Test statistic: qtilde (pyhf's default) or q.
    #[arg(long = "test-stat", default_value = "qtilde")]
    test_stat: TestStat,
    /// Instead of root finding, scan LO:HI:N hypotests and interpolate.
    #[arg(long, value_name = "LO:HI:N", allow_hyphen_values = true)]
    scan: Option<String>,
    /// Toy-based limit: at each value of the scan (--scan, else 9 values around the asymptotic
    /// band), the CLs of N signal+background and N background-only toys — the toys of
    /// `hypotest-toys --mu μ --n-toys N --seed SEED` —, on the device asked.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    toys: Option<u64>,
    /// The toys' seed (--toys).
    #[arg(long, default_value_t = 0, requires = "toys")]
    seed: u64,
    #[command(flatten)]
    grid: GridArgs,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.grid.patchset.is_some() {
        return run_grid(&a);
    }
    if let Some(n) = a.toys {
        return run_toys(&a, n);
    }
    let (model, source, data, mut eval, base) = a.model.prepare_fit(&a.fit)?;
    let ts = a.test_stat;
    let r = match &a.scan {
        None => match histfit_infer::upper_limit(
            &mut eval,
            &data,
            a.alpha,
            ts,
            &base,
            histfit_infer::limits::DEFAULT_RTOL,
        ) {
            Err(e @ histfit_infer::InferError::AboveBound { .. }) => {
                return Ok(no_limit(&e.to_string()))
            }
            Err(histfit_infer::InferError::NoResult(why)) => return Ok(no_limit(&why)),
            r => r?,
        },
        Some(spec) => {
            let values = scan_values(spec)?;
            let bar = progress::Bar::new("limit scan", values.len());
            let r = histfit_infer::upper_limit_scan(
                &mut eval,
                &data,
                a.alpha,
                ts,
                &base,
                &values,
                &mut |d, _| bar.set(d),
            );
            bar.finish();
            match r {
                Err(histfit_infer::InferError::NoResult(why)) => return Ok(no_limit(&why)),
                r => r?,
            }
        }
    };
    super::warn_all(&r.warnings);
    a.out
        .emit(|| output::json(&source, &model, &r), || table(&r))?;
    Ok(ExitCode::SUCCESS)
}

fn table(r: &UpperLimit) -> String {
    let mut s = format!(
        "upper limit at CLs = {} ({}), {} hypotests\n",
        r.alpha,
        r.test_stat,
        r.evaluations.len()
    );
    s.push_str(&format!("observed       {:.6}\n", r.obs));
    s.push_str(&band_line("expected", &r.exp));
    s
}

/// The scan's values: LO:HI:N, checked.
fn scan_values(spec: &str) -> Result<Vec<f64>> {
    let parts: Vec<&str> = spec.split(':').collect();
    let bad = || anyhow::anyhow!("--scan {spec}: expected LO:HI:N, e.g. 0:5:51");
    if parts.len() != 3 {
        return Err(bad());
    }
    let (lo, hi) = super::parse_range(&format!("{}:{}", parts[0], parts[1]))?;
    let n: usize = parts[2].parse().map_err(|_| bad())?;
    if n < 2 {
        anyhow::bail!("--scan {spec}: N = {n} points; interpolating the limit needs at least 2");
    }
    Ok(histfit_infer::linspace(lo, hi, n))
}

/// The toy-based limit (`--toys N`).
fn run_toys(a: &Args, n_toys: u64) -> Result<ExitCode> {
    if a.grid.patchset.is_some() {
        anyhow::bail!("--toys and --patchset: a grid's limits are asymptotic");
    }
    let (model, source, data, mut eval, base) = a.model.prepare_fit_for_ensembles(&a.fit)?;
    let values = match &a.scan {
        Some(spec) => scan_values(spec)?,
        None => {
            // Around the asymptotic band: from half its −2σ edge to 1.5 × the largest limit.
            let asy = histfit_infer::upper_limit(
                &mut eval,
                &data,
                a.alpha,
                a.test_stat,
                &base,
                histfit_infer::limits::DEFAULT_RTOL,
            )?;
            let space = histfit_compute::Evaluator::space(&eval);
            let (lo_b, hi_b) = space.bounds[space.poi()?];
            let lo = (0.5 * asy.exp[0].min(asy.obs)).max(lo_b.max(0.0));
            let hi = (1.5 * asy.exp[4].max(asy.obs)).min(hi_b);
            histfit_infer::linspace(lo, hi, 9)
        }
    };
    let bar = progress::Bar::new("toy limit", values.len());
    let batcher = crate::device::batcher(&eval);
    let r = histfit_infer::limits::upper_limit_toys_on(
        &crate::device::AnyRunner::new(&eval, batcher.as_ref()),
        &data,
        a.alpha,
        a.test_stat,
        &base,
        &values,
        a.seed,
        n_toys,
        &mut |d, _| bar.set(d),
    );
    bar.finish();
    let r = match r {
        Err(histfit_infer::InferError::NoResult(why)) => return Ok(no_limit(&why)),
        r => r?,
    };
    super::warn_all(&r.warnings);
    a.out.emit(
        || {
            let mut v = serde_json::to_value(&r).expect("serializable");
            v["toys"] = serde_json::json!({"n_toys": n_toys, "seed": a.seed});
            output::json(&source, &model, &v)
        },
        || {
            format!(
                "{}toys: {n_toys} per hypothesis and point, seed {}\n",
                table(&r),
                a.seed
            )
        },
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Limits for every point of a patchset, each as `histfit limit --patch` computes it.
fn run_grid(a: &Args) -> Result<ExitCode> {
    if a.scan.is_some() {
        anyhow::bail!("--scan and --patchset: a grid finds each limit by root finding");
    }
    let g = grid::run(&a.model, &a.fit, &a.grid, &|eval, data, base| {
        Ok(histfit_infer::upper_limit(
            eval,
            &data,
            a.alpha,
            a.test_stat,
            base,
            histfit_infer::limits::DEFAULT_RTOL,
        )?)
    })?;
    g.write_csv(&a.grid, &grid::band_columns("obs", "exp"), |r| {
        grid::band_row(r.obs, r.exp, r.converged)
    })?;
    let doc = g.json("limit_grid", &a.model, &a.grid)?;
    a.out.emit(
        || doc,
        || {
            g.table(
                "observed     expected: -2σ        -1σ     median        +1σ        +2σ",
                |r| {
                    format!(
                        "{:>8.4}  {:>10.4} {:>10.4} {:>10.4} {:>10.4} {:>10.4}{}",
                        r.obs,
                        r.exp[0],
                        r.exp[1],
                        r.exp[2],
                        r.exp[3],
                        r.exp[4],
                        grid::convergence_note(r.converged)
                    )
                },
            )
        },
    )?;
    Ok(g.exit_code())
}

/// A limit that has no answer in the range asked: said on stderr, exit status 3 — as a grid's
/// point without a limit — not 2, which is bad input.
fn no_limit(why: &str) -> ExitCode {
    eprintln!("error: no upper limit: {why}");
    ExitCode::from(3)
}

//! `histfit hypotest`: asymptotic CLs at one POI value.

use super::grid::{self, GridArgs};
use super::OutputArgs;
use crate::model_args::{FitArgs, ModelArgs};
use crate::output::{self, band_line};
use anyhow::Result;
use histfit_infer::{AsymptoticCalculator, HypotestResult, TestStat};
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
    /// Test statistic: qtilde (pyhf's default), q, or q0 (discovery: the test of μ = 0).
    /// The two-sided tmu and tmu_tilde have no asymptotic CLs here: use hypotest-toys.
    #[arg(long = "test-stat", default_value = "qtilde")]
    test_stat: TestStat,
    #[command(flatten)]
    expected: super::ExpectedAt,
    #[command(flatten)]
    grid: GridArgs,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.grid.patchset.is_some() {
        return run_grid(&a);
    }
    let (model, source, data, mut eval, base) = a.model.prepare_fit(&a.fit)?;
    let mut calc = AsymptoticCalculator::new(&mut eval, data, a.test_stat, base)?;
    if a.test_stat == TestStat::Q0 {
        // The expected figures at the model's signal hypothesis, as `histfit significance`.
        calc = calc.with_q0_alternative(a.expected.resolve(&model))?;
    }
    let r = calc.hypotest(super::tested_mu(a.mu, a.test_stat))?;
    super::warn_all(&r.warnings);
    a.out
        .emit(|| output::json(&source, &model, &r), || table(&r))?;
    Ok(ExitCode::SUCCESS)
}

fn table(r: &HypotestResult) -> String {
    let mut s = format!(
        "hypotest at μ = {} ({}): q = {:.6}, q_A = {:.6}, μ̂ = {:.6}\n",
        r.mu, r.test_stat, r.q_obs, r.q_asimov, r.mu_hat
    );
    s.push_str(&format!(
        "CLs = {:.6e}   CLs+b = {:.6e}   CLb = {:.6e}\n",
        r.cls_obs, r.clsb_obs, r.clb_obs
    ));
    // BAND is +2σ…−2σ in the statistic: the ascending CLs are −2σ…+2σ in μ.
    s.push_str(&band_line("expected CLs", &r.cls_exp));
    s
}

/// The hypotest at `--mu` for every point of a patchset, each as `histfit hypotest --patch`
/// computes it.
fn run_grid(a: &Args) -> Result<ExitCode> {
    let g = grid::run(&a.model, &a.fit, &a.grid, &|eval, data, base| {
        let mut calc = AsymptoticCalculator::new(eval, data, a.test_stat, base.clone())?;
        Ok(calc.hypotest(super::tested_mu(a.mu, a.test_stat))?)
    })?;
    g.write_csv(&a.grid, &grid::band_columns("cls_obs", "cls_exp"), |r| {
        grid::band_row(r.cls_obs, r.cls_exp, r.converged)
    })?;
    let doc = g.json("hypotest_grid", &a.model, &a.grid)?;
    a.out.emit(
        || doc,
        || {
            g.table("CLs           expected CLs median", |r| {
                format!(
                    "{:.6e}  {:.6e}{}",
                    r.cls_obs,
                    r.cls_exp[2],
                    grid::convergence_note(r.converged)
                )
            })
        },
    )?;
    Ok(g.exit_code())
}

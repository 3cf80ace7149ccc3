//! `histfit significance`: the discovery test (q0), observed and expected.

use super::OutputArgs;
use crate::model_args::{FitArgs, ModelArgs};
use crate::output::{self, band_line};
use anyhow::Result;
use histfit_infer::Significance;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    fit: FitArgs,
    #[command(flatten)]
    expected: super::ExpectedAt,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (model, source, data, mut eval, base) = a.model.prepare_fit(&a.fit)?;
    let at = a.expected.resolve(&model);
    let r = histfit_infer::significance(&mut eval, &data, &base, at)?;
    super::warn_all(&r.warnings);
    let space = histfit_compute::Evaluator::space(&eval);
    let poi = space.poi_name().unwrap_or("μ").to_string();
    a.out
        .emit(|| output::json(&source, &model, &r), || table(&r, &poi))?;
    Ok(ExitCode::SUCCESS)
}

fn table(r: &Significance, poi: &str) -> String {
    format!(
        "discovery test (q0): μ̂ = {:.6}\nobserved  q0 = {:.6}  p0 = {:.6e}  Z = {:.4}\nexpected at {poi} = {}:  q0 = {:.6}  p0 = {:.6e}  Z = {:.4}\n{}",
        r.mu_hat,
        r.q0_obs,
        r.p0_obs,
        r.z_obs,
        r.expected_at,
        r.q0_exp,
        r.p0_exp,
        r.z_exp,
        band_line("expected p0", &r.p0_exp_band)
    )
}

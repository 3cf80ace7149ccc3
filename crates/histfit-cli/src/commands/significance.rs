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
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (model, source, data, mut eval, base) = a.model.prepare_fit(&a.fit)?;
    let r = histfit_infer::significance(&mut eval, &data, &base)?;
    super::warn_all(&r.warnings);
    a.out
        .emit(|| output::json(&source, &model, &r), || table(&r))?;
    Ok(ExitCode::SUCCESS)
}

fn table(r: &Significance) -> String {
    format!(
        "discovery test (q0): μ̂ = {:.6}\nobserved  q0 = {:.6}  p0 = {:.6e}  Z = {:.4}\nexpected  q0 = {:.6}  p0 = {:.6e}  Z = {:.4}\n{}",
        r.mu_hat,
        r.q0_obs,
        r.p0_obs,
        r.z_obs,
        r.q0_exp,
        r.p0_exp,
        r.z_exp,
        band_line("expected p0", &r.p0_exp_band)
    )
}

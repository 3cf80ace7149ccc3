//! `histfit devices`: the CPU and the CUDA devices histfit can use, or why there is none.

use super::OutputArgs;
use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    crate::output::emit(&crate::device::list(a.out.json), a.out.output.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

//! `histfit`: the command-line front end. It parses arguments, loads and compiles the workspace,
//! calls `histfit-infer`, and formats the result as a table or JSON. No statistics live here.
//! Errors print one line on stderr and exit with status 2.

mod model_args;
mod output;

use anyhow::Result;
use clap::{Parser, Subcommand};
use histfit_compute::{CpuEvaluator, Dataset};
use histfit_infer::{fit, FitOptions};
use model_args::ModelArgs;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "histfit",
    version,
    about = "Fast HistFactory statistics for pyhf JSON workspaces"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Maximum likelihood fit with uncertainties.
    Fit {
        #[command(flatten)]
        model: ModelArgs,
        /// Hold a parameter at a value: NAME=VALUE (repeatable).
        #[arg(long = "fix", value_name = "NAME=VALUE")]
        fix: Vec<String>,
        /// Machine-readable JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Write the output to this file instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<String>,
    },
    /// List channels, bins, samples, parameters by type and the POI.
    Inspect {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long)]
        json: bool,
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Fit {
            model,
            fix,
            json,
            output,
        } => {
            let (model, source) = model.load()?;
            let mut fixes = Vec::new();
            for f in &fix {
                fixes.push(model_args::parse_fix(&model, f)?);
            }
            let data = Dataset::observed(&model);
            let mut eval = CpuEvaluator::new(model.clone());
            let started = std::time::Instant::now();
            let result = fit(
                &mut eval,
                &data,
                &FitOptions {
                    fix: fixes,
                    uncertainties: true,
                    ..Default::default()
                },
            )?;
            let fit_seconds = started.elapsed().as_secs_f64();
            if !result.converged {
                eprintln!("warning: the fit did not converge: {}", result.reason);
            }
            if result.hessian_positive_definite == Some(false) {
                eprintln!("warning: the Hessian at the minimum is not positive definite; uncertainties are unreliable");
            }
            let text = if json {
                output::fit_json(&model, &source, &result, fit_seconds)
            } else {
                output::fit_table(&model, &result)
            };
            output::emit(&text, output.as_deref())?;
            Ok(if result.converged {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            })
        }
        Command::Inspect {
            model,
            json,
            output,
        } => {
            let (model, source) = model.load()?;
            let text = if json {
                output::inspect_json(&model, &source)
            } else {
                output::inspect_table(&model)
            };
            output::emit(&text, output.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

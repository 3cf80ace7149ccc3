//! `histfit`: the command-line front end. It parses arguments, loads and compiles the workspace,
//! calls `histfit-infer`, and formats the result as a table or JSON — one module per command
//! ([`commands`]). No statistics live here. Errors print one line on stderr and exit with
//! status 2.

mod commands;
mod device;
mod model_args;
mod output;
mod progress;

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "histfit",
    version,
    about = "Fast HistFactory statistics for pyhf JSON workspaces"
)]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
}

fn main() -> ExitCode {
    match Cli::parse().command.run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

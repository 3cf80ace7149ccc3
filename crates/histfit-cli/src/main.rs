//! `histfit`: the command-line front end. It parses arguments, loads and compiles the workspace,
//! calls `histfit-infer`, and formats the result as a table or JSON. No statistics live here.
//! Errors print one line on stderr and exit with status 2.

mod device;
mod model_args;
mod output;
mod progress;

use anyhow::Result;
use clap::{Parser, Subcommand};
use histfit_infer::{fit, AsymptoticCalculator, FitOptions, GenPoint, Starts, TestStat};
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
        /// Further starts searched for a lower minimum, per batch; batches go on (up to four)
        /// while they find different minima (default: by model size, 24 for up to 16 free
        /// parameters, none above 64).
        #[arg(long, value_name = "N")]
        starts: Option<usize>,
        /// Machine-readable JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Write the output to this file instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<String>,
    },
    /// Profile likelihood scan of the POI: 2ΔNLL and conditional fits per point.
    Scan {
        #[command(flatten)]
        model: ModelArgs,
        /// POI range LO:HI.
        #[arg(
            long = "poi-range",
            value_name = "LO:HI",
            default_value = "0:3",
            allow_hyphen_values = true
        )]
        poi_range: String,
        /// Number of points.
        #[arg(long, default_value_t = 21)]
        points: usize,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Asymptotic CLs hypothesis test at one POI value.
    Hypotest {
        #[command(flatten)]
        model: ModelArgs,
        /// POI value to test.
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
        mu: f64,
        /// Test statistic: qtilde (default), q, tmu, tmu_tilde.
        #[arg(long = "test-stat", default_value = "qtilde")]
        test_stat: TestStat,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Observed and expected upper limits on the POI (CLs = alpha).
    Limit {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long, default_value_t = 0.05)]
        alpha: f64,
        #[arg(long = "test-stat", default_value = "qtilde")]
        test_stat: TestStat,
        /// Instead of root finding, scan LO:HI:N hypotests and interpolate.
        #[arg(long, value_name = "LO:HI:N", allow_hyphen_values = true)]
        scan: Option<String>,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Discovery significance (q0): observed and expected p0 and Z.
    Significance {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Rank nuisance parameters by their impact on the POI (parallel refits).
    Ranking {
        #[command(flatten)]
        model: ModelArgs,
        /// Show only the N highest-ranked parameters in the table (JSON has all).
        #[arg(long, default_value_t = 20)]
        top: usize,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Generate and fit a toy ensemble (parallel, reproducible from the seed).
    Toys {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long = "n-toys", default_value_t = 1000)]
        n_toys: u64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Generate at the conditional fit with the POI at this value (default: the free fit).
        #[arg(long, allow_negative_numbers = true)]
        mu: Option<f64>,
        /// Run only block K of N of the ensemble (merge the outputs with merge-toys).
        #[arg(long, value_name = "K/N")]
        shard: Option<String>,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Toy-based CLs (signal+background and background-only ensembles).
    HypotestToys {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
        mu: f64,
        #[arg(long = "n-toys", default_value_t = 1000)]
        n_toys: u64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long = "test-stat", default_value = "qtilde")]
        test_stat: TestStat,
        #[arg(long, value_name = "K/N")]
        shard: Option<String>,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Merge the --json outputs of sharded `toys` or `hypotest-toys` runs into one result.
    MergeToys {
        /// JSON files written by `toys --json` or `hypotest-toys --json`.
        #[arg(required = true)]
        files: Vec<String>,
        /// Merge even when shards are missing (the result says how many toys it holds).
        #[arg(long = "allow-partial")]
        allow_partial: bool,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// List the devices histfit can use (the CPU and CUDA GPUs), or why there is no GPU.
    Devices {
        #[command(flatten)]
        out: OutputArgs,
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
            starts,
            json,
            output,
        } => {
            let (model, source, data, mut eval) = model.prepare()?;
            let mut fixes = Vec::new();
            for f in &fix {
                fixes.push(model_args::parse_fix(
                    histfit_compute::Evaluator::space(&eval),
                    f,
                )?);
            }
            let started = std::time::Instant::now();
            let result = fit(
                &mut eval,
                &data,
                &FitOptions {
                    fix: fixes,
                    uncertainties: true,
                    starts: starts.map_or(Starts::Auto, Starts::Count),
                    ..Default::default()
                },
            )?;
            let fit_seconds = started.elapsed().as_secs_f64();
            if !result.converged {
                eprintln!("warning: the fit did not converge: {}", result.reason);
            }
            for w in &result.warnings {
                eprintln!("warning: {w}");
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
        Command::Scan {
            model,
            poi_range,
            points,
            out,
        } => {
            let (model, source, data, mut eval) = model.prepare()?;
            let (lo, hi) = parse_range(&poi_range)?;
            let values = histfit_infer::linspace(lo, hi, points);
            let bar = progress::Bar::new("scan", values.len() + 1);
            let r = histfit_infer::profile_scan(
                &mut eval,
                &data,
                &values,
                &FitOptions::default(),
                &mut |d, _| bar.set(d),
            )?;
            bar.finish();
            if r.failed_fits() > 0 {
                eprintln!(
                    "warning: {} of {} fits did not converge (see \"converged\" per point)",
                    r.failed_fits(),
                    values.len() + 1
                );
            }
            let text = if out.json {
                output::json(&source, &model, &r)
            } else {
                output::scan_table(&r)
            };
            output::emit(&text, out.output.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Hypotest {
            model,
            mu,
            test_stat,
            out,
        } => {
            let (model, source, data, mut eval) = model.prepare()?;
            let ts = test_stat;
            let mut calc = AsymptoticCalculator::new(&mut eval, data, ts, FitOptions::default())?;
            let r = calc.hypotest(mu)?;
            warn_all(&r.warnings);
            let text = if out.json {
                output::json(&source, &model, &r)
            } else {
                output::hypotest_table(&r)
            };
            output::emit(&text, out.output.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Limit {
            model,
            alpha,
            test_stat,
            scan,
            out,
        } => {
            let (model, source, data, mut eval) = model.prepare()?;
            let ts = test_stat;
            let r = match scan {
                None => histfit_infer::upper_limit(
                    &mut eval,
                    &data,
                    alpha,
                    ts,
                    &FitOptions::default(),
                    1e-7,
                )?,
                Some(spec) => {
                    let parts: Vec<&str> = spec.split(':').collect();
                    let bad = || anyhow::anyhow!("--scan {spec}: expected LO:HI:N, e.g. 0:5:51");
                    if parts.len() != 3 {
                        return Err(bad());
                    }
                    let (lo, hi) = parse_range(&format!("{}:{}", parts[0], parts[1]))?;
                    let n: usize = parts[2].parse().map_err(|_| bad())?;
                    let values = histfit_infer::linspace(lo, hi, n);
                    let bar = progress::Bar::new("limit scan", n);
                    let r = histfit_infer::upper_limit_scan(
                        &mut eval,
                        &data,
                        alpha,
                        ts,
                        &FitOptions::default(),
                        &values,
                        &mut |d, _| bar.set(d),
                    )?;
                    bar.finish();
                    r
                }
            };
            warn_all(&r.warnings);
            let text = if out.json {
                output::json(&source, &model, &r)
            } else {
                output::limit_table(&r)
            };
            output::emit(&text, out.output.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Significance { model, out } => {
            let (model, source, data, mut eval) = model.prepare()?;
            let r = histfit_infer::significance(&mut eval, &data, &FitOptions::default())?;
            warn_all(&r.warnings);
            let text = if out.json {
                output::json(&source, &model, &r)
            } else {
                output::significance_table(&r)
            };
            output::emit(&text, out.output.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Ranking { model, top, out } => {
            let (model, source, data, eval) = model.prepare()?;
            let n = model
                .parameters
                .iter()
                .filter(|p| p.aux_index.is_some() && !p.fixed)
                .count();
            let bar = progress::Bar::new("ranking", 4 * n);
            let r =
                histfit_infer::ranking(&eval, &data, &FitOptions::default(), &|d, _| bar.set(d))?;
            bar.finish();
            if r.failed_fits > 0 {
                eprintln!(
                    "warning: {} of {} refits did not converge (entries with \"converged\": false)",
                    r.failed_fits,
                    4 * r.entries.len()
                );
            }
            let text = if out.json {
                output::json(&source, &model, &r)
            } else {
                output::ranking_table(&r, top)
            };
            output::emit(&text, out.output.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Toys {
            model,
            n_toys,
            seed,
            mu,
            shard,
            out,
        } => {
            let (model, source, data, mut eval) = model.prepare()?;
            let range = parse_shard(shard.as_deref(), n_toys)?;
            let at = mu.map_or(GenPoint::FreeFit, GenPoint::ConditionalFit);
            let gen = histfit_infer::generation_point(&mut eval, &data, &at)?;
            let bar = progress::Bar::new("toys", (range.end - range.start) as usize);
            let batcher = device::batcher(&eval);
            let fits = histfit_infer::toys::fit_toys_on(
                &device::AnyRunner::new(&eval, batcher.as_ref()),
                &gen,
                seed,
                range.clone(),
                &FitOptions::default(),
                &|d, _| bar.set(d),
            )?;
            bar.finish();
            let doc = histfit_infer::ToyEnsemble::new(seed, n_toys, gen, fits);
            if doc.summary.failed > 0 {
                eprintln!("warning: {} of {} toy fits did not converge (counted in \"failed\", flagged per toy)", doc.summary.failed, doc.summary.n);
            }
            let text = if out.json {
                output::json(&source, &model, &output::ToysDoc::from(doc))
            } else {
                output::toys_table(&doc)
            };
            output::emit(&text, out.output.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::HypotestToys {
            model,
            mu,
            n_toys,
            seed,
            test_stat,
            shard,
            out,
        } => {
            let (model, source, data, eval) = model.prepare()?;
            let ts = test_stat;
            let range = parse_shard(shard.as_deref(), n_toys)?;
            let bar = progress::Bar::new("toys", 2 * (range.end - range.start) as usize);
            let batcher = device::batcher(&eval);
            let r = histfit_infer::toys::hypotest_toys_on(
                &device::AnyRunner::new(&eval, batcher.as_ref()),
                &data,
                mu,
                ts,
                seed,
                n_toys,
                range,
                &FitOptions::default(),
                &|d, _| bar.set(d),
            )?;
            bar.finish();
            let failed = r.summary.failed_sb + r.summary.failed_b;
            if failed > 0 {
                eprintln!("warning: {failed} toys had a fit that did not converge; they are left out of the p-values and counted in failed_sb/failed_b");
            }
            let text = if out.json {
                output::json(&source, &model, &output::HypotestToysDoc::from(r))
            } else {
                output::hypotest_toys_table(&r)
            };
            output::emit(&text, out.output.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Devices { out } => {
            output::emit(&device::list(out.json), out.output.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::MergeToys {
            files,
            allow_partial,
            out,
        } => {
            let text = output::merge_toys(&files, out.json, allow_partial)?;
            output::emit(&text, out.output.as_deref())?;
            Ok(ExitCode::SUCCESS)
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

/// `--json` and `-o FILE`, shared by the inference commands.
#[derive(clap::Args, Debug, Clone)]
struct OutputArgs {
    /// Machine-readable JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Write the output to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<String>,
}

/// Parses LO:HI.
fn parse_range(s: &str) -> Result<(f64, f64)> {
    let bad = || anyhow::anyhow!("range \"{s}\": expected LO:HI with LO < HI, e.g. 0:3");
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    let (lo, hi): (f64, f64) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
        return Err(bad());
    }
    Ok((lo, hi))
}

fn warn_all(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// Parses `--shard K/N` (1-based K) into a range of toy indices.
fn parse_shard(shard: Option<&str>, n_toys: u64) -> Result<std::ops::Range<u64>> {
    let Some(spec) = shard else {
        return Ok(0..n_toys);
    };
    let bad = || anyhow::anyhow!("--shard {spec}: expected K/N with 1 ≤ K ≤ N, e.g. 2/10");
    let (k, n) = spec.split_once('/').ok_or_else(bad)?;
    let (k, n): (u64, u64) = (
        k.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if k == 0 || k > n {
        return Err(bad());
    }
    Ok(histfit_infer::shard_range(n_toys, k - 1, n)?)
}

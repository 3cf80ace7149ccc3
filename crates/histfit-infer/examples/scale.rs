//! Scale of input handling: the time and peak memory of reading, parsing, compiling, evaluating
//! and fitting a workspace, against its size (issue 22, item 3).
//!
//! ```text
//! cargo run --release -p histfit-infer --example scale -- file WS.json [REPEATS]
//! cargo run --release -p histfit-infer --example scale -- one CHANNELS BINS MODIFIERS [nostat]
//! cargo run --release -p histfit-infer --example scale -- sweep channels|bins|modifiers
//! ```
//!
//! `file` and `one` print one JSON line of phase times (seconds, the median of REPEATS for a
//! file) and the process's peak resident memory; `sweep` runs `one` in a fresh process per size
//! (so each peak is its own) and prints a table with the growth exponent of each column: the
//! slope of log(cost) against log(size) over the upper half of the sizes.

use histfit_compute::HistFactoryData;
use histfit_compute::{CpuEvaluator, Dataset, Evaluator};
use histfit_infer::{fit, FitOptions, Starts};
use histfit_model::{compile, workspace_from_text, Settings};
use histfit_testutil::synthetic::{workspace_json, Size};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// Peak resident memory of this process so far (MiB), from /proc.
fn peak_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// The phases the CLI runs for `histfit fit`, timed one by one.
fn phases(text: &str, fit_too: bool) -> Value {
    let t = Instant::now();
    let ws = workspace_from_text(text, "ws.json").expect("a valid workspace");
    let parse = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let model = Arc::new(compile(&ws, None, &Settings::smooth()).expect("compiles"));
    let compile_s = t.elapsed().as_secs_f64();
    let peak_compiled = peak_mib();
    drop(ws);
    let t = Instant::now();
    let data = Dataset::observed(&model);
    let mut eval = CpuEvaluator::new(model.clone());
    let init = model.init();
    let mut grad = vec![0.0; init.len()];
    let nll = eval.nll_grad(&init, &data, &mut grad).expect("evaluates");
    assert!(nll.is_finite());
    let first_eval = t.elapsed().as_secs_f64();
    let mut doc = json!({
        "bytes": text.len(), "parameters": init.len(), "bins": model.n_main,
        "parse_s": parse, "compile_s": compile_s, "first_eval_s": first_eval,
        "peak_after_compile_mib": peak_compiled,
    });
    if fit_too {
        let t = Instant::now();
        let r = fit(
            &mut eval,
            &data,
            &FitOptions {
                starts: Starts::Auto,
                ..FitOptions::default()
            },
        )
        .expect("fits");
        doc["fit_s"] = json!(t.elapsed().as_secs_f64());
        doc["fit_converged"] = json!(r.converged);
        doc["fit_evaluations"] = json!(r.evaluations);
        let t = Instant::now();
        let r = fit(
            &mut eval,
            &data,
            &FitOptions {
                uncertainties: true,
                ..FitOptions::default()
            },
        )
        .expect("fits");
        doc["fit_with_uncertainties_s"] = json!(t.elapsed().as_secs_f64());
        doc["uncertainties"] = json!(r.uncertainties.is_some());
        doc["warnings"] = json!(r.warnings);
    }
    doc["peak_mib"] = json!(peak_mib());
    doc
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("file") => {
            let path = &args[1];
            let repeats: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10);
            let mut runs = Vec::new();
            for _ in 0..repeats {
                let t = Instant::now();
                let text = std::fs::read_to_string(path).expect("readable");
                let read = t.elapsed().as_secs_f64();
                let mut d = phases(&text, true);
                d["read_s"] = json!(read);
                runs.push(d);
            }
            let mut out = runs[0].clone();
            for key in ["read_s", "parse_s", "compile_s", "first_eval_s", "fit_s", "fit_with_uncertainties_s"] {
                out[key] = json!(median(runs.iter().map(|r| r[key].as_f64().unwrap()).collect()));
            }
            println!("{out}");
        }
        Some("one") => {
            let n = |i: usize| args[i].parse::<usize>().expect("a count");
            let size = Size {
                channels: n(1),
                bins: n(2),
                modifiers: n(3),
                staterror: args.get(4).map(String::as_str) != Some("nostat"),
            };
            let t = Instant::now();
            let text = workspace_json(size);
            let generate = t.elapsed().as_secs_f64();
            let mut d = phases(&text, true);
            d["generate_s"] = json!(generate);
            d["size"] = json!([size.channels, size.bins, size.modifiers]);
            println!("{d}");
        }
        Some("sweep") => sweep(args.get(1).map(String::as_str).unwrap_or("channels")),
        _ => eprintln!("usage: scale file WS.json [REPEATS] | one C B M [nostat] | sweep channels|bins|modifiers"),
    }
}

fn sweep(which: &str) {
    let sizes: Vec<[usize; 3]> = match which {
        "channels" => [10, 100, 1_000, 10_000, 100_000]
            .iter()
            .map(|&c| [c, 2, 20])
            .collect(),
        "bins" => [10, 100, 1_000, 10_000, 100_000, 1_000_000]
            .iter()
            .map(|&b| [1, b, 20])
            .collect(),
        "modifiers" => [10, 100, 1_000, 10_000, 20_000]
            .iter()
            .map(|&m| [10, 10, m])
            .collect(),
        other => panic!("sweep {other}: channels, bins or modifiers"),
    };
    let exe = std::env::current_exe().expect("own path");
    let mut rows: Vec<Value> = Vec::new();
    let cols = [
        "parse_s",
        "compile_s",
        "first_eval_s",
        "fit_s",
        "fit_with_uncertainties_s",
        "peak_mib",
    ];
    println!(
        "| {which} | bytes | parameters | parse | compile | −ln L+∇ | fit | fit+unc. | peak MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for s in &sizes {
        let out = std::process::Command::new(&exe)
            .args([
                "one",
                &s[0].to_string(),
                &s[1].to_string(),
                &s[2].to_string(),
            ])
            .output()
            .expect("runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let Ok(d) = serde_json::from_str::<Value>(text.trim()) else {
            println!(
                "| {s:?} | failed: {} |",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            );
            continue;
        };
        let f = |k: &str| d[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "| {} | {} | {} | {:.4} s | {:.4} s | {:.5} s | {:.3} s | {:.3} s | {:.0} |",
            s.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("×"),
            d["bytes"],
            d["parameters"],
            f("parse_s"),
            f("compile_s"),
            f("first_eval_s"),
            f("fit_s"),
            f("fit_with_uncertainties_s"),
            f("peak_mib")
        );
        rows.push(d);
    }
    let axis = match which {
        "channels" => 0,
        "bins" => 1,
        _ => 2,
    };
    let half = rows.len() / 2;
    let upper = &rows[half.min(rows.len().saturating_sub(2))..];
    let xs: Vec<f64> = upper
        .iter()
        .map(|r| (r["size"][axis].as_f64().unwrap()).ln())
        .collect();
    let mut line = format!("| growth exponent (upper {} sizes) | | |", upper.len());
    for c in cols {
        let ys: Vec<f64> = upper
            .iter()
            .map(|r| r[c].as_f64().unwrap_or(f64::NAN).max(1e-9).ln())
            .collect();
        line.push_str(&format!(" {:.2} |", slope(&xs, &ys)));
    }
    println!("{line}");
}

/// Least-squares slope of y against x.
fn slope(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    sxy / sxx
}

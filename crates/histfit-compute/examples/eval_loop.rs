//! Profiling driver: evaluates NLL+gradient of a workspace N times at a fixed point.
//! `cargo run --release -p histfit-compute --example eval_loop -- tests/fixtures/workspace_tHu.json 1000`
//! (run under `valgrind --tool=callgrind` for instruction counts that do not depend on load).

use histfit_compute::{CpuEvaluator, Dataset, Evaluator};
use histfit_model::{compile, Settings, Workspace};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .map(String::as_str)
        .unwrap_or("tests/fixtures/workspace_tHu.json");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let text = std::fs::read_to_string(path).expect("readable workspace");
    let ws = Workspace::from_str(&text, path).expect("valid workspace");
    let model = Arc::new(compile(&ws, None, &Settings::smooth()).expect("compiles"));
    let data = Dataset::observed(&model);
    let mut ev = CpuEvaluator::new(model.clone());
    let p: Vec<f64> = model
        .parameters
        .iter()
        .enumerate()
        .map(|(i, q)| (q.init + 0.1 * ((i % 7) as f64 - 3.0) / 3.0).clamp(q.lower, q.upper))
        .collect();
    let mut g = vec![0.0; p.len()];
    let mut acc = 0.0;
    let t = std::time::Instant::now();
    for _ in 0..n {
        acc += ev.nll_grad(&p, &data, &mut g).expect("evaluates");
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "{n} evaluations: {:.2} µs each (checksum {acc:.6})",
        dt / n as f64 * 1e6
    );
}

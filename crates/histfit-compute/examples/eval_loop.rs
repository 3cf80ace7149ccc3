//! Profiling driver: evaluates NLL+gradient of a shipped workspace N times at the benchmarks'
//! point. `cargo run --release -p histfit-compute --example eval_loop -- workspace_tHu 1000`
//! (run under `valgrind --tool=callgrind` for instruction counts that do not depend on load).

use histfit_compute::{CpuEvaluator, Evaluator};
use histfit_testutil::{load, off_init_point, settings};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map(String::as_str).unwrap_or("workspace_tHu");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let (model, data) = load(name, settings("smooth"));
    let mut ev = CpuEvaluator::new(model.clone());
    let p = off_init_point(&model);
    let mut g = vec![0.0; p.len()];
    // Third argument: what to evaluate (`grad`: NLL and gradient, the default; `nll`: NLL only).
    let what = args.get(3).map(String::as_str).unwrap_or("grad");
    let mut acc = 0.0;
    let t = std::time::Instant::now();
    for _ in 0..n {
        acc += match what {
            "nll" => ev.nll(&p, &data),
            _ => ev.nll_grad(&p, &data, &mut g),
        }
        .expect("evaluates");
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "{n} evaluations: {:.2} µs each (checksum {acc:.6})",
        dt / n as f64 * 1e6
    );
}

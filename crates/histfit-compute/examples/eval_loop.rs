//! Profiling and timing driver: evaluates NLL+gradient of a shipped workspace N times at the
//! benchmarks' point, in 40 batches, and prints the mean and the fastest and median batch (the
//! fastest batch is the steadiest estimate on a shared VM, where criterion's mean moves by ±15 %
//! between runs). `cargo run --release -p histfit-compute --example eval_loop -- workspace_tHu
//! 200000 [grad|nll] [smooth|pyhf]` (run under `valgrind --tool=callgrind` for instruction counts that do not depend on
//! load).

use histfit_compute::{CpuEvaluator, Evaluator};
use histfit_testutil::{load, off_init_point, settings};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map(String::as_str).unwrap_or("workspace_tHu");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    // Fourth argument: the interpolation setting (`smooth`, the default, or `pyhf`).
    let setting = args.get(4).map(String::as_str).unwrap_or("smooth");
    let (model, data) = load(name, settings(setting));
    let mut ev = CpuEvaluator::new(model.clone());
    let p = off_init_point(&model);
    let mut g = vec![0.0; p.len()];
    // Third argument: what to evaluate (`grad`: NLL and gradient, the default; `nll`: NLL only).
    let what = args.get(3).map(String::as_str).unwrap_or("grad");
    let batches = 40.min(n.max(1));
    let per = n.div_ceil(batches);
    let mut acc = 0.0;
    let mut times = Vec::with_capacity(batches);
    let t = std::time::Instant::now();
    for _ in 0..batches {
        let tb = std::time::Instant::now();
        for _ in 0..per {
            acc += match what {
                "nll" => ev.nll(&p, &data),
                _ => ev.nll_grad(&p, &data, &mut g),
            }
            .expect("evaluates");
        }
        times.push(tb.elapsed().as_secs_f64() / per as f64 * 1e6);
    }
    let dt = t.elapsed().as_secs_f64();
    times.sort_by(f64::total_cmp);
    println!(
        "{} evaluations: {:.2} µs each; batches of {per}: fastest {:.2} µs, median {:.2} µs \
         (checksum {acc:.6})",
        batches * per,
        dt / (batches * per) as f64 * 1e6,
        times[0],
        times[batches / 2]
    );
}

//! Per-evaluation time of NLL+gradient on `workspace_tHu.json` as the minimum and median over
//! batches (the minimum is the steadiest estimate on a shared VM, where criterion's mean moves
//! by ±15 % between runs): `cargo run --release -p histfit-compute --example nll_timing [smooth|pyhf]`.

use histfit_compute::{CpuEvaluator, Evaluator};
use histfit_testutil::{load, off_init_point, settings};
use std::hint::black_box;

fn main() {
    let label = std::env::args().nth(1).unwrap_or_else(|| "smooth".into());
    let (model, data) = load("workspace_tHu", settings(&label));
    let mut ev = CpuEvaluator::new(model.clone());
    let p = off_init_point(&model);
    let mut g = vec![0.0; p.len()];
    let (batches, per) = (40, 5000);
    let mut t = Vec::with_capacity(batches);
    for _ in 0..batches {
        let start = std::time::Instant::now();
        for _ in 0..per {
            black_box(ev.nll_grad(black_box(&p), &data, &mut g).unwrap());
        }
        t.push(start.elapsed().as_secs_f64() / per as f64 * 1e6);
    }
    t.sort_by(f64::total_cmp);
    println!(
        "tHu/{label}/nll_grad: min {:.2} µs, median {:.2} µs over {batches} batches of {per}",
        t[0],
        t[batches / 2]
    );
}

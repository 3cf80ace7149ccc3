//! GPU benchmark (run on the lent H100): batched NLL+gradient of `workspace_tHu.json`, and toy
//! ensembles fitted in lockstep on the GPU against the same toys fitted on the CPU.
//!
//! `cargo run --release -p histfit-device --example gpu_bench -- [toy sizes...]`
//! (default sizes 1000 10000 100000; `HISTFIT_FIXTURES` points at tests/fixtures elsewhere).

use histfit_compute::{BatchEvaluator, CpuEvaluator, Dataset};
use histfit_cuda::CudaBatch;
use histfit_infer::batch::Batcher;
use histfit_infer::toys::{fit_toys, fit_toys_on, Batched};
use histfit_infer::{fit, FitOptions};
use histfit_testutil::{load, off_init_batch, settings};
use std::time::Instant;

fn main() {
    let sizes: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1000, 10_000, 100_000]
    } else {
        sizes
    };
    let window: usize = std::env::var("HISTFIT_GPU_WINDOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(Batched::<CudaBatch>::WINDOW);
    println!(
        "device: {:?}",
        histfit_cuda::devices().expect("a CUDA device")
    );

    let skip = |what: &str| std::env::var("HISTFIT_BENCH_SKIP").is_ok_and(|v| v.contains(what));
    // 1. Batched NLL+gradient, 1000 parameter vectors.
    for setting in ["smooth", "pyhf"] {
        if skip("batch") {
            break;
        }
        let (model, data) = load("workspace_tHu", settings(setting));
        let mut gpu = CudaBatch::new(model.clone(), 0).expect("GPU session");
        let n = model.n_params();
        let b = 1000;
        let params = off_init_batch(&model, b);
        let refs: Vec<&Dataset> = vec![&data; b];
        let (mut nll, mut grad) = (vec![0.0; b], vec![0.0; b * n]);
        for _ in 0..3 {
            gpu.nll_grad_batch(&params, &refs, &mut nll, &mut grad)
                .unwrap();
        }
        let reps = 50;
        let t = Instant::now();
        for _ in 0..reps {
            gpu.nll_grad_batch(&params, &refs, &mut nll, &mut grad)
                .unwrap();
        }
        let call = t.elapsed().as_secs_f64() / reps as f64;
        let kernel = gpu.time_kernel(&params, &refs, 200).unwrap();
        println!(
            "batch NLL+grad tHu/{setting}, B = {b}: {:.3} ms per call (upload, kernel, download), {:.3} ms kernel alone (scratch in {} memory)",
            call * 1e3,
            kernel * 1e3,
            if gpu.session().shared_scratch { "shared" } else { "global" }
        );
    }

    // 2. Toy ensembles: GPU lockstep vs CPU threads on the same toys.
    let (model, data) = load("workspace_tHu", settings("smooth"));
    let mut cpu = CpuEvaluator::new(model.clone());
    let gen = fit(&mut cpu, &data, &FitOptions::default()).unwrap();
    assert!(gen.converged);
    let o = FitOptions::default();
    let gpu = CudaBatch::new(model.clone(), 0).expect("GPU session");
    let mut rows = Vec::new();
    for &n in &sizes {
        let batcher = Batcher::new(gpu.clone());
        let runner = Batched {
            window,
            ..Batched::new(&batcher)
        };
        let t = Instant::now();
        let g = fit_toys_on(&runner, &gen.bestfit, 7, n, 0..n, &o, &|_, _| {}).unwrap();
        let dt = t.elapsed().as_secs_f64();
        let st = batcher.stats();
        let conv = g.iter().filter(|t| t.converged).count();
        println!(
            "GPU toys {n} (window {window}): {dt:.3} s ({:.0} toys/s), converged {conv}/{n}, {} launches, mean batch {:.0}; batch evaluator {:.3} s, leading {:.3} s",
            n as f64 / dt,
            st.launches,
            st.problems as f64 / st.launches.max(1) as f64,
            st.seconds_eval,
            st.seconds_lead
        );
        rows.push((n, dt));
        if n <= 10_000 && !skip("cpu") {
            let t = Instant::now();
            let c = fit_toys(&cpu, &gen.bestfit, 7, n, 0..n, &o, &|_, _| {}).unwrap();
            let dc = t.elapsed().as_secs_f64();
            let cc = c.iter().filter(|t| t.converged).count();
            let (mut dn, mut dp) = (0.0f64, 0.0f64);
            let mut both = 0;
            for (a, b) in c.iter().zip(&g) {
                assert_eq!(a.index, b.index);
                if a.converged && b.converged {
                    both += 1;
                    dn = dn.max((a.twice_nll - b.twice_nll).abs());
                    dp = dp.max((a.poi - b.poi).abs());
                }
            }
            println!(
                "  CPU ({} threads) {dc:.3} s, converged {cc}/{n}; over {both} toys converged on both: max |Δ twice_nll| {dn:.2e}, max |Δ POI| {dp:.2e}",
                rayon_threads()
            );
        }
    }
    println!("\n| toys | GPU seconds | toys/s |\n|---|---|---|");
    for (n, dt) in rows {
        println!("| {n} | {dt:.3} | {:.0} |", n as f64 / dt);
    }
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

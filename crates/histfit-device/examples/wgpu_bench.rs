//! The f32 evaluator beside CUDA f64 and the CPU in one run (issue: portable f32 evaluator):
//! batched −ln L + gradient of `workspace_tHu.json` × 1000 parameter vectors, and 1000 tHu toys
//! fitted, per device and (for wgpu) per precision strategy, each toy's −ln L compared with the
//! CPU's fit of the same toy.
//!
//! `cargo run --release -p histfit-device --example wgpu_bench -- [TOYS] [wgpu|vulkan|…]`
//! (`HISTFIT_FIXTURES` points at tests/fixtures elsewhere; devices that do not open are
//! reported and skipped).

use histfit_compute::{BatchEvaluator, CpuEvaluator, Dataset};
use histfit_cuda::CudaBatch;
use histfit_infer::batch::Batcher;
use histfit_infer::toys::{fit_toys, fit_toys_on, Batched, ToyFit};
use histfit_infer::{fit, FitOptions};
use histfit_testutil::{load, off_init_batch, settings};
use histfit_wgpu::{adapter::Backend, Precision, WgpuBatch};
use std::time::Instant;

/// Milliseconds per batched evaluation of `params` (best of three rounds of five).
fn batch_ms<B: BatchEvaluator>(b: &mut B, params: &[f64], data: &Dataset, count: usize) -> f64 {
    let n = params.len() / count;
    let refs: Vec<&Dataset> = vec![data; count];
    let (mut v, mut g) = (vec![0.0; count], vec![0.0; count * n]);
    b.nll_grad_batch(params, &refs, &mut v, &mut g).unwrap();
    (0..3)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..5 {
                b.nll_grad_batch(params, &refs, &mut v, &mut g).unwrap();
            }
            t.elapsed().as_secs_f64() * 1e3 / 5.0
        })
        .fold(f64::INFINITY, f64::min)
}

/// Toys fitted in lockstep on `b` (resident fits where the device has them and `resident`).
fn toys_on<B: BatchEvaluator + Clone>(
    b: &B,
    gen: &[f64],
    n: u64,
    resident: bool,
) -> (f64, Vec<ToyFit>) {
    let batcher = Batcher::new(b.clone());
    let runner = Batched {
        resident,
        ..Batched::new(&batcher)
    };
    let t = Instant::now();
    let r = fit_toys_on(&runner, gen, 7, n, 0..n, &FitOptions::default(), &|_, _| {}).unwrap();
    (t.elapsed().as_secs_f64(), r)
}

fn compare(cpu: &[ToyFit], other: &[ToyFit]) -> (f64, usize) {
    let mut worst = 0.0f64;
    let mut conv = 0;
    for (a, b) in cpu.iter().zip(other) {
        if a.converged && b.converged {
            worst = worst.max((a.twice_nll - b.twice_nll).abs() / 2.0);
        }
        conv += b.converged as usize;
    }
    (worst, conv)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n_toys: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let wgpu_device = args.get(2).cloned().unwrap_or_else(|| "wgpu".into());
    let backend = match wgpu_device.as_str() {
        "vulkan" => Backend::Vulkan,
        "metal" => Backend::Metal,
        _ => Backend::Any,
    };
    let (model, data) = load("workspace_tHu", settings("smooth"));
    let count = 1000;
    let params = off_init_batch(&model, count);
    let mut cpu = CpuEvaluator::new(model.clone());
    let gen = fit(&mut cpu, &data, &FitOptions::default())
        .unwrap()
        .bestfit;
    let t = Instant::now();
    let want = fit_toys(
        &cpu,
        &gen,
        7,
        n_toys,
        0..n_toys,
        &FitOptions::default(),
        &|_, _| {},
    )
    .unwrap();
    let cpu_s = t.elapsed().as_secs_f64();
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    println!("| device | evaluator | tHu × {count} NLL+grad (ms) | {n_toys} toys (s) | converged | worst Δ(−ln L) vs CPU |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| CPU ({threads} threads) | f64 | — | {cpu_s:.3} | {} | 0 |",
        want.iter().filter(|t| t.converged).count()
    );
    match CudaBatch::new(model.clone(), 0) {
        Ok(mut gpu) => {
            let ms = batch_ms(&mut gpu, &params, &data, count);
            let name = format!(
                "{:?}",
                histfit_cuda::devices()
                    .ok()
                    .and_then(|d| d.first().map(|g| g.name.clone()))
            );
            for resident in [false, true] {
                let (s, got) = toys_on(&gpu, &gen, n_toys, resident);
                let (worst, conv) = compare(&want, &got);
                println!(
                    "| {name} | CUDA f64 ({}) | {ms:.3} | {s:.3} | {conv} | {worst:.1e} |",
                    if resident {
                        "resident fits"
                    } else {
                        "lockstep"
                    }
                );
            }
        }
        Err(e) => println!("| cuda | — | not run: {e} | | | |"),
    }
    for prec in Precision::ALL {
        match WgpuBatch::new(model.clone(), backend, None, Some(prec)) {
            Ok(mut gpu) => {
                let ms = batch_ms(&mut gpu, &params, &data, count);
                let (s, got) = toys_on(&gpu, &gen, n_toys, false);
                let (worst, conv) = compare(&want, &got);
                let info = &gpu.session().gpu.info;
                println!(
                    "| {} ({}) | wgpu f32, {} | {ms:.3} | {s:.3} | {conv} | {worst:.1e} |",
                    info.name,
                    info.backend,
                    prec.name()
                );
            }
            Err(e) => println!("| {wgpu_device} | {} | not run: {e} | | | |", prec.name()),
        }
    }
}

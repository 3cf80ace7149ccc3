//! The precision strategies side by side: for every shipped workspace in both interpolation
//! settings, the worst |Δ(−ln L)| and |Δgradient| against the CPU f64 evaluator over a batch of
//! points (the init, a point off it, the CPU's best fit and random points around it), and the
//! time of one batched evaluation.
//!
//! `cargo run --release -p histfit-wgpu --example precision [-- BATCH [ADAPTER]]`

use histfit_compute::{BatchEvaluator, CpuEvaluator, Dataset, Evaluator};
use histfit_infer::fit::{fit, FitOptions};
use histfit_testutil::{load, settings, SETTINGS, WORKSPACES};
use histfit_wgpu::{adapter::Backend, Precision, WgpuBatch};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let batch: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let adapter: Option<usize> = args.get(2).and_then(|a| a.parse().ok());
    println!("workspace,setting,strategy,worst_dnll,worst_dgrad,fit_dnll,fit_dx,ms_per_batch");
    for ws in WORKSPACES {
        for st in SETTINGS {
            let (model, data) = load(ws, settings(st));
            let mut cpu = CpuEvaluator::new(model.clone());
            let best = fit(&mut cpu, &data, &FitOptions::default()).expect("CPU fit");
            let pts = histfit_testutil::points_around(&model, &best.bestfit, batch);
            let n = model.n_params();
            let mut want = vec![0.0; batch];
            let mut want_g = vec![0.0; batch * n];
            for (k, p) in pts.chunks(n).enumerate() {
                want[k] = cpu
                    .nll_grad(p, &data, &mut want_g[k * n..(k + 1) * n])
                    .unwrap();
            }
            for prec in Precision::ALL {
                let mut gpu = WgpuBatch::new(model.clone(), Backend::Any, adapter, Some(prec))
                    .expect("wgpu adapter");
                let refs: Vec<&Dataset> = (0..batch).map(|_| &data).collect();
                let (mut v, mut g) = (vec![0.0; batch], vec![0.0; batch * n]);
                gpu.nll_grad_batch(&pts, &refs, &mut v, &mut g).unwrap();
                let t0 = std::time::Instant::now();
                let reps = 5;
                for _ in 0..reps {
                    gpu.nll_grad_batch(&pts, &refs, &mut v, &mut g).unwrap();
                }
                let ms = t0.elapsed().as_secs_f64() * 1e3 / reps as f64;
                let dn = v
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                let dg = g
                    .iter()
                    .zip(&want_g)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                let mut one = histfit_compute::OneAtATime { batch: gpu };
                let (fd, fx) = match fit(&mut one, &data, &FitOptions::default()) {
                    Ok(r) => (
                        (r.twice_nll / 2.0 - best.twice_nll / 2.0).abs(),
                        r.bestfit
                            .iter()
                            .zip(&best.bestfit)
                            .map(|(a, b)| (a - b).abs())
                            .fold(0.0, f64::max),
                    ),
                    Err(_) => (f64::NAN, f64::NAN),
                };
                println!(
                    "{ws},{st},{},{dn:.2e},{dg:.2e},{fd:.2e},{fx:.2e},{ms:.2}",
                    prec.name()
                );
            }
        }
    }
}

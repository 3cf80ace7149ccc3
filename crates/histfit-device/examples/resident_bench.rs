//! Toy ensembles fitted whole on the GPU (resident fits) against the same toys fitted on the
//! CPU's threads and in host-driven lockstep on the GPU, in one run (issue 23's measurements).
//!
//! `cargo run --release -p histfit-device --example resident_bench -- WS SETTING N [CPU_N]
//! [LOCKSTEP_N]`: `WS` a fixture name (`HISTFIT_FIXTURES` points at the folder), `SETTING`
//! smooth or pyhf, `N` toys on the GPU, the first `CPU_N` (default min(N, 10000)) also on the
//! CPU and compared toy by toy, `LOCKSTEP_N` (default 0) in lockstep. Prints a table last.
//!
//! Environment: `HISTFIT_BENCH_MAX_ITER`, `HISTFIT_BENCH_MEMORY` (at most 16) the fits'
//! iteration limit and L-BFGS-B memory, device and CPU alike; `HISTFIT_BENCH_PROGRESS` prints the
//! device's progress reports with their times; `HISTFIT_BENCH_RAW_ONLY` stops after the raw
//! device fits; `HISTFIT_BENCH_SKIP_CLS` skips the toy CLs; `HISTFIT_BENCH_WIDTH_SCALES` fits in
//! the constraint widths' units instead of the ensembles' curvature units.

use histfit_compute::{CpuEvaluator, ResidentFits, ResidentRequest};
use histfit_cuda::CudaBatch;
use histfit_infer::asymptotic::TestStat;
use histfit_infer::batch::Batcher;
use histfit_infer::toys::{fit_toys, fit_toys_on, hypotest_toys, hypotest_toys_on, Batched};
use histfit_infer::{fit, FitOptions};
use histfit_testutil::{load, settings};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ws = args.first().map_or("workspace_tHu", |s| s.as_str());
    let setting = args.get(1).map_or("smooth", |s| s.as_str());
    let n: u64 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(1000);
    let n_cpu: u64 = args
        .get(3)
        .and_then(|v| v.parse().ok())
        .unwrap_or(n.min(10_000));
    let n_lock: u64 = args.get(4).and_then(|v| v.parse().ok()).unwrap_or(0);
    let (model, data) = load(ws, settings(setting));
    println!(
        "{ws} ({setting}): {} parameters, {} main bins; device {:?}",
        model.n_params(),
        model.n_main,
        histfit_cuda::devices().expect("a CUDA device")[0].name
    );
    let mut cpu = CpuEvaluator::new(model.clone());
    let gen = fit(&mut cpu, &data, &FitOptions::default()).unwrap();
    assert!(gen.converged, "the observed fit: {}", gen.reason);
    let gen = gen.bestfit;
    let gpu = CudaBatch::new(model.clone(), 0).expect("GPU session");
    let seed = 7;
    let mut table: Vec<(String, f64)> = Vec::new();

    // The kernel alone: statuses and counts of the raw device fits.
    let space = histfit_compute::Evaluator::space(&cpu).clone();
    let lower: Vec<f64> = space.bounds.iter().map(|b| b.0).collect();
    let upper: Vec<f64> = space.bounds.iter().map(|b| b.1).collect();
    // HISTFIT_BENCH_MAX_ITER, HISTFIT_BENCH_MEMORY: the fits' iteration limit and L-BFGS-B
    // memory (the optimizer's defaults otherwise), on the device and the CPU alike.
    let env = |k: &str, d: usize| match std::env::var(k) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{k}={v}: not a whole number")),
        Err(_) => d,
    };
    let od0 = histfit_optim::Options::default();
    let od = histfit_optim::Options {
        max_iterations: env("HISTFIT_BENCH_MAX_ITER", od0.max_iterations),
        memory: env("HISTFIT_BENCH_MEMORY", od0.memory),
        ..od0
    };
    assert!(
        (1..=histfit_cuda::resident::MAX_MEMORY).contains(&od.memory),
        "HISTFIT_BENCH_MEMORY: 1 to {} pairs on the device",
        histfit_cuda::resident::MAX_MEMORY
    );
    let o = FitOptions {
        optimizer: Some(od),
        ..FitOptions::default()
    };
    // The ensembles' units (`curvature_scales` at the generating point, as every toy ensemble
    // takes them), or with HISTFIT_BENCH_WIDTH_SCALES the likelihood's (constraint widths, as
    // before session 16) — on the device and the CPU alike.
    let scales = if std::env::var_os("HISTFIT_BENCH_WIDTH_SCALES").is_some() {
        space.scales.clone()
    } else {
        histfit_infer::fit::curvature_scales(&mut cpu, &gen, &o).unwrap()
    };
    let o = FitOptions {
        scales: Some(scales.clone()),
        ..o
    };
    let req = |indices: std::ops::Range<u64>| ResidentRequest {
        gen_params: &gen,
        seed,
        indices,
        init: &gen,
        model_init: &space.init,
        starts: None,
        list: None,
        fixed: &space.fixed,
        lower: &lower,
        upper: &upper,
        scales: &scales,
        kinks: &space.kinked,
        settings: histfit_infer::fit::resident_settings(&od),
        report: model.poi,
        want_params: false,
        progress: None,
    };
    let mut g1 = gpu.clone();
    let _ = g1.fit_toys_resident(&req(0..100)).unwrap(); // kernels compiled, caches warm
    let t = Instant::now();
    // HISTFIT_BENCH_PROGRESS: print the device's progress reports as they come (with the time).
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let show = |k: usize| {
        let d = seen.fetch_add(k, std::sync::atomic::Ordering::Relaxed) + k;
        eprintln!("progress {d}/{n} at {:.3} s", t.elapsed().as_secs_f64());
    };
    let raw = g1
        .fit_toys_resident(&ResidentRequest {
            progress: std::env::var_os("HISTFIT_BENCH_PROGRESS")
                .map(|_| histfit_compute::Progress(&show)),
            ..req(0..n)
        })
        .unwrap();
    let dt_raw = t.elapsed().as_secs_f64();
    let mut by_status = std::collections::BTreeMap::new();
    for r in &raw {
        *by_status.entry(format!("{:?}", r.status)).or_insert(0) += 1;
    }
    let certified = raw
        .iter()
        .filter(|r| {
            r.status == histfit_compute::ResidentStatus::Converged
                && r.projected_gradient <= histfit_infer::fit::CERTIFY_PG
                && r.unmoved == 0
        })
        .count();
    // Certified but not finished to POLISH_PG: the ensembles fit these again on the host.
    let short = raw
        .iter()
        .filter(|r| {
            r.projected_gradient > histfit_infer::fit::POLISH_PG
                && r.projected_gradient <= histfit_infer::fit::CERTIFY_PG
        })
        .count();
    println!("device fits certified but above POLISH_PG (refitted on the host): {short}");
    let bounded = raw.iter().filter(|r| r.bounded).count();
    println!("device fits that met a bound: {bounded}");
    let mean = |f: &dyn Fn(&histfit_compute::ResidentFit) -> f64| {
        raw.iter().map(f).sum::<f64>() / raw.len().max(1) as f64
    };
    println!(
        "raw device fits of {n} toys: {dt_raw:.3} s; statuses {by_status:?}; certified {certified}; mean iterations {:.1}, evaluations {:.1}; max projected gradient of certified {:.2e}",
        mean(&|r| r.iterations as f64),
        mean(&|r| r.evaluations as f64),
        raw.iter()
            .filter(|r| r.projected_gradient <= 1e-3)
            .map(|r| r.projected_gradient)
            .fold(0.0, f64::max)
    );
    // The spread of the work: the ensemble ends with its slowest toys (one worker block each).
    let mut its: Vec<usize> = raw.iter().map(|r| r.iterations).collect();
    its.sort_unstable();
    let q = |f: f64| {
        its.get((its.len().saturating_sub(1) as f64 * f) as usize)
            .copied()
            .unwrap_or(0)
    };
    println!(
        "iterations per toy: median {}, p90 {}, p99 {}, p99.9 {}, max {}; toys above 1000 iterations: {}",
        q(0.5),
        q(0.9),
        q(0.99),
        q(0.999),
        q(1.0),
        its.iter().filter(|&&i| i > 1000).count()
    );
    table.push((format!("device kernel, {n} toys (s)"), dt_raw));
    if std::env::var("HISTFIT_BENCH_RAW_ONLY").is_ok() {
        return;
    }

    // The split: two workers' counts and two ranges give the same bits.
    let ns = n.min(20_000);
    let halves = {
        let mut a = gpu.fit_toys_with_workers(&req(0..ns / 2), 257).unwrap();
        a.extend(gpu.fit_toys_with_workers(&req(ns / 2..ns), 389).unwrap());
        a
    };
    let same = raw.iter().zip(&halves).all(|(a, b)| {
        a.nll.to_bits() == b.nll.to_bits()
            && a.poi.to_bits() == b.poi.to_bits()
            && a.constant.to_bits() == b.constant.to_bits()
            && a.iterations == b.iterations
    });
    println!(
        "split of the first {ns} toys (two launches, 257 and 389 workers) bit-identical to one launch: {same}"
    );

    // The whole ensemble as inference runs it (device fits + host refits of the uncertified).
    let batcher = Batcher::new(gpu.clone());
    let runner = Batched::new(&batcher);
    let t = Instant::now();
    let dev = fit_toys_on(&runner, &gen, seed, n, 0..n, &o, &|_, _| {}).unwrap();
    let dt_dev = t.elapsed().as_secs_f64();
    let conv_dev = dev.iter().filter(|t| t.converged).count();
    println!(
        "GPU resident ensemble {n} toys: {dt_dev:.3} s ({:.0} toys/s), converged {conv_dev}/{n}, {} lockstep launches for refits",
        n as f64 / dt_dev,
        batcher.stats().launches
    );
    table.push((format!("GPU resident, {n} toys (s)"), dt_dev));

    if n_cpu > 0 {
        let t = Instant::now();
        let c = fit_toys(&cpu, &gen, seed, n_cpu, 0..n_cpu, &o, &|_, _| {}).unwrap();
        let dc = t.elapsed().as_secs_f64();
        let cc = c.iter().filter(|t| t.converged).count();
        let (mut dn, mut dp, mut over_n, mut over_p, mut conv_diff) = (0.0f64, 0.0f64, 0, 0, 0);
        let mut worst = Vec::new();
        for (a, b) in c.iter().zip(&dev) {
            assert_eq!(a.index, b.index);
            if a.converged != b.converged {
                conv_diff += 1;
            }
            if a.converged && b.converged {
                let (x, y) = ((a.twice_nll - b.twice_nll).abs(), (a.poi - b.poi).abs());
                dn = dn.max(x);
                dp = dp.max(y);
                over_n += usize::from(x > 1e-6);
                over_p += usize::from(y > 2e-4);
                if x > 1e-6 || y > 2e-4 {
                    let r = &raw[a.index as usize];
                    worst.push(format!(
                        "toy {}: CPU {:.8} / {:.5}, GPU {:.8} / {:.5} (raw {:?} pg {:.1e} bounded {})",
                        a.index, a.twice_nll, a.poi, b.twice_nll, b.poi, r.status, r.projected_gradient, r.bounded
                    ));
                }
            }
        }
        for w in worst.iter().take(8) {
            println!("  mismatch {w}");
        }
        println!(
            "CPU ({} threads) {n_cpu} toys: {dc:.3} s, converged {cc}/{n_cpu}; vs GPU: max |Δ twice_nll| {dn:.2e} ({over_n} above 1e-6), max |Δ POI| {dp:.2e} ({over_p} above 2e-4), converged differently {conv_diff}",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        table.push((format!("CPU threads, {n_cpu} toys (s)"), dc));
        table.push((
            format!("speed-up over the CPU at {n_cpu} toys"),
            dc / (dt_dev * n_cpu as f64 / n as f64),
        ));
    }
    if n_lock > 0 {
        let runner = Batched {
            resident: false,
            ..Batched::new(&batcher)
        };
        let t = Instant::now();
        let l = fit_toys_on(&runner, &gen, seed, n_lock, 0..n_lock, &o, &|_, _| {}).unwrap();
        let dl = t.elapsed().as_secs_f64();
        println!(
            "GPU lockstep {n_lock} toys: {dl:.3} s, converged {}/{n_lock}",
            l.iter().filter(|t| t.converged).count()
        );
        table.push((format!("GPU lockstep, {n_lock} toys (s)"), dl));
    }

    // Toy CLs: device vs CPU on the same seed.
    if model.poi.is_some() && std::env::var("HISTFIT_BENCH_SKIP_CLS").is_err() {
        let n_cls = n_cpu.clamp(1, 2000);
        // Each ensemble in its own units (at its generating point), as the CLI's.
        let o = FitOptions {
            scales: o
                .scales
                .clone()
                .filter(|_| std::env::var_os("HISTFIT_BENCH_WIDTH_SCALES").is_some()),
            ..o.clone()
        };
        let t = Instant::now();
        let h_dev = hypotest_toys_on(
            &runner,
            &data,
            1.0,
            TestStat::TmuTilde,
            None,
            3,
            n_cls,
            0..n_cls,
            &o,
            &|_, _| {},
        )
        .unwrap();
        let dh = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let h_cpu = hypotest_toys(
            &cpu,
            &data,
            1.0,
            TestStat::TmuTilde,
            3,
            n_cls,
            0..n_cls,
            &o,
            &|_, _| {},
        )
        .unwrap();
        let dhc = t.elapsed().as_secs_f64();
        let pairs: Vec<_> = h_dev
            .toys_sb
            .iter()
            .chain(&h_dev.toys_b)
            .zip(h_cpu.toys_sb.iter().chain(&h_cpu.toys_b))
            .collect();
        let dq = pairs
            .iter()
            .map(|(a, b)| (a.q - b.q).abs())
            .fold(0.0, f64::max);
        for (k, (a, b)) in pairs
            .iter()
            .enumerate()
            .filter(|(_, (a, b))| (a.q - b.q).abs() > 1e-5)
            .take(6)
        {
            println!(
                "  q mismatch ({} toy {}): GPU {} ({:?}) CPU {} ({:?})",
                if k < n_cls as usize { "s+b" } else { "b" },
                a.index,
                a.q,
                a.reason,
                b.q,
                b.reason
            );
        }
        println!(
            "toy CLs at mu = 1, {n_cls} + {n_cls} toys: GPU {dh:.3} s CLs {:.6}, CPU {dhc:.3} s CLs {:.6}; max |Δq| {dq:.2e}",
            h_dev.summary.cls_obs, h_cpu.summary.cls_obs
        );
        table.push((format!("toy CLs GPU, 2×{n_cls} toys (s)"), dh));
        table.push((format!("toy CLs CPU, 2×{n_cls} toys (s)"), dhc));
    }
    println!("\n| {ws} {setting} | value |\n|---|---|");
    for (k, v) in table {
        println!("| {k} | {v:.4} |");
    }
}

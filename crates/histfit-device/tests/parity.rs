//! GPU parity with the CPU f64 reference (the contract of the CUDA backend):
//! tier 1 NLL rtol 1e-10, tier 2 gradient atol 1e-8, tier 3 best-fit atol 2e-4, tier 4 fit
//! NLL atol 1e-6, on every shipped workspace under both interpolation settings; batched
//! evaluation equal to one-at-a-time; toys bit-identical to the CPU generator.
//!
//! The tests that need a CUDA device are marked ignored, so that a machine without one reports
//! them as ignored rather than passed; run them on a GPU host with
//! `cargo test -p histfit-device --test parity -- --include-ignored` (each then fails where the
//! driver reports no device). Without a device, `without_a_gpu_asking_for_one_is_a_clean_error`
//! checks that asking for the GPU is a clean error, not a panic.

use histfit_compute::rng::generate_toy;
use histfit_compute::HistFactoryData;
use histfit_compute::{BatchEvaluator, CpuEvaluator, Dataset, Evaluator, OneAtATime};
use histfit_cuda::split::SplitPlan;
use histfit_cuda::CudaBatch;
use histfit_infer::fit::{fit, FitOptions};
use histfit_model::{InterpCode, Model, Settings};
use histfit_testutil::{load, off_init_point, rel, settings, SETTINGS, WORKSPACES};

/// The two reference settings, plus pairings that reach the remaining codes on both modifier
/// types (code2 everywhere; code0 normsys with code1 histosys; code4p normsys with code4 histosys).
fn all_settings() -> Vec<(String, Settings)> {
    // (Multiplicative histosys codes need positive variations: workspace_tHu has zero yields
    // in some histosys bins, so it is compiled only under the settings it accepts; see `model`.)
    let mut v: Vec<(String, Settings)> = SETTINGS
        .iter()
        .map(|s| (s.to_string(), settings(s)))
        .collect();
    for (n, h) in [
        (InterpCode::Code2, InterpCode::Code2),
        (InterpCode::Code0, InterpCode::Code1),
        (InterpCode::Code4p, InterpCode::Code4),
    ] {
        v.push((
            format!("normsys {n}, histosys {h}"),
            Settings {
                normsys: n,
                histosys: h,
                ..Settings::default()
            },
        ));
    }
    v
}
use std::sync::Arc;

/// Every shipped workspace under every setting of [`all_settings`]: (label, model, data).
/// Combinations where the workspace is invalid (multiplicative interpolation of a variation with
/// a zero yield) are left out, and say so.
fn cases() -> Vec<(String, Arc<Model>, Dataset)> {
    let mut out = Vec::new();
    for name in WORKSPACES {
        let text = std::fs::read_to_string(histfit_testutil::fixture(&format!("{name}.json")))
            .expect("fixture");
        let ws = histfit_model::Workspace::from_str(&text, name).expect("valid workspace");
        for (setting, s) in all_settings() {
            match histfit_model::compile(&ws, None, &s) {
                Ok(m) => {
                    let d = Dataset::observed(&m);
                    out.push((format!("{name}/{setting}"), Arc::new(m), d));
                }
                Err(e) => println!("{name} is not valid under {setting}: {e}"),
            }
        }
    }
    out
}

/// CPU and GPU evaluators of one model.
fn evaluators(model: &Arc<Model>) -> (CpuEvaluator, OneAtATime<CudaBatch>) {
    (
        CpuEvaluator::new(model.clone()),
        OneAtATime {
            batch: CudaBatch::new(model.clone(), 0).expect("GPU session"),
        },
    )
}

/// Whether there is a GPU; a test that needs one and was asked to run (`--include-ignored`)
/// without one fails, saying why, rather than passing without having run.
fn gpu_or_skip(test: &str) -> bool {
    match histfit_cuda::devices() {
        Ok(d) if !d.is_empty() => true,
        Ok(_) => panic!("{test} needs a CUDA GPU: the CUDA driver reports no device"),
        Err(e) => panic!("{test} needs a CUDA GPU: {e}"),
    }
}

/// Points that reach every interpolation branch: init, ±0.1 around it, and ±1.3 (|α| > 1).
fn points(model: &Model) -> Vec<Vec<f64>> {
    let init = model.init();
    let wide: Vec<f64> = model
        .parameters
        .iter()
        .enumerate()
        .map(|(i, q)| (q.init + 1.3 * ((i % 5) as f64 - 2.0) / 2.0).clamp(q.lower, q.upper))
        .map(|v| v.max(1e-3).min(v)) // keep multiplicative parameters positive
        .collect();
    let wide = wide
        .iter()
        .zip(&model.parameters)
        .map(|(&v, q)| if q.lower >= 0.0 { v.max(0.05) } else { v })
        .collect();
    vec![init, off_init_point(model), wide]
}

#[test]
fn without_a_gpu_asking_for_one_is_a_clean_error() {
    if histfit_cuda::devices()
        .map(|d| !d.is_empty())
        .unwrap_or(false)
    {
        println!("a GPU is present: nothing to check here");
        return;
    }
    let (model, _) = load("simple_workspace", settings("smooth"));
    let err = CudaBatch::new(model, 0).expect_err("no GPU here");
    let msg = err.to_string();
    assert!(msg.contains("CUDA is not available"), "{msg}");
}

#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn nll_and_gradient_match_the_cpu() {
    if !gpu_or_skip("nll_and_gradient_match_the_cpu") {
        return;
    }
    let (mut worst_rel, mut worst_abs) = (0.0f64, 0.0f64);
    for (case, model, data) in cases() {
        let (mut cpu, mut gpu) = evaluators(&model);
        for p in points(&model) {
            let n = p.len();
            let (mut gc, mut gg) = (vec![0.0; n], vec![0.0; n]);
            let vc = cpu.nll_grad(&p, &data, &mut gc).unwrap();
            let vg = gpu.nll_grad(&p, &data, &mut gg).unwrap();
            let r = (vc - vg).abs() / vc.abs().max(1e-300);
            assert!(
                r <= 1e-10,
                "{case}: NLL {vc} (CPU) vs {vg} (GPU), rel {r:e}"
            );
            worst_rel = worst_rel.max(r);
            for i in 0..n {
                let d = (gc[i] - gg[i]).abs();
                assert!(
                    d <= 1e-8,
                    "{case}: ∂/∂{} {} (CPU) vs {} (GPU)",
                    model.parameters[i].name,
                    gc[i],
                    gg[i]
                );
                worst_abs = worst_abs.max(d);
            }
            let mut lc = vec![0.0; model.n_main];
            let mut lg = vec![0.0; model.n_main];
            cpu.expected_main(&p, &mut lc).unwrap();
            gpu.expected_main(&p, &mut lg).unwrap();
            for (a, b) in lc.iter().zip(&lg) {
                assert!(
                    (a - b).abs() <= 1e-10 * a.abs().max(1.0),
                    "{case}: λ {a} vs {b}"
                );
            }
        }
    }
    println!(
        "tier 1 worst NLL rel diff {worst_rel:.2e}; tier 2 worst gradient abs diff {worst_abs:.2e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn batch_equals_one_at_a_time() {
    if !gpu_or_skip("batch_equals_one_at_a_time") {
        return;
    }
    let (model, data) = load("workspace_tHu", settings("smooth"));
    let mut gpu = CudaBatch::new(model.clone(), 0).expect("GPU session");
    let mut cpu = CpuEvaluator::new(model.clone());
    let n = model.n_params();
    let b = 300;
    let base = off_init_point(&model);
    let mut params = Vec::with_capacity(b * n);
    let mut sets: Vec<Dataset> = Vec::new();
    for k in 0..b {
        let mut p = base.clone();
        for (i, v) in p.iter_mut().enumerate() {
            *v += 0.01 * (((k * 7 + i * 3) % 11) as f64 - 5.0) / 5.0;
        }
        params.extend(p);
        let mut d = data.clone();
        d.main[k % model.n_main] += (k % 3) as f64;
        sets.push(Dataset::from_parts(&model, d.main, d.aux).unwrap());
    }
    let refs: Vec<&Dataset> = sets.iter().collect();
    let (mut nll, mut grad) = (vec![0.0; b], vec![0.0; b * n]);
    gpu.nll_grad_batch(&params, &refs, &mut nll, &mut grad)
        .unwrap();
    let mut g = vec![0.0; n];
    for k in 0..b {
        let v = cpu
            .nll_grad(&params[k * n..(k + 1) * n], &sets[k], &mut g)
            .unwrap();
        assert!(
            (v - nll[k]).abs() <= 1e-10 * v.abs(),
            "problem {k}: {v} vs {}",
            nll[k]
        );
        for i in 0..n {
            assert!(
                (g[i] - grad[k * n + i]).abs() <= 1e-8,
                "problem {k} grad {i}"
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn fits_match_the_cpu() {
    if !gpu_or_skip("fits_match_the_cpu") {
        return;
    }
    let (mut worst_x, mut worst_nll) = (0.0f64, 0.0f64);
    for (case, model, data) in cases() {
        let (mut cpu, mut gpu) = evaluators(&model);
        let o = FitOptions::default();
        let rc = fit(&mut cpu, &data, &o).unwrap();
        let rg = fit(&mut gpu, &data, &o).unwrap();
        assert_eq!(rc.converged, rg.converged, "{case}");
        let dn = (rc.twice_nll - rg.twice_nll).abs();
        assert!(
            dn <= 1e-6,
            "{case}: twice_nll {} vs {}",
            rc.twice_nll,
            rg.twice_nll
        );
        worst_nll = worst_nll.max(dn);
        for i in 0..model.n_params() {
            let d = (rc.bestfit[i] - rg.bestfit[i]).abs();
            assert!(
                d <= 2e-4,
                "{case}: {} {} vs {}",
                model.parameters[i].name,
                rc.bestfit[i],
                rg.bestfit[i]
            );
            worst_x = worst_x.max(d);
        }
    }
    println!("tier 3 worst best-fit abs diff {worst_x:.2e}; tier 4 worst twice_nll abs diff {worst_nll:.2e}");
}

/// Caller-provided datasets with caller starting points, fitted in lockstep on the GPU, reach the
/// CPU's minima.
#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn caller_datasets_fit_in_lockstep_like_the_cpu() {
    if !gpu_or_skip("caller_datasets_fit_in_lockstep_like_the_cpu") {
        return;
    }
    use histfit_infer::batch::Batcher;
    use histfit_infer::toys::{fit_datasets_on, Batched};
    let (model, mut cpu, gen) = at_observed_fit("workspace_tHu", "smooth");
    let mut expected = vec![0.0; model.n_main];
    cpu.expected_main(&gen, &mut expected).unwrap();
    let sets: Vec<Dataset> = (0..64)
        .map(|i| histfit_compute::rng::generate_toy(&model, &expected, &gen, 77, i).unwrap())
        .collect();
    let inits: Vec<Vec<f64>> = (0..64).map(|_| gen.clone()).collect();
    let batcher = Batcher::new(CudaBatch::new(model.clone(), 0).expect("GPU session"));
    let runner = Batched {
        batcher: &batcher,
        window: 64,
        chunk: 64,
        resident: false,
    };
    let o = FitOptions::default();
    let g = fit_datasets_on(&runner, &sets, Some(&inits), None, &o).unwrap();
    for (k, d) in sets.iter().enumerate() {
        let mut ok = o.clone();
        ok.init = Some(gen.clone());
        let c = fit(&mut cpu, d, &ok).unwrap();
        assert_eq!(c.converged, g[k].converged, "dataset {k}");
        assert!((c.twice_nll - g[k].twice_nll).abs() <= 1e-6, "dataset {k}");
        let poi = model.poi.expect("the model has a POI");
        assert!(
            (c.bestfit[poi] - g[k].bestfit[poi]).abs() <= 2e-4,
            "dataset {k}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn device_toys_are_bit_identical_to_cpu_toys() {
    if !gpu_or_skip("device_toys_are_bit_identical_to_cpu_toys") {
        return;
    }
    for name in ["workspace_tHu", "simple_workspace"] {
        let (model, _) = load(name, settings("smooth"));
        let session = histfit_cuda::batch::Session::new(model.clone(), 0).expect("GPU session");
        let gen = model.init();
        let mut expected = vec![0.0; model.n_main];
        CpuEvaluator::new(model.clone())
            .expected_main(&gen, &mut expected)
            .unwrap();
        let (seed, first, count) = (20261122u64, 1000u64, 2000usize);
        let rows =
            histfit_cuda::toys::generate(&session, &expected, &gen, seed, first, count).unwrap();
        let row = model.n_main + model.n_aux();
        for i in 0..count {
            let cpu = generate_toy(&model, &expected, &gen, seed, first + i as u64).unwrap();
            let g = &rows[i * row..(i + 1) * row];
            for (k, (a, b)) in cpu.main.iter().chain(&cpu.aux).zip(g).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "{name} toy {}: value {k}: CPU {a} GPU {b}",
                    first + i as u64
                );
            }
        }
        // The ensemble path: the batch evaluator's toys (drawn on the device) are bit for bit the
        // CPU evaluator's.
        let mut batch = histfit_cuda::CudaBatch::new(model.clone(), 0).expect("GPU batch");
        let dev = BatchEvaluator::toys(&mut batch, &gen, seed, first..first + 50).unwrap();
        for (i, d) in dev.iter().enumerate() {
            let cpu = generate_toy(&model, &expected, &gen, seed, first + i as u64).unwrap();
            let bits = |v: &Dataset| -> Vec<u64> {
                v.main.iter().chain(&v.aux).map(|x| x.to_bits()).collect()
            };
            assert_eq!(bits(d), bits(&cpu), "{name} ensemble toy {i}");
            assert_eq!(
                d.constant.to_bits(),
                cpu.constant.to_bits(),
                "{name} toy {i}"
            );
        }
    }
}

/// Yields given in device memory (as from a PyTorch CUDA tensor): q0, qμ and the expected q0 and
/// their yield gradients, written to device memory, match the CPU evaluator given the same yields
/// on the host; bad yields and bad addresses are clear errors; the model's yields come back after.
#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn yields_in_device_memory_match_the_cpu() {
    use histfit_cuda::CudaYields;
    use histfit_infer::differentiable::{expected_q0, profiled_statistic, set_yields};
    if !gpu_or_skip("yields_in_device_memory_match_the_cpu") {
        return;
    }
    let stream = cudarc::driver::CudaContext::new(0)
        .expect("context")
        .default_stream();
    let edm = Some(1e-14);
    // tHu's utH_dec has histosys in most channels, held relative (scaled with the input) or
    // absolute. Its data: the Asimov dataset at twice the nominal signal (tHu's observed μ̂ is
    // below 0, where q0 vanishes).
    let thu_with = |variations| {
        let mut s = settings("smooth");
        s.yield_variations = variations;
        let (model, _) = load("workspace_tHu", s);
        let m = (*model).clone();
        let m = std::sync::Arc::new(m);
        let mut at = m.init();
        at[m.poi.expect("tHu has a POI")] = 2.0;
        let data = histfit_compute::Evaluator::asimov(&mut CpuEvaluator::new(m.clone()), &at)
            .expect("Asimov data");
        (m, data)
    };
    use histfit_model::YieldVariations::{Absolute, Relative};
    let cases = [
        (
            "simple_workspace (signal; background with shapesys)",
            load("simple_workspace", settings("smooth")),
            &["signal", "background"][..],
        ),
        (
            "tHu + nn_signal",
            histfit_testutil::thu_with_network_signal(settings("smooth")),
            &["nn_signal"][..],
        ),
        (
            "tHu, utH_dec held relative",
            thu_with(Relative),
            &["utH_dec"][..],
        ),
        (
            "tHu, utH_dec held absolute",
            thu_with(Absolute),
            &["utH_dec"][..],
        ),
    ];
    for (name, (model, data), samples) in cases {
        let inputs: Vec<(usize, Vec<f64>)> = (0..model.samples.len())
            .filter(|&s| samples.contains(&model.samples[s].name.as_str()))
            .map(|s| {
                let l = &model.samples[s];
                // Signals grow and the background shrinks a little below the observed counts,
                // so every statistic stays positive.
                let f = if l.name == "background" { 0.9 } else { 13.0 };
                let y = model.nominal[l.sb_start..l.sb_start + l.n_bins]
                    .iter()
                    .enumerate()
                    .map(|(k, v)| v * f + 0.5 + 0.1 * k as f64)
                    .collect();
                (s, y)
            })
            .collect();
        assert!(!inputs.is_empty(), "{name}: no sample can take yields");
        let s = inputs[0].0;
        let y: Vec<f64> = inputs.iter().flat_map(|i| i.1.iter().copied()).collect();
        let mut cpu = CpuEvaluator::new(model.clone());
        let idx = set_yields(&mut cpu, &inputs).unwrap();
        let mut gpu = CudaYields::new(model.clone(), 0).expect("GPU session");
        let dev_y = stream.clone_htod(&y).unwrap();
        let dev_g = stream.alloc_zeros::<f64>(y.len()).unwrap();
        use cudarc::driver::DevicePtr;
        let (py, pg) = (dev_y.device_ptr(&stream).0, dev_g.device_ptr(&stream).0);
        let mut at = 0;
        let parts: Vec<(usize, u64, usize)> = inputs
            .iter()
            .map(|(s, v)| {
                at += v.len();
                (*s, py + 8 * (at - v.len()) as u64, v.len())
            })
            .collect();
        // SAFETY: both allocations outlive every call below (the output is given anew for
        // each statistic: the evaluator forgets it once written).
        unsafe { gpu.set_yields_device(&parts).unwrap() };
        let out = |gpu: &mut CudaYields| unsafe { gpu.set_grad_output(pg, y.len()).unwrap() };
        let check = |what: &str,
                     c: histfit_infer::differentiable::ProfiledStatistic,
                     g: histfit_infer::differentiable::ProfiledStatistic| {
            assert!(g.grad.is_none(), "{what}: the gradient went to the device");
            let mut got = vec![0.0; y.len()];
            stream.memcpy_dtoh(&dev_g, &mut got).unwrap();
            let want = c.grad.unwrap();
            let scale = want.iter().fold(1e-12_f64, |a, v| a.max(v.abs()));
            let dg = got
                .iter()
                .zip(&want)
                .fold(0.0_f64, |a, (x, w)| a.max((x - w).abs() / scale));
            println!(
                "{name} {what}: q {} vs {} (cpu), max |Δgrad|/max|grad| {dg:.2e}",
                g.q, c.q
            );
            assert!(
                c.q > 0.0,
                "{name} {what}: the check needs a positive statistic"
            );
            assert!((g.q - c.q).abs() <= 1e-6 * c.q.max(1.0), "{name} {what}: q");
            assert!(dg <= 1e-5, "{name} {what}: gradient");
            assert!((g.mu_hat - c.mu_hat).abs() <= 2e-4, "{name} {what}: mu_hat");
        };
        let c = profiled_statistic(&mut cpu, &data, &idx, 0.0, true, None, edm).unwrap();
        out(&mut gpu);
        let g = profiled_statistic(&mut gpu, &data, &idx, 0.0, true, None, edm).unwrap();
        check("q0", c, g);
        let c = profiled_statistic(&mut cpu, &data, &idx, 3.0, false, None, edm).unwrap();
        out(&mut gpu);
        let g = profiled_statistic(&mut gpu, &data, &idx, 3.0, false, None, edm).unwrap();
        if c.q > 0.0 {
            check("qmu(3)", c, g);
        }
        let c = expected_q0(&mut cpu, &idx, None, edm).unwrap();
        out(&mut gpu);
        let g = expected_q0(&mut gpu, &idx, None, edm).unwrap();
        check("expected q0", c, g);

        // Bad yields in device memory are refused where they are, and the model's come back.
        let p = model.init();
        let n0 = inputs[0].1.len();
        let mut bad = y[..n0].to_vec();
        bad[0] = f64::NAN;
        let dev_bad = stream.clone_htod(&bad).unwrap();
        // SAFETY: live allocations of the stated sizes (or deliberately wrong ones, refused).
        unsafe {
            let e = gpu
                .set_yields_device(&[(s, dev_bad.device_ptr(&stream).0, n0)])
                .unwrap_err()
                .to_string();
            assert!(e.contains("finite") && e.contains("bin 0"), "{e}");
            let e = gpu.set_grad_output(pg, 1 << 40).unwrap_err().to_string();
            assert!(e.contains("past the end"), "{e}");
            // A negative total is named at the input sample's bin, not another sample's.
            let mut neg = y[..n0].to_vec();
            neg[0] = -1e12;
            let dev_neg = stream.clone_htod(&neg).unwrap();
            let e = gpu
                .set_yields_device(&[(s, dev_neg.device_ptr(&stream).0, n0)])
                .unwrap_err()
                .to_string();
            let sample = &model.samples[s].name;
            assert!(
                e.contains("negative")
                    && e.contains(&format!("\"{sample}\""))
                    && e.contains("bin 0"),
                "{e}"
            );
            let e = gpu
                .set_yields_device(&[(s, y.as_ptr() as u64, n0)])
                .unwrap_err()
                .to_string();
            assert!(e.contains("device memory"), "{e}");
        }
        gpu.reset_yields().unwrap();
        let (mut plain, _) = evaluators(&model);
        let want = plain.nll(&p, &data).unwrap();
        let got = gpu.nll(&p, &data).unwrap();
        assert!(
            rel(got, want) <= 1e-12,
            "{name}: yields restored ({got} vs {want})"
        );
    }
}

/// Every toy of `gpu` is the toy of `cpu` at its place, converged alike, within 1e-6 in
/// twice_nll and 2e-4 in the POI.
fn assert_toys_agree(ws: &str, cpu: &[histfit_infer::ToyFit], gpu: &[histfit_infer::ToyFit]) {
    assert_eq!(cpu.len(), gpu.len(), "{ws}: toy counts");
    for (a, b) in cpu.iter().zip(gpu) {
        assert_eq!(a.index, b.index);
        assert_eq!(
            a.converged, b.converged,
            "{ws} toy {}: {:?} vs {:?}",
            a.index, a.reason, b.reason
        );
        assert!(
            (a.twice_nll - b.twice_nll).abs() <= 1e-6,
            "{ws} toy {}: twice_nll CPU {} GPU {}",
            a.index,
            a.twice_nll,
            b.twice_nll
        );
        assert!(
            (a.poi - b.poi).abs() <= 2e-4,
            "{ws} toy {}: POI CPU {} GPU {}",
            a.index,
            a.poi,
            b.poi
        );
    }
}

/// Workspace `ws` in `setting`, a CPU evaluator of it, and its observed fit's best point (where
/// the ensembles below draw their toys).
fn at_observed_fit(ws: &str, setting: &str) -> (Arc<Model>, CpuEvaluator, Vec<f64>) {
    let (model, data) = load(ws, settings(setting));
    let mut cpu = CpuEvaluator::new(model.clone());
    let gen = fit(&mut cpu, &data, &FitOptions::default())
        .unwrap()
        .bestfit;
    (model, cpu, gen)
}

/// What a raw resident request of a toy ensemble holds beside its toys: the model's space and
/// bounds, the ensemble's units (the curvature at `gen`, as every ensemble fits in) and the fit
/// settings of `o`.
struct RawEnsemble {
    space: histfit_compute::ParameterSpace,
    lower: Vec<f64>,
    upper: Vec<f64>,
    units: Vec<f64>,
    settings: histfit_compute::ResidentSettings,
    gen: Vec<f64>,
    seed: u64,
    poi: Option<usize>,
    want_params: bool,
}

impl RawEnsemble {
    fn new(
        cpu: &mut CpuEvaluator,
        poi: Option<usize>,
        gen: &[f64],
        seed: u64,
        o: &FitOptions,
        want_params: bool,
    ) -> RawEnsemble {
        let space = Evaluator::space(cpu).clone();
        RawEnsemble {
            lower: space.bounds.iter().map(|b| b.0).collect(),
            upper: space.bounds.iter().map(|b| b.1).collect(),
            units: histfit_infer::fit::curvature_scales(cpu, gen, o).unwrap(),
            settings: histfit_infer::fit::resident_settings(&o.optimizer.unwrap_or_default()),
            poi,
            space,
            gen: gen.to_vec(),
            seed,
            want_params,
        }
    }

    /// Toys `indices` of the seed, drawn at and fitted from the generating point.
    fn req(&self, indices: std::ops::Range<u64>) -> histfit_compute::ResidentRequest<'_> {
        histfit_compute::ResidentRequest {
            gen_params: &self.gen,
            seed: self.seed,
            indices,
            init: &self.gen,
            model_init: &self.space.init,
            starts: None,
            list: None,
            fixed: &self.space.fixed,
            lower: &self.lower,
            upper: &self.upper,
            scales: &self.units,
            kinks: &self.space.kinked,
            settings: self.settings,
            report: self.poi,
            want_params: self.want_params,
            progress: None,
        }
    }
}

/// Out of device memory a resident ensemble is chunked, never aborted: with the device's memory
/// taken but for a few dozen workers' state, the raw device fits of tHu's toys run on fewer
/// workers (halved until their state fits) and give the same bits as with the memory free. (The
/// suite runs one test at a time, `--test-threads 1`: the memory is the device's.)
#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn resident_fits_with_the_memory_taken_run_on_fewer_workers_alike() {
    if !gpu_or_skip("resident_fits_with_the_memory_taken_run_on_fewer_workers_alike") {
        return;
    }
    use histfit_compute::ResidentFits;
    let (model, mut cpu, gen) = at_observed_fit("workspace_tHu", "smooth");
    let raw = RawEnsemble::new(&mut cpu, model.poi, &gen, 5, &FitOptions::default(), true);
    let gpu = CudaBatch::new(model.clone(), 0).expect("GPU session");
    let n = 300;
    // (This first launch also sets the kernel's local memory aside, as any ensemble's does.)
    let free_run = gpu.clone().fit_toys_resident(&raw.req(0..n)).unwrap();
    let ctx = cudarc::driver::CudaContext::new(0).expect("the device's context");
    let stream = ctx.default_stream();
    // The state of one worker, and how many the device keeps resident: the memory left free
    // holds about a quarter of them.
    let free = ctx.mem_get_info().unwrap().0;
    let per_worker = gpu.resident_worker_bytes(raw.settings.memory);
    let keep = 64 * per_worker + (16 << 20);
    let mut taken = Vec::new();
    let mut left = free;
    while left > keep + (1 << 20) {
        let chunk = (left - keep).min(1 << 30);
        // SAFETY: bytes never read; they only hold the device's memory.
        match unsafe { stream.alloc::<u8>(chunk) } {
            Ok(b) => taken.push(b),
            Err(_) => break,
        }
        left = ctx.mem_get_info().unwrap().0;
    }
    println!(
        "memory taken: {:.1} GB in {} blocks, {:.1} MB left, {} bytes a worker",
        (free - left) as f64 / 1e9,
        taken.len(),
        left as f64 / 1e6,
        per_worker
    );
    assert!(
        left < 200 * per_worker,
        "the memory left ({left} bytes) would hold every worker"
    );
    let tight_run = gpu.clone().fit_toys_resident(&raw.req(0..n));
    drop(taken);
    let tight_run = tight_run.expect("an ensemble with little memory left is chunked, not aborted");
    assert_eq!(free_run, tight_run, "fewer workers changed the fits");
}

/// Toy fits resident on the device (drawn and fitted there, host refits of what it cannot
/// certify) reach the CPU's fits of the same toys, and an ensemble split by toy index over any
/// number of workers and launches gives the same bits.
#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn resident_toy_fits_match_the_cpu_and_split_bit_identically() {
    if !gpu_or_skip("resident_toy_fits_match_the_cpu_and_split_bit_identically") {
        return;
    }
    use histfit_compute::{ResidentFit, ResidentFits, ResidentRequest, ResidentStatus};
    use histfit_infer::batch::Batcher;
    use histfit_infer::toys::{fit_toys, fit_toys_on, Batched};
    for ws in ["workspace_tHu", "complex_workspace"] {
        let (model, mut cpu, gen) = at_observed_fit(ws, "smooth");
        let o = FitOptions::default();
        let n = 500;
        let c = fit_toys(&cpu, &gen, 11, n, 0..n, &o, &|_, _| {}).unwrap();
        let gpu = CudaBatch::new(model.clone(), 0).expect("GPU session");
        let batcher = Batcher::new(gpu.clone());
        let g = fit_toys_on(&Batched::new(&batcher), &gen, 11, n, 0..n, &o, &|_, _| {}).unwrap();
        assert_toys_agree(ws, &c, &g);
        for (a, b) in c.iter().zip(&g) {
            assert_eq!(
                a.second_start.is_some(),
                b.second_start.is_some(),
                "{ws} toy {}: second starts",
                a.index
            );
        }
        // The raw device fits (in the units the ensembles above fit in): split over workers
        // and launches, the same bits.
        let raw = RawEnsemble::new(&mut cpu, model.poi, &gen, 11, &o, true);
        let (space, units) = (&raw.space, &raw.units);
        let req = |indices| raw.req(indices);
        // Progress while the device fits: the reports add up to the ensemble.
        let reported = std::sync::atomic::AtomicUsize::new(0);
        let count = |k: usize| {
            reported.fetch_add(k, std::sync::atomic::Ordering::Relaxed);
        };
        let whole = gpu
            .clone()
            .fit_toys_resident(&ResidentRequest {
                progress: Some(histfit_compute::Progress(&count)),
                ..req(0..n)
            })
            .unwrap();
        assert_eq!(reported.into_inner(), n as usize, "{ws}: progress reports");
        let mut parts = gpu.fit_toys_with_workers(&req(0..123), 1).unwrap();
        parts.extend(gpu.fit_toys_with_workers(&req(123..n), 7).unwrap());
        assert_eq!(whole, parts, "{ws}: split results differ");
        let converged = whole
            .iter()
            .filter(|r| r.status == ResidentStatus::Converged)
            .count();
        println!("{ws}: {converged}/{n} device fits certified on the device");
        // tHu's fits are single descents the device finishes itself: all certified there.
        if ws == "workspace_tHu" {
            assert_eq!(
                converged, n as usize,
                "{ws}: every fit certified on the device"
            );
        }
        // Each toy from its own start (an ensemble's second starts): the mirror of its fit
        // through the generating point. Split over workers the same bits; each certified fit
        // the CPU's from that start.
        let starts: Vec<f64> = whole
            .iter()
            .flat_map(|r| {
                let end = r.bestfit.as_ref().unwrap();
                (0..end.len())
                    .map(|i| match space.fixed[i] {
                        true => gen[i],
                        false => {
                            let (lo, hi) = space.bounds[i];
                            (2.0 * gen[i] - end[i]).clamp(lo + 1e-3, hi - 1e-3)
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let second = ResidentRequest {
            starts: Some(&starts),
            ..req(0..n)
        };
        let mirrored = gpu.clone().fit_toys_resident(&second).unwrap();
        let mut parts = gpu.fit_toys_with_workers(&second.part(0..77), 1).unwrap();
        parts.extend(gpu.fit_toys_with_workers(&second.part(77..n), 5).unwrap());
        assert_eq!(
            mirrored, parts,
            "{ws}: split results from own starts differ"
        );
        // Toys picked from the ensemble (a list), from the ensemble's start and from their own:
        // each the same bits as in the whole.
        let p = space.len();
        let picked: Vec<u64> = (0..n).filter(|i| i % 7 == 3).collect();
        let own: Vec<f64> = picked
            .iter()
            .flat_map(|&i| starts[i as usize * p..(i as usize + 1) * p].to_vec())
            .collect();
        let at = |l: &[ResidentFit]| -> Vec<ResidentFit> {
            picked.iter().map(|&i| l[i as usize].clone()).collect()
        };
        let listed = ResidentRequest {
            list: Some(&picked),
            ..req(0..picked.len() as u64)
        };
        assert_eq!(gpu.clone().fit_toys_resident(&listed).unwrap(), at(&whole));
        let listed_own = ResidentRequest {
            starts: Some(&own),
            ..listed.clone()
        };
        let mut parts = gpu
            .fit_toys_with_workers(&listed_own.part(0..10), 1)
            .unwrap();
        parts.extend(
            gpu.fit_toys_with_workers(&listed_own.part(10..picked.len() as u64), 3)
                .unwrap(),
        );
        assert_eq!(parts, at(&mirrored), "{ws}: listed toys from own starts");
        // A list naming toys twice, from the ensemble's start and from their own, as an
        // ensemble's further starts do: each position its own fit, whatever the split.
        let twice = [3u64, 3, 10, 10];
        let mut both = Vec::new();
        for &i in &twice[..] {
            let own = &starts[i as usize * p..(i as usize + 1) * p];
            both.extend_from_slice(if both.len() % (2 * p) == 0 { &gen } else { own });
        }
        let repeated = ResidentRequest {
            list: Some(&twice),
            starts: Some(&both),
            ..req(0..4)
        };
        let want = vec![
            whole[3].clone(),
            mirrored[3].clone(),
            whole[10].clone(),
            mirrored[10].clone(),
        ];
        assert_eq!(gpu.clone().fit_toys_resident(&repeated).unwrap(), want);
        let mut parts = gpu.fit_toys_with_workers(&repeated.part(0..1), 1).unwrap();
        parts.extend(gpu.fit_toys_with_workers(&repeated.part(1..4), 3).unwrap());
        assert_eq!(parts, want, "{ws}: a list naming toys twice");
        let mut compared = 0;
        for r in mirrored.iter().take(40) {
            if !histfit_infer::fit::device_fit_certified(r) {
                continue;
            }
            let k = r.index as usize;
            let toy = Evaluator::toys(&mut cpu, &gen, 11, r.index..r.index + 1)
                .unwrap()
                .pop()
                .unwrap();
            let host = fit(
                &mut cpu,
                &toy,
                &FitOptions {
                    init: Some(starts[k * p..(k + 1) * p].to_vec()),
                    scales: Some(units.clone()),
                    starts: histfit_infer::fit::Starts::Count(0),
                    ..FitOptions::default()
                },
            )
            .unwrap();
            assert!(
                (host.twice_nll - r.twice_nll()).abs() <= 1e-6,
                "{ws} toy {k} from its own start: CPU {} device {}",
                host.twice_nll,
                r.twice_nll()
            );
            compared += 1;
        }
        assert!(
            compared >= 30,
            "{ws}: {compared} of 40 fits from own starts certified"
        );
        // The toys the device drew are the CPU's: its fitted vector evaluated on the CPU's toy
        // gives its −ln L.
        for r in whole.iter().take(20) {
            let toy = Evaluator::toys(&mut cpu, &gen, 11, r.index..r.index + 1)
                .unwrap()
                .pop()
                .unwrap();
            let f = cpu.nll(r.bestfit.as_ref().unwrap(), &toy).unwrap();
            assert!(
                (2.0 * f - r.twice_nll()).abs() <= 1e-8 * f.abs().max(1.0),
                "{ws} toy {}: CPU {} device {}",
                r.index,
                2.0 * f,
                r.twice_nll()
            );
        }
    }
}

/// Under pyhf's codes (kinks: the host fit's kink rules run) toy fits whose L-BFGS-B descents
/// run whole on the device (`fit_runs`: orthant sides, pinned coordinates, restarts, the
/// searches near kinks given up by their watch) reach the CPU's fits of the same toys.
#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn kinked_toy_fits_with_descents_on_the_device_match_the_cpu() {
    if !gpu_or_skip("kinked_toy_fits_with_descents_on_the_device_match_the_cpu") {
        return;
    }
    use histfit_infer::batch::Batcher;
    use histfit_infer::toys::{fit_toys, fit_toys_on, Batched};
    for (ws, n) in [("complex_workspace", 400), ("workspace_tHu", 300)] {
        let (model, cpu, gen) = at_observed_fit(ws, "pyhf");
        let o = FitOptions::default();
        let c = fit_toys(&cpu, &gen, 13, n, 0..n, &o, &|_, _| {}).unwrap();
        // The hybrid: the host's kink rules, the device's descents (resident fits off), with the
        // descents' orthant rounds made by the device (settling) or by the fits on the host
        // (`HISTFIT_GPU_DESCENTS=unsettled`); the toys and the batcher's counts.
        let hybrid = |settling: bool| {
            let batcher = Batcher::new(CudaBatch::new(model.clone(), 0).expect("GPU session"))
                .settling(settling);
            let runner = Batched {
                resident: false,
                ..Batched::new(&batcher)
            };
            let g = fit_toys_on(&runner, &gen, 13, n, 0..n, &o, &|_, _| {}).unwrap();
            (g, batcher.stats())
        };
        let (g, settled) = hybrid(true);
        assert!(
            settled.descents > n,
            "{ws}: descents on the device: {settled:?}"
        );
        assert_toys_agree(ws, &c, &g);
        // Unsettled: more steps from the host.
        let (g, stats) = hybrid(false);
        assert!(
            stats.descents > n && stats.launches > settled.launches,
            "{ws}, unsettled: descents on the device and the host's launches: {stats:?} against {settled:?} settled"
        );
        assert_toys_agree(ws, &c, &g);
    }
}

/// Under pyhf's codes the whole kinked fit runs resident on the device (`fit_toys_kinked`: the
/// descents, the orthant rounds, the searches of other sides and near kinks, the polish, the
/// certification) and reaches the CPU's fits of the same toys, with no descent and few
/// evaluations driven from the host's lockstep; the raw device fits certify nearly every toy and give the same bits
/// however the ensemble is split or rerun.
#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn kinked_toy_fits_resident_on_the_device_match_the_cpu() {
    if !gpu_or_skip("kinked_toy_fits_resident_on_the_device_match_the_cpu") {
        return;
    }
    use histfit_compute::ResidentFits;
    use histfit_infer::batch::Batcher;
    use histfit_infer::toys::{fit_toys, fit_toys_on, Batched};
    // (complex_workspace's fits take further starts, which the device leaves to the host path.)
    let (ws, n) = ("workspace_tHu", 600);
    let (model, mut cpu, gen) = at_observed_fit(ws, "pyhf");
    let o = FitOptions::default();
    let c = fit_toys(&cpu, &gen, 17, n, 0..n, &o, &|_, _| {}).unwrap();
    let gpu = CudaBatch::new(model.clone(), 0).expect("GPU session");
    let batcher = Batcher::new(gpu.clone());
    let g = fit_toys_on(&Batched::new(&batcher), &gen, 17, n, 0..n, &o, &|_, _| {}).unwrap();
    assert_toys_agree(ws, &c, &g);
    let stats = batcher.stats();
    assert!(
        stats.descents == 0 && stats.launches < n / 20,
        "{ws}: descents or evaluations driven from the host's lockstep: {stats:?}"
    );
    // The raw device fits (the ensemble's refits of uncertified toys run on the host's cores,
    // out of the batcher's sight): nearly all certified on the device, each the CPU's fit of
    // its toy; split over workers and launches, or run again, the same bits (the kinked
    // kernel's block synchronisation: BENCHMARKS.md, issue 23, session 29).
    let raw = RawEnsemble::new(&mut cpu, model.poi, &gen, 17, &o, false);
    let req = |indices| raw.req(indices);
    let whole = gpu.clone().fit_toys_resident(&req(0..n)).unwrap();
    assert_eq!(
        gpu.clone().fit_toys_resident(&req(0..n)).unwrap(),
        whole,
        "{ws}: a rerun differs"
    );
    let mut parts = gpu.fit_toys_with_workers(&req(0..123), 1).unwrap();
    parts.extend(gpu.fit_toys_with_workers(&req(123..n), 7).unwrap());
    assert_eq!(whole, parts, "{ws}: split results differ");
    let mut certified = 0;
    for (r, cf) in whole.iter().zip(&c) {
        if histfit_infer::fit::device_fit_certified(r) {
            certified += 1;
            assert!(
                (r.twice_nll() - cf.twice_nll).abs() <= 1e-6,
                "{ws} toy {}: device {} CPU {}",
                r.index,
                r.twice_nll(),
                cf.twice_nll
            );
        }
    }
    println!("{ws}: {certified}/{n} kinked fits certified on the device");
    assert!(
        certified as u64 >= n - n / 50,
        "{ws}: {certified} of {n} kinked fits certified on the device"
    );
}

/// `cuda:0,0`: an ensemble of 10 000 toys split by toy index over two sessions on one GPU, in
/// static halves or from the queue, gives the toys of one session, bit for bit, through the whole
/// inference path (runner, certification, refits).
#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn split_over_two_workers_is_bit_identical() {
    if !gpu_or_skip("split_over_two_workers_is_bit_identical") {
        return;
    }
    use histfit_device::{batcher, AnyEval, AnyRunner, Device};
    use histfit_infer::toys::fit_toys_on;
    let (model, data) = load("workspace_tHu", settings("smooth"));
    let gen = fit(
        &mut CpuEvaluator::new(model.clone()),
        &data,
        &FitOptions::default(),
    )
    .unwrap()
    .bestfit;
    let o = FitOptions::default();
    let run = |eval: AnyEval| {
        let b = batcher(&eval);
        let runner = AnyRunner::new(&eval, b.as_ref());
        fit_toys_on(&runner, &gen, 3, 10_100, 100..10_100, &o, &|_, _| {}).unwrap()
    };
    let one = run(AnyEval::new(model.clone(), Device::Cuda(0)).expect("GPU"));
    assert_eq!(one.len(), 10_000);
    let split = |plan: SplitPlan| {
        AnyEval::Cuda(OneAtATime {
            batch: CudaBatch::on_devices(model.clone(), &[0, 0])
                .expect("GPU")
                .with_split(plan),
        })
    };
    // The static halves (the second session fits half the toys whenever it opens), the queue
    // with small blocks (both sessions take blocks as they come), and the default plan through
    // `Device` as the CLI opens it.
    let small = SplitPlan {
        min_block: 512,
        share: 2,
        ..SplitPlan::QUEUE
    };
    for (what, two) in [
        ("static", run(split(SplitPlan::STATIC))),
        ("queue of small blocks", run(split(small))),
        (
            "cuda:0,0",
            run(AnyEval::new(model.clone(), Device::CudaSplit(vec![0, 0])).expect("GPU")),
        ),
    ] {
        assert_eq!(two.len(), one.len(), "{what}");
        for (a, b) in one.iter().zip(&two) {
            assert_eq!(a.index, b.index, "{what}");
            assert_eq!(
                a.twice_nll.to_bits(),
                b.twice_nll.to_bits(),
                "{what}: toy {}",
                a.index
            );
            assert_eq!(a.poi.to_bits(), b.poi.to_bits(), "{what}: toy {}", a.index);
            assert_eq!(a.converged, b.converged, "{what}: toy {}", a.index);
            assert_eq!(
                a.second_start.map(f64::to_bits),
                b.second_start.map(f64::to_bits),
                "{what}: toy {}",
                a.index
            );
        }
    }
}

/// Each problem of a batch is evaluated on its own dataset's empty-bin wall
/// (`Dataset::empty_bin_wall`: the wider walls of a fit's first descents), equal to the CPU's,
/// in batches whose walls change between launches (all default, mixed, default again, the same
/// mixed again: the device's copy of the walls is sent only when they change).
#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn batches_take_each_datasets_empty_bin_wall() {
    if !gpu_or_skip("batches_take_each_datasets_empty_bin_wall") {
        return;
    }
    let model = histfit_testutil::empty_bin_model(Settings::smooth());
    let mut gpu = CudaBatch::new(model.clone(), 0).expect("GPU session");
    let mut cpu = CpuEvaluator::new(model.clone());
    let own = Dataset::observed(&model);
    let walls = [histfit_compute::EMPTY_BIN_WALL, 1e-2, 1e-4];
    let sets: Vec<Dataset> = walls.iter().map(|&w| own.with_empty_bin_wall(w)).collect();
    let mus: Vec<f64> = (0..12).map(|k| -3e-3 + 1e-3 * k as f64).collect();
    for round in ["default", "mixed", "default", "mixed"] {
        let refs: Vec<&Dataset> = (0..mus.len())
            .map(|k| {
                if round == "default" {
                    &sets[0]
                } else {
                    &sets[k % 3]
                }
            })
            .collect();
        let (mut nll, mut grad) = (vec![0.0; mus.len()], vec![0.0; mus.len()]);
        gpu.nll_grad_batch(&mus, &refs, &mut nll, &mut grad)
            .unwrap();
        let mut g = vec![0.0];
        for (k, &mu) in mus.iter().enumerate() {
            let v = cpu.nll_grad(&[mu], refs[k], &mut g).unwrap();
            assert!(
                (v - nll[k]).abs() <= 1e-10 * v.abs().max(1.0),
                "{round}, μ = {mu}, wall {}: {v} vs {}",
                refs[k].empty_bin_wall,
                nll[k]
            );
            assert!(
                (g[0] - grad[k]).abs() <= 1e-8 * g[0].abs().max(1.0),
                "{round}, μ = {mu}: gradient {} vs {}",
                g[0],
                grad[k]
            );
        }
    }
}

/// A resident fit whose requested start is not finite (a toy count in a bin whose λ is below
/// 0 there, as at a generating point far from a conditional fit's POI) starts from the model's
/// initial point, as the host fit does, and reaches the host's minimum certified on the device;
/// toys where the start is finite (an empty bin: the wall continues λ below 0) start there.
#[test]
#[ignore = "needs a CUDA GPU: --include-ignored on a GPU host"]
fn resident_fits_start_from_the_models_init_where_the_start_is_not_finite() {
    if !gpu_or_skip("resident_fits_start_from_the_models_init_where_the_start_is_not_finite") {
        return;
    }
    use histfit_compute::{ResidentFits, ResidentRequest, ResidentStatus};
    use histfit_infer::fit::Starts;
    let model = histfit_testutil::empty_bin_model(Settings::smooth());
    let mut cpu = CpuEvaluator::new(model.clone());
    let space = Evaluator::space(&cpu).clone();
    // Toys at μ = 1 (λ = 11, 2), fitted from μ = −1, where the second bin's λ is −2, in units
    // of 0.5 (the start the kernel falls back to is scaled as the requested one).
    let gen = vec![1.0];
    let start = vec![-1.0];
    let scales = vec![0.5];
    let lower: Vec<f64> = space.bounds.iter().map(|b| b.0).collect();
    let upper: Vec<f64> = space.bounds.iter().map(|b| b.1).collect();
    let o = FitOptions {
        init: Some(start.clone()),
        starts: Starts::Count(0),
        scales: Some(scales.clone()),
        ..FitOptions::default()
    };
    let n = 200;
    let gpu = CudaBatch::new(model.clone(), 0).expect("GPU session");
    let fits = gpu
        .clone()
        .fit_toys_resident(&ResidentRequest {
            gen_params: &gen,
            seed: 5,
            indices: 0..n,
            init: &start,
            model_init: &space.init,
            starts: None,
            list: None,
            fixed: &space.fixed,
            lower: &lower,
            upper: &upper,
            scales: &scales,
            kinks: &space.kinked,
            settings: histfit_infer::fit::resident_settings(&Default::default()),
            report: model.poi,
            want_params: false,
            progress: None,
        })
        .unwrap();
    let toys = Evaluator::toys(&mut cpu, &gen, 5, 0..n).unwrap();
    let mut fell_back = 0;
    for (r, toy) in fits.iter().zip(&toys) {
        if !cpu.nll(&start, toy).unwrap().is_finite() {
            fell_back += 1;
        }
        // Certified as the toy ensembles certify a device fit (not refitted on the host).
        assert_eq!(r.status, ResidentStatus::Converged, "toy {}", r.index);
        assert!(
            r.unmoved == 0 && r.projected_gradient <= histfit_infer::fit::POLISH_PG,
            "toy {}: unmoved {}, projected gradient {:e}",
            r.index,
            r.unmoved,
            r.projected_gradient
        );
        let h = fit(&mut cpu, toy, &o).unwrap();
        assert!(h.converged, "toy {}: {}", r.index, h.reason);
        assert!(
            (h.twice_nll - r.twice_nll()).abs() <= 1e-6,
            "toy {}: host {} device {}",
            r.index,
            h.twice_nll,
            r.twice_nll()
        );
        assert!((h.bestfit[0] - r.poi).abs() <= 2e-4, "toy {}", r.index);
    }
    // Both kinds of toy are among them.
    assert!(
        fell_back > 100 && fell_back < n,
        "{fell_back} of {n} started elsewhere"
    );
}

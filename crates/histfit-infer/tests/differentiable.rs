//! Yields as inputs: the gradient of −ln L with respect to a sample's yields matches central
//! differences; the profiled q0 and qμ gradients (envelope theorem) match differences of
//! re-fitted statistics; samples with histosys, staterror and shapesys follow the variation
//! definitions (relative, absolute).

use histfit_compute::Dataset;
use histfit_compute::HistFactoryData;
use histfit_compute::{CpuEvaluator, Evaluator, YieldEvaluator};
use histfit_infer::differentiable::{set_yields, ProfiledStatistic};

/// Sets host yields, then the profiled statistic (the two steps every host caller takes).
fn profiled_statistic(
    ev: &mut CpuEvaluator,
    data: &Dataset,
    inputs: &[(usize, Vec<f64>)],
    mu: f64,
    discovery: bool,
    warm: Option<(&[f64], &[f64])>,
    edm: Option<f64>,
) -> histfit_infer::Result<ProfiledStatistic> {
    let idx = set_yields(ev, inputs)?;
    histfit_infer::differentiable::profiled_statistic(ev, data, &idx, mu, discovery, warm, edm)
}

fn expected_q0(
    ev: &mut CpuEvaluator,
    inputs: &[(usize, Vec<f64>)],
    warm: Option<(&[f64], &[f64])>,
    edm: Option<f64>,
) -> histfit_infer::Result<ProfiledStatistic> {
    let idx = set_yields(ev, inputs)?;
    histfit_infer::differentiable::expected_q0(ev, &idx, warm, edm)
}
use histfit_testutil::{load, settings};

fn signal_index(model: &histfit_model::Model) -> usize {
    model
        .samples
        .iter()
        .position(|s| s.name == "signal")
        .expect("a signal sample")
}

#[test]
fn nll_gradient_with_respect_to_yields() {
    let (model, data) = load("simple_workspace", settings("smooth"));
    let s = signal_index(&model);
    let mut ev = CpuEvaluator::new(model.clone());
    let y = vec![7.0, 11.0];
    ev.set_yields(s, &y).unwrap();
    let p = vec![1.3, 0.97, 1.02];
    let (_, _, g) =
        histfit_infer::differentiable::twice_nll_yields(&mut ev, &p, &data, &[s]).unwrap();
    let g: Vec<f64> = g.unwrap().iter().map(|v| 0.5 * v).collect();
    for k in 0..2 {
        let h = 1e-5 * y[k];
        let mut yp = y.clone();
        yp[k] += h;
        ev.set_yields(s, &yp).unwrap();
        let fp = ev.nll(&p, &data).unwrap();
        yp[k] -= 2.0 * h;
        ev.set_yields(s, &yp).unwrap();
        let fm = ev.nll(&p, &data).unwrap();
        let fd = (fp - fm) / (2.0 * h);
        assert!(
            (g[k] - fd).abs() <= 1e-6 * fd.abs().max(1e-3),
            "{k}: {} vs {fd}",
            g[k]
        );
    }
}

#[test]
fn profiled_statistics_gradients_match_differences() {
    let (model, data) = load("simple_workspace", settings("smooth"));
    let s = signal_index(&model);
    let mut ev = CpuEvaluator::new(model.clone());
    for (mu, discovery, y) in [(0.0, true, vec![20.0, 25.0]), (1.0, false, vec![5.0, 10.0])] {
        let r = profiled_statistic(&mut ev, &data, &[(s, y.clone())], mu, discovery, None, None)
            .unwrap();
        assert!(r.converged && r.q > 0.0, "{r:?}");
        for k in 0..2 {
            let h = 1e-3 * y[k];
            let q_at = |ev: &mut CpuEvaluator, v: f64| {
                let mut yy = y.clone();
                yy[k] = v;
                profiled_statistic(ev, &data, &[(s, yy)], mu, discovery, None, None)
                    .unwrap()
                    .q
            };
            let fd = (q_at(&mut ev, y[k] + h) - q_at(&mut ev, y[k] - h)) / (2.0 * h);
            assert!(
                (r.grad.as_ref().unwrap()[k] - fd).abs() <= 1e-4 * fd.abs().max(1e-3),
                "mu {mu} bin {k}: envelope {} vs differences {fd}",
                r.grad.as_ref().unwrap()[k]
            );
        }
    }
}

/// A sample with histosys, staterror and shapesys takes yields: under relative variations the
/// model equals the workspace whose sample has those yields and its histosys templates scaled
/// by input / nominal per bin; under absolute ones the workspace whose templates keep their
/// deltas. The constraint widths stay the workspace's in both. Every histosys code, additive and
/// multiplicative, at points inside and beyond |α| = 1; bad yields are still refused.
#[test]
fn inputs_follow_their_variations_as_defined() {
    use histfit_model::{compile, InterpCode, Settings, Workspace, YieldVariations};
    use serde_json::json;
    let nominal = [10.0, 20.0, 0.0];
    let (hi, lo) = ([12.0, 23.0, 1.0], [9.0, 16.0, 0.5]);
    let y = [14.0, 11.0, 3.0];
    let ws = |data: &[f64], hi: &[f64], lo: &[f64]| {
        json!({
            "channels": [{"name": "SR", "samples": [
                {"name": "signal", "data": data, "modifiers": [
                    {"name": "mu", "type": "normfactor", "data": null},
                    {"name": "shape", "type": "histosys", "data": {"hi_data": hi, "lo_data": lo}},
                    {"name": "norm", "type": "normsys", "data": {"hi": 1.1, "lo": 0.95}},
                    {"name": "staterror_SR", "type": "staterror", "data": [1.0, 2.0, 0.5]}]},
                {"name": "background", "data": [50.0, 60.0, 70.0], "modifiers": [
                    {"name": "staterror_SR", "type": "staterror", "data": [3.0, 2.0, 4.0]},
                    {"name": "unc", "type": "shapesys", "data": [5.0, 6.0, 7.0]}]}]}],
            "observations": [{"name": "SR", "data": [62.0, 75.0, 71.0]}],
            "measurements": [{"name": "m", "config": {"poi": "mu", "parameters": []}}],
            "version": "1.0.0"
        })
    };
    let model_of = |v: serde_json::Value, settings: &Settings, mode| {
        let settings = Settings {
            yield_variations: mode,
            ..*settings
        };
        std::sync::Arc::new(compile(&Workspace::from_value(&v).unwrap(), None, &settings).unwrap())
    };
    // A bin with no nominal yield keeps its absolute variation; under a multiplicative code it
    // has none (a ratio to zero), so there the template is the input itself.
    let scaled = |t: &[f64], multiplicative: bool| -> Vec<f64> {
        (0..3)
            .map(|b| match (nominal[b] != 0.0, multiplicative) {
                (true, _) => t[b] * y[b] / nominal[b],
                (false, false) => t[b] - nominal[b] + y[b],
                (false, true) => y[b],
            })
            .collect()
    };
    let shifted = |t: &[f64]| -> Vec<f64> { (0..3).map(|b| t[b] - nominal[b] + y[b]).collect() };
    for code in [
        InterpCode::Code0,
        InterpCode::Code2,
        InterpCode::Code4p,
        InterpCode::Code1,
        InterpCode::Code4,
    ] {
        let settings = Settings {
            normsys: InterpCode::Code4,
            histosys: code,
            ..Settings::default()
        };
        let multiplicative = code.is_multiplicative();
        let mut modes = vec![(
            YieldVariations::Relative,
            ws(
                &y,
                &scaled(&hi, multiplicative),
                &scaled(&lo, multiplicative),
            ),
        )];
        // Absolute deltas of a multiplicative code (nominal·(κ(α) − 1)) are no workspace's
        // templates: that mode is checked through its yield gradient below only for additive
        // codes, and by `thu_signal_yield_gradients_match_differences`.
        if !multiplicative {
            modes.push((
                YieldVariations::Absolute,
                ws(&y, &shifted(&hi), &shifted(&lo)),
            ));
        }
        for (mode, reference) in modes {
            let model = model_of(ws(&nominal, &hi, &lo), &settings, mode);
            // The reference's staterror widths are recomputed from its yields: give it this
            // model's instead, so only the rates are compared.
            let mut expected = (*model_of(reference, &settings, mode)).clone();
            for (p, q) in expected.parameters.iter_mut().zip(&model.parameters) {
                p.constraint = q.constraint;
            }
            let expected = std::sync::Arc::new(expected);
            let data = Dataset::observed(&model);
            let signal = model
                .samples
                .iter()
                .position(|s| s.name == "signal")
                .unwrap();
            let mut ev = CpuEvaluator::new(model.clone());
            ev.set_yields(signal, &y).unwrap();
            let mut reference = CpuEvaluator::new(expected);
            let names = model.par_names();
            for alpha in [-1.7, -0.4, 0.0, 0.3, 1.6] {
                let p: Vec<f64> = names
                    .iter()
                    .map(|n| match n.as_str() {
                        "shape" => alpha,
                        "norm" => 0.2,
                        "mu" => 1.3,
                        n if n.starts_with("staterror") => 1.02,
                        _ => 0.97,
                    })
                    .collect();
                let (mut g1, mut g2) = (vec![0.0; p.len()], vec![0.0; p.len()]);
                let a = ev.nll_grad(&p, &data, &mut g1).unwrap();
                let b = reference.nll_grad(&p, &data, &mut g2).unwrap();
                assert!(
                    (a - b).abs() <= 1e-10 * b.abs(),
                    "{code:?} {mode:?} α {alpha}: {a} vs {b}"
                );
                for (i, (u, v)) in g1.iter().zip(&g2).enumerate() {
                    assert!(
                        (u - v).abs() <= 1e-9 * v.abs().max(1.0),
                        "{code:?} {mode:?} α {alpha} grad[{i}]: {u} vs {v}"
                    );
                }
                // ... and the yield gradient against central differences of this definition.
                let (_, _, gy) =
                    histfit_infer::differentiable::twice_nll_yields(&mut ev, &p, &data, &[signal])
                        .unwrap();
                let gy = gy.unwrap();
                for k in 0..3 {
                    let h = 1e-6 * y[k];
                    let at = |ev: &mut CpuEvaluator, v: f64| {
                        let mut yy = y.to_vec();
                        yy[k] = v;
                        ev.set_yields(signal, &yy).unwrap();
                        2.0 * ev.nll(&p, &data).unwrap()
                    };
                    let fd = (at(&mut ev, y[k] + h) - at(&mut ev, y[k] - h)) / (2.0 * h);
                    ev.set_yields(signal, &y).unwrap();
                    assert!(
                        (gy[k] - fd).abs() <= 1e-6 * fd.abs().max(1e-2),
                        "{code:?} {mode:?} α {alpha} bin {k}: {} vs {fd}",
                        gy[k]
                    );
                }
            }
        }
    }
    let (model, _) = load("simple_workspace", settings("smooth"));
    let s = signal_index(&model);
    let mut ev = CpuEvaluator::new(model.clone());
    let err = ev.set_yields(s, &[1.0]).unwrap_err().to_string();
    assert!(err.contains("expected 2 bins"), "{err}");
    let err = ev.set_yields(s, &[1.0, f64::NAN]).unwrap_err().to_string();
    assert!(err.contains("finite"), "{err}");
}

/// Inputs with histosys held relative rescale the evaluator's histosys tables; going back to the
/// model's yields restores them bit for bit.
#[test]
fn the_model_comes_back_after_relative_histosys_inputs() {
    let (model, data) = load("workspace_tHu", settings("smooth"));
    let p = histfit_testutil::off_init_point(&model);
    let mut ev = CpuEvaluator::new(model.clone());
    let mut g0 = vec![0.0; p.len()];
    let nominal = ev.nll_grad(&p, &data, &mut g0).unwrap();
    let inputs: Vec<(usize, Vec<f64>)> = (0..model.samples.len())
        .filter(|&s| model.samples[s].name == "utH_dec")
        .map(|s| {
            let l = &model.samples[s];
            (
                s,
                model.nominal[l.sb_start..l.sb_start + l.n_bins]
                    .iter()
                    .map(|v| 3.0 * v + 1.0)
                    .collect(),
            )
        })
        .collect();
    set_yields(&mut ev, &inputs).unwrap();
    assert_ne!(ev.nll(&p, &data).unwrap(), nominal);
    set_yields(&mut ev, &[]).unwrap();
    let mut g1 = vec![0.0; p.len()];
    assert_eq!(ev.nll_grad(&p, &data, &mut g1).unwrap(), nominal);
    assert_eq!(g1, g0);
}

/// tHu with its signal sample (utH_dec, in every channel: histosys, staterror, normsys, lumi and
/// the POI) from inputs: −ln L's yield gradient against central differences, both variation
/// modes and both interpolation settings, at a point off the initial one.
#[test]
fn thu_signal_yield_gradients_match_differences() {
    use histfit_model::YieldVariations;
    for setting in ["smooth", "pyhf"] {
        for mode in [YieldVariations::Relative, YieldVariations::Absolute] {
            let mut s = settings(setting);
            s.yield_variations = mode;
            let (model, data) = load("workspace_tHu", s);
            let inputs: Vec<usize> = (0..model.samples.len())
                .filter(|&s| model.samples[s].name == "utH_dec")
                .collect();
            assert_eq!(inputs.len(), model.channels.len());
            let p = histfit_testutil::off_init_point(&model);
            let mut ev = CpuEvaluator::new(model.clone());
            let yields: Vec<(usize, Vec<f64>)> = inputs
                .iter()
                .map(|&s| {
                    let l = &model.samples[s];
                    (
                        s,
                        (0..l.n_bins)
                            .map(|b| 1.5 * model.nominal[l.sb_start + b] + 0.2 * b as f64)
                            .collect(),
                    )
                })
                .collect();
            set_yields(&mut ev, &yields).unwrap();
            let (_, _, gy) =
                histfit_infer::differentiable::twice_nll_yields(&mut ev, &p, &data, &inputs)
                    .unwrap();
            let gy = gy.unwrap();
            let mut at = 0;
            for (s, y) in &yields {
                for k in 0..y.len() {
                    let h = 1e-6 * y[k].abs().max(1e-3);
                    let mut f = [0.0; 2];
                    for (i, sign) in [1.0, -1.0].iter().enumerate() {
                        let mut yy = y.clone();
                        yy[k] += sign * h;
                        ev.set_yields(*s, &yy).unwrap();
                        f[i] = 2.0 * ev.nll(&p, &data).unwrap();
                    }
                    ev.set_yields(*s, y).unwrap();
                    let fd = (f[0] - f[1]) / (2.0 * h);
                    assert!(
                        (gy[at] - fd).abs() <= 1e-5 * fd.abs().max(1e-2),
                        "{setting} {mode:?} sample {s} bin {k}: {} vs {fd}",
                        gy[at]
                    );
                    at += 1;
                }
            }
        }
    }
}

/// Each call starts from the model's yields (inputs of an earlier call do not linger), a sample
/// given twice, a non-finite mu and a likelihood that cannot be evaluated are errors.
#[test]
fn inputs_do_not_linger_and_bad_requests_are_errors() {
    let (model, data) = load("simple_workspace", settings("smooth"));
    let s = signal_index(&model);
    let mut ev = CpuEvaluator::new(model.clone());
    let p = model.init();
    let nominal = ev.nll(&p, &data).unwrap();
    set_yields(&mut ev, &[(s, vec![50.0, 70.0])]).unwrap();
    assert_ne!(ev.nll(&p, &data).unwrap(), nominal);
    set_yields(&mut ev, &[]).unwrap();
    assert_eq!(ev.nll(&p, &data).unwrap(), nominal);
    let err = set_yields(&mut ev, &[(s, vec![1.0, 2.0]), (s, vec![1.0, 2.0])]).unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
    let err = profiled_statistic(
        &mut ev,
        &data,
        &[(s, vec![1.0, 2.0])],
        f64::NAN,
        true,
        None,
        None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("mu"), "{err}");
    // A negative total in a bin is refused where it is given.
    let err = ev.set_yields(s, &[-1000.0, 5.0]).unwrap_err().to_string();
    assert!(err.contains("negative"), "{err}");
}

/// The expected (Asimov) discovery significance: its gradient, which includes the dataset's
/// dependence on the yields, matches differences of the re-fitted statistic.
#[test]
fn expected_q0_gradient_matches_differences() {
    let (model, _) = load("simple_workspace", settings("smooth"));
    let s = signal_index(&model);
    let mut ev = CpuEvaluator::new(model.clone());
    let y = vec![12.0, 20.0];
    let r = expected_q0(&mut ev, &[(s, y.clone())], None, Some(1e-14)).unwrap();
    assert!(r.converged && r.q > 0.0, "{r:?}");
    for k in 0..2 {
        let h = 1e-4 * y[k];
        let q_at = |ev: &mut CpuEvaluator, v: f64| {
            let mut yy = y.clone();
            yy[k] = v;
            expected_q0(ev, &[(s, yy)], None, Some(1e-14)).unwrap().q
        };
        let fd = (q_at(&mut ev, y[k] + h) - q_at(&mut ev, y[k] - h)) / (2.0 * h);
        assert!(
            (r.grad.as_ref().unwrap()[k] - fd).abs() <= 1e-5 * fd.abs().max(1e-3),
            "bin {k}: {} vs differences {fd}",
            r.grad.as_ref().unwrap()[k]
        );
    }
}

/// Fits run together (one batch per step, as warm-started profiled statistics do) equal the same
/// fits run one after the other, bit for bit on the CPU.
#[test]
fn fits_run_together_equal_separate_fits() {
    use histfit_infer::batch::fit_together;
    use histfit_infer::{fit, FitOptions};
    let (model, data) = load("workspace_tHu", settings("smooth"));
    let mut ev = CpuEvaluator::new(model.clone());
    let poi = model.poi.expect("the model has a POI");
    let mut init = model.init();
    init[poi] = 0.5;
    let opts = [
        FitOptions::default(),
        FitOptions {
            init: Some(init),
            fix: vec![(poi, 0.5)],
            ..Default::default()
        },
    ];
    let together = fit_together(&mut ev, &data, &opts).unwrap();
    for (o, t) in opts.iter().zip(&together) {
        let alone = fit(&mut ev, &data, o).unwrap();
        assert!(alone.converged && t.converged);
        assert_eq!(alone.bestfit, t.bestfit);
        assert_eq!(alone.twice_nll, t.twice_nll);
    }
    // Warm-started statistics (which fit together) equal cold ones started at the same points.
    let (m2, d2) = load("simple_workspace", settings("smooth"));
    let s = signal_index(&m2);
    let mut e2 = CpuEvaluator::new(m2.clone());
    let y = vec![20.0, 25.0];
    let cold = profiled_statistic(&mut e2, &d2, &[(s, y.clone())], 0.0, true, None, None).unwrap();
    let warm = (cold.free_bestfit.clone(), cold.cond_bestfit.clone());
    let again = profiled_statistic(
        &mut e2,
        &d2,
        &[(s, y)],
        0.0,
        true,
        Some((&warm.0, &warm.1)),
        None,
    )
    .unwrap();
    assert!(
        (again.q - cold.q).abs() <= 1e-9 * cold.q,
        "{} vs {}",
        again.q,
        cold.q
    );
}

//! Yields as inputs: the gradient of −ln L with respect to a sample's yields matches central
//! differences; the profiled q0 and qμ gradients (envelope theorem) match differences of
//! re-fitted statistics; samples whose terms depend on their own yields are refused.

use histfit_compute::Dataset;
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

#[test]
fn yields_of_samples_with_yield_dependent_terms_are_refused() {
    let (model, _) = load("simple_workspace", settings("smooth"));
    let b = model
        .samples
        .iter()
        .position(|s| s.name == "background")
        .unwrap();
    let mut ev = CpuEvaluator::new(model.clone());
    let err = ev.set_yields(b, &[50.0, 52.0]).unwrap_err().to_string();
    assert!(
        err.contains("background") && err.contains("shapesys"),
        "{err}"
    );
    let s = signal_index(&model);
    let err = ev.set_yields(s, &[1.0]).unwrap_err().to_string();
    assert!(err.contains("expected 2 bins"), "{err}");
    let err = ev.set_yields(s, &[1.0, f64::NAN]).unwrap_err().to_string();
    assert!(err.contains("finite"), "{err}");
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

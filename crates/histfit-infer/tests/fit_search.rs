//! Fits that end at the lowest minimum they can certify: regressions on random workspaces where
//! an earlier fit ended in a worse basin or claimed convergence at a kink
//! (`tests/fixtures/fit_regressions.json`, made by `scripts/make_fit_regressions.py` with pyhf
//! 0.7.6 and the best of 40 or more single-start fits as references), the one-sided certificate at kinks, a start
//! that is not finite, and an empty bin pressed against λ = 0.

use histfit_compute::HistFactoryData;
use histfit_compute::{CpuEvaluator, Dataset, Evaluator};
use histfit_infer::{fit, FitOptions, Starts};
use histfit_model::{compile, Settings, Workspace};
use histfit_testutil::{json, settings};
use serde_json::json as j;
use std::sync::Arc;

fn compiled(ws: &serde_json::Value, s: Settings) -> (Arc<histfit_model::Model>, Dataset) {
    let model = Arc::new(compile(&Workspace::from_value(ws).unwrap(), None, &s).unwrap());
    let data = Dataset::observed(&model);
    (model, data)
}

#[test]
fn fits_reach_the_lowest_known_minimum_of_multimodal_workspaces() {
    let cases = json("fit_regressions.json");
    for case in cases["cases"].as_array().unwrap() {
        let setting = case["setting"].as_str().unwrap();
        let (model, data) = compiled(&case["workspace"], settings(setting));
        let mut ev = CpuEvaluator::new(model);
        let r = fit(&mut ev, &data, &FitOptions::default()).unwrap();
        let reference = case["best_of_random_starts"]
            .as_f64()
            .unwrap()
            .min(case["pyhf_scipy"].as_f64().unwrap_or(f64::INFINITY));
        let name = format!("{}/{} {setting}", case["seed"], case["index"]);
        println!(
            "{name}: {:.9} (reference {reference:.9}), {} starts, {}",
            r.twice_nll, r.starts, r.reason
        );
        assert!(r.converged, "{name}: {}", r.reason);
        // At most four batches of further starts, plus the first search and the start with
        // the normalisations low.
        assert!(r.starts <= 4 * 24 + 2, "{name}: {} starts", r.starts);
        assert!(
            r.twice_nll <= reference + 1e-6,
            "{name}: twice_nll {} above the reference {reference}",
            r.twice_nll
        );
        assert!(r.projected_gradient_norm <= histfit_infer::fit::CERTIFY_PG);
    }
}

/// A single search from the requested start is what `Starts::Count(0)` gives; on a multimodal
/// workspace it can end above the multi-start fit, which then says so.
#[test]
fn several_minima_are_reported() {
    let cases = json("fit_regressions.json");
    let case = &cases["cases"].as_array().unwrap()[2]; // 11/37, smooth: basins 3.6 apart
    let (model, data) = compiled(&case["workspace"], settings("smooth"));
    let mut ev = CpuEvaluator::new(model);
    let single = fit(
        &mut ev,
        &data,
        &FitOptions {
            starts: Starts::Count(0),
            ..Default::default()
        },
    )
    .unwrap();
    let multi = fit(&mut ev, &data, &FitOptions::default()).unwrap();
    assert_eq!(single.starts, 1);
    assert!(multi.starts > 1);
    assert!(multi.twice_nll < single.twice_nll - 1.0);
    assert!(
        multi.warnings.iter().any(|w| w.contains("several minima")),
        "{:?}",
        multi.warnings
    );
}

/// A code-1 systematic whose minimum is at its kink: converged, certified by one-sided slopes,
/// reported at the kink; and no result claims convergence with a larger one-sided slope there.
#[test]
fn a_minimum_at_a_kink_is_certified_by_one_sided_slopes() {
    let ws = j!({
        "channels": [{"name": "SR", "samples": [
            {"name": "sig", "data": [5.0, 3.0], "modifiers": [{"name": "mu", "type": "normfactor", "data": null}]},
            {"name": "bkg", "data": [50.0, 40.0], "modifiers": [
                {"name": "a", "type": "normsys", "data": {"hi": 1.3, "lo": 0.95}}]}
        ]}],
        "observations": [{"name": "SR", "data": [55.0, 43.0]}],
        "measurements": [{"name": "m", "config": {"poi": "mu", "parameters": [
            {"name": "mu", "fixed": true, "inits": [1.0]}]}}],
        "version": "1.0.0"
    });
    let (model, data) = compiled(&ws, Settings::pyhf_defaults());
    let mut ev = CpuEvaluator::new(model.clone());
    let r = fit(&mut ev, &data, &FitOptions::default()).unwrap();
    assert!(r.converged, "{}", r.reason);
    let a = model.par_names().iter().position(|n| n == "a").unwrap();
    assert_eq!(r.bestfit[a], 0.0, "{:?}", r.bestfit);
    assert_eq!(r.kinks.len(), 1);
    assert_eq!(r.kinks[0].side, "at_kink");
    // Both one-sided slopes point away from the minimum.
    let mut g = vec![0.0; r.bestfit.len()];
    let mut x = r.bestfit.clone();
    x[a] = 1e-150;
    ev.nll_grad(&x, &data, &mut g).unwrap();
    assert!(g[a] > 0.0);
    x[a] = -1e-150;
    ev.nll_grad(&x, &data, &mut g).unwrap();
    assert!(g[a] < 0.0);
}

/// A warm start where −ln L is +inf (a bin with events and no expected ones) is replaced by
/// the model's initial point, with a warning, instead of abandoning the fit.
#[test]
fn a_start_that_is_not_finite_falls_back_to_the_initial_point() {
    let ws = j!({
        "channels": [{"name": "SR", "samples": [
            {"name": "sig", "data": [5.0, 1.0], "modifiers": [{"name": "mu", "type": "normfactor", "data": null}]},
            {"name": "bkg", "data": [50.0, 0.0], "modifiers": []}
        ]}],
        "observations": [{"name": "SR", "data": [52.0, 2.0]}],
        "measurements": [{"name": "m", "config": {"poi": "mu", "parameters": []}}],
        "version": "1.0.0"
    });
    let (model, data) = compiled(&ws, Settings::smooth());
    let mut ev = CpuEvaluator::new(model);
    let r = fit(
        &mut ev,
        &data,
        &FitOptions {
            init: Some(vec![0.0]),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(r.converged, "{}", r.reason);
    assert!(r.twice_nll.is_finite());
    assert!(r.warnings.iter().any(|w| w.contains("not finite")));
}

/// An empty bin whose expected count the data pull below 0: the minimum lies on the boundary
/// λ = 0. Past it −ln L used to be +inf, and L-BFGS-B stopped at that wall ("line search failed");
/// with the smooth continuation below 0 the fit converges there, λ within a few 1e-6 of 0.
#[test]
fn a_fit_pressed_against_an_empty_bin_converges_at_its_boundary() {
    let ws = j!({
        "channels": [{"name": "SR", "samples": [
            {"name": "bkg", "data": [1.0, 20.0], "modifiers": [
                {"name": "k", "type": "normfactor", "data": null},
                {"name": "s", "type": "histosys", "data": {"hi_data": [2.5, 20.0], "lo_data": [-0.5, 20.0]}}]}
        ]}],
        "observations": [{"name": "SR", "data": [0.0, 20.0]}],
        "measurements": [{"name": "m", "config": {"poi": "k", "parameters": []}}],
        "version": "1.0.0"
    });
    let (model, data) = compiled(&ws, Settings::smooth());
    let mut ev = CpuEvaluator::new(model.clone());
    let r = fit(&mut ev, &data, &FitOptions::default()).unwrap();
    assert!(r.converged, "{}", r.reason);
    let mut lam = vec![0.0; model.n_main];
    ev.expected_main(&r.bestfit, &mut lam).unwrap();
    assert!(lam[0].abs() < 1e-5, "empty bin at {}", lam[0]);
    assert!((lam[1] - 20.0).abs() < 1e-3, "{lam:?}");
}

//! Requests that cannot be answered get an error, never a panic or a meaningless number.

use histfit_compute::HistFactoryData;
use histfit_compute::{CpuEvaluator, Dataset};
use histfit_infer::{fit, ranking, upper_limit, AsymptoticCalculator, FitOptions, TestStat};
use histfit_model::{compile, Settings, Workspace};
use serde_json::json;
use std::sync::Arc;

fn model(ws: serde_json::Value, settings: Settings) -> (Arc<histfit_model::Model>, Dataset) {
    let model = Arc::new(compile(&Workspace::from_value(&ws).unwrap(), None, &settings).unwrap());
    let data = Dataset::observed(&model);
    (model, data)
}

fn one_channel(
    obs: f64,
    params: serde_json::Value,
    extra_sample: serde_json::Value,
) -> serde_json::Value {
    json!({
        "channels": [{"name": "SR", "samples": [
            {"name": "sig", "data": [5.0], "modifiers": [{"name": "mu", "type": "normfactor", "data": null}]},
            {"name": "bkg", "data": [50.0], "modifiers": [{"name": "a", "type": "normsys", "data": {"hi": 1.2, "lo": 0.9}}]},
            extra_sample
        ]}],
        "observations": [{"name": "SR", "data": [obs]}],
        "measurements": [{"name": "m", "config": {"poi": "mu", "parameters": params}}],
        "version": "1.0.0"
    })
}

#[test]
fn kinked_parameter_with_one_sided_bounds_fits() {
    // code1 normsys whose bounds exclude the mirror side of its kink.
    let ws = one_channel(
        30.0,
        json!([{"name": "a", "bounds": [[0.5, 5.0]], "inits": [1.0]}]),
        json!({"name": "other", "data": [1.0], "modifiers": []}),
    );
    let (m, data) = model(ws, Settings::pyhf_defaults());
    let mut ev = CpuEvaluator::new(m.clone());
    let r = fit(&mut ev, &data, &FitOptions::default()).unwrap();
    assert!(r.twice_nll.is_finite());
}

#[test]
fn ranking_refuses_a_singular_hessian() {
    // A free normalisation of an empty sample: flat direction, singular Hessian.
    let ws = one_channel(
        55.0,
        json!([]),
        json!({"name": "empty", "data": [0.0], "modifiers": [{"name": "k", "type": "normfactor", "data": null}]}),
    );
    let (m, data) = model(ws, Settings::smooth());
    let ev = CpuEvaluator::new(m.clone());
    let e = ranking(&ev, &data, &FitOptions::default(), &|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("not positive definite"), "{e}");
}

#[test]
fn limits_refuse_impossible_requests() {
    let ws = one_channel(
        55.0,
        json!([{"name": "mu", "bounds": [[-5.0, -1.0]], "inits": [-2.0]}]),
        json!({"name": "other", "data": [1.0], "modifiers": []}),
    );
    let (m, data) = model(ws, Settings::smooth());
    let mut ev = CpuEvaluator::new(m.clone());
    let e = upper_limit(
        &mut ev,
        &data,
        0.05,
        TestStat::QmuTilde,
        &FitOptions::default(),
        1e-7,
    )
    .unwrap_err();
    assert!(e.to_string().contains("no room above 0"), "{e}");
    let ws = one_channel(
        55.0,
        json!([]),
        json!({"name": "other", "data": [1.0], "modifiers": []}),
    );
    let (m, data) = model(ws, Settings::smooth());
    let mut ev = CpuEvaluator::new(m.clone());
    let e = upper_limit(
        &mut ev,
        &data,
        0.05,
        TestStat::Q0,
        &FitOptions::default(),
        1e-7,
    )
    .unwrap_err();
    assert!(e.to_string().contains("q or qtilde"), "{e}");
    let e = AsymptoticCalculator::new(&mut ev, data.clone(), TestStat::Tmu, FitOptions::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("use toys"), "{e}");
}

/// A one-sided code-1 systematic has its minimum at its kink (f rises on both sides of α = 0);
/// a second, two-sided one lowers the likelihood away from 0. The fit must hold only the first
/// at its kink: holding every kinked parameter at 0 once the first step fails would report a
/// worse point (twice_nll 14.195, weak = 0) as the minimum.
#[test]
fn only_the_parameter_at_a_kink_minimum_is_held_there() {
    let ws = json!({
        "channels": [{"name": "c", "samples": [
            {"name": "sig", "data": [1.0], "modifiers": [
                {"name": "mu", "type": "normfactor", "data": null}]},
            {"name": "bkg", "data": [100.0], "modifiers": [
                {"name": "oneside", "type": "normsys", "data": {"hi": 1.3, "lo": 1.2}},
                {"name": "weak", "type": "normsys", "data": {"hi": 1.02, "lo": 0.98}}]}]}],
        "observations": [{"name": "c", "data": [80.0]}],
        "measurements": [{"name": "m", "config": {"poi": "mu", "parameters": []}}],
        "version": "1.0.0"
    });
    let (model, data) = model(ws, Settings::pyhf_defaults());
    let r = fit(
        &mut CpuEvaluator::new(model.clone()),
        &data,
        &FitOptions::default(),
    )
    .unwrap();
    let (oneside, weak) = (
        model.par_index("oneside").unwrap(),
        model.par_index("weak").unwrap(),
    );
    assert!(r.converged, "{}", r.reason);
    assert_eq!(r.bestfit[oneside], 0.0, "{}", r.reason);
    assert!(
        (r.bestfit[weak] + 0.388).abs() < 1e-2,
        "weak = {}",
        r.bestfit[weak]
    );
    assert!(r.twice_nll < 14.04, "twice_nll = {}", r.twice_nll);
}

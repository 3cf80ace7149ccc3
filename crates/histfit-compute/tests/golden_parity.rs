//! Parity with pyhf 0.7.6 reference numbers (`tests/fixtures/*.golden.json`, made by pyhf; see
//! `tests/fixtures/GOLDENS.md`): parameter table, data layout, twice_nll and expected data at the
//! golden points, and the analytic gradient against central finite differences.

use histfit_compute::HistFactoryData;
use histfit_compute::{expected_data, CpuEvaluator, Dataset, Evaluator};
use histfit_model::{compile, Settings, Workspace};
use histfit_testutil::{fixture, floats, rel, WORKSPACES};
use serde_json::Value;
use std::sync::Arc;

fn load(name: &str, setting: &str) -> (Arc<histfit_model::Model>, Value) {
    let text = std::fs::read_to_string(fixture(&format!("{name}.json"))).unwrap();
    let ws = Workspace::from_str(&text, name).unwrap();
    let settings = if setting == "smooth" {
        Settings::smooth()
    } else {
        Settings::pyhf_defaults()
    };
    let model = compile(&ws, None, &settings).unwrap();
    let golden: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture(&format!("{name}.golden.json"))).unwrap(),
    )
    .unwrap();
    (Arc::new(model), golden["settings"][setting].clone())
}

#[test]
fn parameter_table_matches_pyhf() {
    for name in WORKSPACES {
        for setting in ["smooth", "pyhf"] {
            let (model, g) = load(name, setting);
            let names: Vec<String> = g["par_names"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().to_owned())
                .collect();
            assert_eq!(
                model.par_names(),
                names,
                "{name}/{setting}: parameter order"
            );
            assert_eq!(
                model.poi.expect("the model has a POI"),
                g["poi_index"].as_u64().unwrap() as usize,
                "{name}: poi"
            );
            assert_eq!(model.init(), floats(&g["suggested_init"]), "{name}: init");
            let bounds: Vec<(f64, f64)> = g["suggested_bounds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| {
                    let b = floats(b);
                    (b[0], b[1])
                })
                .collect();
            assert_eq!(model.bounds(), bounds, "{name}: bounds");
            let fixed: Vec<bool> = g["fixed"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_bool().unwrap())
                .collect();
            assert_eq!(model.fixed(), fixed, "{name}: fixed");
            assert_eq!(
                model.observed,
                floats(&g["data"]),
                "{name}: observed data (main + aux)"
            );
        }
    }
}

#[test]
fn twice_nll_and_expected_data_match_pyhf_at_every_golden_point() {
    let mut worst_nll: f64 = 0.0;
    let mut worst_exp: f64 = 0.0;
    for name in WORKSPACES {
        for setting in ["smooth", "pyhf"] {
            let (model, g) = load(name, setting);
            let data = Dataset::observed(&model);
            let mut ev = CpuEvaluator::new(model.clone());
            for pt in g["points"].as_array().unwrap() {
                let params = floats(&pt["params"]);
                let twice_nll = 2.0 * ev.nll(&params, &data).unwrap();
                let want = pt["twice_nll"].as_f64().unwrap();
                let r = rel(twice_nll, want);
                worst_nll = worst_nll.max(r);
                assert!(
                    r < 1e-9,
                    "{name}/{setting} {}: twice_nll {twice_nll} vs pyhf {want} (rel {r:e})",
                    pt["label"]
                );
                let exp = expected_data(&mut ev, &model, &params).unwrap();
                for (i, (a, b)) in exp.iter().zip(floats(&pt["expected_main"])).enumerate() {
                    let r = if b == 0.0 { a.abs() } else { rel(*a, b) };
                    worst_exp = worst_exp.max(r);
                    assert!(
                        r < 1e-10,
                        "{name}/{setting} {} bin {i}: expected {a} vs pyhf {b}",
                        pt["label"]
                    );
                }
            }
        }
    }
    println!("worst relative difference: twice_nll {worst_nll:e}, expected data {worst_exp:e}");
}

#[test]
fn gradient_matches_central_differences_at_every_golden_point() {
    let mut worst: f64 = 0.0;
    for name in WORKSPACES {
        for setting in ["smooth", "pyhf"] {
            let (model, g) = load(name, setting);
            let data = Dataset::observed(&model);
            let mut ev = CpuEvaluator::new(model.clone());
            let n = model.n_params();
            let mut grad = vec![0.0; n];
            for pt in g["points"].as_array().unwrap() {
                let params = floats(&pt["params"]);
                ev.nll_grad(&params, &data, &mut grad).unwrap();
                let mut x = params.clone();
                let scale = grad.iter().fold(1.0f64, |m, g| m.max(g.abs()));
                for i in 0..n {
                    // Richardson-extrapolated central difference: truncation O(h⁴) lets the step be
                    // large enough that rounding in the O(10³) NLL stays below 1e-9.
                    let f0 = ev.nll(&params, &data).unwrap();
                    let mut slope = |h: f64| {
                        x[i] = params[i] + h;
                        let f = ev.nll(&x, &data).unwrap();
                        x[i] = params[i];
                        (f - f0) / h
                    };
                    let h = 2e-4 * params[i].abs().max(1.0);
                    let kind = model.sets[model.parameters[i].set].kind;
                    let at_kink = setting == "pyhf"
                        && params[i] == 0.0
                        && matches!(kind, "normsys" | "histosys");
                    let fd = if at_kink {
                        // Codes 0 and 1 have a kink at α = 0, where histfit's derivative is the
                        // mean of the two one-sided slopes: extrapolate each side separately.
                        let right = 2.0 * slope(0.5 * h) - slope(h);
                        let left = 2.0 * slope(-0.5 * h) - slope(-h);
                        0.5 * (right + left)
                    } else {
                        // Richardson-extrapolated central difference: truncation O(h⁴) lets the
                        // step be large enough that rounding in the O(10³) NLL stays tiny.
                        let central = |s: &mut dyn FnMut(f64) -> f64, h: f64| 0.5 * (s(h) + s(-h));
                        (4.0 * central(&mut slope, 0.5 * h) - central(&mut slope, h)) / 3.0
                    };
                    // Relative to the gradient's scale: a component that is ~0 is compared in
                    // absolute terms against the largest one.
                    let err = (fd - grad[i]).abs() / grad[i].abs().max(1e-2 * scale).max(1.0);
                    worst = worst.max(err);
                    assert!(
                        err < 1e-6,
                        "{name}/{setting} {} d/d{}: analytic {} fd {fd}",
                        pt["label"],
                        model.parameters[i].name,
                        grad[i]
                    );
                }
            }
        }
    }
    println!("worst gradient relative error vs central differences: {worst:e}");
}

/// With the POI at 0 a sample's factor product is 0, which takes the product-rule path of the
/// gradient (no division): check it against differences too.
#[test]
fn gradient_with_a_zero_normalisation_matches_differences() {
    for name in ["complex_workspace", "workspace_tHu"] {
        let (model, _) = load(name, "smooth");
        let data = Dataset::observed(&model);
        let mut ev = CpuEvaluator::new(model.clone());
        let mut p = model.init();
        p[model.poi.expect("the model has a POI")] = 0.0;
        let mut grad = vec![0.0; p.len()];
        ev.nll_grad(&p, &data, &mut grad).unwrap();
        assert_matches_differences(&mut ev, &data, &p, &grad, |x| 1e-4 * x.abs().max(1.0), 1e-6);
    }
}

/// Every component of `grad` (the gradient at `p`) against a central difference with step
/// `h(p[i])`, to `tol` relative (absolute below 1).
fn assert_matches_differences(
    ev: &mut CpuEvaluator,
    data: &Dataset,
    p: &[f64],
    grad: &[f64],
    h: impl Fn(f64) -> f64,
    tol: f64,
) {
    for i in 0..p.len() {
        let h = h(p[i]);
        let mut x = p.to_vec();
        x[i] = p[i] + h;
        let fp = ev.nll(&x, data).unwrap();
        x[i] = p[i] - h;
        let fm = ev.nll(&x, data).unwrap();
        let fd = (fp - fm) / (2.0 * h);
        let err = (fd - grad[i]).abs() / grad[i].abs().max(1.0);
        let name = &ev.space().names[i];
        assert!(err < tol, "d/d{name}: {} vs {fd}", grad[i]);
    }
}

/// A normsys factor of exactly zero (code 0, α at the point where the linear κ reaches 0)
/// makes the sample's κ product zero: the gradient then multiplies out the other factors instead
/// of dividing by κ. Check it against differences (κ is linear there, so they are exact to
/// rounding), for the zero factor's parameter and for the other normsys of the same sample.
#[test]
fn gradient_with_a_zero_normsys_factor_matches_differences() {
    let ws = Workspace::from_value(&serde_json::json!({
        "channels": [{"name": "sr", "samples": [
            {"name": "sig", "data": [4.0, 6.0], "modifiers": [
                {"name": "mu", "type": "normfactor", "data": null},
                {"name": "a", "type": "normsys", "data": {"hi": 1.5, "lo": 0.5}},
                {"name": "b", "type": "normsys", "data": {"hi": 1.2, "lo": 0.9}}]},
            {"name": "bkg", "data": [50.0, 40.0], "modifiers": [
                {"name": "b", "type": "normsys", "data": {"hi": 1.1, "lo": 0.95}}]}]}],
        "observations": [{"name": "sr", "data": [55.0, 47.0]}],
        "measurements": [{"name": "m", "config": {"poi": "mu", "parameters": []}}],
        "version": "1.0.0"
    }))
    .unwrap();
    let settings = Settings {
        normsys: histfit_model::InterpCode::Code0,
        histosys: histfit_model::InterpCode::Code0,
        ..Settings::default()
    };
    let model = Arc::new(compile(&ws, None, &settings).unwrap());
    let data = Dataset::observed(&model);
    let mut ev = CpuEvaluator::new(model.clone());
    let mut p = model.init();
    let (a, b) = (model.par_index("a").unwrap(), model.par_index("b").unwrap());
    p[a] = -2.0; // κ = 1 + α·(1 − lo) = 0
    p[b] = 0.3;
    p[model.poi.expect("the model has a POI")] = 1.7;
    let mut grad = vec![0.0; p.len()];
    ev.nll_grad(&p, &data, &mut grad).unwrap();
    assert!(
        grad[a] != 0.0,
        "the zero factor's own derivative is not zero"
    );
    assert_matches_differences(&mut ev, &data, &p, &grad, |_| 1e-5, 1e-7);
}

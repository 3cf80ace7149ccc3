//! Rules the shipped workspaces do not exercise, against pyhf 0.7.6 (`edge_cases.golden.json`,
//! made by `scripts/make_goldens.py`): staterror bins without uncertainty (fixed), shapesys bins
//! with zero nominal or uncertainty (fixed), and measurement-config overrides of inits, bounds,
//! fixed, auxdata and sigmas.

use histfit_compute::{expected_data, CpuEvaluator, Dataset, Evaluator};
use histfit_model::{compile, Settings, Workspace};
use histfit_testutil::floats;
use serde_json::Value;
use std::sync::Arc;

#[test]
fn edge_cases_match_pyhf() {
    let path = histfit_testutil::fixture("edge_cases.golden.json");
    let golden: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for case in golden["cases"].as_array().unwrap() {
        let label = format!(
            "{}/{}",
            case["case"].as_str().unwrap(),
            case["setting"].as_str().unwrap()
        );
        let ws = Workspace::from_value(&case["workspace"]).unwrap();
        let settings = if case["setting"] == "smooth" {
            Settings::smooth()
        } else {
            Settings::pyhf_defaults()
        };
        let model = Arc::new(compile(&ws, None, &settings).unwrap());
        let names: Vec<String> = case["par_names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().into())
            .collect();
        assert_eq!(model.par_names(), names, "{label}");
        assert_eq!(
            model.init(),
            floats(&case["suggested_init"]),
            "{label}: init"
        );
        let fixed: Vec<bool> = case["fixed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_bool().unwrap())
            .collect();
        assert_eq!(model.fixed(), fixed, "{label}: fixed");
        for (b, g) in model
            .bounds()
            .iter()
            .zip(case["suggested_bounds"].as_array().unwrap())
        {
            assert_eq!([b.0, b.1].to_vec(), floats(g), "{label}: bounds");
        }
        assert_eq!(model.observed, floats(&case["data"]), "{label}: data");
        let data = Dataset::observed(&model);
        let mut ev = CpuEvaluator::new(model.clone());
        for pt in case["points"].as_array().unwrap() {
            let p = floats(&pt["params"]);
            let t = 2.0 * ev.nll(&p, &data).unwrap();
            let want = pt["twice_nll"].as_f64().unwrap();
            assert!(
                (t - want).abs() <= 1e-9 * want.abs(),
                "{label}: twice_nll {t} vs {want}"
            );
            for (a, b) in expected_data(&mut ev, &model, &p)
                .unwrap()
                .iter()
                .zip(floats(&pt["expected"]))
            {
                assert!(
                    (a - b).abs() <= 1e-10 * b.abs().max(1e-300),
                    "{label}: expected {a} vs {b}"
                );
            }
        }
    }
}

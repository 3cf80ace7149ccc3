//! Rules the shipped workspaces do not exercise, against pyhf 0.7.6 (`edge_cases.golden.json`,
//! made by `scripts/make_goldens.py`): staterror bins without uncertainty (fixed), shapesys bins
//! with zero nominal or uncertainty (fixed), and measurement-config overrides of inits, bounds,
//! fixed, auxdata and sigmas.

use histfit_compute::HistFactoryData;
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

/// A main bin without events continues below λ = 0 over the dataset's wall
/// (`Dataset::empty_bin_wall`, default `EMPTY_BIN_WALL`): a copy with a wider wall
/// (`with_empty_bin_wall`, what a fit's first descents use) has the same −ln L and gradient
/// wherever every λ ≥ 0, and below 0 the term λ + λ²/(2w) of its own width.
#[test]
fn empty_bins_continue_over_the_datasets_wall() {
    let model = histfit_testutil::empty_bin_model(Settings::smooth());
    let mut ev = CpuEvaluator::new(model.clone());
    let own = Dataset::observed(&model);
    assert_eq!(own.empty_bin_wall, histfit_compute::EMPTY_BIN_WALL);
    assert!(own.has_empty_main_bin());
    let wide = own.with_empty_bin_wall(1e-2);
    let (mut g_own, mut g_wide) = (vec![0.0], vec![0.0]);
    for mu in [0.5, 1e-9, 0.0] {
        let a = ev.nll_grad(&[mu], &own, &mut g_own).unwrap();
        let b = ev.nll_grad(&[mu], &wide, &mut g_wide).unwrap();
        assert_eq!((a, g_own[0]), (b, g_wide[0]), "μ = {mu}");
    }
    let mu = -1e-3;
    let l = 2.0 * mu;
    let a = ev.nll_grad(&[mu], &own, &mut g_own).unwrap();
    let b = ev.nll_grad(&[mu], &wide, &mut g_wide).unwrap();
    let w = histfit_compute::EMPTY_BIN_WALL;
    let expect = l * l / 2.0 * (1.0 / w - 1.0 / 1e-2);
    assert!(
        ((a - b) - expect).abs() <= 1e-9 * expect,
        "{a} − {b} vs {expect}"
    );
    let dexpect = 2.0 * l * (1.0 / w - 1.0 / 1e-2);
    assert!(((g_own[0] - g_wide[0]) - dexpect).abs() <= 1e-9 * dexpect.abs());
    // With every bin observed there is no wall to widen.
    let full = Dataset::new(&model, &[12.0, 1.0]).unwrap();
    assert!(!full.has_empty_main_bin());
}

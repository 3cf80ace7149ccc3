//! Models beyond the dense-Hessian limit (issue 22, item 3): the POI's uncertainty by conjugate
//! gradients equals the dense one, the others are reported as not computed with a word, and
//! what needs the whole covariance refuses with one message instead of allocating n².

use histfit_compute::HistFactoryData;
use histfit_compute::{CpuEvaluator, Dataset};
use histfit_infer::{fit, parameter_estimate, ranking, FitOptions};
use histfit_model::{compile, Settings, Workspace};
use histfit_testutil::synthetic::{workspace_json, Size};
use histfit_testutil::{load, settings};
use std::sync::Arc;

fn synthetic(size: Size) -> (CpuEvaluator, Dataset) {
    let ws = Workspace::from_str(&workspace_json(size), "synthetic").expect("valid");
    let model = Arc::new(compile(&ws, None, &Settings::smooth()).expect("compiles"));
    let data = Dataset::observed(&model);
    (CpuEvaluator::new(model), data)
}

/// σ(POI) without the matrix against σ(POI) from the dense inverse, on the synthetic model
/// (141 parameters: staterror γ, normsys, histosys) and on tHu (184, smooth setting).
#[test]
fn poi_uncertainty_without_the_matrix_equals_the_dense_one() {
    let size = Size {
        channels: 10,
        bins: 10,
        modifiers: 40,
        staterror: true,
    };
    let (eval, data) = synthetic(size);
    let (thu, thu_data) = load("workspace_tHu", settings("smooth"));
    for (mut eval, data, limit) in [(eval, data, 50), (CpuEvaluator::new(thu), thu_data, 100)] {
        let dense = fit(
            &mut eval,
            &data,
            &FitOptions {
                uncertainties: true,
                ..FitOptions::default()
            },
        )
        .unwrap();
        assert!(dense.converged && dense.covariance.is_some());
        let poi = histfit_compute::Evaluator::space(&eval).poi.unwrap();
        let sparse = fit(
            &mut eval,
            &data,
            &FitOptions {
                uncertainties: true,
                max_dense_parameters: Some(limit),
                ..FitOptions::default()
            },
        )
        .unwrap();
        let (a, b) = (
            dense.uncertainties.as_ref().unwrap()[poi],
            sparse.uncertainties.as_ref().unwrap()[poi],
        );
        assert!(
            ((a - b) / a).abs() < 1e-4,
            "σ(POI): dense {a}, conjugate gradients {b}"
        );
        assert!(sparse.covariance.is_none() && sparse.correlation.is_none());
        let unc = sparse.uncertainties.unwrap();
        for (i, u) in unc.iter().enumerate() {
            if i == poi {
                continue;
            }
            if sparse.fixed[i] {
                assert_eq!(*u, 0.0);
            } else {
                assert!(u.is_nan(), "parameter {i}: {u} (should be not computed)");
            }
        }
        assert!(
            sparse
                .warnings
                .iter()
                .any(|w| w.contains("uncertainty of the POI only")
                    && w.contains("--max-hessian-parameters")),
            "{:?}",
            sparse.warnings
        );
    }
}

/// The ranking and error propagation need the n×n covariance: above the limit they refuse,
/// naming the size and the option, before any fit or allocation.
#[test]
fn what_needs_the_full_covariance_refuses_above_the_limit() {
    let (eval, data) = synthetic(Size {
        channels: 4,
        bins: 5,
        modifiers: 6,
        staterror: true,
    });
    let opts = FitOptions {
        max_dense_parameters: Some(10),
        ..FitOptions::default()
    };
    let e = ranking(&eval, &data, &opts, &|_, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the ranking") && e.contains("above the limit of 10"),
        "{e}"
    );
    let e = parameter_estimate(&mut eval.clone(), &data, &opts, true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("error propagation") && e.contains("--max-hessian-parameters"),
        "{e}"
    );
}

/// The difference steps of both uncertainty paths stay inside the fit's own bounds, not the
/// model's: with the POI's lower bound widened to −5 and a deficit in the data, the best fit lies
/// at μ < 0, outside the model's [0, 10] — the POI's uncertainty is computed (equal on both paths)
/// rather than refused as "on bounds in both directions".
#[test]
fn uncertainties_follow_the_requests_bounds() {
    let (model, mut data) = load("simple_workspace", settings("smooth"));
    for n in data.main.iter_mut() {
        *n -= 6.0;
    }
    let mut eval = CpuEvaluator::new(model.clone());
    let space = histfit_compute::Evaluator::space(&eval).clone();
    let poi = space.poi.unwrap();
    let mut bounds = space.bounds.clone();
    assert_eq!(bounds[poi].0, 0.0);
    bounds[poi].0 = -5.0;
    let options = |limit| FitOptions {
        uncertainties: true,
        bounds: Some(bounds.clone()),
        max_dense_parameters: limit,
        ..FitOptions::default()
    };
    let dense = fit(&mut eval, &data, &options(None)).unwrap();
    assert!(
        dense.converged && dense.bestfit[poi] < -0.1,
        "{:?}",
        dense.bestfit
    );
    let poi_only = fit(&mut eval, &data, &options(Some(0))).unwrap();
    let (a, b) = (
        dense.uncertainties.as_ref().unwrap()[poi],
        poi_only.uncertainties.as_ref().unwrap()[poi],
    );
    assert!(
        a.is_finite() && ((a - b) / a).abs() < 1e-4,
        "dense {a}, CG {b}: {:?}",
        poi_only.warnings
    );
}

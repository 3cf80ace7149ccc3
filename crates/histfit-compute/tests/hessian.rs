//! The Hessian that steps one-bin parameters together ([`ParameterSpace::local_term`]) against
//! the one that steps every parameter alone, on every shipped workspace and both settings.

use histfit_compute::{
    block_on, hessian_async, AsyncEvaluator, Blocking, CpuEvaluator, Dataset, EvalFuture,
    ParameterSpace,
};
use histfit_testutil::{load, off_init_point, settings, SETTINGS, WORKSPACES};

/// The CPU evaluator with no parameter said to be local: every Hessian column its own gradient.
struct EveryColumn {
    inner: Blocking<Box<CpuEvaluator>>,
    space: ParameterSpace,
}

impl AsyncEvaluator for EveryColumn {
    fn space(&self) -> &ParameterSpace {
        &self.space
    }
    fn nll_grad<'a>(
        &'a mut self,
        params: &'a [f64],
        data: &'a Dataset,
        grad: &'a mut [f64],
    ) -> EvalFuture<'a> {
        self.inner.nll_grad(params, data, grad)
    }
    fn nll<'a>(&'a mut self, params: &'a [f64], data: &'a Dataset) -> EvalFuture<'a> {
        self.inner.nll(params, data)
    }
}

#[test]
fn grouped_columns_give_the_column_by_column_hessian() {
    let mut grouped_somewhere = false;
    for name in WORKSPACES {
        for setting in SETTINGS {
            let (model, data) = load(name, settings(setting));
            let mut grouped = Blocking(Box::new(CpuEvaluator::new(model.clone())));
            let space = grouped.space().clone();
            let local = space.local_term.iter().filter(|t| t.is_some()).count();
            grouped_somewhere |= local > 1;
            let mut alone = EveryColumn {
                inner: Blocking(Box::new(CpuEvaluator::new(model.clone()))),
                space: ParameterSpace {
                    local_term: vec![None; space.len()],
                    ..space.clone()
                },
            };
            // Away from the initial point, so that every curvature is its own, and off every
            // kink at 0 (where a forward and a backward difference rightly disagree).
            let x: Vec<f64> = off_init_point(&model)
                .iter()
                .zip(&space.bounds)
                .map(|(&v, &(lo, hi))| (v + 0.0123).clamp(lo, hi))
                .collect();
            let which: Vec<usize> = (0..space.len()).filter(|&i| !space.fixed[i]).collect();
            let a = block_on(hessian_async(&mut grouped, &x, &data, &which)).unwrap();
            let b = block_on(hessian_async(&mut alone, &x, &data, &which)).unwrap();
            let scale = b.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            for (i, (u, v)) in a.iter().zip(&b).enumerate() {
                assert!(
                    (u - v).abs() <= 1e-6 * scale,
                    "{name} {setting}: entry {i}: {u} grouped, {v} alone ({local} local)"
                );
            }
        }
    }
    assert!(
        grouped_somewhere,
        "no shipped workspace has one-bin parameters"
    );
}

#[test]
fn a_parameter_on_several_bins_is_not_local() {
    let (model, _) = load("workspace_tHu", settings("smooth"));
    let space = Blocking(Box::new(CpuEvaluator::new(model.clone())))
        .space()
        .clone();
    for (i, p) in model.parameters.iter().enumerate() {
        let local = space.local_term[i].is_some();
        // tHu's one-bin parameters are its staterror γ; its normsys, histosys, lumi and POI
        // act on whole samples of several bins.
        assert_eq!(local, p.name.starts_with("staterror"), "{}", p.name);
    }
    assert_eq!(space.local_term.iter().filter(|t| t.is_some()).count(), 41);
}

//! The Hessian that steps one-bin parameters together ([`ParameterSpace::local_term`]) against
//! the one that steps every parameter alone, on every shipped workspace and both settings.

use histfit_compute::HistFactoryData;
use histfit_compute::{
    block_on, hessian_async, AsyncEvaluator, Blocking, CpuEvaluator, Dataset, EvalFuture,
    ParameterSpace,
};
use histfit_model::{compile, Model, Settings, Workspace};
use histfit_testutil::{load, off_init_point, settings, SETTINGS, WORKSPACES};
use std::sync::Arc;

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

/// Entry by entry, within 1e-5 of the geometric mean of the two diagonals (a tolerance scaled to
/// the whole matrix would let a small entry be wrong beside a stiff γ).
fn agree(a: &[f64], b: &[f64], k: usize, what: &str) {
    for r in 0..k {
        for c in 0..k {
            let scale = (b[r * k + r] * b[c * k + c]).abs().sqrt().max(1e-300);
            let (u, v) = (a[r * k + c], b[r * k + c]);
            assert!(
                (u - v).abs() <= 1e-5 * scale,
                "{what}: entry ({r}, {c}): {u} grouped, {v} alone"
            );
        }
    }
}

/// The CPU evaluator of `model`, grouped and column by column.
fn both(model: &Arc<Model>) -> (Blocking<Box<CpuEvaluator>>, EveryColumn) {
    let grouped = Blocking(Box::new(CpuEvaluator::new(model.clone())));
    let space = grouped.space().clone();
    let alone = EveryColumn {
        inner: Blocking(Box::new(CpuEvaluator::new(model.clone()))),
        space: ParameterSpace {
            local_term: vec![None; space.len()],
            curvature_units: false,
            ..space
        },
    };
    (grouped, alone)
}

#[test]
fn grouped_columns_give_the_column_by_column_hessian() {
    let mut grouped_somewhere = false;
    for name in WORKSPACES {
        for setting in SETTINGS {
            let (model, data) = load(name, settings(setting));
            let (mut grouped, mut alone) = both(&model);
            let space = grouped.space().clone();
            let local = space.local_term.iter().filter(|t| t.is_some()).count();
            grouped_somewhere |= local > 1;
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
            agree(
                &a,
                &b,
                which.len(),
                &format!("{name} {setting} ({local} local)"),
            );
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

/// What the shipped workspaces lack: modifiers of a one-bin sample (normfactor, normsys,
/// histosys: local to that bin), a shapefactor and a staterror on the bins of a two-bin channel
/// (two local parameters on each bin), a staterror shared by the two channels (not local), and a
/// local parameter on its upper bound (its column a backward difference, in a group).
#[test]
fn one_bin_samples_shared_bins_and_a_bound() {
    let spec = r#"{
      "channels": [
        {"name": "one", "samples": [
          {"name": "s", "data": [5.0], "modifiers": [
            {"name": "k", "type": "normfactor", "data": null},
            {"name": "n1", "type": "normsys", "data": {"hi": 1.2, "lo": 0.85}},
            {"name": "h1", "type": "histosys", "data": {"hi_data": [6.0], "lo_data": [4.5]}}]},
          {"name": "b", "data": [20.0], "modifiers": [
            {"name": "shared", "type": "staterror", "data": [2.0]}]}]},
        {"name": "two", "samples": [
          {"name": "b", "data": [30.0, 12.0], "modifiers": [
            {"name": "sf", "type": "shapefactor", "data": null},
            {"name": "st", "type": "staterror", "data": [3.0, 1.5]},
            {"name": "mu", "type": "normfactor", "data": null}]}]}
      ],
      "observations": [{"name": "one", "data": [27.0]}, {"name": "two", "data": [33.0, 11.0]}],
      "measurements": [{"name": "m", "config": {"poi": "mu", "parameters": []}}],
      "version": "1.0.0"
    }"#;
    let ws = Workspace::from_str(spec, "synthetic").unwrap();
    let model = Arc::new(compile(&ws, None, &Settings::smooth()).unwrap());
    let data = histfit_compute::Dataset::observed(&model);
    let (mut grouped, mut alone) = both(&model);
    let space = grouped.space().clone();
    let local = |name: &str| space.local_term[space.index(name).expect(name)];
    for one_bin in ["k", "n1", "h1"] {
        assert_eq!(local(one_bin), Some(0), "{one_bin}");
    }
    assert_eq!(local("sf[0]"), local("st[0]"));
    assert_eq!(local("sf[1]"), Some(2));
    assert_eq!(local("mu"), None);
    let mut x: Vec<f64> = off_init_point(&model)
        .iter()
        .zip(&space.bounds)
        .map(|(&v, &(lo, hi))| (v + 0.0123).clamp(lo, hi))
        .collect();
    let top = space.index("st[1]").unwrap();
    x[top] = space.bounds[top].1;
    let which: Vec<usize> = (0..space.len()).filter(|&i| !space.fixed[i]).collect();
    let a = block_on(hessian_async(&mut grouped, &x, &data, &which)).unwrap();
    let b = block_on(hessian_async(&mut alone, &x, &data, &which)).unwrap();
    agree(&a, &b, which.len(), "synthetic");
}

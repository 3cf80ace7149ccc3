//! A full maximum likelihood fit with uncertainties (Hessian, covariance) of the shipped ATLAS
//! workspace `workspace_tHu.json`, on one core.

use criterion::{criterion_group, criterion_main, Criterion};
use histfit_compute::{CpuEvaluator, Dataset};
use histfit_infer::{fit, FitOptions};
use histfit_model::{compile, Settings, Workspace};
use std::sync::Arc;

fn bench(c: &mut Criterion) {
    let path = format!(
        "{}/../../tests/fixtures/workspace_tHu.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let ws = Workspace::from_str(&std::fs::read_to_string(path).unwrap(), "tHu").unwrap();
    let mut group = c.benchmark_group("tHu");
    group.sample_size(20);
    for (label, settings) in [
        ("smooth", Settings::smooth()),
        ("pyhf", Settings::pyhf_defaults()),
    ] {
        let model = Arc::new(compile(&ws, None, &settings).unwrap());
        let data = Dataset::observed(&model);
        let mut ev = CpuEvaluator::new(model.clone());
        let opts = FitOptions {
            uncertainties: true,
            ..Default::default()
        };
        group.bench_function(format!("{label}/fit_with_uncertainties"), |b| {
            b.iter(|| {
                let r = fit(&mut ev, &data, &opts).unwrap();
                assert!(r.converged);
                r
            })
        });
        group.bench_function(format!("{label}/fit_no_uncertainties"), |b| {
            b.iter(|| fit(&mut ev, &data, &FitOptions::default()).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

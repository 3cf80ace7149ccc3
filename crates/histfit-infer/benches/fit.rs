//! A full maximum likelihood fit with uncertainties (Hessian, covariance) of the shipped ATLAS
//! workspace `workspace_tHu.json`, on one core.

use criterion::{criterion_group, criterion_main, Criterion};
use histfit_compute::CpuEvaluator;
use histfit_infer::{fit, FitOptions};
use histfit_testutil::{load, settings, SETTINGS};

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("tHu");
    group.sample_size(20);
    for label in SETTINGS {
        let (model, data) = load("workspace_tHu", settings(label));
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

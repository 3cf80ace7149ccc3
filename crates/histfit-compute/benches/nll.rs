//! NLL and NLL+gradient of the shipped ATLAS workspace `workspace_tHu.json` (184 parameters,
//! 41 bins, 3 700 modifiers) at a point off the suggested init, on one core.

use criterion::{criterion_group, criterion_main, Criterion};
use histfit_compute::{CpuEvaluator, Evaluator};
use histfit_testutil::{load, off_init_point, settings, SETTINGS};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    for label in SETTINGS {
        let (model, data) = load("workspace_tHu", settings(label));
        let mut ev = CpuEvaluator::new(model.clone());
        let p = off_init_point(&model);
        let mut g = vec![0.0; p.len()];
        c.bench_function(&format!("tHu/{label}/nll"), |b| {
            b.iter(|| ev.nll(black_box(&p), &data).unwrap())
        });
        c.bench_function(&format!("tHu/{label}/nll_grad"), |b| {
            b.iter(|| ev.nll_grad(black_box(&p), &data, &mut g).unwrap())
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

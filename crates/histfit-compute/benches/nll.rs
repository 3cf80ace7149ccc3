//! NLL and NLL+gradient of the shipped ATLAS workspace `workspace_tHu.json` (184 parameters,
//! 41 bins, 3 700 modifiers) at the suggested init, on one core.

use criterion::{criterion_group, criterion_main, Criterion};
use histfit_compute::{CpuEvaluator, Dataset, Evaluator};
use histfit_model::{compile, Settings, Workspace};
use std::hint::black_box;
use std::sync::Arc;

fn bench(c: &mut Criterion) {
    let path = format!(
        "{}/../../tests/fixtures/workspace_tHu.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let ws = Workspace::from_str(&std::fs::read_to_string(path).unwrap(), "tHu").unwrap();
    for (label, settings) in [
        ("smooth", Settings::smooth()),
        ("pyhf", Settings::pyhf_defaults()),
    ] {
        let model = Arc::new(compile(&ws, None, &settings).unwrap());
        let data = Dataset::observed(&model);
        let mut ev = CpuEvaluator::new(model.clone());
        // A point off the init so every interpolation branch is live.
        let p: Vec<f64> = model
            .parameters
            .iter()
            .enumerate()
            .map(|(i, q)| (q.init + 0.1 * ((i % 7) as f64 - 3.0) / 3.0).clamp(q.lower, q.upper))
            .collect();
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

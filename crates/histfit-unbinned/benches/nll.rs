//! −ln L and its gradient of the benchmark model (extended Gaussian + exponential on [60, 120],
//! five free parameters) over 10⁴, 10⁵ and 10⁶ events, on one thread and on all of them.
//! `cargo bench -p histfit-unbinned --bench nll`; `NLL_MODEL=cb_exp_ext` (any fixture of
//! tests/fixtures/hs3 by its stem) measures that model instead, over its own observed events
//! repeated to each count.

use criterion::{criterion_group, criterion_main, Criterion};
use histfit_seam::{Dataset, Evaluator, EventTable, Events};
use histfit_unbinned::{open, Choice};
use std::sync::Arc;

fn model() -> histfit_unbinned::UnbinnedModel {
    let path = format!(
        "{}/../../tests/fixtures/hs3/{}.json",
        env!("CARGO_MANIFEST_DIR"),
        std::env::var("NLL_MODEL").unwrap_or("gauss_exp_ext".into())
    );
    let doc = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    open(&doc, &Choice::default()).unwrap()
}

/// n events spread over the range (a quasi-random sequence: the cost does not depend on where).
fn events(n: usize, m: &histfit_unbinned::UnbinnedModel) -> Dataset {
    if std::env::var("NLL_MODEL").is_ok() {
        let t = &m.observed.channels[0];
        let k = t.columns[0].len();
        let table = EventTable {
            names: t.names.clone(),
            columns: t
                .columns
                .iter()
                .map(|c| (0..n).map(|i| c[i % k]).collect())
                .collect(),
            weights: None,
        };
        return Dataset::of_events(
            Arc::new(Events {
                channels: vec![table],
            }),
            Vec::new(),
            Vec::new(),
            0.0,
        );
    }
    let x = (0..n)
        .map(|i| 60.0 + 60.0 * ((i as f64 * 0.754_877_666_246_692_8) % 1.0))
        .collect();
    let table = EventTable {
        names: vec!["x".into()],
        columns: vec![x],
        weights: None,
    };
    Dataset::of_events(
        Arc::new(Events {
            channels: vec![table],
        }),
        Vec::new(),
        Vec::new(),
        0.0,
    )
}

fn bench(c: &mut Criterion) {
    let mut m = model();
    // Two points taken in turn: the model answers a request at the point it has just evaluated
    // from that evaluation, which is not what is measured here.
    let p0 = m.space.init.clone();
    let mut p1 = p0.clone();
    p1[0] *= 1.0 + 1e-9;
    let points = [p0, p1];
    let mut turn = 0usize;
    let mut next = move || {
        turn += 1;
        turn % 2
    };
    let mut g = vec![0.0; points[0].len()];
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for n in [10_000, 100_000, 1_000_000] {
        let data = events(n, &m);
        c.bench_function(&format!("nll_grad {n} events, 1 thread"), |b| {
            b.iter(|| one.install(|| m.nll_grad(&points[next()], &data, &mut g).unwrap()))
        });
        c.bench_function(&format!("nll_grad {n} events, all threads"), |b| {
            b.iter(|| m.nll_grad(&points[next()], &data, &mut g).unwrap())
        });
        c.bench_function(&format!("nll {n} events, 1 thread"), |b| {
            b.iter(|| one.install(|| m.nll(&points[next()], &data).unwrap()))
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);

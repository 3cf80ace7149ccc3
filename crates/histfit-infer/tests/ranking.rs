//! Ranking: impacts equal independent refits, results do not depend on the thread count, and
//! entries come sorted by post-fit impact.

use histfit_compute::HistFactoryData;
use histfit_compute::{CpuEvaluator, Dataset};
use histfit_infer::{fit, ranking, FitOptions};
use histfit_model::{compile, Settings, Workspace};
use std::sync::Arc;

#[test]
fn ranking_matches_refits_and_is_thread_independent() {
    let path = histfit_testutil::fixture("complex_workspace.json");
    let ws = Workspace::from_str(&std::fs::read_to_string(path).unwrap(), "complex").unwrap();
    let model = Arc::new(compile(&ws, None, &Settings::smooth()).unwrap());
    let data = Dataset::observed(&model);
    let ev = CpuEvaluator::new(model.clone());
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| ranking(&ev, &data, &FitOptions::default(), &|_, _| {}).unwrap())
    };
    let one = run(1);
    let two = run(2);
    assert_eq!(one, two, "thread count changed the ranking");
    // Constrained, free, non-POI parameters: bkg_shape, lumi, ttbar_norm, staterror_SR[0..2].
    assert_eq!(one.entries.len(), 5);
    assert_eq!(one.failed_fits, 0);
    let key = |e: &histfit_infer::RankingEntry| {
        e.impact_postfit_up.abs().max(e.impact_postfit_down.abs())
    };
    assert!(one.entries.windows(2).all(|w| key(&w[0]) >= key(&w[1])));
    // Each impact equals an independent cold refit.
    let mut e2 = CpuEvaluator::new(model.clone());
    for e in &one.entries {
        let target = (e.value + e.uncertainty).clamp(
            model.parameters[e.index].lower,
            model.parameters[e.index].upper,
        );
        let r = fit(
            &mut e2,
            &data,
            &FitOptions {
                fix: vec![(e.index, target)],
                ..Default::default()
            },
        )
        .unwrap();
        let impact = r.bestfit[model.poi.expect("the model has a POI")] - one.mu_hat;
        assert!(
            (impact - e.impact_postfit_up).abs() < 1e-4,
            "{}: {impact} vs {}",
            e.name,
            e.impact_postfit_up
        );
    }
}

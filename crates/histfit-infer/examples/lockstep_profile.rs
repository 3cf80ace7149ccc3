//! Profiling driver for the lockstep executor: a toy ensemble of `workspace_tHu.json` through
//! [`Batched`] with the CPU evaluator behind the batch interface, so `perf` shows the host-side
//! cost per fit (optimizer, executor) next to the evaluator's.
//! `cargo run --release -p histfit-infer --example lockstep_profile -- [toys] [window]`

use histfit_compute::CpuEvaluator;
use histfit_infer::batch::Batcher;
use histfit_infer::toys::{fit_toys_on, Batched};
use histfit_infer::{fit, FitOptions};
use histfit_testutil::{load, settings};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let window: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(256);
    let (model, data) = load("workspace_tHu", settings("smooth"));
    let mut cpu = CpuEvaluator::new(model.clone());
    let gen = fit(&mut cpu, &data, &FitOptions::default()).expect("fits");
    let batcher = Batcher::new(CpuEvaluator::new(model));
    let runner = Batched {
        window,
        ..Batched::new(&batcher)
    };
    let t = std::time::Instant::now();
    let fits = fit_toys_on(
        &runner,
        &gen.bestfit,
        1,
        n,
        0..n,
        &FitOptions::default(),
        &|_, _| {},
    )
    .unwrap();
    let st = batcher.stats();
    println!(
        "{n} toys in {:.3} s; {} launches, evaluator {:.3} s, leading {:.3} s; converged {}",
        t.elapsed().as_secs_f64(),
        st.launches,
        st.seconds_eval,
        st.seconds_lead,
        fits.iter().filter(|f| f.converged).count()
    );
}

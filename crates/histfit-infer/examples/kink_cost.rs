//! Diagnostic: what a toy fit costs in each interpolation setting, and how much of it the kink
//! rules take (issue 23: the resident fits do not run them yet). Fits toys 0..N of seed 0 at the
//! observed fit, each from the generating point in the ensembles' curvature units, one at a time
//! on one CPU thread, and prints per setting the time per toy, the mean evaluations and
//! iterations, the kinked parameters, the other sides searched (capped per fit) and the kinked
//! parameters that end within 0.3 of a unit of their kink.
//!
//! `HISTFIT_FIXTURES=DIR cargo run --release -p histfit-infer --example kink_cost -- [WS] [N]`
//! (default `workspace_tHu`, 100 toys).
use histfit_compute::{CpuEvaluator, Evaluator};
use histfit_infer::{fit, FitOptions};
use histfit_testutil::{load, settings};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ws = args.first().map_or("workspace_tHu", String::as_str);
    let n: u64 = args.get(1).map_or(100, |v| v.parse().expect("N: a number"));
    for setting in ["smooth", "pyhf"] {
        let (model, data) = load(ws, settings(setting));
        let mut ev = CpuEvaluator::new(model.clone());
        let gen = fit(&mut ev, &data, &FitOptions::default())
            .expect("the observed fit")
            .bestfit;
        let scales = histfit_infer::fit::curvature_scales(&mut ev, &gen, &FitOptions::default())
            .expect("the ensembles' units");
        let toys = ev.toys(&gen, 0, 0..n).expect("toys");
        let kinked = ev.space().kinked.clone();
        let (mut evals, mut iters, mut kinks, mut searched, mut near) = (0, 0, 0, 0, 0);
        let t = std::time::Instant::now();
        for toy in &toys {
            let o = FitOptions {
                init: Some(gen.clone()),
                scales: Some(scales.clone()),
                ..FitOptions::default()
            };
            let r = fit(&mut ev, toy, &o).expect("a toy fit");
            evals += r.evaluations;
            iters += r.iterations;
            kinks += r.kinks.len();
            searched += r.kinks.iter().filter(|k| k.other_side_searched).count();
            near += (0..r.bestfit.len())
                .filter(|&i| kinked[i] && r.bestfit[i].abs() < 0.3 * scales[i])
                .count();
        }
        let dt = t.elapsed().as_secs_f64();
        let per = |v: usize| v as f64 / n.max(1) as f64;
        println!(
            "{ws} {setting}: {n} toys, {:.2} ms a toy; evaluations {:.1}, iterations {:.1}; \
             kinked parameters {:.1}, other sides searched {:.2}, kinked within 0.3 unit of the \
             kink {:.1} (means per toy)",
            1e3 * dt / n.max(1) as f64,
            per(evals),
            per(iters),
            per(kinks),
            per(searched),
            per(near)
        );
    }
}

//! Diagnostic: toy fits from two nearby starts (the generating point, and every free parameter
//! moved by 1e-3 of its unit), as a GPU's and the CPU's fits of the same toy take nearby paths;
//! prints the toys whose fits end more than 1e-6 apart in twice_nll (issue 23).
//!
//! `HISTFIT_FIXTURES=DIR cargo run --release -p histfit-infer --example nearby -- WS N [width]
//! [pyhf]` (toys 0..N of seed 0 at the observed fit, smooth setting; `width`: the constraint
//! widths' units instead of the ensembles' curvature units; `pyhf`: pyhf's interpolation codes).
use histfit_compute::{CpuEvaluator, Evaluator};
use histfit_infer::{fit, FitOptions};
use histfit_testutil::{load, settings};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (ws, n) = (&args[0], args[1].parse::<u64>().expect("N: a number"));
    let flag = |f: &str| args[2..].iter().any(|a| a == f);
    let setting = if flag("pyhf") { "pyhf" } else { "smooth" };
    let (model, data) = load(ws, settings(setting));
    let mut ev = CpuEvaluator::new(model.clone());
    let gen = fit(&mut ev, &data, &FitOptions::default()).unwrap().bestfit;
    let space = ev.space().clone();
    let scales = if flag("width") {
        space.scales.clone()
    } else {
        histfit_infer::fit::curvature_scales(&mut ev, &gen, &FitOptions::default()).unwrap()
    };
    let poi = model.poi.unwrap_or(0);
    let nearby = histfit_testutil::nearby_start(&space, &gen, &scales);
    let toys = ev.toys(&gen, 0, 0..n).unwrap();
    let (mut above, mut worst) = (0, 0.0f64);
    for (k, toy) in toys.iter().enumerate() {
        let at = |init: &[f64]| {
            let o = FitOptions {
                init: Some(init.to_vec()),
                scales: Some(scales.clone()),
                ..FitOptions::default()
            };
            fit(&mut ev.clone(), toy, &o).unwrap()
        };
        let (a, b) = (at(&gen), at(&nearby));
        let d = (a.twice_nll - b.twice_nll).abs();
        worst = worst.max(d);
        if d > 1e-6 || a.converged != b.converged {
            above += 1;
            println!(
                "toy {k}: twice_nll {:.9} / {:.9} (Δ {d:.2e}), POI {:.6} / {:.6}; pg {:.1e} / {:.1e}; iterations {} / {}; {} / {}",
                a.twice_nll, b.twice_nll, a.bestfit[poi], b.bestfit[poi],
                a.projected_gradient_norm, b.projected_gradient_norm,
                a.iterations, b.iterations, a.reason, b.reason
            );
        }
    }
    println!("{above} of {n} toys above 1e-6 (largest {worst:.2e})");
}

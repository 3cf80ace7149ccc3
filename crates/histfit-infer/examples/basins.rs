//! Diagnostic: toy fits from the generating point, from the mirror of that fit through it, and
//! from random points around the model's initial point (issue 21's second starts).
//!
//! `HISTFIT_FIXTURES=DIR cargo run --release -p histfit-infer --example basins -- WS R TOY...`
//! (`WS` names `DIR/WS.json`, or with `PUBLIC=1` the public likelihood `DIR/public/WS.json.gz`;
//! `SETTING=pyhf` for pyhf's codes, smooth by default; `DIFF=1` also lists the parameters that
//! separate the first start's minimum from the mirror's).
use histfit_compute::{CpuEvaluator, Evaluator};
use histfit_infer::{fit, FitOptions};
use histfit_testutil::{load, load_public, settings};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ws = &args[0];
    let r: u64 = args[1].parse().unwrap();
    let list: Vec<u64> = args[2..].iter().map(|a| a.parse().unwrap()).collect();
    let setting = settings(&std::env::var("SETTING").unwrap_or_else(|_| "smooth".into()));
    let (_model, data) = match std::env::var_os("PUBLIC") {
        Some(_) => load_public(ws, setting),
        None => load(ws, setting),
    };
    let mut ev = CpuEvaluator::new(_model.clone());
    let gen = fit(&mut ev, &data, &FitOptions::default()).unwrap().bestfit;
    let space = ev.space().clone();
    let scales =
        histfit_infer::fit::curvature_scales(&mut ev, &gen, &FitOptions::default()).unwrap();
    let one = |init: &[f64], toy: &histfit_compute::Dataset| {
        let o = FitOptions {
            init: Some(init.to_vec()),
            scales: Some(scales.clone()),
            starts: histfit_infer::fit::Starts::Count(0),
            ..FitOptions::default()
        };
        fit(&mut ev.clone(), toy, &o).unwrap()
    };
    let clamp = |i: usize, v: f64| {
        let (lo, hi) = space.bounds[i];
        let m = 1e-3 * (hi - lo).min(scales[i]);
        v.clamp(lo + m, hi - m)
    };
    for &k in &list {
        let toy = ev.clone().toys(&gen, 0, k..k + 1).unwrap().remove(0);
        let a = one(&gen, &toy);
        let mirror: Vec<f64> = (0..gen.len())
            .map(|i| {
                if space.fixed[i] {
                    gen[i]
                } else {
                    clamp(i, 2.0 * gen[i] - a.bestfit[i])
                }
            })
            .collect();
        let b = one(&mirror, &toy);
        let c0 = one(&space.init, &toy);
        if std::env::var_os("DIFF").is_some() {
            // The parameters that separate the first start's minimum from the mirror's.
            let mut d: Vec<(f64, usize)> = (0..gen.len())
                .map(|i| ((a.bestfit[i] - b.bestfit[i]).abs() / scales[i], i))
                .collect();
            d.sort_by(|x, y| y.0.total_cmp(&x.0));
            for &(_, i) in d.iter().take(8) {
                println!(
                    "  {}: first {:.4} mirror {:.4} gen {:.4} bounds {:?} unit {:.3e}",
                    space.names[i], a.bestfit[i], b.bestfit[i], gen[i], space.bounds[i], scales[i]
                );
            }
        }
        let mut line = format!(
            "toy {k}: first {:.6} mirror {:+.3e} init {:+.3e} |",
            a.twice_nll,
            b.twice_nll - a.twice_nll,
            c0.twice_nll - a.twice_nll
        );
        let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ k;
        let mut u = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..r {
            let p: Vec<f64> = (0..gen.len())
                .map(|i| {
                    if space.fixed[i] {
                        return gen[i];
                    }
                    let init = space.init[i];
                    let w = if init == 1.0 && space.bounds[i].0 >= 0.0 {
                        0.5
                    } else {
                        2.0
                    };
                    clamp(i, init + w * (2.0 * u() - 1.0))
                })
                .collect();
            let c = one(&p, &toy);
            line += &format!(" {:+.3e}", c.twice_nll - a.twice_nll);
        }
        println!("{line}");
    }
}

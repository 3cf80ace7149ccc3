//! Diagnostic: toy fits from two nearby starts (the generating point, and every free parameter
//! moved by 1e-3 of its unit), as a GPU's and the CPU's fits of the same toy take nearby paths;
//! prints the toys whose fits end more than 1e-6 apart in twice_nll (issue 23).
//!
//! `HISTFIT_FIXTURES=DIR cargo run --release -p histfit-infer --example nearby -- WS N [width]
//! [pyhf]` (toys 0..N of seed 0 at the observed fit, smooth setting; `width`: the constraint
//! widths' units instead of the ensembles' curvature units; `pyhf`: pyhf's interpolation codes;
//! `only=I,J,...`: just those toys of 0..N; `all`: print every toy; `diff`: the parameters that
//! tell two minima apart, and how the switched kinked ones rank; `units`: the second fit from the
//! generating point too, in the constraint widths' units, as a single fit takes it; `b`: the
//! background-only ensemble of `hypotest-toys --seed 0`, drawn at the conditional fit at POI 0;
//! `cond=MU`: the toys' fits with the POI held at MU, as that ensemble's conditional fits;
//! `jitter=K`: the second start moved by ±1e-3 of each unit, the signs drawn from K).
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
    let poi = model.poi.unwrap_or(0);
    let value = |key: &str| {
        args[2..]
            .iter()
            .find_map(|a| a.strip_prefix(key))
            .map(|v| v.parse::<f64>().expect("KEY=number"))
    };
    let (gen_fix, seed) = match flag("b") {
        true => (vec![(poi, 0.0)], histfit_infer::toys::background_stream(0)),
        false => (Vec::new(), 0),
    };
    let gen_o = FitOptions {
        fix: gen_fix,
        ..FitOptions::default()
    };
    let mut gen = fit(&mut ev, &data, &gen_o).unwrap().bestfit;
    let space = ev.space().clone();
    let scales = if flag("width") {
        space.scales.clone()
    } else {
        histfit_infer::fit::curvature_scales(&mut ev, &gen, &FitOptions::default()).unwrap()
    };
    let toys = ev.toys(&gen, seed, 0..n).unwrap();
    let cond = value("cond=");
    if let Some(mu) = cond {
        gen[poi] = mu;
    }
    let mut nearby = histfit_testutil::nearby_start(&space, &gen, &scales);
    // `jitter=K`: every free parameter moved by ±1e-3 of its unit, the signs drawn from K.
    if let Some(k) = value("jitter=") {
        for (i, x) in nearby.iter_mut().enumerate() {
            if !space.fixed[i] {
                let h = (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    ^ (i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                let sign = if (h >> 17) & 1 == 1 { 1.0 } else { -1.0 };
                *x = (gen[i] + sign * 1e-3 * scales[i]).clamp(space.bounds[i].0, space.bounds[i].1);
            }
        }
    }
    let only: Option<Vec<usize>> =
        args[2..]
            .iter()
            .find_map(|a| a.strip_prefix("only="))
            .map(|l| {
                l.split(',')
                    .map(|i| i.parse().expect("only=I,J,..."))
                    .collect()
            });
    let (mut above, mut worst) = (0, 0.0f64);
    for (k, toy) in toys.iter().enumerate() {
        if only.as_ref().is_some_and(|o| !o.contains(&k)) {
            continue;
        }
        let at = |init: &[f64], scales: &[f64]| {
            let o = FitOptions {
                init: Some(init.to_vec()),
                scales: Some(scales.to_vec()),
                fix: cond.map(|mu| vec![(poi, mu)]).unwrap_or_default(),
                ..FitOptions::default()
            };
            fit(&mut ev.clone(), toy, &o).unwrap()
        };
        let (a, b) = match flag("units") {
            true => (at(&gen, &scales), at(&gen, &space.scales)),
            false => (at(&gen, &scales), at(&nearby, &scales)),
        };
        let d = (a.twice_nll - b.twice_nll).abs();
        worst = worst.max(d);
        let apart = d > 1e-6 || a.converged != b.converged;
        above += usize::from(apart);
        if apart || flag("all") {
            println!(
                "toy {k}: twice_nll {:.9} / {:.9} (Δ {d:.2e}), POI {:.6} / {:.6}; pg {:.1e} / {:.1e}; iterations {} / {}; {} / {}",
                a.twice_nll, b.twice_nll, a.bestfit[poi], b.bestfit[poi],
                a.projected_gradient_norm, b.projected_gradient_norm,
                a.iterations, b.iterations, a.reason, b.reason
            );
            if flag("diff") {
                // The parameters that tell the two basins apart (kinked ones marked).
                let mut ds: Vec<usize> = (0..space.len())
                    .filter(|&i| (a.bestfit[i] - b.bestfit[i]).abs() > 5e-3)
                    .collect();
                ds.sort_by(|&i, &j| {
                    let d = |k: usize| (a.bestfit[k] - b.bestfit[k]).abs();
                    d(j).total_cmp(&d(i))
                });
                for &i in ds.iter().take(12) {
                    let mark = if space.kinked[i] { " (kinked)" } else { "" };
                    println!(
                        "    {}{mark}: {:.5} / {:.5}",
                        space.names[i], a.bestfit[i], b.bestfit[i]
                    );
                }
                // At the higher minimum: each kinked parameter's mirror gap f(θ_k → −θ_k) − f,
                // and where the parameters that changed side rank by that gap and by nearness.
                let hi = if a.twice_nll > b.twice_nll { &a } else { &b };
                let lo = if a.twice_nll > b.twice_nll { &b } else { &a };
                let mut ev2 = ev.clone();
                let f0 = ev2.nll(&hi.bestfit, toy).unwrap();
                let mut gaps: Vec<(f64, f64, usize)> = (0..space.len())
                    .filter(|&i| space.kinked[i] && !space.fixed[i])
                    .filter(|&i| (1e-6..=1.0).contains(&hi.bestfit[i].abs()))
                    .map(|i| {
                        let mut x = hi.bestfit.clone();
                        x[i] = -x[i];
                        (ev2.nll(&x, toy).unwrap() - f0, hi.bestfit[i].abs(), i)
                    })
                    .collect();
                gaps.sort_by(|x, y| x.0.total_cmp(&y.0));
                let mut near: Vec<usize> = gaps.iter().map(|g| g.2).collect();
                near.sort_by(|&i, &j| hi.bestfit[i].abs().total_cmp(&hi.bestfit[j].abs()));
                println!(
                    "    {} candidates |θ| in [1e-6, 1]; {} in [1e-6, 0.1]",
                    gaps.len(),
                    gaps.iter().filter(|g| g.1 <= 0.1).count()
                );
                for (r, g) in gaps.iter().enumerate() {
                    let i = g.2;
                    if hi.bestfit[i] * lo.bestfit[i] < 0.0 {
                        let rn = near.iter().position(|&j| j == i).unwrap();
                        println!("    switched {}: θ {:.4}, gap {:.4e}, rank by gap {r}, by nearness {rn}",
                            space.names[i], hi.bestfit[i], g.0);
                    }
                }
                println!(
                    "    smallest gaps: {:?}",
                    gaps.iter()
                        .take(8)
                        .map(|g| (
                            space.names[g.2].as_str(),
                            (g.0 * 1e4).round() / 1e4,
                            (g.1 * 1e3).round() / 1e3
                        ))
                        .collect::<Vec<_>>()
                );
            }
        }
    }
    println!("{above} of {n} toys above 1e-6 (largest {worst:.2e})");
}

//! Diagnostic: raw L-BFGS-B runs of toys (the descent the resident kernel runs first, without
//! the fit's finish) on one CPU thread — iteration counts, and for toys above 1000 iterations
//! how the path went (f, projected gradient, bounds met; bins whose λ ends near or below 0).
//!
//! `HISTFIT_FIXTURES=DIR cargo run --release -p histfit-device --example toy_trace -- WS N`
//! (toys 0..N of seed 7 at the observed fit, smooth setting). `MEM=m`: L-BFGS-B memory;
//! `QUIET=1`: the summary only; `TRACE_ALL=1`: every toy's path; `DUMP=1`: each toy's f on
//! stderr; `NEWTON_AT=K`: also a hybrid — K iterations, Newton-CG steps, then L-BFGS-B again —
//! against the plain run (BENCHMARKS.md, issue 23, session 15); `CONT=w1,w2,…`: also descents
//! on those empty-bin walls in turn, then on the dataset's own, against the plain run
//! (`CONT_ALL=1` lists every toy; histfit_compute's SOFT_EMPTY_BIN_WALLS, session 19).
use histfit_compute::{CpuEvaluator, Evaluator};
use histfit_infer::{fit, FitOptions};
use histfit_optim::{Ask, Lbfgsb, Options};
use histfit_testutil::{load, settings};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!(
            "usage: toy_trace WORKSPACE N_TOYS (HISTFIT_FIXTURES: the folder of WORKSPACE.json)"
        );
        std::process::exit(2);
    }
    let ws = args[0].as_str();
    let n: u64 = args[1].parse().expect("N_TOYS: a number");
    let (model, data) = load(ws, settings("smooth"));
    let mut cpu = CpuEvaluator::new(model.clone());
    let gen = fit(&mut cpu, &data, &FitOptions::default())
        .unwrap()
        .bestfit;
    let space = cpu.space().clone();
    let free: Vec<usize> = (0..gen.len()).filter(|&i| !space.fixed[i]).collect();
    let mut sc: Vec<f64> = free.iter().map(|&i| space.scales[i]).collect();
    if std::env::var("SCALE").as_deref() == Ok("hess") {
        // 1/√H_ii of the observed data's −ln L at the generating point (central differences).
        let mut gp = vec![0.0; gen.len()];
        let mut gm = vec![0.0; gen.len()];
        let d0 = data.without_constant();
        let mut changed = Vec::new();
        for (j, &i) in free.iter().enumerate() {
            let h = 1e-4 * sc[j];
            let mut x = gen.clone();
            x[i] = gen[i] + h;
            cpu.nll_grad(&x, &d0, &mut gp).unwrap();
            x[i] = gen[i] - h;
            cpu.nll_grad(&x, &d0, &mut gm).unwrap();
            let hii = (gp[i] - gm[i]) / (2.0 * h);
            if hii.is_finite() && hii > 0.0 {
                let mut s = 1.0 / hii.sqrt();
                if std::env::var("POW2").is_ok() {
                    s = s.log2().round().exp2();
                }
                changed.push((space.names[i].clone(), sc[j], s));
                sc[j] = s;
            }
        }
        changed.sort_by(|a, b| {
            (b.1 / b.2)
                .max(b.2 / b.1)
                .total_cmp(&(a.1 / a.2).max(a.2 / a.1))
        });
        for c in changed.iter().take(8) {
            println!("scale {}: {:.3e} -> {:.3e}", c.0, c.1, c.2);
        }
    }
    let lo: Vec<f64> = free
        .iter()
        .zip(&sc)
        .map(|(&i, s)| space.bounds[i].0 / s)
        .collect();
    let hi: Vec<f64> = free
        .iter()
        .zip(&sc)
        .map(|(&i, s)| space.bounds[i].1 / s)
        .collect();
    let z0: Vec<f64> = free.iter().zip(&sc).map(|(&i, s)| gen[i] / s).collect();
    // Without the datasets' constants, as the fit (fit_async) and the kernel minimise them.
    let toys: Vec<_> = cpu
        .toys(&gen, 7, 0..n)
        .unwrap()
        .iter()
        .map(|d| d.without_constant())
        .collect();
    let mut its = Vec::new();
    let mut cont_its: Vec<usize> = Vec::new();
    let (mut cont_worse, mut cont_better) = (0, 0);
    let mut tot_ev = 0usize;
    for (k, d) in toys.iter().enumerate() {
        let mem: usize = std::env::var("MEM")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10);
        let mut opt = Lbfgsb::new(
            &z0,
            &lo,
            &hi,
            Options {
                memory: mem,
                ..Options::default()
            },
        );
        let mut x = gen.clone();
        let mut g = vec![0.0; gen.len()];
        let mut gz = vec![0.0; free.len()];
        let mut trace = Vec::new();
        let mut last_it = usize::MAX;
        while let Ask::Evaluate(z) = opt.ask() {
            for (j, &i) in free.iter().enumerate() {
                x[i] = z[j] * sc[j];
            }
            let f = cpu.nll_grad(&x, d, &mut g).unwrap();
            for (j, &i) in free.iter().enumerate() {
                gz[j] = g[i] * sc[j];
            }
            opt.tell(f, &gz);
            if opt.iterations != last_it {
                last_it = opt.iterations;
                let at_bound = (0..free.len())
                    .filter(|&j| opt.x()[j] <= lo[j] || opt.x()[j] >= hi[j])
                    .count();
                trace.push((
                    opt.iterations,
                    opt.evaluations,
                    opt.f(),
                    opt.projected_gradient_norm(),
                    at_bound,
                ));
            }
        }
        if std::env::var("DUMP").is_ok() {
            eprintln!("F {k} {:.12} {}", opt.f(), opt.iterations);
        }
        if let Ok(cont) = std::env::var("CONT") {
            let walls: Vec<f64> = cont.split(',').map(|v| v.parse().unwrap()).collect();
            let mut z = z0.clone();
            let mut total = 0usize;
            let mut status = String::new();
            let mut fz = 0.0;
            for (si, &w) in walls
                .iter()
                .chain(std::iter::once(&d.empty_bin_wall))
                .enumerate()
            {
                let dw = d.with_empty_bin_wall(w);
                let mut f_eval = |zz: &[f64], gz: &mut [f64]| -> f64 {
                    for (j, &i) in free.iter().enumerate() {
                        x[i] = zz[j] * sc[j];
                    }
                    let f = cpu.nll_grad(&x, &dw, &mut g).unwrap();
                    for (j, &i) in free.iter().enumerate() {
                        gz[j] = g[i] * sc[j];
                    }
                    f
                };
                let r = histfit_optim::minimize(
                    &mut f_eval,
                    &z,
                    &lo,
                    &hi,
                    Options {
                        memory: mem,
                        ..Options::default()
                    },
                );
                total += r.iterations;
                z = r.x().to_vec();
                fz = r.f();
                status = format!("{status} s{si}:{}", r.iterations);
                if si == walls.len() {
                    status = format!("{status} {:?}", r.status());
                }
            }
            cont_its.push(total);
            let df = fz - opt.f();
            if df.abs() > 1e-9 || std::env::var("CONT_ALL").is_ok() {
                println!(
                    "toy {k}: plain {} it f {:.10}; cont {total} it ({status}) df {df:.3e}",
                    opt.iterations,
                    opt.f()
                );
            }
            if df > 1e-9 {
                cont_worse += 1;
            } else if df < -1e-9 {
                cont_better += 1;
            }
        }
        its.push((opt.iterations, k));
        tot_ev += opt.evaluations;
        if std::env::var("QUIET").is_err() && opt.iterations > 1000
            || std::env::var("TRACE_ALL").is_ok()
        {
            println!(
                "toy {k}: {} iterations, {} evaluations, {:?}",
                opt.iterations,
                opt.evaluations,
                opt.status()
            );
            let step = (trace.len() / 12).max(1);
            for t in trace.iter().step_by(step) {
                println!(
                    "   it {:5} ev {:5} f {:.10} pg {:.2e} at bounds {}",
                    t.0, t.1, t.2, t.3, t.4
                );
            }
            // Bins whose expected count is near or below 0 at the end.
            let mut lam = vec![0.0; model.n_main];
            for (j, &i) in free.iter().enumerate() {
                x[i] = opt.x()[j] * sc[j];
            }
            cpu.expected_main(&x, &mut lam).unwrap();
            for (b, (&l, &nobs)) in lam.iter().zip(&d.main).enumerate() {
                if l < 0.05 {
                    println!("   bin {b}: λ {l:.3e}, n {nobs}");
                }
            }
            let moved: Vec<String> = free
                .iter()
                .enumerate()
                .filter(|&(j, _)| opt.x()[j] <= lo[j] || opt.x()[j] >= hi[j])
                .map(|(_, &i)| format!("{}={:.3}", space.names[i], x[i]))
                .collect();
            println!("   at bounds: {moved:?}");
        }
    }
    if let Ok(k) = std::env::var("NEWTON_AT") {
        let k: usize = k.parse().unwrap();
        let (mut ev_h, mut worse, mut better) = (0usize, 0, 0);
        let mut ev_list = Vec::new();
        for (t, d) in toys.iter().enumerate() {
            let mut f_eval = |z: &[f64], gz: &mut [f64]| -> f64 {
                let mut x = gen.clone();
                let mut g = vec![0.0; gen.len()];
                for (j, &i) in free.iter().enumerate() {
                    x[i] = z[j] * sc[j];
                }
                let f = cpu.nll_grad(&x, d, &mut g).unwrap();
                for (j, &i) in free.iter().enumerate() {
                    gz[j] = g[i] * sc[j];
                }
                f
            };
            let run = |f_eval: &mut dyn FnMut(&[f64], &mut [f64]) -> f64, z: &[f64], cap: usize| {
                let opts = Options {
                    max_iterations: cap,
                    ..Options::default()
                };
                histfit_optim::minimize(f_eval, z, &lo, &hi, opts)
            };
            let plain = run(&mut f_eval, &z0, 5000);
            let first = run(&mut f_eval, &z0, k);
            let mut ev = first.evaluations;
            let (fin_f, fin_conv);
            if first.status().converged() {
                (fin_f, fin_conv) = (first.f(), true);
            } else {
                let mut z = first.x().to_vec();
                let mut f = first.f();
                let mut ne = 0;
                newton(&mut f_eval, &mut z, &mut f, &lo, &hi, 20, &mut ne);
                ev += ne;
                let again = run(&mut f_eval, &z, 5000);
                ev += again.evaluations;
                (fin_f, fin_conv) = (again.f(), again.status().converged());
                if std::env::var("QUIET").is_err() {
                    println!("toy {t}: plain {} its {} ev f {:.10}; hybrid newton {ne} ev, then {} its {} ev f {:.10} {:?}",
                        plain.iterations, plain.evaluations, plain.f(), again.iterations, again.evaluations, again.f(), again.status());
                }
            }
            ev_h += ev;
            ev_list.push(ev);
            if fin_f > plain.f() + 1e-9 {
                worse += 1;
            }
            if fin_f < plain.f() - 1e-9 {
                better += 1;
            }
            if !fin_conv {
                println!("toy {t} not converged");
            }
        }
        ev_list.sort();
        println!(
            "hybrid at {k}: evaluations {ev_h}, p99 {} max {}; worse {worse} better {better}",
            ev_list[ev_list.len() * 99 / 100],
            ev_list[ev_list.len() - 1]
        );
    }
    if !cont_its.is_empty() {
        cont_its.sort();
        let q = |f: f64| cont_its[((cont_its.len() - 1) as f64 * f) as usize];
        println!("continuation: median {} p90 {} p99 {} max {}; total {}; worse {cont_worse} better {cont_better}",
            q(0.5), q(0.9), q(0.99), q(1.0), cont_its.iter().sum::<usize>());
    }
    its.sort();
    let q = |f: f64| its[((its.len() - 1) as f64 * f) as usize].0;
    println!(
        "median {} p90 {} p99 {} max {}; total iterations {}, evaluations {}",
        q(0.5),
        q(0.9),
        q(0.99),
        q(1.0),
        its.iter().map(|i| i.0).sum::<usize>(),
        tot_ev
    );
}

/// Newton-CG steps (forward-difference Hessian-vector products), backtracking, in the box.
fn newton(
    f_eval: &mut dyn FnMut(&[f64], &mut [f64]) -> f64,
    z: &mut Vec<f64>,
    f: &mut f64,
    lo: &[f64],
    hi: &[f64],
    outer: usize,
    evals: &mut usize,
) {
    let n = z.len();
    let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut g0 = vec![0.0; n];
    let mut g = vec![0.0; n];
    *f = f_eval(z, &mut g0);
    *evals += 1;
    for _ in 0..outer {
        let act: Vec<bool> = (0..n)
            .map(|k| z[k] > lo[k] + 1e-5 && z[k] < hi[k] - 1e-5)
            .collect();
        for k in 0..n {
            if !act[k] {
                g0[k] = 0.0;
            }
        }
        let gn0 = norm(&g0);
        if gn0 <= 1e-4 {
            break;
        }
        let mut v = vec![0.0; n];
        let mut r: Vec<f64> = g0.iter().map(|a| -a).collect();
        let mut d = r.clone();
        let mut rr = dot(&r, &r);
        let mut zp = z.clone();
        for it in 0..2 * n.min(50) {
            let eps = 1e-8 / d.iter().fold(0.0f64, |a, b| a.max(b.abs()));
            for k in 0..n {
                zp[k] = z[k] + eps * d[k];
            }
            f_eval(&zp, &mut g);
            *evals += 1;
            let hd: Vec<f64> = (0..n)
                .map(|k| if act[k] { (g[k] - g0[k]) / eps } else { 0.0 })
                .collect();
            let dhd = dot(&d, &hd);
            if !dhd.is_finite() || dhd <= 0.0 {
                if it == 0 {
                    v = d.clone();
                }
                break;
            }
            let a = rr / dhd;
            for k in 0..n {
                v[k] += a * d[k];
                r[k] -= a * hd[k];
            }
            let rn = dot(&r, &r);
            if rn.sqrt() <= 1e-3 * gn0 {
                break;
            }
            for k in 0..n {
                d[k] = r[k] + rn / rr * d[k];
            }
            rr = rn;
        }
        let mut t = 1.0;
        let mut taken = false;
        for _ in 0..12 {
            let zn: Vec<f64> = (0..n)
                .map(|k| (z[k] + t * v[k]).clamp(lo[k], hi[k]))
                .collect();
            let fnew = f_eval(&zn, &mut g);
            *evals += 1;
            if fnew < *f - 1e-12 * f.abs() {
                *z = zn;
                *f = fnew;
                g0.copy_from_slice(&g);
                taken = true;
                break;
            }
            t *= 0.25;
        }
        if !taken {
            break;
        }
    }
}

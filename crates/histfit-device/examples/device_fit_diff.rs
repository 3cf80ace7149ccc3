//! Diagnostic: one toy of an ensemble fitted by the host's fit twice, once with the CPU's
//! evaluator and once with a CUDA device's (the path lockstep ensembles take; its rounding
//! differs in the last bits), in the ensemble's curvature units; prints both ends, the kinks
//! each one certified, and the parameters that tell the two ends apart (issue 23: toy CLs
//! fits that differ between the devices).
//!
//! `HISTFIT_FIXTURES=DIR cargo run --release -p histfit-device --example device_fit_diff -- WS
//! INDEX [pyhf] [b] [cond=MU]` (toy INDEX of seed 0 at the observed fit; `b`: of the
//! background-only ensemble of `hypotest-toys --seed 0`, drawn at the fit with the POI held at
//! 0; `cond=MU`: the fit with the POI held at MU, as that ensemble's conditional fits).
use histfit_compute::{CpuEvaluator, Evaluator};
use histfit_device::{AnyEval, Device};
use histfit_infer::{fit, FitOptions, FitResult};
use histfit_testutil::{load, settings};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (ws, index) = (&args[0], args[1].parse::<u64>().expect("INDEX: a number"));
    let flag = |f: &str| args[2..].iter().any(|a| a == f);
    let cond = args[2..]
        .iter()
        .find_map(|a| a.strip_prefix("cond="))
        .map(|v| v.parse::<f64>().expect("cond=MU"));
    let (model, data) = load(ws, settings(if flag("pyhf") { "pyhf" } else { "smooth" }));
    let mut cpu = CpuEvaluator::new(model.clone());
    let poi = model.poi.expect("a POI");
    let (fix, seed) = match flag("b") {
        true => (vec![(poi, 0.0)], histfit_infer::toys::background_stream(0)),
        false => (Vec::new(), 0),
    };
    let observed = FitOptions {
        fix,
        ..FitOptions::default()
    };
    let gen = fit(&mut cpu, &data, &observed).unwrap().bestfit;
    let mut o = FitOptions {
        uncertainties: false,
        init: Some(gen.clone()),
        ..FitOptions::default()
    };
    o.scales = Some(histfit_infer::fit::curvature_scales(&mut cpu, &gen, &o).unwrap());
    if let Some(mu) = cond {
        let mut start = gen.clone();
        start[poi] = mu;
        o.init = Some(start);
        o.fix.push((poi, mu));
    }
    let toy = cpu.toys(&gen, seed, index..index + 1).unwrap().remove(0);
    let on_cpu = fit(&mut cpu.clone(), &toy, &o).unwrap();
    let mut gpu = AnyEval::new(model.clone(), Device::Cuda(0)).expect("a CUDA device");
    let on_gpu = fit(&mut gpu, &toy, &o).unwrap();
    let show = |what: &str, r: &FitResult| {
        println!(
            "{what}: twice_nll {:.9}, pg {:.2e}, iterations {}, starts {}, {}; {} kinks held, warnings {:?}",
            r.twice_nll,
            r.projected_gradient_norm,
            r.iterations,
            r.starts,
            r.reason,
            r.kinks.len(),
            r.warnings
        );
    };
    show("CPU", &on_cpu);
    show("GPU", &on_gpu);
    // Each end on the CPU's evaluator: whether the ends differ, not only their rounding.
    let d = toy.without_constant();
    let (a, b) = (
        2.0 * cpu.nll(&on_cpu.bestfit, &d).unwrap(),
        2.0 * cpu.nll(&on_gpu.bestfit, &d).unwrap(),
    );
    println!("on the CPU's evaluator: CPU end {a:.9}, GPU end {b:.9}");
    let space = cpu.space().clone();
    let mut apart: Vec<usize> = (0..space.len())
        .filter(|&i| (on_cpu.bestfit[i] - on_gpu.bestfit[i]).abs() > 1e-4)
        .collect();
    apart.sort_by(|&i, &j| {
        let d = |k: usize| (on_cpu.bestfit[k] - on_gpu.bestfit[k]).abs();
        d(j).total_cmp(&d(i))
    });
    for &i in apart.iter().take(16) {
        let held = |r: &FitResult| {
            r.kinks
                .iter()
                .find(|k| k.name == space.names[i])
                .map(|k| k.side)
                .unwrap_or("-")
        };
        println!(
            "  {}{}: CPU {:.6} ({}), GPU {:.6} ({})",
            space.names[i],
            if space.kinked[i] { " (kinked)" } else { "" },
            on_cpu.bestfit[i],
            held(&on_cpu),
            on_gpu.bestfit[i],
            held(&on_gpu)
        );
    }
    println!("{} parameters apart by more than 1e-4", apart.len());
}

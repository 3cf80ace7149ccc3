//! Pseudo-experiments: generation from chosen parameters, parallel fits, and toy-based CLs.
//!
//! Toy `i` of seed `s` is a pure function of (model, generating parameters, s, i): main bins are
//! Poisson(λ_b) from stream 0, auxiliary data from stream 1 (Gaussian constraints: N(θ, σ);
//! Poisson constraints: Poisson(θ·τ)). Fits run in parallel, each toy independent, so an ensemble
//! is bit-identical for any thread count, and `shard`s of it merge into exactly the one-run result.
//! A toy whose fit fails is kept, flagged and counted; p-values use the converged toys and report
//! how many were left out.

use crate::asymptotic::TestStat;
use crate::fit::{fit, FitOptions};
use crate::{InferError, Result};
use histfit_compute::rng::{ToyStream, STREAM_AUX, STREAM_MAIN};
use histfit_compute::{Dataset, Evaluator};
use histfit_model::{Constraint, Model};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Toy `index` of `seed` generated at `params` (whose expected main counts are `expected_main`).
pub fn generate_toy(
    model: &Model,
    expected_main: &[f64],
    params: &[f64],
    seed: u64,
    index: u64,
) -> Result<Dataset> {
    let mut s = ToyStream::new(seed, index, STREAM_MAIN);
    let main: Vec<f64> = expected_main
        .iter()
        .map(|&l| s.poisson(l.max(0.0)))
        .collect();
    let mut s = ToyStream::new(seed, index, STREAM_AUX);
    let aux: Vec<f64> = model
        .aux_params
        .iter()
        .map(|&p| match model.parameters[p].constraint {
            Constraint::Gauss { sigma } => params[p] + sigma * s.normal(),
            Constraint::Poisson { tau } => s.poisson(params[p] * tau),
            Constraint::None => unreachable!("aux data belong to constrained parameters"),
        })
        .collect();
    Ok(Dataset::from_parts(model, main, aux)?)
}

/// A contiguous block `k` of `n` (0-based) of toy indices 0..total.
pub fn shard_range(total: u64, k: u64, n: u64) -> Result<std::ops::Range<u64>> {
    if n == 0 || k >= n {
        return Err(InferError::Request(format!(
            "shard {}/{n}: expected 1 ≤ K ≤ N",
            k + 1
        )));
    }
    Ok(total * k / n..total * (k + 1) / n)
}

/// One fitted toy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToyFit {
    pub index: u64,
    pub twice_nll: f64,
    pub poi: f64,
    pub converged: bool,
}

/// Fits toys `indices` generated at `gen_params`, in parallel.
pub fn fit_toys<E: Evaluator + Clone + Send + Sync>(
    eval: &E,
    gen_params: &[f64],
    seed: u64,
    indices: std::ops::Range<u64>,
    base: &FitOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<ToyFit>> {
    let model = eval.model();
    let mut expected = vec![0.0; model.n_main];
    eval.clone().expected_main(gen_params, &mut expected)?;
    let total = (indices.end - indices.start) as usize;
    let done = AtomicUsize::new(0);
    let poi = model.poi;
    let fits: Vec<Result<ToyFit>> = indices
        .into_par_iter()
        .map_init(
            || eval.clone(),
            |ev, i| {
                let data = generate_toy(ev.model(), &expected, gen_params, seed, i)?;
                let mut o = base.clone();
                o.uncertainties = false;
                o.init = Some(gen_params.to_vec());
                let r = fit(ev, &data, &o)?;
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                Ok(ToyFit {
                    index: i,
                    twice_nll: r.twice_nll,
                    poi: r.bestfit[poi],
                    converged: r.converged,
                })
            },
        )
        .collect();
    fits.into_iter().collect()
}

/// The test statistic of one toy under one hypothesis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToyStat {
    pub index: u64,
    pub q: f64,
    pub converged: bool,
}

/// Toy-based hypothesis test: the per-toy statistics (so shards can be merged) and the CLs
/// derived from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToyHypotest {
    pub mu: f64,
    pub test_stat: TestStat,
    pub seed: u64,
    pub n_toys: u64,
    pub q_obs: f64,
    /// Generating parameters: conditional fits of the observed data at μ and at 0 (μ = 1 for q0).
    pub params_sb: Vec<f64>,
    pub params_b: Vec<f64>,
    pub toys_sb: Vec<ToyStat>,
    pub toys_b: Vec<ToyStat>,
    pub summary: ToySummary,
}

/// p-values from the converged toys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToySummary {
    pub cls_obs: f64,
    pub clsb_obs: f64,
    pub clb_obs: f64,
    /// Statistical uncertainty of CLs+b and CLb (binomial).
    pub clsb_err: f64,
    pub clb_err: f64,
    /// Expected CLs: percentiles of the CLs of the background-only toys at the −2σ … +2σ quantiles.
    pub cls_exp: [f64; 5],
    pub n_sb: usize,
    pub n_b: usize,
    pub failed_sb: usize,
    pub failed_b: usize,
}

fn statistic<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    mu: f64,
    ts: TestStat,
    base: &FitOptions,
    init: &[f64],
) -> Result<(f64, bool)> {
    let poi = eval.model().poi;
    let mut o = base.clone();
    o.uncertainties = false;
    o.init = Some(init.to_vec());
    if ts == TestStat::TmuTilde {
        let mut b = o.bounds.clone().unwrap_or_else(|| eval.model().bounds());
        b[poi].0 = b[poi].0.max(0.0);
        o.bounds = Some(b);
    }
    let free = fit(eval, data, &o)?;
    let mut oc = o.clone();
    let mut ci = init.to_vec();
    ci[poi] = mu;
    oc.init = Some(ci);
    oc.fix.push((poi, mu));
    let cond = fit(eval, data, &oc)?;
    let t = (cond.twice_nll - free.twice_nll).max(0.0);
    let mu_hat = free.bestfit[poi];
    let q = ts.from_ratio(t, mu_hat, mu);
    Ok((q, free.converged && cond.converged))
}

/// Toy-based CLs at `mu`: baseline fits on the observed data, then `indices` of the
/// signal+background and background-only ensembles.
#[allow(clippy::too_many_arguments)]
pub fn hypotest_toys<E: Evaluator + Clone + Send + Sync>(
    eval: &E,
    data: &Dataset,
    mu: f64,
    test_stat: TestStat,
    seed: u64,
    n_toys: u64,
    indices: std::ops::Range<u64>,
    base: &FitOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<ToyHypotest> {
    let mut ev = eval.clone();
    let poi = ev.model().poi;
    let init = ev.model().init();
    let (q_obs, observed_ok) = statistic(&mut ev, data, mu, test_stat, base, &init)?;
    if !observed_ok {
        return Err(InferError::Request(
            "a fit of the observed data did not converge, so the observed test statistic is unreliable".into(),
        ));
    }
    let cond_at = |ev: &mut E, m: f64| -> Result<Vec<f64>> {
        let mut o = base.clone();
        o.fix.push((poi, m));
        let r = fit(ev, data, &o)?;
        if !r.converged {
            return Err(InferError::Request(format!(
                "the conditional fit at {m} to the observed data did not converge: {}",
                r.reason
            )));
        }
        Ok(r.bestfit)
    };
    let mu_b = if test_stat == TestStat::Q0 { 1.0 } else { 0.0 };
    // For q0 the "signal+background" role is the null μ = 0 and the alternative is μ = 1.
    let params_sb = cond_at(&mut ev, mu)?;
    let params_b = cond_at(&mut ev, mu_b)?;
    let total = 2 * (indices.end - indices.start) as usize;
    let done = AtomicUsize::new(0);
    let run = |gen: &[f64], stream_seed: u64| -> Result<Vec<ToyStat>> {
        let mut expected = vec![0.0; eval.model().n_main];
        eval.clone().expected_main(gen, &mut expected)?;
        let out: Vec<Result<ToyStat>> = indices
            .clone()
            .into_par_iter()
            .map_init(
                || eval.clone(),
                |ev, i| {
                    let toy = generate_toy(ev.model(), &expected, gen, stream_seed, i)?;
                    let (q, converged) = statistic(ev, &toy, mu, test_stat, base, gen)?;
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                    Ok(ToyStat {
                        index: i,
                        q,
                        converged,
                    })
                },
            )
            .collect();
        out.into_iter().collect()
    };
    // Distinct seeds for the two ensembles, derived from the user's seed.
    let toys_sb = run(&params_sb, seed)?;
    let toys_b = run(&params_b, seed ^ 0x9E37_79B9_7F4A_7C15)?;
    let summary = summarize(q_obs, &toys_sb, &toys_b, test_stat);
    Ok(ToyHypotest {
        mu,
        test_stat,
        seed,
        n_toys,
        q_obs,
        params_sb,
        params_b,
        toys_sb,
        toys_b,
        summary,
    })
}

/// p-values from per-toy statistics (converged toys only).
pub fn summarize(
    q_obs: f64,
    toys_sb: &[ToyStat],
    toys_b: &[ToyStat],
    test_stat: TestStat,
) -> ToySummary {
    let ok =
        |t: &[ToyStat]| -> Vec<f64> { t.iter().filter(|x| x.converged).map(|x| x.q).collect() };
    let (qs_sb, qs_b) = (ok(toys_sb), ok(toys_b));
    // P(q ≥ value) in an ensemble.
    let tail = |qs: &[f64], v: f64| {
        if qs.is_empty() {
            f64::NAN
        } else {
            qs.iter().filter(|&&q| q >= v).count() as f64 / qs.len() as f64
        }
    };
    let err = |p: f64, n: usize| (p * (1.0 - p) / n.max(1) as f64).sqrt();
    let clsb = tail(&qs_sb, q_obs);
    let clb = tail(&qs_b, q_obs);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let cls = if test_stat == TestStat::Q0 {
        clsb
    } else {
        ratio(clsb, clb)
    };
    // Expected band: CLs of each background-only toy, at the normal quantiles of ±2σ, ±1σ, 0.
    let mut cls_b: Vec<f64> = qs_b
        .iter()
        .map(|&q| {
            if test_stat == TestStat::Q0 {
                tail(&qs_sb, q)
            } else {
                ratio(tail(&qs_sb, q), tail(&qs_b, q))
            }
        })
        .collect();
    cls_b.sort_by(f64::total_cmp);
    let quantiles = [
        0.022750131948179195,
        0.15865525393145707,
        0.5,
        0.8413447460685429,
        0.9772498680518208,
    ];
    let pct = |p: f64| -> f64 {
        if cls_b.is_empty() {
            return f64::NAN;
        }
        // Linear interpolation between order statistics (numpy's default).
        let x = p * (cls_b.len() - 1) as f64;
        let (i, f) = (x.floor() as usize, x - x.floor());
        let j = (i + 1).min(cls_b.len() - 1);
        cls_b[i] + f * (cls_b[j] - cls_b[i])
    };
    ToySummary {
        cls_obs: cls,
        clsb_obs: clsb,
        clb_obs: clb,
        clsb_err: err(clsb, qs_sb.len()),
        clb_err: err(clb, qs_b.len()),
        cls_exp: quantiles.map(pct),
        n_sb: qs_sb.len(),
        n_b: qs_b.len(),
        failed_sb: toys_sb.len() - qs_sb.len(),
        failed_b: toys_b.len() - qs_b.len(),
    }
}

/// Merges shards of one toy hypotest (same model, μ, seed, statistic) into the one-run result.
pub fn merge_hypotest_toys(parts: Vec<ToyHypotest>) -> Result<ToyHypotest> {
    let mut it = parts.into_iter();
    let mut first = it
        .next()
        .ok_or_else(|| InferError::Request("nothing to merge".into()))?;
    for p in it {
        if p.mu != first.mu
            || p.seed != first.seed
            || p.test_stat != first.test_stat
            || p.q_obs != first.q_obs
            || p.n_toys != first.n_toys
        {
            return Err(InferError::Request(format!(
                "shards disagree (mu {} vs {}, seed {} vs {}, q_obs {} vs {}): they are not parts of one ensemble",
                p.mu, first.mu, p.seed, first.seed, p.q_obs, first.q_obs
            )));
        }
        first.toys_sb.extend(p.toys_sb);
        first.toys_b.extend(p.toys_b);
    }
    for t in [&mut first.toys_sb, &mut first.toys_b] {
        t.sort_by_key(|x| x.index);
        if t.windows(2).any(|w| w[0].index == w[1].index) {
            return Err(InferError::Request(
                "the same toy appears in two shards".into(),
            ));
        }
    }
    first.summary = summarize(first.q_obs, &first.toys_sb, &first.toys_b, first.test_stat);
    Ok(first)
}

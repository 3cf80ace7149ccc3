//! Pseudo-experiments: the generation point ([`GenPoint`], the free fit by default), generation,
//! parallel fits, the ensemble document with its summary ([`ToyEnsemble`]), toy-based CLs, and
//! the merges of sharded ensembles, which refuse shards that do not make the whole.
//!
//! Toy `i` of seed `s` is a pure function of (likelihood, generating parameters, s, i), drawn by
//! the likelihood's evaluator ([`Evaluator::toys`]) with the same bits on every device. Fits run
//! in parallel, each toy independent, so an ensemble
//! is bit-identical for any thread count, and `shard`s of it merge into exactly the one-run result.
//! A toy whose fit fails is kept, flagged and counted; p-values use the converged toys and report
//! how many were left out. The same code runs ensembles on CPU threads or in lockstep batches on
//! a device ([`ToyRunner`]).

use crate::asymptotic::TestStat;
use crate::batch::{drive, BatchClient, Batcher, EvalBox, Job};
use crate::fit::{fit, fit_async, FitOptions, FitResult};
use crate::{InferError, Result};
use histfit_compute::{
    block_on, AsyncEvaluator, BatchEvaluator, Blocking, Dataset, Evaluator, ParameterSpace,
    Progress, ResidentFit, ResidentRequest,
};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

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
    /// Why the fit did not converge (absent when it did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where an ensemble runs. The statistics below are written once against this: on CPU threads
/// ([`OnCpu`]) or in lockstep batches on a device ([`Batched`], toys from the device's
/// generator). Work is given as jobs (futures over an evaluator), so the same fitting code runs
/// to completion at once on the CPU or waits for batches on a device.
pub trait ToyRunner: Sync {
    fn space(&self) -> &ParameterSpace;
    /// An evaluator for one-off fits (the observed-data fits of a toy hypotest).
    fn single(&self) -> Box<dyn Evaluator + '_>;
    /// Runs `work(evaluator, index, toy)` for toys `indices` of `seed` generated at `params`;
    /// results in the order of `indices`.
    fn run_toys<'w, T: Send>(
        &self,
        params: &[f64],
        seed: u64,
        indices: &[u64],
        work: &'w (dyn Fn(EvalBox<'w>, u64, Dataset) -> Job<'w, T> + Sync),
    ) -> Result<Vec<T>>;
    /// As [`run_toys`](Self::run_toys), for the few toys a device's resident fits could not
    /// certify: on the host's cores where the runner's device has a host evaluator.
    fn run_refits<'w, T: Send>(
        &self,
        params: &[f64],
        seed: u64,
        indices: &[u64],
        work: &'w (dyn Fn(EvalBox<'w>, u64, Dataset) -> Job<'w, T> + Sync),
    ) -> Result<Vec<T>> {
        self.run_toys(params, seed, indices, work)
    }
    /// Generates and fits toys whole on the device where it does that
    /// ([`histfit_compute::ResidentFits`]); `None` where it does not (the CPU, or a device whose
    /// resident fits are switched off).
    fn resident(&self, _req: &ResidentRequest<'_>) -> Option<Result<Vec<ResidentFit>>> {
        None
    }
    /// Runs `work(evaluator, k)` for k in 0..n.
    fn run<'w, T: Send>(
        &self,
        n: usize,
        work: &'w (dyn Fn(EvalBox<'w>, usize) -> Job<'w, T> + Sync),
    ) -> Result<Vec<T>>;
}

/// Ensembles on the CPU: rayon threads, each job with its own copy of the evaluator.
pub struct OnCpu<'a, E>(pub &'a E);

impl<E: Evaluator + Clone + Send + Sync + 'static> ToyRunner for OnCpu<'_, E> {
    fn space(&self) -> &ParameterSpace {
        self.0.space()
    }
    fn single(&self) -> Box<dyn Evaluator + '_> {
        Box::new(self.0.clone())
    }
    fn run_toys<'w, T: Send>(
        &self,
        params: &[f64],
        seed: u64,
        indices: &[u64],
        work: &'w (dyn Fn(EvalBox<'w>, u64, Dataset) -> Job<'w, T> + Sync),
    ) -> Result<Vec<T>> {
        let out: Vec<Result<T>> = indices
            .par_iter()
            .map(|&i| {
                // One toy per job, its rates computed again per toy: one expected-data pass,
                // nothing next to the fit, and no ensemble-sized buffer of toys.
                let mut ev = self.0.clone();
                let toy = ev.toys(params, seed, i..i + 1)?.pop().expect("one toy");
                block_on(work(Box::new(Blocking(Box::new(ev))), i, toy))
            })
            .collect();
        out.into_iter().collect()
    }
    fn run<'w, T: Send>(
        &self,
        n: usize,
        work: &'w (dyn Fn(EvalBox<'w>, usize) -> Job<'w, T> + Sync),
    ) -> Result<Vec<T>> {
        let out: Vec<Result<T>> = (0..n)
            .into_par_iter()
            .map(|k| block_on(work(Box::new(Blocking(Box::new(self.0.clone()))), k)))
            .collect();
        out.into_iter().collect()
    }
}

/// Ensembles in lockstep batches on a [`BatchEvaluator`]: up to `window` fits in flight, toys
/// generated by the device in chunks of at most `chunk`.
pub struct Batched<'a, B: BatchEvaluator> {
    pub batcher: &'a Batcher<B>,
    pub window: usize,
    pub chunk: u64,
    /// Fit ensembles whole on the device where it can ([`ToyRunner::resident`]); off, every fit
    /// is driven from the host in lockstep (the reference path).
    pub resident: bool,
}

impl<'a, B: BatchEvaluator> Batched<'a, B> {
    /// Fits in flight by default: enough for full device batches, their optimizer state still
    /// small (≈ 50 kB each for 200 parameters).
    pub const WINDOW: usize = 4096;
    /// Toys generated per chunk by default (bounds device and host memory of huge ensembles).
    pub const CHUNK: u64 = 1 << 16;

    /// The default window and chunk.
    pub fn new(batcher: &'a Batcher<B>) -> Self {
        Batched {
            batcher,
            window: Self::WINDOW,
            chunk: Self::CHUNK,
            resident: true,
        }
    }
}

impl<B: BatchEvaluator> ToyRunner for Batched<'_, B> {
    fn space(&self) -> &ParameterSpace {
        self.batcher.space()
    }
    /// The device's host evaluator where it has one (baseline fits on the CPU), else the device
    /// one problem at a time.
    fn single(&self) -> Box<dyn Evaluator + '_> {
        match self.batcher.with_eval(|b| b.host_evaluator()) {
            Some(host) => host,
            None => Box::new(self.batcher.solo()),
        }
    }
    fn run_toys<'w, T: Send>(
        &self,
        params: &[f64],
        seed: u64,
        indices: &[u64],
        work: &'w (dyn Fn(EvalBox<'w>, u64, Dataset) -> Job<'w, T> + Sync),
    ) -> Result<Vec<T>> {
        let mut out = Vec::with_capacity(indices.len());
        for list in indices.chunks(self.chunk.max(1) as usize) {
            // One generation call per run of consecutive indices.
            let mut toys: Vec<Mutex<Option<Dataset>>> = Vec::with_capacity(list.len());
            let mut k = 0;
            while k < list.len() {
                let mut end = k + 1;
                while end < list.len() && list[end] == list[end - 1] + 1 {
                    end += 1;
                }
                let range = list[k]..list[end - 1] + 1;
                toys.extend(
                    self.batcher
                        .with_eval(|b| b.toys(params, seed, range))?
                        .into_iter()
                        .map(|t| Mutex::new(Some(t))),
                );
                k = end;
            }
            let toys = &toys;
            let make = move |client: BatchClient, k: usize| -> Job<'_, T> {
                let toy = toys[k]
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                    .expect("each toy is fitted once");
                work(Box::new(client), list[k], toy)
            };
            out.extend(drive(self.batcher, toys.len(), self.window, &make)?);
        }
        Ok(out)
    }
    fn run_refits<'w, T: Send>(
        &self,
        params: &[f64],
        seed: u64,
        indices: &[u64],
        work: &'w (dyn Fn(EvalBox<'w>, u64, Dataset) -> Job<'w, T> + Sync),
    ) -> Result<Vec<T>> {
        let host = || self.batcher.with_eval(|b| b.host_evaluator());
        if host().is_none() {
            return self.run_toys(params, seed, indices, work);
        }
        // The host's generator draws the device's bits (see `toys`), so each refit sees the toy
        // the device fitted.
        let out: Vec<Result<T>> = indices
            .par_iter()
            .map(|&i| {
                let mut ev = host().expect("checked above");
                let toy = ev.toys(params, seed, i..i + 1)?.pop().expect("one toy");
                block_on(work(Box::new(Blocking(ev)), i, toy))
            })
            .collect();
        out.into_iter().collect()
    }
    fn resident(&self, req: &ResidentRequest<'_>) -> Option<Result<Vec<ResidentFit>>> {
        if !self.resident {
            return None;
        }
        self.batcher.with_eval(|b| {
            b.resident_fits()
                .map(|r| r.fit_toys_resident(req).map_err(InferError::from))
        })
    }
    fn run<'w, T: Send>(
        &self,
        n: usize,
        work: &'w (dyn Fn(EvalBox<'w>, usize) -> Job<'w, T> + Sync),
    ) -> Result<Vec<T>> {
        let make = move |client: BatchClient, k: usize| work(Box::new(client), k);
        drive(self.batcher, n, self.window, &make)
    }
}

/// Fits toys `indices` generated at `gen_params`, in parallel on the CPU.
pub fn fit_toys<E: Evaluator + Clone + Send + Sync + 'static>(
    eval: &E,
    gen_params: &[f64],
    seed: u64,
    indices: std::ops::Range<u64>,
    base: &FitOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<ToyFit>> {
    fit_toys_on(&OnCpu(eval), gen_params, seed, indices, base, progress)
}

/// Fits toys `indices` generated at `gen_params` (each starts there) on `runner`: whole on its
/// device where it runs them ([`ToyRunner::resident`]) and the fit qualifies, with the toys it
/// could not certify fitted again from the host; else every fit driven from the host.
pub fn fit_toys_on<R: ToyRunner>(
    runner: &R,
    gen_params: &[f64],
    seed: u64,
    indices: std::ops::Range<u64>,
    base: &FitOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<ToyFit>> {
    let total = (indices.end - indices.start) as usize;
    let done = AtomicUsize::new(0);
    let poi = runner.space().poi()?;
    let mut o = base.clone();
    o.uncertainties = false;
    o.init = Some(gen_params.to_vec());
    if o.scales.is_none() && !indices.is_empty() {
        o.scales = Some(crate::fit::curvature_scales(
            &mut *runner.single(),
            gen_params,
            &o,
        )?);
    }
    let list: Vec<u64> = indices.clone().collect();
    let plan = crate::fit::device_plan(runner.space(), &o)?;
    // Device progress counts every finished fit; the uncertified ones are taken back below and
    // counted again as the host refits them.
    let on_device = |n: usize| {
        let d = done.fetch_add(n, Ordering::Relaxed) + n;
        progress(d.min(total), total);
    };
    let device = match plan {
        Some(plan) => device_fits(
            runner,
            &plan,
            gen_params,
            seed,
            indices,
            Some(poi),
            Progress(&on_device),
        )?,
        None => None,
    };
    let Some(device) = device else {
        return host_toy_fits(
            runner, gen_params, seed, &list, &o, poi, &done, total, progress, false,
        );
    };
    let redo: Vec<u64> = device
        .iter()
        .zip(&list)
        .filter(|(d, _)| d.is_none())
        .map(|(_, &i)| i)
        .collect();
    done.store(total - redo.len(), Ordering::Relaxed);
    progress(total - redo.len(), total);
    let mut refits = host_toy_fits(
        runner, gen_params, seed, &redo, &o, poi, &done, total, progress, true,
    )?
    .into_iter();
    Ok(device
        .into_iter()
        .map(|d| d.unwrap_or_else(|| refits.next().expect("one refit per uncertified toy")))
        .collect())
}

/// Toy fits driven from the host (lockstep batches on a device, threads on the CPU).
#[allow(clippy::too_many_arguments)]
fn host_toy_fits<R: ToyRunner>(
    runner: &R,
    gen_params: &[f64],
    seed: u64,
    list: &[u64],
    o: &FitOptions,
    poi: usize,
    done: &AtomicUsize,
    total: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
    refits: bool,
) -> Result<Vec<ToyFit>> {
    run_listed(
        runner,
        refits,
        gen_params,
        seed,
        list,
        &move |mut ev, i, data| {
            Box::pin(async move {
                let r = fit_async(&mut *ev, &data, o).await?;
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                Ok(ToyFit {
                    index: i,
                    twice_nll: r.twice_nll,
                    poi: r.bestfit[poi],
                    converged: r.converged,
                    reason: (!r.converged).then_some(r.reason),
                })
            })
        },
    )
}

/// `work` on toys `list` (nothing to do for none): [`ToyRunner::run_refits`] for refits of toys
/// a device could not certify, else [`ToyRunner::run_toys`].
fn run_listed<'w, R: ToyRunner, T: Send>(
    runner: &R,
    refits: bool,
    params: &[f64],
    seed: u64,
    list: &[u64],
    work: &'w (dyn Fn(EvalBox<'w>, u64, Dataset) -> Job<'w, T> + Sync),
) -> Result<Vec<T>> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    if refits {
        runner.run_refits(params, seed, list, work)
    } else {
        runner.run_toys(params, seed, list, work)
    }
}

/// Toys `indices` of `seed` drawn at `gen` and fitted by `plan` (a fit's
/// [`crate::fit::device_plan`]) whole on the runner's device: `None` where the runner does not
/// run fits there (or not these: a device may refuse settings it cannot follow); else per toy
/// its fit, or `None` where the device's result is not certified
/// ([`crate::fit::device_fit_certified`]) and the host must fit it.
fn device_fits<R: ToyRunner>(
    runner: &R,
    plan: &crate::fit::DevicePlan,
    gen: &[f64],
    seed: u64,
    indices: std::ops::Range<u64>,
    report: Option<usize>,
    progress: Progress<'_>,
) -> Result<Option<Vec<Option<ToyFit>>>> {
    let req = ResidentRequest {
        gen_params: gen,
        seed,
        indices: indices.clone(),
        init: &plan.init,
        model_init: &plan.model_init,
        fixed: &plan.fixed,
        lower: &plan.lower,
        upper: &plan.upper,
        scales: &plan.scales,
        kinks: &plan.kinks,
        settings: plan.settings,
        report,
        want_params: false,
        progress: Some(progress),
    };
    let results = match runner.resident(&req) {
        None | Some(Err(InferError::Compute(histfit_compute::ComputeError::Unsupported(_)))) => {
            return Ok(None)
        }
        Some(r) => r?,
    };
    let expected = indices.end - indices.start;
    if results.len() as u64 != expected || results.iter().zip(indices).any(|(r, i)| r.index != i) {
        return Err(InferError::Compute(histfit_compute::ComputeError::Device(
            format!(
                "the device returned {} resident fits for {} toys, or out of order",
                results.len(),
                expected
            ),
        )));
    }
    if std::env::var_os("HISTFIT_TIMING").is_some() {
        // Why device fits go back to the host (the same diagnostic switch as the CLI's timing):
        // the first rule of `device_fit_certified` each one fails.
        let mut why = std::collections::BTreeMap::<String, usize>::new();
        for r in results
            .iter()
            .filter(|r| !crate::fit::device_fit_certified(r))
        {
            let rule = if r.status != histfit_compute::ResidentStatus::Converged {
                format!("{:?}", r.status)
            } else if !r.nll.is_finite() {
                "not finite".into()
            } else if r.projected_gradient > crate::fit::POLISH_PG {
                "above POLISH_PG".into()
            } else {
                "coordinates left at their start".into()
            };
            *why.entry(rule).or_default() += 1;
        }
        eprintln!(
            "timing: {} device fits, refitted on the host: {why:?}",
            results.len()
        );
    }
    Ok(Some(
        results
            .into_iter()
            .map(|r| {
                crate::fit::device_fit_certified(&r).then(|| ToyFit {
                    index: r.index,
                    twice_nll: r.twice_nll(),
                    poi: r.poi,
                    converged: true,
                    reason: None,
                })
            })
            .collect(),
    ))
}

/// Fits caller-provided datasets (for example expected data of many signal hypotheses), each
/// from its own starting point (`inits[k]`, or the model's init) within `bounds` (or the
/// model's), on `runner`.
pub fn fit_datasets_on<R: ToyRunner>(
    runner: &R,
    data: &[Dataset],
    inits: Option<&[Vec<f64>]>,
    bounds: Option<Vec<(f64, f64)>>,
    base: &FitOptions,
) -> Result<Vec<FitResult>> {
    if let Some(i) = inits {
        if i.len() != data.len() {
            return Err(InferError::Request(format!(
                "{} starting points for {} datasets",
                i.len(),
                data.len()
            )));
        }
    }
    let mut o = base.clone();
    if bounds.is_some() {
        o.bounds = bounds;
    }
    let o = &o;
    runner.run(data.len(), &move |mut ev, k| {
        Box::pin(async move {
            let mut ok = o.clone();
            if let Some(i) = inits {
                ok.init = Some(i[k].clone());
            }
            fit_async(&mut *ev, &data[k], &ok).await
        })
    })
}

/// The test statistic of one toy under one hypothesis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToyStat {
    pub index: u64,
    pub q: f64,
    pub converged: bool,
    /// Which of the toy's fits did not converge, and why (absent when both did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
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

async fn statistic<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    mu: f64,
    ts: TestStat,
    base: &FitOptions,
    init: &[f64],
) -> Result<(f64, Option<String>)> {
    let poi = eval.space().poi()?;
    let (o, oc) = statistic_options(eval.space(), base, mu, ts, init, poi);
    let free = fit_async(eval, data, &o).await?;
    let cond = fit_async(eval, data, &oc).await?;
    let t = (cond.twice_nll - free.twice_nll).max(0.0);
    let mu_hat = free.bestfit[poi];
    let q = ts.from_ratio(t, mu_hat, mu);
    let reason = match (free.converged, cond.converged) {
        (true, true) => None,
        (false, true) => Some(format!("free fit: {}", free.reason)),
        (true, false) => Some(format!("conditional fit: {}", cond.reason)),
        (false, false) => Some(format!(
            "free fit: {}; conditional fit: {}",
            free.reason, cond.reason
        )),
    };
    Ok((q, reason))
}

/// The free and conditional fits of a test statistic at `mu`, from `init` (for q̃ the free fit's
/// POI is bounded below by 0).
fn statistic_options(
    space: &ParameterSpace,
    base: &FitOptions,
    mu: f64,
    ts: TestStat,
    init: &[f64],
    poi: usize,
) -> (FitOptions, FitOptions) {
    let mut o = base.clone();
    o.uncertainties = false;
    o.init = Some(init.to_vec());
    if ts == TestStat::TmuTilde {
        let mut b = o.bounds.clone().unwrap_or_else(|| space.bounds.clone());
        b[poi].0 = b[poi].0.max(0.0);
        o.bounds = Some(b);
    }
    let mut oc = o.clone();
    let mut ci = init.to_vec();
    ci[poi] = mu;
    oc.init = Some(ci);
    oc.fix.push((poi, mu));
    (o, oc)
}

/// Toy-based CLs at `mu` on the CPU: baseline fits on the observed data, then `indices` of the
/// signal+background and background-only ensembles.
#[allow(clippy::too_many_arguments)]
pub fn hypotest_toys<E: Evaluator + Clone + Send + Sync + 'static>(
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
    hypotest_toys_on(
        &OnCpu(eval),
        data,
        mu,
        test_stat,
        seed,
        n_toys,
        indices,
        base,
        progress,
    )
}

/// Toy-based CLs at `mu` on `runner`.
#[allow(clippy::too_many_arguments)]
pub fn hypotest_toys_on<R: ToyRunner>(
    runner: &R,
    data: &Dataset,
    mu: f64,
    test_stat: TestStat,
    seed: u64,
    n_toys: u64,
    indices: std::ops::Range<u64>,
    base: &FitOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<ToyHypotest> {
    let poi = runner.space().poi()?;
    crate::check_poi_not_fixed(runner.space(), base, poi)?;
    let bounds = base
        .bounds
        .clone()
        .unwrap_or_else(|| runner.space().bounds.clone());
    crate::asymptotic::check_tested_poi(bounds[poi], mu)?;
    let init = runner.space().init.clone();
    let (q_obs, params_sb, params_b) = {
        let mut ev = runner.single();
        let ev = &mut *ev;
        let (q_obs, observed_failure) = block_on(statistic(
            &mut Blocking(&mut *ev),
            data,
            mu,
            test_stat,
            base,
            &init,
        ))?;
        if let Some(why) = observed_failure {
            return Err(InferError::Request(format!(
                "a fit of the observed data did not converge, so the observed test statistic is unreliable ({why})"
            )));
        }
        let mut cond_at = |m: f64| -> Result<Vec<f64>> {
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
        (q_obs, cond_at(mu)?, cond_at(mu_b)?)
    };
    let total = 2 * (indices.end - indices.start) as usize;
    let done = AtomicUsize::new(0);
    let done = &done;
    let host = |base: &FitOptions,
                gen: &[f64],
                stream_seed: u64,
                list: &[u64],
                refits: bool|
     -> Result<Vec<ToyStat>> {
        run_listed(
            runner,
            refits,
            gen,
            stream_seed,
            list,
            &move |mut ev, i, toy| {
                Box::pin(async move {
                    let (q, reason) = statistic(&mut *ev, &toy, mu, test_stat, base, gen).await?;
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                    Ok(ToyStat {
                        index: i,
                        q,
                        converged: reason.is_none(),
                        reason,
                    })
                })
            },
        )
    };
    // Both fits of every toy whole on the device where it runs them; toys either of whose fits
    // it could not certify get the host's statistic (both fits again).
    let run = |gen: &[f64], stream_seed: u64| -> Result<Vec<ToyStat>> {
        let list: Vec<u64> = indices.clone().collect();
        // The ensemble's units, at its generating point (both fits of every toy in them).
        let mut base = base.clone();
        if base.scales.is_none() && !indices.is_empty() {
            let (o, _) = statistic_options(runner.space(), &base, mu, test_stat, gen, poi);
            base.scales = Some(crate::fit::curvature_scales(
                &mut *runner.single(),
                gen,
                &o,
            )?);
        }
        let base = &base;
        let (o, oc) = statistic_options(runner.space(), base, mu, test_stat, gen, poi);
        // Both fits must qualify before either ensemble is launched.
        let (Some(plan_free), Some(plan_cond)) = (
            crate::fit::device_plan(runner.space(), &o)?,
            crate::fit::device_plan(runner.space(), &oc)?,
        ) else {
            return host(base, gen, stream_seed, &list, false);
        };
        // Device progress: a toy's statistic is two fits (free, then conditional).
        let (before, fits) = (done.load(Ordering::Relaxed), AtomicUsize::new(0));
        let on_device = |n: usize| {
            let f = fits.fetch_add(n, Ordering::Relaxed) + n;
            progress((before + f / 2).min(total), total);
        };
        let free = device_fits(
            runner,
            &plan_free,
            gen,
            stream_seed,
            indices.clone(),
            Some(poi),
            Progress(&on_device),
        )?;
        let cond = match &free {
            Some(_) => device_fits(
                runner,
                &plan_cond,
                gen,
                stream_seed,
                indices.clone(),
                None,
                Progress(&on_device),
            )?,
            None => None,
        };
        let (Some(free), Some(cond)) = (free, cond) else {
            return host(base, gen, stream_seed, &list, false);
        };
        let redo: Vec<u64> = list
            .iter()
            .zip(free.iter().zip(&cond))
            .filter(|(_, (f, c))| f.is_none() || c.is_none())
            .map(|(&i, _)| i)
            .collect();
        done.fetch_add(list.len() - redo.len(), Ordering::Relaxed);
        progress(done.load(Ordering::Relaxed), total);
        let mut refits = host(base, gen, stream_seed, &redo, true)?.into_iter();
        Ok(list
            .iter()
            .zip(free.into_iter().zip(cond))
            .map(|(&i, fc)| match fc {
                (Some(f), Some(c)) => ToyStat {
                    index: i,
                    q: test_stat.from_ratio((c.twice_nll - f.twice_nll).max(0.0), f.poi, mu),
                    converged: true,
                    reason: None,
                },
                _ => refits.next().expect("one refit per uncertified toy"),
            })
            .collect())
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
pub fn merge_hypotest_toys(
    parts: Vec<ToyHypotest>,
    allow_partial: bool,
) -> Result<(ToyHypotest, Option<String>)> {
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
            || p.params_sb != first.params_sb
            || p.params_b != first.params_b
        {
            return Err(InferError::Request(format!(
                "shards disagree (mu {} vs {}, statistic {:?} vs {:?}, seed {} vs {}, ensemble size {} vs {}, q_obs {} vs {}, or the generating parameters): they are not parts of one ensemble",
                p.mu, first.mu, p.test_stat, first.test_stat, p.seed, first.seed, p.n_toys, first.n_toys, p.q_obs, first.q_obs
            )));
        }
        first.toys_sb.extend(p.toys_sb);
        first.toys_b.extend(p.toys_b);
    }
    let mut note = None;
    for (t, which) in [(&mut first.toys_sb, " s+b"), (&mut first.toys_b, " b-only")] {
        t.sort_by_key(|x| x.index);
        let idx: Vec<u64> = t.iter().map(|x| x.index).collect();
        if let Some(n) = completeness(&idx, first.n_toys, which, allow_partial)? {
            note.get_or_insert(n);
        }
    }
    first.summary = summarize(first.q_obs, &first.toys_sb, &first.toys_b, first.test_stat);
    Ok((first, note))
}

/// Checks that sorted toy `indices` are distinct and, unless `allow_partial`, are every index
/// 0..n_toys of the ensemble; the note to report for a partial merge.
fn completeness(
    indices: &[u64],
    n_toys: u64,
    which: &str,
    allow_partial: bool,
) -> Result<Option<String>> {
    if indices.windows(2).any(|w| w[0] == w[1]) {
        return Err(InferError::Request(
            "the same toy appears in two shards".into(),
        ));
    }
    if let Some(&i) = indices.iter().find(|&&i| i >= n_toys) {
        return Err(InferError::Request(format!(
            "toy {i} is outside the ensemble of {n_toys}: the shards are not of one run"
        )));
    }
    let have = indices.len() as u64;
    if have == n_toys {
        return Ok(None);
    }
    let first_missing = (0..n_toys)
        .zip(indices.iter().copied().chain(std::iter::repeat(u64::MAX)))
        .find(|(want, got)| want != got)
        .map_or(0, |(want, _)| want);
    let msg = format!(
        "the shards hold {have} of the ensemble's {n_toys}{which} toys (the first missing is toy {first_missing})"
    );
    if allow_partial {
        Ok(Some(format!("{msg}: merged as a partial ensemble")))
    } else {
        Err(InferError::Request(format!(
            "{msg}: give every shard, or allow a partial merge"
        )))
    }
}

/// Where an ensemble's toys are drawn. The default of every front end is the free fit of the
/// observed data (the maximum-likelihood point, what a physicist means by "toys from data").
#[derive(Debug, Clone, PartialEq, Default)]
pub enum GenPoint {
    /// The free fit of the data.
    #[default]
    FreeFit,
    /// The fit of the data with the POI held at this value.
    ConditionalFit(f64),
    /// These parameters.
    Given(Vec<f64>),
}

/// The parameters toys are generated at (see [`GenPoint`]), fitted with the options `base` of
/// the toy fits themselves (their fixed parameters, start and bounds); a fit that does not
/// converge is an error, not a silently poor generating point.
pub fn generation_point<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    at: &GenPoint,
    base: &FitOptions,
) -> Result<Vec<f64>> {
    let mut o = FitOptions {
        uncertainties: false,
        ..base.clone()
    };
    match at {
        GenPoint::Given(p) => {
            let n = eval.space().len();
            if p.len() != n {
                return Err(InferError::Request(format!(
                    "generating parameters: {} values, the model has {n} parameters",
                    p.len()
                )));
            }
            if let Some(i) = p.iter().position(|v| !v.is_finite()) {
                return Err(InferError::Request(format!(
                    "generating parameter {i} is not finite ({})",
                    p[i]
                )));
            }
            return Ok(p.clone());
        }
        GenPoint::ConditionalFit(mu) => {
            let poi = eval.space().poi()?;
            crate::check_fixed_value(eval.space(), poi, *mu)?;
            o.fix.push((poi, *mu));
        }
        GenPoint::FreeFit => {}
    }
    let r = fit(eval, data, &o)?;
    if !r.converged {
        return Err(InferError::Request(format!(
            "the fit that sets the generating parameters did not converge: {}",
            r.reason
        )));
    }
    Ok(r.bestfit)
}

/// A fitted toy ensemble (or a shard of one): what `histfit toys` and Python's `fit_toys`
/// return.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToyEnsemble {
    pub seed: u64,
    /// Toys in the whole ensemble (a shard holds a block of them).
    pub n_toys: u64,
    pub gen_params: Vec<f64>,
    pub toys: Vec<ToyFit>,
    pub summary: EnsembleSummary,
}

/// Counts and the fitted POI's mean and standard deviation over the converged toys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnsembleSummary {
    pub n: usize,
    pub converged: usize,
    pub failed: usize,
    pub poi_mean: f64,
    pub poi_std: f64,
}

impl ToyEnsemble {
    pub fn new(seed: u64, n_toys: u64, gen_params: Vec<f64>, mut toys: Vec<ToyFit>) -> Self {
        toys.sort_by_key(|t| t.index);
        let ok: Vec<f64> = toys.iter().filter(|t| t.converged).map(|t| t.poi).collect();
        let mean = ok.iter().sum::<f64>() / ok.len().max(1) as f64;
        let var = ok.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (ok.len().max(2) - 1) as f64;
        ToyEnsemble {
            seed,
            n_toys,
            gen_params,
            summary: EnsembleSummary {
                n: toys.len(),
                converged: ok.len(),
                failed: toys.len() - ok.len(),
                poi_mean: mean,
                poi_std: var.sqrt(),
            },
            toys,
        }
    }
}

/// Merges shards of one ensemble: the same seed, size and generating parameters, distinct toys,
/// and (unless `allow_partial`, which returns a note to report) every toy of the ensemble.
pub fn merge_toy_ensembles(
    parts: Vec<ToyEnsemble>,
    allow_partial: bool,
) -> Result<(ToyEnsemble, Option<String>)> {
    let first = parts
        .first()
        .ok_or_else(|| InferError::Request("nothing to merge".into()))?;
    if parts.iter().any(|p| {
        p.seed != first.seed || p.n_toys != first.n_toys || p.gen_params != first.gen_params
    }) {
        return Err(InferError::Request(
            "the shards differ in seed, ensemble size or generating parameters: they are not parts of one ensemble".into(),
        ));
    }
    let (seed, n_toys, gen) = (first.seed, first.n_toys, first.gen_params.clone());
    let mut toys: Vec<ToyFit> = parts.into_iter().flat_map(|p| p.toys).collect();
    toys.sort_by_key(|t| t.index);
    let idx: Vec<u64> = toys.iter().map(|t| t.index).collect();
    let note = completeness(&idx, n_toys, "", allow_partial)?;
    Ok((ToyEnsemble::new(seed, n_toys, gen, toys), note))
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    fn shard(indices: std::ops::Range<u64>, n_toys: u64) -> ToyEnsemble {
        let toys = indices
            .map(|index| ToyFit {
                index,
                twice_nll: index as f64,
                poi: 1.0,
                converged: true,
                reason: None,
            })
            .collect();
        ToyEnsemble::new(7, n_toys, vec![1.0, 2.0], toys)
    }

    #[test]
    fn shards_merge_only_into_the_whole_ensemble() {
        let whole = shard(0..9, 9);
        let (m, note) =
            merge_toy_ensembles(vec![shard(6..9, 9), shard(0..3, 9), shard(3..6, 9)], false)
                .unwrap();
        assert_eq!((m, note), (whole, None));
        let missing = merge_toy_ensembles(vec![shard(0..3, 9), shard(6..9, 9)], false);
        let e = missing.unwrap_err().to_string();
        assert!(
            e.contains("hold 6 of the ensemble's 9 toys (the first missing is toy 3)"),
            "{e}"
        );
        let (m, note) = merge_toy_ensembles(vec![shard(0..3, 9), shard(6..9, 9)], true).unwrap();
        assert_eq!(m.summary.n, 6);
        assert!(note.unwrap().contains("partial"));
        let twice = merge_toy_ensembles(vec![shard(0..5, 9), shard(4..9, 9)], true);
        assert!(twice.unwrap_err().to_string().contains("two shards"));
        let outside = merge_toy_ensembles(vec![shard(0..9, 9), shard(9..10, 9)], true);
        assert!(outside
            .unwrap_err()
            .to_string()
            .contains("outside the ensemble"));
        let mut other = shard(3..9, 9);
        other.seed = 8;
        assert!(merge_toy_ensembles(vec![shard(0..3, 9), other], false).is_err());
    }
}

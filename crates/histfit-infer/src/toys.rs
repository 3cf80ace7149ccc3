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
use histfit_seam::{
    block_on, AsyncEvaluator, BatchEvaluator, Blocking, Dataset, Evaluator, ParameterSpace,
    Progress, ResidentFit, ResidentRequest,
};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A contiguous block `k` of `n` (0-based) of toy indices 0..total.
/// An ensemble has at least one toy: statistics of none (a CLs of 0, a mean of 0) would read
/// as results.
pub fn check_ensemble_size(n_toys: u64) -> Result<()> {
    if n_toys == 0 {
        return Err(InferError::Request(
            "n_toys = 0: an ensemble needs at least one toy".into(),
        ));
    }
    Ok(())
}

pub fn shard_range(total: u64, k: u64, n: u64) -> Result<std::ops::Range<u64>> {
    if n == 0 || k >= n {
        return Err(InferError::Request(format!(
            "shard {}/{n}: expected 1 ≤ K ≤ N",
            k + 1
        )));
    }
    Ok(total * k / n..total * (k + 1) / n)
}

/// Reading back what serde_json writes of a NaN (null): the toy documents' figures that have no
/// value (a failed toy's, a shard without converged toys, an ensemble without a POI) are NaN, so
/// that `merge-toys` reads every document `toys` and `hypotest-toys` write.
mod nan_as_null {
    use serde::{Deserialize, Deserializer};

    pub fn one<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }

    pub fn five<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 5], D::Error> {
        Ok(<[Option<f64>; 5]>::deserialize(d)?.map(|v| v.unwrap_or(f64::NAN)))
    }
}

/// One fitted toy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToyFit {
    pub index: u64,
    #[serde(deserialize_with = "nan_as_null::one")]
    pub twice_nll: f64,
    /// The fitted POI (NaN, null in JSON, where the likelihood names none).
    #[serde(deserialize_with = "nan_as_null::one")]
    pub poi: f64,
    pub converged: bool,
    /// Why the fit did not converge (absent when it did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where the toy was fitted from more than one start (the ensemble's basin probe,
    /// [`PROBE_TOYS`]: the mirror start, further starts where the two disagree, starts around
    /// the initial point and the fit in the likelihood's own units where asked): by how
    /// much they lowered twice_nll below the first start's converged minimum (0 where that
    /// stood, or where the first search did not converge). Absent where the toy made one start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_start: Option<f64>,
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
    /// ([`histfit_seam::ResidentFits`]); `None` where it does not (the CPU, or a device whose
    /// resident fits are switched off).
    fn resident(&self, _req: &ResidentRequest<'_>) -> Option<Result<Vec<ResidentFit>>> {
        None
    }
    /// Whether a run of fits driven from the host costs its steps rather than its fits (lockstep
    /// batches on a device: a step waits for the slowest request of it), so that fits better
    /// made at once are asked for in one run even where some may turn out not to be needed.
    fn steps_cost(&self) -> bool {
        false
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
    fn steps_cost(&self) -> bool {
        true
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
        // Evaluators lent from the batcher's stock, which each launch tops up while it holds the
        // batcher (see `resident`): refits beside a launch (`ensemble_fits`) do not wait for it.
        if self.batcher.lend_host().is_none() {
            return self.run_toys(params, seed, indices, work);
        }
        // The host's generator draws the device's bits (see `toys`), so each refit sees the toy
        // the device fitted.
        let out: Vec<Result<T>> = indices
            .par_iter()
            .map(|&i| {
                let mut ev = self.batcher.lend_host().expect("checked above");
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
            let fits = b
                .resident_fits()
                .map(|r| r.fit_toys_resident(req).map_err(InferError::from));
            // Host evaluators for the refits of this launch's uncertified fits (at most as many
            // as may run at once: the refits' pool and the caller's), made while the batcher is
            // held anyway.
            if let Some(Ok(fits)) = &fits {
                let refits = fits
                    .iter()
                    .filter(|r| !crate::fit::device_fit_certified(r))
                    .count();
                let n = refits.min(2 * rayon::current_num_threads());
                self.batcher.stock_hosts(b, n);
            }
            fits
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

/// The toys of an ensemble's basin probe: toys 0..`PROBE_TOYS` of its seed (fewer where the
/// ensemble has fewer). Fits of a model with more free parameters than a fit makes further
/// starts for ([`crate::fit::Starts::Auto`]) make a second start on every toy (the mirror);
/// the probe's toys also make [`crate::fit::PROBE_AROUND`] starts around the model's initial
/// point (consulted where the mirror finds no lower basin), and where one of the probe's
/// starts ends in a lower basin, every toy of the ensemble makes the starts around the initial
/// point. The probe's toys are the same whatever part of the ensemble is fitted, so shards
/// decide alike and merge into the whole ensemble's result.
pub const PROBE_TOYS: u64 = 200;

/// The most parameter values of first-fit end points an ensemble keeps so as to fit every
/// toy's first start before the probe decides ([`ensemble_fits`]): 32 M (256 MB).
const MERGED_END_VALUES: usize = 1 << 25;

/// The most evaluations one toy fit makes on a device: a launch lasts as long as its slowest
/// fit, and one fit on the device is several times slower than on a host core — 1Lbb's kinked
/// toy fits average 1 300–1 500 evaluations, and the slowest, 61 000, held a launch of 4 000 for
/// 14 s (issue 51, s47). A fit the device does not finish within it is fitted again on the host
/// where its pass needs every fit (first starts, mirrors, hold sets, the probe's starts); a
/// further start that only looks for a lower basin (the starts of toys whose first two starts
/// disagree, the starts around the initial point) is given up there, and on the host too
/// ([`toy_fit`]), so that the budget itself does not make a toy's minimum depend on the device.
/// (It does not make the devices equal: a device also drops a further start that ends within
/// the budget but uncertified, where the host keeps its fit; and the host gives up only after
/// the fit, paying its cost.) On 1Lbb under pyhf's codes one further start of 64 093
/// evaluations held its launch 17.5 s (2.3 s with the budget: the ensemble of 4 000 toys 57 →
/// 35 s), and no toy of the 1 000 compared with the CPU's unbudgeted fits moved, nor on 1Lbb
/// and 3L eRJR (smooth) at budgets down to 1 000 (h200, s52). Measured on the first fits of 1Lbb under pyhf's codes (16 000 toys, s49): 16 000 and
/// 32 000 evaluations took 39.6 and 59.7 s against 33.3 s here — the longer launches cost more
/// than the host's fewer refits saved (2 % of the toys stay uncertified at any budget: kinks,
/// not evaluations).
const DEVICE_FIT_EVALUATIONS: usize = 8_000;

/// The most bytes of starts around the initial point built at once ([`Pass::around`]).
const AROUND_BYTES: usize = 1 << 30;

/// A second start whose minimum is lower than the first's by more than this, in twice_nll,
/// found another basin.
pub const LOWER_BASIN: f64 = 1e-6;

/// Fits toys `indices` (of an ensemble of `n_toys`) generated at `gen_params`, in parallel on
/// the CPU.
pub fn fit_toys<E: Evaluator + Clone + Send + Sync + 'static>(
    eval: &E,
    gen_params: &[f64],
    seed: u64,
    n_toys: u64,
    indices: std::ops::Range<u64>,
    base: &FitOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<ToyFit>> {
    fit_toys_on(
        &OnCpu(eval),
        gen_params,
        seed,
        n_toys,
        indices,
        base,
        progress,
    )
}

/// Fits toys `indices` (of an ensemble of `n_toys`) generated at `gen_params` (each starts
/// there) on `runner`: whole on its device where it runs them ([`ToyRunner::resident`]) and the
/// fit qualifies, with the toys it could not certify fitted again from the host; else every fit
/// driven from the host. Where the model is too large for a fit's own further starts, every toy
/// also starts from its mirror, and the ensemble's basin probe ([`PROBE_TOYS`]) decides whether
/// every toy makes starts around the model's initial point.
pub fn fit_toys_on<R: ToyRunner>(
    runner: &R,
    gen_params: &[f64],
    seed: u64,
    n_toys: u64,
    indices: std::ops::Range<u64>,
    base: &FitOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<ToyFit>> {
    check_ensemble_size(n_toys)?;
    if indices.end > n_toys || indices.start > indices.end {
        return Err(InferError::Request(format!(
            "toys {}..{} are not toys of an ensemble of {n_toys}",
            indices.start, indices.end
        )));
    }
    let shown = (indices.end - indices.start) as usize;
    // The fitted POI each toy reports, where the likelihood names one: an ensemble's fits need
    // none.
    let poi = runner.space().poi;
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
    let ticks = Ticks::new(progress, shown);
    ensemble_fits(runner, gen_params, seed, n_toys, indices, &o, poi, &ticks)
}

/// Toys `indices` (of an ensemble of `n_toys`) drawn at `gen` and fitted under `o` (its start,
/// units and fixed parameters set), reporting parameter `poi`; one fit per toy of `indices` is
/// planned in `ticks` by the caller. Where the fits make a second start
/// ([`crate::fit::SecondStart`]), every toy is fitted from both starts, and the basin probe
/// ([`PROBE_TOYS`]) also from starts around the model's initial point (consulted where the
/// mirror ends no lower). Every toy is then also fitted from
/// points around the model's initial point ([`crate::fit::SecondStart::around_all`]): as many as
/// `o` asks ([`crate::fit::Starts::Count`]), else `AROUND_STARTS` (32) where the
/// probe found a lower basin and none elsewhere, and where it makes any, once more from the
/// generating point in the likelihood's own units ([`Pass::in_own_units`]).
#[allow(clippy::too_many_arguments)]
fn ensemble_fits<R: ToyRunner>(
    runner: &R,
    gen: &[f64],
    seed: u64,
    n_toys: u64,
    indices: std::ops::Range<u64>,
    o: &FitOptions,
    poi: Option<usize>,
    ticks: &Ticks<'_>,
) -> Result<Vec<ToyFit>> {
    let second = match indices.is_empty() {
        true => None,
        false => crate::fit::SecondStart::new(runner.space(), o)?,
    };
    // The ensemble makes the starts beyond each toy's first: each fit itself makes none (a
    // model this large makes none when left to the fit).
    let mut one = o.clone();
    if second.is_some() {
        one.starts = crate::fit::Starts::Auto;
    }
    let plan = crate::fit::device_plan(runner.space(), &one)?;
    let pass = Pass {
        runner,
        gen,
        seed,
        o: &one,
        plan: plan.as_ref(),
        poi,
        ticks,
        give_up: false,
    };
    let Some(second) = second else {
        return Ok(first_of(pass.fits_range(indices, None, false)?));
    };
    let probe = 0..PROBE_TOYS.min(n_toys);
    let rest = indices.start.max(probe.end)..indices.end.max(probe.end);
    let in_range = indices.end.min(probe.end).saturating_sub(indices.start);
    let n_rest = (rest.end - rest.start) as usize;
    ticks.plan_more(2 * probe.end as usize - in_range as usize);
    // Every toy's first fit before the probe decides (they do not depend on its decision), on a
    // device in at most `FIRST_FIT_LAUNCHES` launches (a launch lasts as long as its slowest
    // fit). Their end points are kept for the mirror starts; where those would take too much
    // memory, the rest's first fits are made after the probe, block by block with their
    // mirrors.
    let n = runner.space().names.len();
    let together = n_rest.saturating_mul(n) <= MERGED_END_VALUES;
    let first_list: Vec<u64> = match together {
        true => probe.clone().chain(rest.clone()).collect(),
        false => probe.clone().collect(),
    };
    let n_probe = (probe.end - probe.start) as usize;
    // On a device, the first fits go in a few launches, and the host's refits of the rest's
    // (those the device could not certify: on 1Lbb under pyhf's codes, half the ensemble's time
    // when they waited for every launch) start after the first launch, on a pool of their own
    // beside the later launches and the probe's passes, which do not depend on them. (On the
    // global pool the probe's few refits would queue behind the rest's many: 24 s for 1Lbb's
    // five, s48.)
    let launch = first_list.len().div_ceil(FIRST_FIT_LAUNCHES).max(n_probe);
    let head = &first_list[..launch.min(first_list.len())];
    let (probed, lower, rest_first) = std::thread::scope(|scope| -> Result<_> {
        let pass = &pass;
        let (probe_first, rest_first) = match pass.device_pass(head, None, true)? {
            Some(mut device) => {
                let rest_device = device.split_off(n_probe);
                let rest = match together && first_list.len() > n_probe {
                    true => RestFirst::Refitting(refit_beside(
                        scope,
                        pass,
                        &first_list,
                        (n_probe, head.len(), launch),
                        rest_device,
                    )?),
                    false if together => RestFirst::Ready(Vec::new()),
                    false => RestFirst::Later,
                };
                let probe_first = pass.finish(device, &head[..n_probe], None, true)?;
                (probe_first, rest)
            }
            None => {
                let mut all = pass.host(&first_list, None, true, false)?;
                let rest = match together {
                    true => RestFirst::Ready(all.split_off(n_probe)),
                    false => RestFirst::Later,
                };
                (all, rest)
            }
        };
        let (mut probed, mirror_lower, around) =
            pass.two_starts(probe.clone(), probe_first, &second, true)?;
        // Where the mirror found no lower basin, starts around the model's initial point look
        // for one further away.
        let lower = match around {
            Some(a) if !mirror_lower => pass.around_lower(&mut probed, a)?,
            Some(a) => {
                pass.drop_around(a);
                true
            }
            None => mirror_lower,
        };
        let rest_first = match rest_first {
            RestFirst::Ready(f) => f,
            RestFirst::Refitting(jobs) => {
                let mut all = Vec::new();
                for job in jobs {
                    all.extend(job.join().expect("a refitting thread panicked")?);
                }
                all
            }
            RestFirst::Later => Vec::new(),
        };
        Ok((probed, lower, rest_first))
    })?;
    // Every toy's mirror start, whatever the probe found: the probe decides for the whole
    // ensemble only whether toys also start around the initial point. On the public 1Lbb
    // likelihood under pyhf's codes (seed 0), 2 of 1 000 toys (825, 967) end 1.75 and 0.13
    // lower from their mirror (another single-top/top normalisation), while none of the
    // probe's 200 do: a decision for the whole ensemble left them in the higher basin on the
    // CPU and, by another descent's path, not on the GPU (BENCHMARKS.md, issue 51, s52).
    ticks.plan_more(n_rest);
    let fitted = match together {
        true => pass.two_starts(rest, rest_first, &second, false)?.0,
        false => {
            // The rest's first fits and their mirrors block by block, each block's end points
            // within MERGED_END_VALUES.
            let block = (MERGED_END_VALUES / n.max(1)).max(1) as u64;
            let mut fitted = Vec::with_capacity(n_rest);
            let mut lo = rest.start;
            while lo < rest.end {
                let part = lo..(lo + block).min(rest.end);
                let first = pass.fits_range(part.clone(), None, true)?;
                lo = part.end;
                fitted.extend(pass.two_starts(part, first, &second, false)?.0);
            }
            fitted
        }
    };
    let mut fits: Vec<Kept> = probed
        .into_iter()
        .filter(|t| indices.contains(&t.0.index))
        .chain(fitted)
        .collect();
    let around = second.around_count(lower);
    if around > 0 {
        pass.around(&mut fits, &second, around)?;
        pass.in_own_units(&mut fits)?;
        pass.released(&mut fits)?;
    }
    Ok(fits.into_iter().map(|(t, _)| t).collect())
}

/// A Poisson-constrained parameter whose constraint is this weak — a prior width above its
/// centre (a shapesys γ of more than 100 % relative uncertainty: τ < 1) — may end at its lower
/// bound in one basin and well inside its range, or at its upper bound, in a lower one: see
/// [`Pass::released`].
const WEAK_RELATIVE_WIDTH: f64 = 1.0;

/// The most hold sets ([`hold_sets`]) an ensemble fits every toy with.
const MAX_HOLD_SETS: usize = 8;

/// The sets of parameters fits hold before releasing them ([`Pass::released`]), each with the
/// values held: every weakly constrained parameter ([`WEAK_RELATIVE_WIDTH`]) at one prior width
/// above its centre, then all of them at their upper bounds; and each free parameter other than
/// the POI that enters more than one term (a normalisation factor, not a per-bin shapefactor
/// γ: [`ParameterSpace::local_term`]) at its upper bound, one at a time. Where a
/// lower basin has such a parameter away from where a descent from the generating point leaves
/// it — at a lower bound of 0, or near 1 — holding it there lets the other parameters settle
/// into that basin first: on 3L eRJR a shapesys γ of τ = 0.058 (lowest minima at 3.4–10, the
/// descents' at 0), on 1Lbb the single-top normalisation (lowest minimum at its bound 5, the
/// descent's at 1.2; BENCHMARKS.md, issue 51).
fn hold_sets(space: &ParameterSpace, o: &FitOptions) -> Vec<Vec<(usize, f64)>> {
    let bounds = o.bounds.as_ref().unwrap_or(&space.bounds);
    let free = |k: &usize| !space.fixed[*k] && !o.fix.iter().any(|&(j, _)| j == *k);
    let (mut near, mut top) = (Vec::new(), Vec::new());
    let mut sets = Vec::new();
    for k in (0..space.len()).filter(free) {
        let (lo, hi) = bounds[k];
        if !lo.is_finite() || !hi.is_finite() {
            continue;
        }
        match space.priors[k] {
            histfit_seam::Prior::Poisson { centre, width }
                if centre > 0.0 && width > WEAK_RELATIVE_WIDTH * centre =>
            {
                let v = (centre + width).min(0.5 * (centre + hi));
                if v > lo && v < hi {
                    near.push((k, v));
                }
                top.push((k, hi));
            }
            // A normalisation (it scales several bins), not a per-bin shapefactor γ.
            histfit_seam::Prior::Free
                if Some(k) != space.poi && lo >= 0.0 && space.local_term[k].is_none() =>
            {
                sets.push(vec![(k, hi)])
            }
            _ => {}
        }
    }
    let mut all: Vec<Vec<(usize, f64)>> =
        [near, top].into_iter().filter(|s| !s.is_empty()).collect();
    all.extend(sets);
    all.truncate(MAX_HOLD_SETS);
    all
}

/// The rest's first fits while the probe decides ([`ensemble_fits`]): made already, being
/// refitted on a thread, or made once the probe has decided.
enum RestFirst<'s> {
    Ready(Vec<Fitted>),
    /// One refitting thread per launch, in the toys' order.
    Refitting(Vec<std::thread::ScopedJoinHandle<'s, Result<Vec<Fitted>>>>),
    Later,
}

/// The rest's first fits ([`ensemble_fits`]): toys `from..first` of `list` launched already
/// (`done`, their device results), the others launched here, `launch` toys a launch; one
/// thread for each launch's refits, started as it ends, on a pool of their own.
fn refit_beside<'scope, 'env, R: ToyRunner>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    pass: &'env Pass<'env, R>,
    list: &'env [u64],
    (from, first, launch): (usize, usize, usize),
    done: Vec<Option<Fitted>>,
) -> Result<Vec<std::thread::ScopedJoinHandle<'scope, Result<Vec<Fitted>>>>> {
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .build()
            .map_err(|e| InferError::Request(format!("a thread pool: {e}")))?,
    );
    // Toys `at` of the list, from their launch's results.
    let refit = |device: Option<Vec<Option<Fitted>>>, at: std::ops::Range<usize>| {
        let pool = pool.clone();
        scope.spawn(move || {
            let list = &list[at];
            pool.install(|| match device {
                Some(d) => pass.finish(d, list, None, true),
                None => pass.host(list, None, true, false),
            })
        })
    };
    let mut jobs = vec![refit(Some(done), from..first)];
    for (k, part) in list[first..].chunks(launch).enumerate() {
        let at = first + k * launch;
        let device = pass.device_pass(part, None, true)?;
        jobs.push(refit(device, at..at + part.len()));
    }
    Ok(jobs)
}

/// The most launches the first fits of an ensemble on a device are split into (each holding
/// at least as many toys as the probe): the host's refits of a launch's toys start as soon as
/// it ends, beside the next ones (their evaluators made during the launch: [`Batched`]'s
/// `resident`). A launch lasts as long as its slowest fit (on 1Lbb under pyhf's
/// codes ≈ 2 s, its evaluation budget), so more, shorter launches would cost that each.
const FIRST_FIT_LAUNCHES: usize = 4;

/// A toy's fit and, where asked, its end point.
type Fitted = (ToyFit, Option<Vec<f64>>);

/// `refit()`, the host's refits of `redo` fits a device could not certify, timed on stderr
/// under HISTFIT_TIMING (where a device ensemble's time goes besides its launches, issue 51).
fn timed_refits<T>(redo: usize, refit: impl FnOnce() -> Result<T>) -> Result<T> {
    let timing = std::env::var_os("HISTFIT_TIMING").map(|_| std::time::Instant::now());
    let out = refit()?;
    if let (Some(t), true) = (timing, redo > 0) {
        eprintln!(
            "timing: {redo} refits on the host, {:.3} s",
            t.elapsed().as_secs_f64()
        );
    }
    Ok(out)
}

/// Fits of the same toys from further starts, pass after pass.
type Passes = Vec<Vec<ToyFit>>;

/// A toy's kept fit with its first start's twice_nll and convergence (what [`keep_lower`]
/// measures a lower basin from).
type Kept = (ToyFit, (f64, bool));

/// The positions of `fits` in ascending toy order, and those toys' indices: the ascending lists
/// a device's launches take.
fn ascending(fits: &[Kept]) -> (Vec<usize>, Vec<u64>) {
    let mut order: Vec<usize> = (0..fits.len()).collect();
    order.sort_by_key(|&k| fits[k].0.index);
    let list = order.iter().map(|&k| fits[k].0.index).collect();
    (order, list)
}

/// Each toy of `fits` at `positions` keeps the lower ([`keep_lower`]) of its fit and the one
/// `found` (in the order of `positions`) from another start.
fn keep_found(fits: &mut [Kept], positions: &[usize], found: Vec<ToyFit>) {
    for (&k, c) in positions.iter().zip(found) {
        let (t, f) = &mut fits[k];
        *t = keep_lower(*f, t.clone(), c);
    }
}

/// The basin probe's fits from [`crate::fit::SecondStart::probe_around`]'s starts (`starts`:
/// [`crate::fit::PROBE_AROUND`] passes over the probe's toys), planned in the ensemble's
/// progress: made by a device in the mirror starts' launch (they do not depend on the first
/// fits, and a launch lasts as long as its slowest fit), their uncertified fits not yet fitted
/// again on the host — that waits until the probe needs them (the mirror found no lower basin);
/// or not made yet.
struct AroundFits {
    starts: Vec<f64>,
    device: Option<Vec<Option<Fitted>>>,
    /// The fits themselves, where the host drove them in the mirror starts' run.
    done: Option<Passes>,
}

/// The toy fits of a pass, without their end points.
fn first_of(fits: Vec<Fitted>) -> Vec<ToyFit> {
    fits.into_iter().map(|(t, _)| t).collect()
}

/// Of two fits of one toy from different starts, the one to report: the converged one, else
/// the lower (a twice_nll that is not finite last); with how much lower its minimum is than
/// `first`, the first start's, where the first start converged (0 where it did not: a minimum
/// found where the first search failed is no lower basin).
fn keep_lower(first: (f64, bool), a: ToyFit, b: ToyFit) -> ToyFit {
    let lower = |x: &ToyFit, y: &ToyFit| {
        let key = |t: &ToyFit| {
            if t.twice_nll.is_nan() {
                f64::INFINITY
            } else {
                t.twice_nll
            }
        };
        key(x) < key(y)
    };
    let take_b = match (a.converged, b.converged) {
        (true, false) => false,
        (false, true) => true,
        _ => lower(&b, &a),
    };
    let mut t = if take_b { b } else { a };
    let (f, converged) = first;
    t.second_start = Some(match converged && f.is_finite() && t.converged {
        true => (f - t.twice_nll).max(0.0),
        false => 0.0,
    });
    t
}

/// An ensemble's progress over passes that fit some toys more than once: `done` fits of the
/// `planned` ones shown as a share of the `shown` toys, never going back.
struct Ticks<'a> {
    progress: &'a (dyn Fn(usize, usize) + Sync),
    shown: usize,
    done: AtomicUsize,
    planned: AtomicUsize,
    last: AtomicUsize,
}

impl<'a> Ticks<'a> {
    fn new(progress: &'a (dyn Fn(usize, usize) + Sync), shown: usize) -> Self {
        Ticks {
            progress,
            shown,
            done: AtomicUsize::new(0),
            planned: AtomicUsize::new(shown),
            last: AtomicUsize::new(0),
        }
    }
    fn plan(&self, fits: usize) {
        self.planned.store(fits.max(1), Ordering::Relaxed);
    }
    fn plan_more(&self, fits: usize) {
        self.planned.fetch_add(fits, Ordering::Relaxed);
    }
    fn tick(&self, n: usize) {
        let d = self.done.fetch_add(n, Ordering::Relaxed) + n;
        let planned = self.planned.load(Ordering::Relaxed).max(1);
        let s = (d.saturating_mul(self.shown) / planned).min(self.shown);
        let s = self.last.fetch_max(s, Ordering::Relaxed).max(s);
        (self.progress)(s, self.shown);
    }
    /// Fits planned that will not be made.
    fn unplan(&self, fits: usize) {
        let _ = self
            .planned
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| {
                Some(p.saturating_sub(fits).max(1))
            });
    }
    /// Fits a device counted that the host fits again (and counts again).
    fn untick(&self, n: usize) {
        let _ = self
            .done
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                Some(d.saturating_sub(n))
            });
    }
}

/// What the passes of one ensemble share: where and how its toys are fitted.
struct Pass<'a, R: ToyRunner> {
    runner: &'a R,
    gen: &'a [f64],
    seed: u64,
    o: &'a FitOptions,
    plan: Option<&'a crate::fit::DevicePlan>,
    poi: Option<usize>,
    ticks: &'a Ticks<'a>,
    /// Fits of further starts that only look for a lower basin: each is given up beyond
    /// [`DEVICE_FIT_EVALUATIONS`], on the host as on a device ([`toy_fit`]).
    give_up: bool,
}

impl<R: ToyRunner> Pass<'_, R> {
    /// Toys `range`, each from its first start and from the mirror of that fit's end through it
    /// ([`crate::fit::SecondStart`]), and where those two disagree from further starts; the
    /// lowest kept ([`keep_lower`]), with its first start's twice_nll and convergence. With
    /// whether a mirror start (converged) ended lower than its first (converged) by more than
    /// [`LOWER_BASIN`]: the probe's decision. Where `probe_around` (the basin probe) and the
    /// fits make starts around the initial point, with those ([`AroundFits`]).
    /// `first`: the toys' fits from their first start, with their end points.
    fn two_starts(
        &self,
        range: std::ops::Range<u64>,
        first: Vec<Fitted>,
        second: &crate::fit::SecondStart,
        probe_around: bool,
    ) -> Result<(Vec<Kept>, bool, Option<AroundFits>)> {
        debug_assert!(
            first.iter().map(|f| f.0.index).eq(range.clone()),
            "the first fits of the range's toys, in order"
        );
        // Every thread builds the mirror starts (n values a toy) straight into one buffer.
        let n = self.runner.space().names.len();
        let mut starts = vec![0.0; n * first.len()];
        if n > 0 {
            starts
                .par_chunks_mut(n)
                .zip(first.par_iter())
                .for_each(|(x, (_, end))| {
                    x.copy_from_slice(&second.of(end.as_deref().expect("end points were asked")))
                });
        }
        let list: Vec<u64> = range.collect();
        let around = match probe_around {
            true => second.probe_around(&list),
            false => None,
        };
        let (mut device, mut done) = (None, None);
        if let Some(more) = &around {
            self.ticks.plan_more(list.len() * crate::fit::PROBE_AROUND);
            let passes = 1 + crate::fit::PROBE_AROUND;
            let all: Vec<u64> = (0..passes).flat_map(|_| list.iter().copied()).collect();
            let both = [&starts[..], &more[..]].concat();
            device = self.on_device(0..all.len() as u64, Some(&all), Some(&both), false)?;
            if device.is_none() && self.runner.steps_cost() {
                // Driven from the host where a run costs its steps (lockstep on a device):
                // in the mirror starts' run, as a device makes them in its launch.
                done = Some(self.host_passes(&list, &both, passes)?);
            }
        }
        let (again, rest) = match (device, &mut done) {
            (Some(mut mirror), _) => {
                let rest = mirror.split_off(list.len());
                (
                    first_of(self.finish(mirror, &list, Some(&starts), false)?),
                    Some(rest),
                )
            }
            (None, Some(passes)) => (passes.remove(0), None),
            (None, None) => (first_of(self.fits(&list, Some(&starts), false)?), None),
        };
        let around = around.map(|starts| AroundFits {
            starts,
            device: rest,
            done,
        });
        let mut best = Vec::with_capacity(first.len());
        let mut split = Vec::new();
        // Whether the mirror found a lower minimum than the first start (both converged): the
        // probe's decision, made on these two starts alone (further starts below are made
        // differently by the devices: a device drops those it cannot certify).
        let mut mirror_lower = false;
        for ((a, _), b) in first.into_iter().zip(again) {
            mirror_lower |= a.converged && b.converged && a.twice_nll - b.twice_nll > LOWER_BASIN;
            // Both starts' minima, where they differ: this toy's likelihood has several basins
            // near it, and the first two starts may both have missed the lowest.
            if (a.twice_nll - b.twice_nll).abs() > LOWER_BASIN {
                split.push((best.len(), a.index));
            }
            let f = (a.twice_nll, a.converged);
            best.push((keep_lower(f, a, b), f));
        }
        if split.is_empty() {
            return Ok((best, mirror_lower, around));
        }
        // Those toys from further starts (the model's initial point and points around it): a
        // few toys in a hundred, on the device where the others were fitted.
        let list: Vec<u64> = split.iter().map(|&(_, i)| i).collect();
        let further: Vec<Vec<Vec<f64>>> = list.iter().map(|&i| second.further(i)).collect();
        let positions: Vec<usize> = split.iter().map(|&(k, _)| k).collect();
        let starts: Vec<f64> = (0..crate::fit::FURTHER_STARTS)
            .flat_map(|r| further.iter().flat_map(move |f| f[r].iter().copied()))
            .collect();
        self.keep_lowest(
            &mut best,
            &positions,
            &list,
            &starts,
            crate::fit::FURTHER_STARTS,
        )?;
        Ok((best, mirror_lower, around))
    }

    /// Whether one of the probe's fits from its starts around the initial point (`around`, over
    /// the toys of `probed` in their order, each toy with its first start's twice_nll and
    /// convergence) ended lower than its toy's first start by more than [`LOWER_BASIN`] (both
    /// converged): a basin beyond the mirror's reach. Where one did, the probe's toys keep
    /// their lowest minima. On the public 3L resonance likelihood under pyhf's codes the mirror
    /// finds no lower basin while random restarts find one on 3 of the probe's 200 toys
    /// (BENCHMARKS.md, issue 21, session 24). As the mirror's, the decision rests on the first
    /// start and these starts alone, each fit finished alike on every device: a start the
    /// device could not certify is fitted again from the host.
    fn around_lower(&self, probed: &mut [Kept], around: AroundFits) -> Result<bool> {
        let list: Vec<u64> = probed.iter().map(|(t, _)| t.index).collect();
        let (starts, passes) = (&around.starts, crate::fit::PROBE_AROUND);
        let passes = match (around.device, around.done) {
            (Some(device), _) => self.finish_passes(device, &list, starts, passes)?,
            (None, Some(done)) => done,
            (None, None) => self.fits_many(&list, starts, passes, true)?,
        };
        let lower = passes.iter().any(|pass| {
            probed.iter().zip(pass).any(|((_, (f, converged)), b)| {
                *converged && b.converged && f - b.twice_nll > LOWER_BASIN
            })
        });
        if lower {
            let positions: Vec<usize> = (0..probed.len()).collect();
            for pass in passes {
                keep_found(probed, &positions, pass);
            }
        }
        Ok(lower)
    }

    /// The probe's starts around the initial point where the mirror decided alone: fits not
    /// made leave the progress's plan, and those a device made are not finished.
    fn drop_around(&self, around: AroundFits) {
        if around.device.is_none() && around.done.is_none() {
            let n = self.runner.space().names.len().max(1);
            self.ticks.unplan(around.starts.len() / n);
        }
    }

    /// Every toy of `fits` (each with its first start's twice_nll and convergence) fitted again
    /// from its first `count` [`crate::fit::SecondStart::around_all`] starts, the lowest kept.
    fn around(
        &self,
        fits: &mut [Kept],
        second: &crate::fit::SecondStart,
        count: usize,
    ) -> Result<()> {
        let (order, list) = ascending(fits);
        // The starts of blocks of toys at a time, each block's buffer at most AROUND_BYTES: 32
        // starts of 100 000 toys of a 328-parameter model would be 8.4 GB at once. A toy's
        // fits do not depend on the other toys of its launch, so the blocks change no result.
        let n = self.runner.space().names.len().max(1);
        let block = (AROUND_BYTES / (8 * n * count.max(1))).max(1);
        for (positions, toys) in order.chunks(block).zip(list.chunks(block)) {
            let starts = second.around_all(toys, count);
            self.keep_lowest(fits, positions, toys, &starts, count)?;
        }
        Ok(())
    }

    /// Every toy of `fits` (each with its first start's twice_nll and convergence) fitted again
    /// from its fit's start, the generating point, in the likelihood's own units (a
    /// constraint's width, else 1) instead of the ensemble's curvature units: a single fit of
    /// that toy from there (`fit(model, toy, init=gen)`, what `check_toy_minima.py` compares
    /// against); the lower kept. On a model whose probe found a
    /// lower basin the two units' paths from one start can end in different basins: on the
    /// public 2L0J and 3L resonance likelihoods (smooth codes) one toy in 200 each, 0.4 lower in
    /// twice_nll, that neither the mirror nor the starts around the initial point reach
    /// (BENCHMARKS.md, issue 21, session 25). With this pass no toy of such a model ends above
    /// its own single fit. One fit per toy, made where the other starts around the initial
    /// point are; the toys the device cannot certify are fitted again on the host, as first
    /// starts are.
    fn in_own_units(&self, fits: &mut [Kept]) -> Result<()> {
        let own = FitOptions {
            scales: None,
            ..self.o.clone()
        };
        let plan = crate::fit::device_plan(self.runner.space(), &own)?;
        let pass = Pass {
            o: &own,
            plan: plan.as_ref(),
            ..*self
        };
        let (order, list) = ascending(fits);
        self.ticks.plan_more(list.len());
        keep_found(fits, &order, first_of(pass.fits(&list, None, false)?));
        Ok(())
    }

    /// Every toy of `fits` fitted with each set of [`hold_sets`] held, then from that fit's end
    /// with them released; the lowest kept. On the
    /// public 3L eRJR likelihood (70 parameters, smooth codes) the toys whose default fit ends in
    /// a higher basin have the shapesys γ of a 0.03-event yield with a 0.125-event uncertainty
    /// (τ = 0.058) at its bound 0 and its lowest minimum at γ = 3.4–10: no start near the
    /// generating point, its mirror or points around the initial point leaves that bound, while
    /// holding γ at 5 and releasing it reaches the lower basin (BENCHMARKS.md, issue 51). Made by
    /// the passes every device makes (the held fit is a fit with parameters fixed, the release a
    /// fit from given starts), by the same rules on every device; a toy whose basins two
    /// devices' descents reach differently can still end apart (3L eRJR toy 191).
    fn released(&self, fits: &mut [Kept]) -> Result<()> {
        let space = self.runner.space();
        let sets = hold_sets(space, self.o);
        if fits.is_empty() || sets.is_empty() {
            return Ok(());
        }
        // Each set's held fits (a fit with its own parameters fixed: a pass of its own), then
        // the releases of every set in one pass — one launch on a device, where a launch lasts
        // as long as its slowest fit —, over blocks of toys whose starts stay within
        // AROUND_BYTES. A toy's fits do not depend on the other toys of its launch, nor a
        // release on the other sets', so neither changes a result.
        let plans = sets
            .iter()
            .map(|holds| {
                let mut held = self.o.clone();
                let mut init = held.init.clone().unwrap_or_else(|| space.init.clone());
                for &(k, v) in holds {
                    init[k] = v;
                }
                held.init = Some(init);
                held.fix.extend_from_slice(holds);
                let plan = crate::fit::device_plan(space, &held)?;
                Ok((held, plan))
            })
            .collect::<Result<Vec<_>>>()?;
        let (order, list) = ascending(fits);
        let n = space.names.len().max(1);
        let block = (AROUND_BYTES / (8 * n * sets.len())).max(1);
        for (positions, toys) in order.chunks(block).zip(list.chunks(block)) {
            let mut starts = Vec::with_capacity(sets.len() * toys.len() * n);
            for (held, plan) in &plans {
                let pass = Pass {
                    o: held,
                    plan: plan.as_ref(),
                    ..*self
                };
                self.ticks.plan_more(toys.len());
                starts.extend(
                    pass.fits(toys, None, true)?
                        .into_iter()
                        .flat_map(|(_, end)| end.expect("end points were asked")),
                );
            }
            self.ticks.plan_more(sets.len() * toys.len());
            for found in self.fits_many(toys, &starts, sets.len(), true)? {
                keep_found(fits, positions, found);
            }
        }
        Ok(())
    }

    /// Fits the toys of `list` (those of `fits` at `positions`, in that order) from each of
    /// `passes` passes of `starts` (pass after pass, each n values per toy of `list`) in one go
    /// ([`Pass::fits_many`]) and keeps, for each toy, the lowest ([`keep_lower`]).
    fn keep_lowest(
        &self,
        fits: &mut [Kept],
        positions: &[usize],
        list: &[u64],
        starts: &[f64],
        passes: usize,
    ) -> Result<()> {
        self.ticks.plan_more(positions.len() * passes);
        for pass in self.fits_many(list, starts, passes, false)? {
            keep_found(fits, positions, pass);
        }
        Ok(())
    }

    /// Toys `range` (see [`Pass::fits`]).
    fn fits_range(
        &self,
        range: std::ops::Range<u64>,
        starts: Option<&[f64]>,
        want_end: bool,
    ) -> Result<Vec<Fitted>> {
        let list: Vec<u64> = range.collect();
        self.fits(&list, starts, want_end)
    }

    /// Toys `list` (ascending), each from its entry of `starts` (n values per toy, in the
    /// list's order) or from the fit's start: whole on the device where the plan allows, the
    /// toys it could not certify fitted again from the host; with each fit's end point where
    /// `want_end`.
    fn fits(&self, list: &[u64], starts: Option<&[f64]>, want_end: bool) -> Result<Vec<Fitted>> {
        match self.device_pass(list, starts, want_end)? {
            Some(device) => self.finish(device, list, starts, want_end),
            None => self.host(list, starts, want_end, false),
        }
    }

    /// [`Pass::fits`]' device part: toys `list` (ascending) whole on the device where the plan
    /// allows (per toy its certified fit, `None` where the host must fit it again); `None`
    /// where the device does not fit them.
    fn device_pass(
        &self,
        list: &[u64],
        starts: Option<&[f64]>,
        want_end: bool,
    ) -> Result<Option<Vec<Option<Fitted>>>> {
        let (Some(&lo), Some(&hi)) = (list.first(), list.last()) else {
            return Ok(Some(Vec::new()));
        };
        debug_assert!(list.windows(2).all(|w| w[0] < w[1]), "an ascending list");
        // A run of consecutive toys goes to the device as a range, any other list as a list.
        let run = hi - lo + 1 == list.len() as u64;
        let positions = if run {
            lo..hi + 1
        } else {
            0..list.len() as u64
        };
        let listed = (!run).then_some(list);
        self.on_device(positions, listed, starts, want_end)
    }

    /// `passes` passes of further starts of the toys of `one` (ascending), pass after pass in
    /// `starts` (n values per toy), on the device in one launch (a launch lasts as long as its
    /// slowest fit, and searches from far away are slow), else as [`Pass::fits`] fits them;
    /// the fits of each pass in the order of `one`. A start the device could not certify is
    /// fitted again from the host where `refit`, else dropped (reported as not converged), and
    /// then a host's fit beyond [`DEVICE_FIT_EVALUATIONS`] is given up alike.
    fn fits_many(&self, one: &[u64], starts: &[f64], passes: usize, refit: bool) -> Result<Passes> {
        if !refit && !self.give_up {
            let give_up = Pass {
                give_up: true,
                ..*self
            };
            return give_up.fits_many(one, starts, passes, refit);
        }
        let n = self.runner.space().names.len();
        let per_pass = one.len() * n;
        if starts.len() != passes * per_pass {
            return Err(InferError::Compute(histfit_seam::ComputeError::Length {
                what: "further starts",
                expected: passes * per_pass,
                got: starts.len(),
            }));
        }
        let list: Vec<u64> = (0..passes).flat_map(|_| one.iter().copied()).collect();
        let device = match list.is_empty() {
            true => None,
            false => self.on_device(0..list.len() as u64, Some(&list), Some(starts), false)?,
        };
        let Some(device) = device else {
            if self.runner.steps_cost() {
                return self.host_passes(one, starts, passes);
            }
            return (0..passes)
                .map(|r| {
                    let s = &starts[r * per_pass..(r + 1) * per_pass];
                    Ok(first_of(self.fits(one, Some(s), false)?))
                })
                .collect();
        };
        if refit {
            return self.finish_passes(device, one, starts, passes);
        }
        // A further start whose fit the device could not certify is dropped, not fitted again
        // on the host: these starts only look for a lower basin, and the uncertified ones are
        // mostly searches from far away that reached the iteration limit (on the host too, at
        // a hundred times the cost).
        if std::env::var_os("HISTFIT_TIMING").is_some() {
            let dropped = device.iter().filter(|d| d.is_none()).count();
            eprintln!(
                "timing: of those, {dropped} further starts the device did not certify, dropped (not refitted)"
            );
        }
        let mut device = device.into_iter();
        Ok((0..passes)
            .map(|_| {
                one.iter()
                    .zip(device.by_ref())
                    .map(|(&i, d)| match d {
                        Some((fit, _)) => fit,
                        None => ToyFit {
                            index: i,
                            twice_nll: f64::NAN,
                            poi: f64::NAN,
                            converged: false,
                            reason: Some("a further start the device did not certify".into()),
                            second_start: None,
                        },
                    })
                    .collect()
            })
            .collect())
    }

    /// `passes` passes over the toys of `one` from `starts` (as [`Pass::fits_many`]) driven from
    /// the host, all of them in one run: for runners where a run costs its steps, not its fits
    /// ([`ToyRunner::steps_cost`]: lockstep on a device), where passes one after the other
    /// would each pay their own. (The toys are drawn first and kept: the probe's and its split
    /// toys' few hundred, or a shard's around starts.)
    fn host_passes(&self, one: &[u64], starts: &[f64], passes: usize) -> Result<Passes> {
        let (n, m) = (self.runner.space().names.len(), one.len());
        if starts.len() != passes * m * n {
            return Err(InferError::Compute(histfit_seam::ComputeError::Length {
                what: "further starts",
                expected: passes * m * n,
                got: starts.len(),
            }));
        }
        if m == 0 {
            return Ok(vec![Vec::new(); passes]);
        }
        let toys: Vec<Dataset> = {
            let mut ev = self.runner.single();
            let mut toys = Vec::with_capacity(m);
            for &i in one {
                toys.push(
                    ev.toys(self.gen, self.seed, i..i + 1)?
                        .pop()
                        .expect("one toy"),
                );
            }
            toys
        };
        let (toys, o, poi, ticks, give_up) = (&toys, self.o, self.poi, self.ticks, self.give_up);
        let fits = self.runner.run(passes * m, &move |mut ev, k| {
            let j = k % m;
            let mut with = o.clone();
            with.init = Some(starts[k * n..(k + 1) * n].to_vec());
            Box::pin(async move {
                let r = fit_async(&mut *ev, &toys[j], &with).await?;
                ticks.tick(1);
                Ok(toy_fit(one[j], &r, poi, give_up))
            })
        })?;
        Ok(fits.chunks(m).map(<[ToyFit]>::to_vec).collect())
    }

    /// A device's fits of `passes` passes over the toys of `one` (pass after pass, from
    /// `starts`, n values per toy), each pass [`Pass::finish`]ed: the fits it could not
    /// certify fitted again from the host — the passes' refits at once: each pass's wait for
    /// its slowest refit (1.6–1.8 s each for 1Lbb's four passes around the initial point under
    /// pyhf's codes, issue 51, s47) is then paid once. Each fit is its toy's and start's
    /// alone, so the order changes no result.
    fn finish_passes(
        &self,
        device: Vec<Option<Fitted>>,
        one: &[u64],
        starts: &[f64],
        passes: usize,
    ) -> Result<Passes> {
        let per_pass = one.len() * self.runner.space().names.len();
        let mut device = device.into_iter();
        let split: Vec<Vec<Option<Fitted>>> = (0..passes)
            .map(|_| device.by_ref().take(one.len()).collect())
            .collect();
        let redo = split.iter().flatten().filter(|d| d.is_none()).count();
        timed_refits(redo, || {
            split
                .into_par_iter()
                .enumerate()
                .map(|(r, pass)| {
                    let s = &starts[r * per_pass..(r + 1) * per_pass];
                    Ok(first_of(self.refit(pass, one, Some(s), false)?))
                })
                .collect()
        })
    }

    /// Toys at `positions` (of `list` where given, see [`ResidentRequest::list`]) whole on the
    /// device where the plan allows: per toy its certified fit or `None`; `None` where the
    /// device does not fit them. Each fit within [`DEVICE_FIT_EVALUATIONS`].
    fn on_device(
        &self,
        positions: std::ops::Range<u64>,
        list: Option<&[u64]>,
        starts: Option<&[f64]>,
        want_end: bool,
    ) -> Result<Option<Vec<Option<Fitted>>>> {
        let Some(plan) = self.plan else {
            return Ok(None);
        };
        let tick = |n: usize| self.ticks.tick(n);
        device_fits(
            self.runner,
            plan,
            self.gen,
            self.seed,
            positions,
            list,
            self.poi,
            starts,
            want_end,
            DEVICE_FIT_EVALUATIONS,
            Progress(&tick),
        )
    }

    /// A device pass over `list` (ascending) with the toys it could not certify fitted again
    /// from the host, from the same starts (timed under HISTFIT_TIMING).
    fn finish(
        &self,
        device: Vec<Option<Fitted>>,
        list: &[u64],
        starts: Option<&[f64]>,
        want_end: bool,
    ) -> Result<Vec<Fitted>> {
        let redo = device.iter().filter(|d| d.is_none()).count();
        timed_refits(redo, || self.refit(device, list, starts, want_end))
    }

    /// [`Pass::finish`] untimed: for passes whose refits run at once ([`Pass::finish_passes`]).
    fn refit(
        &self,
        device: Vec<Option<Fitted>>,
        list: &[u64],
        starts: Option<&[f64]>,
        want_end: bool,
    ) -> Result<Vec<Fitted>> {
        let n = self.runner.space().names.len();
        let (mut redo, mut redo_starts) = (Vec::new(), Vec::new());
        for (k, d) in device.iter().enumerate() {
            if d.is_none() {
                redo.push(list[k]);
                if let Some(s) = starts {
                    redo_starts.extend_from_slice(&s[k * n..(k + 1) * n]);
                }
            }
        }
        self.ticks.untick(redo.len());
        let redo_starts = starts.map(|_| &redo_starts[..]);
        let mut refits = self.host(&redo, redo_starts, want_end, true)?.into_iter();
        Ok(device
            .into_iter()
            .map(|d| d.unwrap_or_else(|| refits.next().expect("one refit per uncertified toy")))
            .collect())
    }

    /// Toys `list` (ascending) fitted from the host, each from its entry of `starts` where
    /// given; `refits`: toys a device could not certify.
    fn host(
        &self,
        list: &[u64],
        starts: Option<&[f64]>,
        want_end: bool,
        refits: bool,
    ) -> Result<Vec<Fitted>> {
        let n = self.runner.space().names.len();
        let start_of = |i: u64| {
            let s = starts.expect("called only with starts");
            let k = list.binary_search(&i).expect("a listed toy");
            s[k * n..(k + 1) * n].to_vec()
        };
        let start_of: Option<&(dyn Fn(u64) -> Vec<f64> + Sync)> = match starts {
            Some(_) => Some(&start_of),
            None => None,
        };
        host_toy_fits(
            self.runner,
            self.gen,
            self.seed,
            list,
            self.o,
            start_of,
            want_end,
            self.poi,
            self.ticks,
            refits,
            self.give_up,
        )
    }
}

/// Toy fits driven from the host (lockstep batches on a device, threads on the CPU), each from
/// `start_of(toy index)` where given.
#[allow(clippy::too_many_arguments)]
fn host_toy_fits<R: ToyRunner>(
    runner: &R,
    gen_params: &[f64],
    seed: u64,
    list: &[u64],
    o: &FitOptions,
    start_of: Option<&(dyn Fn(u64) -> Vec<f64> + Sync)>,
    want_end: bool,
    poi: Option<usize>,
    ticks: &Ticks<'_>,
    refits: bool,
    give_up: bool,
) -> Result<Vec<Fitted>> {
    run_listed(
        runner,
        refits,
        gen_params,
        seed,
        list,
        &move |mut ev, i, data| {
            Box::pin(async move {
                let own;
                let o = match start_of {
                    Some(start) => {
                        let mut with = o.clone();
                        with.init = Some(start(i));
                        own = with;
                        &own
                    }
                    None => o,
                };
                let r = fit_async(&mut *ev, &data, o).await?;
                ticks.tick(1);
                Ok((toy_fit(i, &r, poi, give_up), want_end.then_some(r.bestfit)))
            })
        },
    )
}

/// A toy's fit as an ensemble reports it. Where `give_up` (a further start that only looks for
/// a lower basin), a fit that reached [`DEVICE_FIT_EVALUATIONS`] is given up, not converged:
/// what a device does with it (the kernel hands a fit that reached its budget to the host,
/// which drops a further start's), so that the budget does not make a toy's minimum depend on
/// the device that searched for it.
fn toy_fit(index: u64, r: &FitResult, poi: Option<usize>, give_up: bool) -> ToyFit {
    let beyond = give_up && r.evaluations >= DEVICE_FIT_EVALUATIONS;
    let converged = r.converged && !beyond;
    // A given-up start reports no minimum, as a device's dropped start does.
    let (twice_nll, poi) = match beyond {
        true => (f64::NAN, f64::NAN),
        false => (r.twice_nll, poi.map_or(f64::NAN, |p| r.bestfit[p])),
    };
    ToyFit {
        index,
        twice_nll,
        poi,
        converged,
        reason: (!converged).then(|| match beyond {
            true => format!(
                "a further start given up after {} evaluations (the most {DEVICE_FIT_EVALUATIONS})",
                r.evaluations
            ),
            false => r.reason.clone(),
        }),
        second_start: None,
    }
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

/// Toys `indices` (or those of `list`: [`ResidentRequest::list`]) of `seed` drawn at `gen` and fitted by `plan` (a fit's
/// [`crate::fit::device_plan`]) whole on the runner's device: `None` where the runner does not
/// run fits there (or not these: a device may refuse settings it cannot follow); else per toy
/// its fit, or `None` where the device's result is not certified
/// ([`crate::fit::device_fit_certified`]) and the host must fit it.
#[allow(clippy::too_many_arguments)]
fn device_fits<R: ToyRunner>(
    runner: &R,
    plan: &crate::fit::DevicePlan,
    gen: &[f64],
    seed: u64,
    indices: std::ops::Range<u64>,
    list: Option<&[u64]>,
    report: Option<usize>,
    starts: Option<&[f64]>,
    want_params: bool,
    fit_evaluations: usize,
    progress: Progress<'_>,
) -> Result<Option<Vec<Option<Fitted>>>> {
    let req = ResidentRequest {
        gen_params: gen,
        seed,
        indices: indices.clone(),
        init: &plan.init,
        model_init: &plan.model_init,
        starts,
        list,
        fixed: &plan.fixed,
        lower: &plan.lower,
        upper: &plan.upper,
        scales: &plan.scales,
        kinks: &plan.kinks,
        settings: histfit_seam::ResidentSettings {
            fit_evaluations,
            ..plan.settings
        },
        report,
        want_params,
        progress: Some(progress),
    };
    let results = match runner.resident(&req) {
        None | Some(Err(InferError::Compute(histfit_seam::ComputeError::Unsupported(_)))) => {
            return Ok(None)
        }
        Some(r) => r?,
    };
    let expected = indices.end - indices.start;
    if results.len() as u64 != expected
        || results
            .iter()
            .zip(indices)
            .any(|(r, i)| r.index != req.toy(i))
    {
        return Err(InferError::Compute(histfit_seam::ComputeError::Device(
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
            let rule = if r.status != histfit_seam::ResidentStatus::Converged {
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
                crate::fit::device_fit_certified(&r).then(|| {
                    let fit = ToyFit {
                        index: r.index,
                        twice_nll: r.twice_nll(),
                        // The device reports 0 where asked for no parameter.
                        poi: if report.is_some() { r.poi } else { f64::NAN },
                        converged: true,
                        reason: None,
                        second_start: None,
                    };
                    (fit, r.bestfit)
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

/// The toy stream of a toy CLs run's background-only ensemble (seed `seed` draws the
/// signal+background one).
pub fn background_stream(seed: u64) -> u64 {
    seed ^ 0x9E37_79B9_7F4A_7C15
}

/// The test statistic of one toy under one hypothesis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToyStat {
    pub index: u64,
    #[serde(deserialize_with = "nan_as_null::one")]
    pub q: f64,
    /// The two fits the statistic is made of: the free fit's twice_nll and POI, the
    /// conditional fit's twice_nll (what devices and shards are compared on, fit by fit).
    /// Absent where not finite (JSON has no such numbers), and in documents written before
    /// they were added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twice_nll_free: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poi_hat: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twice_nll_cond: Option<f64>,
    pub converged: bool,
    /// Which of the toy's fits did not converge, and why (absent when both did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where the toy's fits made second starts (the ensemble's basin probe, [`PROBE_TOYS`]):
    /// the most that one lowered a fit's twice_nll. Absent where they made one start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_start: Option<f64>,
}

/// Toy-based hypothesis test: the per-toy statistics (so shards can be merged) and the CLs
/// derived from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToyHypotest {
    pub mu: f64,
    pub test_stat: TestStat,
    pub seed: u64,
    pub n_toys: u64,
    #[serde(deserialize_with = "nan_as_null::one")]
    pub q_obs: f64,
    /// Generating parameters: conditional fits of the observed data at μ and at 0 (for q0 at μ = 0
    /// and at its alternative: [`hypotest_toys_on`]).
    pub params_sb: Vec<f64>,
    pub params_b: Vec<f64>,
    pub toys_sb: Vec<ToyStat>,
    pub toys_b: Vec<ToyStat>,
    pub summary: ToySummary,
    /// The starts asked of every toy's fits ([`ToyEnsemble::starts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts: Option<usize>,
}

/// p-values from the converged toys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToySummary {
    #[serde(deserialize_with = "nan_as_null::one")]
    pub cls_obs: f64,
    #[serde(deserialize_with = "nan_as_null::one")]
    pub clsb_obs: f64,
    #[serde(deserialize_with = "nan_as_null::one")]
    pub clb_obs: f64,
    /// Statistical uncertainty of CLs+b and CLb (binomial).
    #[serde(deserialize_with = "nan_as_null::one")]
    pub clsb_err: f64,
    #[serde(deserialize_with = "nan_as_null::one")]
    pub clb_err: f64,
    /// Expected CLs: percentiles of the CLs of the background-only toys at the −2σ … +2σ quantiles.
    #[serde(deserialize_with = "nan_as_null::five")]
    pub cls_exp: [f64; 5],
    pub n_sb: usize,
    pub n_b: usize,
    pub failed_sb: usize,
    pub failed_b: usize,
    /// Toys of both ensembles whose fits made second starts, and of those the toys where one
    /// ended lower by more than [`LOWER_BASIN`] (see [`PROBE_TOYS`]).
    #[serde(default)]
    pub second_starts: usize,
    #[serde(default)]
    pub lower_basins: usize,
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
    let reason = fits_reason(free.converged, &free.reason, cond.converged, &cond.reason);
    Ok((q, reason))
}

/// A toy's statistic from its free and conditional fits (as [`statistic`] makes it).
fn toy_statistic(free: ToyFit, cond: ToyFit, mu: f64, ts: TestStat) -> ToyStat {
    let q = ts.from_ratio((cond.twice_nll - free.twice_nll).max(0.0), free.poi, mu);
    let reason = fits_reason(
        free.converged,
        free.reason.as_deref().unwrap_or(""),
        cond.converged,
        cond.reason.as_deref().unwrap_or(""),
    );
    let second_start = match (free.second_start, cond.second_start) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0).max(b.unwrap_or(0.0))),
    };
    ToyStat {
        index: free.index,
        q,
        twice_nll_free: finite(free.twice_nll),
        poi_hat: finite(free.poi),
        twice_nll_cond: finite(cond.twice_nll),
        converged: reason.is_none(),
        reason,
        second_start,
    }
}

/// `v` where finite (what a JSON document can hold).
fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// Which of a statistic's two fits did not converge, and why (none where both did).
fn fits_reason(free_ok: bool, free: &str, cond_ok: bool, cond: &str) -> Option<String> {
    match (free_ok, cond_ok) {
        (true, true) => None,
        (false, true) => Some(format!("free fit: {free}")),
        (true, false) => Some(format!("conditional fit: {cond}")),
        (false, false) => Some(format!("free fit: {free}; conditional fit: {cond}")),
    }
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
        None,
        seed,
        n_toys,
        indices,
        base,
        progress,
    )
}

/// Toy-based CLs at `mu` on `runner`. For q0 (the test of μ = 0) the second ensemble is drawn
/// at the POI value `q0_alternative` (`None`: 1, pyhf's rule for a signal strength; an
/// event-level model's yield needs its own: `Likelihood::discovery_alternative`); other
/// statistics ignore it.
#[allow(clippy::too_many_arguments)]
pub fn hypotest_toys_on<R: ToyRunner>(
    runner: &R,
    data: &Dataset,
    mu: f64,
    test_stat: TestStat,
    q0_alternative: Option<f64>,
    seed: u64,
    n_toys: u64,
    indices: std::ops::Range<u64>,
    base: &FitOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<ToyHypotest> {
    check_ensemble_size(n_toys)?;
    if test_stat == TestStat::Q0 && mu != 0.0 {
        return Err(InferError::Request(format!(
            "q0 tests the background-only hypothesis μ = 0; μ = {mu} was asked (test μ = 0)"
        )));
    }
    let poi = runner.space().poi()?;
    crate::check_poi_not_fixed(runner.space(), base, poi)?;
    let bounds = base
        .bounds
        .clone()
        .unwrap_or_else(|| runner.space().bounds.clone());
    crate::asymptotic::check_tested_poi(bounds[poi], mu)?;
    crate::asymptotic::check_background_only(bounds[poi], "background-only ensemble")?;
    if let (TestStat::Q0, Some(v)) = (test_stat, q0_alternative) {
        crate::asymptotic::check_q0_alternative(bounds[poi], v)?;
    }
    let init = runner.space().init.clone();
    // The fits of the observed data (q_obs, the generating points) are made as without asked
    // starts (those are the toys' fits'): the same toys either way.
    let observed = FitOptions {
        starts: crate::fit::Starts::Auto,
        ..base.clone()
    };
    let (q_obs, params_sb, params_b) = {
        let base = &observed;
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
        let mu_b = if test_stat == TestStat::Q0 {
            q0_alternative.unwrap_or(1.0)
        } else {
            0.0
        };
        // For q0 the "signal+background" role is the null μ = 0 and the alternative is μ at
        // `q0_alternative`.
        (q_obs, cond_at(mu)?, cond_at(mu_b)?)
    };
    if indices.end > n_toys || indices.start > indices.end {
        return Err(InferError::Request(format!(
            "toys {}..{} are not toys of an ensemble of {n_toys}",
            indices.start, indices.end
        )));
    }
    // Progress in toy statistics of both ensembles; two fits each (free, conditional), before
    // any second starts.
    let len = (indices.end - indices.start) as usize;
    let ticks = Ticks::new(progress, 2 * len);
    ticks.plan(4 * len);
    let ticks = &ticks;
    // Each ensemble's free and conditional fits, whole on the device where it runs them (the
    // toys it could not certify fitted again on the host), then each toy's statistic.
    let run = |gen: &[f64], stream_seed: u64| -> Result<Vec<ToyStat>> {
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
        let (o, oc) = statistic_options(runner.space(), &base, mu, test_stat, gen, poi);
        let fits = |o: &FitOptions| {
            ensemble_fits(
                runner,
                gen,
                stream_seed,
                n_toys,
                indices.clone(),
                o,
                Some(poi),
                ticks,
            )
        };
        let free = fits(&o)?;
        let cond = fits(&oc)?;
        Ok(free
            .into_iter()
            .zip(cond)
            .map(|(f, c)| toy_statistic(f, c, mu, test_stat))
            .collect())
    };
    // Distinct seeds for the two ensembles, derived from the user's seed.
    let toys_sb = run(&params_sb, seed)?;
    let toys_b = run(&params_b, background_stream(seed))?;
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
        starts: asked_starts(base.starts),
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
    let both = || toys_sb.iter().chain(toys_b);
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
    // CLs = CLs+b / CLb; with no background-only toy at or above the value it is undefined
    // (NaN), not 0 (which would read as an exclusion).
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
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
        second_starts: both().filter(|t| t.second_start.is_some()).count(),
        lower_basins: both()
            .filter(|t| t.second_start.is_some_and(|d| d > LOWER_BASIN))
            .count(),
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
            || p.starts != first.starts
        {
            return Err(InferError::Request(format!(
                "shards disagree (mu {} vs {}, statistic {:?} vs {:?}, seed {} vs {}, ensemble size {} vs {}, q_obs {} vs {}, starts {:?} vs {:?}, or the generating parameters): they are not parts of one ensemble",
                p.mu, first.mu, p.test_stat, first.test_stat, p.seed, first.seed, p.n_toys, first.n_toys, p.q_obs, first.q_obs, p.starts, first.starts
            )));
        }
        first.toys_sb.extend(p.toys_sb);
        first.toys_b.extend(p.toys_b);
    }
    let mut note = None;
    for (t, which) in [(&mut first.toys_sb, " s+b"), (&mut first.toys_b, " b-only")] {
        t.sort_by_key(|x| x.index);
        same_start_rules(t.iter().map(|x| x.second_start.is_some()), which)?;
        let idx: Vec<u64> = t.iter().map(|x| x.index).collect();
        if let Some(n) = completeness(&idx, first.n_toys, which, allow_partial)? {
            note.get_or_insert(n);
        }
    }
    first.summary = summarize(first.q_obs, &first.toys_sb, &first.toys_b, first.test_stat);
    Ok((first, note))
}

/// Checks that the shards of an ensemble (its toys, whether each made a second start) were fitted
/// under one second-start rule: since s52 every toy of a model above 64 free parameters makes
/// its mirror start and no toy of a smaller one does, so the toys are all with second starts or
/// all without. Shards of an earlier histfit (where only the basin probe's toys, or every toy
/// where the probe found a lower basin, made them) are not parts of one ensemble.
fn same_start_rules(mut made: impl Iterator<Item = bool>, which: &str) -> Result<()> {
    if let Some(first) = made.next() {
        if made.any(|m| m != first) {
            return Err(InferError::Request(format!(
                "the{which} shards were fitted under different second-start rules (some toys made second starts, some did not): fit them again with one version of histfit on one kind of device"
            )));
        }
    }
    Ok(())
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
    /// The starts asked of every toy's fit ([`crate::fit::Starts::Count`]; absent: left to the
    /// fits and the basin probe). Shards fitted under different counts do not merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts: Option<usize>,
}

/// What an ensemble records of the starts asked of its fits ([`ToyEnsemble::starts`]).
pub fn asked_starts(s: crate::fit::Starts) -> Option<usize> {
    match s {
        crate::fit::Starts::Auto => None,
        crate::fit::Starts::Count(k) => Some(k),
    }
}

/// Counts and the fitted POI's mean and standard deviation over the converged toys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnsembleSummary {
    pub n: usize,
    pub converged: usize,
    pub failed: usize,
    /// NaN (null in JSON) where no toy converged, or the likelihood names no POI.
    #[serde(deserialize_with = "nan_as_null::one")]
    pub poi_mean: f64,
    #[serde(deserialize_with = "nan_as_null::one")]
    pub poi_std: f64,
    /// Toys fitted from two starts or more: every toy of a model above 64 free parameters (its
    /// mirror start; see [`PROBE_TOYS`]), none of a smaller one.
    #[serde(default)]
    pub second_starts: usize,
    /// Of those, the toys whose second start ended lower by more than [`LOWER_BASIN`].
    #[serde(default)]
    pub lower_basins: usize,
}

impl ToyEnsemble {
    pub fn new(seed: u64, n_toys: u64, gen_params: Vec<f64>, mut toys: Vec<ToyFit>) -> Self {
        toys.sort_by_key(|t| t.index);
        let ok: Vec<f64> = toys.iter().filter(|t| t.converged).map(|t| t.poi).collect();
        // No converged toy (an empty shard, or every fit failed) has no mean and no width: NaN
        // (null in JSON), never a number that reads as a measurement.
        let mean = if ok.is_empty() {
            f64::NAN
        } else {
            ok.iter().sum::<f64>() / ok.len() as f64
        };
        let var = if ok.len() < 2 {
            f64::NAN
        } else {
            ok.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (ok.len() - 1) as f64
        };
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
                second_starts: toys.iter().filter(|t| t.second_start.is_some()).count(),
                lower_basins: toys
                    .iter()
                    .filter(|t| t.second_start.is_some_and(|d| d > LOWER_BASIN))
                    .count(),
            },
            toys,
            starts: None,
        }
    }

    /// The ensemble, recording the starts asked of its fits ([`ToyEnsemble::starts`]).
    pub fn with_starts(mut self, starts: crate::fit::Starts) -> Self {
        self.starts = asked_starts(starts);
        self
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
        p.seed != first.seed
            || p.n_toys != first.n_toys
            || p.gen_params != first.gen_params
            || p.starts != first.starts
    }) {
        return Err(InferError::Request(
            "the shards differ in seed, ensemble size, generating parameters or the starts asked of their fits: they are not parts of one ensemble".into(),
        ));
    }
    let (seed, n_toys, gen) = (first.seed, first.n_toys, first.gen_params.clone());
    let asked = first.starts;
    let mut toys: Vec<ToyFit> = parts.into_iter().flat_map(|p| p.toys).collect();
    toys.sort_by_key(|t| t.index);
    same_start_rules(toys.iter().map(|t| t.second_start.is_some()), "")?;
    let idx: Vec<u64> = toys.iter().map(|t| t.index).collect();
    let note = completeness(&idx, n_toys, "", allow_partial)?;
    let mut whole = ToyEnsemble::new(seed, n_toys, gen, toys);
    whole.starts = asked;
    Ok((whole, note))
}

#[cfg(test)]
mod keep_lower_tests {
    use super::*;

    fn fit(twice_nll: f64, converged: bool) -> ToyFit {
        ToyFit {
            index: 0,
            twice_nll,
            poi: 0.0,
            converged,
            reason: None,
            second_start: None,
        }
    }

    #[test]
    fn the_converged_then_the_lower_and_only_converged_minima_count() {
        let first = |t: &ToyFit| (t.twice_nll, t.converged);
        // Both converged: the lower, by how much.
        let (a, b) = (fit(10.0, true), fit(9.5, true));
        let t = keep_lower(first(&a), a, b);
        assert_eq!((t.twice_nll, t.second_start), (9.5, Some(0.5)));
        // A converged fit over a lower unconverged one.
        let (a, b) = (fit(10.0, true), fit(3.0, false));
        let t = keep_lower(first(&a), a, b);
        assert_eq!((t.twice_nll, t.second_start), (10.0, Some(0.0)));
        // A first search that failed: the rescue is no lower basin.
        let (a, b) = (fit(12.0, false), fit(10.0, true));
        let t = keep_lower(first(&a), a, b);
        assert!(t.converged && t.second_start == Some(0.0));
        // Neither converged: the lower, a value that is not a number last.
        let (a, b) = (fit(f64::NAN, false), fit(11.0, false));
        let t = keep_lower(first(&a), a, b);
        assert_eq!(t.twice_nll, 11.0);
        let (a, b) = (fit(11.0, false), fit(f64::NAN, false));
        assert_eq!(keep_lower(first(&a), a, b).twice_nll, 11.0);
    }

    /// A further start's host fit beyond the devices' evaluation budget is given up as a
    /// device's is: not converged, no minimum; at the budget, and any other fit, is kept.
    #[test]
    fn further_starts_beyond_the_budget_are_given_up_on_the_host() {
        let r = |evaluations: usize| FitResult {
            par_names: vec!["mu".into()],
            bestfit: vec![1.5],
            uncertainties: None,
            covariance: None,
            correlation: None,
            twice_nll: 7.0,
            converged: true,
            reason: String::new(),
            iterations: 1,
            evaluations,
            projected_gradient_norm: 0.0,
            hessian_positive_definite: None,
            fixed: vec![false],
            starts: 1,
            kinks: Vec::new(),
            warnings: Vec::new(),
        };
        // The kernel hands a fit that reached its budget to the host (`evals >= budget`).
        let at = toy_fit(3, &r(DEVICE_FIT_EVALUATIONS), Some(0), true);
        assert!(!at.converged && at.twice_nll.is_nan() && at.poi.is_nan());
        assert!(at.reason.unwrap().contains("given up"));
        let below = toy_fit(3, &r(DEVICE_FIT_EVALUATIONS - 1), Some(0), true);
        assert!(below.converged && (below.twice_nll, below.poi) == (7.0, 1.5));
        let first = toy_fit(3, &r(DEVICE_FIT_EVALUATIONS + 1), Some(0), false);
        assert!(first.converged && first.reason.is_none());
    }
}

#[cfg(test)]
mod statistic_tests {
    use super::*;

    /// A toy statistic whose free fit is not finite is written without that fit's numbers
    /// (JSON has none for ±inf or NaN) and reads back as it was, so its shard still merges.
    #[test]
    fn statistics_of_fits_that_are_not_finite_round_trip() {
        let fit = |twice_nll: f64, poi: f64| ToyFit {
            index: 3,
            twice_nll,
            poi,
            converged: twice_nll.is_finite(),
            reason: None,
            second_start: None,
        };
        let s = toy_statistic(
            fit(f64::INFINITY, f64::NAN),
            fit(12.5, 1.0),
            1.0,
            TestStat::QmuTilde,
        );
        assert_eq!(
            (s.twice_nll_free, s.poi_hat, s.twice_nll_cond),
            (None, None, Some(12.5))
        );
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            !text.contains("twice_nll_free") && !text.contains("null"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<ToyStat>(&text).unwrap(), s);
        let ok = toy_statistic(fit(10.0, 0.5), fit(12.5, 1.0), 1.0, TestStat::QmuTilde);
        assert_eq!((ok.twice_nll_free, ok.poi_hat), (Some(10.0), Some(0.5)));
        assert_eq!(
            serde_json::from_str::<ToyStat>(&serde_json::to_string(&ok).unwrap()).unwrap(),
            ok
        );
    }
}

#[cfg(test)]
mod empty_tests {
    use super::*;

    /// No converged toy gives no statistic: CLs, its parts and the POI's mean and width are NaN
    /// (null in JSON), never 0 (which would read as an exclusion or a measurement).
    #[test]
    fn statistics_of_no_toys_are_undefined() {
        let s = summarize(1.0, &[], &[], TestStat::QmuTilde);
        assert!(
            s.cls_obs.is_nan() && s.clsb_obs.is_nan() && s.clb_obs.is_nan(),
            "{s:?}"
        );
        assert!(s.cls_exp.iter().all(|v| v.is_nan()), "{s:?}");
        let e = ToyEnsemble::new(0, 1, vec![1.0], vec![]);
        assert!(e.summary.poi_mean.is_nan() && e.summary.poi_std.is_nan());
        assert!(serde_json::to_string(&e.summary)
            .unwrap()
            .contains("\"poi_mean\":null"));
        assert!(check_ensemble_size(0).is_err() && check_ensemble_size(1).is_ok());
    }

    /// The figures written as null (NaN) read back as NaN: a shard without converged toys, a
    /// failed toy's statistic, an ensemble without a POI all merge.
    #[test]
    fn undefined_figures_read_back() {
        let toy = ToyFit {
            index: 3,
            twice_nll: 1.5,
            poi: f64::NAN,
            converged: true,
            reason: None,
            second_start: None,
        };
        let e = ToyEnsemble::new(0, 4, vec![1.0], vec![toy]);
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains("\"poi\":null"), "{text}");
        let back: ToyEnsemble = serde_json::from_str(&text).unwrap();
        assert!(back.toys[0].poi.is_nan() && back.summary.poi_mean.is_nan());
        assert_eq!(back.toys[0].twice_nll, 1.5);
        let s = summarize(1.0, &[], &[], TestStat::QmuTilde);
        let back: ToySummary = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert!(back.cls_obs.is_nan() && back.cls_exp.iter().all(|v| v.is_nan()));
        let stat: ToyStat =
            serde_json::from_str(r#"{"index":1,"q":null,"converged":false}"#).unwrap();
        assert!(stat.q.is_nan());
    }
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    #[test]
    fn shards_under_different_second_start_rules_do_not_merge() {
        let n = PROBE_TOYS + 100;
        let with = |indices: std::ops::Range<u64>, second: bool| {
            let mut e = shard(indices, n);
            for t in &mut e.toys {
                t.second_start = second.then_some(0.0);
            }
            ToyEnsemble::new(e.seed, e.n_toys, e.gen_params, e.toys)
        };
        // Every toy with second starts (a model above 64 free parameters), or none: merged.
        for second in [true, false] {
            let ok = vec![with(0..PROBE_TOYS, second), with(PROBE_TOYS..n, second)];
            assert!(merge_toy_ensembles(ok, false).is_ok());
        }
        // The probe with second starts and the rest without (shards of histfit before s52),
        // and one shard outside the probe with second starts, one without.
        let before = vec![with(0..PROBE_TOYS, true), with(PROBE_TOYS..n, false)];
        let mixed = vec![
            with(0..PROBE_TOYS, true),
            with(PROBE_TOYS..PROBE_TOYS + 50, true),
            with(PROBE_TOYS + 50..n, false),
        ];
        for shards in [before, mixed] {
            let err = merge_toy_ensembles(shards, false).unwrap_err().to_string();
            assert!(err.contains("different second-start rules"), "{err}");
        }
        // Shards fitted with different numbers of asked starts.
        let asked = |indices: std::ops::Range<u64>, k: usize| {
            with(indices, true).with_starts(crate::fit::Starts::Count(k))
        };
        let same = vec![asked(0..PROBE_TOYS, 4), asked(PROBE_TOYS..n, 4)];
        let (whole, _) = merge_toy_ensembles(same, false).unwrap();
        assert_eq!(whole.starts, Some(4));
        let differ = vec![asked(0..PROBE_TOYS, 4), asked(PROBE_TOYS..n, 8)];
        let err = merge_toy_ensembles(differ, false).unwrap_err().to_string();
        assert!(err.contains("starts asked"), "{err}");
    }

    fn shard(indices: std::ops::Range<u64>, n_toys: u64) -> ToyEnsemble {
        let toys = indices
            .map(|index| ToyFit {
                index,
                twice_nll: index as f64,
                poi: 1.0,
                converged: true,
                reason: None,
                second_start: None,
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

#[cfg(test)]
mod hold_tests {
    use super::{hold_sets, FitOptions, MAX_HOLD_SETS};
    use histfit_seam::{ParameterSpace, Prior};

    /// The sets a toy is fitted with before release: the weak γs together (one width above the
    /// centre, then at their upper bounds), each free parameter but the POI alone at its upper
    /// bound; never a well-constrained, fixed, held or unbounded one, nor one whose hold would
    /// sit outside its range.
    #[test]
    fn hold_sets_follow_the_rule() {
        let names = ["mu", "norm", "weak", "firm", "held", "open", "weak_narrow"];
        let mut s = ParameterSpace::unconstrained(
            names.iter().map(|n| n.to_string()).collect(),
            vec![1.0; 7],
            vec![
                (0.0, 10.0),
                (0.0, 5.0),
                (0.0, 10.0),
                (0.0, 10.0),
                (0.0, 5.0),
                (0.0, f64::INFINITY),
                (0.0, 2.0),
            ],
            0,
        );
        s.priors[2] = Prior::Poisson {
            centre: 1.0,
            width: 4.15,
        };
        s.priors[3] = Prior::Poisson {
            centre: 1.0,
            width: 0.2,
        };
        s.priors[6] = Prior::Poisson {
            centre: 1.0,
            width: 3.0,
        };
        let o = FitOptions {
            fix: vec![(4, 1.0)],
            ..Default::default()
        };
        let sets = hold_sets(&s, &o);
        // "weak": 1 + 4.15 (below the midpoint 5.5 of centre and bound); "weak_narrow": its
        // 1 + 3 lies above its bound 2, so the midpoint 1.5
        assert_eq!(
            sets,
            vec![
                vec![(2, 5.15), (6, 1.5)],
                vec![(2, 10.0), (6, 2.0)],
                vec![(1, 5.0)],
            ]
        );
        let many = ParameterSpace::unconstrained(
            (0..20).map(|i| format!("n{i}")).collect(),
            vec![1.0; 20],
            vec![(0.0, 3.0); 20],
            0,
        );
        assert_eq!(
            hold_sets(&many, &FitOptions::default()).len(),
            MAX_HOLD_SETS
        );
        // per-bin γs of a shapefactor (each enters one bin's term) are not held
        let mut bins = ParameterSpace::unconstrained(
            (0..4).map(|i| format!("p{i}")).collect(),
            vec![1.0; 4],
            vec![(0.0, 10.0); 4],
            0,
        );
        bins.local_term[2] = Some(7);
        bins.local_term[3] = Some(8);
        assert_eq!(
            hold_sets(&bins, &FitOptions::default()),
            vec![vec![(1, 10.0)]]
        );
    }
}

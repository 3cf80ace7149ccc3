//! Many fits in lockstep on a [`BatchEvaluator`] (a GPU), without a thread per fit.
//!
//! Each fit is the ordinary fitting code ([`crate::fit::fit_async`], restarts and all) running as
//! a future whose evaluator is a [`BatchClient`]: an evaluation writes its request into the
//! client's slot and waits. A few worker threads (one per core) each own a share of the fits in
//! flight. One lockstep step: every worker hands back its results, polls its fits until each
//! waits for an evaluation or has finished (a finished fit is replaced by the next item at once),
//! and packs its requests; an evaluation thread concatenates the packs, evaluates them in one
//! batch call and splits the results back. Everything per fit (polling, packing, unpacking) runs
//! on the fit's own worker, in parallel, and two groups of fits take turns so that the device
//! evaluates one group while the cores advance the other. The optimizer work of all fits runs in
//! parallel on the cores, and there is one host round trip per step.
//!
//! A request is one evaluation, evaluations at several independent points, or descents a
//! batch evaluator runs whole ([`BatchEvaluator::descents_batch`]): a step is one evaluation
//! call and one descents call at most. With a second lane ([`Batcher::with_second_lane`]) the
//! two groups have an evaluation thread and an evaluator each and step at the same time: a step
//! of descents lasts as long as its slowest one, and the other group need not wait for it.

use crate::{InferError, Result};
use histfit_seam::{
    panic_message, AsyncEvaluator, BatchEvaluator, ComputeError, Dataset, Descent, DescentFuture,
    DescentRequest, EvalFuture, Evaluator, OneAtATime, ParameterSpace,
};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// A unit of lockstep work: a future over a [`BatchClient`] (or any evaluator).
pub type Job<'e, T> = Pin<Box<dyn Future<Output = Result<T>> + 'e>>;
/// The evaluator handed to a job.
pub type EvalBox<'e> = Box<dyn AsyncEvaluator + 'e>;

/// Pools the evaluations of many concurrent fits into batch calls.
pub struct Batcher<B: BatchEvaluator> {
    eval: Mutex<B>,
    /// A second evaluator of the same likelihood (a device's second stream): the two groups
    /// of [`drive`] then take their steps at the same time, each on its own, where one group's
    /// step (a launch of descents waits for its slowest) would otherwise hold up the other's.
    second: Option<Mutex<B>>,
    space: Arc<ParameterSpace>,
    stats: Mutex<BatchStats>,
    /// The fits hand their descents to the batch evaluator whole
    /// ([`BatchEvaluator::offers_descents`]; `HISTFIT_GPU_DESCENTS=host` keeps them on the host,
    /// one batch per step, for comparisons).
    descents: bool,
    /// And settles those that ask for it ([`BatchEvaluator::finishes_descents`];
    /// `HISTFIT_GPU_DESCENTS=unsettled` makes the fits settle them themselves, for comparisons).
    settles: bool,
    /// Host evaluators kept for refits ([`Batcher::lend_host`]): as many as have been in use at
    /// once, not one per refit.
    hosts: HostStock,
}

/// The host evaluators a [`Batcher`] keeps.
type HostStock = Arc<Mutex<Vec<Box<dyn Evaluator + Send>>>>;

/// A host evaluator lent by [`Batcher::lend_host`], given back to its stock when dropped.
pub struct Lent {
    ev: Option<Box<dyn Evaluator + Send>>,
    stock: HostStock,
}

impl std::ops::Deref for Lent {
    type Target = dyn Evaluator + Send;
    fn deref(&self) -> &Self::Target {
        self.ev.as_deref().expect("lent until dropped")
    }
}

impl std::ops::DerefMut for Lent {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.ev.as_deref_mut().expect("lent until dropped")
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(ev) = self.ev.take() {
            lock(&self.stock).push(ev);
        }
    }
}

/// Counts of a batched run: launches, problems evaluated (their ratio is the mean batch), and the
/// seconds spent in the batch evaluator and in leading steps (gathering, evaluating, handing back);
/// descents run whole by the evaluator, their launches and seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BatchStats {
    pub launches: u64,
    pub problems: u64,
    pub seconds_eval: f64,
    pub seconds_lead: f64,
    pub descents: u64,
    pub descent_launches: u64,
    pub seconds_descents: f64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<B: BatchEvaluator> Batcher<B> {
    pub fn new(eval: B) -> Batcher<B> {
        let space = Arc::new(eval.space().clone());
        let how = std::env::var("HISTFIT_GPU_DESCENTS").unwrap_or_default();
        let descents = eval.offers_descents() && how != "host";
        Batcher {
            descents,
            settles: descents && eval.finishes_descents() && how != "unsettled",
            eval: Mutex::new(eval),
            second: None,
            space,
            stats: Mutex::new(BatchStats::default()),
            hosts: HostStock::default(),
        }
    }

    /// A host evaluator ([`BatchEvaluator::host_evaluator`]) lent from the batcher's stock, or
    /// a new one where the stock is empty (made under the evaluator's lock: after the launch
    /// that holds it, if any); given back to the stock when dropped. `None` where the batch
    /// evaluator has no host evaluator.
    pub fn lend_host(&self) -> Option<Lent> {
        let ev = lock(&self.hosts)
            .pop()
            .or_else(|| self.with_eval(|b| b.host_evaluator()))?;
        Some(Lent {
            ev: Some(ev),
            stock: self.hosts.clone(),
        })
    }

    /// Tops the stock of host evaluators up to `n` from `b` (the evaluator, locked by the
    /// caller anyway): the refits of a launch's toys, beside the next launch, then take theirs
    /// without waiting for it.
    pub fn stock_hosts(&self, b: &B, n: usize) {
        let mut stock = lock(&self.hosts);
        while stock.len() < n {
            match b.host_evaluator() {
                Some(e) => stock.push(e),
                None => break,
            }
        }
    }

    /// With the evaluator settling the descents that ask for it (where it can) or not (`false`:
    /// the fits settle them themselves, as under `HISTFIT_GPU_DESCENTS=unsettled`; for
    /// comparisons). This overrides that setting. Fits reach the same minima either way.
    pub fn settling(mut self, on: bool) -> Self {
        self.settles = on && self.descents && lock(&self.eval).finishes_descents();
        self
    }

    pub fn space(&self) -> &ParameterSpace {
        &self.space
    }

    /// With `other` (an evaluator of the same likelihood) as the second lane of [`drive`]'s
    /// steps. Results do not change: every problem's evaluation and every descent is the same
    /// whichever evaluator makes it.
    pub fn with_second_lane(mut self, other: B) -> Self {
        self.second = Some(Mutex::new(other));
        self
    }

    /// The evaluator of lane `lane` (0, or 1 where there is a second).
    fn lane(&self, lane: usize) -> &Mutex<B> {
        match (lane, &self.second) {
            (1, Some(second)) => second,
            _ => &self.eval,
        }
    }

    /// Exclusive access to the underlying evaluator.
    pub fn with_eval<T>(&self, f: impl FnOnce(&mut B) -> T) -> T {
        f(&mut lock(&self.eval))
    }

    pub fn stats(&self) -> BatchStats {
        *lock(&self.stats)
    }

    /// A synchronous evaluator over the batch evaluator, one problem per call (for the one-off
    /// fits around an ensemble).
    pub fn solo(&self) -> Solo<'_, B> {
        Solo { batcher: self }
    }

    /// Evaluates every worker's waiting requests in one batch call; each worker's results go
    /// back into its own share. Returns whether there was anything to evaluate.
    fn lead(&self, shares: &[Mutex<Share>], lane: usize) -> bool {
        let started = std::time::Instant::now();
        let n = self.space.len();
        let mut guards: Vec<MutexGuard<'_, Share>> = shares.iter().map(lock).collect();
        let b: usize = guards.iter().map(|g| g.data.len()).sum();
        let runs: usize = guards.iter().map(|g| g.descents.len()).sum();
        if b == 0 && runs == 0 {
            return false;
        }
        if runs > 0 {
            self.lead_descents(&mut guards, runs, lane);
        }
        if b == 0 {
            lock(&self.stats).seconds_lead += started.elapsed().as_secs_f64();
            return true;
        }
        let mut params = Vec::with_capacity(b * n);
        let mut data = Vec::with_capacity(b);
        for g in &guards {
            params.extend_from_slice(&g.params);
            data.extend(g.data.iter().cloned());
        }
        let (mut nll, mut grad) = (vec![0.0; b], vec![0.0; b * n]);
        let t_eval = std::time::Instant::now();
        let outcome =
            lock(self.lane(lane)).nll_grad_batch_shared(&params, &data, &mut nll, &mut grad);
        let seconds_eval = t_eval.elapsed().as_secs_f64();
        let mut at = 0;
        for g in guards.iter_mut() {
            let m = g.data.len();
            match &outcome {
                Ok(()) => {
                    g.error = None;
                    g.nll.clear();
                    g.nll.extend_from_slice(&nll[at..at + m]);
                    g.grad.clear();
                    g.grad.extend_from_slice(&grad[at * n..(at + m) * n]);
                }
                Err(e) => g.error = Some(e.clone()),
            }
            at += m;
        }
        let mut s = lock(&self.stats);
        s.launches += 1;
        s.problems += b as u64;
        s.seconds_eval += seconds_eval;
        s.seconds_lead += started.elapsed().as_secs_f64();
        true
    }

    /// Runs every worker's waiting descents in one call; each worker's go back into its share.
    fn lead_descents(&self, guards: &mut [MutexGuard<'_, Share>], runs: usize, lane: usize) {
        let mut reqs = Vec::with_capacity(runs);
        let mut data = Vec::with_capacity(runs);
        for g in guards.iter_mut() {
            reqs.append(&mut g.descents);
            data.append(&mut g.descent_data);
        }
        let t = std::time::Instant::now();
        let outcome = lock(self.lane(lane)).descents_batch(&reqs, &data);
        let outcome = match outcome {
            Ok(v) if v.len() != runs => Err(ComputeError::Device(format!(
                "the batch evaluator returned {} descents for {runs}",
                v.len()
            ))),
            other => other,
        };
        let seconds = t.elapsed().as_secs_f64();
        match outcome {
            Ok(v) => {
                let mut it = v.into_iter();
                for g in guards.iter_mut() {
                    let m = g.descent_counts.iter().sum();
                    g.descent_out = Ok(it.by_ref().take(m).collect());
                }
            }
            Err(e) => {
                for g in guards.iter_mut() {
                    g.descent_out = Err(e.clone());
                }
            }
        }
        let mut s = lock(&self.stats);
        s.descents += runs as u64;
        s.descent_launches += 1;
        s.seconds_descents += seconds;
    }
}

/// One worker's part of a step: its requests, then their results (filled by the leader).
struct Share {
    params: Vec<f64>,
    data: Vec<Arc<Dataset>>,
    nll: Vec<f64>,
    grad: Vec<f64>,
    error: Option<ComputeError>,
    /// Descents asked for (all of the share's waiting fits', in order), their datasets, how many
    /// each of those fits asked for, and then their results.
    descents: Vec<DescentRequest>,
    descent_data: Vec<Arc<Dataset>>,
    descent_counts: Vec<usize>,
    descent_out: histfit_seam::Result<Vec<Descent>>,
}

impl Default for Share {
    fn default() -> Self {
        Share {
            params: Vec::new(),
            data: Vec::new(),
            nll: Vec::new(),
            grad: Vec::new(),
            error: None,
            descents: Vec::new(),
            descent_data: Vec::new(),
            descent_counts: Vec::new(),
            descent_out: Ok(Vec::new()),
        }
    }
}

/// A request and its result, shared by a client and the worker thread that owns it.
#[derive(Default)]
struct SlotData {
    params: Vec<f64>,
    /// The dataset of the request (kept between requests: a fit evaluates one dataset many times).
    data: Option<Arc<Dataset>>,
    waiting: bool,
    result: Option<histfit_seam::Result<f64>>,
    grad: Vec<f64>,
    /// The datasets this fit has sent, each once: a fit moves among a few (its own and the
    /// copies with wider empty-bin walls of its first descents, see
    /// `histfit_seam::SOFT_EMPTY_BIN_WALLS`); the same `Arc` again lets a device evaluator
    /// find its row by pointer instead of storing and uploading another.
    known: Vec<Arc<Dataset>>,
    /// The number of points of an evaluation at several ([`AsyncEvaluator::nll_grad_many`]:
    /// `params` holds them all, `grad` gets all their gradients, `nlls` their values), 0 for one.
    many: usize,
    nlls: Vec<f64>,
    /// Descents asked for in place of an evaluation (`waiting` is set too), and their results.
    descents: Vec<DescentRequest>,
    descent_result: Option<histfit_seam::Result<Vec<Descent>>>,
}

type Slot = Rc<RefCell<SlotData>>;

/// One fit's evaluator: its requests join the next batch.
pub struct BatchClient {
    space: Arc<ParameterSpace>,
    slot: Slot,
    /// The batch evaluator runs descents whole ([`Batcher::descents`]), and settles them.
    descents: bool,
    settles: bool,
    /// The executor takes evaluations at several points as one request ([`drive`]'s does;
    /// [`fit_together`]'s takes one point per fit and step).
    pooled: bool,
}

/// Resolves once the slot's result has been written back.
struct Answer<'a>(&'a Slot);

impl Future for Answer<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        let s = self.0.borrow();
        if s.result.is_some() || s.descent_result.is_some() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl BatchClient {
    /// The dataset of the next request, by the `Arc` this fit has sent before where it has.
    fn set_data(s: &mut SlotData, data: &Dataset) {
        // (Equality includes the empty-bin wall: a dataset with another wall is another
        // request.)
        if s.data.as_deref() != Some(data) {
            let known = s.known.iter().find(|d| ***d == *data).cloned();
            let arc = known.unwrap_or_else(|| {
                let a = Arc::new(data.clone());
                if s.known.len() == 4 {
                    s.known.remove(0);
                }
                s.known.push(a.clone());
                a
            });
            s.data = Some(arc);
        }
    }

    async fn run_descents(
        &self,
        reqs: &[DescentRequest],
        data: &Dataset,
    ) -> histfit_seam::Result<Vec<Descent>> {
        if reqs.is_empty() {
            return Ok(Vec::new());
        }
        {
            let mut s = self.slot.borrow_mut();
            Self::set_data(&mut s, data);
            s.descents = reqs.to_vec();
            s.descent_result = None;
            s.waiting = true;
        }
        Answer(&self.slot).await;
        let r = self.slot.borrow_mut().descent_result.take();
        r.expect("Answer resolved")
    }

    /// −ln L and the gradients at the points of `params` (see
    /// [`AsyncEvaluator::nll_grad_many`]) as one request.
    async fn request_many(
        &self,
        params: &[f64],
        data: &Dataset,
        nll: &mut [f64],
        grad: Option<&mut [f64]>,
    ) -> histfit_seam::Result<()> {
        {
            let mut s = self.slot.borrow_mut();
            s.params.clear();
            s.params.extend_from_slice(params);
            Self::set_data(&mut s, data);
            s.many = nll.len();
            s.result = None;
            s.waiting = true;
        }
        Answer(&self.slot).await;
        let mut s = self.slot.borrow_mut();
        s.many = 0;
        s.result.take().expect("Answer resolved")?;
        nll.copy_from_slice(&s.nlls);
        if let Some(g) = grad {
            if g.len() != s.grad.len() {
                return Err(ComputeError::Length {
                    what: "gradients",
                    expected: s.grad.len(),
                    got: g.len(),
                });
            }
            g.copy_from_slice(&s.grad);
        }
        Ok(())
    }

    async fn request(
        &self,
        params: &[f64],
        data: &Dataset,
        grad: Option<&mut [f64]>,
    ) -> histfit_seam::Result<f64> {
        {
            let mut s = self.slot.borrow_mut();
            s.params.clear();
            s.params.extend_from_slice(params);
            Self::set_data(&mut s, data);
            s.many = 0;
            s.result = None;
            s.waiting = true;
        }
        Answer(&self.slot).await;
        let mut s = self.slot.borrow_mut();
        let r = s.result.take().expect("Answer resolved");
        if let (Some(g), Ok(_)) = (grad, &r) {
            if g.len() != s.grad.len() {
                return Err(ComputeError::Length {
                    what: "gradient",
                    expected: s.grad.len(),
                    got: g.len(),
                });
            }
            g.copy_from_slice(&s.grad);
        }
        r
    }
}

impl AsyncEvaluator for BatchClient {
    fn space(&self) -> &ParameterSpace {
        &self.space
    }
    fn nll_grad<'a>(
        &'a mut self,
        params: &'a [f64],
        data: &'a Dataset,
        grad: &'a mut [f64],
    ) -> EvalFuture<'a> {
        Box::pin(self.request(params, data, Some(grad)))
    }
    fn nll<'a>(&'a mut self, params: &'a [f64], data: &'a Dataset) -> EvalFuture<'a> {
        Box::pin(self.request(params, data, None))
    }
    fn nll_grad_many<'a>(
        &'a mut self,
        params: &'a [f64],
        data: &'a Dataset,
        nll: &'a mut [f64],
        grad: &'a mut [f64],
    ) -> histfit_seam::ManyFuture<'a> {
        if !self.pooled || nll.len() < 2 {
            return Box::pin(async move {
                let n = self.space.len();
                for (k, v) in nll.iter_mut().enumerate() {
                    let p = &params[k * n..(k + 1) * n];
                    *v = self
                        .request(p, data, Some(&mut grad[k * n..(k + 1) * n]))
                        .await?;
                }
                Ok(())
            });
        }
        Box::pin(self.request_many(params, data, nll, Some(grad)))
    }
    fn nll_many<'a>(
        &'a mut self,
        params: &'a [f64],
        data: &'a Dataset,
        nll: &'a mut [f64],
    ) -> histfit_seam::ManyFuture<'a> {
        if !self.pooled || nll.len() < 2 {
            return Box::pin(async move {
                let n = self.space.len();
                for (k, v) in nll.iter_mut().enumerate() {
                    *v = self
                        .request(&params[k * n..(k + 1) * n], data, None)
                        .await?;
                }
                Ok(())
            });
        }
        Box::pin(self.request_many(params, data, nll, None))
    }
    fn offers_descents(&self) -> bool {
        self.descents
    }
    fn finishes_descents(&self) -> bool {
        self.settles
    }
    fn descents<'a>(
        &'a mut self,
        reqs: &'a [DescentRequest],
        data: &'a Dataset,
    ) -> DescentFuture<'a> {
        Box::pin(self.run_descents(reqs, data))
    }
}

/// A synchronous single-problem evaluator over a [`Batcher`]'s batch evaluator.
pub struct Solo<'a, B: BatchEvaluator> {
    batcher: &'a Batcher<B>,
}

impl<B: BatchEvaluator> Solo<'_, B> {
    /// `f` on the batch evaluator; a panic there is an error, as in the lockstep executor.
    fn call<T>(
        &self,
        f: impl FnOnce(&mut B) -> histfit_seam::Result<T>,
    ) -> histfit_seam::Result<T> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.batcher.with_eval(f)))
            .unwrap_or_else(|e| {
                Err(ComputeError::Device(format!(
                    "the batch evaluator panicked: {}",
                    panic_message(&*e)
                )))
            })
    }
}

impl<B: BatchEvaluator> Evaluator for Solo<'_, B> {
    fn space(&self) -> &ParameterSpace {
        &self.batcher.space
    }
    fn nll(&mut self, params: &[f64], data: &Dataset) -> histfit_seam::Result<f64> {
        let mut g = vec![0.0; params.len()];
        self.nll_grad(params, data, &mut g)
    }
    fn nll_grad(
        &mut self,
        params: &[f64],
        data: &Dataset,
        grad: &mut [f64],
    ) -> histfit_seam::Result<f64> {
        let mut v = [0.0];
        self.call(|b| b.nll_grad_batch(params, &[data], &mut v, grad))?;
        Ok(v[0])
    }
    fn asimov(&mut self, params: &[f64]) -> histfit_seam::Result<Dataset> {
        self.call(|b| b.asimov(params))
    }
    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_seam::Result<Vec<Dataset>> {
        self.call(|b| b.toys(params, seed, indices))
    }
    fn expected_main(&mut self, params: &[f64], out: &mut [f64]) -> histfit_seam::Result<()> {
        self.call(|b| b.expected_main_batch(params, out))
    }
}

/// Fits of one dataset run together on this thread, the evaluations of every fit still running
/// made in one batch call per step: on a device, k fits cost about the launches of the longest
/// instead of their sum. Each fit sees exactly the evaluations it would see alone, so the results
/// equal separate fits.
pub fn fit_together<B: BatchEvaluator + ?Sized>(
    eval: &mut B,
    data: &Dataset,
    opts: &[crate::FitOptions],
) -> Result<Vec<crate::FitResult>> {
    let space = Arc::new(eval.space().clone());
    let n = space.len();
    // The batch is evaluated here, not through the fits' own requests: the fits and the batch
    // both take the dataset without its constant (see `fit_async`), added to the results after.
    let constant = data.constant_term();
    let varying = data.without_constant();
    let data = &varying;
    let slots: Vec<Slot> = opts.iter().map(|_| Slot::default()).collect();
    let mut jobs: Vec<Option<Job<'_, crate::FitResult>>> = opts
        .iter()
        .zip(&slots)
        .map(|(o, slot)| {
            let mut client = BatchClient {
                space: space.clone(),
                slot: slot.clone(),
                descents: false,
                settles: false,
                pooled: false,
            };
            let job: Job<'_, crate::FitResult> =
                Box::pin(async move { crate::fit::minimise_async(&mut client, data, o).await });
            Some(job)
        })
        .collect();
    let mut done: Vec<Option<Result<crate::FitResult>>> = opts.iter().map(|_| None).collect();
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        let mut waiting = Vec::with_capacity(jobs.len());
        for (i, job) in jobs.iter_mut().enumerate() {
            if let Some(j) = job {
                match poll_job(j, &mut cx) {
                    Poll::Ready(r) => {
                        done[i] = Some(r);
                        *job = None;
                    }
                    Poll::Pending => waiting.push(i),
                }
            }
        }
        if waiting.is_empty() {
            break;
        }
        let mut params = Vec::with_capacity(waiting.len() * n);
        for &i in &waiting {
            params.extend_from_slice(&slots[i].borrow().params);
        }
        let refs = vec![data; waiting.len()];
        let (mut nll, mut grad) = (vec![0.0; waiting.len()], vec![0.0; waiting.len() * n]);
        let outcome = eval.nll_grad_batch(&params, &refs, &mut nll, &mut grad);
        for (k, &i) in waiting.iter().enumerate() {
            let mut s = slots[i].borrow_mut();
            s.waiting = false;
            s.result = Some(match &outcome {
                Ok(()) => {
                    s.grad.clear();
                    s.grad.extend_from_slice(&grad[k * n..(k + 1) * n]);
                    Ok(nll[k])
                }
                Err(e) => Err(e.clone()),
            });
        }
    }
    done.into_iter()
        .map(|r| {
            let mut r = r.expect("every fit ran to its end")?;
            r.twice_nll += 2.0 * constant;
            Ok(r)
        })
        .collect()
}

/// Polls a job once; a panic inside it becomes that job's error (a worker that unwound would
/// leave the others waiting at the barrier forever).
fn poll_job<T>(job: &mut Job<'_, T>, cx: &mut Context<'_>) -> Poll<Result<T>> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.as_mut().poll(cx))) {
        Ok(p) => p,
        Err(e) => Poll::Ready(Err(panic_error(e))),
    }
}

/// The error a caught panic of a job becomes.
fn panic_error(e: Box<dyn std::any::Any + Send>) -> InferError {
    let what = panic_message(&*e);
    InferError::Request(format!("a fit panicked in the lockstep executor: {what}"))
}

/// What a waiting fit asked for in a step: evaluations at this many points, or this many
/// descents.
#[derive(Clone, Copy)]
enum Asked {
    Points(usize),
    Descents(usize),
}

/// Progress of the evaluation thread: per group, batches requested and completed.
#[derive(Default)]
struct Pipeline {
    requested: [u64; 2],
    completed: [u64; 2],
    quit: bool,
}

/// Runs `make(client, k)` for k in 0..n in lockstep on `batcher`, about `window` jobs in flight
/// (at least one per worker and group), on one worker thread per core; results in order of k.
///
/// The jobs form two groups that take turns: while the device evaluates one group's batch (on
/// a thread of its own), the workers hand back the other group's results and advance its fits.
/// The device and the cores thus work at the same time instead of waiting for each other.
pub fn drive<'w, B, T>(
    batcher: &Batcher<B>,
    n: usize,
    window: usize,
    make: &'w (dyn Fn(BatchClient, usize) -> Job<'w, T> + Sync),
) -> Result<Vec<T>>
where
    B: BatchEvaluator,
    T: Send,
{
    // A core stays with each evaluation thread (one per lane), which must not wait for a time
    // slice.
    let lanes = if batcher.second.is_some() { 2 } else { 1 };
    let workers = std::thread::available_parallelism()
        .map(|c| c.get())
        .unwrap_or(1)
        .saturating_sub(lanes)
        .clamp(1, n.max(1));
    // Spread the fits in flight evenly over workers and the two groups: a small ensemble still
    // keeps every core busy.
    let per_group = window.clamp(2, n.max(2)).div_ceil(2 * workers).max(1);
    let next = AtomicUsize::new(0);
    let in_flight = AtomicUsize::new(0);
    let finished = AtomicBool::new(false);
    let results: Mutex<Vec<(usize, Result<T>)>> = Mutex::new(Vec::with_capacity(n));
    let shares: [Vec<Mutex<Share>>; 2] =
        std::array::from_fn(|_| (0..workers).map(|_| Mutex::new(Share::default())).collect());
    let barrier = Barrier::new(workers);
    let pipeline = Mutex::new(Pipeline::default());
    let signal = std::sync::Condvar::new();
    let n_params = batcher.space.len();
    // `HISTFIT_TIMING`: the steps and their time, once the jobs are done.
    let timing = std::env::var_os("HISTFIT_TIMING").map(|_| std::time::Instant::now());
    let stats0 = batcher.stats();
    std::thread::scope(|scope| {
        // The evaluation thread: one batch call per request, in order, the groups' in turn;
        // with a second lane, one thread per group, each on its own evaluator.
        for lane in 0..lanes {
            let (shares, pipeline, signal) = (&shares, &pipeline, &signal);
            scope.spawn(move || {
                let mut g = lane;
                loop {
                    {
                        let mut p = lock(pipeline);
                        while p.requested[g] == p.completed[g] && !p.quit {
                            p = signal.wait(p).unwrap_or_else(|e| e.into_inner());
                        }
                        if p.requested[g] == p.completed[g] {
                            return;
                        }
                    }
                    // A panicking batch evaluator must not leave the workers waiting forever:
                    // its requests fail with an error instead.
                    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        batcher.lead(&shares[g], lane);
                    }))
                    .is_err()
                    {
                        for sh in &shares[g] {
                            let mut sh = lock(sh);
                            let e = ComputeError::Device("the batch evaluator panicked".into());
                            sh.descent_out = Err(e.clone());
                            sh.error = Some(e);
                        }
                    }
                    lock(pipeline).completed[g] += 1;
                    signal.notify_all();
                    if lanes == 1 {
                        g ^= 1;
                    }
                }
            });
        }
        for w in 0..workers {
            let (next, in_flight, finished, results, shares, barrier, pipeline, signal) = (
                &next, &in_flight, &finished, &results, &shares, &barrier, &pipeline, &signal,
            );
            scope.spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                let mut active: [Vec<(usize, Slot, Job<'w, T>)>; 2] = [Vec::new(), Vec::new()];
                // Each waiting fit, with what it asked for.
                let mut waiting: [Vec<(Slot, Asked)>; 2] = [Vec::new(), Vec::new()];
                let mut done: Vec<(usize, Result<T>)> = Vec::new();
                let mut g = 0;
                loop {
                    // This group's last batch must be back before its fits go on.
                    {
                        let mut p = lock(pipeline);
                        while p.completed[g] < p.requested[g] {
                            p = signal.wait(p).unwrap_or_else(|e| e.into_inner());
                        }
                    }
                    if !waiting[g].is_empty() {
                        let mut share = lock(&shares[g][w]);
                        let out = std::mem::replace(&mut share.descent_out, Ok(Vec::new()));
                        let mut runs = out.map(|v| v.into_iter());
                        let mut k = 0;
                        for (slot, asked) in &waiting[g] {
                            let mut s = slot.borrow_mut();
                            s.waiting = false;
                            let points = match *asked {
                                Asked::Descents(count) => {
                                    s.descent_result = Some(match &mut runs {
                                        Ok(it) => Ok(it.by_ref().take(count).collect()),
                                        Err(e) => Err(e.clone()),
                                    });
                                    continue;
                                }
                                Asked::Points(points) => points,
                            };
                            s.result = Some(match &share.error {
                                None => {
                                    let (a, b) = (k, k + points);
                                    s.grad.clear();
                                    s.grad
                                        .extend_from_slice(&share.grad[a * n_params..b * n_params]);
                                    s.nlls.clear();
                                    s.nlls.extend_from_slice(&share.nll[a..b]);
                                    Ok(share.nll[a])
                                }
                                Some(e) => Err(e.clone()),
                            });
                            k += points;
                        }
                        share.descent_counts.clear();
                    }
                    // Advance the group's fits to their next evaluation (or end); refill.
                    let mut keep = Vec::with_capacity(active[g].len());
                    for (k, slot, mut job) in active[g].drain(..) {
                        match poll_job(&mut job, &mut cx) {
                            Poll::Ready(r) => {
                                in_flight.fetch_sub(1, Ordering::Relaxed);
                                // A destructor that panics must not unwind this worker either.
                                let dropped = std::panic::catch_unwind(
                                    std::panic::AssertUnwindSafe(move || drop(job)),
                                );
                                done.push((k, dropped.map_err(panic_error).and(r)));
                            }
                            Poll::Pending => keep.push((k, slot, job)),
                        }
                    }
                    active[g] = keep;
                    while active[g].len() < per_group {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= n {
                            break;
                        }
                        let slot: Slot = Rc::new(RefCell::new(SlotData::default()));
                        let client = BatchClient {
                            space: batcher.space.clone(),
                            slot: slot.clone(),
                            descents: batcher.descents,
                            settles: batcher.settles,
                            pooled: true,
                        };
                        let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            make(client, k)
                        }));
                        let mut job = match made {
                            Ok(job) => job,
                            Err(e) => {
                                done.push((k, Err(panic_error(e))));
                                continue;
                            }
                        };
                        match poll_job(&mut job, &mut cx) {
                            Poll::Ready(r) => done.push((k, r)),
                            Poll::Pending => {
                                in_flight.fetch_add(1, Ordering::Relaxed);
                                active[g].push((k, slot, job));
                            }
                        }
                    }
                    if !done.is_empty() {
                        lock(results).append(&mut done);
                    }
                    // Publish the group's requests.
                    waiting[g].clear();
                    {
                        let mut share = lock(&shares[g][w]);
                        let share = &mut *share;
                        share.params.clear();
                        share.data.clear();
                        for (_, slot, _) in &active[g] {
                            let mut s = slot.borrow_mut();
                            if !s.waiting {
                                continue;
                            }
                            let data = s.data.clone().expect("a waiting request has data");
                            if s.descents.is_empty() {
                                let points = s.many.max(1);
                                share.params.extend_from_slice(&s.params);
                                share.data.extend((0..points).map(|_| data.clone()));
                                waiting[g].push((slot.clone(), Asked::Points(points)));
                            } else {
                                let count = s.descents.len();
                                share.descents.append(&mut s.descents);
                                share.descent_data.extend((0..count).map(|_| data.clone()));
                                share.descent_counts.push(count);
                                waiting[g].push((slot.clone(), Asked::Descents(count)));
                            }
                        }
                    }
                    barrier.wait();
                    if w == 0 {
                        if in_flight.load(Ordering::Relaxed) == 0
                            && next.load(Ordering::Relaxed) >= n
                        {
                            finished.store(true, Ordering::Release);
                            lock(pipeline).quit = true;
                        } else {
                            lock(pipeline).requested[g] += 1;
                        }
                        signal.notify_all();
                    }
                    barrier.wait();
                    if finished.load(Ordering::Acquire) {
                        break;
                    }
                    g ^= 1;
                }
            });
        }
    });
    if let Some(t0) = timing {
        let (a, b) = (stats0, batcher.stats());
        eprintln!(
            "timing: lockstep, {n} jobs in {:.3} s ({:.3} s leading steps): {} evaluation \
             launches ({} problems, {:.3} s in the evaluator), {} descent launches ({} \
             descents, {:.3} s)",
            t0.elapsed().as_secs_f64(),
            b.seconds_lead - a.seconds_lead,
            b.launches - a.launches,
            b.problems - a.problems,
            b.seconds_eval - a.seconds_eval,
            b.descent_launches - a.descent_launches,
            b.descents - a.descents,
            b.seconds_descents - a.seconds_descents
        );
    }
    let mut r = results.into_inner().unwrap_or_else(|p| p.into_inner());
    if r.len() != n {
        return Err(InferError::Request(format!(
            "lockstep run ended with {} of {n} results",
            r.len()
        )));
    }
    r.sort_by_key(|(k, _)| *k);
    r.into_iter().map(|(_, v)| v).collect()
}

/// A batch evaluator whose descents ([`BatchEvaluator::descents_batch`]) are made on the host,
/// step by step, over the evaluations of the one it wraps: the reference a device's descents are
/// compared with, and how the lockstep executor's descent requests are tested without a device.
pub struct HostDescents<B: BatchEvaluator>(OneAtATime<B>);

impl<B: BatchEvaluator> HostDescents<B> {
    pub fn new(batch: B) -> Self {
        HostDescents(OneAtATime { batch })
    }
}

impl<B: BatchEvaluator> BatchEvaluator for HostDescents<B> {
    fn space(&self) -> &ParameterSpace {
        self.0.batch.space()
    }
    fn nll_grad_batch(
        &mut self,
        params: &[f64],
        data: &[&Dataset],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> histfit_seam::Result<()> {
        self.0.batch.nll_grad_batch(params, data, nll, grad)
    }
    fn asimov(&mut self, params: &[f64]) -> histfit_seam::Result<Dataset> {
        self.0.batch.asimov(params)
    }
    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_seam::Result<Vec<Dataset>> {
        self.0.batch.toys(params, seed, indices)
    }
    fn expected_main_batch(&mut self, params: &[f64], out: &mut [f64]) -> histfit_seam::Result<()> {
        self.0.batch.expected_main_batch(params, out)
    }
    fn host_evaluator(&self) -> Option<Box<dyn Evaluator + Send>> {
        self.0.batch.host_evaluator()
    }
    fn offers_descents(&self) -> bool {
        true
    }
    fn descents_batch(
        &mut self,
        reqs: &[DescentRequest],
        data: &[Arc<Dataset>],
    ) -> histfit_seam::Result<Vec<Descent>> {
        let mut one = histfit_seam::Blocking(&mut self.0);
        reqs.iter()
            .zip(data)
            .map(|(r, d)| {
                histfit_seam::block_on(crate::fit::descent_on_host(&mut one, d, r)).map_err(|e| {
                    match e {
                        InferError::Compute(c) => c,
                        other => ComputeError::Device(other.to_string()),
                    }
                })
            })
            .collect()
    }
}

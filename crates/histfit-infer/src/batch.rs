//! Many fits in lockstep on a [`BatchEvaluator`] (a GPU), without a thread per fit.
//!
//! Each fit is the ordinary fitting code ([`crate::fit::fit_async`], restarts and all) running as
//! a future whose evaluator is a [`BatchClient`]: an evaluation writes its request into the
//! client's slot and waits. A few worker threads (one per core) each own a share of the fits in
//! flight. One lockstep step: every worker polls its fits until each waits for an evaluation or
//! has finished (a finished fit is replaced by the next item at once); at a barrier one worker
//! evaluates all waiting requests in one batch call and writes the results back; at a second
//! barrier the step ends. The optimizer work of all fits runs in parallel on the cores, the
//! device sees one launch per step, and there is one host round trip per step.

use crate::{InferError, Result};
use histfit_compute::{
    AsyncEvaluator, BatchEvaluator, ComputeError, Dataset, EvalFuture, Evaluator,
};
use histfit_model::Model;
use std::future::Future;
use std::pin::Pin;
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
    model: Arc<Model>,
    stats: Mutex<BatchStats>,
}

/// Counts of a batched run: launches, problems evaluated (their ratio is the mean batch), and the
/// seconds spent in the batch evaluator and in leading steps (gathering, evaluating, handing back).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BatchStats {
    pub launches: u64,
    pub problems: u64,
    pub seconds_eval: f64,
    pub seconds_lead: f64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<B: BatchEvaluator> Batcher<B> {
    pub fn new(eval: B) -> Batcher<B> {
        let model = Arc::new(eval.model().clone());
        Batcher {
            eval: Mutex::new(eval),
            model,
            stats: Mutex::new(BatchStats::default()),
        }
    }

    pub fn model(&self) -> &Model {
        &self.model
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

    /// Evaluates the waiting requests of `slots` in one batch call and hands back the results.
    fn lead(&self, slots: &[Slot]) {
        let started = std::time::Instant::now();
        let n = self.model.n_params();
        let mut guards: Vec<MutexGuard<'_, SlotData>> = slots.iter().map(|s| lock(s)).collect();
        let b = guards.len();
        let mut params = Vec::with_capacity(b * n);
        for g in &guards {
            params.extend_from_slice(&g.params);
        }
        let (mut nll, mut grad) = (vec![0.0; b], vec![0.0; b * n]);
        let t_eval = std::time::Instant::now();
        let outcome = {
            let data: Vec<&Dataset> = guards
                .iter()
                .map(|g| g.data.as_ref().expect("a waiting request has data"))
                .collect();
            lock(&self.eval).nll_grad_batch(&params, &data, &mut nll, &mut grad)
        };
        let seconds_eval = t_eval.elapsed().as_secs_f64();
        for (k, g) in guards.iter_mut().enumerate() {
            g.waiting = false;
            g.result = Some(match &outcome {
                Ok(()) => {
                    g.grad.clear();
                    g.grad.extend_from_slice(&grad[k * n..(k + 1) * n]);
                    Ok(nll[k])
                }
                Err(e) => Err(e.to_string()),
            });
        }
        let mut s = lock(&self.stats);
        s.launches += 1;
        s.problems += b as u64;
        s.seconds_eval += seconds_eval;
        s.seconds_lead += started.elapsed().as_secs_f64();
    }
}

/// A request and its result, shared by a client and the step leader (never at the same time:
/// the barrier separates them).
#[derive(Default)]
struct SlotData {
    params: Vec<f64>,
    /// The dataset of the request (kept between requests: a fit evaluates one dataset many times).
    data: Option<Dataset>,
    waiting: bool,
    result: Option<std::result::Result<f64, String>>,
    grad: Vec<f64>,
}

type Slot = Arc<Mutex<SlotData>>;

/// One fit's evaluator: its requests join the next batch.
pub struct BatchClient {
    model: Arc<Model>,
    slot: Slot,
}

/// Resolves once the leader has written the slot's result.
struct Answer<'a>(&'a Slot);

impl Future for Answer<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if lock(self.0).result.is_some() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl BatchClient {
    async fn request(
        &self,
        params: &[f64],
        data: &Dataset,
        grad: Option<&mut [f64]>,
    ) -> histfit_compute::Result<f64> {
        {
            let mut s = lock(&self.slot);
            s.params.clear();
            s.params.extend_from_slice(params);
            if s.data.as_ref() != Some(data) {
                s.data = Some(data.clone());
            }
            s.result = None;
            s.waiting = true;
        }
        Answer(&self.slot).await;
        let mut s = lock(&self.slot);
        if let Some(g) = grad {
            if g.len() != s.grad.len() && s.result.as_ref().is_some_and(|r| r.is_ok()) {
                return Err(ComputeError::Length {
                    what: "gradient",
                    expected: s.grad.len(),
                    got: g.len(),
                });
            }
            if let Some(Ok(_)) = s.result {
                g.copy_from_slice(&s.grad);
            }
        }
        s.result
            .take()
            .expect("Answer resolved")
            .map_err(ComputeError::Device)
    }
}

impl AsyncEvaluator for BatchClient {
    fn model(&self) -> &Model {
        &self.model
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
}

/// A synchronous single-problem evaluator over a [`Batcher`]'s batch evaluator.
pub struct Solo<'a, B: BatchEvaluator> {
    batcher: &'a Batcher<B>,
}

impl<B: BatchEvaluator> Evaluator for Solo<'_, B> {
    fn model(&self) -> &Model {
        &self.batcher.model
    }
    fn nll(&mut self, params: &[f64], data: &Dataset) -> histfit_compute::Result<f64> {
        let mut g = vec![0.0; params.len()];
        self.nll_grad(params, data, &mut g)
    }
    fn nll_grad(
        &mut self,
        params: &[f64],
        data: &Dataset,
        grad: &mut [f64],
    ) -> histfit_compute::Result<f64> {
        let mut v = [0.0];
        self.batcher
            .with_eval(|b| b.nll_grad_batch(params, &[data], &mut v, grad))?;
        Ok(v[0])
    }
    fn expected_main(&mut self, params: &[f64], out: &mut [f64]) -> histfit_compute::Result<()> {
        self.batcher
            .with_eval(|b| b.expected_main_batch(params, out))
    }
}

/// Runs `make(client, k)` for k in 0..n in lockstep on `batcher`, at most `window` jobs in
/// flight, on one worker thread per core; results in order of k.
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
    let workers = std::thread::available_parallelism()
        .map(|c| c.get())
        .unwrap_or(1)
        .clamp(1, n.max(1));
    // Spread the fits in flight evenly: a small ensemble still keeps every core busy.
    let per_worker = window.clamp(1, n.max(1)).div_ceil(workers).max(1);
    let next = AtomicUsize::new(0);
    let finished = AtomicBool::new(false);
    let results: Mutex<Vec<(usize, Result<T>)>> = Mutex::new(Vec::with_capacity(n));
    let waiting: Vec<Mutex<Vec<Slot>>> = (0..workers).map(|_| Mutex::new(Vec::new())).collect();
    let barrier = Barrier::new(workers);
    std::thread::scope(|scope| {
        for w in 0..workers {
            let (next, finished, results, waiting, barrier) =
                (&next, &finished, &results, &waiting, &barrier);
            scope.spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                let mut active: Vec<(usize, Slot, Job<'w, T>)> = Vec::new();
                let mut done: Vec<(usize, Result<T>)> = Vec::new();
                loop {
                    // Advance every fit to its next evaluation (or its end); refill the window.
                    let mut keep = Vec::with_capacity(active.len());
                    for (k, slot, mut job) in active.drain(..) {
                        match job.as_mut().poll(&mut cx) {
                            Poll::Ready(r) => done.push((k, r)),
                            Poll::Pending => keep.push((k, slot, job)),
                        }
                    }
                    active = keep;
                    while active.len() < per_worker {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= n {
                            break;
                        }
                        let slot: Slot = Arc::new(Mutex::new(SlotData::default()));
                        let client = BatchClient {
                            model: batcher.model.clone(),
                            slot: slot.clone(),
                        };
                        let mut job = make(client, k);
                        match job.as_mut().poll(&mut cx) {
                            Poll::Ready(r) => done.push((k, r)),
                            Poll::Pending => active.push((k, slot, job)),
                        }
                    }
                    if !done.is_empty() {
                        lock(results).append(&mut done);
                    }
                    *lock(&waiting[w]) = active
                        .iter()
                        .filter(|(_, s, _)| lock(s).waiting)
                        .map(|(_, s, _)| s.clone())
                        .collect();
                    barrier.wait();
                    if w == 0 {
                        let all: Vec<Slot> = waiting.iter().flat_map(|l| lock(l).clone()).collect();
                        if all.is_empty() {
                            finished.store(true, Ordering::Release);
                        } else {
                            batcher.lead(&all);
                        }
                    }
                    barrier.wait();
                    if finished.load(Ordering::Acquire) {
                        break;
                    }
                }
            });
        }
    });
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

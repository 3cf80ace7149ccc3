//! Many fits in lockstep on a [`BatchEvaluator`] (a GPU), without a thread per fit.
//!
//! Each fit is the ordinary fitting code ([`crate::fit::fit_async`], restarts and all) running as
//! a future whose evaluator is a [`BatchClient`]: an evaluation writes its request into the
//! client's slot and waits. A few worker threads (one per core) each own a share of the fits in
//! flight. One lockstep step: every worker hands back its results, polls its fits until each
//! waits for an evaluation or has finished (a finished fit is replaced by the next item at once),
//! and packs its requests; at a barrier one worker concatenates the packs, evaluates them in one
//! batch call and splits the results back; at a second barrier the step ends. Everything per fit
//! (polling, packing, unpacking) runs on the fit's own worker, in parallel. The optimizer work of all fits runs in parallel on the cores, the
//! device sees one launch per step, and there is one host round trip per step.

use crate::{InferError, Result};
use histfit_compute::{
    AsyncEvaluator, BatchEvaluator, ComputeError, Dataset, EvalFuture, Evaluator,
};
use histfit_model::Model;
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

    /// Evaluates every worker's waiting requests in one batch call; each worker's results go
    /// back into its own share.
    fn lead(&self, shares: &[Mutex<Share>]) -> bool {
        let started = std::time::Instant::now();
        let n = self.model.n_params();
        let mut guards: Vec<MutexGuard<'_, Share>> = shares.iter().map(lock).collect();
        let b: usize = guards.iter().map(|g| g.data.len()).sum();
        if b == 0 {
            return false;
        }
        let mut params = Vec::with_capacity(b * n);
        let mut data = Vec::with_capacity(b);
        for g in &guards {
            params.extend_from_slice(&g.params);
            data.extend(g.data.iter().cloned());
        }
        let (mut nll, mut grad) = (vec![0.0; b], vec![0.0; b * n]);
        let t_eval = std::time::Instant::now();
        let outcome = lock(&self.eval).nll_grad_batch_shared(&params, &data, &mut nll, &mut grad);
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
                Err(e) => g.error = Some(e.to_string()),
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
}

/// One worker's part of a step: its requests, then their results (filled by the leader).
#[derive(Default)]
struct Share {
    params: Vec<f64>,
    data: Vec<Arc<Dataset>>,
    nll: Vec<f64>,
    grad: Vec<f64>,
    error: Option<String>,
}

/// A request and its result, shared by a client and the worker thread that owns it.
#[derive(Default)]
struct SlotData {
    params: Vec<f64>,
    /// The dataset of the request (kept between requests: a fit evaluates one dataset many times).
    data: Option<Arc<Dataset>>,
    waiting: bool,
    result: Option<std::result::Result<f64, String>>,
    grad: Vec<f64>,
}

type Slot = Rc<RefCell<SlotData>>;

/// One fit's evaluator: its requests join the next batch.
pub struct BatchClient {
    model: Arc<Model>,
    slot: Slot,
}

/// Resolves once the slot's result has been written back.
struct Answer<'a>(&'a Slot);

impl Future for Answer<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0.borrow().result.is_some() {
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
            let mut s = self.slot.borrow_mut();
            s.params.clear();
            s.params.extend_from_slice(params);
            if s.data.as_deref() != Some(data) {
                s.data = Some(Arc::new(data.clone()));
            }
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
        r.map_err(ComputeError::Device)
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
    let shares: Vec<Mutex<Share>> = (0..workers).map(|_| Mutex::new(Share::default())).collect();
    let barrier = Barrier::new(workers);
    let n_params = batcher.model.n_params();
    std::thread::scope(|scope| {
        for w in 0..workers {
            let (next, finished, results, shares, barrier) =
                (&next, &finished, &results, &shares, &barrier);
            scope.spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                let mut active: Vec<(usize, Slot, Job<'w, T>)> = Vec::new();
                let mut done: Vec<(usize, Result<T>)> = Vec::new();
                let mut waiting: Vec<Slot> = Vec::new();
                loop {
                    // Hand back the last step's results.
                    if !waiting.is_empty() {
                        let share = lock(&shares[w]);
                        for (k, slot) in waiting.iter().enumerate() {
                            let mut s = slot.borrow_mut();
                            s.waiting = false;
                            s.result = Some(match &share.error {
                                None => {
                                    s.grad.clear();
                                    s.grad.extend_from_slice(
                                        &share.grad[k * n_params..(k + 1) * n_params],
                                    );
                                    Ok(share.nll[k])
                                }
                                Some(e) => Err(e.clone()),
                            });
                        }
                    }
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
                        let slot: Slot = Rc::new(RefCell::new(SlotData::default()));
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
                    // Publish this worker's requests.
                    waiting.clear();
                    {
                        let mut share = lock(&shares[w]);
                        share.params.clear();
                        share.data.clear();
                        for (_, slot, _) in &active {
                            let s = slot.borrow();
                            if s.waiting {
                                share.params.extend_from_slice(&s.params);
                                share
                                    .data
                                    .push(s.data.clone().expect("a waiting request has data"));
                                waiting.push(slot.clone());
                            }
                        }
                    }
                    barrier.wait();
                    if w == 0 && !batcher.lead(shares) {
                        finished.store(true, Ordering::Release);
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

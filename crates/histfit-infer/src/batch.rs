//! Many fits in lockstep on a [`BatchEvaluator`] (a GPU): each fit runs the ordinary fitting code
//! ([`crate::fit::fit`], restarts and all) on its own worker thread, through a [`Client`]
//! evaluator that hands its request to a shared [`Batcher`] and waits. When every live client has
//! a request pending, the last one to arrive becomes the leader: it evaluates the whole batch in
//! one call and wakes the others. A fit that converges simply leaves (its worker takes the next
//! item), so the batch shrinks only at the tail of an ensemble — convergence masking without a
//! second copy of the optimizer.
//!
//! The host round trips are one per optimizer step of the slowest live fit; between them every
//! worker does its own line-search and L-BFGS-B bookkeeping on the CPU cores in parallel.

use crate::{InferError, Result};
use histfit_compute::{BatchEvaluator, ComputeError, CpuEvaluator, Dataset, Evaluator};
use histfit_model::Model;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

struct Request {
    client: usize,
    params: Vec<f64>,
    data: Dataset,
}

#[derive(Default)]
struct State {
    live: usize,
    pending: Vec<Request>,
    done: HashMap<usize, std::result::Result<(f64, Vec<f64>), String>>,
    running: bool,
    next_id: usize,
    launches: u64,
    problems: u64,
}

/// Pools the evaluations of many concurrent fits into batch calls.
pub struct Batcher<B: BatchEvaluator> {
    eval: Mutex<B>,
    model: Arc<Model>,
    state: Mutex<State>,
    cv: Condvar,
}

/// Counts of a batched run: launches and problems evaluated (their ratio is the mean batch).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BatchStats {
    pub launches: u64,
    pub problems: u64,
}

impl<B: BatchEvaluator> Batcher<B> {
    pub fn new(eval: B) -> Batcher<B> {
        let model = Arc::new(eval.model().clone());
        Batcher {
            eval: Mutex::new(eval),
            model,
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        }
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Exclusive access to the underlying evaluator (no fits may be running).
    pub fn with_eval<T>(&self, f: impl FnOnce(&mut B) -> T) -> T {
        f(&mut self.eval.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn stats(&self) -> BatchStats {
        let s = self.lock();
        BatchStats {
            launches: s.launches,
            problems: s.problems,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `n` clients at once (before any of them submits, so the first request does not
    /// launch alone).
    pub fn clients(&self, n: usize) -> Vec<Client<'_, B>> {
        let mut s = self.lock();
        let first = s.next_id;
        s.next_id += n;
        s.live += n;
        drop(s);
        (0..n)
            .map(|k| Client {
                batcher: self,
                id: first + k,
                cpu: None,
            })
            .collect()
    }

    /// Evaluates everything pending (caller holds the lock; returns it).
    fn lead<'a>(
        &'a self,
        mut s: std::sync::MutexGuard<'a, State>,
    ) -> std::sync::MutexGuard<'a, State> {
        let reqs = std::mem::take(&mut s.pending);
        s.running = true;
        drop(s);
        let n = self.model.n_params();
        let b = reqs.len();
        let mut params = Vec::with_capacity(b * n);
        for r in &reqs {
            params.extend_from_slice(&r.params);
        }
        let data: Vec<&Dataset> = reqs.iter().map(|r| &r.data).collect();
        let (mut nll, mut grad) = (vec![0.0; b], vec![0.0; b * n]);
        let outcome = self
            .eval
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .nll_grad_batch(&params, &data, &mut nll, &mut grad);
        let mut s = self.lock();
        s.launches += 1;
        s.problems += b as u64;
        for (k, r) in reqs.iter().enumerate() {
            let v = match &outcome {
                Ok(()) => Ok((nll[k], grad[k * n..(k + 1) * n].to_vec())),
                Err(e) => Err(e.to_string()),
            };
            s.done.insert(r.client, v);
        }
        s.running = false;
        self.cv.notify_all();
        s
    }

    fn submit(
        &self,
        client: usize,
        params: &[f64],
        data: &Dataset,
    ) -> histfit_compute::Result<(f64, Vec<f64>)> {
        let mut s = self.lock();
        s.pending.push(Request {
            client,
            params: params.to_vec(),
            data: data.clone(),
        });
        loop {
            if let Some(r) = s.done.remove(&client) {
                return r.map_err(ComputeError::Device);
            }
            if !s.running && !s.pending.is_empty() && s.pending.len() == s.live {
                s = self.lead(s);
                continue;
            }
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn leave(&self) {
        let mut s = self.lock();
        s.live -= 1;
        if !s.running && !s.pending.is_empty() && s.pending.len() == s.live {
            drop(self.lead(s));
        }
    }
}

/// One fit's view of a [`Batcher`]: an [`Evaluator`] whose evaluations join the next batch.
pub struct Client<'a, B: BatchEvaluator> {
    batcher: &'a Batcher<B>,
    id: usize,
    /// Expected data (rare in a fit) are computed on the CPU.
    cpu: Option<CpuEvaluator>,
}

impl<B: BatchEvaluator> Drop for Client<'_, B> {
    fn drop(&mut self) {
        self.batcher.leave();
    }
}

impl<B: BatchEvaluator> Evaluator for Client<'_, B> {
    fn model(&self) -> &Model {
        &self.batcher.model
    }
    fn nll(&mut self, params: &[f64], data: &Dataset) -> histfit_compute::Result<f64> {
        Ok(self.batcher.submit(self.id, params, data)?.0)
    }
    fn nll_grad(
        &mut self,
        params: &[f64],
        data: &Dataset,
        grad: &mut [f64],
    ) -> histfit_compute::Result<f64> {
        if grad.len() != params.len() {
            return Err(ComputeError::Length {
                what: "gradient",
                expected: params.len(),
                got: grad.len(),
            });
        }
        let (v, g) = self.batcher.submit(self.id, params, data)?;
        grad.copy_from_slice(&g);
        Ok(v)
    }
    fn expected_main(&mut self, params: &[f64], out: &mut [f64]) -> histfit_compute::Result<()> {
        let model = self.batcher.model.clone();
        self.cpu
            .get_or_insert_with(|| CpuEvaluator::new(model))
            .expected_main(params, out)
    }
}

/// Runs `work(evaluator, k)` for k in 0..n on `workers` threads sharing `batcher`; results in
/// order of k. Each worker takes the next k as soon as its previous one is done.
pub fn run_pool<B, T, F>(batcher: &Batcher<B>, n: usize, workers: usize, work: F) -> Result<Vec<T>>
where
    B: BatchEvaluator,
    T: Send,
    F: Fn(&mut dyn Evaluator, usize) -> Result<T> + Sync,
{
    let workers = workers.clamp(1, n.max(1));
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<(usize, Result<T>)>> = Mutex::new(Vec::with_capacity(n));
    let clients = batcher.clients(workers);
    std::thread::scope(|scope| {
        for mut client in clients {
            let (next, results, work) = (&next, &results, &work);
            std::thread::Builder::new()
                .stack_size(1 << 20)
                .spawn_scoped(scope, move || loop {
                    let k = next.fetch_add(1, Ordering::Relaxed) as usize;
                    if k >= n {
                        break;
                    }
                    let r = work(&mut client, k);
                    results
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((k, r));
                })
                .map_err(|e| InferError::Request(format!("could not start a worker thread: {e}")))
                .map(|_| ())?;
        }
        Ok::<(), InferError>(())
    })?;
    let mut r = results.into_inner().unwrap_or_else(|p| p.into_inner());
    r.sort_by_key(|(k, _)| *k);
    r.into_iter().map(|(_, v)| v).collect()
}

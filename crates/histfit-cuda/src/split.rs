//! Resident toy ensembles split over several devices (`--gpu cuda:all`, `cuda:0,1`, or the same
//! device twice): the peers' sessions, opened in the background, and the queue their workers
//! take blocks of toys from.
//!
//! A static split (one contiguous block per device) ends when the slowest device does: a
//! device that opened later, a slower GPU, or a block holding more of the slow toys keeps the
//! others waiting. Here every device runs [`SplitPlan::lanes`] workers, each taking the next block
//! of toy indices from one queue until none is left. Blocks shrink as the ensemble nears its end
//! (a share of what remains, down to a minimum), so the devices end within about one small
//! block of each other; while one worker's launch drains its slowest toys, the device's other
//! worker keeps its SMs busy. The first device starts at once; the others join as soon as their
//! sessions are open (they start opening when the first ensemble starts, or beside the first
//! device where the evaluator is made for ensembles: [`crate::CudaBatch::for_ensembles`]).
//!
//! A toy's fit depends only on its index (the kernel draws it from the index's Philox stream and
//! fits it alone), so the results are those of one device, bit for bit, whatever the split.

use crate::batch::Session;
use crate::{CudaError, Result};
use histfit_compute::{panic_message, ComputeError, ResidentFit, ResidentRequest};
use histfit_model::Model;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// How an ensemble is split over the devices (results are the same bits for every plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitPlan {
    /// Workers (host threads, each with its own stream and launches) per device.
    pub lanes: usize,
    /// The smallest block a worker takes (the last one may be smaller), unless the ensemble over
    /// the workers is smaller: then one block per worker.
    pub min_block: u64,
    /// A block is the remaining toys over `share` × the workers.
    pub share: u64,
    /// One contiguous block per device instead of the queue.
    pub fixed: bool,
}

impl SplitPlan {
    /// The default. Each launch ends in a tail of its slowest fits, so blocks are few and large:
    /// on one H100 split as `cuda:0,0` (100 000 toys, BENCHMARKS.md issue 24), blocks of at least
    /// 8192 cost 3L off-shell 3 % over the static split where blocks of at least 1024 cost 13 %;
    /// tHu was alike for all.
    pub const QUEUE: SplitPlan = SplitPlan {
        lanes: 2,
        min_block: 8192,
        share: 1,
        fixed: false,
    };

    /// One contiguous block of toy indices per device, one worker each.
    pub const STATIC: SplitPlan = SplitPlan {
        lanes: 1,
        min_block: 1,
        share: 1,
        fixed: true,
    };

    /// [`SplitPlan::QUEUE`], or for measurements on hosts with several GPUs
    /// `HISTFIT_SPLIT=static` ([`SplitPlan::STATIC`]) and `HISTFIT_SPLIT_LANES` (1–16),
    /// `HISTFIT_SPLIT_MIN` (≥ 1), `HISTFIT_SPLIT_SHARE` (1–64) in place of the queue's numbers.
    pub fn from_env() -> Result<SplitPlan> {
        SplitPlan::from_vars(|k| std::env::var(k).ok())
    }

    /// [`SplitPlan::from_env`] with the variables looked up by `var`.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<SplitPlan> {
        let bad = |k: &str, v: &str, rule: &str| CudaError::Setting(format!("{k}={v}: {rule}"));
        let number = |k: &str, default: u64, hi: u64| -> Result<u64> {
            match var(k) {
                None => Ok(default),
                Some(v) => v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=hi).contains(n))
                    .ok_or_else(|| bad(k, &v, &format!("must be a whole number from 1 to {hi}"))),
            }
        };
        match var("HISTFIT_SPLIT").as_deref() {
            Some("static") => return Ok(SplitPlan::STATIC),
            Some("queue") | None => {}
            Some(v) => return Err(bad("HISTFIT_SPLIT", v, "must be static or queue")),
        }
        let q = SplitPlan::QUEUE;
        Ok(SplitPlan {
            lanes: number("HISTFIT_SPLIT_LANES", q.lanes as u64, 16)? as usize,
            min_block: number("HISTFIT_SPLIT_MIN", q.min_block, u64::MAX)?,
            share: number("HISTFIT_SPLIT_SHARE", q.share, 64)?,
            fixed: false,
        })
    }
}

/// Where a peer's session stands.
#[derive(Debug)]
enum Opening {
    NotStarted,
    Running(std::thread::JoinHandle<Result<Arc<Session>>>),
    Joined,
}

/// Where a peer's opening stands; a thread still opening it is joined when the last copy of the
/// peer goes (an evaluator dropped before any ensemble, or the first device failing to open),
/// so that no thread is left inside the driver while the process exits.
#[derive(Debug)]
struct Slot(Mutex<Opening>);

impl Drop for Slot {
    fn drop(&mut self) {
        let opening = self.0.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Opening::Running(h) = std::mem::replace(opening, Opening::Joined) {
            // Its session (or error) is dropped with it: nobody asked for it.
            let _ = h.join();
        }
    }
}

/// A session of the model on another device, opened by a thread of its own ([`Peer::start`]:
/// when an ensemble starts, or with the first device where the evaluator is made for
/// ensembles, [`crate::CudaBatch::for_ensembles`]); [`Peer::session`] waits for it.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    ordinal: usize,
    model: Arc<Model>,
    opening: Arc<Slot>,
    opened: Arc<OnceLock<Result<Arc<Session>>>>,
}

impl Peer {
    pub(crate) fn new(model: Arc<Model>, ordinal: usize) -> Peer {
        Peer {
            ordinal,
            model,
            opening: Arc::new(Slot(Mutex::new(Opening::NotStarted))),
            opened: Arc::new(OnceLock::new()),
        }
    }

    /// Starts opening the session (once).
    pub(crate) fn start(&self) {
        let mut opening = self.opening.0.lock().unwrap_or_else(|p| p.into_inner());
        if !matches!(*opening, Opening::NotStarted) {
            return;
        }
        let (model, ordinal) = (self.model.clone(), self.ordinal);
        match std::thread::Builder::new()
            .name(format!("histfit-open-cuda:{ordinal}"))
            .spawn(move || Session::new(model, ordinal))
        {
            Ok(h) => *opening = Opening::Running(h),
            Err(e) => {
                let _ = self.opened.set(Err(CudaError::Unavailable(format!(
                    "cuda:{ordinal}: no thread to open it: {e}"
                ))));
                *opening = Opening::Joined;
            }
        }
    }

    /// The session, once open (starts opening it if need be, waits for it the first time).
    fn session(&self) -> Result<Arc<Session>> {
        self.start();
        self.opened
            .get_or_init(|| {
                let mut opening = self.opening.0.lock().unwrap_or_else(|p| p.into_inner());
                match std::mem::replace(&mut *opening, Opening::Joined) {
                    Opening::Running(h) => match h.join() {
                        Ok(opened) => opened.map_err(|e| on_device(e, self.ordinal)),
                        Err(p) => Err(CudaError::Unavailable(format!(
                            "cuda:{}: opening it panicked: {}",
                            self.ordinal,
                            panic_message(&*p)
                        ))),
                    },
                    // (start() either left a thread running or set the result itself.)
                    Opening::NotStarted | Opening::Joined => Err(CudaError::Unavailable(format!(
                        "cuda:{}: its opening was lost",
                        self.ordinal
                    ))),
                }
            })
            .clone()
    }
}

/// `e` with the device it happened on.
fn on_device(e: CudaError, ordinal: usize) -> CudaError {
    match e {
        CudaError::Unavailable(m) => CudaError::Unavailable(format!("cuda:{ordinal}: {m}")),
        CudaError::Driver { call, message } => CudaError::Driver {
            call: format!("{call} on cuda:{ordinal}"),
            message,
        },
        CudaError::Compile(m) => CudaError::Compile(format!("cuda:{ordinal}: {m}")),
        CudaError::OutOfMemory(m) => CudaError::OutOfMemory(format!("cuda:{ordinal}: {m}")),
        CudaError::TooLarge(m) => CudaError::TooLarge(format!("cuda:{ordinal}: {m}")),
        CudaError::Setting(m) => CudaError::Setting(m),
    }
}

/// Whether a fit's error is the device running out of memory.
fn out_of_memory(e: &ComputeError) -> bool {
    let prefix = CudaError::OutOfMemory(String::new()).to_string();
    matches!(e, ComputeError::Device(m) if m.starts_with(&prefix))
}

/// Blocks of toy indices handed out in order: each a share of what remains
/// (1/(share·workers)), at least [`Queue::min_block`] toys; blocks given back come first.
struct Queue {
    next: Mutex<(u64, Vec<Range<u64>>)>,
    end: u64,
    workers: u64,
    plan: SplitPlan,
    /// The plan's smallest block, or the ensemble over the workers where that is smaller: an
    /// ensemble of fewer than `workers × min_block` toys is cut into one block per worker,
    /// not into two large blocks and a small one (tHu's toy CLs, 2 × 19 800 toys on two GPUs:
    /// 8192 + 8192 toys on one device and 3416 on the other; BENCHMARKS.md, issue 24).
    min_block: u64,
    /// Set when a worker fails: the others take no more blocks.
    stop: AtomicBool,
}

impl Queue {
    fn new(indices: Range<u64>, workers: usize, plan: SplitPlan) -> Queue {
        let workers = workers.max(1) as u64;
        let total = indices.end.saturating_sub(indices.start);
        Queue {
            next: Mutex::new((indices.start, Vec::new())),
            end: indices.end,
            workers,
            plan,
            min_block: plan.min_block.min(total.div_ceil(workers)).max(1),
            stop: AtomicBool::new(false),
        }
    }

    fn take(&self) -> Option<Range<u64>> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(block) = next.1.pop() {
            return Some(block);
        }
        let left = self.end.saturating_sub(next.0);
        if left == 0 {
            return None;
        }
        let size = (left / self.plan.share.saturating_mul(self.workers))
            .max(self.min_block)
            .min(left);
        let block = next.0..next.0 + size;
        next.0 += size;
        Some(block)
    }

    /// A block a worker could not fit, for another to take.
    fn give_back(&self, block: Range<u64>) {
        self.next
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .push(block);
    }
}

/// Fits `req`'s toys over `first` and `peers` as `plan` says, with `fit` (one device's resident
/// fits of a block); results in the order of `req.indices` (the positions of a list). A worker whose device runs out of memory gives its
/// block back and stops while others still run; any other error stops every worker and is
/// returned (naming the device where it happened).
pub(crate) fn fit_split(
    first: &Arc<Session>,
    peers: &[Peer],
    plan: SplitPlan,
    req: &ResidentRequest<'_>,
    fit: impl Fn(&Session, &ResidentRequest<'_>) -> histfit_compute::Result<Vec<ResidentFit>> + Sync,
) -> histfit_compute::Result<Vec<ResidentFit>> {
    // (Already started where the evaluator was made for ensembles.)
    for p in peers {
        p.start();
    }
    let devices = 1 + peers.len();
    let workers = devices * plan.lanes;
    let queue = Queue::new(req.indices.clone(), workers, plan);
    let (start, total) = (
        req.indices.start,
        req.indices.end.saturating_sub(req.indices.start),
    );
    // The static split's block of device d (u128: total · (d + 1) may exceed u64).
    let fixed_block = |d: usize| {
        let at = |d: usize| start + (total as u128 * d as u128 / devices as u128) as u64;
        at(d)..at(d + 1)
    };
    let live = AtomicUsize::new(workers);
    // Each lane's blocks with their first position: the ensemble is put back in the order of
    // its positions (a list may name a toy more than once, from different starts).
    let lane = |d: usize| -> histfit_compute::Result<Vec<(u64, Vec<ResidentFit>)>> {
        let ordinal = |s: &Session| s.gpu.info.ordinal;
        let session = match d {
            0 => first.clone(),
            _ => peers[d - 1].session()?,
        };
        let mut out = Vec::new();
        let mut fixed = plan.fixed.then(|| fixed_block(d));
        while let Some(block) = match fixed.take() {
            Some(b) => Some(b),
            None if plan.fixed => None,
            None => queue.take(),
        } {
            let part = req.part(block.clone());
            match fit(&session, &part) {
                Ok(fits) => out.push((block.start, fits)),
                Err(e) if out_of_memory(&e) && !plan.fixed && live.load(Ordering::SeqCst) > 1 => {
                    queue.give_back(block);
                    return Ok(out);
                }
                Err(e) => {
                    return Err(match e {
                        ComputeError::Device(m) => {
                            ComputeError::Device(format!("cuda:{}: {m}", ordinal(&session)))
                        }
                        e => e,
                    })
                }
            }
        }
        Ok(out)
    };
    type Blocks = Vec<(u64, Vec<ResidentFit>)>;
    let parts: Vec<histfit_compute::Result<Blocks>> = std::thread::scope(|scope| {
        let (lane, queue, live) = (&lane, &queue, &live);
        let handles: Vec<_> = (0..devices)
            .flat_map(|d| (0..plan.lanes).map(move |_| d))
            .map(|d| {
                scope.spawn(move || {
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lane(d)))
                        .unwrap_or_else(|p| {
                            Err(ComputeError::Device(format!(
                                "a resident fit worker panicked: {}",
                                panic_message(&*p)
                            )))
                        });
                    live.fetch_sub(1, Ordering::SeqCst);
                    if result.is_err() {
                        queue.stop.store(true, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|p| {
                    Err(ComputeError::Device(format!(
                        "a resident fit worker panicked: {}",
                        panic_message(&*p)
                    )))
                })
            })
            .collect()
    });
    let mut blocks = Vec::new();
    for p in parts {
        blocks.extend(p?);
    }
    blocks.sort_unstable_by_key(|(at, _)| *at);
    let out: Vec<ResidentFit> = blocks.into_iter().flat_map(|(_, fits)| fits).collect();
    // Every index once: the queue hands each out once, and a block given back after the other
    // workers had stopped would be missing here (said, never dropped).
    if out.len() as u64 != total
        || out
            .iter()
            .zip(req.indices.clone())
            .any(|(f, i)| f.index != req.toy(i))
    {
        return Err(ComputeError::Device(format!(
            "a split ensemble came back with {} of its {total} toys (a device ran out of memory \
             after the others had finished: fit on fewer devices or with fewer toys)",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(indices: Range<u64>, workers: usize, plan: SplitPlan) -> Vec<Range<u64>> {
        let q = Queue::new(indices, workers, plan);
        std::iter::from_fn(|| q.take()).collect()
    }

    #[test]
    fn blocks_cover_the_ensemble_once_and_shrink() {
        let small = SplitPlan {
            min_block: 100,
            share: 2,
            ..SplitPlan::QUEUE
        };
        for plan in [SplitPlan::QUEUE, small] {
            for (range, workers) in [(0..100_000, 4), (7..10_007, 4), (0..1000, 8), (5..5, 2)] {
                let b = blocks(range.clone(), workers, plan);
                let mut at = range.start;
                for r in &b {
                    assert_eq!(r.start, at, "contiguous, in order");
                    assert!(r.end > r.start, "no empty block");
                    at = r.end;
                }
                assert_eq!(at, range.end, "the whole range");
                for w in b.windows(2) {
                    assert!(w[1].end - w[1].start <= w[0].end - w[0].start, "shrinking");
                }
                let total = range.end - range.start;
                let least = plan.min_block.min(total.div_ceil(workers as u64));
                if let Some((_, rest)) = b.split_last() {
                    assert!(rest.iter().all(|r| r.end - r.start >= least));
                }
            }
        }
        // Fewer toys than the workers' smallest blocks: one even block per worker.
        let b = blocks(0..19_800, 4, SplitPlan::QUEUE);
        assert_eq!(b, [0..4950, 4950..9900, 9900..14_850, 14_850..19_800]);
        // 100 000 toys over two devices' four workers: 25 000 first, then fewer.
        let b = blocks(0..100_000, 4, SplitPlan::QUEUE);
        assert_eq!(b[0], 0..25_000);
        assert!(b.len() < 16, "{} blocks", b.len());
    }

    #[test]
    fn blocks_given_back_come_first_and_a_stopped_queue_hands_out_nothing() {
        let q = Queue::new(0..100_000, 2, SplitPlan::QUEUE);
        let first = q.take().unwrap();
        q.give_back(first.clone());
        assert_eq!(q.take(), Some(first));
        q.stop.store(true, Ordering::Relaxed);
        assert_eq!(q.take(), None);
    }

    #[test]
    fn plans_from_the_environment() {
        let vars = |list: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                list.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(SplitPlan::from_vars(vars(&[])), Ok(SplitPlan::QUEUE));
        assert_eq!(
            SplitPlan::from_vars(vars(&[("HISTFIT_SPLIT", "static")])),
            Ok(SplitPlan::STATIC)
        );
        assert_eq!(
            SplitPlan::from_vars(vars(&[
                ("HISTFIT_SPLIT_LANES", "1"),
                ("HISTFIT_SPLIT_MIN", "512")
            ])),
            Ok(SplitPlan {
                lanes: 1,
                min_block: 512,
                ..SplitPlan::QUEUE
            })
        );
        for (k, v, rule) in [
            ("HISTFIT_SPLIT", "bogus", "must be static or queue"),
            ("HISTFIT_SPLIT_LANES", "0", "from 1 to 16"),
            ("HISTFIT_SPLIT_LANES", "99", "from 1 to 16"),
            ("HISTFIT_SPLIT_SHARE", "x", "from 1 to 64"),
        ] {
            let list: &'static [(&'static str, &'static str)] = Box::leak(Box::new([(k, v)]));
            match SplitPlan::from_vars(vars(list)) {
                Err(CudaError::Setting(m)) => {
                    assert!(
                        m.starts_with(&format!("{k}={v}: ")) && m.contains(rule),
                        "{m}"
                    )
                }
                other => panic!("{k}={v}: {other:?}"),
            }
        }
    }

    #[test]
    fn out_of_memory_is_told_from_other_device_errors() {
        let oom: ComputeError = CudaError::OutOfMemory("cuMemAlloc".into()).into();
        let other: ComputeError = CudaError::Unavailable("no device".into()).into();
        assert!(out_of_memory(&oom));
        assert!(!out_of_memory(&other));
    }
}

//! Resident toy ensembles split over several devices (`--gpu cuda:all`, `cuda:0,1`, or the same
//! device twice): the peers' sessions, opened in the background, and the queue their workers
//! take blocks of toys from.
//!
//! A static split (one contiguous block per device) ends when the slowest device does: a
//! device that opened later (a context costs a few tenths of a second; on a lent host with two
//! H200s, `cuda:all` took 0.9 s longer than `cuda:0` to fit 1000 toys), a slower GPU, or a block
//! holding more of the slow toys, keeps the others waiting. Here every device runs [`LANES`] workers, each taking the
//! next block of toy indices from one queue until none is left: blocks shrink as the ensemble
//! nears its end (a share of what remains), so the devices finish together, and while one lane's
//! launch drains its slowest toys the device's other lane keeps its SMs busy. A peer's lanes
//! join as soon as its session is open; the first device starts at once.
//!
//! A toy's fit depends only on its index (the kernel draws it from the index's Philox stream and
//! fits it alone), so the results are those of one device, bit for bit, whatever the split.

use crate::batch::Session;
use crate::{CudaError, Result};
use histfit_compute::{ComputeError, ResidentFit, ResidentRequest};
use histfit_model::Model;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Workers (host threads, each with its own stream and launches) per device.
pub const LANES: usize = 2;

/// The smallest block a worker takes (the last block may be smaller): each launch ends in a tail
/// of its slowest fits, so blocks are few and large. On one H100 split as `cuda:0,0` (100 000
/// toys, BENCHMARKS.md issue 24), 8192 cost 3L off-shell 3 % over the static split where 1024
/// cost 13 %; tHu was alike for all.
pub const MIN_BLOCK: u64 = 8192;

/// A block is the remaining toys over `SHARE` × the workers (1: the first blocks are the static
/// split's halves of it).
pub const SHARE: u64 = 1;

/// How an ensemble is split: the constants above, or, for measurements on hosts with several
/// GPUs, `HISTFIT_SPLIT=static` (one contiguous block per device, the split before the queue)
/// and `HISTFIT_SPLIT_LANES`, `HISTFIT_SPLIT_MIN`, `HISTFIT_SPLIT_SHARE` in their place. Results
/// are the same bits whichever is used.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Plan {
    lanes: usize,
    min: u64,
    share: u64,
    fixed: bool,
}

impl Plan {
    fn from_env() -> Plan {
        let get = |k: &str, d: u64| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&v| v > 0)
                .unwrap_or(d)
        };
        let fixed = std::env::var("HISTFIT_SPLIT").as_deref() == Ok("static");
        Plan {
            lanes: if fixed {
                1
            } else {
                get("HISTFIT_SPLIT_LANES", LANES as u64) as usize
            },
            min: get("HISTFIT_SPLIT_MIN", MIN_BLOCK),
            share: get("HISTFIT_SPLIT_SHARE", SHARE),
            fixed,
        }
    }
}

/// The thread opening a peer's session (taken by the first to wait for it).
type Opening = Arc<Mutex<Option<std::thread::JoinHandle<Result<Arc<Session>>>>>>;

/// A session of the model on another device, opened by a thread of its own from the moment the
/// split is asked for; [`Peer::session`] waits for it.
#[derive(Debug, Clone)]
pub struct Peer {
    ordinal: usize,
    opening: Opening,
    opened: Arc<OnceLock<Result<Arc<Session>>>>,
}

impl Peer {
    /// Starts opening `model` on device `ordinal`.
    pub fn open(model: Arc<Model>, ordinal: usize) -> Peer {
        let handle = std::thread::Builder::new()
            .name(format!("histfit-open-cuda:{ordinal}"))
            .spawn(move || Session::new(model, ordinal));
        let opened = Arc::new(OnceLock::new());
        let opening = match handle {
            Ok(h) => Some(h),
            Err(e) => {
                let _ = opened.set(Err(CudaError::Unavailable(format!(
                    "no thread to open cuda:{ordinal}: {e}"
                ))));
                None
            }
        };
        Peer {
            ordinal,
            opening: Arc::new(Mutex::new(opening)),
            opened,
        }
    }

    /// The session, once open (waits for its thread the first time).
    pub fn session(&self) -> Result<Arc<Session>> {
        self.opened
            .get_or_init(|| {
                let handle = self
                    .opening
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                match handle.map(|h| h.join()) {
                    Some(Ok(opened)) => opened,
                    Some(Err(_)) | None => Err(CudaError::Unavailable(format!(
                        "opening cuda:{} panicked",
                        self.ordinal
                    ))),
                }
            })
            .clone()
    }
}

/// Blocks of toy indices handed out in order: each a share of what remains (1/(share·workers)),
/// at least `min` toys.
struct Queue {
    next: Mutex<u64>,
    end: u64,
    workers: u64,
    min: u64,
    share: u64,
    /// Set when a worker fails: the others take no more blocks.
    stop: AtomicBool,
}

impl Queue {
    fn take(&self) -> Option<Range<u64>> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let left = self.end.saturating_sub(*next);
        if left == 0 {
            return None;
        }
        let size = (left / (self.share * self.workers)).max(self.min).min(left);
        let block = *next..*next + size;
        *next += size;
        Some(block)
    }
}

/// Fits `req`'s toys over `first` and `peers`, [`LANES`] workers per device, with `fit` (one
/// device's resident fits of a block); results in index order.
pub(crate) fn fit_split(
    first: &Arc<Session>,
    peers: &[Peer],
    req: &ResidentRequest<'_>,
    fit: impl Fn(&Session, &ResidentRequest<'_>) -> histfit_compute::Result<Vec<ResidentFit>> + Sync,
) -> histfit_compute::Result<Vec<ResidentFit>> {
    let devices = 1 + peers.len();
    let plan = Plan::from_env();
    let queue = Queue {
        next: Mutex::new(req.indices.start),
        end: req.indices.end,
        workers: (devices * plan.lanes) as u64,
        min: plan.min,
        share: plan.share,
        stop: AtomicBool::new(false),
    };
    let (start, total) = (
        req.indices.start,
        req.indices.end.saturating_sub(req.indices.start),
    );
    // The static split's block of device d (u128: total · (d + 1) may exceed u64).
    let fixed_block = |d: usize| {
        let at = |d: usize| start + (total as u128 * d as u128 / devices as u128) as u64;
        at(d)..at(d + 1)
    };
    let parts: Vec<histfit_compute::Result<Vec<ResidentFit>>> = std::thread::scope(|scope| {
        let (queue, fit) = (&queue, &fit);
        let handles: Vec<_> = (0..devices)
            .flat_map(|d| (0..plan.lanes).map(move |_| d))
            .map(|d| {
                scope.spawn(move || {
                    let work = || -> histfit_compute::Result<Vec<ResidentFit>> {
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
                            let part = ResidentRequest {
                                indices: block,
                                ..req.clone()
                            };
                            out.extend(fit(&session, &part)?);
                        }
                        Ok(out)
                    };
                    let result = work();
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
                h.join().unwrap_or_else(|_| {
                    Err(ComputeError::Device(
                        "a resident fit worker panicked".into(),
                    ))
                })
            })
            .collect()
    });
    let total = total as usize;
    let mut out = Vec::with_capacity(total);
    for p in parts {
        out.extend(p?);
    }
    out.sort_unstable_by_key(|f| f.index);
    // Every index once: the queue hands each out once and every worker returned its blocks.
    if out.len() != total
        || out
            .iter()
            .zip(req.indices.clone())
            .any(|(f, i)| f.index != i)
    {
        return Err(ComputeError::Device(format!(
            "a split ensemble came back with {} of its {total} toys",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(start: u64, end: u64, workers: u64) -> Vec<Range<u64>> {
        let q = Queue {
            next: Mutex::new(start),
            end,
            workers,
            min: MIN_BLOCK,
            share: SHARE,
            stop: AtomicBool::new(false),
        };
        std::iter::from_fn(|| q.take()).collect()
    }

    #[test]
    fn blocks_cover_the_ensemble_once_and_shrink() {
        for (start, end, workers) in [(0, 100_000, 4), (7, 10_007, 4), (0, 1000, 8), (5, 5, 2)] {
            let b = blocks(start, end, workers);
            let mut at = start;
            for r in &b {
                assert_eq!(r.start, at, "contiguous, in order");
                assert!(r.end > r.start, "no empty block");
                at = r.end;
            }
            assert_eq!(at, end, "the whole range");
            // Each a share of what is left, never below the minimum but for the last.
            for w in b.windows(2) {
                assert!(w[1].end - w[1].start <= w[0].end - w[0].start);
            }
            if let Some((last, rest)) = b.split_last() {
                assert!(rest.iter().all(|r| r.end - r.start >= MIN_BLOCK));
                assert!(last.end - last.start <= MIN_BLOCK.max((end - start) / (SHARE * workers)));
            }
        }
        // 100 000 toys over two devices' four workers: 25 000 first, then fewer.
        let b = blocks(0, 100_000, 4);
        assert_eq!(b[0], 0..25_000);
        assert!(b.len() < 16, "{} blocks", b.len());
    }

    #[test]
    fn a_stopped_queue_hands_out_nothing() {
        let q = Queue {
            next: Mutex::new(0),
            end: 10,
            workers: 1,
            min: MIN_BLOCK,
            share: SHARE,
            stop: AtomicBool::new(true),
        };
        assert_eq!(q.take(), None);
    }
}

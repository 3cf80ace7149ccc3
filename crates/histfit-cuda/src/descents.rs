//! Descents of host fits run whole on the device ([`BatchEvaluator::descents_batch`] for
//! [`CudaBatch`]): the `fit_runs` kernel takes each [`DescentRequest`] — its start, box, the
//! sides its kinked coordinates are kept to, its watch and restarts — on its dataset row (the
//! rows the batch evaluator keeps for its evaluations) and runs the L-BFGS-B of `fit_toys`
//! (histfit-infer's `descent.rs` on the device), one block per descent, workers taking the next
//! from a counter. Only the end point, f and the counts come back. A fit whose rules need many
//! descents (the kink rules under pyhf's codes: orthant descents, the other sides of kinks)
//! thus costs one launch per descent instead of one per optimizer step.
//!
//! [`BatchEvaluator::descents_batch`]: histfit_compute::BatchEvaluator::descents_batch

use crate::resident::{
    allot_workers, FitArg, StateLayout, FIT_GAVE_UP, FIT_OUT, MAX_MEMORY, RUN_RULE,
};
use crate::{driver, CudaBatch, CudaError, Result};
use cudarc::driver::{
    CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use histfit_compute::{ComputeError, Dataset, Descent, DescentRequest, ResidentStatus};
use std::sync::Arc;

/// Threads per descent. Fixed, as [`crate::resident::FIT_THREADS`] is for toy fits (a fit's last
/// bits depend on its block's reductions); twice theirs: a launch of descents holds the few
/// hundred a lockstep step asks for, not thousands, so its time is one descent's latency, which
/// more threads per evaluation shorten.
pub const RUN_THREADS: u32 = 256;

/// Descents per launch: bounds the inputs (5 n + 9 doubles a descent) and results.
const RUNS_PER_LAUNCH: usize = 1 << 15;

fn request_error(rule: String) -> ComputeError {
    ComputeError::InvalidData {
        place: "descents on the device".into(),
        rule,
    }
}

/// The checks of one request against a model of `n` parameters.
fn check(req: &DescentRequest, n: usize) -> histfit_compute::Result<()> {
    let sp = &req.space;
    let k = sp.free.len();
    for (what, len) in [
        ("scale", sp.scale.len()),
        ("kinks", sp.kinks.len()),
        ("start", req.z0.len()),
        ("lower bounds", req.lower.len()),
        ("upper bounds", req.upper.len()),
        ("sides", req.side.len()),
    ] {
        if len != k {
            return Err(request_error(format!(
                "{what}: {len} values for {k} coordinates"
            )));
        }
    }
    if sp.held.len() != n || sp.free.iter().any(|&i| i >= n) {
        return Err(request_error(format!(
            "the coordinates do not index a model of {n} parameters"
        )));
    }
    if req.watch.is_some_and(|w| w.k >= k) {
        return Err(request_error("watched coordinate out of range".into()));
    }
    if sp.settings.memory == 0 || sp.settings.memory > MAX_MEMORY {
        return Err(ComputeError::Unsupported(
            "descents with no or more than 16 correction pairs on the device",
        ));
    }
    Ok(())
}

impl CudaBatch {
    /// The descents `reqs`, request i on `data[i]`, in launches of requests with the same
    /// optimizer settings.
    pub(crate) fn run_descents(
        &mut self,
        reqs: &[DescentRequest],
        data: &[Arc<Dataset>],
    ) -> histfit_compute::Result<Vec<Descent>> {
        let n = self.session().model.n_params();
        if reqs.len() != data.len() {
            return Err(request_error(format!(
                "{} descents and {} datasets",
                reqs.len(),
                data.len()
            )));
        }
        for r in reqs {
            check(r, n)?;
        }
        let mut out: Vec<Option<Descent>> = vec![None; reqs.len()];
        let mut left: Vec<usize> = (0..reqs.len()).collect();
        while let Some(&first) = left.first() {
            let settings = reqs[first].space.settings;
            let (group, rest): (Vec<usize>, Vec<usize>) = left
                .iter()
                .partition(|&&i| reqs[i].space.settings == settings);
            left = rest;
            for part in group.chunks(RUNS_PER_LAUNCH) {
                let rs: Vec<&DescentRequest> = part.iter().map(|&i| &reqs[i]).collect();
                let ds: Vec<Arc<Dataset>> = part.iter().map(|&i| data[i].clone()).collect();
                for (&i, d) in part.iter().zip(self.launch_runs(&rs, &ds)?) {
                    out[i] = Some(d);
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|d| d.expect("every group ran"))
            .collect())
    }

    /// One launch of `fit_runs` over `reqs` (one settings).
    fn launch_runs(
        &mut self,
        reqs: &[&DescentRequest],
        data: &[Arc<Dataset>],
    ) -> Result<Vec<Descent>> {
        let clock = crate::timing::Clock::start();
        let (index, walls) = self.resolve_rows(data)?;
        let rows_ptr = self.data_base();
        let session = self.session().clone();
        let n = session.model.n_params();
        let count = reqs.len();
        let settings = reqs[0].space.settings;
        let memory = settings.memory;
        let threads = RUN_THREADS;
        let shared = (256.max(4 * memory * threads as usize / 32) * 8) as u32;
        let stream = self.stream().clone();
        let b = RunBuffers::ready(&mut self.runs, &session, &stream, memory, count)?;
        // The launch's inputs, packed in one page-locked buffer and sent in one copy: each
        // descent's start, bounds, sides and scales over the whole parameter vector (the held
        // parameters at their value, scale 1, lower = upper, side 2; the fit's from the
        // request), then the rules.
        let len = count * (5 * n + RUN_RULE);
        {
            // (The previous copy from this buffer has completed: every launch synchronises.)
            let pin = b
                .pin_in
                .as_mut_slice()
                .map_err(driver("staging of descents"))?;
            let (z, rest) = pin[..len].split_at_mut(count * n);
            let (lo, rest) = rest.split_at_mut(count * n);
            let (hi, rest) = rest.split_at_mut(count * n);
            let (side, rest) = rest.split_at_mut(count * n);
            let (scale, rule) = rest.split_at_mut(count * n);
            for (r, req) in reqs.iter().enumerate() {
                let sp = &req.space;
                let at = r * n;
                z[at..at + n].copy_from_slice(&sp.held);
                lo[at..at + n].copy_from_slice(&sp.held);
                hi[at..at + n].copy_from_slice(&sp.held);
                side[at..at + n].fill(2.0);
                scale[at..at + n].fill(1.0);
                for (k, &i) in sp.free.iter().enumerate() {
                    z[at + i] = req.z0[k];
                    lo[at + i] = req.lower[k];
                    hi[at + i] = req.upper[k];
                    side[at + i] = req.side[k];
                    scale[at + i] = sp.scale[k];
                }
                let w = req.watch;
                rule[r * RUN_RULE..(r + 1) * RUN_RULE].copy_from_slice(&[
                    w.map_or(-1.0, |w| sp.free[w.k] as f64),
                    w.map_or(0.0, |w| w.ceiling),
                    w.map_or(0.0, |w| w.after as f64),
                    w.map_or(0.0, |w| w.factor),
                    w.map_or(0.0, |w| w.held as f64),
                    req.passes as f64,
                    f64::from(index[r]),
                    walls[r],
                    data[r].constant,
                ]);
            }
        }
        {
            let pin = b.pin_in.as_slice().map_err(driver("staging of descents"))?;
            stream
                .memcpy_htod(&pin[..len], &mut b.inp.slice_mut(0..len))
                .map_err(driver("upload of descents on the device"))?;
        }
        stream
            .memset_zeros(&mut b.counter)
            .map_err(driver("cuMemsetD32 (descents)"))?;
        let layout = StateLayout::new(n, memory, 0);
        let scratch_len = session.tables.host.scratch_len;
        let func = &session.kernels.fit_runs;
        let workers = b.workers;
        let inp = b.inp.device_ptr(&stream).0;
        let at = |region: usize| inp + (region * count * n * 8) as u64;
        let outp = b.outp.device_ptr_mut(&stream).0;
        let (kink_d, state, scratch, counter) =
            (&b.kink, &mut b.state, &mut b.scratch, &mut b.counter);
        let arg = FitArg {
            seed: 0,
            first: 0,
            ints: [
                count as i32,
                -1,
                memory as i32,
                i32::try_from(settings.max_iterations).unwrap_or(i32::MAX),
                i32::try_from(settings.max_evaluations).unwrap_or(i32::MAX),
                1,
                session.row_len() as i32,
                0,
            ],
            reals: [
                settings.pgtol,
                settings.ftol,
                settings.edm,
                settings.c1,
                settings.c2,
                0.0,
                settings.certify,
                settings.polish_pg,
            ],
            ptrs: [
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                // The scales of the first descent: the kernel moves on by n per descent.
                at(4),
                kink_d.device_ptr(&stream).0,
                state.device_ptr_mut(&stream).0,
                scratch.device_ptr_mut(&stream).0,
                counter.device_ptr_mut(&stream).0,
                outp,
                outp + (count * FIT_OUT * 8) as u64,
                0,
                0,
                0,
                at(0),
                at(1),
                at(2),
                at(3),
                at(5),
                rows_ptr,
            ],
            lens: [
                layout.len as i64,
                scratch_len as i64,
                layout.s_off as i64,
                layout.small_off as i64,
                layout.row_off as i64,
            ],
        };
        let cfg = LaunchConfig {
            grid_dim: (workers.min(count) as u32, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: shared,
        };
        let mut l = stream.launch_builder(func);
        l.arg(&session.tables.arg).arg(&arg);
        let setup = clock.lap();
        // SAFETY: the arguments match `fit_runs(Tables, FitArgs)`; every buffer holds what the
        // kernel indexes: workers × state and scratch, count × n starts, bounds, sides and
        // scales, count × RUN_RULE rules, count × FIT_OUT results and count × n end points;
        // the dataset rows hold every row a rule names (resolved above).
        unsafe { l.launch(cfg) }.map_err(driver("launch of fit_runs"))?;
        let out_len = count * (FIT_OUT + n);
        {
            let pin = b
                .pin_out
                .as_mut_slice()
                .map_err(driver("staging of descent results"))?;
            stream
                .memcpy_dtoh(&b.outp.slice(0..out_len), &mut pin[..out_len])
                .map_err(driver("download of descent results"))?;
        }
        stream.synchronize().map_err(driver("fit_runs"))?;
        clock.report(|| {
            format!(
                "descents {count} setup {setup:.6} s, run {:.6} s",
                clock.lap()
            )
        });
        let pin = b
            .pin_out
            .as_slice()
            .map_err(driver("staging of descent results"))?;
        let (o, xs) = pin[..out_len].split_at(count * FIT_OUT);
        reqs.iter()
            .enumerate()
            .map(|(r, req)| {
                let o = &o[r * FIT_OUT..(r + 1) * FIT_OUT];
                let code = o[6] as i32;
                let x = &xs[r * n..(r + 1) * n];
                let z: Vec<f64> = req.space.free.iter().map(|&i| x[i]).collect();
                let (converged, given_up, reason) = if code == FIT_GAVE_UP {
                    (false, true, "given up".to_owned())
                } else {
                    let status =
                        ResidentStatus::from_code(code).ok_or_else(|| CudaError::Driver {
                            call: "fit_runs".into(),
                            message: format!("descent {r} came back without a status ({})", o[6]),
                        })?;
                    let reason = match status {
                        ResidentStatus::Converged => "converged (L-BFGS-B on the device)",
                        other => other.describe(),
                    };
                    (
                        status == ResidentStatus::Converged,
                        false,
                        reason.to_owned(),
                    )
                };
                Ok(Descent {
                    z,
                    f: o[0],
                    converged,
                    given_up,
                    reason,
                    iterations: o[4] as usize,
                    evaluations: o[5] as usize,
                })
            })
            .collect()
    }
}

/// The buffers of [`CudaBatch::run_descents`]' launches, kept between them (a lockstep run makes
/// hundreds of small launches): inputs and results for `cap` descents, and the worker blocks'
/// state for `memory` correction pairs.
#[derive(Debug)]
pub(crate) struct RunBuffers {
    cap: usize,
    memory: usize,
    workers: usize,
    /// Inputs (5 n + RUN_RULE doubles a descent) on the device and page-locked on the host.
    inp: CudaSlice<f64>,
    pin_in: PinnedHostSlice<f64>,
    /// Results (FIT_OUT + n doubles a descent) on the device and page-locked on the host.
    outp: CudaSlice<f64>,
    pin_out: PinnedHostSlice<f64>,
    kink: CudaSlice<i32>,
    state: CudaSlice<f64>,
    scratch: CudaSlice<f64>,
    counter: CudaSlice<i32>,
}
impl RunBuffers {
    /// `slot`'s buffers, made (again) where they hold fewer than `count` descents or another
    /// memory.
    fn ready<'a>(
        slot: &'a mut Option<Box<RunBuffers>>,
        session: &crate::batch::Session,
        stream: &Arc<cudarc::driver::CudaStream>,
        memory: usize,
        count: usize,
    ) -> Result<&'a mut RunBuffers> {
        if slot
            .as_ref()
            .is_some_and(|b| b.cap >= count && b.memory == memory)
        {
            return Ok(slot.as_mut().expect("checked"));
        }
        *slot = None;
        let n = session.model.n_params();
        let cap = count.next_power_of_two().max(64);
        let alloc = |len: usize| -> Result<CudaSlice<f64>> {
            stream
                .alloc_zeros::<f64>(len.max(1))
                .map_err(driver("cuMemAlloc (descents)"))
        };
        let threads = RUN_THREADS;
        let shared = (256.max(4 * memory * threads as usize / 32) * 8) as u32;
        let layout = StateLayout::new(n, memory, 0);
        // As many workers as the device keeps resident, whatever this launch's count: the
        // buffers serve the larger launches to come.
        let (workers, state, scratch) = allot_workers(
            session,
            stream,
            &session.kernels.fit_runs,
            (threads, shared),
            (layout.len, session.tables.host.scratch_len),
            None,
            usize::MAX,
        )?;
        let kink: Vec<i32> = session.space.kinked.iter().map(|&k| i32::from(k)).collect();
        Ok(slot.insert(Box::new(RunBuffers {
            cap,
            memory,
            workers,
            inp: alloc(cap * (5 * n + RUN_RULE))?,
            pin_in: crate::batch::pinned(session, cap * (5 * n + RUN_RULE))?,
            outp: alloc(cap * (FIT_OUT + n))?,
            pin_out: crate::batch::pinned(session, cap * (FIT_OUT + n))?,
            kink: stream
                .clone_htod(if kink.is_empty() { &[0][..] } else { &kink })
                .map_err(driver("upload of descents on the device"))?,
            state,
            scratch,
            counter: stream
                .alloc_zeros::<i32>(1)
                .map_err(driver("cuMemAlloc (descents)"))?,
        })))
    }
}

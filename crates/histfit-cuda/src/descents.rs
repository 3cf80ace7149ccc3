//! Descents of host fits run whole on the device ([`BatchEvaluator::descents_batch`] for
//! [`CudaBatch`]): the `fit_runs` kernel takes each [`DescentRequest`] — its start, box, the
//! sides its kinked coordinates are kept to, its watch and restarts — on its dataset row (the
//! rows the batch evaluator keeps for its evaluations) and runs the L-BFGS-B of `fit_toys`
//! (histfit-infer's `descent.rs` on the device), one block per descent, workers taking the next
//! from a counter. Only the end point, f and the counts come back. A fit whose rules need many
//! descents (the kink rules under pyhf's codes: orthant descents, the other sides of kinks)
//! thus costs a step of the lockstep executor per descent (one launch serving the descents of
//! every fit in that step) instead of one per optimizer step. A launch sends a table of the
//! distinct fits its descents belong to and, per descent, its start, its rules and a byte per
//! coordinate (the bounds that are 0 instead of the fit's, the side), not five vectors.
//!
//! [`BatchEvaluator::descents_batch`]: histfit_compute::BatchEvaluator::descents_batch

use crate::resident::{
    allot_workers, length_mismatch, FitArg, StateLayout, FIT_GAVE_UP, FIT_OUT, MAX_MEMORY, RUN_RULE,
};
use crate::{driver, CudaBatch, CudaError, Result};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use histfit_compute::{
    ComputeError, Dataset, Descent, DescentRequest, DescentSpace, ResidentStatus,
};
use std::collections::HashMap;
use std::sync::Arc;

/// The bit of a descent's code named `name` ([`crate::resident::RUN_CODES`]).
fn code(name: &str) -> u8 {
    crate::resident::RUN_CODES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|c| c.1)
        .expect("a code the kernel knows")
}

/// Whether two fits' coordinates are the same as a descent reads them: the same coordinates,
/// units, bounds, settings and held values (the free parameters' entries of `held` are not
/// read).
fn same_fit(a: &DescentSpace, b: &DescentSpace) -> bool {
    a.free == b.free
        && a.scale == b.scale
        && a.lower == b.lower
        && a.upper == b.upper
        && a.settings == b.settings
        && a.held.len() == b.held.len()
        && {
            let mut free = vec![false; a.held.len()];
            for &i in &a.free {
                free[i] = true;
            }
            (0..a.held.len()).all(|i| free[i] || a.held[i] == b.held[i])
        }
}

/// Threads per descent. Fixed, as [`crate::resident::FIT_THREADS`] is for toy fits (a fit's last
/// bits depend on its block's reductions); twice theirs: a launch of descents holds the few
/// hundred a lockstep step asks for, not thousands, so its time is one descent's latency, which
/// more threads per evaluation shorten.
pub const RUN_THREADS: u32 = 256;

/// `fit_runs`' minimum resident blocks per SM (its launch bounds): 2 caps its registers at 128
/// a thread, against 4's 64 (spills 4.4 kB → 1.3 kB a thread); tHu's kinked ensembles ran 3–8 %
/// faster (BENCHMARKS.md, issue 23, session 27), the same bits.
pub const RUN_MIN_BLOCKS: u32 = 2;

/// Descents per launch: bounds the inputs (at most 6 n + RUN_RULE doubles and n bytes a
/// descent) and results.
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
    let lengths = [
        ("scale", sp.scale.len()),
        ("kinks", sp.kinks.len()),
        ("fit's lower bounds", sp.lower.len()),
        ("fit's upper bounds", sp.upper.len()),
        ("start", req.z0.len()),
        ("lower bounds", req.lower.len()),
        ("upper bounds", req.upper.len()),
        ("sides", req.side.len()),
    ];
    if let Some(msg) = length_mismatch(&lengths, k, "coordinates") {
        return Err(request_error(msg));
    }
    if let Some(s) = &req.settle {
        let lengths = [
            ("settling lower bounds", s.lower.len()),
            ("settling upper bounds", s.upper.len()),
        ];
        if let Some(msg) = length_mismatch(&lengths, k, "coordinates") {
            return Err(request_error(msg));
        }
        if s.pinned.iter().any(|&j| j >= k) {
            return Err(request_error("settled coordinate out of range".into()));
        }
        let fit_or_0 = |b: &[f64], fit: &[f64]| (0..k).all(|j| b[j] == fit[j] || b[j] == 0.0);
        if !(fit_or_0(&s.lower, &sp.lower) && fit_or_0(&s.upper, &sp.upper)) {
            return Err(ComputeError::Unsupported(
                "descents settled on the device within bounds that are not the fit's or 0",
            ));
        }
    }
    if sp.held.len() != n || sp.free.iter().any(|&i| i >= n) {
        return Err(request_error(format!(
            "the coordinates do not index a model of {n} parameters"
        )));
    }
    for j in 0..k {
        let lower_ok = req.lower[j] == sp.lower[j] || req.lower[j] == 0.0;
        let upper_ok = req.upper[j] == sp.upper[j] || req.upper[j] == 0.0;
        if !(lower_ok && upper_ok && [0.0, 1.0, -1.0].contains(&req.side[j])) {
            return Err(ComputeError::Unsupported(
                "descents on the device whose bounds are not the fit's or 0, or sides not ±1 or 0",
            ));
        }
    }
    if req.polish.is_some() && (req.settle.is_some() || req.watch.is_some() || req.passes > 0) {
        return Err(request_error(
            "Newton steps asked for with restarts, a watch or settling".into(),
        ));
    }
    if req.watch.is_some_and(|w| w.k >= k) {
        return Err(request_error("watched coordinate out of range".into()));
    }
    if sp.settings.memory == 0 || sp.settings.memory > MAX_MEMORY {
        return Err(ComputeError::Unsupported(
            "descents with no or more than 16 correction pairs on the device",
        ));
    }
    if sp.settings.full_first_step {
        return Err(ComputeError::Unsupported(
            "descents whose first step is the whole gradient on the device",
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
        let m = &self.session().model;
        for d in data {
            for (what, len, expected) in [
                ("main counts", d.main.len(), m.n_main),
                ("auxiliary data", d.aux.len(), m.n_aux()),
            ] {
                if len != expected {
                    return Err(ComputeError::Length {
                        what,
                        expected,
                        got: len,
                    });
                }
            }
        }
        let kinked = &self.session().space.kinked;
        for r in reqs {
            check(r, n)?;
            if r.space
                .free
                .iter()
                .zip(&r.space.kinks)
                .any(|(&i, &k)| kinked[i] != k)
            {
                return Err(request_error(
                    "kinks: a descent's kinked coordinates are not the likelihood's".into(),
                ));
            }
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
        let t_rows = clock.lap();
        let rows_ptr = self.data_base();
        let session = self.session().clone();
        let n = session.model.n_params();
        let count = reqs.len();
        let settings = reqs[0].space.settings;
        let memory = settings.memory;
        let threads = RUN_THREADS;
        let shared = (256.max(4 * memory * threads as usize / 32) * 8) as u32;
        let stream = self.stream().clone();
        // The launch's inputs, packed in two host buffers and sent in two copies: the fits
        // the descents belong to (one row of 5 n values per distinct fit: the held values, the
        // scales, the bounds, the held flags), each descent's start, its rules; then its codes
        // (n bytes: the bounds that are 0 instead of the fit's, the sides).
        let mut fits: Vec<&DescentSpace> = Vec::new();
        let mut by_ptr: HashMap<usize, usize> = HashMap::new();
        let mut fit_of = Vec::with_capacity(count);
        for req in reqs {
            let ptr = Arc::as_ptr(&req.space) as usize;
            let j = *by_ptr.entry(ptr).or_insert_with(|| {
                let sp = &*req.space;
                match fits.iter().position(|f| same_fit(f, sp)) {
                    Some(j) => j,
                    None => {
                        fits.push(sp);
                        fits.len() - 1
                    }
                }
            });
            fit_of.push(j);
        }
        let n_fits = fits.len();
        let t_fits = clock.lap();
        let len = n_fits * 5 * n + count * (n + RUN_RULE);
        let b = RunBuffers::ready(&mut self.runs, &session, &stream, memory, (count, n_fits))?;
        {
            b.host_in.resize(b.host_in.len().max(len), 0.0);
            let (table, rest) = b.host_in[..len].split_at_mut(n_fits * 5 * n);
            let (z, rule) = rest.split_at_mut(count * n);
            for (row, sp) in table.chunks_mut(5 * n).zip(&fits) {
                let (held, rest) = row.split_at_mut(n);
                let (scale, rest) = rest.split_at_mut(n);
                let (lo, rest) = rest.split_at_mut(n);
                let (hi, flag) = rest.split_at_mut(n);
                held.copy_from_slice(&sp.held);
                lo.copy_from_slice(&sp.held);
                hi.copy_from_slice(&sp.held);
                scale.fill(1.0);
                flag.fill(1.0);
                for (k, &i) in sp.free.iter().enumerate() {
                    (scale[i], lo[i], hi[i], flag[i]) =
                        (sp.scale[k], sp.lower[k], sp.upper[k], 0.0);
                }
            }
            for (r, req) in reqs.iter().enumerate() {
                let sp = &req.space;
                let zr = &mut z[r * n..(r + 1) * n];
                for (k, &i) in sp.free.iter().enumerate() {
                    zr[i] = req.z0[k];
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
                    fit_of[r] as f64,
                    if req.settle.is_some() { 1.0 } else { 0.0 },
                    if req.polish.is_some() { 1.0 } else { 0.0 },
                    req.polish.unwrap_or(0.0),
                ]);
            }
            b.host_code.clear();
            b.host_code.resize(count * n, 0);
            let codes = &mut b.host_code;
            for (r, req) in reqs.iter().enumerate() {
                let sp = &req.space;
                for (k, &i) in sp.free.iter().enumerate() {
                    let mut c = 0;
                    if req.lower[k] != sp.lower[k] {
                        c |= code("RUN_LOWER_0");
                    }
                    if req.upper[k] != sp.upper[k] {
                        c |= code("RUN_UPPER_0");
                    }
                    if req.side[k] > 0.0 {
                        c |= code("RUN_SIDE_UP");
                    } else if req.side[k] < 0.0 {
                        c |= code("RUN_SIDE_DOWN");
                    }
                    if let Some(s) = &req.settle {
                        if s.lower[k] != sp.lower[k] {
                            c |= code("RUN_SETTLE_LOWER_0");
                        }
                        if s.upper[k] != sp.upper[k] {
                            c |= code("RUN_SETTLE_UPPER_0");
                        }
                    }
                    codes[r * n + i] = c;
                }
            }
        }
        let t_fill = clock.lap();
        // (From pageable memory: page-locked buffers of the size of the largest launches cost
        // more to allocate, each time they grow, than these copies.)
        stream
            .memcpy_htod(&b.host_in[..len], &mut b.inp.slice_mut(0..len))
            .map_err(driver("upload of descents on the device"))?;
        stream
            .memcpy_htod(&b.host_code[..], &mut b.code.slice_mut(0..count * n))
            .map_err(driver("upload of descents on the device"))?;
        stream
            .memset_zeros(&mut b.counter)
            .map_err(driver("cuMemsetD32 (descents)"))?;
        let layout = StateLayout::new(n, memory, 0);
        let scratch_len = session.tables.host.scratch_len;
        let func = &session.kernels.fit_runs;
        let workers = b.workers;
        let inp = b.inp.device_ptr(&stream).0;
        let z_at = inp + (n_fits * 5 * n * 8) as u64;
        let code_at = b.code.device_ptr(&stream).0;
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
                // (No whole-fit budget: these descents are steps of a host fit.)
                i32::MAX,
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
                // (The kernel reads each descent's scales from its fit's row.)
                0,
                kink_d.device_ptr(&stream).0,
                state.device_ptr_mut(&stream).0,
                scratch.device_ptr_mut(&stream).0,
                counter.device_ptr_mut(&stream).0,
                outp,
                outp + (count * FIT_OUT * 8) as u64,
                0,
                0,
                0,
                z_at,
                inp,
                code_at,
                0,
                z_at + (count * n * 8) as u64,
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
        // kernel indexes: workers × state and scratch, n_fits × 5 n fits, count × n starts,
        // count × RUN_RULE rules (each naming a fit of the table), count × n codes, count ×
        // FIT_OUT results and count × n end points; the dataset rows hold every row a rule
        // names (resolved above).
        unsafe { l.launch(cfg) }.map_err(driver("launch of fit_runs"))?;
        let out_len = count * (FIT_OUT + n);
        b.host_out.resize(b.host_out.len().max(out_len), 0.0);
        stream
            .memcpy_dtoh(&b.outp.slice(0..out_len), &mut b.host_out[..out_len])
            .map_err(driver("download of descent results"))?;
        stream.synchronize().map_err(driver("fit_runs"))?;
        clock.report(|| {
            format!(
                "descents {count} setup {:.6} s, run {:.6} s (rows {t_rows:.6}, fits {t_fits:.6}, \
                 fill {t_fill:.6}, copies {setup:.6})",
                t_rows + t_fits + t_fill + setup,
                clock.lap()
            )
        });
        let (o, xs) = b.host_out[..out_len].split_at(count * FIT_OUT);
        reqs.iter()
            .enumerate()
            .map(|(r, req)| {
                let o = &o[r * FIT_OUT..(r + 1) * FIT_OUT];
                let code = o[6] as i32;
                let x = &xs[r * n..(r + 1) * n];
                let mut z: Vec<f64> = req.space.free.iter().map(|&i| x[i]).collect();
                // A settled end: the coordinates its last round held at their kink come back as
                // −0 (where no round replaced the descent's end, those the descent held).
                let pinned = req.settle.as_ref().map(|s| match o[1] > 0.0 {
                    true => {
                        let at: Vec<usize> = (0..z.len())
                            .filter(|&k| z[k] == 0.0 && z[k].is_sign_negative())
                            .collect();
                        for &k in &at {
                            z[k] = 0.0;
                        }
                        at
                    }
                    false => s.pinned.clone(),
                });
                let (converged, given_up, reason) = if code == FIT_GAVE_UP {
                    (false, true, "given up".to_owned())
                } else {
                    let status =
                        ResidentStatus::from_code(code).ok_or_else(|| CudaError::Driver {
                            call: "fit_runs".into(),
                            message: format!("descent {r} came back without a status ({})", o[6]),
                        })?;
                    // (`polish::stalled` reads a stopped line search by its reason's words.)
                    let reason = match status {
                        ResidentStatus::Converged => "converged (L-BFGS-B on the device)",
                        ResidentStatus::FailedStart => {
                            "objective is not finite at the starting point"
                        }
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
                    pinned,
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
    /// Descents, and distinct fits among them, the buffers hold.
    cap: usize,
    fits_cap: usize,
    memory: usize,
    workers: usize,
    /// Inputs (5 n doubles a fit, n + RUN_RULE doubles and n code bytes a descent) on the
    /// device and their staging on the host.
    inp: CudaSlice<f64>,
    host_in: Vec<f64>,
    code: CudaSlice<u8>,
    host_code: Vec<u8>,
    /// Results (FIT_OUT + n doubles a descent) on the device and on the host.
    outp: CudaSlice<f64>,
    host_out: Vec<f64>,
    kink: CudaSlice<i32>,
    state: CudaSlice<f64>,
    scratch: CudaSlice<f64>,
    counter: CudaSlice<i32>,
}
impl RunBuffers {
    /// `slot`'s buffers, made (again) where they hold fewer than `count` descents of `fits`
    /// distinct fits, or for another memory (grown by doubling, from 1024 descents and 16
    /// fits).
    fn ready<'a>(
        slot: &'a mut Option<Box<RunBuffers>>,
        session: &crate::batch::Session,
        stream: &Arc<cudarc::driver::CudaStream>,
        memory: usize,
        (count, fits): (usize, usize),
    ) -> Result<&'a mut RunBuffers> {
        if slot
            .as_ref()
            .is_some_and(|b| b.cap >= count && b.fits_cap >= fits && b.memory == memory)
        {
            return Ok(slot.as_mut().expect("checked"));
        }
        let (old_cap, old_fits) = slot.as_ref().map_or((0, 0), |b| (b.cap, b.fits_cap));
        *slot = None;
        let n = session.model.n_params();
        let cap = count.max(old_cap).next_power_of_two().max(1024);
        let fits_cap = fits.max(old_fits).next_power_of_two().max(16);
        let in_len = fits_cap * 5 * n + cap * (n + RUN_RULE);
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
            fits_cap,
            memory,
            workers,
            inp: alloc(in_len)?,
            host_in: Vec::new(),
            code: stream
                .alloc_zeros::<u8>(cap * n.max(1))
                .map_err(driver("cuMemAlloc (descents)"))?,
            host_code: Vec::new(),
            outp: alloc(cap * (FIT_OUT + n))?,
            host_out: Vec::new(),
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

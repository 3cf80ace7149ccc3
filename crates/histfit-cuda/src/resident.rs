//! Fits resident on the device ([`ResidentFits`] for [`CudaBatch`]): an ensemble of toys drawn
//! and fitted by the `fit_toys` kernel (`fit_toys_kinked` where a free parameter has a kink:
//! the host fit's kink rules in the kernel) in one launch, with only per-toy results coming
//! back.
//!
//! The kernel runs a fixed number of worker blocks (as many as the device keeps resident at
//! once); each takes the next toy index from a counter, draws the toy with the same Philox
//! streams as the CPU (from the host's rates, as [`crate::toys`] does), fits it and writes
//! [`FIT_OUT`] values. A toy's fit depends only on the toy, never on which worker ran it, so
//! results are the same for any number of workers, launches or devices an ensemble is split
//! into. Worker state lives in global memory: where it does not fit, fewer workers run (the
//! ensemble is chunked, never aborted).
//!
//! The kernels' argument struct, state layout, worker allotment and status codes here serve
//! `fit_runs` too (the descents of host fits, `descents.rs`).

use crate::batch::Session;
use crate::toys::AuxInputs;
use crate::{driver, CudaBatch, CudaError, Result};
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig, PushKernelArg,
};
use histfit_compute::{
    ComputeError, Evaluator, Progress, ResidentFit, ResidentFits, ResidentRequest, ResidentStatus,
};
use histfit_model::Constraint;
use std::sync::Arc;

/// Values per toy in the kernel's result rows: f, constant, POI, projected gradient,
/// iterations, evaluations, status, unmoved coordinates, whether a bound was met.
pub const FIT_OUT: usize = 9;
/// The most correction pairs a resident fit keeps: more is refused (`Unsupported`), and the
/// host fits instead.
pub const MAX_MEMORY: usize = 16;
/// Toys per launch: bounds the result buffers (9 doubles a toy), and with the fitted vectors
/// asked for, their buffer (n doubles a toy). Each launch ends in a tail of its slowest fits, so
/// fewer, longer launches are faster.
const TOYS_PER_LAUNCH: usize = 1 << 20;
const TOYS_PER_LAUNCH_WITH_PARAMS: usize = 1 << 16;

/// Threads per fit. Fixed: the kernel's block reductions run in an order set by the block size,
/// so a fit's last bits depend on it (64, 128 and 256 threads measured alike on an H100 for
/// `fit_toys`; `fit_toys_kinked` with 64 took 1.5× the time of 128, BENCHMARKS.md issue 23,
/// session 30).
pub const FIT_THREADS: u32 = 128;

/// The fit kernel's minimum resident blocks per SM (its launch bounds): a higher count caps its
/// registers per thread. 4 ran tHu's ensembles twice as fast as the compiler's own choice on an
/// H100 (BENCHMARKS.md, issue 23).
pub const MIN_BLOCKS: u32 = 4;

/// A descent's end in the kernels' status row: given up by its watch
/// ([`histfit_compute::Watch`]).
pub const FIT_GAVE_UP: i32 = 7;
/// Values per descent of `fit_runs`' rule rows: the watched coordinate (−1: none), its ceiling,
/// first iteration and EDM factor, the iterations held, the restarts, the dataset row, the
/// empty-bin wall, the dataset's constant, the descent's fit (its row of the launch's spaces),
/// 1 where it is settled at its kinks ([`histfit_compute::Settle`]), 1 where it is Newton steps
/// instead ([`histfit_compute::DescentRequest::polish`]) and f at the start of those.
pub const RUN_RULE: usize = 13;

/// A descent's per-coordinate codes (`fit_runs`): the lower (upper) bound is 0 instead of the
/// fit's; the coordinate is kept to the upper (lower) side of its kink, evaluated there at 0;
/// the lower (upper) bound of the rounds that settle the descent is 0 instead of the fit's.
pub const RUN_CODES: [(&str, u8); 6] = [
    ("RUN_LOWER_0", 1),
    ("RUN_UPPER_0", 2),
    ("RUN_SIDE_UP", 4),
    ("RUN_SIDE_DOWN", 8),
    ("RUN_SETTLE_LOWER_0", 16),
    ("RUN_SETTLE_UPPER_0", 32),
];

/// The n-vectors of a worker's state before S: 16 of the fit's (see [`StateLayout`]), 7 of the
/// orthant rounds, and 31 of a kinked toy fit's points and lists (`KState` in histfit.cu).
const KINKED_VECTORS: usize = 54;

/// Where the kernel finds each part of a worker's state (doubles from its start): seven
/// n-vectors of the descent (z, g, d, trial z and g, saved z and g), four of the direction
/// (breakpoints, Cauchy direction and point, flags), the point (and its gradient) before a
/// finishing round or a restart, a descent's box and sides (three n-vectors), the orthant
/// rounds that settle a descent (seven n-vectors: the best point, its and the round's
/// coordinates held at their kink, the two one-sided gradients, the rounds' box), a kinked toy
/// fit's points and lists (31 n-vectors), S and Y (m × n each), the small dense algebra (`Small`
/// in histfit.cu), then the toy's row.
pub(crate) struct StateLayout {
    pub s_off: usize,
    pub small_off: usize,
    pub row_off: usize,
    pub len: usize,
}

impl StateLayout {
    pub fn new(n: usize, memory: usize, row: usize) -> StateLayout {
        // (The kernel places the first KINKED_VECTORS n-vectors itself, in this order; S must
        // follow them.)
        let s_off = KINKED_VECTORS * n;
        let small_off = s_off + 2 * memory * n;
        let small_len = 22 * memory * memory + 19 * memory + 16;
        let row_off = small_off + small_len;
        StateLayout {
            s_off,
            small_off,
            row_off,
            len: row_off + row,
        }
    }
}

/// The kernel's `FitArgs` (layout matches the C struct: two u64, eight ints, eight doubles,
/// twenty-three pointers, five lengths and offsets).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct FitArg {
    pub seed: u64,
    pub first: u64,
    pub ints: [i32; 8],
    pub reals: [f64; 8],
    pub ptrs: [u64; 23],
    pub lens: [i64; 5],
}

// SAFETY: plain old data whose layout matches `struct FitArgs` in histfit.cu.
unsafe impl DeviceRepr for FitArg {}
const _: () = assert!(
    std::mem::size_of::<FitArg>() == 336,
    "FitArgs is 336 bytes in histfit.cu"
);

/// The worker blocks of a fit kernel's launch of `count` fits: as many as the device keeps
/// resident (or `workers`), fewer where their state does not fit (halved until it does); with
/// their state and scratch.
pub(crate) fn allot_workers(
    session: &Session,
    stream: &Arc<CudaStream>,
    func: &cudarc::driver::CudaFunction,
    (threads, shared): (u32, u32),
    (state_len, scratch_len): (usize, usize),
    workers: Option<usize>,
    count: usize,
) -> Result<(usize, CudaSlice<f64>, CudaSlice<f64>)> {
    let sms = session
        .gpu
        .ctx
        .attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )
        .map_err(driver("cuDeviceGetAttribute"))? as usize;
    let per_sm = func
        .occupancy_max_active_blocks_per_multiprocessor(threads, shared as usize, None)
        .map_err(driver("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?
        .max(1) as usize;
    let mut workers = workers.unwrap_or(sms.max(1) * per_sm).min(count.max(1));
    loop {
        let alloc = |len: usize| -> Result<CudaSlice<f64>> {
            stream
                .alloc_zeros::<f64>((workers * len).max(1))
                .map_err(driver("cuMemAlloc (resident fits)"))
        };
        match (alloc(state_len), alloc(scratch_len)) {
            (Ok(a), Ok(b)) => return Ok((workers, a, b)),
            (Err(CudaError::OutOfMemory(msg)), _) | (_, Err(CudaError::OutOfMemory(msg))) => {
                if workers == 1 {
                    return Err(CudaError::OutOfMemory(format!(
                        "one resident fit needs {} bytes: {msg}",
                        (state_len + scratch_len) * 8
                    )));
                }
                workers = workers.div_ceil(2);
            }
            (Err(e), _) | (_, Err(e)) => return Err(e),
        }
    }
}

/// The per-toy inputs of `req` (starts, list) against its toy count, before any split slices
/// them.
fn check_per_toy(req: &ResidentRequest<'_>, n: usize) -> histfit_compute::Result<()> {
    if let Some(s) = req.starts {
        let toys = req.indices.end.saturating_sub(req.indices.start) as usize;
        if s.len() != toys * n {
            return Err(request_error(format!(
                "starts: {} values for {toys} toys of {n} parameters",
                s.len()
            )));
        }
    }
    if let Some(l) = req.list {
        let toys = req.indices.end.saturating_sub(req.indices.start) as usize;
        if l.len() != toys {
            return Err(request_error(format!(
                "list: {} toys for {toys} positions",
                l.len()
            )));
        }
    }
    Ok(())
}

/// The first of `lengths` (what, length) that is not `expected` values, said in `unit`s.
pub(crate) fn length_mismatch(
    lengths: &[(&str, usize)],
    expected: usize,
    unit: &str,
) -> Option<String> {
    lengths
        .iter()
        .find(|(_, len)| *len != expected)
        .map(|(what, len)| format!("{what}: {len} values for {expected} {unit}"))
}

fn request_error(msg: String) -> ComputeError {
    ComputeError::InvalidData {
        place: "resident toy fits".into(),
        rule: msg,
    }
}

impl ResidentFits for CudaBatch {
    /// On this session alone, or split by toy index over it and its peers ([`crate::split`]):
    /// a toy's fit does not depend on where it runs, so the results are those of one device.
    fn fit_toys_resident(
        &mut self,
        req: &ResidentRequest<'_>,
    ) -> histfit_compute::Result<Vec<ResidentFit>> {
        check_per_toy(req, self.session().model.n_params())?;
        if self.peers.is_empty() {
            return fit_toys(self.session(), req, None);
        }
        let plan = match self.split {
            Some(plan) => plan,
            None => crate::split::SplitPlan::from_env()?,
        };
        crate::split::fit_split(self.session(), &self.peers, plan, req, |session, part| {
            fit_toys(session, part, None)
        })
    }
}

impl CudaBatch {
    /// [`ResidentFits::fit_toys_resident`] with `workers` worker blocks (at most; fewer where
    /// their memory does not fit): results do not depend on it (the split tests use it).
    pub fn fit_toys_with_workers(
        &self,
        req: &ResidentRequest<'_>,
        workers: usize,
    ) -> histfit_compute::Result<Vec<ResidentFit>> {
        fit_toys(self.session(), req, Some(workers.max(1)))
    }

    /// The device memory one worker block of a resident ensemble holds with L-BFGS-B memory
    /// `memory` (its state and scratch): where the free memory holds fewer workers than the
    /// device keeps resident, an ensemble runs on fewer (the test of that chunking sizes the
    /// memory it leaves by it).
    pub fn resident_worker_bytes(&self, memory: usize) -> usize {
        let session = self.session();
        let m = &session.model;
        let layout = StateLayout::new(m.n_params(), memory, m.n_main + m.n_aux());
        (layout.len + session.tables.host.scratch_len) * std::mem::size_of::<f64>()
    }
}

fn fit_toys(
    session: &Session,
    req: &ResidentRequest<'_>,
    workers: Option<usize>,
) -> histfit_compute::Result<Vec<ResidentFit>> {
    let m = &session.model;
    let n = m.n_params();
    let lengths = [
        ("generating parameters", req.gen_params.len()),
        ("init", req.init.len()),
        ("model init", req.model_init.len()),
        ("fixed", req.fixed.len()),
        ("lower bounds", req.lower.len()),
        ("upper bounds", req.upper.len()),
        ("scales", req.scales.len()),
        ("kinks", req.kinks.len()),
    ];
    if let Some(msg) = length_mismatch(&lengths, n, "parameters") {
        return Err(request_error(msg));
    }
    check_per_toy(req, n)?;
    if req.report.is_some_and(|p| p >= n) {
        return Err(request_error("reported parameter out of range".into()));
    }
    if let Some(i) =
        (0..n).find(|&i| !(req.fixed[i] || req.scales[i].is_finite() && req.scales[i] > 0.0))
    {
        return Err(request_error(format!(
            "scale {} of parameter {i}: a free parameter's scale is a positive finite number",
            req.scales[i]
        )));
    }
    histfit_compute::rng::check_generation_params(req.gen_params)?;
    let total = req.indices.end.saturating_sub(req.indices.start) as usize;
    if total == 0 {
        return Ok(Vec::new());
    }
    if req.settings.memory == 0 || req.settings.memory > MAX_MEMORY {
        return Err(ComputeError::Unsupported(
            "resident fits with no or more than 16 correction pairs",
        ));
    }
    if req.settings.full_first_step {
        return Err(ComputeError::Unsupported(
            "resident fits whose first step is the whole gradient",
        ));
    }
    let clock = crate::timing::Clock::start();
    let mut lam = vec![0.0; m.n_main];
    session
        .host_rates
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .expected_main(req.gen_params, &mut lam)?;
    let aux = AuxInputs::new(m, req.gen_params);
    let half_ln_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
    let gauss_const: f64 = m
        .aux_params
        .iter()
        .filter_map(|&p| match m.parameters[p].constraint {
            Constraint::Gauss { sigma } => Some(sigma.ln() + half_ln_2pi),
            _ => None,
        })
        .sum();
    // The fitting code's coordinates (histfit-infer's fit/problem.rs): z = θ/s, fixed
    // parameters held at their value (scale 1, lower = upper).
    let (mut z_init, mut z_model) = (vec![0.0; n], vec![0.0; n]);
    let (mut z_lo, mut z_hi, mut scale) = (vec![0.0; n], vec![0.0; n], vec![1.0; n]);
    for i in 0..n {
        if req.fixed[i] {
            (z_init[i], z_lo[i], z_hi[i]) = (req.init[i], req.init[i], req.init[i]);
            z_model[i] = req.init[i];
        } else {
            let s = req.scales[i];
            scale[i] = s;
            (z_init[i], z_lo[i], z_hi[i]) = (req.init[i] / s, req.lower[i] / s, req.upper[i] / s);
            z_model[i] = req.model_init[i] / s;
        }
    }
    let kink: Vec<i32> = req.kinks.iter().map(|&k| i32::from(k)).collect();
    let memory = req.settings.memory;

    let stream = session
        .gpu
        .ctx
        .new_stream()
        .map_err(driver("cuStreamCreate"))?;
    let up_f = |v: &[f64]| -> Result<CudaSlice<f64>> {
        stream
            .clone_htod(if v.is_empty() { &[0.0][..] } else { v })
            .map_err(driver("upload of a resident fit's inputs"))
    };
    let up_i = |v: &[i32]| -> Result<CudaSlice<i32>> {
        stream
            .clone_htod(if v.is_empty() { &[0][..] } else { v })
            .map_err(driver("upload of a resident fit's inputs"))
    };
    let inputs_f = [
        up_f(&lam)?,
        up_f(&aux.center)?,
        up_f(&aux.sigma)?,
        up_f(&z_init)?,
        up_f(&z_lo)?,
        up_f(&z_hi)?,
        up_f(&scale)?,
        up_f(&z_model)?,
    ];
    let inputs_i = [up_i(&aux.kind)?, up_i(&kink)?];

    // A model whose free parameters have kinks: the kink rules run in the kernel too.
    let kinked = (0..n).any(|i| req.kinks[i] && !req.fixed[i] && z_lo[i] < z_hi[i]);
    let threads = FIT_THREADS;
    // Reductions: 256 doubles (the likelihood's fixed-order sums), and 4 per pair and warp (the
    // new pair's rows of the compact matrices, summed in one pass).
    let shared = (256.max(4 * memory * threads as usize / 32) * 8) as u32;
    let row = m.n_main + m.n_aux();
    let layout = StateLayout::new(n, memory, row);
    let state_len = layout.len;
    let scratch_len = session.tables.host.scratch_len;
    let (func, name) = match kinked {
        true => (&session.kernels.fit_toys_kinked, "fit_toys_kinked"),
        false => (&session.kernels.fit_toys, "fit_toys"),
    };
    let launch_of = format!("launch of {name}");
    let per_launch = if req.want_params {
        TOYS_PER_LAUNCH_WITH_PARAMS
    } else {
        TOYS_PER_LAUNCH
    };
    let mut per_launch = per_launch.min(total);
    // Result buffers first, the launch shortened until they fit.
    let (mut out_d, mut x_d, mut starts_d) = loop {
        let alloc = |len: usize| -> Result<CudaSlice<f64>> {
            stream
                .alloc_zeros::<f64>(len.max(1))
                .map_err(driver("cuMemAlloc (resident fit results)"))
        };
        let want_x = if req.want_params { per_launch * n } else { 1 };
        let want_s = if req.starts.is_some() {
            per_launch * n
        } else {
            1
        };
        match (alloc(per_launch * FIT_OUT), alloc(want_x), alloc(want_s)) {
            (Ok(a), Ok(b), Ok(c)) => break (a, b, c),
            (Err(CudaError::OutOfMemory(msg)), _, _)
            | (_, Err(CudaError::OutOfMemory(msg)), _)
            | (_, _, Err(CudaError::OutOfMemory(msg))) => {
                if per_launch == 1 {
                    return Err(
                        CudaError::OutOfMemory(format!("resident fit results: {msg}")).into(),
                    );
                }
                per_launch = per_launch.div_ceil(2);
            }
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return Err(e.into()),
        }
    };
    let (workers, mut state, mut scratch) = allot_workers(
        session,
        &stream,
        func,
        (threads, shared),
        (state_len, scratch_len),
        workers,
        per_launch,
    )?;
    let mut list_d = stream
        .alloc_zeros::<u64>(if req.list.is_some() { per_launch } else { 1 })
        .map_err(driver("cuMemAlloc (resident fit toy list)"))?;
    let mut counter = stream
        .alloc_zeros::<i32>(1)
        .map_err(driver("cuMemAlloc (resident fits)"))?;
    let counter_ptr = counter.device_ptr(&stream).0;

    let setup = clock.lap();
    let mut results = Vec::with_capacity(total);
    let mut first = req.indices.start;
    while first < req.indices.end {
        let count = ((req.indices.end - first) as usize).min(per_launch);
        if let Some(list) = req.list {
            let at = (first - req.indices.start) as usize;
            stream
                .memcpy_htod(&list[at..at + count], &mut list_d.slice_mut(0..count))
                .map_err(driver("upload of a resident fit's toy list"))?;
        }
        if let Some(starts) = req.starts {
            // This launch's toys' starts, scaled as z_init (fixed parameters at their value).
            let at = (first - req.indices.start) as usize * n;
            let mut z = starts[at..at + count * n].to_vec();
            for row in z.chunks_mut(n) {
                for i in 0..n {
                    row[i] = if req.fixed[i] {
                        req.init[i]
                    } else {
                        row[i] / scale[i]
                    };
                }
            }
            stream
                .memcpy_htod(&z, &mut starts_d.slice_mut(0..count * n))
                .map_err(driver("upload of a resident fit's starts"))?;
        }
        stream
            .memset_zeros(&mut counter)
            .map_err(driver("cuMemsetD32 (resident fits)"))?;
        // Progress reads the counter only once this launch has zeroed it.
        let zeroed = match req.progress {
            Some(_) => Some(
                stream
                    .record_event(None)
                    .map_err(driver("cuEventRecord (resident fits)"))?,
            ),
            None => None,
        };
        let f = |s: &CudaSlice<f64>| s.device_ptr(&stream).0;
        let arg = FitArg {
            seed: req.seed,
            first,
            ints: [
                count as i32,
                req.report.map_or(-1, |p| p as i32),
                memory as i32,
                i32::try_from(req.settings.max_iterations).unwrap_or(i32::MAX),
                i32::try_from(req.settings.max_evaluations).unwrap_or(i32::MAX),
                i32::from(req.want_params),
                0,
                i32::try_from(req.settings.fit_evaluations).unwrap_or(i32::MAX),
            ],
            reals: [
                req.settings.pgtol,
                req.settings.ftol,
                req.settings.edm,
                req.settings.c1,
                req.settings.c2,
                gauss_const,
                req.settings.certify,
                req.settings.polish_pg,
            ],
            ptrs: [
                f(&inputs_f[0]),
                inputs_i[0].device_ptr(&stream).0,
                f(&inputs_f[1]),
                f(&inputs_f[2]),
                f(&inputs_f[3]),
                f(&inputs_f[4]),
                f(&inputs_f[5]),
                f(&inputs_f[6]),
                inputs_i[1].device_ptr(&stream).0,
                state.device_ptr_mut(&stream).0,
                scratch.device_ptr_mut(&stream).0,
                counter.device_ptr_mut(&stream).0,
                out_d.device_ptr_mut(&stream).0,
                if req.want_params {
                    x_d.device_ptr_mut(&stream).0
                } else {
                    0
                },
                f(&inputs_f[7]),
                if req.starts.is_some() {
                    starts_d.device_ptr_mut(&stream).0
                } else {
                    0
                },
                if req.list.is_some() {
                    list_d.device_ptr_mut(&stream).0
                } else {
                    0
                },
                0,
                0,
                0,
                0,
                0,
                0,
            ],
            lens: [
                state_len as i64,
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
        // SAFETY: the arguments match `fit_toys(Tables, FitArgs)` (and `fit_toys_kinked`'s); every buffer holds what the
        // kernel indexes: workers × state_len and × scratch_len, count × FIT_OUT results,
        // count × n fitted parameters when asked, and count × n starts and count toy indices
        // where the request gives them (null pointers otherwise).
        unsafe { l.launch(cfg) }.map_err(driver(&launch_of))?;
        let mut reported = 0;
        if let (Some(progress), Some(zeroed)) = (req.progress, &zeroed) {
            watch(
                &stream,
                zeroed,
                counter_ptr,
                workers.min(count),
                count,
                progress,
                &mut reported,
            );
        }
        let out = stream
            .clone_dtoh(&out_d.slice(0..count * FIT_OUT))
            .map_err(driver("download of resident fit results"))?;
        let xs = if req.want_params {
            Some(
                stream
                    .clone_dtoh(&x_d.slice(0..count * n))
                    .map_err(driver("download of resident fit results"))?,
            )
        } else {
            None
        };
        stream.synchronize().map_err(driver(name))?;
        if let Some(progress) = req.progress.filter(|_| count > reported) {
            (progress.0)(count - reported);
        }
        for k in 0..count {
            let o = &out[k * FIT_OUT..(k + 1) * FIT_OUT];
            let status =
                ResidentStatus::from_code(o[6] as i32).ok_or_else(|| CudaError::Driver {
                    call: name.into(),
                    message: format!(
                        "toy {} came back without a status ({})",
                        req.toy(first + k as u64),
                        o[6]
                    ),
                })?;
            results.push(ResidentFit {
                index: req.toy(first + k as u64),
                nll: o[0],
                constant: o[1],
                poi: o[2],
                projected_gradient: o[3],
                iterations: o[4] as usize,
                evaluations: o[5] as usize,
                status,
                unmoved: o[7] as usize,
                bounded: o[8] != 0.0,
                bestfit: xs.as_ref().map(|x| x[k * n..(k + 1) * n].to_vec()),
            });
        }
        first += count as u64;
    }
    clock.report(|| {
        let evals: Vec<usize> = results.iter().map(|r| r.evaluations).collect();
        let most = evals.iter().copied().max().unwrap_or(0);
        let mean = evals.iter().sum::<usize>() as f64 / evals.len().max(1) as f64;
        format!(
            "cuda:{}: a block of {total} toys{}, inputs and buffers {setup:.3} s, fits {:.3} s \
             (evaluations per fit: mean {mean:.0}, most {most})",
            session.gpu.info.ordinal,
            if kinked { " (kinked)" } else { "" },
            clock.lap()
        )
    });
    Ok(results)
}

/// Reports a running launch's progress until it ends: the toys its workers have taken (the
/// kernel's work counter, read while it runs, once `zeroed` has passed) less one in progress per
/// worker. The end is checked every millisecond, the counter read every 10 ms for the first
/// second and every 100 ms after. Progress is only a display: where a query fails, watching
/// stops and the launch's own synchronisation reports the error.
fn watch(
    stream: &Arc<CudaStream>,
    zeroed: &cudarc::driver::CudaEvent,
    counter: CUdeviceptr,
    workers: usize,
    count: usize,
    progress: Progress<'_>,
    reported: &mut usize,
) {
    let Ok(end) = stream.record_event(None) else {
        return;
    };
    let start = std::time::Instant::now();
    let mut next_read = std::time::Duration::ZERO;
    while let Ok(false) = end.try_is_complete() {
        std::thread::sleep(std::time::Duration::from_millis(1));
        let now = start.elapsed();
        if now < next_read || !matches!(zeroed.try_is_complete(), Ok(true)) {
            continue;
        }
        next_read =
            now + std::time::Duration::from_millis(if now.as_secs() < 1 { 10 } else { 100 });
        let mut taken = [0i32];
        // A synchronous copy on the legacy default stream, which does not wait for this
        // non-blocking stream's kernel: a snapshot of the counter while it runs. (The context
        // is bound again: the progress callback may have bound another on this thread.)
        // SAFETY: `counter` is the live allocation of one i32 that the kernel counts in.
        let read = stream.context().bind_to_thread().and_then(|()| unsafe {
            cudarc::driver::result::memcpy_dtoh_sync(&mut taken, counter)
        });
        if read.is_err() {
            return;
        }
        let finished = usize::try_from(taken[0])
            .unwrap_or(0)
            .saturating_sub(workers)
            .min(count);
        if finished > *reported {
            (progress.0)(finished - *reported);
            *reported = finished;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::KINKED_VECTORS;

    /// The kinked fit's state, as `kstate_of` in histfit.cu places it (its n-vectors after the
    /// first 23), ends where `StateLayout` puts S: a vector added there without room here would
    /// overlap S and Y.
    #[test]
    fn kinked_state_fits_the_layout() {
        let src = crate::kernels::SOURCE;
        let body = &src[src
            .find("KState kstate_of(")
            .expect("kstate_of in histfit.cu")..];
        let first: usize = body
            .split("st + ")
            .nth(1)
            .and_then(|r| r.split(" *").next())
            .and_then(|v| v.trim().parse().ok())
            .expect("kstate_of's first vector: st + N * P");
        let lens = body
            .split("const int len[] = {")
            .nth(1)
            .and_then(|r| r.split('}').next())
            .expect("kstate_of's table of lengths");
        let total: usize = lens
            .split(',')
            .map(|v| v.trim().parse::<usize>().expect("a length"))
            .sum();
        let count = lens.split(',').count();
        assert!(
            body.contains(&format!("j < {count};")),
            "kstate_of's loop covers its {count} vectors"
        );
        assert_eq!(first + total, KINKED_VECTORS);
    }
}

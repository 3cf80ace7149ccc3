//! [`CudaYields`]: sample yields as inputs that live in GPU memory — a PyTorch CUDA tensor, say —
//! for differentiable analyses that keep the network, its histogram and the statistic's gradient
//! on the device.
//!
//! The yields are copied device-to-device into this evaluator's own nominal table (it has its
//! own [`Session`], so no other evaluator sees them) and checked there by a kernel; fits run as
//! usual (parameters up, −ln L and its parameter gradient down: O(parameters) per step, never the
//! yields); the Asimov dataset built from the yields is made and kept on the device
//! ([`Dataset::resident`]); the statistic's gradient with respect to the yields is written by a
//! kernel straight into the caller's device buffer. Addresses are checked to lie in one device
//! allocation on this evaluator's GPU before anything reads or writes them.

use crate::batch::{CudaBatch, Outputs, Session};
use crate::{driver, CudaError, Result};
use cudarc::driver::{sys, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use histfit_compute::yields::{check_inputs, input_sample, yields_place};
use histfit_compute::HistFactoryData;
use histfit_compute::{
    BatchEvaluator, ComputeError, Dataset, Evaluator, OneAtATime, ParameterSpace, YieldGradTerms,
    YieldGradient,
};
use histfit_model::Model;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Keys of resident datasets: one per evaluator, unique in the process.
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// The evaluator of one model whose input yields live in GPU memory.
#[derive(Debug)]
pub struct CudaYields {
    batch: OneAtATime<CudaBatch>,
    /// The model's nominal yields, to restore the table between calls.
    pristine: CudaSlice<f64>,
    /// Whether the nominal table differs from the model's.
    changed: bool,
    flag: CudaSlice<i32>,
    /// Input sample-bins of the last gradient (host copy, device copy).
    in_sb: (Vec<i32>, Option<CudaSlice<i32>>),
    /// Where gradients go: device address and length (f64 values).
    out: Option<(u64, usize)>,
    key: u64,
    /// Auxiliary data of the resident Asimov row, as last uploaded.
    asimov_aux: Vec<f64>,
}

fn compute_err(e: CudaError) -> ComputeError {
    e.into()
}

impl CudaYields {
    /// Opens device `ordinal` with a session of its own for `model`.
    pub fn new(model: Arc<Model>, ordinal: usize) -> Result<CudaYields> {
        let session = Session::for_input_yields(model, ordinal)?;
        let batch = OneAtATime {
            batch: CudaBatch::from_session(session.clone()),
        };
        let stream = batch.batch.stream().clone();
        let n_sb = session.model.nominal.len().max(1);
        let pristine = stream
            .alloc_zeros::<f64>(n_sb)
            .map_err(driver("cuMemAlloc (yields)"))?;
        // SAFETY: both are live allocations of n_sb f64 on this context.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                pristine.device_ptr(&stream).0,
                session.tables.nominal_ptr(),
                n_sb * 8,
                stream.cu_stream(),
            )
        }
        .map_err(driver("copy of nominal yields"))?;
        let flag = stream
            .alloc_zeros::<i32>(1)
            .map_err(driver("cuMemAlloc (yields)"))?;
        Ok(CudaYields {
            batch,
            pristine,
            changed: false,
            flag,
            in_sb: (Vec::new(), None),
            out: None,
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            asimov_aux: Vec::new(),
        })
    }

    pub fn ordinal(&self) -> usize {
        self.batch.batch.session().gpu.info.ordinal
    }

    fn session(&self) -> Arc<Session> {
        self.batch.batch.session().clone()
    }

    /// Checks that `[ptr, ptr + 8·len)` is device memory of this evaluator's GPU: both ends
    /// (PyTorch's expandable segments map one tensor over several driver allocations, so the
    /// range is not required to be one allocation).
    fn check_range(&self, ptr: u64, len: usize, what: &str) -> Result<()> {
        let session = self.session();
        session
            .gpu
            .ctx
            .bind_to_thread()
            .map_err(driver("cuCtxSetCurrent"))?;
        let bad = |why: String| CudaError::Driver {
            call: what.to_string(),
            message: why,
        };
        if ptr == 0 || !ptr.is_multiple_of(8) {
            return Err(bad(format!("address {ptr:#x} is not an aligned f64 array")));
        }
        let attr = |at: u64, a: sys::CUpointer_attribute| -> std::result::Result<u64, String> {
            let mut v: u64 = 0;
            // SAFETY: every attribute asked for is written as at most 8 bytes into `v`.
            unsafe {
                sys::cuPointerGetAttribute((&mut v as *mut u64).cast(), a, at as sys::CUdeviceptr)
            }
            .result()
            .map_err(|e| format!("{e:?}"))?;
            Ok(v)
        };
        use sys::CUpointer_attribute::*;
        let device_memory = |at: u64| -> std::result::Result<usize, String> {
            let kind = attr(at, CU_POINTER_ATTRIBUTE_MEMORY_TYPE)? as u32;
            if kind != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
                && kind != sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32
            {
                return Err("host memory".into());
            }
            Ok(attr(at, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)? as u32 as usize)
        };
        let first = device_memory(ptr)
            .map_err(|e| bad(format!("address {ptr:#x} is not device memory ({e})")))?;
        if first != self.ordinal() {
            return Err(bad(format!(
                "the memory is on cuda:{first}, the evaluator on cuda:{}",
                self.ordinal()
            )));
        }
        let end = ptr + 8 * len.max(1) as u64 - 1;
        match device_memory(end) {
            Ok(o) if o == first => Ok(()),
            _ => Err(bad(format!(
                "{len} values from {ptr:#x} run past the end of device memory"
            ))),
        }
    }

    /// Restores every sample's yields to the model's (a device-to-device copy).
    pub fn reset_yields(&mut self) -> Result<()> {
        if !self.changed {
            return Ok(());
        }
        let session = self.session();
        let stream = self.batch.batch.stream().clone();
        // SAFETY: both are live allocations of n_sb f64 on this context.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                session.tables.nominal_ptr(),
                self.pristine.device_ptr(&stream).0,
                session.model.nominal.len() * 8,
                stream.cu_stream(),
            )
        }
        .map_err(driver("restoring nominal yields"))?;
        self.changed = false;
        Ok(())
    }

    /// Takes the yields of each input `(sample, address, length)` from `length` f64 values at
    /// that device address; every other sample keeps the model's. The values are copied on the
    /// device and checked there in one pass (finite values, no bin with a negative total).
    /// Histosys deltas follow the inputs as the model says (`YieldVariations`), as on the CPU;
    /// a sample given twice is refused. On error the model's yields are restored.
    ///
    /// # Safety
    /// Each address must stay valid, and its values unchanged by other streams, until this
    /// returns (each range is checked to lie in one device allocation of this GPU; its contents
    /// are the caller's).
    pub unsafe fn set_yields_device(
        &mut self,
        inputs: &[(usize, u64, usize)],
    ) -> std::result::Result<(), ComputeError> {
        self.reset_yields().map_err(compute_err)?;
        let session = self.session();
        let m = session.model.clone();
        let samples: Vec<usize> = inputs.iter().map(|i| i.0).collect();
        check_inputs(&m, &samples)?;
        // Everything is checked before anything is copied, so a refusal leaves the table as is.
        for &(sample, ptr, len) in inputs {
            let smp = input_sample(&m, sample)?;
            if len != smp.n_bins {
                return Err(ComputeError::InvalidData {
                    place: yields_place(&m, smp),
                    rule: format!("expected {} bins, got {len}", smp.n_bins),
                });
            }
            self.check_range(ptr, len, "yields in device memory")
                .map_err(compute_err)?;
        }
        let stream = self.batch.batch.stream().clone();
        for &(sample, ptr, len) in inputs {
            let dst = session.tables.nominal_ptr() + 8 * m.samples[sample].sb_start as u64;
            self.changed = true;
            // SAFETY: the source range was checked above, the destination is the sample's slice
            // of the nominal table.
            let copied = unsafe {
                cudarc::driver::result::memcpy_dtod_async(dst, ptr, len * 8, stream.cu_stream())
            };
            if let Err(e) = copied {
                self.reset_yields().map_err(compute_err)?;
                return Err(compute_err(driver("copy of yields")(e)));
            }
        }
        if inputs.is_empty() {
            return Ok(());
        }
        let f = self.check_nominal().map_err(compute_err)?;
        if f == i32::MAX {
            return Ok(());
        }
        self.reset_yields().map_err(compute_err)?;
        let n_sb = m.nominal.len() as i32;
        let (smp, k, rule) = if f < n_sb {
            // A non-finite value: its sample-bin.
            let sb = f as usize;
            let smp = m
                .samples
                .iter()
                .find(|l| (l.sb_start..l.sb_start + l.n_bins).contains(&sb))
                .expect("every sample-bin belongs to a sample");
            (smp, sb - smp.sb_start, "yields must be finite numbers")
        } else {
            // A main bin with a negative total: the input sample in that bin.
            let b = (f - n_sb) as usize;
            let smp = inputs
                .iter()
                .map(|i| &m.samples[i.0])
                .find(|l| (l.bin_start..l.bin_start + l.n_bins).contains(&b))
                .expect("only input yields can make a total negative");
            (
                smp,
                b - smp.bin_start,
                "the bin's total nominal yield would be negative",
            )
        };
        Err(ComputeError::InvalidData {
            place: format!("{} bin {k}", yields_place(&m, smp)),
            rule: rule.into(),
        })
    }

    /// Runs `check_yields` over the nominal table: `i32::MAX`, or the first failing key.
    fn check_nominal(&mut self) -> Result<i32> {
        let session = self.session();
        let stream = self.batch.batch.stream().clone();
        stream
            .memcpy_htod(&[i32::MAX], &mut self.flag)
            .map_err(driver("yield check"))?;
        let n_sb = session.model.nominal.len();
        let cfg = LaunchConfig {
            grid_dim: (n_sb.div_ceil(128).max(1) as u32, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut l = stream.launch_builder(&session.kernels.check_yields);
        l.arg(&session.tables.arg).arg(&mut self.flag);
        // SAFETY: matches check_yields(Tables, int*); the flag holds one int.
        unsafe { l.launch(cfg) }.map_err(driver("launch of check_yields"))?;
        let mut flag = [0i32];
        stream
            .memcpy_dtoh(&self.flag, &mut flag)
            .map_err(driver("yield check"))?;
        stream.synchronize().map_err(driver("yield check"))?;
        Ok(flag[0])
    }

    /// Where [`YieldGradient::yield_grad_sum`] writes: `len` f64 values at device address `ptr`.
    ///
    /// # Safety
    /// `ptr` must stay valid until the last gradient written there has been read (the range is
    /// checked to lie in one device allocation).
    pub unsafe fn set_grad_output(&mut self, ptr: u64, len: usize) -> Result<()> {
        self.check_range(ptr, len, "gradient output in device memory")?;
        self.out = Some((ptr, len));
        Ok(())
    }

    /// The input sample-bins of `samples` on the device.
    fn input_bins(&mut self, samples: &[usize]) -> Result<u64> {
        let m = self.session().model.clone();
        let bins: Vec<i32> = samples
            .iter()
            .flat_map(|&s| {
                let l = &m.samples[s];
                (l.sb_start..l.sb_start + l.n_bins).map(|sb| sb as i32)
            })
            .collect();
        let stream = self.batch.batch.stream().clone();
        if self.in_sb.1.is_none() || self.in_sb.0 != bins {
            let dev = stream
                .clone_htod(if bins.is_empty() { &[0][..] } else { &bins })
                .map_err(driver("upload of input sample-bins"))?;
            self.in_sb = (bins, Some(dev));
        }
        let ptr = self
            .in_sb
            .1
            .as_ref()
            .expect("uploaded above")
            .device_ptr(&stream)
            .0;
        Ok(ptr)
    }
}

impl CudaYields {
    /// Toys of a likelihood whose yields are inputs in device memory would need the device's
    /// rates, whose last bits differ from the CPU's (see `Session::host_rates`): the statistics
    /// of the differentiable layer need none, so they are refused rather than drawn from the
    /// model's own yields.
    fn toys_refused() -> ComputeError {
        ComputeError::Unsupported("toy generation with input yields in device memory")
    }
}

impl Evaluator for CudaYields {
    fn space(&self) -> &ParameterSpace {
        self.batch.space()
    }
    fn asimov(&mut self, params: &[f64]) -> histfit_compute::Result<Dataset> {
        self.batch.asimov(params)
    }
    /// Refused: toys are drawn from the host's rates of the model's own yields, which the input
    /// yields in device memory are not (see [`CudaYields::toys_refused`]).
    fn toys(
        &mut self,
        _: &[f64],
        _: u64,
        _: std::ops::Range<u64>,
    ) -> histfit_compute::Result<Vec<Dataset>> {
        Err(Self::toys_refused())
    }
    fn nll(&mut self, params: &[f64], data: &Dataset) -> histfit_compute::Result<f64> {
        self.batch.nll(params, data)
    }
    fn nll_grad(
        &mut self,
        params: &[f64],
        data: &Dataset,
        grad: &mut [f64],
    ) -> histfit_compute::Result<f64> {
        self.batch.nll_grad(params, data, grad)
    }
    fn expected_main(&mut self, params: &[f64], out: &mut [f64]) -> histfit_compute::Result<()> {
        self.batch.expected_main(params, out)
    }
}

/// Batches go to the evaluator's own session (its nominal table holds the input yields).
impl BatchEvaluator for CudaYields {
    fn space(&self) -> &ParameterSpace {
        BatchEvaluator::space(&self.batch.batch)
    }
    fn asimov(&mut self, params: &[f64]) -> histfit_compute::Result<Dataset> {
        BatchEvaluator::asimov(&mut self.batch.batch, params)
    }
    fn toys(
        &mut self,
        _: &[f64],
        _: u64,
        _: std::ops::Range<u64>,
    ) -> histfit_compute::Result<Vec<Dataset>> {
        Err(Self::toys_refused())
    }
    fn nll_grad_batch(
        &mut self,
        params: &[f64],
        data: &[&Dataset],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> histfit_compute::Result<()> {
        self.batch.batch.nll_grad_batch(params, data, nll, grad)
    }
    fn expected_main_batch(
        &mut self,
        params: &[f64],
        out: &mut [f64],
    ) -> histfit_compute::Result<()> {
        self.batch.batch.expected_main_batch(params, out)
    }
}

impl YieldGradient for CudaYields {
    /// Expected main counts written into a device row of their own; only the auxiliary data
    /// (which depend on `at` alone) come from the host.
    fn inputs_asimov(&mut self, at: &[f64]) -> histfit_compute::Result<Dataset> {
        let session = self.session();
        let m = session.model.clone();
        if at.len() != m.n_params() {
            return Err(ComputeError::Length {
                what: "parameters",
                expected: m.n_params(),
                got: at.len(),
            });
        }
        let observed = Dataset::observed(&m);
        let outs = Outputs {
            lam: true,
            ..Default::default()
        };
        self.batch.batch.launch_on_device(at, &[&observed], outs)?;
        let (lam, _, _) = self.batch.batch.outputs_on_device();
        let stream = self.batch.batch.stream().clone();
        let aux = histfit_compute::expected_aux(&m, at);
        let upload_aux = aux != self.asimov_aux;
        // A fresh key each time: a dataset from an earlier call is refused, not read anew.
        self.key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let row = self.batch.batch.resident_row(self.key)?;
        let row_ptr = row.device_ptr(&stream).0;
        // SAFETY: the row holds n_main + n_aux values; lam holds n_main for problem 0.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                row_ptr,
                lam,
                m.n_main * 8,
                stream.cu_stream(),
            )
        }
        .map_err(driver("Asimov dataset"))
        .map_err(compute_err)?;
        if upload_aux && !aux.is_empty() {
            let mut view = row.slice_mut(m.n_main..m.n_main + aux.len());
            stream
                .memcpy_htod(&aux, &mut view)
                .map_err(driver("Asimov dataset"))
                .map_err(compute_err)?;
        }
        // The counts' part of the dataset's constant, summed where they are (8 bytes back).
        let mut constant = stream
            .alloc_zeros::<f64>(2)
            .map_err(driver("Asimov dataset"))
            .map_err(compute_err)?;
        let n = m.n_main as i32;
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut l = stream.launch_builder(&session.kernels.main_constant);
        l.arg(&row_ptr).arg(&n).arg(&mut constant);
        // SAFETY: matches main_constant(const double*, int, double*); the row holds n_main
        // counts, `constant` two values.
        unsafe { l.launch(cfg) }
            .map_err(driver("launch of main_constant"))
            .map_err(compute_err)?;
        let mut c = [0.0; 2];
        stream
            .memcpy_dtoh(&constant, &mut c)
            .map_err(driver("Asimov dataset"))
            .map_err(compute_err)?;
        stream
            .synchronize()
            .map_err(driver("Asimov dataset"))
            .map_err(compute_err)?;
        self.asimov_aux = aux.clone();
        Dataset::resident(&m, aux, c[0], c[1] != 0.0, self.key)
    }

    fn yield_grad_sum(
        &mut self,
        samples: &[usize],
        g: &YieldGradTerms,
    ) -> histfit_compute::Result<Option<Vec<f64>>> {
        let session = self.session();
        let m = session.model.clone();
        check_inputs(&m, samples)?;
        let n_in: usize = samples.iter().map(|&s| m.samples[s].n_bins).sum();
        let Some((out, len)) = self.out.take() else {
            return Err(ComputeError::Device(
                "no device buffer was given for the yield gradient".into(),
            ));
        };
        if len != n_in {
            return Err(ComputeError::Length {
                what: "yield gradient (device buffer)",
                expected: n_in,
                got: len,
            });
        }
        let n_par = m.n_params();
        let points = g.terms.iter().map(|t| t.1.len()).chain(
            g.asimov
                .iter()
                .flat_map(|a| [a.free.len(), a.cond.len(), a.at.len()]),
        );
        if let Some(bad) = points.into_iter().find(|&l| l != n_par) {
            return Err(ComputeError::Length {
                what: "parameters of a yield-gradient term",
                expected: n_par,
                got: bad,
            });
        }
        if g.terms.len() > 2 {
            return Err(ComputeError::Device(format!(
                "yield gradients of {} terms: at most 2 are supported",
                g.terms.len()
            )));
        }
        let stream = self.batch.batch.stream().clone();
        let mut params: Vec<f64> = g.terms.iter().flat_map(|t| t.1.iter().copied()).collect();
        let k = g.terms.len() as i32;
        if let Some(a) = g.asimov {
            params.extend_from_slice(a.free);
            params.extend_from_slice(a.cond);
            params.extend_from_slice(a.at);
        }
        let problems = params.len() / m.n_params().max(1);
        if problems == 0 || n_in == 0 {
            // SAFETY: the output range was checked when it was set.
            unsafe {
                cudarc::driver::result::memset_d8_async(out, 0, n_in * 8, stream.cu_stream())
            }
            .map_err(driver("yield gradient"))
            .map_err(compute_err)?;
        } else {
            let outs = Outputs {
                lam: true,
                sbfac: true,
                ..Default::default()
            };
            let data = vec![g.data; problems];
            self.batch.batch.launch_on_device(&params, &data, outs)?;
            let (lam, sbfac, main) = self.batch.batch.outputs_on_device();
            let in_sb = self.input_bins(samples).map_err(compute_err)?;
            let coef = |i: usize| g.terms.get(i).map_or(0.0, |t| t.0);
            let (c0, c1) = (coef(0), coef(1));
            let cd = g.asimov.map_or(0.0, |a| a.coef);
            let (i_f, i_c, i_at) = (k, k + 1, k + 2);
            let (n_in_i, m_i, n_sb) = (n_in as i32, m.n_main as i32, m.nominal.len() as i32);
            let wall = g.data.empty_bin_wall;
            let sb_bin = session.tables.sb_bin_ptr();
            let cfg = LaunchConfig {
                grid_dim: (n_in.div_ceil(128) as u32, 1, 1),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut l = stream.launch_builder(&session.kernels.yield_grad_sum);
            l.arg(&n_in_i)
                .arg(&in_sb)
                .arg(&sb_bin)
                .arg(&m_i)
                .arg(&n_sb)
                .arg(&wall)
                .arg(&main)
                .arg(&lam)
                .arg(&sbfac)
                .arg(&k)
                .arg(&c0)
                .arg(&c1)
                .arg(&cd)
                .arg(&i_f)
                .arg(&i_c)
                .arg(&i_at)
                .arg(&out);
            // SAFETY: matches yield_grad_sum's signature; lam/sbfac hold rows for every problem
            // launched above, in_sb n_in sample-bins, out n_in values (checked when set).
            unsafe { l.launch(cfg) }
                .map_err(driver("launch of yield_grad_sum"))
                .map_err(compute_err)?;
        }
        stream
            .synchronize()
            .map_err(driver("yield gradient"))
            .map_err(compute_err)?;
        Ok(None)
    }
}

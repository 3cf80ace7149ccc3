//! `histfit-device`: the device as a value.
//!
//! [`Device`] (parsed once from `--gpu cuda`, `--gpu wgpu` or `device="cuda"`), [`AnyEval`],
//! the evaluator of one model on whichever device was chosen, [`AnyRunner`], the toy runner that
//! goes with it, and the devices document. Front ends (CLI, Python) hand these to the inference
//! code, which never branches on the device. This crate is where the device backends meet
//! inference: the backends (`histfit-cuda`, `histfit-wgpu`) depend on the model and the
//! evaluator traits only.

use histfit_compute::{CpuEvaluator, Dataset, Evaluator, OneAtATime, ParameterSpace};
use histfit_cuda::{CudaBatch, CudaError};
use histfit_infer::batch::{Batcher, EvalBox, Job};
use histfit_infer::toys::{Batched, OnCpu, ToyRunner};
use histfit_model::Model;
use histfit_wgpu::{adapter::Backend, Precision, WgpuBatch, WgpuError};
use std::sync::Arc;

pub mod host;
pub mod likelihood;
pub mod mixed;
pub use histfit_wgpu::skip_display_probe;
pub use host::HostEval;
pub use likelihood::{Likelihood, OpenError};

/// Where the likelihood is evaluated.
#[derive(Debug, Clone, PartialEq)]
pub enum Device {
    Cpu,
    Cuda(usize),
    /// Several CUDA devices (an ordinal may repeat: two sessions on one GPU): toy ensembles
    /// fitted on the device are split over them by toy index (`histfit_cuda::split`), with the
    /// same results as on one; everything else runs on the first.
    CudaSplit(Vec<usize>),
    /// Every CUDA device of the host, as [`Device::CudaSplit`].
    CudaAll,
    /// The portable f32 evaluator on a wgpu adapter: any backend (`wgpu`) or one (`vulkan`,
    /// `metal`, `dx12`), the first discrete GPU or adapter N of that backend, with a precision
    /// strategy (`+double-float`, `+compensated`, `+host-reduced`; `None`: double-float, or
    /// compensated with a warning where the adapter's compiler breaks double-float).
    Wgpu {
        backend: Backend,
        adapter: Option<usize>,
        precision: Option<Precision>,
    },
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: &[usize]| {
            v.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
            Device::CudaSplit(v) => write!(f, "cuda:{}", list(v)),
            Device::CudaAll => write!(f, "cuda:all"),
            Device::Wgpu {
                backend,
                adapter,
                precision,
            } => {
                let name = match backend {
                    Backend::Any => "wgpu",
                    Backend::Vulkan => "vulkan",
                    Backend::Metal => "metal",
                    Backend::Dx12 => "dx12",
                };
                write!(f, "{name}")?;
                if let Some(n) = adapter {
                    write!(f, ":{n}")?;
                }
                match precision {
                    Some(p) => write!(f, "+{}", p.name()),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Why a device could not be opened.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceError {
    Cuda(CudaError),
    Wgpu(WgpuError),
    /// The likelihood has no evaluator on that device (yet).
    Unsupported(String),
}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceError::Cuda(e) => e.fmt(f),
            DeviceError::Wgpu(e) => e.fmt(f),
            DeviceError::Unsupported(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for DeviceError {}

impl From<CudaError> for DeviceError {
    fn from(e: CudaError) -> Self {
        DeviceError::Cuda(e)
    }
}

impl From<WgpuError> for DeviceError {
    fn from(e: WgpuError) -> Self {
        DeviceError::Wgpu(e)
    }
}

impl std::str::FromStr for Device {
    type Err = String;
    /// "cpu", "cuda" (device 0), "cuda:N", "cuda:N,M,…", "cuda:all", "wgpu", "wgpu:N", and
    /// "vulkan", "metal", "dx12" (each with ":N") for one wgpu backend.
    fn from_str(s: &str) -> Result<Device, String> {
        let s = s.trim().to_ascii_lowercase();
        let unknown = || {
            format!(
                "unknown device \"{s}\" (expected cpu, cuda, cuda:N, cuda:N,M,…, cuda:all, \
                 wgpu, wgpu:N, vulkan[:N], metal[:N] or dx12[:N], the wgpu ones with an \
                 optional +double-float, +compensated or +host-reduced)"
            )
        };
        // A wgpu device's precision strategy follows a '+'.
        let (s, precision) = match s.split_once('+') {
            Some((d, p)) => {
                let p = Precision::ALL
                    .into_iter()
                    .find(|q| q.name() == p.trim())
                    .ok_or_else(unknown)?;
                (d.trim().to_string(), Some(p))
            }
            None => (s.clone(), None),
        };
        let (name, index) = match s.split_once(':') {
            Some((a, b)) => (a, Some(b)),
            None => (s.as_str(), None),
        };
        let backend = match name {
            "wgpu" => Some(Backend::Any),
            "vulkan" => Some(Backend::Vulkan),
            "metal" => Some(Backend::Metal),
            "dx12" => Some(Backend::Dx12),
            _ => None,
        };
        if let Some(backend) = backend {
            let adapter = match index {
                None => None,
                Some(n) => Some(n.trim().parse::<usize>().map_err(|_| unknown())?),
            };
            return Ok(Device::Wgpu {
                backend,
                adapter,
                precision,
            });
        }
        if precision.is_some() {
            return Err(unknown());
        }
        match s.as_str() {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            "cuda:all" => Ok(Device::CudaAll),
            _ => {
                let list = s.strip_prefix("cuda:").ok_or_else(unknown)?;
                let ordinals = list
                    .split(',')
                    .map(|n| n.trim().parse::<usize>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| unknown())?;
                Ok(match ordinals.as_slice() {
                    [n] => Device::Cuda(*n),
                    _ => Device::CudaSplit(ordinals),
                })
            }
        }
    }
}

/// The evaluator of one model on the chosen device.
#[derive(Debug, Clone)]
pub enum AnyEval {
    Cpu(CpuEvaluator),
    Cuda(OneAtATime<CudaBatch>),
    Wgpu(OneAtATime<WgpuBatch>),
    /// Any other likelihood's evaluator on the host (an event-level model).
    Host(HostEval),
}

impl AnyEval {
    /// Opens the device (for a GPU: context or adapter, kernels, model upload).
    pub fn new(model: Arc<Model>, device: Device) -> Result<AnyEval, DeviceError> {
        AnyEval::open(model, device, false)
    }

    /// [`AnyEval::new`] for a caller that will fit toy ensembles: where several CUDA devices are
    /// asked for, the others start opening at once, beside the first
    /// ([`CudaBatch::for_ensembles`]), not when the first ensemble starts.
    pub fn for_ensembles(model: Arc<Model>, device: Device) -> Result<AnyEval, DeviceError> {
        AnyEval::open(model, device, true)
    }

    fn open(model: Arc<Model>, device: Device, ensembles: bool) -> Result<AnyEval, DeviceError> {
        let ordinals = match device {
            Device::Cpu => return Ok(AnyEval::Cpu(CpuEvaluator::new(model))),
            Device::Wgpu {
                backend,
                adapter,
                precision,
            } => {
                return Ok(AnyEval::Wgpu(OneAtATime {
                    batch: WgpuBatch::new(model, backend, adapter, precision)?,
                }))
            }
            Device::Cuda(n) => vec![n],
            Device::CudaSplit(list) => list,
            Device::CudaAll => (0..histfit_cuda::devices()?.len()).collect(),
        };
        let batch = match ensembles {
            true => CudaBatch::for_ensembles(model, &ordinals)?,
            false => CudaBatch::on_devices(model, &ordinals)?,
        };
        Ok(AnyEval::Cuda(OneAtATime { batch }))
    }

    /// What the user should know about how the device was opened: a wgpu adapter whose
    /// compiler breaks double-float arithmetic runs the compensated strategy instead.
    pub fn warning(&self) -> Option<&str> {
        match self {
            AnyEval::Wgpu(e) => e.batch.session().warning.as_deref(),
            AnyEval::Cpu(_) | AnyEval::Cuda(_) | AnyEval::Host(_) => None,
        }
    }

    /// The HistFactory model this evaluator evaluates, where it is one (for front ends'
    /// tables; inference sees only [`Evaluator::space`]).
    pub fn model(&self) -> Option<&Arc<Model>> {
        match self {
            AnyEval::Cpu(e) => Some(e.shared_model()),
            AnyEval::Cuda(e) => Some(&e.batch.session().model),
            AnyEval::Wgpu(e) => Some(&e.batch.session().model),
            AnyEval::Host(_) => None,
        }
    }
}

impl Evaluator for AnyEval {
    fn space(&self) -> &ParameterSpace {
        match self {
            AnyEval::Cpu(e) => e.space(),
            AnyEval::Cuda(e) => e.space(),
            AnyEval::Wgpu(e) => e.space(),
            AnyEval::Host(e) => e.space(),
        }
    }
    fn asimov(&mut self, p: &[f64]) -> histfit_compute::Result<Dataset> {
        match self {
            AnyEval::Cpu(e) => e.asimov(p),
            AnyEval::Cuda(e) => e.asimov(p),
            AnyEval::Wgpu(e) => e.asimov(p),
            AnyEval::Host(e) => e.asimov(p),
        }
    }
    fn toys(
        &mut self,
        p: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_compute::Result<Vec<Dataset>> {
        match self {
            AnyEval::Cpu(e) => e.toys(p, seed, indices),
            AnyEval::Cuda(e) => e.toys(p, seed, indices),
            AnyEval::Wgpu(e) => e.toys(p, seed, indices),
            AnyEval::Host(e) => e.toys(p, seed, indices),
        }
    }
    fn nll(&mut self, p: &[f64], d: &Dataset) -> histfit_compute::Result<f64> {
        match self {
            AnyEval::Cpu(e) => e.nll(p, d),
            AnyEval::Cuda(e) => e.nll(p, d),
            AnyEval::Wgpu(e) => e.nll(p, d),
            AnyEval::Host(e) => e.nll(p, d),
        }
    }
    fn nll_grad(&mut self, p: &[f64], d: &Dataset, g: &mut [f64]) -> histfit_compute::Result<f64> {
        match self {
            AnyEval::Cpu(e) => e.nll_grad(p, d, g),
            AnyEval::Cuda(e) => e.nll_grad(p, d, g),
            AnyEval::Wgpu(e) => e.nll_grad(p, d, g),
            AnyEval::Host(e) => e.nll_grad(p, d, g),
        }
    }
    fn expected_main(&mut self, p: &[f64], out: &mut [f64]) -> histfit_compute::Result<()> {
        match self {
            AnyEval::Cpu(e) => e.expected_main(p, out),
            AnyEval::Cuda(e) => e.expected_main(p, out),
            AnyEval::Wgpu(e) => e.expected_main(p, out),
            AnyEval::Host(e) => e.expected_main(p, out),
        }
    }
}

/// The batcher a GPU's ensembles run through.
// One batcher per command, made once: the size difference does not matter.
#[allow(clippy::large_enum_variant)]
pub enum AnyBatcher {
    Cuda(Batcher<CudaBatch>),
    Wgpu(Batcher<WgpuBatch>),
}

/// The batcher GPU ensembles run through (none on the CPU).
pub fn batcher(eval: &AnyEval) -> Option<AnyBatcher> {
    match eval {
        AnyEval::Cpu(_) | AnyEval::Host(_) => None,
        // Two streams: the lockstep executor's two groups step at the same time.
        AnyEval::Cuda(e) => Some(AnyBatcher::Cuda(
            Batcher::new(e.batch.clone()).with_second_lane(e.batch.clone()),
        )),
        AnyEval::Wgpu(e) => Some(AnyBatcher::Wgpu(Batcher::new(e.batch.clone()))),
    }
}

/// The toy runner of the chosen device.
pub enum AnyRunner<'a> {
    Cpu(OnCpu<'a, CpuEvaluator>),
    Host(OnCpu<'a, HostEval>),
    Cuda(Batched<'a, CudaBatch>),
    Wgpu(Batched<'a, WgpuBatch>),
}

impl<'a> AnyRunner<'a> {
    /// `batcher` must be [`batcher`]`(eval)` (kept by the caller, who outlives the runner).
    pub fn new(eval: &'a AnyEval, batcher: Option<&'a AnyBatcher>) -> AnyRunner<'a> {
        match (eval, batcher) {
            // `HISTFIT_GPU_FITS=lockstep` drives every fit from the host (the reference path).
            (AnyEval::Cuda(_), Some(AnyBatcher::Cuda(b))) => AnyRunner::Cuda(Batched {
                resident: std::env::var("HISTFIT_GPU_FITS").as_deref() != Ok("lockstep"),
                ..Batched::new(b)
            }),
            // The f32 evaluator has no resident fits: every fit is driven in lockstep.
            (AnyEval::Wgpu(_), Some(AnyBatcher::Wgpu(b))) => AnyRunner::Wgpu(Batched {
                resident: false,
                ..Batched::new(b)
            }),
            (AnyEval::Cpu(e), _) => AnyRunner::Cpu(OnCpu(e)),
            (AnyEval::Host(e), _) => AnyRunner::Host(OnCpu(e)),
            _ => unreachable!("a GPU evaluator goes with its own batcher"),
        }
    }
}

impl ToyRunner for AnyRunner<'_> {
    fn space(&self) -> &ParameterSpace {
        match self {
            AnyRunner::Cpu(r) => r.space(),
            AnyRunner::Host(r) => r.space(),
            AnyRunner::Cuda(r) => r.space(),
            AnyRunner::Wgpu(r) => r.space(),
        }
    }
    fn single(&self) -> Box<dyn Evaluator + '_> {
        match self {
            AnyRunner::Cpu(r) => r.single(),
            AnyRunner::Host(r) => r.single(),
            AnyRunner::Cuda(r) => r.single(),
            AnyRunner::Wgpu(r) => r.single(),
        }
    }
    fn run_toys<'w, T: Send>(
        &self,
        params: &[f64],
        seed: u64,
        indices: &[u64],
        work: &'w (dyn Fn(EvalBox<'w>, u64, Dataset) -> Job<'w, T> + Sync),
    ) -> histfit_infer::Result<Vec<T>> {
        match self {
            AnyRunner::Cpu(r) => r.run_toys(params, seed, indices, work),
            AnyRunner::Host(r) => r.run_toys(params, seed, indices, work),
            AnyRunner::Cuda(r) => r.run_toys(params, seed, indices, work),
            AnyRunner::Wgpu(r) => r.run_toys(params, seed, indices, work),
        }
    }
    fn run_refits<'w, T: Send>(
        &self,
        params: &[f64],
        seed: u64,
        indices: &[u64],
        work: &'w (dyn Fn(EvalBox<'w>, u64, Dataset) -> Job<'w, T> + Sync),
    ) -> histfit_infer::Result<Vec<T>> {
        match self {
            AnyRunner::Cpu(r) => r.run_refits(params, seed, indices, work),
            AnyRunner::Host(r) => r.run_refits(params, seed, indices, work),
            AnyRunner::Cuda(r) => r.run_refits(params, seed, indices, work),
            AnyRunner::Wgpu(r) => r.run_refits(params, seed, indices, work),
        }
    }
    fn resident(
        &self,
        req: &histfit_compute::ResidentRequest<'_>,
    ) -> Option<histfit_infer::Result<Vec<histfit_compute::ResidentFit>>> {
        match self {
            AnyRunner::Cpu(r) => r.resident(req),
            AnyRunner::Host(r) => r.resident(req),
            AnyRunner::Cuda(r) => r.resident(req),
            AnyRunner::Wgpu(r) => r.resident(req),
        }
    }
    fn steps_cost(&self) -> bool {
        match self {
            AnyRunner::Cpu(r) => r.steps_cost(),
            AnyRunner::Host(r) => r.steps_cost(),
            AnyRunner::Cuda(r) => r.steps_cost(),
            AnyRunner::Wgpu(r) => r.steps_cost(),
        }
    }
    fn run<'w, T: Send>(
        &self,
        n: usize,
        work: &'w (dyn Fn(EvalBox<'w>, usize) -> Job<'w, T> + Sync),
    ) -> histfit_infer::Result<Vec<T>> {
        match self {
            AnyRunner::Cpu(r) => r.run(n, work),
            AnyRunner::Host(r) => r.run(n, work),
            AnyRunner::Cuda(r) => r.run(n, work),
            AnyRunner::Wgpu(r) => r.run(n, work),
        }
    }
}

/// What `histfit devices --json` and `histfit.devices()` report: the CPU, every CUDA device,
/// every wgpu adapter (backend, kind, whether it has f64), and why there is none where there is
/// none.
pub fn devices_document() -> serde_json::Value {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cuda = histfit_cuda::devices();
    let gpus: Vec<serde_json::Value> = cuda
        .as_ref()
        .map(|d| {
            d.iter()
                .map(|g| {
                    serde_json::json!({
                        "device": format!("cuda:{}", g.ordinal),
                        "name": g.name,
                        "compute_capability":
                            format!("{}.{}", g.compute_capability.0, g.compute_capability.1),
                        "memory_bytes": g.memory_bytes,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let adapters: Vec<serde_json::Value> = histfit_wgpu::adapters()
        .into_iter()
        .map(|a| {
            serde_json::json!({
                "device": format!("wgpu:{}", a.index),
                "name": a.name,
                "backend": a.backend,
                "kind": a.kind,
                "driver": a.driver,
                "f64": a.f64,
                "max_storage_binding_bytes": a.max_storage_binding,
            })
        })
        .collect();
    let wgpu_none = adapters.is_empty().then_some(
        "wgpu finds no Vulkan, Metal or DX12 adapter (on Linux: libvulkan1 and a driver such as \
         mesa-vulkan-drivers)",
    );
    serde_json::json!({
        "cpu": {"device": "cpu", "threads": threads},
        "cuda": gpus,
        "cuda_unavailable_reason": cuda.err().map(|e| e.to_string()),
        "wgpu": adapters,
        "wgpu_unavailable_reason": wgpu_none,
    })
}

#[cfg(test)]
mod tests {
    use super::{Backend, Device};

    #[test]
    fn devices_parse() {
        let p = |s: &str| s.parse::<Device>();
        assert_eq!(p("cpu"), Ok(Device::Cpu));
        assert_eq!(p("CUDA"), Ok(Device::Cuda(0)));
        assert_eq!(p("cuda:2"), Ok(Device::Cuda(2)));
        assert_eq!(p("cuda:0,0"), Ok(Device::CudaSplit(vec![0, 0])));
        assert_eq!(p("cuda:1, 0,3"), Ok(Device::CudaSplit(vec![1, 0, 3])));
        assert_eq!(p("cuda:all"), Ok(Device::CudaAll));
        let wgpu = |backend, adapter| Device::Wgpu {
            backend,
            adapter,
            precision: None,
        };
        assert_eq!(p("wgpu"), Ok(wgpu(Backend::Any, None)));
        assert_eq!(p("wgpu:1"), Ok(wgpu(Backend::Any, Some(1))));
        assert_eq!(p("Vulkan"), Ok(wgpu(Backend::Vulkan, None)));
        assert_eq!(p("metal:0"), Ok(wgpu(Backend::Metal, Some(0))));
        assert_eq!(p("dx12"), Ok(wgpu(Backend::Dx12, None)));
        for d in [
            "cpu",
            "cuda:2",
            "cuda:0,0",
            "cuda:all",
            "wgpu",
            "wgpu:1",
            "vulkan:0",
            "wgpu+compensated",
            "vulkan:1+host-reduced",
            "metal+double-float",
        ] {
            assert_eq!(p(d).unwrap().to_string(), d);
        }
        assert_eq!(
            p("Vulkan:1 + Compensated"),
            Ok(Device::Wgpu {
                backend: Backend::Vulkan,
                adapter: Some(1),
                precision: Some(super::Precision::Compensated),
            })
        );
        for bad in [
            "gpu",
            "cuda:",
            "cuda:x",
            "cuda:0,",
            "cuda:-1",
            "cuda:0;1",
            "wgpu:",
            "wgpu:x",
            "metal:-1",
            "wgpu+",
            "wgpu+fast",
            "cuda+compensated",
            "cpu+host-reduced",
        ] {
            let e = p(bad).unwrap_err();
            assert!(
                e.contains("unknown device") && e.contains("cuda:all"),
                "{bad}: {e}"
            );
        }
    }
}

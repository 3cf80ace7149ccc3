//! `histfit-device`: the device as a value.
//!
//! [`Device`] (parsed once from `--gpu cuda` or `device="cuda"`), [`AnyEval`], the evaluator of
//! one model on whichever device was chosen, [`AnyRunner`], the toy runner that goes with it, and
//! the devices document. Front ends (CLI, Python) hand these to the inference code, which never
//! branches on the device. This crate is where the device backends meet inference: the backends
//! (`histfit-cuda`) depend on the model and the evaluator traits only.

use histfit_compute::{CpuEvaluator, Dataset, Evaluator, OneAtATime, ParameterSpace};
use histfit_cuda::{CudaBatch, CudaError};
use histfit_infer::batch::{Batcher, EvalBox, Job};
use histfit_infer::toys::{Batched, OnCpu, ToyRunner};
use histfit_model::Model;
use std::sync::Arc;

/// Where the likelihood is evaluated.
#[derive(Debug, Clone, PartialEq)]
pub enum Device {
    Cpu,
    Cuda(usize),
    /// Several CUDA devices (an ordinal may repeat: two workers on one GPU): toy ensembles fitted
    /// on the device are split by toy index, one worker per entry, with the same results as on
    /// one; everything else runs on the first.
    CudaSplit(Vec<usize>),
    /// Every CUDA device of the host, as [`Device::CudaSplit`].
    CudaAll,
}

impl std::str::FromStr for Device {
    type Err = String;
    /// "cpu", "cuda" (device 0), "cuda:N", "cuda:N,M,…" or "cuda:all".
    fn from_str(s: &str) -> Result<Device, String> {
        let s = s.trim().to_ascii_lowercase();
        let unknown = || {
            format!("unknown device \"{s}\" (expected cpu, cuda, cuda:N, cuda:N,M,… or cuda:all)")
        };
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
}

impl AnyEval {
    /// Opens the device (for CUDA: context, kernels, model upload).
    pub fn new(model: Arc<Model>, device: Device) -> Result<AnyEval, CudaError> {
        let ordinals = match device {
            Device::Cpu => return Ok(AnyEval::Cpu(CpuEvaluator::new(model))),
            Device::Cuda(n) => vec![n],
            Device::CudaSplit(list) => list,
            Device::CudaAll => (0..histfit_cuda::devices()?.len()).collect(),
        };
        let (&first, rest) = ordinals
            .split_first()
            .ok_or_else(|| CudaError::Unavailable("no CUDA device".into()))?;
        Ok(AnyEval::Cuda(OneAtATime {
            batch: CudaBatch::new(model, first)?.with_peers(rest)?,
        }))
    }

    /// The HistFactory model this evaluator evaluates (for front ends' tables; inference sees
    /// only [`Evaluator::space`]).
    pub fn model(&self) -> &Arc<Model> {
        match self {
            AnyEval::Cpu(e) => e.shared_model(),
            AnyEval::Cuda(e) => &e.batch.session().model,
        }
    }
}

impl Evaluator for AnyEval {
    fn space(&self) -> &ParameterSpace {
        match self {
            AnyEval::Cpu(e) => e.space(),
            AnyEval::Cuda(e) => e.space(),
        }
    }
    fn asimov(&mut self, p: &[f64]) -> histfit_compute::Result<Dataset> {
        match self {
            AnyEval::Cpu(e) => e.asimov(p),
            AnyEval::Cuda(e) => e.asimov(p),
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
        }
    }
    fn nll(&mut self, p: &[f64], d: &Dataset) -> histfit_compute::Result<f64> {
        match self {
            AnyEval::Cpu(e) => e.nll(p, d),
            AnyEval::Cuda(e) => e.nll(p, d),
        }
    }
    fn nll_grad(&mut self, p: &[f64], d: &Dataset, g: &mut [f64]) -> histfit_compute::Result<f64> {
        match self {
            AnyEval::Cpu(e) => e.nll_grad(p, d, g),
            AnyEval::Cuda(e) => e.nll_grad(p, d, g),
        }
    }
    fn expected_main(&mut self, p: &[f64], out: &mut [f64]) -> histfit_compute::Result<()> {
        match self {
            AnyEval::Cpu(e) => e.expected_main(p, out),
            AnyEval::Cuda(e) => e.expected_main(p, out),
        }
    }
}

/// The batcher GPU ensembles run through (none on the CPU).
pub fn batcher(eval: &AnyEval) -> Option<Batcher<CudaBatch>> {
    match eval {
        AnyEval::Cpu(_) => None,
        AnyEval::Cuda(e) => Some(Batcher::new(e.batch.clone())),
    }
}

/// The toy runner of the chosen device.
pub enum AnyRunner<'a> {
    Cpu(OnCpu<'a, CpuEvaluator>),
    Cuda(Batched<'a, CudaBatch>),
}

impl<'a> AnyRunner<'a> {
    /// `batcher` must be [`batcher`]`(eval)` (kept by the caller, who outlives the runner).
    pub fn new(eval: &'a AnyEval, batcher: Option<&'a Batcher<CudaBatch>>) -> AnyRunner<'a> {
        match (eval, batcher) {
            // `HISTFIT_GPU_FITS=lockstep` drives every fit from the host (the reference path).
            (AnyEval::Cuda(_), Some(b)) => AnyRunner::Cuda(Batched {
                resident: std::env::var("HISTFIT_GPU_FITS").as_deref() != Ok("lockstep"),
                ..Batched::new(b)
            }),
            (AnyEval::Cpu(e), _) => AnyRunner::Cpu(OnCpu(e)),
            (AnyEval::Cuda(_), None) => unreachable!("a GPU evaluator always has a batcher"),
        }
    }
}

impl ToyRunner for AnyRunner<'_> {
    fn space(&self) -> &ParameterSpace {
        match self {
            AnyRunner::Cpu(r) => r.space(),
            AnyRunner::Cuda(r) => r.space(),
        }
    }
    fn single(&self) -> Box<dyn Evaluator + '_> {
        match self {
            AnyRunner::Cpu(r) => r.single(),
            AnyRunner::Cuda(r) => r.single(),
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
            AnyRunner::Cuda(r) => r.run_toys(params, seed, indices, work),
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
            AnyRunner::Cuda(r) => r.run_refits(params, seed, indices, work),
        }
    }
    fn resident(
        &self,
        req: &histfit_compute::ResidentRequest<'_>,
    ) -> Option<histfit_infer::Result<Vec<histfit_compute::ResidentFit>>> {
        match self {
            AnyRunner::Cpu(r) => r.resident(req),
            AnyRunner::Cuda(r) => r.resident(req),
        }
    }
    fn run<'w, T: Send>(
        &self,
        n: usize,
        work: &'w (dyn Fn(EvalBox<'w>, usize) -> Job<'w, T> + Sync),
    ) -> histfit_infer::Result<Vec<T>> {
        match self {
            AnyRunner::Cpu(r) => r.run(n, work),
            AnyRunner::Cuda(r) => r.run(n, work),
        }
    }
}

/// What `histfit devices --json` and `histfit.devices()` report: the CPU, every CUDA device,
/// and why there is none where there is none.
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
    serde_json::json!({
        "cpu": {"device": "cpu", "threads": threads},
        "cuda": gpus,
        "cuda_unavailable_reason": cuda.err().map(|e| e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::Device;

    #[test]
    fn devices_parse() {
        let p = |s: &str| s.parse::<Device>();
        assert_eq!(p("cpu"), Ok(Device::Cpu));
        assert_eq!(p("CUDA"), Ok(Device::Cuda(0)));
        assert_eq!(p("cuda:2"), Ok(Device::Cuda(2)));
        assert_eq!(p("cuda:0,0"), Ok(Device::CudaSplit(vec![0, 0])));
        assert_eq!(p("cuda:1, 0,3"), Ok(Device::CudaSplit(vec![1, 0, 3])));
        assert_eq!(p("cuda:all"), Ok(Device::CudaAll));
        for bad in ["gpu", "cuda:", "cuda:x", "cuda:0,", "cuda:-1", "cuda:0;1"] {
            let e = p(bad).unwrap_err();
            assert!(
                e.contains("unknown device") && e.contains("cuda:all"),
                "{bad}: {e}"
            );
        }
    }
}

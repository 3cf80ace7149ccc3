//! The device a command runs on, parsed once from `--gpu`, and the evaluator that goes with it.
//! Inference code never branches on the device: it receives an [`AnyEval`] (single fits, scans,
//! limits, ranking) or an [`AnyRunner`] (ensembles), whichever device is behind it.

use anyhow::{anyhow, Result};
use histfit_compute::{CpuEvaluator, Dataset, Evaluator};
use histfit_cuda::CudaBatch;
use histfit_infer::batch::{Batcher, EvalBox, Job};
use histfit_infer::toys::{Batched, OnCpu, ToyRunner};
use histfit_model::Model;
use std::sync::Arc;

pub use histfit_cuda::{AnyEval, Device};

/// [`AnyEval::new`] with the CLI's wording of a device failure.
pub fn open(model: Arc<Model>, device: Device) -> Result<AnyEval> {
    AnyEval::new(model, device).map_err(|e| anyhow!("--gpu cuda: {e}"))
}

/// Fits of a GPU toy ensemble in flight at once (their evaluations form each batch).
pub const GPU_WINDOW: usize = 4096;
/// Toys generated on the GPU per chunk (bounds device and host memory of huge ensembles).
pub const GPU_TOY_CHUNK: u64 = 1 << 16;

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
    /// `batcher` must be `eval.batcher()` (kept by the caller, who outlives the runner).
    pub fn new(eval: &'a AnyEval, batcher: Option<&'a Batcher<CudaBatch>>) -> AnyRunner<'a> {
        match (eval, batcher) {
            (AnyEval::Cuda(_), Some(b)) => AnyRunner::Cuda(Batched {
                batcher: b,
                window: GPU_WINDOW,
                chunk: GPU_TOY_CHUNK,
            }),
            (AnyEval::Cpu(e), _) => AnyRunner::Cpu(OnCpu(e)),
            (AnyEval::Cuda(_), None) => unreachable!("a GPU evaluator always has a batcher"),
        }
    }
}

impl ToyRunner for AnyRunner<'_> {
    fn model(&self) -> &Model {
        match self {
            AnyRunner::Cpu(r) => r.model(),
            AnyRunner::Cuda(r) => r.model(),
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
        indices: std::ops::Range<u64>,
        work: &'w (dyn Fn(EvalBox<'w>, u64, Dataset) -> Job<'w, T> + Sync),
    ) -> histfit_infer::Result<Vec<T>> {
        match self {
            AnyRunner::Cpu(r) => r.run_toys(params, seed, indices, work),
            AnyRunner::Cuda(r) => r.run_toys(params, seed, indices, work),
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

/// `histfit devices`: the CPU and every CUDA device, or why there is none.
pub fn list(json: bool) -> String {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cuda = histfit_cuda::devices();
    if json {
        let gpus = match &cuda {
            Ok(d) => serde_json::json!(d
                .iter()
                .map(|g| serde_json::json!({
                    "device": format!("cuda:{}", g.ordinal),
                    "name": g.name,
                    "compute_capability": format!("{}.{}", g.compute_capability.0, g.compute_capability.1),
                    "memory_bytes": g.memory_bytes,
                }))
                .collect::<Vec<_>>()),
            Err(_) => serde_json::json!([]),
        };
        let doc = serde_json::json!({
            "kind": "devices",
            "cpu": {"device": "cpu", "threads": threads},
            "cuda": gpus,
            "cuda_unavailable_reason": cuda.as_ref().err().map(|e| e.to_string()),
        });
        return serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
    }
    let mut s = format!("cpu        {threads} threads (f64)\n");
    match cuda {
        Ok(d) if !d.is_empty() => {
            for g in d {
                s.push_str(&format!(
                    "cuda:{}     {} (compute {}.{}, {:.1} GiB, f64)\n",
                    g.ordinal,
                    g.name,
                    g.compute_capability.0,
                    g.compute_capability.1,
                    g.memory_bytes as f64 / (1u64 << 30) as f64
                ));
            }
        }
        Ok(_) => s.push_str("cuda       none: the driver reports no device\n"),
        Err(e) => s.push_str(&format!("cuda       none: {e}\n")),
    }
    s
}

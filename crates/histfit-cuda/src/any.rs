//! The device as a value: [`Device`] (parsed once from `--gpu cuda` or `device="cuda"`) and
//! [`AnyEval`], the evaluator of one model on whichever device was chosen. Front ends (CLI,
//! Python) hand an `AnyEval` to the inference code, which never branches on the device.

use crate::{CudaBatch, CudaError};
use histfit_compute::{CpuEvaluator, Dataset, Evaluator, OneAtATime};
use histfit_model::Model;
use std::sync::Arc;

/// Where the likelihood is evaluated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Device {
    Cpu,
    Cuda(usize),
}

impl std::str::FromStr for Device {
    type Err = String;
    /// "cpu", "cuda" (device 0) or "cuda:N".
    fn from_str(s: &str) -> Result<Device, String> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(n)) => Ok(Device::Cuda(n)),
                _ => Err(format!(
                    "unknown device \"{s}\" (expected cuda, cuda:N or cpu)"
                )),
            },
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
        Ok(match device {
            Device::Cpu => AnyEval::Cpu(CpuEvaluator::new(model)),
            Device::Cuda(n) => AnyEval::Cuda(OneAtATime {
                batch: CudaBatch::new(model, n)?,
            }),
        })
    }
}

impl Evaluator for AnyEval {
    fn model(&self) -> &Model {
        match self {
            AnyEval::Cpu(e) => e.model(),
            AnyEval::Cuda(e) => e.model(),
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

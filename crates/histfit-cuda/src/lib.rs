//! `histfit-cuda`: the CUDA f64 backend.
//!
//! Owns the device side of histfit: finding CUDA devices ([`devices`]), loading the kernels of
//! `kernels/histfit.cu` (built ahead for the common GPUs and carried in the binary, else compiled
//! with NVRTC at first use and cached on disk by source hash and GPU architecture: [`kernels`]),
//! uploading a compiled [`Model`](histfit_model::Model) once
//! ([`layout`]), and evaluating it: [`CudaBatch`] implements
//! [`BatchEvaluator`](histfit_compute::BatchEvaluator) (many parameter vectors × datasets per
//! launch) and, wrapped in [`OneAtATime`](histfit_compute::OneAtATime), the single-problem
//! [`Evaluator`](histfit_compute::Evaluator) the fitting code uses. Toys are generated on the
//! device with the CPU's counter-based generator, bit for bit ([`toys`]), and whole toy ensembles
//! are drawn and fitted there in one launch ([`resident`]). Sample yields that live
//! in GPU memory (PyTorch CUDA tensors) are read in place and differentiated there ([`yields`]).
//!
//! It depends on the model and the evaluator traits only: choosing a device and running
//! inference on it is `histfit-device`'s.
//!
//! Nothing here is needed to build or run histfit: libcuda (and libnvrtc, where a GPU needs kernels
//! compiled) are loaded dynamically,
//! and on a machine without them every entry point returns [`CudaError::Unavailable`] with one
//! clear message instead of panicking.

pub mod batch;
mod descents;
pub mod device;
pub mod kernels;
pub mod layout;
pub mod resident;
pub mod split;
mod timing;
pub mod toys;
pub mod yields;

pub use batch::CudaBatch;
pub use device::{devices, DeviceInfo, Gpu};
pub use yields::CudaYields;

/// Errors of the CUDA backend.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CudaError {
    /// No usable CUDA: library missing, no device, or the ordinal does not exist.
    #[error("CUDA is not available: {0}")]
    Unavailable(String),
    /// A driver call failed (the call is named).
    #[error("CUDA error in {call}: {message}")]
    Driver { call: String, message: String },
    /// NVRTC rejected the kernel source (a bug: the log is included).
    #[error("CUDA kernel compilation failed: {0}")]
    Compile(String),
    #[error("GPU out of memory: {0}")]
    OutOfMemory(String),
    /// A setting of the backend read from the environment is not valid (named with the rule).
    #[error("{0}")]
    Setting(String),
    /// The model exceeds what the kernels' tables can index.
    #[error("the model is too large for the CUDA kernels: {0}")]
    TooLarge(String),
}

impl From<CudaError> for histfit_compute::ComputeError {
    fn from(e: CudaError) -> Self {
        histfit_compute::ComputeError::Device(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, CudaError>;

/// Wraps a driver error with the call that produced it (out-of-memory gets its own variant).
pub(crate) fn driver(call: &str) -> impl Fn(cudarc::driver::DriverError) -> CudaError + '_ {
    move |e| {
        let message = format!("{e:?}");
        if message.contains("OUT_OF_MEMORY") {
            CudaError::OutOfMemory(format!("{call}: {message}"))
        } else {
            CudaError::Driver {
                call: call.to_string(),
                message,
            }
        }
    }
}

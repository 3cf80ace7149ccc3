//! `histfit-wgpu`: the portable f32 GPU evaluator of binned HistFactory models.
//!
//! One WGSL kernel (`histfit.wgsl`) run through `wgpu` on Vulkan (Linux, Mesa's lavapipe in CI),
//! Metal (Apple) or DX12, behind the same [`BatchEvaluator`](histfit_compute::BatchEvaluator)
//! seam as the CPU and CUDA evaluators: fits, scans, ranking and toys use it through the same
//! inference code. It walks the model's flat tables ([`histfit_compute::flat`]) uploaded once per
//! session, one workgroup per problem.
//!
//! GPUs without f64 get their accuracy from how the f32 arithmetic is arranged ([`Precision`]):
//! the per-bin terms are written relative to the saturated model (small numbers), and the
//! double-float strategy keeps expected counts, their logarithm near the data, the constraint
//! terms and every sum to about 48 bits. lgamma of the data never reaches the device: the
//! dataset's constant is summed on the host in f64.
//!
//! Modules: [`adapter`] (instance, adapters, the devices listing, opening a device),
//! [`batch`] (the evaluator), [`probe`] (whether an adapter's compiler keeps double-float exact).

pub mod adapter;
pub mod batch;
pub mod probe;
pub mod yields;

pub use adapter::{adapters, skip_display_probe, AdapterInfo, Backend};
pub use batch::WgpuBatch;
pub use yields::WgpuYields;

/// How the f32 arithmetic is arranged (the strategies a, b and c), measured side by side
/// in BENCHMARKS.md. The default is double-float with a fallback ([`batch::Session::new`] with
/// `None`), so there is no `Default` here: double-float by name allows no fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// (a) f32 per-bin terms and gradient term slots, reduced in f64 on the host.
    HostReduced,
    /// (b) f32 with compensated (Neumaier) sums on the device.
    Compensated,
    /// (c) double-float (two f32) for the expected counts, logarithms, constraint terms and sums.
    DoubleFloat,
}

impl Precision {
    pub const ALL: [Precision; 3] = [
        Precision::HostReduced,
        Precision::Compensated,
        Precision::DoubleFloat,
    ];

    /// The kernel's `STRATEGY` constant.
    pub fn code(self) -> u32 {
        match self {
            Precision::HostReduced => 0,
            Precision::Compensated => 1,
            Precision::DoubleFloat => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Precision::HostReduced => "host-reduced",
            Precision::Compensated => "compensated",
            Precision::DoubleFloat => "double-float",
        }
    }
}

/// An error of the wgpu backend, worded for the user.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WgpuError {
    /// No adapter (or not the one asked for).
    #[error("no wgpu adapter: {0}")]
    Unavailable(String),
    /// The adapter lacks a limit or feature the evaluator needs.
    #[error("wgpu adapter {adapter} cannot run histfit's kernel: {rule}")]
    Limits { adapter: String, rule: String },
    /// The device failed (out of memory, lost, a validation error).
    #[error("wgpu device {adapter}: {what}")]
    Device { adapter: String, what: String },
}

pub type Result<T> = std::result::Result<T, WgpuError>;

impl From<WgpuError> for histfit_compute::ComputeError {
    fn from(e: WgpuError) -> Self {
        histfit_compute::ComputeError::Device(e.to_string())
    }
}

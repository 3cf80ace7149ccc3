//! Finding CUDA devices and opening one, without ever panicking on a machine that has none.

use crate::{driver, CudaError, Result};
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// One CUDA device as `histfit devices` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub memory_bytes: usize,
}

/// Whether the driver library can be loaded at all (cudarc panics on first use when it cannot).
fn driver_present() -> bool {
    // SAFETY: only tries to open the shared library by its usual names.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether NVRTC (the run-time compiler the kernels need) can be loaded.
pub(crate) fn nvrtc_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// The CUDA devices of this machine; an error saying why there are none.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    if !driver_present() {
        return Err(CudaError::Unavailable(
            "the NVIDIA driver library (libcuda.so.1) was not found on this machine".into(),
        ));
    }
    cudarc::driver::result::init().map_err(driver("cuInit"))?;
    let n = CudaContext::device_count().map_err(driver("cuDeviceGetCount"))?;
    let mut out = Vec::new();
    for ordinal in 0..n.max(0) as usize {
        let ctx = CudaContext::new(ordinal).map_err(driver("cuCtxCreate"))?;
        out.push(DeviceInfo {
            ordinal,
            name: ctx.name().map_err(driver("cuDeviceGetName"))?,
            compute_capability: ctx
                .compute_capability()
                .map_err(driver("cuDeviceGetAttribute"))?,
            memory_bytes: ctx.total_mem().map_err(driver("cuDeviceTotalMem"))?,
        });
    }
    Ok(out)
}

/// An opened device: its context and compute capability.
#[derive(Debug, Clone)]
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub info: DeviceInfo,
}

impl Gpu {
    /// Opens device `ordinal`, checking first that the driver, NVRTC and the device exist.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        let list = devices()?;
        let Some(info) = list.into_iter().find(|d| d.ordinal == ordinal) else {
            return Err(CudaError::Unavailable(format!(
                "no CUDA device with ordinal {ordinal} (the driver reports {} device(s))",
                CudaContext::device_count().unwrap_or(0)
            )));
        };
        if !nvrtc_present() {
            return Err(CudaError::Unavailable(
                "the CUDA run-time compiler library (libnvrtc) was not found; histfit compiles \
                 its kernels with it at first use"
                    .into(),
            ));
        }
        let ctx = CudaContext::new(ordinal).map_err(driver("cuCtxCreate"))?;
        Ok(Gpu { ctx, info })
    }
}

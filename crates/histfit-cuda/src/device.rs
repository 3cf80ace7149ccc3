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

/// Whether NVRTC (the run-time compiler for kernels this build does not carry) can be loaded.
pub(crate) fn nvrtc_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// How many CUDA devices the driver reports; an error saying why there are none.
pub(crate) fn count() -> Result<usize> {
    if !driver_present() {
        return Err(CudaError::Unavailable(
            "the NVIDIA driver library (libcuda.so.1) was not found on this machine".into(),
        ));
    }
    cudarc::driver::result::init().map_err(driver("cuInit"))?;
    let n = CudaContext::device_count().map_err(driver("cuDeviceGetCount"))?;
    Ok(n.max(0) as usize)
}

/// What the driver says of device `ordinal` (`ordinal` < [`count`]), read from the device
/// itself: no context is created. (A context costs 0.3 s or so; listing the devices through
/// contexts made every `--gpu` run create and destroy one per GPU of the host, twice.)
fn info(ordinal: usize) -> Result<DeviceInfo> {
    use cudarc::driver::result::device;
    use cudarc::driver::sys::CUdevice_attribute as A;
    let dev = device::get(ordinal as i32).map_err(driver("cuDeviceGet"))?;
    // SAFETY: `dev` is the handle cuDeviceGet just returned for an existing ordinal.
    let attribute =
        |a| unsafe { device::get_attribute(dev, a) }.map_err(driver("cuDeviceGetAttribute"));
    Ok(DeviceInfo {
        ordinal,
        name: device::get_name(dev).map_err(driver("cuDeviceGetName"))?,
        compute_capability: (
            attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        // SAFETY: as above.
        memory_bytes: unsafe { device::total_mem(dev) }.map_err(driver("cuDeviceTotalMem"))?,
    })
}

/// The CUDA devices of this machine; an error saying why there are none.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    (0..count()?).map(info).collect()
}

/// An opened device: its context and compute capability.
#[derive(Debug, Clone)]
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub info: DeviceInfo,
}

impl Gpu {
    /// Opens device `ordinal`, checking first that the driver and the device exist (NVRTC is
    /// needed only where this build carries no kernels for the GPU: `kernels`).
    pub fn open(ordinal: usize) -> Result<Gpu> {
        let n = count()?;
        if ordinal >= n {
            return Err(CudaError::Unavailable(format!(
                "no CUDA device with ordinal {ordinal} (the driver reports {n} device(s))"
            )));
        }
        let info = info(ordinal)?;
        let ctx = CudaContext::new(ordinal).map_err(driver("cuCtxCreate"))?;
        Ok(Gpu { ctx, info })
    }
}

//! The compiled model's flat tables ([`histfit_compute::flat`]) on a CUDA device: uploaded once
//! per session, passed to the kernels as one `Tables` argument of dimensions and pointers.

use crate::{driver, Result};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr};
pub use histfit_compute::flat::{HostTables, KIND_GAUSS, KIND_NONE, KIND_POISSON};
use std::sync::Arc;

/// The kernel's `Tables` argument: dimensions and device pointers (layout matches the C struct:
/// ten ints, then pointers on 8-byte boundaries).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TablesArg {
    pub dims: [i32; 10],
    pub ptrs: [u64; 26],
}

// SAFETY: plain old data whose layout matches `struct Tables` in histfit.cu.
unsafe impl DeviceRepr for TablesArg {}

/// The tables on the device (kept alive as long as the pointers in `arg` are used).
#[derive(Debug)]
pub struct DeviceTables {
    pub host: HostTables,
    ints: Vec<CudaSlice<i32>>,
    reals: Vec<CudaSlice<f64>>,
    pub arg: TablesArg,
}

impl DeviceTables {
    pub fn upload(host: HostTables, stream: &Arc<CudaStream>) -> Result<DeviceTables> {
        // An empty table still gets one element, so every pointer is valid.
        let up_i = |v: &[i32]| -> Result<CudaSlice<i32>> {
            let v = if v.is_empty() { &[0][..] } else { v };
            stream.clone_htod(v).map_err(driver("upload of the model"))
        };
        let up_f = |v: &[f64]| -> Result<CudaSlice<f64>> {
            let v = if v.is_empty() { &[0.0][..] } else { v };
            stream.clone_htod(v).map_err(driver("upload of the model"))
        };
        let h = &host;
        // Order = the pointer order of `struct Tables`.
        enum K<'a> {
            I(&'a [i32]),
            F(&'a [f64]),
        }
        let order = [
            K::I(&h.smp),
            K::F(&h.nominal),
            K::I(&h.sb_sample),
            K::I(&h.sb_bin),
            K::I(&h.bf_off),
            K::I(&h.bf_par),
            K::I(&h.sf_par),
            K::I(&h.sf_sample),
            K::I(&h.ns_par),
            K::I(&h.ns_code),
            K::I(&h.ns_sample),
            K::F(&h.ns_coef),
            K::I(&h.hs_par),
            K::I(&h.hs_code),
            K::I(&h.hs_sample),
            K::I(&h.hs_row),
            K::F(&h.hs_coef),
            K::F(&h.hs_poly),
            K::I(&h.bin_off),
            K::I(&h.bin_sb),
            K::I(&h.aux_par),
            K::I(&h.aux_kind),
            K::F(&h.aux_const),
            K::I(&h.term_off),
            K::I(&h.term_idx),
            K::F(&h.nominal0),
        ];
        let (mut ints, mut reals) = (Vec::new(), Vec::new());
        let mut ptrs = [0u64; 26];
        for (k, item) in order.iter().enumerate() {
            ptrs[k] = match item {
                K::I(v) => {
                    let d = up_i(v)?;
                    let p = d.device_ptr(stream).0;
                    ints.push(d);
                    p
                }
                K::F(v) => {
                    let d = up_f(v)?;
                    let p = d.device_ptr(stream).0;
                    reals.push(d);
                    p
                }
            };
        }
        stream
            .synchronize()
            .map_err(driver("upload of the model"))?;
        let arg = TablesArg {
            dims: host.dims,
            ptrs,
        };
        Ok(DeviceTables {
            host,
            ints,
            reals,
            arg,
        })
    }

    /// Device address of the nominal yields (one per sample-bin), which an evaluator of yields
    /// as inputs overwrites.
    pub fn nominal_ptr(&self) -> u64 {
        self.arg.ptrs[1]
    }

    /// Device address of the main bin of every sample-bin.
    pub fn sb_bin_ptr(&self) -> u64 {
        self.arg.ptrs[3]
    }

    /// Device memory held by the tables, in bytes.
    pub fn bytes(&self) -> usize {
        self.ints.iter().map(|s| s.len() * 4).sum::<usize>()
            + self.reals.iter().map(|s| s.len() * 8).sum::<usize>()
    }
}

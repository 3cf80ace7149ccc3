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
    pub ptrs: [u64; 27],
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
        let order_of_yields = yield_order(h);
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
            K::I(&order_of_yields),
        ];
        let (mut ints, mut reals) = (Vec::new(), Vec::new());
        let mut ptrs = [0u64; 27];
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

/// The histosys entries of sample-bin `sb`'s sample: the rows its yield walks.
fn histosys_entries(h: &HostTables, sb: usize) -> i32 {
    let sm = &h.smp[9 * h.sb_sample[sb] as usize..];
    sm[8] - sm[7]
}

/// Threads per block the yields' order is made for (the resident fits' block size).
const ORDER_THREADS: usize = 128;

/// The order in which a block's threads take the sample-bins in the kernels' yields loop
/// (position p → thread p mod the block size; `sb_order` in histfit.cu): a sample-bin's yield
/// walks its sample's histosys entries, from none to dozens, so in index order some warps held
/// lanes with twice the average walk (tHu: the longest warp 155 rows against 61 on average).
/// Sorted by that length, longest first, every other row of [`ORDER_THREADS`] reversed, the
/// longest warp walks 80. Only which thread computes a yield changes, not how.
pub(crate) fn yield_order(h: &HostTables) -> Vec<i32> {
    let n_sb = h.sb_sample.len();
    let mut order: Vec<usize> = (0..n_sb).collect();
    order.sort_by_key(|&sb| std::cmp::Reverse(histosys_entries(h, sb)));
    for (row, chunk) in order.chunks_mut(ORDER_THREADS).enumerate() {
        if row % 2 == 1 {
            chunk.reverse();
        }
    }
    order.into_iter().map(|sb| sb as i32).collect()
}

#[cfg(test)]
mod tests {
    use super::{histosys_entries, yield_order, HostTables, ORDER_THREADS};

    /// The longest walk of any warp of a block through the yields' loop: for each row of
    /// [`ORDER_THREADS`] positions, a warp walks as far as its longest lane.
    fn longest_warp(h: &HostTables, order: &[i32]) -> i32 {
        let mut warps = [0; ORDER_THREADS / 32];
        for row in order.chunks(ORDER_THREADS) {
            for (w, lanes) in row.chunks(32).enumerate() {
                warps[w] += lanes
                    .iter()
                    .map(|&sb| histosys_entries(h, sb as usize))
                    .max()
                    .unwrap_or(0);
            }
        }
        warps.into_iter().max().unwrap_or(0)
    }

    #[test]
    fn the_yields_order_is_a_permutation_that_evens_the_warps_walks() {
        let text = std::fs::read_to_string(histfit_testutil::fixture("workspace_tHu.json"))
            .expect("fixture");
        let ws = histfit_model::Workspace::from_str(&text, "tHu").expect("valid workspace");
        let m = histfit_model::compile(&ws, None, &Default::default()).expect("compiles");
        let h = HostTables::new(&m);
        let order = yield_order(&h);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        let n_sb = h.sb_sample.len() as i32;
        assert_eq!(sorted, (0..n_sb).collect::<Vec<_>>());
        let by_index: Vec<i32> = (0..n_sb).collect();
        assert_eq!(
            (longest_warp(&h, &by_index), longest_warp(&h, &order)),
            (155, 80)
        );
    }
}

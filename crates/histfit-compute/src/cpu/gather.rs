//! Index tables checked once when they are built, and the gathers through them: the per-entry
//! indirections of the evaluator (normsys and bin-factor sums, histosys weights) run without a
//! bounds check per element.

use super::kernels::Madd;

/// A table of indices into arrays of at least `bound` values, checked once when it is built, so
/// that the gathers through it (a few thousand per evaluation, the normsys and bin-factor sums)
/// need no check per element: one per call, against the array's length.
#[derive(Debug, Clone)]
pub(super) struct Gather {
    pub(super) idx: Vec<u32>,
    bound: usize,
}

impl Gather {
    pub(super) fn new(idx: Vec<u32>, bound: usize) -> Gather {
        assert!(
            idx.iter().all(|&i| (i as usize) < bound),
            "index table out of range"
        );
        Gather { idx, bound }
    }

    /// The indices `range` (by position in the table).
    pub(super) fn at(&self, range: std::ops::Range<usize>) -> GatherSlice<'_> {
        GatherSlice {
            idx: &self.idx[range],
            bound: self.bound,
        }
    }
}

/// Part of a [`Gather`] table: every index is below `bound`.
#[derive(Clone, Copy)]
pub(super) struct GatherSlice<'a> {
    idx: &'a [u32],
    bound: usize,
}

impl<'a> GatherSlice<'a> {
    /// v[i] for an index `i` of this table; the caller has checked `v.len() >= self.bound`.
    #[inline(always)]
    fn load(&self, v: &[f64], i: u32) -> f64 {
        debug_assert!((i as usize) < v.len());
        // SAFETY: i < bound (checked when the table was built) ≤ v.len() (checked by the
        // caller, once per call, before any load).
        unsafe { *v.get_unchecked(i as usize) }
    }

    /// out[k] = v[iₖ].
    #[inline(always)]
    pub(super) fn gather(&self, v: &[f64], out: &mut [f64]) {
        assert!(v.len() >= self.bound);
        for (o, &q) in out.iter_mut().zip(self.idx) {
            *o = self.load(v, q);
        }
    }

    /// The indices, after checking once that they all lie below `len` (they lie below the
    /// table's bound): for kernels that read through them without a check per element.
    pub(super) fn below(&self, len: usize) -> &'a [u32] {
        assert!(
            self.bound <= len,
            "index table bound {} beyond {len}",
            self.bound
        );
        self.idx
    }

    /// Σ v[i] over the indices, in four independent chains.
    #[inline(always)]
    pub(super) fn sum(&self, v: &[f64]) -> f64 {
        self.reduce(v, 0.0, |a, b| a + b)
    }

    /// Π v[i] over the indices, in four independent chains.
    #[inline(always)]
    pub(super) fn product(&self, v: &[f64]) -> f64 {
        self.reduce(v, 1.0, |a, b| a * b)
    }

    /// v[i] over the indices combined by `op` (from `unit`) in four independent chains, then
    /// (c0 op c1) op (c2 op c3).
    #[inline(always)]
    fn reduce(&self, v: &[f64], unit: f64, op: impl Fn(f64, f64) -> f64) -> f64 {
        assert!(v.len() >= self.bound);
        let mut acc = [unit; 4];
        let c = self.idx.chunks_exact(4);
        let rest = c.remainder();
        for q in c {
            for l in 0..4 {
                acc[l] = op(acc[l], self.load(v, q[l]));
            }
        }
        for &q in rest {
            acc[0] = op(acc[0], self.load(v, q));
        }
        op(op(acc[0], acc[1]), op(acc[2], acc[3]))
    }

    /// Σₖ r[k]·w[iₖ], in four independent chains.
    #[inline(always)]
    pub(super) fn weighted_sum<M: Madd>(&self, r: &[f64], w: &[f64]) -> f64 {
        assert!(w.len() >= self.bound);
        let r = &r[..self.idx.len()];
        let mut acc = [0.0; 4];
        let (cr, ci) = (r.chunks_exact(4), self.idx.chunks_exact(4));
        let (rr, ri) = (cr.remainder(), ci.remainder());
        for (x, q) in cr.zip(ci) {
            for l in 0..4 {
                acc[l] = M::madd(x[l], self.load(w, q[l]), acc[l]);
            }
        }
        for (x, &q) in rr.iter().zip(ri) {
            acc[0] = M::madd(*x, self.load(w, q), acc[0]);
        }
        (acc[0] + acc[1]) + (acc[2] + acc[3])
    }
}

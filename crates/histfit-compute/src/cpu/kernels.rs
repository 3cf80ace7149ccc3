//! The evaluator's arithmetic kernels: the histosys matrix-vector product and its transpose
//! (column sums) over a sample's blocked coefficients, and the code-4 normsys polynomial.
//!
//! Each is written once, generic over [`Madd`], and compiled twice: with AVX2+FMA enabled
//! (chosen at run time where the CPU has them; the hot loops then use explicit 4-wide vectors),
//! and for the baseline target. On one machine the choice never changes, so results stay
//! bit-identical across evaluators and threads.
//!
//! **Block layout.** A sample's histosys coefficients for `k` bins and rows of `len` values
//! (`len` a multiple of 4) are stored chunk-major: the 4 values of columns 4c..4c+4 of row b at
//! `(c·k + b)·4`. Both kernels then stream through the block with one pointer and constant
//! offsets (no per-row address arithmetic), `k` independent chains in the forward product.

use super::gather::GatherSlice;

/// Multiply-add, fused (one rounding, one instruction on CPUs with FMA) or plain (two
/// roundings; a fused one without hardware FMA would be a slow library call).
pub(super) trait Madd: Sized {
    fn madd(a: f64, b: f64, c: f64) -> f64;
    /// See [`matvec_add`].
    #[inline(always)]
    fn matvec_add(x: Weights, block: &[f64], out: &mut [f64]) {
        matvec_add::<Self>(x, block, out)
    }
    /// See [`column_sums_into`].
    #[inline(always)]
    fn column_sums_into(
        g: &[f64],
        block: &[f64],
        at: GatherSlice,
        sums: &mut [[f64; 4]],
        lane: usize,
    ) {
        column_sums_into::<Self>(g, block, at, sums, lane)
    }
    /// See [`code4_poly`].
    #[inline(always)]
    fn code4_poly(c: &[f64], pw: &[f64; 6], dpw: &[f64; 6], v: &mut [f64], r: &mut [f64]) {
        code4_poly::<Self>(c, pw, dpw, v, r, 0)
    }
    /// See [`exp_factors`].
    #[inline(always)]
    fn exp_factors(ln: &[f64], a: f64, v: &mut [f64], r: &mut [f64]) {
        exp_factors(ln, a, v, r, 0)
    }
}

pub(super) struct Plain;
impl Madd for Plain {
    #[inline(always)]
    fn madd(a: f64, b: f64, c: f64) -> f64 {
        a * b + c
    }
}

pub(super) struct Fused;
impl Madd for Fused {
    #[inline(always)]
    fn madd(a: f64, b: f64, c: f64) -> f64 {
        a.mul_add(b, c)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn matvec_add(x: Weights, block: &[f64], out: &mut [f64]) {
        // SAFETY: `Fused` runs only inside the AVX2+FMA builds, chosen where the CPU has both.
        unsafe { avx::matvec_add(x, block, out) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn column_sums_into(
        g: &[f64],
        block: &[f64],
        at: GatherSlice,
        sums: &mut [[f64; 4]],
        lane: usize,
    ) {
        // SAFETY: as above.
        unsafe { avx::column_sums_into(g, block, at, sums, lane) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn code4_poly(c: &[f64], pw: &[f64; 6], dpw: &[f64; 6], v: &mut [f64], r: &mut [f64]) {
        // SAFETY: as above.
        let done = unsafe { avx::code4_poly(c, pw, dpw, v, r) };
        code4_poly::<Self>(c, pw, dpw, v, r, done)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn exp_factors(ln: &[f64], a: f64, v: &mut [f64], r: &mut [f64]) {
        // SAFETY: as above.
        let done = unsafe { avx::exp_factors(ln, a, v, r) };
        exp_factors(ln, a, v, r, done)
    }
}

/// Whether this CPU runs the fused (AVX2+FMA) build of the hot loops.
pub(super) fn cpu_has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The interpolation weights of a sample's histosys entries, read in place from the
/// per-parameter table: entry e's pair is (w[iₑ][lane], w[iₑ][lane + 1]) for its parameter iₑ.
/// A sample's row of interleaved pairs (column 2e + k) is these pairs, padded with zeros to
/// whole 4-wide vectors.
#[derive(Clone, Copy)]
pub(super) struct Weights<'a> {
    w: &'a [[f64; 8]],
    idx: &'a [u32],
    lane: usize,
}

impl<'a> Weights<'a> {
    pub(super) fn new(w: &'a [[f64; 8]], at: GatherSlice<'a>, lane: usize) -> Weights<'a> {
        assert!(lane < 7);
        Weights {
            idx: at.below(w.len()),
            w,
            lane,
        }
    }

    /// Entry e's pair; e < the number of entries.
    #[inline(always)]
    fn pair(&self, e: usize) -> [f64; 2] {
        let row = &self.w[self.idx[e] as usize];
        [row[self.lane], row[self.lane + 1]]
    }

    /// Column j of the padded row.
    #[inline(always)]
    fn column(&self, j: usize) -> f64 {
        if j / 2 < self.idx.len() {
            self.pair(j / 2)[j % 2]
        } else {
            0.0
        }
    }
}

/// out[b] += Σ_j x_j·row_b[j] for the `out.len()` rows of a block (see the module docs), x the
/// padded row of weights. Each row's sum in four lanes (lane l over the columns j ≡ l mod 4,
/// in order), then (l0 + l1) + (l2 + l3).
#[inline(always)]
pub(super) fn matvec_add<M: Madd>(x: Weights, block: &[f64], out: &mut [f64]) {
    let (k, chunks) = (out.len(), x.idx.len().div_ceil(2));
    assert!(block.len() >= chunks * 4 * k);
    for (b, o) in out.iter_mut().enumerate() {
        let mut acc = [0.0; 4];
        for c in 0..chunks {
            let v = &block[(c * k + b) * 4..(c * k + b) * 4 + 4];
            for l in 0..4 {
                acc[l] = M::madd(x.column(4 * c + l), v[l], acc[l]);
            }
        }
        *o += (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
}

/// sums[iₑ][lane + k] += Σ_b g[b]·row_b[2e + k] (k = 0, 1) for every entry e, iₑ its index in
/// `at`: the column sums of a block (see the module docs; each column summed over b in order),
/// added up per parameter. (The parameter's derivative weights multiply the totals once.)
#[inline(always)]
pub(super) fn column_sums_into<M: Madd>(
    g: &[f64],
    block: &[f64],
    at: GatherSlice,
    sums: &mut [[f64; 4]],
    lane: usize,
) {
    let (k, idx) = (g.len(), at.below(sums.len()));
    assert!(block.len() >= idx.len().div_ceil(2) * 4 * k && lane < 3);
    for (e, &i) in idx.iter().enumerate() {
        let (c, h) = (e / 2, 2 * (e % 2));
        let mut col = [0.0; 2];
        for (b, &gb) in g.iter().enumerate() {
            let v = &block[(c * k + b) * 4 + h..(c * k + b) * 4 + h + 2];
            col[0] = M::madd(gb, v[0], col[0]);
            col[1] = M::madd(gb, v[1], col[1]);
        }
        let s = &mut sums[i as usize];
        s[lane] += col[0];
        s[lane + 1] += col[1];
    }
}

/// The code-4 polynomial of normsys entries sharing one α, from position `from` on: with
/// pw = (α, α², …, α⁶) and dpw their derivatives, κ = 1 + Σₖ cₖ·pwₖ into `v` and (dκ/dα)/κ
/// into `r`. `c` holds the coefficients in blocks of four positions: cₖ of position i at
/// (i / 4)·24 + 4k + i mod 4.
#[inline(always)]
pub(super) fn code4_poly<M: Madd>(
    c: &[f64],
    pw: &[f64; 6],
    dpw: &[f64; 6],
    v: &mut [f64],
    r: &mut [f64],
    from: usize,
) {
    let n = v.len();
    let r = &mut r[..n];
    // Equal lengths stated once, so the loop needs no bounds checks.
    let at = |k: usize, i: usize| c[(i / 4) * 24 + k * 4 + i % 4];
    for i in from..n {
        let mut vi = at(0, i) * pw[0];
        let mut di = at(0, i);
        for k in 1..6 {
            vi = M::madd(at(k, i), pw[k], vi);
            di = M::madd(at(k, i), dpw[k], di);
        }
        v[i] = 1.0 + vi;
        r[i] = di / (1.0 + vi);
    }
}

/// The exponential branch of multiplicative normsys entries sharing one α, from position `from`
/// on: κ = exp(α·ln) into `v` and (dκ/dα)/κ = ln into `r` (`ln` holds ln(hi) for α > 0 and
/// −ln(lo) for α < 0).
#[inline(always)]
pub(super) fn exp_factors(ln: &[f64], a: f64, v: &mut [f64], r: &mut [f64], from: usize) {
    let n = v.len();
    let (ln, r) = (&ln[..n], &mut r[..n]);
    for i in from..n {
        v[i] = (a * ln[i]).exp();
        r[i] = ln[i];
    }
}

/// AVX2+FMA forms of the kernels: the same operations in the same order as the generic code.
#[cfg(target_arch = "x86_64")]
mod avx {
    use super::{GatherSlice, Weights};
    use std::arch::x86_64::*;

    /// The pairs of entries 2c and 2c + 1 (zeros past the last entry) as one vector.
    #[inline(always)]
    unsafe fn pairs(x: &Weights, c: usize) -> __m256d {
        let row = |e: usize| {
            // SAFETY: every index lies below `x.w.len()` (`GatherSlice::below`).
            x.w.get_unchecked(*x.idx.get_unchecked(e) as usize)
                .as_ptr()
                .add(x.lane)
        };
        let lo = _mm_loadu_pd(row(2 * c));
        if 2 * c + 1 < x.idx.len() {
            _mm256_insertf128_pd(_mm256_castpd128_pd256(lo), _mm_loadu_pd(row(2 * c + 1)), 1)
        } else {
            _mm256_zextpd128_pd256(lo)
        }
    }

    /// `super::matvec_add`. Blocks of up to eight rows take a build for their row count: every
    /// row's accumulator in a register, the weights loaded once per chunk.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn matvec_add(x: Weights, block: &[f64], out: &mut [f64]) {
        let k = out.len();
        assert!(block.len() >= x.idx.len().div_ceil(2) * 4 * k);
        match k {
            0 => {}
            1 => matvec_for::<1>(x, block, out),
            2 => matvec_for::<2>(x, block, out),
            3 => matvec_for::<3>(x, block, out),
            4 => matvec_for::<4>(x, block, out),
            5 => matvec_for::<5>(x, block, out),
            6 => matvec_for::<6>(x, block, out),
            7 => matvec_for::<7>(x, block, out),
            8 => matvec_for::<8>(x, block, out),
            _ => super::matvec_add::<super::Fused>(x, block, out),
        }
    }

    #[inline(always)]
    unsafe fn matvec_for<const K: usize>(x: Weights, block: &[f64], out: &mut [f64]) {
        let mut acc = [_mm256_setzero_pd(); K];
        let mut p = block.as_ptr();
        for c in 0..x.idx.len().div_ceil(2) {
            let xv = pairs(&x, c);
            for (b, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_pd(xv, _mm256_loadu_pd(p.add(4 * b)), *a);
            }
            p = p.add(4 * K);
        }
        for (o, a) in out.iter_mut().zip(acc) {
            let mut l = [0.0; 4];
            _mm256_storeu_pd(l.as_mut_ptr(), a);
            *o += (l[0] + l[1]) + (l[2] + l[3]);
        }
    }

    /// `super::column_sums_into`. Blocks of up to eight rows take a build for their row count:
    /// the loop over rows unrolled and each g[b] broadcast once.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn column_sums_into(
        g: &[f64],
        block: &[f64],
        at: GatherSlice,
        sums: &mut [[f64; 4]],
        lane: usize,
    ) {
        let idx = at.below(sums.len());
        assert!(block.len() >= idx.len().div_ceil(2) * 4 * g.len() && lane < 3);
        match g.len() {
            1 => sums_for::<1>(g, block, idx, sums, lane),
            2 => sums_for::<2>(g, block, idx, sums, lane),
            3 => sums_for::<3>(g, block, idx, sums, lane),
            4 => sums_for::<4>(g, block, idx, sums, lane),
            5 => sums_for::<5>(g, block, idx, sums, lane),
            6 => sums_for::<6>(g, block, idx, sums, lane),
            7 => sums_for::<7>(g, block, idx, sums, lane),
            8 => sums_for::<8>(g, block, idx, sums, lane),
            _ => super::column_sums_into::<super::Fused>(g, block, at, sums, lane),
        }
    }

    /// `idx`: every index below `sums.len()`.
    #[inline(always)]
    unsafe fn sums_for<const K: usize>(
        g: &[f64],
        block: &[f64],
        idx: &[u32],
        sums: &mut [[f64; 4]],
        lane: usize,
    ) {
        let gv: [__m256d; K] = std::array::from_fn(|b| _mm256_set1_pd(g[b]));
        let mut p = block.as_ptr();
        let ne = idx.len();
        // Entry e's pair of sums into its parameter's accumulators.
        let mut add = |e: usize, v: __m128d| {
            // SAFETY: every index lies below `sums.len()` (`GatherSlice::below`), lane < 3.
            let s = sums.as_mut_ptr().add(*idx.get_unchecked(e) as usize) as *mut f64;
            let s = s.add(lane);
            _mm_storeu_pd(s, _mm_add_pd(_mm_loadu_pd(s), v));
        };
        for c in 0..ne.div_ceil(2) {
            let mut a = _mm256_setzero_pd();
            for (b, gb) in gv.iter().enumerate() {
                a = _mm256_fmadd_pd(*gb, _mm256_loadu_pd(p.add(4 * b)), a);
            }
            p = p.add(4 * K);
            add(2 * c, _mm256_castpd256_pd128(a));
            if 2 * c + 1 < ne {
                add(2 * c + 1, _mm256_extractf128_pd(a, 1));
            }
        }
    }

    /// `super::exp_factors` over whole vectors (a vector with an argument beyond ±708, or not a
    /// number, goes to the library's exp lane by lane); returns where it stopped.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn exp_factors(ln: &[f64], a: f64, v: &mut [f64], r: &mut [f64]) -> usize {
        let n = v.len();
        assert!(ln.len() >= n && r.len() >= n);
        let av = _mm256_set1_pd(a);
        let limit = _mm256_set1_pd(708.0);
        let mut i = 0;
        while i + 4 <= n {
            let l = _mm256_loadu_pd(ln.as_ptr().add(i));
            let x = _mm256_mul_pd(av, l);
            let inside = _mm256_cmp_pd(abs(x), limit, _CMP_LE_OQ);
            if _mm256_movemask_pd(inside) == 0b1111 {
                _mm256_storeu_pd(v.as_mut_ptr().add(i), exp(x));
            } else {
                let mut xs = [0.0; 4];
                _mm256_storeu_pd(xs.as_mut_ptr(), x);
                for (k, xk) in xs.iter().enumerate() {
                    v[i + k] = xk.exp();
                }
            }
            _mm256_storeu_pd(r.as_mut_ptr().add(i), l);
            i += 4;
        }
        i
    }

    #[inline(always)]
    unsafe fn abs(x: __m256d) -> __m256d {
        _mm256_andnot_pd(_mm256_set1_pd(-0.0), x)
    }

    /// eˣ for |x| ≤ 708, to about an ulp: x = k·ln 2 + r with |r| ≤ ln 2 / 2 (ln 2 in two
    /// parts), eʳ by its Taylor series to r¹³ (truncation < 1e-17 relative), times 2ᵏ built in
    /// the exponent bits.
    #[inline(always)]
    unsafe fn exp(x: __m256d) -> __m256d {
        const LN2_HI: f64 = std::f64::consts::LN_2;
        const LN2_LO: f64 = 2.319_046_813_846_299_6e-17;
        // 1.5·2⁵²: adding it rounds to an integer held in the low mantissa bits.
        const SHIFT: f64 = 6_755_399_441_055_744.0;
        let shift = _mm256_set1_pd(SHIFT);
        let t = _mm256_fmadd_pd(x, _mm256_set1_pd(std::f64::consts::LOG2_E), shift);
        let k = _mm256_sub_pd(t, shift);
        let r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_HI), x);
        let r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_LO), r);
        // Σ rⁿ/n! for n = 0..=13, by Horner.
        const INV_FACT: [f64; 14] = {
            let (mut a, mut f, mut n) = ([1.0; 14], 1.0, 1);
            while n < 14 {
                f *= n as f64;
                a[n] = 1.0 / f;
                n += 1;
            }
            a
        };
        let mut p = _mm256_set1_pd(INV_FACT[13]);
        for c in INV_FACT[..13].iter().rev() {
            p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(*c));
        }
        let ki = _mm256_sub_epi64(_mm256_castpd_si256(t), _mm256_castpd_si256(shift));
        let scale = _mm256_slli_epi64(_mm256_add_epi64(ki, _mm256_set1_epi64x(1023)), 52);
        _mm256_mul_pd(p, _mm256_castsi256_pd(scale))
    }

    /// `super::code4_poly` over whole vectors; returns where it stopped (the rest, less than a
    /// vector, is left to the generic code).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn code4_poly(
        c: &[f64],
        pw: &[f64; 6],
        dpw: &[f64; 6],
        v: &mut [f64],
        r: &mut [f64],
    ) -> usize {
        let n = v.len();
        assert!(r.len() >= n && c.len() >= 6 * (n / 4 * 4));
        let pwv: [__m256d; 6] = std::array::from_fn(|k| _mm256_set1_pd(pw[k]));
        let dpwv: [__m256d; 5] = std::array::from_fn(|k| _mm256_set1_pd(dpw[k + 1]));
        let one = _mm256_set1_pd(1.0);
        let mut i = 0;
        while i + 4 <= n {
            let ck: [__m256d; 6] =
                std::array::from_fn(|k| _mm256_loadu_pd(c.as_ptr().add(6 * i + 4 * k)));
            let mut vi = _mm256_mul_pd(ck[0], pwv[0]);
            let mut di = ck[0];
            for k in 1..6 {
                vi = _mm256_fmadd_pd(ck[k], pwv[k], vi);
                di = _mm256_fmadd_pd(ck[k], dpwv[k - 1], di);
            }
            let kappa = _mm256_add_pd(one, vi);
            _mm256_storeu_pd(v.as_mut_ptr().add(i), kappa);
            _mm256_storeu_pd(r.as_mut_ptr().add(i), _mm256_div_pd(di, kappa));
            i += 4;
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector exponential of the fused build against the library's, over the whole range
    /// it takes (and past it, where it hands over to the library), to a few ulps.
    #[test]
    fn exp_factors_match_the_library_exp() {
        if !cpu_has_fma() {
            // The fused build never runs here; the generic one is the library's exp itself.
            return;
        }
        let ln: Vec<f64> = (0..4001).map(|i| -710.0 + 0.355 * i as f64).collect();
        let (mut v, mut r) = (vec![0.0; ln.len()], vec![0.0; ln.len()]);
        Fused::exp_factors(&ln, 1.0, &mut v, &mut r);
        let mut worst: f64 = 0.0;
        for (i, &x) in ln.iter().enumerate() {
            let want = x.exp();
            let err = if v[i] == want {
                0.0
            } else if want == 0.0 {
                v[i].abs()
            } else {
                ((v[i] - want) / want).abs()
            };
            assert!(err <= 1e-15, "exp({x}) = {} vs {want}", v[i]);
            worst = worst.max(err);
            assert_eq!(r[i], x);
        }
        println!("worst relative difference from the library's exp: {worst:e}");
        let mut nan = [0.0; 4];
        Fused::exp_factors(&[1.0, f64::NAN, 2.0, 3.0], 1.0, &mut nan, &mut [0.0; 4]);
        assert!(nan[1].is_nan() && (nan[0] - 1f64.exp()).abs() < 1e-15);
    }
}

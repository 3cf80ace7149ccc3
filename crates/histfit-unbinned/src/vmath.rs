//! e^x and ln x written without branches or library calls, so that a loop over a block of
//! events compiles to vector instructions (the library's `exp`/`log` are scalar calls, and were
//! most of an evaluation's time). Both are within 2 ulp of the correctly rounded result over
//! the whole range, subnormals, infinities and NaN included (tested against the library's).
//!
//! Their polynomials are fused multiply-adds ([`f64::mul_add`]: one rounding each) evaluated by
//! Estrin's scheme — pairs of terms, then pairs of pairs — whose dependency chain is four deep
//! where Horner's rule is thirteen: a vector unit then overlaps them, and that latency, not the
//! arithmetic, bounded the loops. A fused multiply-add is one instruction where the processor
//! has it (x86-64 with FMA, which the evaluator's wide build enables; every ARM64) and a
//! correctly rounded library call where it does not, so the results have the same bits on
//! every machine.

/// 1.5 · 2^52: adding it rounds a double below 2^51 in magnitude to an integer, held in the low
/// bits of the sum's mantissa (round to nearest even, as the hardware adds).
const ROUNDER: f64 = 6_755_399_441_055_744.0;
const LN2_HI: f64 = 0.693_147_180_369_123_8;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;

/// 2^k for an integer-valued k in [−1022, 1023]: k + 1023 sits in the low bits of
/// k + 1023 + ROUNDER, and moves from there into the exponent field.
#[inline(always)]
fn pow2(k: f64) -> f64 {
    f64::from_bits((k + (ROUNDER + 1023.0)).to_bits() << 52)
}

/// e^x.
#[inline(always)]
pub fn exp(x: f64) -> f64 {
    // Below −745.2 the result is 0, above 709.8 it is ∞: clamped, the scaling below gives them.
    let xc = x.clamp(-746.0, 710.0);
    let (t, p) = exp_reduced(xc);
    let n = t - ROUNDER;
    // 2^n in two factors 2^n₁ · 2^n₂ (n₁ = ⌊n/2⌋), each a normal number for n in
    // [−1077, 1025]: the product under- or overflows exactly where e^x does. Each factor's
    // exponent field comes from the float n₁ + 1023 by the rounder's bits (no integer shift
    // the vector unit lacks).
    let n1 = (n * 0.5).floor();
    let n2 = n - n1;
    let e = p * pow2(n1) * pow2(n2);
    if x.is_nan() {
        x
    } else {
        e
    }
}

/// Where [`exp_normal`] may be used: e^x is a normal number (and x is not NaN).
#[inline(always)]
pub fn exp_is_normal(x: f64) -> bool {
    (-708.0..=709.0).contains(&x)
}

/// [`exp`] for x where [`exp_is_normal`]: the same bits, with 2^n put into the exponent field
/// by one integer addition (exact where the result is normal) in place of the two scalings
/// that the range's ends need. A loop over a block whose arguments all lie there (the
/// common case: a density's exponent) runs it.
#[inline(always)]
pub fn exp_normal(x: f64) -> f64 {
    let (t, p) = exp_reduced(x);
    // t's low bits hold n + 2^51 (see ROUNDER); shifted up 52 they are n in the exponent
    // field, modulo 2^64 (the 2^51 and t's own exponent bits fall off the top).
    f64::from_bits(p.to_bits().wrapping_add(t.to_bits() << 52))
}

/// x = n ln 2 + r: the rounder's sum t = n + ROUNDER, and e^r.
#[inline(always)]
fn exp_reduced(x: f64) -> (f64, f64) {
    let t = x.mul_add(std::f64::consts::LOG2_E, ROUNDER);
    let n = t - ROUNDER;
    // r = x − n ln 2 in two steps (n ln2_hi is exact): |r| ≤ ln 2 / 2.
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, x));
    // e^r by its Taylor series to r^13 (the next term is below 2^−53 of the sum), by Estrin's
    // scheme: c_k = 1/k!.
    let r2 = r * r;
    let r4 = r2 * r2;
    let r8 = r4 * r4;
    let q0 = r.mul_add(1.0, 1.0);
    let q1 = r.mul_add(1.0 / 6.0, 0.5);
    let q2 = r.mul_add(1.0 / 120.0, 1.0 / 24.0);
    let q3 = r.mul_add(1.0 / 5_040.0, 1.0 / 720.0);
    let q4 = r.mul_add(1.0 / 362_880.0, 1.0 / 40_320.0);
    let q5 = r.mul_add(1.0 / 39_916_800.0, 1.0 / 3_628_800.0);
    let q6 = r.mul_add(1.0 / 6_227_020_800.0, 1.0 / 479_001_600.0);
    let s0 = q1.mul_add(r2, q0);
    let s1 = q3.mul_add(r2, q2);
    let s2 = q5.mul_add(r2, q4);
    let t0 = s1.mul_add(r4, s0);
    let t1 = q6.mul_add(r4, s2);
    (t, t1.mul_add(r8, t0))
}

/// ln x (NaN below 0, −∞ at 0).
#[inline(always)]
pub fn ln(x: f64) -> f64 {
    // Subnormals scaled into the normal range first (by 2^54, taken back from the exponent).
    let tiny = x < f64::MIN_POSITIVE;
    let y = if tiny {
        x * 18_014_398_509_481_984.0
    } else {
        x
    };
    let r = ln_scaled(y, if tiny { 54 } else { 0 });
    if x > 0.0 && x < f64::INFINITY {
        r
    } else if x == 0.0 {
        f64::NEG_INFINITY
    } else if x == f64::INFINITY {
        x
    } else {
        f64::NAN
    }
}

/// Where [`ln_normal`] may be used: x is a positive normal number.
#[inline(always)]
pub fn ln_is_normal(x: f64) -> bool {
    (f64::MIN_POSITIVE..=f64::MAX).contains(&x)
}

/// [`ln`] for x where [`ln_is_normal`]: the same bits, without the scaling of subnormals and
/// the special values' selects.
#[inline(always)]
pub fn ln_normal(x: f64) -> f64 {
    ln_scaled(x, 0)
}

/// ln(y) − k ln 2 for a positive normal y.
#[inline(always)]
fn ln_scaled(y: f64, k: i64) -> f64 {
    let bits = y.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    // The mantissa as m in [1, 2), then moved to [√½, √2) so that ln m is small.
    let m1 = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    let big = m1 > std::f64::consts::SQRT_2;
    let m = if big { 0.5 * m1 } else { m1 };
    let e = biased - 1023 + i64::from(big) - k;
    // e as a double without an integer conversion (which vector units lack): from its bits.
    let ef = f64::from_bits(0x4330_0000_0000_0000 | (e + (1 << 31)) as u64)
        - (4_503_599_627_370_496.0 + 2_147_483_648.0);
    // ln m = 2 atanh(s), s = (m − 1)/(m + 1), |s| ≤ 0.1716: the odd series to s^23.
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    // q = Σ_k z^k / (2k + 3), k = 0 … 10, by Estrin's scheme.
    let z2 = z * z;
    let z4 = z2 * z2;
    let z8 = z4 * z4;
    let p0 = z.mul_add(1.0 / 5.0, 1.0 / 3.0);
    let p1 = z.mul_add(1.0 / 9.0, 1.0 / 7.0);
    let p2 = z.mul_add(1.0 / 13.0, 1.0 / 11.0);
    let p3 = z.mul_add(1.0 / 17.0, 1.0 / 15.0);
    let p4 = z.mul_add(1.0 / 21.0, 1.0 / 19.0);
    let s0 = p1.mul_add(z2, p0);
    let s1 = p3.mul_add(z2, p2);
    let s2 = z2.mul_add(1.0 / 23.0, p4);
    let t0 = s1.mul_add(z4, s0);
    let q = s2.mul_add(z8, t0);
    // 2s(1 + z q) written as f − s f + 2 s z q: f is exact, which keeps ln m to an ulp.
    let lnm = (2.0 * s * z).mul_add(q, (-s).mul_add(f, f));
    ef.mul_add(LN2_HI, ef.mul_add(LN2_LO, lnm))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place.
    fn ulps(a: f64, b: f64) -> u64 {
        if a == b || (a.is_nan() && b.is_nan()) {
            return 0;
        }
        (a.to_bits() as i64).abs_diff(b.to_bits() as i64)
    }

    /// Points spread over the range, with a quasi-random sequence and the edges.
    fn points(lo: f64, hi: f64, n: usize) -> impl Iterator<Item = f64> {
        (0..n).map(move |i| lo + (hi - lo) * ((i as f64 * 0.618_033_988_749_894_9) % 1.0))
    }

    #[test]
    fn exp_within_two_ulp_of_the_library() {
        let mut worst = 0;
        for x in points(-745.0, 709.7, 2_000_000).chain(points(-1.0, 1.0, 200_000)) {
            let (a, b) = (exp(x), x.exp());
            if b >= f64::MIN_POSITIVE {
                worst = worst.max(ulps(a, b));
            } else {
                // Subnormal results (rounded twice by the two scalings): within 2 of their units.
                assert!(ulps(a, b) <= 2, "exp({x}) = {a}, not {b}");
            }
        }
        assert!(worst <= 2, "worst {worst} ulp");
        for (x, want) in [
            (0.0, 1.0),
            (-0.0, 1.0),
            (710.0, f64::INFINITY),
            (1e300, f64::INFINITY),
            (f64::INFINITY, f64::INFINITY),
            (-746.0, 0.0),
            (-1e300, 0.0),
            (f64::NEG_INFINITY, 0.0),
        ] {
            assert_eq!(exp(x), want, "exp({x})");
        }
        assert!(exp(f64::NAN).is_nan());
        // Near the top of the range: finite, within an ulp.
        assert!(ulps(exp(709.78), 709.78f64.exp()) <= 1);
    }

    /// The fast paths give the general functions' bits wherever they apply, up to the ends.
    #[test]
    fn normal_paths_give_the_same_bits() {
        let xs = points(-708.0, 709.0, 1_000_000).chain([-708.0, 709.0, 0.0, -0.0, 1e-300]);
        for x in xs {
            assert!(exp_is_normal(x));
            assert_eq!(exp_normal(x).to_bits(), exp(x).to_bits(), "exp({x})");
        }
        for x in [-708.1, 709.1, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(!exp_is_normal(x), "{x}");
        }
        let ys = points(-700.0, 700.0, 1_000_000).map(f64::exp);
        for y in ys.chain([f64::MIN_POSITIVE, f64::MAX, 1.0]) {
            assert!(ln_is_normal(y));
            assert_eq!(ln_normal(y).to_bits(), ln(y).to_bits(), "ln({y})");
        }
        for y in [0.0, -0.0, 5e-324, -1.0, f64::NAN, f64::INFINITY] {
            assert!(!ln_is_normal(y), "{y}");
        }
    }

    #[test]
    fn ln_within_two_ulp_of_the_library() {
        let mut worst = 0;
        let wide = points(-700.0, 700.0, 2_000_000).map(f64::exp);
        let near_one = points(0.5, 2.0, 500_000);
        let subnormal = points(1.0, 4.5e15, 10_000).map(|m| m * 5e-324);
        for x in wide.chain(near_one).chain(subnormal) {
            worst = worst.max(ulps(ln(x), x.ln()));
        }
        assert!(worst <= 2, "worst {worst} ulp");
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
        assert_eq!(ln(-0.0), f64::NEG_INFINITY);
        assert_eq!(ln(f64::INFINITY), f64::INFINITY);
        assert!(ln(-1.0).is_nan() && ln(f64::NAN).is_nan() && ln(f64::NEG_INFINITY).is_nan());
        assert_eq!(ln(f64::MAX), f64::MAX.ln());
        assert_eq!(ln(5e-324), 5e-324f64.ln());
    }
}

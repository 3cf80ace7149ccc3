//! Counter-based random numbers for toys: Philox4x32-10 (Salmon et al., SC'11) keyed by the seed,
//! with the counter made of (toy index, stream, draw). Any toy's numbers can be produced alone, in
//! any order, on any thread or device, and come out the same — the property that lets an ensemble
//! be split across threads, cluster jobs or a GPU and merged bit for bit.
//!
//! The transforms on top (uniform, normal, Poisson) use only integer arithmetic and the IEEE f64
//! operations that every device rounds the same way (+, −, ×, /, √, floor; no fused
//! multiply-add). The logarithm, exponential and ln k! they need are written here in those
//! operations ([`portable_ln`], [`portable_exp`], [`ln_factorial`]) instead of taken from the
//! platform's maths library, whose last bits differ between glibc and CUDA. The CUDA kernels
//! carry a line-for-line port compiled without FMA contraction, so a toy is bit-identical on
//! both devices.

use crate::Result;

/// Philox4x32 multipliers and Weyl key increments (shared with the CUDA generator, which gets
/// them as compiler definitions).
pub const M0: u32 = 0xD251_1F53;
pub const M1: u32 = 0xCD9E_8D57;
pub const W0: u32 = 0x9E37_79B9;
pub const W1: u32 = 0xBB67_AE85;

/// One Philox4x32-10 block.
pub fn philox4x32_10(mut ctr: [u32; 4], mut key: [u32; 2]) -> [u32; 4] {
    for round in 0..10 {
        if round > 0 {
            key[0] = key[0].wrapping_add(W0);
            key[1] = key[1].wrapping_add(W1);
        }
        let p0 = u64::from(M0) * u64::from(ctr[0]);
        let p1 = u64::from(M1) * u64::from(ctr[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        ctr = [hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0];
    }
    ctr
}

/// Means below this are drawn by inversion (sequential search of the CDF), from it on by
/// Hörmann's transformed rejection (PTRS); the CUDA generator gets both constants from here.
pub const POISSON_INVERSION_BELOW: f64 = 12.0;
/// The inversion's last k (its CDF is 1 to rounding long before).
pub const POISSON_INVERSION_MAX_K: f64 = 1000.0;

/// Streams within one toy.
pub const STREAM_MAIN: u32 = 0;
pub const STREAM_AUX: u32 = 1;

/// A sequential reader over one (seed, toy, stream).
#[derive(Debug, Clone)]
pub struct ToyStream {
    key: [u32; 2],
    ctr: [u32; 4],
    buf: [u32; 4],
    used: usize,
}

impl ToyStream {
    pub fn new(seed: u64, toy: u64, stream: u32) -> ToyStream {
        ToyStream {
            key: [seed as u32, (seed >> 32) as u32],
            ctr: [toy as u32, (toy >> 32) as u32, stream, 0],
            buf: [0; 4],
            used: 4,
        }
    }

    fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            self.buf = philox4x32_10(self.ctr, self.key);
            self.ctr[3] = self.ctr[3].wrapping_add(1);
            self.used = 0;
        }
        self.used += 1;
        self.buf[self.used - 1]
    }

    /// Uniform in the open interval (0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        let a = u64::from(self.next_u32() >> 5); // 27 bits
        let b = u64::from(self.next_u32() >> 6); // 26 bits
        (((a << 26) | b) as f64 + 0.5) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// A standard normal variate (Marsaglia's polar method: a logarithm and a square root, no
    /// trigonometric function, so the device port is exact).
    pub fn normal(&mut self) -> f64 {
        loop {
            let v1 = 2.0 * self.uniform() - 1.0;
            let v2 = 2.0 * self.uniform() - 1.0;
            let s = v1 * v1 + v2 * v2;
            if s < 1.0 && s > 0.0 {
                return v1 * (-2.0 * portable_ln(s) / s).sqrt();
            }
        }
    }

    /// The logarithm of a Gamma(shape, 1) variate, shape > 0 (Marsaglia and Tsang's method, ACM
    /// TOMS 26 (2000) 363; below shape 1 as ln Gamma(shape + 1) + ln(U)/shape — in logarithms,
    /// since U^(1/shape) underflows for small shapes). NaN for a shape that is not positive.
    pub fn ln_gamma_variate(&mut self, shape: f64) -> f64 {
        if shape.is_nan() || shape <= 0.0 || shape.is_infinite() {
            return f64::NAN;
        }
        if shape < 1.0 {
            let g = self.ln_gamma_variate(shape + 1.0);
            return g + portable_ln(self.uniform()) / shape;
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.uniform();
            if portable_ln(u) < 0.5 * x * x + d - d * v + d * portable_ln(v) {
                return portable_ln(d * v);
            }
        }
    }

    pub fn poisson(&mut self, lam: f64) -> f64 {
        // (NaN included: no draw can end for a mean that is not a number.)
        if lam.is_nan() || lam <= 0.0 || lam.is_infinite() {
            return 0.0;
        }
        if lam < POISSON_INVERSION_BELOW {
            let u = self.uniform();
            let mut k = 0.0;
            let mut p = portable_exp(-lam);
            let mut cdf = p;
            while u > cdf && k < POISSON_INVERSION_MAX_K {
                k += 1.0;
                p *= lam / k;
                cdf += p;
            }
            return k;
        }
        let slam = lam.sqrt();
        let loglam = portable_ln(lam);
        let b = 0.931 + 2.53 * slam;
        let a = -0.059 + 0.02483 * b;
        let inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
        let vr = 0.9277 - 3.6224 / (b - 2.0);
        loop {
            let u = self.uniform() - 0.5;
            let v = self.uniform();
            let us = 0.5 - u.abs();
            let k = ((2.0 * a / us + b) * u + lam + 0.43).floor();
            if us >= 0.07 && v <= vr {
                return k;
            }
            if k < 0.0 || (us < 0.013 && v > us) {
                continue;
            }
            if portable_ln(v) + portable_ln(inv_alpha) - portable_ln(a / (us * us) + b)
                <= -lam + k * loglam - ln_factorial(k)
            {
                return k;
            }
        }
    }
}

/// Refuses non-finite generating parameters (a NaN Poisson mean never ends its draw): the check
/// of every device's toy generator.
pub fn check_generation_params(params: &[f64]) -> Result<()> {
    if let Some(i) = params.iter().position(|v| !v.is_finite()) {
        return Err(crate::ComputeError::InvalidData {
            place: format!("toy generation parameters[{i}]"),
            rule: "must be finite".into(),
        });
    }
    Ok(())
}

pub const LN2_HI: f64 = 6.931_471_803_691_238e-1; // ln 2 rounded to 32 significant bits
pub const LN2_LO: f64 = 1.908_214_929_270_587_7e-10; // ln 2 − LN2_HI

/// ln x for finite x > 0 (the samplers never ask for anything else), to about 1 ulp, in
/// operations every device rounds alike: x = 2ᵉ·m with m in [√½, √2), ln m = 2·atanh(s) with
/// s = (m − 1)/(m + 1), |s| ≤ 0.172, as a polynomial in s² (terms to s²³).
pub fn portable_ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let mut poly = 1.0 / 23.0;
    for k in (0..11).rev() {
        poly = poly * z + 1.0 / (2 * k + 1) as f64;
    }
    let e = e as f64;
    e * LN2_HI + (e * LN2_LO + 2.0 * s * poly)
}

/// eˣ for −700 ≤ x ≤ 700, to about 1 ulp: x = k·ln 2 + r with |r| ≤ ½ ln 2, eʳ by its Taylor
/// series to r¹³, times 2ᵏ built from the exponent bits.
pub fn portable_exp(x: f64) -> f64 {
    let k = (x * std::f64::consts::LOG2_E + 0.5).floor();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut p = 1.0 / 6_227_020_800.0; // 1/13!
    let mut fact = 6_227_020_800.0;
    for n in (1..13).rev() {
        fact /= (n + 1) as f64;
        p = p * r + 1.0 / fact;
    }
    let er = p * r + 1.0;
    er * f64::from_bits(((k as i64 + 1023) as u64) << 52)
}

/// ln k! for a whole number k ≥ 0: exact products up to 17! (below 2⁵³), Stirling's series for
/// ln Γ(k + 1) beyond (truncation error below 1e-15 absolute there).
pub fn ln_factorial(k: f64) -> f64 {
    if k < 18.0 {
        let mut f = 1.0;
        let mut i = 2.0;
        while i <= k {
            f *= i;
            i += 1.0;
        }
        return portable_ln(f);
    }
    let z = k + 1.0;
    let iz = 1.0 / z;
    let iz2 = iz * iz;
    let series = iz * (1.0 / 12.0 - iz2 * (1.0 / 360.0 - iz2 * (1.0 / 1260.0 - iz2 / 1680.0)));
    (z - 0.5) * portable_ln(z) - z + 0.918_938_533_204_672_8 + series
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_known_answers() {
        // Random123's known-answer vectors for philox4x32-10.
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0]
            ),
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
        );
    }

    #[test]
    fn samplers_have_the_right_moments() {
        let n = 200_000;
        let mut s = ToyStream::new(42, 7, STREAM_MAIN);
        let (mut m, mut v) = (0.0, 0.0);
        for _ in 0..n {
            let z = s.normal();
            m += z;
            v += z * z;
        }
        m /= n as f64;
        v = v / n as f64 - m * m;
        assert!(m.abs() < 0.01 && (v - 1.0).abs() < 0.01, "normal: {m} {v}");
        for lam in [0.3, 3.0, 11.9, 12.0, 45.0, 1000.0] {
            let (mut m, mut v) = (0.0, 0.0);
            let n = 100_000;
            for _ in 0..n {
                let k = s.poisson(lam);
                assert!(k >= 0.0 && k.fract() == 0.0);
                m += k;
                v += k * k;
            }
            m /= n as f64;
            v = v / n as f64 - m * m;
            // mean within ~5 standard errors, variance ≈ mean
            assert!(
                (m - lam).abs() < 5.0 * (lam / n as f64).sqrt(),
                "poisson {lam}: mean {m}"
            );
            assert!((v / lam - 1.0).abs() < 0.03, "poisson {lam}: var {v}");
        }
    }

    #[test]
    fn portable_functions_match_the_maths_library() {
        let mut x = 1e-300;
        while x < 1e300 {
            for y in [x, x * 1.000_000_1, x * 1.41, x * 1.42, x * 1.999_999] {
                let (a, b) = (portable_ln(y), y.ln());
                assert!(
                    (a - b).abs() <= 2e-16 * b.abs().max(1.0),
                    "ln {y}: {a} vs {b}"
                );
            }
            x *= 3.7;
        }
        for i in -7000..=7000 {
            let y = i as f64 * 0.1 + 0.012_345;
            let (a, b) = (portable_exp(y), y.exp());
            assert!((a - b).abs() <= 4e-16 * b, "exp {y}: {a} vs {b}");
        }
        for k in 0..2000 {
            let k = k as f64;
            let (a, b) = (ln_factorial(k), libm::lgamma(k + 1.0));
            assert!(
                (a - b).abs() <= 1e-14 * b.abs().max(1.0),
                "ln {k}!: {a} vs {b}"
            );
        }
    }

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a: Vec<f64> = (0..5)
            .map({
                let mut s = ToyStream::new(1, 2, 0);
                move |_| s.uniform()
            })
            .collect();
        let b: Vec<f64> = (0..5)
            .map({
                let mut s = ToyStream::new(1, 2, 0);
                move |_| s.uniform()
            })
            .collect();
        let c: Vec<f64> = (0..5)
            .map({
                let mut s = ToyStream::new(1, 3, 0);
                move |_| s.uniform()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}

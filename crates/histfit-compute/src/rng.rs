//! Counter-based random numbers for toys: Philox4x32-10 (Salmon et al., SC'11) keyed by the seed,
//! with the counter made of (toy index, stream, draw). Any toy's numbers can be produced alone, in
//! any order, on any thread or device, and come out the same — the property that lets an ensemble
//! be split across threads, cluster jobs or a GPU and merged bit for bit.
//!
//! The transforms on top (uniform, normal, Poisson) use only integer arithmetic and IEEE f64
//! operations, so a device port reproduces them exactly.

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

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

    /// Standard normal by Box–Muller (one of the pair; two uniforms per draw).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Poisson with mean `lam` ≥ 0: inversion below 12, Hörmann's PTRS rejection above.
    pub fn poisson(&mut self, lam: f64) -> f64 {
        if lam <= 0.0 {
            return 0.0;
        }
        if lam < 12.0 {
            let u = self.uniform();
            let mut k = 0.0;
            let mut p = (-lam).exp();
            let mut cdf = p;
            while u > cdf && k < 1000.0 {
                k += 1.0;
                p *= lam / k;
                cdf += p;
            }
            return k;
        }
        let slam = lam.sqrt();
        let loglam = lam.ln();
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
            if v.ln() + inv_alpha.ln() - (a / (us * us) + b).ln()
                <= -lam + k * loglam - libm::lgamma(k + 1.0)
            {
                return k;
            }
        }
    }
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

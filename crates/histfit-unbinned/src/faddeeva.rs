//! The Faddeeva function w(z) = e^(−z²) erfc(−iz) in the upper half-plane, for the Voigt
//! profile: the convolution of a Breit–Wigner of half-width γ with a Gaussian of width σ is
//! Re w((x − μ + iγ)/(σ√2)) / (σ√(2π)).
//!
//! Two representations, each where it is accurate:
//! - |z| < 8: Weideman's rational series (SIAM J. Numer. Anal. 31 (1994) 1497):
//!   w(z) = 2 p(Z)/(L − iz)² + 1/(√π (L − iz)), Z = (L + iz)/(L − iz), p a polynomial of
//!   degree N − 1 whose coefficients are the cosine transform of e^(−t²)(L² + t²) at
//!   t = L tan(θ/2) (computed once, here), with N = 40 and L = (N/√2)^½;
//! - |z| ≥ 8: Laplace's continued fraction w(z) = (i/√π) / (z − ½/(z − 1/(z − (3/2)/(z − …)))),
//!   forty levels.
//!
//! - Im z < 1e-3 inside |z| < 8: the Taylor series about the real axis (where Weideman's real
//!   part, tiny beside its imaginary part off the Gaussian core, loses its relative accuracy),
//!   and e^(−z²) added to the continued fraction near the axis (which it leaves out): Re w =
//!   e^(−x²) on the real axis, a Voigt profile of width 0 is the Gaussian.
//!
//! Accuracy of Re w against SciPy's `wofz` (tested, including Im z = 0 and down to 1e-30):
//! within 2e-14 relative for Im z ≥ 0.5, 1e-12 for Im z ≥ 0.01, 1e-11 for 1e-3 ≤ Im z < 0.01,
//! 5e-13 below (on the real axis e^(−x²) exactly).

use std::sync::OnceLock;

/// Terms of Weideman's series.
const N: usize = 40;

/// Levels of the continued fraction.
const LEVELS: usize = 40;

/// |z|² from which the continued fraction is used.
const FAR: f64 = 64.0;

const FRAC_1_SQRT_PI: f64 = 0.564_189_583_547_756_3;

#[derive(Clone, Copy)]
struct C(f64, f64);

impl C {
    fn add(self, o: C) -> C {
        C(self.0 + o.0, self.1 + o.1)
    }
    fn sub(self, o: C) -> C {
        C(self.0 - o.0, self.1 - o.1)
    }
    fn mul(self, o: C) -> C {
        C(self.0 * o.0 - self.1 * o.1, self.0 * o.1 + self.1 * o.0)
    }
    fn scale(self, k: f64) -> C {
        C(self.0 * k, self.1 * k)
    }
    fn div(self, o: C) -> C {
        // Smith's algorithm: no overflow for large |o|.
        if o.0.abs() >= o.1.abs() {
            let r = o.1 / o.0;
            let d = o.0 + o.1 * r;
            C((self.0 + self.1 * r) / d, (self.1 - self.0 * r) / d)
        } else {
            let r = o.0 / o.1;
            let d = o.0 * r + o.1;
            C((self.0 * r + self.1) / d, (self.1 * r - self.0) / d)
        }
    }
}

/// L and the coefficients of p, lowest power first.
fn weideman() -> &'static (f64, [f64; N]) {
    static COEFFS: OnceLock<(f64, [f64; N])> = OnceLock::new();
    COEFFS.get_or_init(|| {
        let m = 2 * N;
        let l = (N as f64 / std::f64::consts::SQRT_2).sqrt();
        let f = |k: i64| {
            let t = l * (k as f64 * std::f64::consts::PI / (2 * m) as f64).tan();
            (-t * t).exp() * (l * l + t * t)
        };
        let mut c = [0.0; N];
        for (j, cj) in c.iter_mut().enumerate() {
            let n = (j + 1) as f64;
            let s: f64 = (-(m as i64) + 1..m as i64)
                .map(|k| f(k) * (std::f64::consts::PI * k as f64 * n / m as f64).cos())
                .sum();
            *cj = s / (2 * m) as f64;
        }
        (l, c)
    })
}

/// Im z below which the series about the real axis is used (inside |z| < 8).
const NEAR_AXIS: f64 = 1e-3;

/// w(x + iy) for y ≥ 0, as (Re w, Im w); NaN for y < 0 or a NaN argument.
pub fn faddeeva(x: f64, y: f64) -> (f64, f64) {
    if y.is_nan() || y < 0.0 || x.is_nan() {
        return (f64::NAN, f64::NAN);
    }
    let z = C(x, y);
    // Near the real axis the series about it, out to |x| = 30 (checked there; the continued
    // fraction has a pole on the axis at x = ±8.2130…, a node of its Gauss–Hermite rule, which
    // spoils its real part close to it).
    if y < NEAR_AXIS && x.abs() < 30.0 {
        return near_axis(x, y);
    }
    if x * x + y * y >= FAR {
        if x.is_infinite() || y.is_infinite() {
            return (0.0, 0.0);
        }
        let mut r = C(0.0, 0.0);
        for k in (1..=LEVELS).rev() {
            r = C(k as f64 * 0.5, 0.0).div(z.sub(r));
        }
        let w = C(0.0, FRAC_1_SQRT_PI).div(z.sub(r));
        // The continued fraction leaves out e^(−z²), which near the real axis is all of Re w
        // beyond the Lorentzian tail (on it, Re w = e^(−x²) exactly); y < 1 here means
        // x² > 63, so the term is below e^(−62) wherever it is not needed.
        let e = if y < 1.0 { (y * y - x * x).exp() } else { 0.0 };
        let gauss = if e == 0.0 {
            0.0
        } else {
            e * (2.0 * x * y).cos()
        };
        return (w.0 + gauss, w.1);
    }
    weideman_at(z)
}

/// Weideman's series at z (|z| < 8, Im z ≥ 0).
fn weideman_at(z: C) -> (f64, f64) {
    let (x, y) = (z.0, z.1);
    let (l, c) = weideman();
    // iz = (−y, x)
    let lm = C(l + y, -x); // L − iz
    let lp = C(l - y, x); // L + iz
    let zz = lp.div(lm);
    let mut p = C(0.0, 0.0);
    for &cj in c.iter().rev() {
        p = p.mul(zz).add(C(cj, 0.0));
    }
    let w = p
        .scale(2.0)
        .div(lm.mul(lm))
        .add(C(FRAC_1_SQRT_PI, 0.0).div(lm));
    (w.0, w.1)
}

/// w(x + iy) for 0 ≤ y < [`NEAR_AXIS`] by its Taylor series in iy about the real axis, where
/// w(x) = e^(−x²) + i Im w(x) (Weideman's imaginary part, large there, is accurate) and the
/// derivatives follow from w′ = −2zw + 2i/√π: w⁽ⁿ⁺¹⁾ = −2x w⁽ⁿ⁾ − 2n w⁽ⁿ⁻¹⁾. Weideman's real
/// part, tiny beside the imaginary one off the Gaussian core, loses its relative accuracy
/// there (1e-7 at y = 1e-8); the series keeps it to 5e-14.
fn near_axis(x: f64, y: f64) -> (f64, f64) {
    let (_, im0) = weideman_at(C(x, 0.0));
    let mut prev = C((-x * x).exp(), im0);
    let mut cur = C(-2.0 * x * prev.0, -2.0 * x * prev.1 + 2.0 * FRAC_1_SQRT_PI);
    let mut sum = prev;
    let mut power = C(1.0, 0.0);
    for n in 1..40 {
        power = power.mul(C(0.0, y)).scale(1.0 / n as f64);
        let t = power.mul(cur);
        sum = sum.add(t);
        if n > 2 && t.0.abs() <= 1e-17 * sum.0.abs() && t.1.abs() <= 1e-17 * sum.1.abs() {
            break;
        }
        let next = cur.scale(-2.0 * x).sub(prev.scale(2.0 * n as f64));
        prev = cur;
        cur = next;
    }
    (sum.0, sum.1)
}

/// Re w(x + iy) and its partial derivatives in x and y (from w′ = −2zw + 2i/√π).
pub fn re_and_partials(x: f64, y: f64) -> (f64, f64, f64) {
    let (u, v) = faddeeva(x, y);
    let dx = -2.0 * (x * u - y * v);
    let dy = 2.0 * (x * v + y * u) - 2.0 * FRAC_1_SQRT_PI;
    (u, dx, dy)
}

/// Where [`erfcx`] switches from e^(y²) erfc(y) to its asymptotic series (erfc underflows
/// near y = 26.5; the series' eighth term is below 2⁻⁵³ of the sum from here on).
const ERFCX_SERIES: f64 = 26.0;

/// The asymptotic series of erfcx at y ≥ [`ERFCX_SERIES`]: 1/(y√π) Σ_k (−1)^k (2k − 1)!!/(2y²)^k,
/// and its derivative.
fn erfcx_series(y: f64) -> (f64, f64) {
    let t = 1.0 / (2.0 * y * y);
    // Terms c_k t^k and their derivatives in y: d(t^k)/dy = −2k t^k / y.
    let (mut term, mut sum, mut dsum) = (1.0, 1.0, 0.0);
    for k in 1..8 {
        term *= -((2 * k - 1) as f64) * t;
        sum += term;
        dsum += -2.0 * k as f64 * term / y;
    }
    let front = 1.0 / (y * std::f64::consts::PI.sqrt());
    (front * sum, front * dsum - front * sum / y)
}

/// erfcx(y) = e^(y²) erfc(y), the scaled complementary error function (= Re w(iy), w the Faddeeva
/// function, without its cost): e^(y²) with y² split exactly into two doubles times libm's erfc
/// (both within an ulp or two relative) up to 26, the asymptotic series beyond, and
/// 2e^(y²) − erfcx(−y) below 0 (∞ where e^(y²) overflows).
pub fn erfcx(y: f64) -> f64 {
    if y.is_nan() {
        return y;
    }
    if y < 0.0 {
        return 2.0 * exp_square(-y) - erfcx(-y);
    }
    if y >= ERFCX_SERIES {
        return erfcx_series(y).0;
    }
    exp_square(y) * libm::erfc(y)
}

/// d erfcx / dy = 2y erfcx(y) − 2/√π (`value` = erfcx(y)); from the series' own derivative at
/// large y, where that difference would cancel.
pub fn erfcx_prime(y: f64, value: f64) -> f64 {
    if y >= ERFCX_SERIES {
        return erfcx_series(y).1;
    }
    2.0 * y * value - std::f64::consts::FRAC_2_SQRT_PI
}

/// e^(y²) with y² = hi + lo exactly (lo by a fused multiply-add): e^hi (1 + lo).
fn exp_square(y: f64) -> f64 {
    let hi = y * y;
    let lo = y.mul_add(y, -hi);
    hi.exp() * (1.0 + lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SciPy 1.17 `wofz` at points across both regions (`scipy.special.wofz(x + 1j*y)`).
    const REFERENCE: &[(f64, f64, f64, f64)] = &include!("../tests/fixtures/wofz_reference.in");

    #[test]
    fn against_scipy() {
        for &(x, y, re, im) in REFERENCE {
            let (u, v) = faddeeva(x, y);
            let tol = if y >= 0.5 {
                2e-14
            } else if y >= 0.01 {
                1e-12
            } else if y >= NEAR_AXIS {
                1e-11
            } else {
                5e-13
            };
            assert!(
                (u - re).abs() <= tol * re.abs(),
                "Re w({x}+{y}i) = {u}, not {re}"
            );
            assert!(
                (v - im).abs() <= 1e-13 * im.abs().max(1e-300) + 1e-300,
                "Im w({x}+{y}i) = {v}, not {im}"
            );
        }
    }

    /// A huge x gives no NaN (the Gaussian term's cosine is not multiplied by an exponential
    /// that is 0). The continued fraction's pole on the axis (x = 8.2130…) is in the reference.
    #[test]
    fn far_out_is_finite() {
        assert_eq!(faddeeva(1e308, 0.9).0, 0.0);
        assert!(faddeeva(1e308, 0.9).1.is_finite());
    }

    /// The partials against differences of the function itself.
    #[test]
    fn partials_match_differences() {
        for &(x, y) in &[
            (0.3, 0.7),
            (-2.5, 0.05),
            (5.0, 1.5),
            (9.0, 0.4),
            (-1.0, 9.5),
        ] {
            let (_, dx, dy) = re_and_partials(x, y);
            let h = 1e-6;
            let nx = (faddeeva(x + h, y).0 - faddeeva(x - h, y).0) / (2.0 * h);
            let ny = (faddeeva(x, y + h).0 - faddeeva(x, y - h).0) / (2.0 * h);
            assert!(
                (dx - nx).abs() < 1e-8 * dx.abs().max(1e-3),
                "{x} {y}: {dx} {nx}"
            );
            assert!(
                (dy - ny).abs() < 1e-8 * dy.abs().max(1e-3),
                "{x} {y}: {dy} {ny}"
            );
        }
    }

    /// erfcx against SciPy 1.17's `erfcx` (relative 1e-14) on both sides of 0 and of the
    /// switch to the series, and its derivative against central differences.
    #[test]
    fn erfcx_equals_scipys() {
        for (y, want) in [
            (-3.0, 16205.988853999586),
            (-0.5, 1.952360489182557),
            (0.0, 1.0),
            (0.3, 0.7345993345676554),
            (1.0, 0.427583576155807),
            (5.0, 0.11070463773306861),
            (25.9, 0.021767181150738214),
            (26.0, 0.02168358485056291),
            (26.1, 0.02160062772634621),
            (100.0, 0.005641613782989433),
            (10000.0, 5.641895807268084e-05),
        ] {
            let got = erfcx(y);
            assert!(
                ((got - want) / want).abs() < 1e-14,
                "erfcx({y}) = {got}, SciPy {want}"
            );
            let h = 1e-6 * y.abs().max(1.0);
            let fd = (erfcx(y + h) - erfcx(y - h)) / (2.0 * h);
            let d = erfcx_prime(y, got);
            assert!(
                (d - fd).abs() <= 1e-7 * fd.abs().max(1e-12),
                "erfcx'({y}) = {d}, {fd}"
            );
        }
        assert!(erfcx(f64::NAN).is_nan());
        assert_eq!(erfcx(f64::INFINITY), 0.0);
        assert_eq!(erfcx(-30.0), f64::INFINITY);
    }
}

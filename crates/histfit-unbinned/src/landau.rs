//! The Landau density φ(λ) = (1/π) ∫₀^∞ e^(−t ln t − λt) sin(πt) dt (ROOT's and CERNLIB's
//! convention, HS3's `landau_dist`), its distribution function Φ and complement Q = 1 − Φ, from
//! the Chebyshev series of [`crate::landau_tables`] (`scripts/make_landau_tables.py`, from
//! SciPy's implementation; relative accuracy ≈ 1e-13 wherever φ > 1e-300):
//! - λ ≤ −4: the saddle-point forms ln φ = −ln √(2π) − ½ ln v − 1/v + G(v) and ln Φ = −ln √(2π)
//!   + ½ ln v − 1/v + H(v), v = e^(λ+1), G and H smooth corrections vanishing at v = 0;
//! - −4 ≤ λ ≤ 8: ln φ, ln Φ and ln Q in pieces of 0.4;
//! - 8 ≤ λ ≤ 8e^33 ≈ 1.7e15: ln(λ² φ) and ln(λ Q) in pieces of 1 in ln λ; beyond, φ = 1/λ² and
//!   Q = 1/λ (to 1e-13 there).
//!
//! ROOT's own `landau_pdf` (CERNLIB's DENLAN) agrees to about 1e-9 near the peak and 5e-8 in the
//! tail: RooFit's −ln L of a Landau fit differs from histfit's at that level.

use crate::landau_tables as t;

const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// Σ c_k T_k(x) by Clenshaw's recurrence.
fn chebyshev(c: &[f64], x: f64) -> f64 {
    let (mut b1, mut b2) = (0.0, 0.0);
    for &ck in c.iter().skip(1).rev() {
        let b0 = 2.0 * x * b1 - b2 + ck;
        b2 = b1;
        b1 = b0;
    }
    x * b1 - b2 + c[0]
}

/// The piece holding `x` of `n` pieces of `width` from `lo`, and x mapped onto [−1, 1] in it.
fn piece(x: f64, lo: f64, width: f64, n: usize) -> (usize, f64) {
    let k = (((x - lo) / width).floor().max(0.0) as usize).min(n - 1);
    let left = lo + k as f64 * width;
    (k, 2.0 * (x - left) / width - 1.0)
}

/// v = e^(λ+1) mapped onto the lower region's series variable.
fn lower_t(v: f64) -> f64 {
    2.0 * v / t::V_MAX - 1.0
}

/// ln φ(λ) and its derivative d ln φ/dλ.
pub fn ln_pdf(l: f64) -> (f64, f64) {
    if l.is_nan() {
        return (f64::NAN, f64::NAN);
    }
    if l < t::LOWER {
        let v = (l + 1.0).exp();
        let x = lower_t(v);
        let value = -LN_SQRT_2PI - 0.5 * (l + 1.0) - 1.0 / v + chebyshev(&t::G, x);
        let slope = -0.5 + 1.0 / v + chebyshev(&t::G_PRIME, x) * v;
        return (value, slope);
    }
    if l <= t::MID {
        let (k, x) = piece(l, t::LOWER, t::WIDTH, t::LN_PDF.len());
        return (
            chebyshev(&t::LN_PDF[k], x),
            chebyshev(&t::LN_PDF_PRIME[k], x),
        );
    }
    let u = l.ln();
    if u >= t::U_HI {
        return (-2.0 * u, -2.0 / l);
    }
    let (k, x) = piece(u, t::U_LO, t::U_WIDTH, t::U_LN_PDF.len());
    (
        chebyshev(&t::U_LN_PDF[k], x) - 2.0 * u,
        (chebyshev(&t::U_LN_PDF_PRIME[k], x) - 2.0) / l,
    )
}

/// φ(λ).
pub fn pdf(l: f64) -> f64 {
    ln_pdf(l).0.exp()
}

/// Φ(λ) = ∫_(−∞)^λ φ.
pub fn cdf(l: f64) -> f64 {
    if l.is_nan() {
        return f64::NAN;
    }
    if l < t::LOWER {
        let v = (l + 1.0).exp();
        return (-LN_SQRT_2PI + 0.5 * (l + 1.0) - 1.0 / v + chebyshev(&t::H, lower_t(v))).exp();
    }
    if l <= t::MID {
        let (k, x) = piece(l, t::LOWER, t::WIDTH, t::LN_CDF.len());
        return chebyshev(&t::LN_CDF[k], x).exp();
    }
    1.0 - sf(l)
}

/// Q(λ) = 1 − Φ(λ), accurate where it is small (the upper tail).
pub fn sf(l: f64) -> f64 {
    if l.is_nan() {
        return f64::NAN;
    }
    if l < t::LOWER {
        return 1.0 - cdf(l);
    }
    if l <= t::MID {
        let (k, x) = piece(l, t::LOWER, t::WIDTH, t::LN_SF.len());
        return chebyshev(&t::LN_SF[k], x).exp();
    }
    let u = l.ln();
    if u >= t::U_HI {
        return 1.0 / l;
    }
    let (k, x) = piece(u, t::U_LO, t::U_WIDTH, t::U_LN_SF.len());
    (chebyshev(&t::U_LN_SF[k], x) - u).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The regions meet: value and slope of ln φ, Φ and Q continuous at −4, 8 and e^U_HI (to
    /// the series' accuracy), and Φ + Q = 1.
    #[test]
    fn regions_join() {
        for edge in [t::LOWER, t::MID, t::U_HI.exp()] {
            // (Steps past the rounding of ln λ at the upper edge, so that each side takes its own
            // branch.)
            let step = 1e-13 * edge.abs();
            let (below, above) = (edge - step, edge + step);
            assert!(below < edge && above > edge && (edge < 1e3 || below.ln() < t::U_HI));
            let (a, b) = (ln_pdf(below), ln_pdf(above));
            assert!(
                (a.0 - b.0).abs() < 1e-12 * a.0.abs().max(1.0),
                "ln φ at {edge}"
            );
            assert!(
                (a.1 - b.1).abs() < 1e-9 * a.1.abs().max(1.0),
                "slope at {edge}: {a:?} {b:?}"
            );
            assert!((cdf(below) - cdf(above)).abs() < 1e-13, "Φ at {edge}");
            assert!(
                ((sf(below) - sf(above)) / sf(above)).abs() < 1e-12,
                "Q at {edge}"
            );
        }
        for l in [-6.0, -3.0, 0.0, 5.0, 30.0, 1e6] {
            assert!((cdf(l) + sf(l) - 1.0).abs() < 1e-15);
        }
        assert_eq!(pdf(-800.0), 0.0);
        assert_eq!(cdf(-800.0), 0.0);
        assert!(ln_pdf(f64::NAN).0.is_nan());
    }

    /// The slope of ln φ against differences of ln φ, and Φ′ = φ against differences of ln Φ.
    #[test]
    fn derivatives_agree_with_differences() {
        for l in [-6.5_f64, -4.2, -2.0, -0.2228, 1.0, 7.9, 9.0, 150.0, 3e4] {
            let h = 1e-5 * l.abs().max(1.0);
            let fd = (ln_pdf(l + h).0 - ln_pdf(l - h).0) / (2.0 * h);
            let d = ln_pdf(l).1;
            assert!(
                (d - fd).abs() < 1e-7 * d.abs().max(1e-3),
                "{l}: {d} vs {fd}"
            );
            // (In logarithms: Φ falls as e^(−e^(−λ)) in the lower tail.)
            let fd = (cdf(l + h).ln() - cdf(l - h).ln()) / (2.0 * h);
            let d = pdf(l) / cdf(l);
            assert!((d - fd).abs() < 1e-7 * d, "Φ′ at {l}: {d} vs {fd}");
        }
    }
}

//! Interpolation of systematic variations: codes 0, 1, 2, 4 and 4p.
//!
//! A variation is described by its nominal, "hi" (α = +1) and "lo" (α = −1) values. Additive codes
//! (0, 2, 4p) interpolate the *difference* Δ(α) to the nominal; multiplicative codes (1, 4)
//! interpolate the *ratio* κ(α). Every code is written here as a sum of α-dependent weights times
//! per-variation coefficients, `value(α) = Σₖ wₖ(α)·cₖ` (codes 0, 2, 4p), or via exponentials of
//! precomputed logarithms (codes 1, 4), so the weights of one histosys parameter are computed once
//! and reused for every bin it touches.
//!
//! pyhf accepts codes 1 and 4 for normsys and 0, 2 and 4p for histosys. histfit also accepts the
//! other pairings with the natural meaning (normsys: κ = 1 + Δ with nominal 1; histosys:
//! Δ = nominal·(κ − 1)). pyhf's code 2 is discontinuous outside |α| ≤ 1 (it drops the
//! σ± − σ⁰ offset and, below −1, uses α instead of α + 1); histfit implements the continuous
//! quadratic-inside / linear-outside definition of ROOT's HistFactory, which agrees with pyhf for
//! |α| ≤ 1.
//!
//! At the kink α = 0 of codes 0 and 1 the derivative is taken as the average of the two one-sided
//! slopes (what a central difference measures), so gradients at the usual starting point agree
//! with numerical differentiation.

use std::fmt;
use std::str::FromStr;

/// An interpolation code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InterpCode {
    /// Piecewise linear (additive).
    Code0,
    /// Piecewise exponential (multiplicative).
    Code1,
    /// Quadratic inside |α| ≤ 1, linear outside (additive).
    Code2,
    /// Exponential outside |α| ≥ 1, 6th-order polynomial inside (multiplicative, smooth).
    Code4,
    /// Linear outside |α| ≥ 1, 6th-order polynomial inside (additive, smooth).
    Code4p,
}

impl InterpCode {
    pub const ALL: [InterpCode; 5] = [
        InterpCode::Code0,
        InterpCode::Code1,
        InterpCode::Code2,
        InterpCode::Code4,
        InterpCode::Code4p,
    ];

    /// The code's number in device tables; kernels get these numbers (and the names
    /// [`macro_name`](Self::macro_name)) from here, so they are defined once.
    pub const fn id(self) -> i32 {
        match self {
            InterpCode::Code0 => 0,
            InterpCode::Code1 => 1,
            InterpCode::Code2 => 2,
            InterpCode::Code4 => 3,
            InterpCode::Code4p => 4,
        }
    }

    /// The name kernels know the code's number by (`CODE4P`).
    pub fn macro_name(self) -> String {
        self.name().to_ascii_uppercase()
    }

    pub fn is_multiplicative(self) -> bool {
        matches!(self, InterpCode::Code1 | InterpCode::Code4)
    }
    pub fn name(self) -> &'static str {
        match self {
            InterpCode::Code0 => "code0",
            InterpCode::Code1 => "code1",
            InterpCode::Code2 => "code2",
            InterpCode::Code4 => "code4",
            InterpCode::Code4p => "code4p",
        }
    }
}

impl fmt::Display for InterpCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for InterpCode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "code0" | "0" => Ok(InterpCode::Code0),
            "code1" | "1" => Ok(InterpCode::Code1),
            "code2" | "2" => Ok(InterpCode::Code2),
            "code4" | "4" => Ok(InterpCode::Code4),
            "code4p" | "4p" => Ok(InterpCode::Code4p),
            other => Err(format!(
                "unknown interpolation code \"{other}\" (expected code0, code1, code2, code4 or code4p)"
            )),
        }
    }
}

/// Number of per-variation coefficients of an additive code.
pub const N_ADDITIVE_COEF: usize = 4;

/// Per-variation coefficients of an additive code, from (nominal, hi, lo). The matching weights are
/// [`additive_weights`]: Δ(α) = Σₖ wₖ(α)·cₖ.
pub fn additive_coefficients(code: InterpCode, nom: f64, hi: f64, lo: f64) -> [f64; 4] {
    let up = hi - nom; // Δ(+1)
    let dn = nom - lo; // −Δ(−1)
    match code {
        InterpCode::Code0 => [up, dn, 0.0, 0.0],
        // Δ = aα² + bα inside; continuous linear continuation outside.
        InterpCode::Code2 => {
            let a = 0.5 * (hi + lo) - nom;
            let b = 0.5 * (hi - lo);
            [a, b, up, dn]
        }
        // Δ = α·S + A·α²(15 + α²(3α² − 10)) inside, α·up or α·dn outside.
        InterpCode::Code4p => [0.5 * (up + dn), 0.0625 * (up - dn), up, dn],
        InterpCode::Code1 | InterpCode::Code4 => {
            unreachable!("multiplicative codes have no additive coefficients")
        }
    }
}

/// Weights wₖ(α) and their derivatives dwₖ/dα for the coefficients of [`additive_coefficients`].
#[inline]
pub fn additive_weights(code: InterpCode, a: f64) -> ([f64; 4], [f64; 4]) {
    match code {
        InterpCode::Code0 => {
            if a > 0.0 {
                ([a, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0])
            } else if a < 0.0 {
                ([0.0, a, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0])
            } else {
                ([0.0; 4], [0.5, 0.5, 0.0, 0.0])
            }
        }
        InterpCode::Code2 => {
            // coefficients [a, b, up, dn]
            if a > 1.0 {
                // (b + 2a)(α − 1) + up
                let t = a - 1.0;
                ([2.0 * t, t, 1.0, 0.0], [2.0, 1.0, 0.0, 0.0])
            } else if a < -1.0 {
                // (b − 2a)(α + 1) − dn
                let t = a + 1.0;
                ([-2.0 * t, t, 0.0, -1.0], [-2.0, 1.0, 0.0, 0.0])
            } else {
                ([a * a, a, 0.0, 0.0], [2.0 * a, 1.0, 0.0, 0.0])
            }
        }
        InterpCode::Code4p => {
            // coefficients [S, A, up, dn]
            if a > 1.0 {
                ([0.0, 0.0, a, 0.0], [0.0, 0.0, 1.0, 0.0])
            } else if a < -1.0 {
                ([0.0, 0.0, 0.0, a], [0.0, 0.0, 0.0, 1.0])
            } else {
                let a2 = a * a;
                let p = a2 * (15.0 + a2 * (3.0 * a2 - 10.0));
                let dp = a * (30.0 + a2 * (18.0 * a2 - 40.0));
                ([a, p, 0.0, 0.0], [1.0, dp, 0.0, 0.0])
            }
        }
        InterpCode::Code1 | InterpCode::Code4 => unreachable!("multiplicative code"),
    }
}

/// Coefficients of a multiplicative code from the ratios κ(+1) = `up` and κ(−1) = `dn` (both > 0):
/// `[ln up, ln dn, p1..p6]` where p are the code-4 polynomial coefficients (zero for code 1).
pub fn multiplicative_coefficients(code: InterpCode, up: f64, dn: f64) -> [f64; 8] {
    let (lu, ld) = (up.ln(), dn.ln());
    let mut c = [0.0; 8];
    c[0] = lu;
    c[1] = ld;
    if code == InterpCode::Code4 {
        // κ(α) = 1 + Σᵢ pᵢ αⁱ (i = 1..6) matching value, slope and curvature of the exponential
        // branches at α = ±1.
        let rhs = [
            up - 1.0,
            dn - 1.0,
            up * lu,
            -dn * ld,
            up * lu * lu,
            dn * ld * ld,
        ];
        for (i, row) in CODE4_INVERSE.iter().enumerate() {
            c[2 + i] = row.iter().zip(&rhs).map(|(m, r)| m * r).sum();
        }
    }
    c
}

/// κ(α) and dκ/dα for a multiplicative code with coefficients from [`multiplicative_coefficients`].
#[inline]
pub fn multiplicative_value(code: InterpCode, c: &[f64; 8], a: f64) -> (f64, f64) {
    if a >= 1.0 || (code == InterpCode::Code1 && a > 0.0) {
        let k = (a * c[0]).exp();
        (k, k * c[0])
    } else if a <= -1.0 || (code == InterpCode::Code1 && a < 0.0) {
        let k = (-a * c[1]).exp();
        (k, -k * c[1])
    } else if code == InterpCode::Code1 {
        (1.0, 0.5 * (c[0] - c[1]))
    } else {
        let p = &c[2..8];
        let v = a * (p[0] + a * (p[1] + a * (p[2] + a * (p[3] + a * (p[4] + a * p[5])))));
        let d = p[0]
            + a * (2.0 * p[1]
                + a * (3.0 * p[2] + a * (4.0 * p[3] + a * (5.0 * p[4] + a * 6.0 * p[5]))));
        (1.0 + v, d)
    }
}

/// The inverse of the code-4 system's matrix (rows: value, slope and curvature of Σᵢ pᵢ αⁱ at
/// α = +1 and −1, in the order of `rhs` above; columns: p₁..p₆). Its entries are sixteenths, exact
/// in binary, so a product with it is the system's solution without an elimination per modifier
/// (thousands of them in a published workspace); the test below checks it against the matrix.
const CODE4_INVERSE: [[f64; 6]; 6] = [
    [
        15.0 / 16.0,
        -15.0 / 16.0,
        -7.0 / 16.0,
        -7.0 / 16.0,
        1.0 / 16.0,
        -1.0 / 16.0,
    ],
    [
        3.0 / 2.0,
        3.0 / 2.0,
        -9.0 / 16.0,
        9.0 / 16.0,
        1.0 / 16.0,
        1.0 / 16.0,
    ],
    [
        -5.0 / 8.0,
        5.0 / 8.0,
        5.0 / 8.0,
        5.0 / 8.0,
        -1.0 / 8.0,
        1.0 / 8.0,
    ],
    [
        -3.0 / 2.0,
        -3.0 / 2.0,
        7.0 / 8.0,
        -7.0 / 8.0,
        -1.0 / 8.0,
        -1.0 / 8.0,
    ],
    [
        3.0 / 16.0,
        -3.0 / 16.0,
        -3.0 / 16.0,
        -3.0 / 16.0,
        1.0 / 16.0,
        -1.0 / 16.0,
    ],
    [
        1.0 / 2.0,
        1.0 / 2.0,
        -5.0 / 16.0,
        5.0 / 16.0,
        1.0 / 16.0,
        1.0 / 16.0,
    ],
];

pub mod oracle;

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows: value, slope and curvature of Σᵢ pᵢ αⁱ at α = +1 and −1 (in the order of `rhs` above).
    fn code4_matrix() -> [[f64; 6]; 6] {
        let mut m = [[0.0; 6]; 6];
        for i in 0..6 {
            let n = (i + 1) as f64;
            let sign = if (i + 1) % 2 == 0 { 1.0 } else { -1.0 }; // (−1)^n
            m[0][i] = 1.0;
            m[1][i] = sign;
            m[2][i] = n;
            m[3][i] = -sign * n; // d/dα αⁿ at −1 = n(−1)^(n−1)
            m[4][i] = n * (n - 1.0);
            m[5][i] = sign * n * (n - 1.0);
        }
        m
    }

    #[test]
    fn the_code4_inverse_inverts_its_matrix_exactly() {
        let m = code4_matrix();
        for i in 0..6 {
            for j in 0..6 {
                let v: f64 = (0..6).map(|k| CODE4_INVERSE[i][k] * m[k][j]).sum();
                assert_eq!(v, if i == j { 1.0 } else { 0.0 }, "({i}, {j})");
            }
        }
    }

    fn additive(code: InterpCode, nom: f64, hi: f64, lo: f64, a: f64) -> (f64, f64) {
        let c = additive_coefficients(code, nom, hi, lo);
        let (w, dw) = additive_weights(code, a);
        (
            (0..4).map(|k| w[k] * c[k]).sum(),
            (0..4).map(|k| dw[k] * c[k]).sum(),
        )
    }

    #[test]
    fn additive_codes_hit_the_variations_and_are_continuous() {
        for code in [InterpCode::Code0, InterpCode::Code2, InterpCode::Code4p] {
            let (nom, hi, lo) = (10.0, 12.0, 9.0);
            assert!(
                (additive(code, nom, hi, lo, 1.0).0 - 2.0).abs() < 1e-12,
                "{code}"
            );
            assert!(
                (additive(code, nom, hi, lo, -1.0).0 + 1.0).abs() < 1e-12,
                "{code}"
            );
            assert_eq!(additive(code, nom, hi, lo, 0.0).0, 0.0);
            for x in [-1.0, 1.0] {
                let l = additive(code, nom, hi, lo, x - 1e-9).0;
                let r = additive(code, nom, hi, lo, x + 1e-9).0;
                assert!((l - r).abs() < 1e-7, "{code} jumps at {x}");
            }
        }
    }

    #[test]
    fn pyhf_reference_values() {
        // Values printed by pyhf 0.7.6 for nominal 10, hi 12, lo 9 (see scripts/make_goldens.py).
        assert!(
            (additive(InterpCode::Code4p, 10.0, 12.0, 9.0, 0.5).0 - 0.9482421875).abs() < 1e-12
        );
        assert!((additive(InterpCode::Code2, 10.0, 12.0, 9.0, 0.5).0 - 0.875).abs() < 1e-12);
        let c = multiplicative_coefficients(InterpCode::Code4, 1.3, 0.8);
        assert!(
            (10.0 * multiplicative_value(InterpCode::Code4, &c, 0.5).0 - 11.382825993648467).abs()
                < 1e-12
        );
        let c = multiplicative_coefficients(InterpCode::Code1, 1.3, 0.8);
        assert!(
            (10.0 * multiplicative_value(InterpCode::Code1, &c, -1.5).0 - 7.155417527999327).abs()
                < 1e-12
        );
    }

    #[test]
    fn code4_is_smooth_at_the_joins() {
        let c = multiplicative_coefficients(InterpCode::Code4, 1.3, 0.8);
        for x in [-1.0, 1.0] {
            let (vl, dl) = multiplicative_value(InterpCode::Code4, &c, x - 1e-9);
            let (vr, dr) = multiplicative_value(InterpCode::Code4, &c, x + 1e-9);
            assert!((vl - vr).abs() < 1e-8 && (dl - dr).abs() < 1e-7);
        }
    }

    #[test]
    fn derivatives_match_finite_differences() {
        let h = 1e-6;
        for a in [-2.3, -1.0 + 1e-3, -0.4, 0.3, 0.999, 1.7] {
            for code in [InterpCode::Code0, InterpCode::Code2, InterpCode::Code4p] {
                let fd = (additive(code, 10.0, 12.5, 8.0, a + h).0
                    - additive(code, 10.0, 12.5, 8.0, a - h).0)
                    / (2.0 * h);
                assert!(
                    (fd - additive(code, 10.0, 12.5, 8.0, a).1).abs() < 1e-6,
                    "{code} {a}"
                );
            }
            for code in [InterpCode::Code1, InterpCode::Code4] {
                let c = multiplicative_coefficients(code, 1.25, 0.7);
                let fd = (multiplicative_value(code, &c, a + h).0
                    - multiplicative_value(code, &c, a - h).0)
                    / (2.0 * h);
                assert!(
                    (fd - multiplicative_value(code, &c, a).1).abs() < 1e-6,
                    "{code} {a}"
                );
            }
        }
    }
}

//! Slow scalar oracles: each interpolation code written straight from its definition, one
//! function per code, for tests of the fast forms above (precomputed coefficients, fused weights)
//! and of every device evaluator. They return the interpolated yield (additive codes, from the
//! nominal `nom` and the variations `hi`, `lo`) or factor (multiplicative codes, from the ratios
//! `up` = κ(+1) and `dn` = κ(−1)) at α. Not for production: the polynomial codes solve their
//! 6×6 conditions on every call.

/// Code 0: piecewise linear, each side through its variation.
pub fn code0(nom: f64, hi: f64, lo: f64, a: f64) -> f64 {
    if a >= 0.0 {
        nom + a * (hi - nom)
    } else {
        nom + a * (nom - lo)
    }
}

/// Code 1: piecewise exponential, κ(α) = up^α above 0 and dn^(−α) below.
pub fn code1(up: f64, dn: f64, a: f64) -> f64 {
    if a >= 0.0 {
        up.powf(a)
    } else {
        dn.powf(-a)
    }
}

/// Code 2: the parabola through (−1, lo), (0, nom), (1, hi) inside |α| ≤ 1, continued by its
/// tangents outside.
pub fn code2(nom: f64, hi: f64, lo: f64, a: f64) -> f64 {
    let quad = |x: f64| nom + x * (hi - lo) / 2.0 + x * x * ((hi + lo) / 2.0 - nom);
    let slope = |x: f64| (hi - lo) / 2.0 + 2.0 * x * ((hi + lo) / 2.0 - nom);
    if a > 1.0 {
        quad(1.0) + slope(1.0) * (a - 1.0)
    } else if a < -1.0 {
        quad(-1.0) + slope(-1.0) * (a + 1.0)
    } else {
        quad(a)
    }
}

/// Code 4: code 1 outside |α| ≥ 1; inside, 1 + Σᵢ₌₁⁶ cᵢ αⁱ matching the exponential branches'
/// value, slope and curvature at α = ±1.
pub fn code4(up: f64, dn: f64, a: f64) -> f64 {
    if a.abs() >= 1.0 {
        return code1(up, dn, a);
    }
    let (lu, ld) = (up.ln(), dn.ln());
    // κ(±1), κ'(±1), κ''(±1) of the branches up^α and dn^(−α).
    let c = polynomial_through(
        [up - 1.0, up * lu, up * lu * lu],
        [dn - 1.0, -dn * ld, dn * ld * ld],
    );
    1.0 + horner(&c, a)
}

/// Code 4p: linear outside |α| > 1 (α·(hi − nom) above, α·(nom − lo) below); inside,
/// nom + Σᵢ₌₁⁶ cᵢ αⁱ matching the linear branches' value, slope and (zero) curvature at α = ±1.
pub fn code4p(nom: f64, hi: f64, lo: f64, a: f64) -> f64 {
    let (up, dn) = (hi - nom, nom - lo);
    if a > 1.0 {
        return nom + a * up;
    }
    if a < -1.0 {
        return nom + a * dn;
    }
    let c = polynomial_through([up, up, 0.0], [-dn, dn, 0.0]);
    nom + horner(&c, a)
}

/// Σᵢ₌₁⁶ cᵢ αⁱ.
fn horner(c: &[f64; 6], a: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &ci| (acc + ci) * a)
}

/// The coefficients c₁…c₆ of p(α) = Σᵢ₌₁⁶ cᵢ αⁱ with (p, p', p'') = `at_plus` at α = 1 and
/// `at_minus` at α = −1, by Gauss–Jordan elimination on the conditions as they read.
fn polynomial_through(at_plus: [f64; 3], at_minus: [f64; 3]) -> [f64; 6] {
    let mut rows: Vec<[f64; 7]> = Vec::new();
    for (x, target) in [(1.0f64, at_plus), (-1.0, at_minus)] {
        for (order, &t) in target.iter().enumerate() {
            let mut row = [0.0; 7];
            for (k, cell) in row.iter_mut().take(6).enumerate() {
                let n = (k + 1) as i32;
                // d^order/dα^order of α^n at x.
                let mut coef = 1.0;
                for j in 0..order as i32 {
                    coef *= f64::from(n - j);
                }
                *cell = if n >= order as i32 {
                    coef * x.powi(n - order as i32)
                } else {
                    0.0
                };
            }
            row[6] = t;
            rows.push(row);
        }
    }
    for col in 0..6 {
        let piv = (col..6)
            .max_by(|&i, &j| rows[i][col].abs().total_cmp(&rows[j][col].abs()))
            .expect("rows remain");
        rows.swap(col, piv);
        let p = rows[col][col];
        for v in rows[col].iter_mut() {
            *v /= p;
        }
        for r in 0..6 {
            if r != col {
                let f = rows[r][col];
                for k in 0..7 {
                    rows[r][k] -= f * rows[col][k];
                }
            }
        }
    }
    std::array::from_fn(|k| rows[k][6])
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    const VARIATIONS: [(f64, f64, f64); 4] = [
        (10.0, 12.0, 9.0),
        (10.0, 12.5, 8.0),
        (3.0, 2.5, 2.0), // both variations below the nominal
        (0.7, 1.9, 0.05),
    ];

    fn alphas() -> Vec<f64> {
        let mut v: Vec<f64> = (-60..=60).map(|i| i as f64 * 0.05).collect();
        v.extend([
            -1.0 - 1e-9,
            -1.0 + 1e-9,
            1.0 - 1e-9,
            1.0 + 1e-9,
            1e-12,
            -1e-12,
        ]);
        v
    }

    /// The fast additive form (coefficients × weights) and the multiplicative one equal the
    /// oracles in value, and their analytic slopes equal the oracles' central differences.
    #[test]
    fn fast_forms_equal_the_oracles_for_every_code() {
        for &(nom, hi, lo) in &VARIATIONS {
            for &a in &alphas() {
                for code in InterpCode::ALL {
                    let (value, slope, oracle): (f64, f64, Box<dyn Fn(f64) -> f64>) =
                        if code.is_multiplicative() {
                            let (up, dn) = (hi / nom, lo / nom);
                            let c = multiplicative_coefficients(code, up, dn);
                            let (v, d) = multiplicative_value(code, &c, a);
                            let f: Box<dyn Fn(f64) -> f64> = match code {
                                InterpCode::Code1 => Box::new(move |x| code1(up, dn, x)),
                                _ => Box::new(move |x| code4(up, dn, x)),
                            };
                            (v, d, f)
                        } else {
                            let c = additive_coefficients(code, nom, hi, lo);
                            let (w, dw) = additive_weights(code, a);
                            let v = nom + (0..4).map(|k| w[k] * c[k]).sum::<f64>();
                            let d = (0..4).map(|k| dw[k] * c[k]).sum::<f64>();
                            let f: Box<dyn Fn(f64) -> f64> = match code {
                                InterpCode::Code0 => Box::new(move |x| code0(nom, hi, lo, x)),
                                InterpCode::Code2 => Box::new(move |x| code2(nom, hi, lo, x)),
                                _ => Box::new(move |x| code4p(nom, hi, lo, x)),
                            };
                            (v, d, f)
                        };
                    let want = oracle(a);
                    assert!(
                        (value - want).abs() <= 1e-12 * want.abs().max(1.0),
                        "{code} ({nom}, {hi}, {lo}) at {a}: {value} vs oracle {want}"
                    );
                    // Away from the joins (kinks of codes 0 and 1 at 0; code 2's tangent
                    // continuation and the polynomial codes' joins at ±1 are smooth).
                    let h = 1e-6;
                    if (a.abs() - 1.0).abs() > 2.0 * h && a.abs() > 2.0 * h {
                        let fd = (oracle(a + h) - oracle(a - h)) / (2.0 * h);
                        assert!(
                            (slope - fd).abs() <= 1e-6 * fd.abs().max(1.0),
                            "{code} ({nom}, {hi}, {lo}) at {a}: slope {slope} vs oracle {fd}"
                        );
                    }
                }
            }
        }
    }
}

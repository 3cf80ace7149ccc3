//! Small dense linear algebra (row-major `Vec<f64>`): general inverse by Gauss–Jordan with partial
//! pivoting, and the inverse of a symmetric matrix via Cholesky with a positive-definiteness flag.
//! Sizes run from the optimizer's small systems to the uncertainties' Hessian (up to the
//! dense limit, 4096 by default): the symmetric inverse reads rows only, so it stays
//! cache-friendly at those sizes without a dependency's build time.

/// Inverse of the `n×n` matrix `a`, or `None` if it is numerically singular.
pub fn invert(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut m = a.to_vec();
    let mut inv = vec![0.0; n * n];
    for i in 0..n {
        inv[i * n + i] = 1.0;
    }
    let scale = a
        .iter()
        .fold(0.0f64, |s, x| s.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    for col in 0..n {
        let piv =
            (col..n).max_by(|&i, &j| m[i * n + col].abs().total_cmp(&m[j * n + col].abs()))?;
        if m[piv * n + col].abs() <= 1e-14 * scale {
            return None;
        }
        if piv != col {
            for k in 0..n {
                m.swap(piv * n + k, col * n + k);
                inv.swap(piv * n + k, col * n + k);
            }
        }
        let d = 1.0 / m[col * n + col];
        for k in 0..n {
            m[col * n + k] *= d;
            inv[col * n + k] *= d;
        }
        for row in 0..n {
            if row != col {
                let f = m[row * n + col];
                if f != 0.0 {
                    for k in 0..n {
                        m[row * n + k] -= f * m[col * n + k];
                        inv[row * n + k] -= f * inv[col * n + k];
                    }
                }
            }
        }
    }
    Some(inv)
}

/// Matrices from this size on take the vectorisable sums below; smaller ones (the optimizer's
/// own 2m×2m systems) keep the plain left-to-right sums they have always had, so that no fit
/// moves by a rounding.
const WIDE: usize = 32;

/// `init − Σ a[k]·b[k]`.
#[inline]
fn minus_dot(init: f64, a: &[f64], b: &[f64], wide: bool) -> f64 {
    if wide {
        init - dot4(a, b)
    } else {
        a.iter().zip(b).fold(init, |s, (x, y)| s - x * y)
    }
}

/// `Σ a[k]·b[k]`.
#[inline]
fn dot(a: &[f64], b: &[f64], wide: bool) -> f64 {
    if wide {
        dot4(a, b)
    } else {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }
}

/// A dot product with four running sums: independent chains the compiler can put in one vector
/// register (one chain is bound by the latency of each addition).
#[inline]
fn dot4(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a4, b4) = (a[..n].chunks_exact(4), b[..n].chunks_exact(4));
    let tail: f64 = a4
        .remainder()
        .iter()
        .zip(b4.remainder())
        .map(|(x, y)| x * y)
        .sum();
    let mut acc = [0.0f64; 4];
    for (x, y) in a4.zip(b4) {
        for k in 0..4 {
            acc[k] += x[k] * y[k];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// Cholesky factor `L` (lower, row-major) of a symmetric positive-definite matrix, or `None`.
/// Every sum runs along rows, which row-major storage keeps contiguous.
pub fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let wide = n >= WIDE;
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let row_j = &l[j * n..j * n + j];
        let d = minus_dot(a[j * n + j], row_j, row_j, wide);
        if d <= 0.0 || !d.is_finite() {
            return None;
        }
        let d = d.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let (upper, lower) = l.split_at_mut(i * n);
            let s = minus_dot(a[i * n + j], &lower[..j], &upper[j * n..j * n + j], wide);
            lower[j] = s / d;
        }
    }
    Some(l)
}

/// Inverse of a symmetric matrix: by Cholesky when it is positive definite (second value `true`),
/// otherwise by Gauss–Jordan (second value `false`: the point is not a proper minimum).
pub fn invert_symmetric(a: &[f64], n: usize) -> Option<(Vec<f64>, bool)> {
    if let Some(l) = cholesky(a, n) {
        let wide = n >= WIDE;
        // inv(A) = inv(L)ᵀ inv(L). Column j of inv(L) by forward substitution, kept as row j of
        // `u` (u = inv(L)ᵀ, upper triangular), so that both the substitution and the product
        // below read contiguous rows: a column walk of an n×n matrix misses the cache at
        // every step once n is in the thousands.
        let mut u = vec![0.0; n * n];
        for j in 0..n {
            let row = &mut u[j * n..(j + 1) * n];
            row[j] = 1.0 / l[j * n + j];
            for i in j + 1..n {
                let s = minus_dot(0.0, &l[i * n + j..i * n + i], &row[j..i], wide);
                row[i] = s / l[i * n + i];
            }
        }
        drop(l);
        let mut inv = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                let s = dot(&u[i * n + i..(i + 1) * n], &u[j * n + i..(j + 1) * n], wide);
                inv[i * n + j] = s;
                inv[j * n + i] = s;
            }
        }
        return Some((inv, true));
    }
    invert(a, n).map(|inv| (inv, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverses_agree() {
        let a = [4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0];
        let (s, pd) = invert_symmetric(&a, 3).unwrap();
        assert!(pd);
        let g = invert(&a, 3).unwrap();
        for (x, y) in s.iter().zip(&g) {
            assert!((x - y).abs() < 1e-14);
        }
        // A·A⁻¹ = I
        for i in 0..3 {
            for j in 0..3 {
                let v: f64 = (0..3).map(|k| a[i * 3 + k] * g[k * 3 + j]).sum();
                assert!((v - if i == j { 1.0 } else { 0.0 }).abs() < 1e-14);
            }
        }
        let indefinite = [1.0, 2.0, 2.0, 1.0];
        assert!(!invert_symmetric(&indefinite, 2).unwrap().1);
        assert!(invert(&[1.0, 2.0, 2.0, 4.0], 2).is_none());
    }

    /// The vectorised path (n ≥ 32) on a dense positive-definite matrix: A·A⁻¹ = I and the
    /// inverse equals Gauss–Jordan's.
    #[test]
    fn wide_inverse_is_an_inverse() {
        let n = 77;
        // A = BᵀB + n·I with B filled by a fixed recurrence: dense, positive definite.
        let mut x = 0.5f64;
        let b: Vec<f64> = (0..n * n)
            .map(|_| {
                x = (x * 3.7 + 0.123).fract();
                x - 0.5
            })
            .collect();
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = (0..n).map(|k| b[k * n + i] * b[k * n + j]).sum::<f64>()
                    + if i == j { n as f64 } else { 0.0 };
            }
        }
        let (inv, pd) = invert_symmetric(&a, n).unwrap();
        assert!(pd);
        let g = invert(&a, n).unwrap();
        for (x, y) in inv.iter().zip(&g) {
            assert!((x - y).abs() < 1e-13, "{x} vs {y}");
        }
        for i in 0..n {
            for j in 0..n {
                let v: f64 = (0..n).map(|k| a[i * n + k] * inv[k * n + j]).sum();
                assert!((v - if i == j { 1.0 } else { 0.0 }).abs() < 1e-12);
            }
        }
    }
}

//! Small dense linear algebra (row-major `Vec<f64>`): general inverse by Gauss–Jordan with partial
//! pivoting, and the inverse of a symmetric matrix via Cholesky with a positive-definiteness flag.
//! Sizes here are at most a few hundred, where a dependency would cost more build time than it saves.

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

/// Cholesky factor `L` (lower, row-major) of a symmetric positive-definite matrix, or `None`.
pub fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= l[j * n + k] * l[j * n + k];
        }
        if d <= 0.0 || !d.is_finite() {
            return None;
        }
        let d = d.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / d;
        }
    }
    Some(l)
}

/// Inverse of a symmetric matrix: by Cholesky when it is positive definite (second value `true`),
/// otherwise by Gauss–Jordan (second value `false`: the point is not a proper minimum).
pub fn invert_symmetric(a: &[f64], n: usize) -> Option<(Vec<f64>, bool)> {
    if let Some(l) = cholesky(a, n) {
        // inv(A) = inv(L)ᵀ inv(L); invert L by forward substitution.
        let mut li = vec![0.0; n * n];
        for i in 0..n {
            li[i * n + i] = 1.0 / l[i * n + i];
            for j in 0..i {
                let mut s = 0.0;
                for k in j..i {
                    s -= l[i * n + k] * li[k * n + j];
                }
                li[i * n + j] = s / l[i * n + i];
            }
        }
        let mut inv = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                let s: f64 = (i..n).map(|k| li[k * n + i] * li[k * n + j]).sum();
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
}

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
#[inline(always)]
fn minus_dot(init: f64, a: &[f64], b: &[f64], wide: bool) -> f64 {
    if wide {
        init - dot4(a, b)
    } else {
        a.iter().zip(b).fold(init, |s, (x, y)| s - x * y)
    }
}

/// `Σ a[k]·b[k]`.
#[inline(always)]
fn dot(a: &[f64], b: &[f64], wide: bool) -> f64 {
    if wide {
        dot4(a, b)
    } else {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }
}

/// A dot product with sixteen running sums in four groups of four: independent chains the
/// compiler keeps in four vector registers, so that several additions are in flight at once (one
/// chain is bound by the latency of each addition); what is left over goes four, then one at a
/// time.
#[inline(always)]
fn dot4(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a16, b16) = (a[..n].chunks_exact(16), b[..n].chunks_exact(16));
    let (ra, rb) = (a16.remainder(), b16.remainder());
    let mut acc = [0.0f64; 16];
    for (x, y) in a16.zip(b16) {
        for k in 0..16 {
            acc[k] += x[k] * y[k];
        }
    }
    let (a4, b4) = (ra.chunks_exact(4), rb.chunks_exact(4));
    let tail: f64 = a4
        .remainder()
        .iter()
        .zip(b4.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a4.zip(b4) {
        for k in 0..4 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut four = [0.0f64; 4];
    for k in 0..4 {
        four[k] = (acc[k] + acc[k + 4]) + (acc[k + 8] + acc[k + 12]);
    }
    (four[0] + four[1]) + (four[2] + four[3]) + tail
}

/// Cholesky factor `L` (lower, row-major) of a symmetric positive-definite matrix, or `None`.
/// Every sum runs along rows, which row-major storage keeps contiguous.
#[inline(always)]
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
    #[cfg(target_arch = "x86_64")]
    if n >= WIDE
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
    {
        // SAFETY: the CPU reports AVX2 and FMA.
        return unsafe { invert_symmetric_avx(a, n) };
    }
    invert_symmetric_with(a, n)
}

/// [`invert_symmetric`] compiled for AVX2: the same code, its vector loops four wide instead of
/// the baseline's two (the uncertainties' n³ on a model of a few hundred parameters).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn invert_symmetric_avx(a: &[f64], n: usize) -> Option<(Vec<f64>, bool)> {
    invert_symmetric_with(a, n)
}

#[inline(always)]
fn invert_symmetric_with(a: &[f64], n: usize) -> Option<(Vec<f64>, bool)> {
    if let Some(l) = cholesky(a, n) {
        if n >= WIDE {
            return Some((inverse_from_cholesky_by_rows(l, n), true));
        }
        // inv(A) = inv(L)ᵀ inv(L). Column j of inv(L) by forward substitution, kept as row j of
        // `u` (u = inv(L)ᵀ, upper triangular), so that both the substitution and the product
        // below read contiguous rows.
        let mut u = vec![0.0; n * n];
        for j in 0..n {
            let row = &mut u[j * n..(j + 1) * n];
            row[j] = 1.0 / l[j * n + j];
            for i in j + 1..n {
                let s = minus_dot(0.0, &l[i * n + j..i * n + i], &row[j..i], false);
                row[i] = s / l[i * n + i];
            }
        }
        drop(l);
        let mut inv = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                let s = dot(
                    &u[i * n + i..(i + 1) * n],
                    &u[j * n + i..(j + 1) * n],
                    false,
                );
                inv[i * n + j] = s;
                inv[j * n + i] = s;
            }
        }
        return Some((inv, true));
    }
    invert(a, n).map(|inv| (inv, false))
}

/// inv(A) = Vᵀ V with V = inv(L), for the large matrices, in row updates only (`y += c·x` over
/// contiguous rows): no dot product's chain of dependent additions, and every loop a vector
/// loop. Row i of V: (eᵢ − Σ_{j<i} L[i][j]·V[j]) / L[i][i], written over row i of L (a copy of
/// which supplies the coefficients); then inv = Σ_k V[k]ᵀ V[k], the lower triangle accumulated
/// row by row and mirrored. Each row of V, and of inv's lower triangle, ends at the diagonal, so
/// the work is n³/6 multiply-adds for each of the two steps.
#[inline(always)]
fn inverse_from_cholesky_by_rows(mut l: Vec<f64>, n: usize) -> Vec<f64> {
    let mut li = vec![0.0; n];
    for i in 0..n {
        li[..=i].copy_from_slice(&l[i * n..=i * n + i]);
        let (done, rest) = l.split_at_mut(i * n);
        let row = &mut rest[..=i];
        row.iter_mut().for_each(|x| *x = 0.0);
        row[i] = 1.0;
        for j in 0..i {
            let c = li[j];
            if c != 0.0 {
                axpy(-c, &done[j * n..=j * n + j], &mut row[..=j]);
            }
        }
        let d = 1.0 / li[i];
        row.iter_mut().for_each(|x| *x *= d);
    }
    let v = l;
    let mut inv = vec![0.0; n * n];
    for k in 0..n {
        let vk = &v[k * n..=k * n + k];
        for i in 0..=k {
            if vk[i] != 0.0 {
                axpy(vk[i], &vk[..=i], &mut inv[i * n..=i * n + i]);
            }
        }
    }
    for i in 0..n {
        for j in 0..i {
            inv[j * n + i] = inv[i * n + j];
        }
    }
    inv
}

/// `y += c·x`.
#[inline(always)]
fn axpy(c: f64, x: &[f64], y: &mut [f64]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += c * x;
    }
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

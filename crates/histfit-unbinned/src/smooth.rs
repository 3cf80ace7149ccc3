//! Smooth densities from points (histfit's extensions `histfit_spline_dist` and
//! `histfit_kde_dist`): cubic splines through given values, and a Gaussian kernel density
//! estimate over a sample, tabulated once as a spline of its logarithm. Both are fixed shapes
//! (no parameter moves them) evaluated per event by the graph's [`Op::Spline`](crate::graph::Op).

/// The cubic pieces (a, b, c, d), in t = x − knots[k], of the cubic spline through (knots,
/// values), twice continuously differentiable: natural (second derivative 0 at both ends) where
/// `slopes` is `None`, else clamped to the first derivatives (at the first knot, at the last)
/// it gives — which keeps its error of order h⁴ up to the ends.
pub fn cubic_spline(knots: &[f64], values: &[f64], slopes: Option<(f64, f64)>) -> Vec<[f64; 4]> {
    let n = knots.len() - 1;
    let h: Vec<f64> = knots.windows(2).map(|w| w[1] - w[0]).collect();
    let delta: Vec<f64> = (0..n).map(|i| (values[i + 1] - values[i]) / h[i]).collect();
    // Second derivatives m[0..=n]: a tridiagonal system (sub, diag, sup) = rhs, by Thomas's
    // algorithm.
    let (mut sub, mut diag, mut sup, mut rhs) = (
        vec![0.0; n + 1],
        vec![1.0; n + 1],
        vec![0.0; n + 1],
        vec![0.0; n + 1],
    );
    for i in 1..n {
        sub[i] = h[i - 1];
        diag[i] = 2.0 * (h[i - 1] + h[i]);
        sup[i] = h[i];
        rhs[i] = 6.0 * (delta[i] - delta[i - 1]);
    }
    if let Some((d0, dn)) = slopes {
        diag[0] = 2.0 * h[0];
        sup[0] = h[0];
        rhs[0] = 6.0 * (delta[0] - d0);
        sub[n] = h[n - 1];
        diag[n] = 2.0 * h[n - 1];
        rhs[n] = 6.0 * (dn - delta[n - 1]);
    }
    for i in 1..=n {
        let w = sub[i] / diag[i - 1];
        diag[i] -= w * sup[i - 1];
        rhs[i] -= w * rhs[i - 1];
    }
    let mut m = vec![0.0; n + 1];
    m[n] = rhs[n] / diag[n];
    for i in (0..n).rev() {
        m[i] = (rhs[i] - sup[i] * m[i + 1]) / diag[i];
    }
    (0..n)
        .map(|i| {
            [
                values[i],
                delta[i] - h[i] * (2.0 * m[i] + m[i + 1]) / 6.0,
                0.5 * m[i],
                (m[i + 1] - m[i]) / (6.0 * h[i]),
            ]
        })
        .collect()
}

/// The pieces of the monotone (shape-preserving) piecewise cubic Hermite interpolant through
/// (knots, values) — Fritsch and Carlson's construction with Fritsch and Butland's weighted
/// harmonic mean of the secants for the slopes, as SciPy's `PchipInterpolator`: no overshoot
/// between knots, so non-negative values give a non-negative curve; once continuously
/// differentiable.
pub fn pchip(knots: &[f64], values: &[f64]) -> Vec<[f64; 4]> {
    let n = knots.len() - 1;
    let h: Vec<f64> = knots.windows(2).map(|w| w[1] - w[0]).collect();
    let delta: Vec<f64> = (0..n).map(|i| (values[i + 1] - values[i]) / h[i]).collect();
    let mut d = vec![0.0; n + 1];
    if n == 1 {
        d = vec![delta[0]; 2];
    } else {
        for i in 1..n {
            // Weighted harmonic mean of the neighbouring secants; 0 at a local extremum.
            if delta[i - 1] * delta[i] > 0.0 {
                let (w1, w2) = (2.0 * h[i] + h[i - 1], h[i] + 2.0 * h[i - 1]);
                d[i] = (w1 + w2) / (w1 / delta[i - 1] + w2 / delta[i]);
            }
        }
        // Ends: a three-point estimate, kept in the secant's direction and not above 3 times it.
        let end = |h0: f64, h1: f64, d0: f64, d1: f64| {
            let e = ((2.0 * h0 + h1) * d0 - h0 * d1) / (h0 + h1);
            if e * d0 <= 0.0 {
                0.0
            } else if d0 * d1 <= 0.0 && e.abs() > 3.0 * d0.abs() {
                3.0 * d0
            } else {
                e
            }
        };
        d[0] = end(h[0], h[1], delta[0], delta[1]);
        d[n] = end(h[n - 1], h[n - 2], delta[n - 1], delta[n - 2]);
    }
    (0..n)
        .map(|i| {
            [
                values[i],
                d[i],
                (3.0 * delta[i] - 2.0 * d[i] - d[i + 1]) / h[i],
                (d[i] + d[i + 1] - 2.0 * delta[i]) / (h[i] * h[i]),
            ]
        })
        .collect()
}

/// The piece's value at t.
fn cubic_at(p: &[f64; 4], t: f64) -> f64 {
    p[0] + t * (p[1] + t * (p[2] + t * p[3]))
}

/// ∫ of the spline over [lo, hi] ∩ [first knot, last knot], exactly.
pub fn integral(knots: &[f64], pieces: &[[f64; 4]], lo: f64, hi: f64) -> f64 {
    let prim =
        |p: &[f64; 4], t: f64| t * (p[0] + t * (p[1] / 2.0 + t * (p[2] / 3.0 + t * p[3] / 4.0)));
    pieces
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let (a, b) = (knots[k].max(lo), knots[k + 1].min(hi));
            if b > a {
                prim(p, b - knots[k]) - prim(p, a - knots[k])
            } else {
                0.0
            }
        })
        .sum()
}

/// The spline's smallest value over [lo, hi] ∩ its knots' range, and the piece where it is:
/// each piece's ends and the roots of its derivative inside it.
pub fn minimum(knots: &[f64], pieces: &[[f64; 4]], lo: f64, hi: f64) -> Option<(f64, usize)> {
    let mut best: Option<(f64, usize)> = None;
    for (k, p) in pieces.iter().enumerate() {
        let (a, b) = (knots[k].max(lo), knots[k + 1].min(hi));
        if b < a {
            continue;
        }
        let (ta, tb) = (a - knots[k], b - knots[k]);
        let mut ts = vec![ta, tb];
        // p′(t) = b + 2ct + 3dt².
        let (qa, qb, qc) = (3.0 * p[3], 2.0 * p[2], p[1]);
        if qa != 0.0 {
            let disc = qb * qb - 4.0 * qa * qc;
            if disc >= 0.0 {
                ts.push((-qb + disc.sqrt()) / (2.0 * qa));
                ts.push((-qb - disc.sqrt()) / (2.0 * qa));
            }
        } else if qb != 0.0 {
            ts.push(-qc / qb);
        }
        for t in ts.into_iter().filter(|t| (ta..=tb).contains(t)) {
            let v = cubic_at(p, t);
            if best.is_none_or(|(m, _)| v < m) {
                best = Some((v, k));
            }
        }
    }
    best
}

/// A Gaussian kernel density estimate: f(x) ∝ Σ_j w_j φ((x − x_j)/h)/h over a sample.
pub struct Kde {
    /// The sample, sorted, without its events of weight 0, and ln of each weight.
    points: Vec<f64>,
    log_weights: Vec<f64>,
    /// How many bandwidths a heavier kernel can make up: √(2 (max ln w − min ln w)).
    weight_reach: f64,
    /// The bandwidth.
    pub h: f64,
}

/// How the bandwidth is chosen.
#[derive(Debug, Clone, Copy)]
pub enum Bandwidth {
    /// This value.
    Fixed(f64),
    /// Scott's rule, 1.06 σ n^(−1/5).
    Scott,
    /// Silverman's rule, 0.9 min(σ, IQR/1.34) n^(−1/5).
    Silverman,
}

/// Kernels further than this many bandwidths beyond the nearest one (plus the weights' reach,
/// [`Kde::window`]) are left out of the sums: with equal weights each such term is below
/// e^(−R²/2) = e^(−72) of the nearest's (z² − z₀² ≥ R² where z ≥ z₀ + R); a weight ratio W adds
/// √(2 ln W) bandwidths, which keeps that bound. So even 10¹⁴ of them change the sum by less
/// than 10⁻¹⁷ of itself — below a double's resolution. (Out to e^(−760), where the terms
/// underflow, the windows were 3.25 times as wide and a table cost as much more, for no change
/// a double can hold.)
const REACH: f64 = 12.0;

impl Kde {
    /// The estimate over `points` (weights 1 where `None`), its bandwidth by `rule` times `rho`;
    /// n is the effective sample size (Σw)²/Σw² and σ, the quartiles, weighted.
    pub fn new(points: &[f64], weights: Option<&[f64]>, rule: Bandwidth, rho: f64) -> Kde {
        let w: Vec<f64> = weights.map_or_else(|| vec![1.0; points.len()], <[f64]>::to_vec);
        let mut order: Vec<usize> = (0..points.len()).filter(|&i| w[i] > 0.0).collect();
        order.sort_by(|&a, &b| points[a].total_cmp(&points[b]));
        let sw: f64 = order.iter().map(|&i| w[i]).sum();
        let n_eff = sw * sw / order.iter().map(|&i| w[i] * w[i]).sum::<f64>();
        let mean = order.iter().map(|&i| points[i] * w[i]).sum::<f64>() / sw;
        let var = order
            .iter()
            .map(|&i| w[i] * (points[i] - mean).powi(2))
            .sum::<f64>()
            / sw;
        let sigma = var.sqrt();
        let h = match rule {
            Bandwidth::Fixed(h) => h,
            Bandwidth::Scott => 1.06 * sigma * n_eff.powf(-0.2),
            Bandwidth::Silverman => {
                let quantile = |q: f64| {
                    let mut acc = 0.0;
                    for &i in &order {
                        acc += w[i];
                        if acc >= q * sw {
                            return points[i];
                        }
                    }
                    order.last().map_or(f64::NAN, |&i| points[i])
                };
                let iqr = quantile(0.75) - quantile(0.25);
                let spread = if iqr > 0.0 {
                    sigma.min(iqr / 1.34)
                } else {
                    sigma
                };
                0.9 * spread * n_eff.powf(-0.2)
            }
        } * rho;
        let log_weights: Vec<f64> = order.iter().map(|&i| w[i].ln()).collect();
        let (lo, hi) = log_weights
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &l| {
                (a.min(l), b.max(l))
            });
        Kde {
            points: order.iter().map(|&i| points[i]).collect(),
            log_weights,
            weight_reach: if hi > lo {
                (2.0 * (hi - lo)).sqrt()
            } else {
                0.0
            },
            h,
        }
    }

    /// The kernels left after events of weight 0 are set aside.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether no kernel is left.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The range of kernels that matter at x: those within [`REACH`] bandwidths beyond the
    /// nearest, by the sorted sample's binary search.
    fn window(&self, x: f64) -> std::ops::Range<usize> {
        let p = &self.points;
        let at = p.partition_point(|&v| v < x);
        let Some((near, nearest)) = [at.checked_sub(1), (at < p.len()).then_some(at)]
            .into_iter()
            .flatten()
            .map(|i| (i, (p[i] - x).abs()))
            .min_by(|a, b| a.1.total_cmp(&b.1))
        else {
            return 0..0;
        };
        // A heavier kernel further out can outweigh the nearest: the reach grows by as many
        // bandwidths as the weights' spread makes up.
        let reach = nearest + (REACH + self.weight_reach) * self.h;
        let lo = p.partition_point(|&v| v < x - reach).min(near);
        let hi = p.partition_point(|&v| v <= x + reach).max(near + 1);
        lo..hi
    }

    /// ln f(x) and d ln f/dx: the kernels' exponents ln w_j − z_j²/2 summed by log-sum-exp
    /// (finite however far x lies from the sample, where the terms themselves underflow 38
    /// bandwidths out), in one vectorised pass over the window (e^x is [`crate::vmath::exp`],
    /// the same bits with or without AVX2; the sums in a fixed order).
    fn log_and_slope(&self, x: f64) -> (f64, f64) {
        let r = self.window(x);
        let (p, lw) = (&self.points[r.clone()], &self.log_weights[r]);
        let inv = 1.0 / self.h;
        let m = p
            .iter()
            .zip(lw)
            .map(|(&v, &l)| {
                let z = (x - v) * inv;
                l - 0.5 * z * z
            })
            .fold(f64::NEG_INFINITY, f64::max);
        let (s, zs) = sums(p, lw, x, inv, m);
        let log = m + s.ln() - (self.h * (2.0 * std::f64::consts::PI).sqrt()).ln();
        (log, -zs / s * inv)
    }

    /// ln Σ_j w_j φ((x − x_j)/h)/h.
    pub fn log_density(&self, x: f64) -> f64 {
        self.log_and_slope(x).0
    }

    /// d ln f/dx at x.
    pub fn log_slope(&self, x: f64) -> f64 {
        self.log_and_slope(x).1
    }

    /// Σ_j w_j φ((x − x_j)/h)/h.
    pub fn density(&self, x: f64) -> f64 {
        self.log_density(x).exp()
    }

    /// ∫ of [`Kde::density`] over [lo, hi], exactly (each kernel's mass there).
    pub fn mass(&self, lo: f64, hi: f64) -> f64 {
        let cdf = |z: f64| 0.5 * libm::erfc(-z / std::f64::consts::SQRT_2);
        self.points
            .iter()
            .zip(&self.log_weights)
            .map(|(p, lw)| lw.exp() * (cdf((hi - p) / self.h) - cdf((lo - p) / self.h)))
            .sum()
    }

    /// ln of the density tabulated on [lo, hi] as a cubic spline over equally spaced knots,
    /// clamped to the exact slopes at the ends, from 256 up to 65 536 knots, doubled until the
    /// spline's largest error in ln f (the density's relative error) at the pieces' midpoints
    /// is below `tolerance`: the pieces and the error reached (∞ where it is not finite). The
    /// midpoints where one size is checked are the knots the next size adds (knot i of n is
    /// knot 2i of 2n to the bit: scaling by 2 is exact), so each knot's density is computed
    /// once: half the work of computing every size's knots afresh. Computed in parallel.
    pub fn log_spline(&self, lo: f64, hi: f64, tolerance: f64) -> (Vec<f64>, Vec<[f64; 4]>, f64) {
        use rayon::prelude::*;
        let at = |i: usize, n: usize| lo + (hi - lo) * i as f64 / n as f64;
        let mut n = 256;
        let mut logs: Vec<f64> = (0..=n)
            .into_par_iter()
            .map(|i| self.log_density(at(i, n)))
            .collect();
        let slopes = Some((self.log_slope(lo), self.log_slope(hi)));
        loop {
            let knots: Vec<f64> = (0..=n).map(|i| at(i, n)).collect();
            let pieces = cubic_spline(&knots, &logs, slopes);
            // The density at the midpoints: knots 1, 3, 5 … of 2n.
            let mids: Vec<f64> = (0..n)
                .into_par_iter()
                .map(|k| self.log_density(at(2 * k + 1, 2 * n)))
                .collect();
            let err = (0..n)
                .map(|k| {
                    let e = (cubic_at(&pieces[k], at(2 * k + 1, 2 * n) - knots[k]) - mids[k]).abs();
                    if e.is_nan() {
                        f64::INFINITY
                    } else {
                        e
                    }
                })
                .fold(0.0, f64::max);
            if err <= tolerance || n >= 65_536 || !err.is_finite() {
                return (knots, pieces, err);
            }
            logs = logs
                .iter()
                .zip(mids.iter().map(Some).chain([None]))
                .flat_map(|(&k, m)| std::iter::once(k).chain(m.copied()))
                .collect();
            n *= 2;
        }
    }
}

/// Σ e^(t_j) and Σ z_j e^(t_j), t_j = lw_j − z_j²/2 − m, z_j = (x − p_j)/h: in AVX2 where the
/// processor has it (the same operations, so the same bits).
fn sums(p: &[f64], lw: &[f64], x: f64, inv: f64, m: f64) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the processor has AVX2 and FMA (checked just above).
        return unsafe { sums_avx2(p, lw, x, inv, m) };
    }
    sums_body(p, lw, x, inv, m)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sums_avx2(p: &[f64], lw: &[f64], x: f64, inv: f64, m: f64) -> (f64, f64) {
    sums_body(p, lw, x, inv, m)
}

#[inline(always)]
fn sums_body(p: &[f64], lw: &[f64], x: f64, inv: f64, m: f64) -> (f64, f64) {
    const L: usize = 8;
    let (mut s, mut zs) = ([0.0; L], [0.0; L]);
    let (pc, lc) = (p.chunks_exact(L), lw[..p.len()].chunks_exact(L));
    let (pr, lr) = (pc.remainder(), lc.remainder());
    for (a, b) in pc.zip(lc) {
        for k in 0..L {
            let z = (x - a[k]) * inv;
            let e = crate::vmath::exp(b[k] - 0.5 * z * z - m);
            s[k] += e;
            zs[k] += z * e;
        }
    }
    for (k, (a, b)) in pr.iter().zip(lr).enumerate() {
        let z = (x - a) * inv;
        let e = crate::vmath::exp(b - 0.5 * z * z - m);
        s[k] += e;
        zs[k] += z * e;
    }
    (s.iter().sum(), zs.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A natural cubic reproduces a straight line and interpolates its knots; its integral is
    /// exact for a cubic it reproduces.
    #[test]
    fn splines_interpolate_and_integrate() {
        let knots = [0.0, 0.5, 1.5, 2.0, 3.5];
        let line: Vec<f64> = knots.iter().map(|x| 2.0 + 0.5 * x).collect();
        for pieces in [cubic_spline(&knots, &line, None), pchip(&knots, &line)] {
            for (k, p) in pieces.iter().enumerate() {
                assert!((p[0] - line[k]).abs() < 1e-15);
                assert!((cubic_at(p, knots[k + 1] - knots[k]) - line[k + 1]).abs() < 1e-12);
            }
            let i = integral(&knots, &pieces, 0.25, 3.0);
            let want = 2.0 * 2.75 + 0.25 * (9.0 - 0.0625);
            assert!((i - want).abs() < 1e-12, "{i} {want}");
        }
        // pchip keeps non-negative data non-negative where the natural spline dips below.
        let knots = [0.0, 1.0, 2.0, 3.0, 4.0];
        let spiky = [0.0, 0.0, 5.0, 0.0, 0.0];
        assert!(
            minimum(&knots, &cubic_spline(&knots, &spiky, None), 0.0, 4.0)
                .unwrap()
                .0
                < 0.0
        );
        assert!(minimum(&knots, &pchip(&knots, &spiky), 0.0, 4.0).unwrap().0 >= 0.0);
    }

    /// A KDE's log-density far from its sample (where every kernel underflows) is finite and
    /// its table reaches the tolerance over a range 60 bandwidths wide of the sample.
    #[test]
    fn kde_tables_are_finite_far_from_the_sample() {
        let pts: Vec<f64> = (0..200)
            .map(|i| 84.0 + 2.0 * ((i as f64 * 0.618_034) % 1.0))
            .collect();
        let kde = Kde::new(&pts, None, Bandwidth::Silverman, 1.0);
        let far = kde.log_density(60.0);
        let want = {
            // The nearest kernel's term dominates: ln(w φ(z)/h) with z from 84 − 60 onward.
            let z = (60.0 - 84.0) / kde.h;
            -0.5 * z * z - (kde.h * (2.0 * std::f64::consts::PI).sqrt()).ln()
        };
        assert!(
            far.is_finite() && far <= want + 200f64.ln() && far >= want,
            "{far} {want}"
        );
        let (_, pieces, err) = kde.log_spline(60.0, 120.0, 1e-10);
        assert!(err <= 1e-10, "{err}");
        assert!(pieces.iter().flatten().all(|c| c.is_finite()));
    }

    /// The tabulated log-density of a KDE against the exact sum between knots.
    #[test]
    fn kde_tables_reach_their_tolerance() {
        let pts: Vec<f64> = (0..500)
            .map(|i| ((i as f64 * 0.618_034) % 1.0) * 4.0)
            .collect();
        let kde = Kde::new(&pts, None, Bandwidth::Silverman, 1.0);
        let (knots, pieces, err) = kde.log_spline(-1.0, 5.0, 1e-10);
        assert!(err <= 1e-10, "{err} with {} knots", knots.len());
        // Each knot's value, carried over from the smaller sizes' midpoints, is the density
        // at that knot to the bit.
        assert!(knots.len() > 257);
        for (x, piece) in knots.iter().zip(&pieces) {
            assert_eq!(piece[0].to_bits(), kde.log_density(*x).to_bits(), "at {x}");
        }
        let x = 1.234_567;
        let k = knots.partition_point(|&e| e <= x) - 1;
        let v = cubic_at(&pieces[k], x - knots[k]).exp();
        assert!((v - kde.density(x)).abs() < 1e-10 * v);
        // The windowed sums against every kernel summed, inside the sample and beyond it.
        for x in [-1.0, 0.3, 1.234_567, 2.0, 3.9, 5.0, 9.0] {
            let all: f64 = pts
                .iter()
                .map(|p| {
                    let z = (x - p) / kde.h;
                    (-0.5 * z * z).exp() / (kde.h * (2.0 * std::f64::consts::PI).sqrt())
                })
                .sum();
            let d = kde.density(x);
            assert!((d - all).abs() <= 1e-13 * all, "at {x}: {d} against {all}");
        }
    }
}

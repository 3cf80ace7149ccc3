//! Minima at and near the kinks of interpolation codes 0 and 1.
//!
//! Under codes 0 and 1 −ln L has a kink at α = 0 in every parameter driving such a modifier: its
//! slopes on the two sides differ. Three things follow, each handled here:
//!
//! - **A minimum at a kink has no zero gradient.** It is certified by one-sided derivatives: the
//!   slope towards α > 0 must not be negative and the slope towards α < 0 must not be positive.
//!   The evaluator gives the slope of the side its argument lies on; at α = ±1e-150 the model's
//!   value is that at 0 to the last bit, so two evaluations (every kinked parameter at +0, then
//!   at −0) give both one-sided slopes of all of them at once.
//! - **A convex kink stalls L-BFGS-B** (f rises on both sides, the line search circles the
//!   kink): such parameters are held at 0 and the rest refitted.
//! - **A concave kink splits a basin in two**, one on each side; a descent settles in whichever it
//!   meets first. Where the slice through the minimum falls from α = 0 into the other side, the
//!   other side is searched too (a refit restricted to that side) and the lower minimum kept.
//!   Each such parameter costs one gradient evaluation to detect and one warm refit to compare;
//!   the refits are capped at [`MAX_SIDE_REFITS`] per round (the steepest first), with a note
//!   when more were due.

use super::search::{Local, Search};
use crate::Result;
use histfit_compute::AsyncEvaluator;

/// A kinked coordinate at ±TINY sits on that side of its kink with f unchanged (κ = e^(TINY·c)
/// rounds to 1, Δ = TINY·c vanishes against any nominal).
const TINY: f64 = 1e-150;

/// Coordinates within this of 0 sit at their kink (the line search stops exactly there, up to
/// the rounding of x + αd).
pub(crate) const AT_KINK: f64 = 1e-10;

/// One-sided slopes (per unit of z) below this do not start a search of the other side: the most
/// such a basin can gain is of order slope²/2, far below the 1e-6 in twice_nll fits are held to.
const SIDE_SLOPE: f64 = 1e-4;

/// A point whose smooth coordinates have a projected gradient above this, with coordinates at a
/// convex kink, is refitted with those held at the kink.
const HELD_REFIT_PG: f64 = 1e-6;

/// Refits of other kink basins per round.
pub(crate) const MAX_SIDE_REFITS: usize = 8;

/// The first-order check of a point: the largest projected gradient component, with one-sided
/// slopes at kinked coordinates that sit at their kink.
#[derive(Debug, Clone)]
pub(crate) struct Certificate {
    pub projected_gradient: f64,
    /// The largest component over the coordinates off their kinks.
    pub smooth: f64,
    /// Coordinates at their kink.
    pub at_kink: Vec<usize>,
    /// Coordinates at their kink with a side that descends: (coordinate, side ±1, slope).
    pub descents: Vec<(usize, f64, f64)>,
}

impl<E: AsyncEvaluator + ?Sized> Search<'_, E> {
    /// First-order conditions at `z`, one-sided at the kinks; `pinned` coordinates count as
    /// sitting at their kink.
    pub async fn certificate(&mut self, z: &[f64]) -> Result<Certificate> {
        let p = self.p;
        let at: Vec<usize> = (0..z.len())
            .filter(|&k| p.kinks[k] && z[k].abs() <= AT_KINK)
            .collect();
        let mut zs = z.to_vec();
        let mut g_up = vec![0.0; z.len()];
        for &k in &at {
            zs[k] = TINY;
        }
        self.nll_grad(&zs, &mut g_up).await?;
        let mut g_down = g_up.clone();
        if !at.is_empty() {
            for &k in &at {
                zs[k] = -TINY;
            }
            self.nll_grad(&zs, &mut g_down).await?;
        }
        if g_up.iter().chain(&g_down).any(|v| !v.is_finite()) {
            return Ok(Certificate {
                projected_gradient: f64::INFINITY,
                smooth: f64::INFINITY,
                at_kink: at,
                descents: Vec::new(),
            });
        }
        let mut pg: f64 = 0.0;
        for k in 0..z.len() {
            if !at.contains(&k) {
                let moved = (z[k] - g_up[k]).clamp(p.lower[k], p.upper[k]) - z[k];
                pg = pg.max(moved.abs());
            }
        }
        let smooth = pg;
        let mut descents = Vec::new();
        for &k in &at {
            // Towards α > 0 the slope is g_up; towards α < 0 f falls where g_down > 0.
            if p.upper[k] > 0.0 && g_up[k] < 0.0 {
                pg = pg.max(-g_up[k]);
                descents.push((k, 1.0, -g_up[k]));
            }
            if p.lower[k] < 0.0 && g_down[k] > 0.0 {
                pg = pg.max(g_down[k]);
                descents.push((k, -1.0, g_down[k]));
            }
        }
        Ok(Certificate {
            projected_gradient: pg,
            smooth,
            at_kink: at,
            descents,
        })
    }

    /// Kink handling after a descent (see the module docs): convex kinks that stopped it are
    /// held at 0, and the other side of every concave kink with a slice falling into it is
    /// searched, for a few rounds while that finds lower minima.
    pub async fn settle_kinks(&mut self, mut best: Local) -> Result<Local> {
        if !best.converged && best.f.is_finite() {
            if let Some(r) = self.pin_convex_kinks(&best).await? {
                best = r;
            }
        }
        if !best.f.is_finite() {
            return Ok(best);
        }
        for round in 0..3 {
            let mut cert = self.certificate(&best.z).await?;
            // Coordinates at a convex kink (neither side descends) are held there and the rest
            // refitted: the slope jump across the kink spoils L-BFGS-B's curvature pairs, and
            // its estimated distance to the minimum can then vanish short of the minimum of
            // the smooth coordinates.
            let convex: Vec<usize> = cert
                .at_kink
                .iter()
                .copied()
                .filter(|k| !best.pinned.contains(k) && !cert.descents.iter().any(|d| d.0 == *k))
                .collect();
            if !convex.is_empty() && cert.smooth > HELD_REFIT_PG {
                let pinned: Vec<usize> = best.pinned.iter().chain(&convex).copied().collect();
                let p = self.p;
                let r = self.descend(&best.z, (&p.lower, &p.upper), &pinned).await?;
                if r.converged && r.f <= best.f + 1e-12 * best.f.abs().max(1.0) {
                    best.replace_keeping_compared(r);
                    cert = self.certificate(&best.z).await?;
                }
            }
            // Slices are scanned once (a gradient per kinked coordinate): a basin found in the
            // first round rarely opens another, and later rounds follow the certificate only.
            let mut candidates = if round == 0 {
                self.other_sides(&best).await?
            } else {
                Vec::new()
            };
            for &(k, side, slope) in &cert.descents {
                if slope > SIDE_SLOPE && !candidates.iter().any(|c| c.0 == k && c.1 == side) {
                    candidates.push((k, side, slope));
                }
            }
            if candidates.is_empty() {
                break;
            }
            candidates.sort_by(|a, b| b.2.total_cmp(&a.2));
            if candidates.len() > MAX_SIDE_REFITS {
                let mut params: Vec<usize> = candidates.iter().map(|c| c.0).collect();
                params.sort_unstable();
                params.dedup();
                let msg = format!(
                    "{} kinked parameters may have a second basin across their kink; the {} steepest were searched",
                    params.len(),
                    MAX_SIDE_REFITS
                );
                best.notes
                    .retain(|n| !n.ends_with("steepest were searched"));
                best.notes.push(msg);
                candidates.truncate(MAX_SIDE_REFITS);
            }
            let mut improved = false;
            let start = best.clone();
            for &(k, side, _) in &candidates {
                let r = self.search_side(&start, k, side).await?;
                best.compared.push(k);
                if r.better_than(&best) {
                    best.replace_keeping_compared(r);
                    improved = true;
                }
            }
            if !improved {
                break;
            }
        }
        best.compared.sort_unstable();
        best.compared.dedup();
        Ok(best)
    }

    /// f and ∂f/∂z_k with coordinate `k` of `z` moved to its kink, on the side `side` (±1).
    async fn slope_at_kink(&mut self, z: &[f64], k: usize, side: f64) -> Result<(f64, f64)> {
        let mut zk = z.to_vec();
        zk[k] = side * TINY;
        let mut g = vec![0.0; z.len()];
        let f = self.nll_grad(&zk, &mut g).await?;
        Ok((f, g[k]))
    }

    /// Kinked coordinates off their kink whose slice through `at` falls from α = 0 into the
    /// other side: (coordinate, side, slope into it).
    async fn other_sides(&mut self, at: &Local) -> Result<Vec<(usize, f64, f64)>> {
        let p = self.p;
        let mut out = Vec::new();
        for k in 0..at.z.len() {
            if !p.kinks[k] || at.z[k].abs() <= AT_KINK || at.pinned.contains(&k) {
                continue;
            }
            let side = -at.z[k].signum();
            if (side > 0.0 && p.upper[k] <= 0.0) || (side < 0.0 && p.lower[k] >= 0.0) {
                continue;
            }
            let (f0, g) = self.slope_at_kink(&at.z, k, side).await?;
            let slope = -side * g;
            if f0.is_finite() && slope > SIDE_SLOPE {
                out.push((k, side, slope));
            }
        }
        Ok(out)
    }

    /// The minimum on one side of coordinate `k`'s kink, from `from` mirrored onto that side.
    async fn search_side(&mut self, from: &Local, k: usize, side: f64) -> Result<Local> {
        let p = self.p;
        let (mut lower, mut upper) = (p.lower.clone(), p.upper.clone());
        if side > 0.0 {
            lower[k] = lower[k].max(0.0);
        } else {
            upper[k] = upper[k].min(0.0);
        }
        let mut z = from.z.clone();
        z[k] = (side * from.z[k].abs().max(1e-3)).clamp(lower[k], upper[k]);
        let pinned: Vec<usize> = from.pinned.iter().copied().filter(|&j| j != k).collect();
        self.descend(&z, (&lower, &upper), &pinned).await
    }

    /// A descent that failed near kinks: hold at 0 the kinked coordinates near it whose slice
    /// rises on both sides of the kink (a convex kink, where their minimum is) and refit the
    /// rest. The refit is taken unless it is worse than the failed point by more than the 1e-6
    /// in twice_nll fits are compared to (that point is no minimum either: its line search gave
    /// up with a decrease still predicted).
    async fn pin_convex_kinks(&mut self, failed: &Local) -> Result<Option<Local>> {
        let p = self.p;
        let mut pinned = failed.pinned.clone();
        for k in 0..failed.z.len() {
            if !p.kinks[k] || failed.z[k].abs() > 5e-2 || pinned.contains(&k) {
                continue;
            }
            let (f0, up) = self.slope_at_kink(&failed.z, k, 1.0).await?;
            let (_, down) = self.slope_at_kink(&failed.z, k, -1.0).await?;
            if up >= 0.0 && down <= 0.0 && f0 <= failed.f + 1e-3 {
                pinned.push(k);
            }
        }
        if pinned.len() == failed.pinned.len() {
            return Ok(None);
        }
        let r = self
            .descend(&failed.z, (&p.lower, &p.upper), &pinned)
            .await?;
        Ok((r.converged && r.f <= failed.f + 5e-7).then_some(r))
    }
}

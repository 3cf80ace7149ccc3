//! Minima at and near kinks: the parameters a likelihood declares kinked
//! ([`histfit_seam::ParameterSpace::kinked`], e.g. those of piecewise-linear or piecewise-
//! exponential interpolations).
//!
//! At a kink α = 0 the slopes of −ln L on the two sides differ. Four things follow, each handled here:
//!
//! - **A minimum at a kink has no zero gradient.** It is certified by one-sided derivatives: the
//!   slope towards α > 0 must not be negative and the slope towards α < 0 must not be positive.
//!   The evaluator gives the slope of the side its argument lies on; at α = ±1e-150 the model's
//!   value is that at 0 to the last bit, so two evaluations (every kinked parameter at +0, then
//!   at −0) give both one-sided slopes of all of them at once.
//! - **A kink stalls L-BFGS-B**: the slope jumps across it (the line search circles a convex
//!   kink, the curvature pairs of a step across one are meaningless), and at α = 0 the model
//!   gives the mean of the two slopes, which is neither side's. Inside one orthant — each kinked
//!   coordinate held to one sign — f is smooth, and a kink is a bound. So a point that is not
//!   certified is refitted by *orthant descents*: every kinked coordinate off its kink is kept
//!   on its side, one at its kink goes to the side whose slope descends (or is held at 0 where
//!   neither does: a convex kink), coordinates at 0 are evaluated on their side's slope, and
//!   L-BFGS-B solves the smooth bounded problem. Coordinates that end on the kink are judged
//!   again by their one-sided slopes, and the rounds go on while f falls and the point is not
//!   certified.
//! - **A concave kink splits a basin in two**, one on each side; a descent settles in whichever it
//!   meets first. Where the slice through the minimum falls from α = 0 into the other side, the
//!   other side is searched too (a refit restricted to that side) and the lower minimum kept.
//!   Each such parameter costs one gradient evaluation to detect and one warm refit (with its
//!   orthant descents) to compare;
//!   the refits are capped at [`MAX_SIDE_REFITS`] per round (the steepest first), with a note
//!   when more were due. Published likelihoods have dozens of such kinks (35 in one of 111
//!   parameters), and the better basin can need several flipped together: before the refits,
//!   one greedy pass flips every candidate that lowers f (three evaluations each) and refits
//!   once from there.
//! - **A basin across a kink that the slice does not show.** Where the lower minimum on the
//!   other side needs other parameters to move with the kinked one, the slice through the
//!   minimum rises into that side and the test above misses it. Once per fit, a parameter that
//!   ends near its kink ([`NEAR_KINK_FROM`] to [`NEAR_KINK`]) has its other side searched all
//!   the same, by a refit restricted to that side that is given up from its third iteration
//!   where its own estimate puts it above the best minimum, or where the parameter stays at its
//!   kink held by that side's slope ([`NEAR_ABANDON`], [`NEAR_HELD`]); the nearest first, at
//!   most [`MAX_NEAR_SEARCHES`], with a note when more were due. Where a search finds a lower
//!   minimum the candidates are taken again there: crossing one kink can make another
//!   parameter's other side the lower.

use super::index_mask;
use super::search::{Local, Search};
use crate::Result;
use histfit_seam::{AsyncEvaluator, Descent, DescentRequest};

/// A search of the other side of a kink: the bounds that keep the coordinate on the side
/// searched, the coordinates held at their kink, and the request of its first descent.
struct SidePlan {
    req: DescentRequest,
    lower: Vec<f64>,
    upper: Vec<f64>,
    pinned: Vec<usize>,
}

impl SidePlan {
    /// The bounds of the search.
    fn bounds(&self) -> (&[f64], &[f64]) {
        (&self.lower, &self.upper)
    }
}

/// A kinked coordinate at ±TINY sits on that side of its kink with f unchanged (κ = e^(TINY·c)
/// rounds to 1, Δ = TINY·c vanishes against any nominal).
pub(crate) const TINY: f64 = 1e-150;

/// Coordinates within this of 0 sit at their kink (shared with the devices that settle
/// descents).
pub(crate) use histfit_seam::AT_KINK;

// One-sided slopes (per unit of z) below this do not start a search of the other side: the most
// such a basin can gain is of order slope²/2, far below the 1e-6 in twice_nll fits are held to.
use histfit_seam::kink_rules::SIDE_SLOPE;

/// When a point gets orthant descents, and how many rounds at most (shared with the devices
/// that settle descents).
use histfit_seam::{ORTHANT_PG, ORTHANT_ROUNDS};

// Refits of other kink basins per round.
pub(crate) use histfit_seam::kink_rules::MAX_SIDE_REFITS;

// Kinked coordinates that end within this of their kink (in their own units, α for a
// normsys or histosys) have the other side searched whatever the slice through the minimum
// says: where the lower basin needs other parameters to move with the kinked one, the slice
// rises on that side and only a refit finds it. On `workspace_tHu` under pyhf's codes, toys
// fitted from two nearby starts ended in different basins on 4 of 2000 toys (by up to 1.4e-2 in
// twice_nll, a cross section at −0.088 against +0.144) and on none with this search up to 0.1
// (BENCHMARKS.md, issue 21, session 23); on 10 000 toys 4 were still apart, two of them with
// that cross section 0.11–0.18 from its kink (session 24).
use histfit_seam::kink_rules::NEAR_KINK;

// Closer than this to its kink a parameter is at its kink for the search (its one-sided slopes
// and [`Search::settle_kinks`]'s slice test judge it). From 1e-3 down the slice can still
// mislead: in tHu's toy CLs under pyhf's codes (b ensemble, toy 2534, the conditional fit) the
// GPU's path ended with a b-tagging parameter at −3.9e-4, the CPU's at +4.5e-3 with 28 others
// moved by 2–6e-4, 2.5e-5 lower in twice_nll (BENCHMARKS.md, issue 23, session 25).
use histfit_seam::kink_rules::NEAR_KINK_FROM;

// Searches of the other side near kinks per fit, the nearest first (a note says when more
// were due). tHu's toys often have more kinked parameters 1e-6 to 0.3 from their kink; most
// searches are given up after 4–8 evaluations.
use histfit_seam::kink_rules::MAX_NEAR_SEARCHES;

/// The end of the note that says the near-kink searches were capped.
const NEAR_CAPPED: &str = " (the cap on searches near kinks)";

// A search of the other side near a kink is given up from this iteration on where f minus this
// many times its estimated distance to the minimum is above the best minimum (or where
// [`NEAR_HELD`] says so). The estimate is short where other parameters wait at their kinks
// (L-BFGS-B's steps stop there): on random workspace 51/1181 the winning search stood 15 times
// its estimate above the best minimum at its fourth iteration, so a factor of 4 gave it up.
// Most of these searches still cost 4–8 evaluations (BENCHMARKS.md, issue 21, session 23).
use histfit_seam::kink_rules::NEAR_ABANDON;

// Iterations in a row a searched parameter must sit at its kink, held there by the slope of
// the side searched, before the search is given up: it can leave as the others move.
pub(crate) use histfit_seam::kink_rules::NEAR_HELD;

/// The first-order check of a point: the largest projected gradient component, with one-sided
/// slopes at kinked coordinates that sit at their kink.
#[derive(Debug, Clone)]
pub(crate) struct Certificate {
    pub projected_gradient: f64,
    /// The largest component over the coordinates off their kinks.
    pub smooth: f64,
    /// The largest component over the kinked coordinates (one-sided at their kink).
    pub kinked: f64,
    /// Coordinates at their kink with a side that descends: (coordinate, side ±1, slope).
    pub descents: Vec<(usize, f64, f64)>,
}

impl<E: AsyncEvaluator + ?Sized> Search<'_, E> {
    /// First-order conditions at `z`, one-sided at the kinks.
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
        let g_down = if at.is_empty() {
            self.nll_grad(&zs, &mut g_up).await?;
            g_up.clone()
        } else {
            // Both sides in one step.
            let mut down = zs.clone();
            for &k in &at {
                down[k] = -TINY;
            }
            let mut both = self.nll_grad_many(&[zs, down]).await?;
            let (_, g_down) = both.pop().expect("two points");
            g_up = both.pop().expect("two points").1;
            g_down
        };
        if g_up.iter().chain(&g_down).any(|v| !v.is_finite()) {
            return Ok(Certificate {
                projected_gradient: f64::INFINITY,
                smooth: f64::INFINITY,
                kinked: f64::INFINITY,
                descents: Vec::new(),
            });
        }
        let (mut pg, mut kinked): (f64, f64) = (0.0, 0.0);
        for k in 0..z.len() {
            // Off its kink (the membership test of `at`, without a scan of it per coordinate).
            if !(p.kinks[k] && z[k].abs() <= AT_KINK) {
                let moved = ((z[k] - g_up[k]).clamp(p.lower[k], p.upper[k]) - z[k]).abs();
                pg = pg.max(moved);
                if p.kinks[k] {
                    kinked = kinked.max(moved);
                }
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
        for d in &descents {
            kinked = kinked.max(d.2);
        }
        Ok(Certificate {
            projected_gradient: pg,
            smooth,
            kinked,
            descents,
        })
    }

    /// Orthant descents (see the module docs) from `best` within `bounds`, while its
    /// certificate fails and f falls.
    pub async fn orthant_rounds(
        &mut self,
        mut best: Local,
        bounds: (&[f64], &[f64]),
    ) -> Result<Local> {
        let p = self.p;
        for _ in 0..ORTHANT_ROUNDS {
            if !best.f.is_finite() {
                break;
            }
            let cert = self.certificate(&best.z).await?;
            // Smooth coordinates left above the tolerance by stiff directions are the Newton
            // steps' business (see [`super::polish`]), not a matter of orthants.
            if best.converged && cert.kinked <= ORTHANT_PG {
                break;
            }
            let (mut lower, mut upper) = (bounds.0.to_vec(), bounds.1.to_vec());
            let mut z = best.z.clone();
            let mut side = vec![0.0; z.len()];
            let mut pinned = Vec::new();
            for k in 0..z.len() {
                if !p.kinks[k] {
                    continue;
                }
                side[k] = if z[k].abs() <= AT_KINK {
                    z[k] = 0.0;
                    // The steeper descending side the bounds allow; none: a convex kink.
                    cert.descents
                        .iter()
                        .filter(|d| {
                            d.0 == k && (d.1 > 0.0 && upper[k] > 0.0 || d.1 < 0.0 && lower[k] < 0.0)
                        })
                        .max_by(|a, b| a.2.total_cmp(&b.2))
                        .map_or(0.0, |d| d.1)
                } else {
                    z[k].signum()
                };
                if side[k] > 0.0 {
                    lower[k] = lower[k].max(0.0);
                } else if side[k] < 0.0 {
                    upper[k] = upper[k].min(0.0);
                } else {
                    pinned.push(k);
                }
            }
            self.side = side;
            let r = self.descend_passes(&z, (&lower, &upper), &pinned, 0).await;
            self.side = vec![0.0; z.len()];
            let r = r?;
            let tol = 1e-12 * best.f.abs().max(1.0);
            // A tie replaces the point too, converged or not: the descent moved it onto the
            // kinks it judges, and the certificate taken at the end decides (keeping a
            // converged tie instead was tried: it left a published fit uncertified).
            let lower = r.f < best.f - tol;
            let tie = r.f <= best.f + tol;
            if !(r.f.is_finite() && (lower || tie)) {
                break;
            }
            let unchanged = r.z == best.z;
            best.replace_keeping_compared(r);
            if !lower && unchanged {
                // Nothing gained: the next round would ask for the same orthants.
                break;
            }
        }
        Ok(best)
    }

    /// Kink handling after a descent (see the module docs): orthant descents to a certified
    /// point, then the other side of every concave kink with a slice falling into it is
    /// searched, for a few rounds while that finds lower minima.
    pub async fn settle_kinks(&mut self, best: Local) -> Result<Local> {
        let p = self.p;
        let mut best = self.orthant_rounds(best, (&p.lower, &p.upper)).await?;
        if !best.f.is_finite() {
            return Ok(best);
        }
        // After a greedy flip the candidates it left where they were are carried over (those
        // still on the side they were found on) rather than rescanned: a scan costs a gradient
        // per kinked coordinate, 140 on a 184-parameter ATLAS fit.
        let (mut scan, mut flipped, mut carried) = (true, false, Vec::new());
        for _ in 0..4 {
            let cert = self.certificate(&best.z).await?;
            // Slices are scanned once: a basin found by one refit rarely opens another, and
            // later rounds follow the certificate only.
            let mut candidates: Vec<(usize, f64, f64)> = if scan {
                self.other_sides(&best).await?
            } else {
                std::mem::take(&mut carried)
                    .into_iter()
                    .filter(|c: &(usize, f64, f64)| best.z[c.0] * c.1 < -AT_KINK)
                    .collect()
            };
            scan = false;
            for &(k, side, slope) in &cert.descents {
                if slope > SIDE_SLOPE && !candidates.iter().any(|c| c.0 == k && c.1 == side) {
                    candidates.push((k, side, slope));
                }
            }
            if candidates.is_empty() {
                break;
            }
            candidates.sort_by(|a, b| b.2.total_cmp(&a.2));
            if !flipped && candidates.len() > 1 {
                flipped = true;
                // Where several kinks are concave the better basin may need several of them
                // flipped together, which one refit per kink does not find: first a greedy
                // pass that flips every one that lowers f, then one refit from there.
                let (r, moved) = self.flip_greedily(&best, &candidates).await?;
                if r.better_than(&best) {
                    best.replace_keeping_compared(r);
                    carried = candidates
                        .iter()
                        .copied()
                        .filter(|c| !moved.contains(&c.0))
                        .collect();
                    best.compared.extend(moved);
                    continue;
                }
            }
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
            // Each search's first descent, from `start`, is independent of the others': where
            // the evaluator runs descents whole they are asked for together (one step instead
            // of one per search); the searches go on in order, so the result is the same.
            let plans: Vec<SidePlan> = candidates
                .iter()
                .map(|&(k, side, _)| self.side_plan(&start, k, side))
                .collect();
            let mut firsts = self.firsts_together(&plans).await?;
            for (&(k, _, _), plan) in candidates.iter().zip(&plans) {
                // (Its descent settled where the evaluator settles descents: `side_plan`.)
                let first = self.first_of(&mut firsts, plan).await?;
                let r = self.settled(first, &plan.pinned, plan.bounds()).await?;
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

    /// The fit's lowest minimum (after its starts and their kink settlements) with the other
    /// side of every kinked coordinate [`NEAR_KINK_FROM`] to [`NEAR_KINK`] from its kink
    /// searched (see the module docs), nearest first, at most [`MAX_NEAR_SEARCHES`] in all: a
    /// refit restricted to that side, given up once its own estimate puts the minimum it is
    /// heading for above the best one, or once the parameter is held at its kink
    /// ([`NEAR_ABANDON`]). Where a search finds a lower minimum the candidates are taken again
    /// at that minimum, all but the way back of the parameter that led there: the parameters
    /// near their kinks there are others, and a side searched from an earlier point says little
    /// of this one. For the same reason the sides [`Search::settle_kinks`] searched are not left
    /// out: its point has often moved since (tHu's toy 9440 under pyhf's codes kept the worse
    /// basin that way). Once per fit.
    pub async fn compare_near_kinks(&mut self, mut best: Local) -> Result<Local> {
        let p = self.p;
        if !p.has_kinks() || !best.f.is_finite() {
            return Ok(best);
        }
        // Searches made, and the (coordinate, side) pairs searched from the current best minimum
        // (after a lower one is found its parameters are searched again, all but the way back
        // of the one that led there: a flip of one kinked parameter can make another's other
        // side the lower, as for tHu's toy 389).
        let (mut made, mut searched) = (0, Vec::<(usize, f64)>::new());
        let mut replaced = false;
        loop {
            let pinned = index_mask(best.z.len(), &best.pinned);
            let mut near: Vec<(usize, f64)> = (0..best.z.len())
                .filter(|&k| p.kinks[k] && !pinned[k])
                .map(|k| (k, best.z[k] * p.scale[k]))
                .filter(|&(_, theta)| (NEAR_KINK_FROM..=NEAR_KINK).contains(&theta.abs()))
                // Only where the other side is inside the bounds.
                .filter(|&(k, theta)| match theta < 0.0 {
                    true => p.upper[k] > 0.0,
                    false => p.lower[k] < 0.0,
                })
                .filter(|&(k, theta)| !searched.contains(&(k, -theta.signum())))
                .collect();
            // Nearest first (farthest first missed tHu's toy 282 under the cap).
            near.sort_by(|a, b| a.1.abs().total_cmp(&b.1.abs()));
            let left = MAX_NEAR_SEARCHES - made;
            // The note speaks of the last minimum's candidates only.
            best.notes.retain(|n| !n.ends_with(NEAR_CAPPED));
            if near.len() > left {
                best.notes.push(format!(
                    "{} more kinked parameters end {NEAR_KINK_FROM:e} to {NEAR_KINK} from their \
                     kink than were searched{NEAR_CAPPED}",
                    near.len() - left
                ));
                near.truncate(left);
            }
            let start = best.clone();
            // The searches' first descents, each from `start`, are independent: where the
            // evaluator runs descents whole they are asked for together (one launch instead of
            // one per search), and taken in order as below, so the result is the same.
            let plans: Vec<SidePlan> = near
                .iter()
                .map(|&(k, theta)| self.near_plan(&start, k, -theta.signum()))
                .collect();
            let mut firsts = self.firsts_together(&plans).await?;
            // Where they were, the searches' continuations (each from its own first descent) are
            // asked for together too, settled by the evaluator: one step for all the searches
            // instead of several for each, taken in order as below, so the result is the same
            // (the device also makes those after a lower one, which the CPU never makes).
            let mut rests = match firsts.take() {
                Some(it) => Some(self.near_rests_together(it.collect(), &plans).await?),
                None => None,
            };
            let mut lower = None;
            for ((k, theta), plan) in near.into_iter().zip(plans) {
                let side = -theta.signum();
                searched.push((k, side));
                made += 1;
                best.compared.push(k);
                let found = match rests.as_mut() {
                    Some(it) => match it.next().expect("one result per search") {
                        Some(d) => Some(self.settled(d, &plan.pinned, plan.bounds()).await?),
                        None => None,
                    },
                    None => {
                        let first = self.first_of(&mut firsts, &plan).await?;
                        self.search_near(first, &plan).await?
                    }
                };
                if let Some(r) = found {
                    if r.better_than(&best) {
                        lower = Some((r, k, side));
                        break;
                    }
                }
            }
            let Some((r, k, side)) = lower else { break };
            best.replace_keeping_compared(r);
            replaced = true;
            searched = vec![(k, -side)];
        }
        if replaced {
            // A minimum found with a parameter kept to one side may sit at that kink with the
            // first side descending: the orthant descents under the whole bounds settle it.
            best = self.orthant_rounds(best, (&p.lower, &p.upper)).await?;
        }
        best.compared.sort_unstable();
        best.compared.dedup();
        Ok(best)
    }

    /// The search of side `side` of coordinate `k`'s kink from the minimum `start` mirrored onto
    /// it: its bounds and the request of its first descent, given up as above `start`
    /// ([`NEAR_ABANDON`]).
    fn near_plan(&mut self, start: &Local, k: usize, side: f64) -> SidePlan {
        let (mut z, mut lower, mut upper) = self.other_side(&start.z, k, side);
        // Held at their kink as in the refit below, so that the run that decides whether to
        // go on solves the same problem.
        for &j in &start.pinned {
            (lower[j], upper[j], z[j]) = (0.0, 0.0, 0.0);
        }
        // (The half of the 1e-6 in twice_nll that `better_than` asks of a lower minimum.)
        let ceiling = start.f + 5e-7;
        let req = self.request_below(&z, (&lower, &upper), (k, side), ceiling, NEAR_ABANDON);
        SidePlan {
            req,
            lower,
            upper,
            pinned: start.pinned.clone(),
        }
    }

    /// The minimum of a search near a kink ([`Self::near_plan`]) whose first descent is
    /// `first`, or `None` where that descent was given up.
    async fn search_near(&mut self, first: Descent, plan: &SidePlan) -> Result<Option<Local>> {
        if first.given_up {
            return Ok(None);
        }
        let r = self.descend_settled(&first.z, plan.bounds(), &plan.pinned);
        Ok(Some(r.await?))
    }

    /// The rest of a search near a kink after its first descent `first` (not given up): a
    /// descent with restarts from its end within the search's bounds, settled at its kinks.
    fn near_rest(&self, first: &Descent, plan: &SidePlan) -> DescentRequest {
        self.settled_request(&first.z, plan.bounds(), &plan.pinned)
    }

    /// The rests ([`Self::near_rest`]) of the searches `plans` whose first descents `firsts`
    /// were not given up, asked for together: per search, its descent (`None`: given up).
    async fn near_rests_together(
        &mut self,
        firsts: Vec<Descent>,
        plans: &[SidePlan],
    ) -> Result<std::vec::IntoIter<Option<Descent>>> {
        let reqs: Vec<DescentRequest> = firsts
            .iter()
            .zip(plans)
            .filter(|(first, _)| !first.given_up)
            .map(|(first, plan)| self.near_rest(first, plan))
            .collect();
        let mut rests = self.run_all(&reqs).await?.into_iter();
        let out: Vec<Option<Descent>> = firsts
            .iter()
            .map(|first| match first.given_up {
                true => None,
                false => Some(rests.next().expect("one descent per search")),
            })
            .collect();
        Ok(out.into_iter())
    }

    /// From `from`, each candidate coordinate (steepest first) moved across its kink to the
    /// mirror of its value, or half or twice that, whichever is lowest, where that lowers f
    /// given the moves already made (three evaluations per candidate); then orthant descents
    /// from the point reached. Returns that minimum and the coordinates flipped.
    async fn flip_greedily(
        &mut self,
        from: &Local,
        candidates: &[(usize, f64, f64)],
    ) -> Result<(Local, Vec<usize>)> {
        let p = self.p;
        let (mut z, mut f) = (from.z.clone(), from.f);
        let mut flipped = Vec::new();
        for &(k, side, _) in candidates {
            if flipped.contains(&k) {
                continue;
            }
            let m = from.z[k].abs().max(1e-3);
            let mut best = (f - 1e-12 * f.abs().max(1.0), z[k]);
            // The three trials in one step.
            let trials: Vec<Vec<f64>> = [m, 0.5 * m, 2.0 * m]
                .iter()
                .map(|&t| {
                    let mut trial = z.clone();
                    trial[k] = (side * t).clamp(p.lower[k], p.upper[k]);
                    trial
                })
                .collect();
            for (trial, ft) in trials.iter().zip(self.nll_many(&trials).await?) {
                if ft < best.0 {
                    best = (ft, trial[k]);
                }
            }
            if best.1 != z[k] {
                (f, z[k]) = best;
                flipped.push(k);
            }
        }
        if flipped.is_empty() {
            return Ok((from.clone(), flipped));
        }
        // Orthant descents keep each flipped coordinate on its new side.
        let at = Local {
            z,
            f,
            converged: false,
            reason: "stopped after flipping kinked parameters across their kinks".into(),
            pinned: from
                .pinned
                .iter()
                .copied()
                .filter(|j| !flipped.contains(j))
                .collect(),
            compared: Vec::new(),
            notes: Vec::new(),
        };
        Ok((
            self.orthant_rounds(at, (&p.lower, &p.upper)).await?,
            flipped,
        ))
    }

    /// Kinked coordinates off their kink whose slice through `at` falls from α = 0 into the
    /// other side: (coordinate, side, slope into it).
    async fn other_sides(&mut self, at: &Local) -> Result<Vec<(usize, f64, f64)>> {
        let p = self.p;
        let pinned = index_mask(at.z.len(), &at.pinned);
        let sides: Vec<(usize, f64)> = (0..at.z.len())
            .filter(|&k| p.kinks[k] && at.z[k].abs() > AT_KINK && !pinned[k])
            .map(|k| (k, -at.z[k].signum()))
            .filter(|&(k, side)| {
                !(side > 0.0 && p.upper[k] <= 0.0 || side < 0.0 && p.lower[k] >= 0.0)
            })
            .collect();
        // Each slope from the same minimum: all of them in one step.
        let points: Vec<Vec<f64>> = sides
            .iter()
            .map(|&(k, side)| {
                let mut zk = at.z.clone();
                zk[k] = side * TINY;
                zk
            })
            .collect();
        let slopes = self.nll_grad_many(&points).await?;
        Ok(sides
            .into_iter()
            .zip(slopes)
            .map(|((k, side), (f0, g))| (k, side, f0, -side * g[k]))
            .filter(|&(_, _, f0, slope)| f0.is_finite() && slope > SIDE_SLOPE)
            .map(|(k, side, _, slope)| (k, side, slope))
            .collect())
    }

    /// The bounds that keep coordinate `k` on the side `side` (±1) of its kink, and `z` with
    /// that coordinate mirrored onto it (at least 1e-3 from the kink).
    fn other_side(&self, z: &[f64], k: usize, side: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let p = self.p;
        let (mut lower, mut upper) = (p.lower.clone(), p.upper.clone());
        if side > 0.0 {
            lower[k] = lower[k].max(0.0);
        } else {
            upper[k] = upper[k].min(0.0);
        }
        let mut z = z.to_vec();
        z[k] = (side * z[k].abs().max(1e-3)).clamp(lower[k], upper[k]);
        (z, lower, upper)
    }

    /// The search of the minimum on one side of coordinate `k`'s kink, from `from` mirrored
    /// onto that side: its bounds, the coordinates it holds at their kink and the request of its
    /// descent (then orthant rounds within those bounds).
    fn side_plan(&self, from: &Local, k: usize, side: f64) -> SidePlan {
        let (z, lower, upper) = self.other_side(&from.z, k, side);
        let pinned: Vec<usize> = from.pinned.iter().copied().filter(|&j| j != k).collect();
        let req = self.settled_request(&z, (&lower, &upper), &pinned);
        SidePlan {
            req,
            lower,
            upper,
            pinned,
        }
    }

    /// The first descents of independent searches, asked for together where the evaluator runs
    /// descents whole and there are several (`None`: each is asked for in its turn).
    async fn firsts_together(
        &mut self,
        plans: &[SidePlan],
    ) -> Result<Option<std::vec::IntoIter<Descent>>> {
        if !(self.descents_together() && plans.len() > 1) {
            return Ok(None);
        }
        let reqs: Vec<DescentRequest> = plans.iter().map(|p| p.req.clone()).collect();
        Ok(Some(self.run_all(&reqs).await?.into_iter()))
    }

    /// A search's first descent: the next of those asked for together, else asked for now.
    async fn first_of(
        &mut self,
        firsts: &mut Option<std::vec::IntoIter<Descent>>,
        plan: &SidePlan,
    ) -> Result<Descent> {
        match firsts.as_mut() {
            Some(it) => Ok(it.next().expect("one descent per search")),
            None => self.run_one(&plan.req).await,
        }
    }
}

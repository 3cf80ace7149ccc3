//! Newton steps that finish a minimum whose gradient L-BFGS-B cannot resolve.
//!
//! L-BFGS-B's line search compares values of f, which are exact to about 1e-12 on a likelihood
//! of a few hundred; along a direction of curvature c it can then place the minimum only to a
//! gradient of about √(2c·1e-12). In stiff directions — an empty bin held at λ = 0 by
//! [`histfit_seam::EMPTY_BIN_WALL`], a normalisation of thousands of events — that leaves
//! gradients of 1e-3–1e-2 at a point whose f is within 1e-12 of the minimum. Newton steps work
//! on the gradient alone: the system H v = −g solved by conjugate gradients, each Hessian-vector
//! product a forward difference of the analytic gradient (a step of 1e-8, small against the
//! width of the empty-bin wall); a step (or a quarter, a sixteenth … of it) is kept only where it lowers
//! f, or shrinks the gradient without raising f beyond its rounding.
//!
//! The same steps serve precision in flat directions: a certified minimum (projected gradient
//! ≤ [`CERTIFY_PG`]) may still stop a few 1e-6 in f, and a weakly constrained POI up to 1e-3,
//! short of the minimum; above [`POLISH_PG`] the fit takes one more round of them (`sharpen`).

use super::index_mask;
use super::kinks::Certificate;
use super::search::{Local, Search};
use super::{CERTIFY_PG, POLISH_PG};
use crate::Result;
use histfit_seam::AsyncEvaluator;

/// A search whose line search found no decrease (see [`Search::finish`]).
pub(crate) fn stalled(b: &Local) -> bool {
    !b.converged && b.f.is_finite() && b.reason.starts_with("line search failed")
}

/// Whether no kinked coordinate at its kink has a side that descends beyond the certificate.
fn kinks_certified(cert: &Certificate) -> bool {
    cert.descents.iter().all(|d| d.2 <= CERTIFY_PG)
}

/// Whether a point passes the fit's first-order check (see [`CERTIFY_PG`]).
fn certified(cert: &Certificate) -> bool {
    cert.projected_gradient <= CERTIFY_PG && kinks_certified(cert)
}

/// Says in the fit's reason (once) that Newton steps moved its minimum.
fn note_newton(best: &mut Local) {
    if !best.reason.ends_with("(finished by Newton steps)") {
        best.reason = format!("{} (finished by Newton steps)", best.reason);
    }
}

impl<E: AsyncEvaluator + ?Sized> Search<'_, E> {
    /// Finishes the fit's lowest minimum and returns its certificate (None where f is not
    /// finite). A converged search whose gradient is still above the tolerance off the kinks has
    /// met the limit of f's resolution in a stiff direction: it is finished by Newton steps, and
    /// where those end across a change of curvature, descended and finished again. A search
    /// whose line search found no decrease is stopped by the same limit more often than not (a
    /// direction of curvature 1e11 — a bin of 435 events whose constraint is known to 0.1 % — leaves
    /// steepest descent no step f can resolve): it gets the same Newton steps and descent.
    /// Where a round's Newton steps leave a kinked coordinate at its kink with a side that
    /// descends, the next round's descent settles it. A round's descent that ends at a certified
    /// point ends the rounds: along an empty bin's curved wall a Newton step that lowers f
    /// leaves the wall on its far side (f is linear there, its gradient the wall's normal), and
    /// rounds that went on from such points ended uncertified, below a certified point passed
    /// on the way (1Lbb toys 800 and 826 under pyhf's codes). Last, a certified point above
    /// [`POLISH_PG`] is sharpened (see [`Self::sharpen`]), which keeps Newton steps only where
    /// the point stays certified. The resident GPU kernels make the first round only: a fit that
    /// needs more (a stalled search, a point their Newton round leaves uncertified) comes back
    /// uncertified and is fitted again on the host, since along such walls two devices'
    /// roundings end their rounds up to 1e-5 apart in twice_nll (1Lbb toy 826).
    pub async fn finish(&mut self, best: &mut Local) -> Result<Option<Certificate>> {
        if !best.f.is_finite() {
            return Ok(None);
        }
        let mut cert = self.certificate(&best.z).await?;
        for round in 0..5 {
            // A round's polish that certifies the point ends the rounds, as its descent does
            // (below), whether the point came from a converged or a stalled descent.
            if round > 0 && certified(&cert) {
                break;
            }
            let kink_ok = kinks_certified(&cert);
            // Newton steps move only the coordinates off their kinks, which can tilt the
            // one-sided slopes of one held at its kink until a side descends: a fresh
            // descent's orthant rounds settle it, and the rounds go on (public 1Lbb toys under
            // pyhf's codes: 4 of 1 000 fits stopped so, session 43 — toy 351, a side
            // descending with slope 0.027 per unit). At round 0 the kinks are the search's
            // own, already settled by its orthant rounds.
            let unsettled = round > 0 && !kink_ok;
            if !((best.converged && cert.smooth > CERTIFY_PG || stalled(best)) && kink_ok)
                && !unsettled
            {
                break;
            }
            let z_before = best.z.clone();
            if round > 0 || stalled(best) {
                let kept = self.descend_again(best).await?;
                // Newton steps cannot settle a kink (they leave its coordinate where it is).
                if unsettled && !kept {
                    break;
                }
                if kept {
                    cert = self.certificate(&best.z).await?;
                    if certified(&cert) {
                        break;
                    }
                }
            }
            let f_before = best.f;
            self.polish(best).await?;
            if best.f != f_before {
                note_newton(best);
            }
            if best.z == z_before {
                break;
            }
            cert = self.certificate(&best.z).await?;
        }
        self.sharpen(best, &mut cert).await?;
        Ok(Some(cert))
    }

    /// A certified minimum whose projected gradient is still above [`POLISH_PG`] gets one more
    /// round of Newton steps, kept only where the point stays certified. In flat directions the
    /// certificate's 1e-3 leaves f up to ~1e-6 and a poorly constrained POI up to ~1e-3 short of
    /// the minimum, and two fits of the same data (the CPU's and a device's, whose sums round
    /// differently) stop at different such points; Newton steps take both to the minimum.
    /// Where the steps lower f but end across a change of curvature (an empty bin's wall: the
    /// gradient there is far above the certificate), a fresh descent from that lower point and
    /// one more round finish it, as `finish`'s rounds do; where that is not certified either,
    /// the point stays as it was (found on public 1Lbb toys in curvature units: 2 of 300 fits
    /// stopped 1e-5–2e-5 in twice_nll short, 0 of 1000 with the descent). Fits that stop below
    /// [`POLISH_PG`] (most; every `workspace_tHu` toy) do not pay for it. The resident kernel's
    /// `fit_one` makes the Newton round, not the descent (a third inlined L-BFGS-B doubled the
    /// driver's first compile of the kernel): its fits left above [`POLISH_PG`] are fitted again
    /// on the host ([`super::device_fit_certified`]).
    async fn sharpen(&mut self, best: &mut Local, cert: &mut Certificate) -> Result<()> {
        let pg = cert.projected_gradient;
        // In curvature units the certificate already puts each parameter within ~1e-3 of its
        // uncertainty of the minimum where the parameters are not strongly correlated
        // (`ParameterSpace::curvature_units`), and only event-level models (fitted on the
        // host, where no device's Newton round must be matched) have them: the round would
        // cost a third of a fit's evaluations for little (1M events: 28 of 46).
        if self.p.curvature_units {
            return Ok(());
        }
        if !((best.converged || stalled(best))
            && kinks_certified(cert)
            && pg > POLISH_PG
            && pg <= CERTIFY_PG)
        {
            return Ok(());
        }
        let before = best.clone();
        self.polish(best).await?;
        if best.z == before.z {
            return Ok(());
        }
        let mut again = self.certificate(&best.z).await?;
        if !certified(&again) && best.f < before.f && self.descend_again(best).await? {
            self.polish(best).await?;
            again = self.certificate(&best.z).await?;
        }
        if certified(&again) {
            *cert = again;
            if best.f != before.f {
                note_newton(best);
            }
        } else {
            *best = before;
        }
        Ok(())
    }

    /// A fresh descent from `best` (with the orthant rounds on a kinked model), taken where it
    /// converges, or its line search stops, no higher (the certificate then judges the point:
    /// along an empty bin's curved wall a descent often stops so below where it began, with a
    /// projected gradient far inside the certificate — 1Lbb toys under pyhf's codes, session
    /// 46); returns whether it was.
    async fn descend_again(&mut self, best: &mut Local) -> Result<bool> {
        let p = self.p;
        let bounds = (&p.lower[..], &p.upper[..]);
        let again = if p.has_kinks() {
            self.descend_settled(&best.z, bounds, &best.pinned).await?
        } else {
            self.descend(&best.z, bounds, &best.pinned).await?
        };
        let kept = (again.converged || stalled(&again))
            && again.f <= best.f + 1e-12 * best.f.abs().max(1.0);
        if kept {
            best.replace_keeping_compared(again);
        }
        Ok(kept)
    }

    /// Up to six Newton steps from `at` over the coordinates off their bounds, kinks and pins
    /// (those pinned are at their kink): made whole by an evaluator that finishes descents
    /// ([`histfit_seam::DescentRequest::polish`]), else here, one evaluation after another.
    pub async fn polish(&mut self, at: &mut Local) -> Result<()> {
        let p = self.p;
        if self.eval.finishes_descents() {
            let mut req = self.request(&at.z, (&p.lower, &p.upper), 0, None);
            req.polish = Some(at.f);
            let d = self.run_one(&req).await?;
            (at.z, at.f) = (d.z, d.f);
            return Ok(());
        }
        let margin = 1e-5;
        let pinned = index_mask(at.z.len(), &at.pinned);
        let active: Vec<usize> = (0..at.z.len())
            .filter(|&k| {
                at.z[k] > p.lower[k] + margin
                    && at.z[k] < p.upper[k] - margin
                    && !(p.kinks[k] && at.z[k].abs() <= margin)
                    && !pinned[k]
            })
            .collect();
        if active.is_empty() {
            return Ok(());
        }
        let m = at.z.len();
        let mut g = vec![0.0; m];
        let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let pick = |g: &[f64]| -> Vec<f64> { active.iter().map(|&k| g[k]).collect() };
        self.nll_grad(&at.z, &mut g).await?;
        let mut g0 = pick(&g);
        // Steps are judged against the f polishing started from, so rounding cannot let f creep up.
        let f_start = at.f;
        for _ in 0..6 {
            let g0_norm = norm(&g0);
            if !g0_norm.is_finite() || g0_norm <= 0.0 {
                break;
            }
            let mut v = vec![0.0; active.len()];
            let mut r: Vec<f64> = g0.iter().map(|a| -a).collect();
            let mut d = r.clone();
            let mut rr = dot(&r, &r);
            let mut zp = at.z.clone();
            for _ in 0..2 * active.len().min(50) {
                let eps = 1e-8 / d.iter().fold(0.0f64, |a, b| a.max(b.abs()));
                for (j, &k) in active.iter().enumerate() {
                    zp[k] = at.z[k] + eps * d[j];
                }
                self.nll_grad(&zp, &mut g).await?;
                let hd: Vec<f64> = pick(&g)
                    .iter()
                    .zip(&g0)
                    .map(|(a, b)| (a - b) / eps)
                    .collect();
                let dhd = dot(&d, &hd);
                if !dhd.is_finite() || dhd <= 0.0 {
                    break;
                }
                let alpha = rr / dhd;
                for j in 0..v.len() {
                    v[j] += alpha * d[j];
                    r[j] -= alpha * hd[j];
                }
                let rr_new = dot(&r, &r);
                if rr_new.sqrt() <= 1e-6 * g0_norm {
                    break;
                }
                for j in 0..d.len() {
                    d[j] = r[j] + rr_new / rr * d[j];
                }
                rr = rr_new;
            }
            if v.iter().all(|&a| a == 0.0) {
                break;
            }
            // The full step, else shorter ones: past a change of curvature (an empty bin's
            // wall) the quadratic model overshoots.
            let noise = 1e-12 * at.f.abs().max(1.0);
            let mut taken = None;
            let mut t = 1.0;
            for _ in 0..8 {
                let mut zn = at.z.clone();
                for (j, &k) in active.iter().enumerate() {
                    zn[k] = (at.z[k] + t * v[j]).clamp(p.lower[k], p.upper[k]);
                }
                let fn_ = self.nll_grad(&zn, &mut g).await?;
                let gn = pick(&g);
                let no_higher = fn_ <= at.f + noise && fn_ <= f_start + noise;
                if fn_ < at.f - noise || (no_higher && norm(&gn) < 0.5 * g0_norm) {
                    taken = Some((zn, fn_, gn));
                    break;
                }
                t *= 0.25;
            }
            let Some((zn, fn_, gn)) = taken else { break };
            at.z = zn;
            at.f = fn_;
            g0 = gn;
        }
        Ok(())
    }
}

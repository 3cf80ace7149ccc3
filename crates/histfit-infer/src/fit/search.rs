//! The search for a minimum from one start: L-BFGS-B in scaled coordinates — first on the data's
//! empty bins continued over wider walls (`histfit_seam::SOFT_EMPTY_BIN_WALLS`, where a main
//! bin is empty), then on the data's own —, restarted with fresh curvature memory where kinks
//! can stall it, a probe of the saddles it cannot see (coordinates
//! with an exactly zero gradient it never moved), then the kink checks of [`super::kinks`]. Every
//! evaluation goes through [`Search`], which counts them.

use super::problem::Problem;
use crate::Result;
use histfit_seam::{
    AsyncEvaluator, Dataset, Descent, DescentRequest, DescentSpace, Settle, Watch,
    SOFT_EMPTY_BIN_WALLS as SOFT_WALLS,
};
use std::sync::Arc;

// The probe of [`Search::leave_saddle`], in units of a coordinate's prior width: small enough
// to stay inside the basin a saddle falls into, large enough that f's fall there (of order
// curvature·step²/2) stands far above its rounding.
use histfit_seam::kink_rules::SADDLE_STEP;

/// The dataset a search evaluates now: `data`, or its copy `soft[k]` with a wider empty-bin wall
/// during the first descents (a free function, so that the evaluator can be borrowed beside it).
fn stage_data<'d>(data: &'d Dataset, soft: &'d [Dataset], stage: Option<usize>) -> &'d Dataset {
    stage.map_or(data, |k| &soft[k])
}

/// A minimum found from one start (or where the search stopped).
#[derive(Debug, Clone)]
pub(crate) struct Local {
    pub z: Vec<f64>,
    pub f: f64,
    pub converged: bool,
    pub reason: String,
    /// Optimizer coordinates held at their kink (α = 0) in this minimum.
    pub pinned: Vec<usize>,
    /// Optimizer coordinates whose other kink basin was searched.
    pub compared: Vec<usize>,
    /// What the search of this minimum capped (reported only if this minimum is the answer).
    pub notes: Vec<String>,
}

impl Local {
    /// Whether `self` is a better answer than `other`. A finite f beats a non-finite one. A
    /// converged minimum beats a stopped search unless the search stopped lower by more than
    /// the 1e-6 in twice_nll fits are held to (then the converged point is known not to be the
    /// lowest, and the lower one is kept — reported as not converged unless a later search
    /// from it converges). Otherwise the lower f wins by more than f's rounding.
    pub fn better_than(&self, other: &Local) -> bool {
        match (self.f.is_finite(), other.f.is_finite()) {
            (true, false) => return true,
            (false, _) => return false,
            (true, true) => {}
        }
        if self.converged != other.converged {
            return if self.converged {
                self.f <= other.f + 5e-7
            } else {
                self.f < other.f - 5e-7
            };
        }
        self.f < other.f - 1e-12 * other.f.abs().max(1.0)
    }

    /// Takes `other`'s point, keeping the record of which kink sides were searched and why.
    pub fn replace_keeping_compared(&mut self, other: Local) {
        let compared = std::mem::take(&mut self.compared);
        let notes = std::mem::take(&mut self.notes);
        *self = other;
        self.compared = compared;
        self.notes = notes;
    }
}

/// One fit's evaluator, data and problem, with its evaluation and iteration counts and the
/// notes that end up in the result's warnings.
pub(crate) struct Search<'a, E: AsyncEvaluator + ?Sized> {
    pub eval: &'a mut E,
    pub data: &'a Dataset,
    pub p: &'a Problem,
    pub iterations: usize,
    pub evaluations: usize,
    pub notes: Vec<String>,
    /// During an orthant descent (see [`super::kinks`]): the side (±1, else 0) each kinked
    /// coordinate is held to. A coordinate exactly at 0 is evaluated at ±1e-150 on that side,
    /// so the gradient is the one-sided slope of its orthant, not the mean of both sides the
    /// model gives at 0.
    pub side: Vec<f64>,
    /// The fit's coordinates as its descents state them.
    descent_space: Arc<DescentSpace>,
    x: Vec<f64>,
    grad: Vec<f64>,
    /// `data` with the walls of [`SOFT_WALLS`] (made on first use), and which of them
    /// evaluations use now (`None`: `data` itself).
    soft: Vec<Dataset>,
    stage: Option<usize>,
}

impl<'a, E: AsyncEvaluator + ?Sized> Search<'a, E> {
    pub fn new(eval: &'a mut E, data: &'a Dataset, p: &'a Problem) -> Self {
        let n = p.n();
        Search {
            eval,
            data,
            p,
            iterations: 0,
            evaluations: 0,
            notes: Vec::new(),
            side: vec![0.0; p.free.len()],
            descent_space: Arc::new(DescentSpace {
                free: p.free.clone(),
                scale: p.scale.clone(),
                held: p.start.clone(),
                kinks: p.kinks.clone(),
                lower: p.lower.clone(),
                upper: p.upper.clone(),
                settings: super::resident_settings(&p.options),
            }),
            x: p.start.clone(),
            grad: vec![0.0; n],
            soft: Vec::new(),
            stage: None,
        }
    }

    /// The model's parameters at `z`, with coordinates at 0 moved onto their orthant's side.
    fn place(&mut self, z: &[f64]) {
        super::descent::place(&self.p.free, &self.p.scale, &self.side, z, &mut self.x);
    }

    /// −ln L at `z`.
    pub async fn nll(&mut self, z: &[f64]) -> Result<f64> {
        self.place(z);
        self.evaluations += 1;
        let data = stage_data(self.data, &self.soft, self.stage);
        Ok(self.eval.nll(&self.x, data).await?)
    }

    /// The parameters at each of `zs`, one whole vector after the other.
    fn place_all(&mut self, zs: &[Vec<f64>]) -> Vec<f64> {
        let mut params = Vec::with_capacity(zs.len() * self.x.len());
        for z in zs {
            self.place(z);
            params.extend_from_slice(&self.x);
        }
        self.evaluations += zs.len();
        params
    }

    /// −ln L at each of the independent points `zs` (one step of a batch evaluator).
    pub async fn nll_many(&mut self, zs: &[Vec<f64>]) -> Result<Vec<f64>> {
        let params = self.place_all(zs);
        let mut f = vec![0.0; zs.len()];
        let data = stage_data(self.data, &self.soft, self.stage);
        self.eval.nll_many(&params, data, &mut f).await?;
        Ok(f)
    }

    /// −ln L and its gradient with respect to z at each of the independent points `zs` (one
    /// step of a batch evaluator).
    pub async fn nll_grad_many(&mut self, zs: &[Vec<f64>]) -> Result<Vec<(f64, Vec<f64>)>> {
        let params = self.place_all(zs);
        let n = self.x.len();
        let (mut f, mut g) = (vec![0.0; zs.len()], vec![0.0; zs.len() * n]);
        let data = stage_data(self.data, &self.soft, self.stage);
        self.eval
            .nll_grad_many(&params, data, &mut f, &mut g)
            .await?;
        let p = self.p;
        Ok(f.into_iter()
            .enumerate()
            .map(|(j, v)| {
                let gx = &g[j * n..(j + 1) * n];
                let gz = p
                    .free
                    .iter()
                    .enumerate()
                    .map(|(k, &i)| gx[i] * p.scale[k])
                    .collect();
                (v, gz)
            })
            .collect())
    }

    /// −ln L at `z` and its gradient with respect to z.
    pub async fn nll_grad(&mut self, z: &[f64], gz: &mut [f64]) -> Result<f64> {
        self.place(z);
        self.evaluations += 1;
        let data = stage_data(self.data, &self.soft, self.stage);
        let f = self.eval.nll_grad(&self.x, data, &mut self.grad).await?;
        for (k, &i) in self.p.free.iter().enumerate() {
            gz[k] = self.grad[i] * self.p.scale[k];
        }
        Ok(f)
    }

    /// The request of one descent from `z0` within `lower`..`upper` (a coordinate with equal
    /// bounds is held there; see [`DescentRequest`]) with the kinked coordinates kept to
    /// `self.side`.
    pub fn request(
        &self,
        z0: &[f64],
        (lower, upper): (&[f64], &[f64]),
        passes: usize,
        watch: Option<Watch>,
    ) -> DescentRequest {
        DescentRequest {
            space: self.descent_space.clone(),
            z0: z0.to_vec(),
            lower: lower.to_vec(),
            upper: upper.to_vec(),
            side: self.side.clone(),
            passes,
            watch,
            settle: None,
            polish: None,
        }
    }

    /// `req` (a descent within `bounds` with the coordinates `pinned` held at their kink)
    /// asking to be settled at its kinks within `bounds`, where the evaluator settles descents
    /// ([`AsyncEvaluator::finishes_descents`]); as it is elsewhere ([`Self::settled`] then makes
    /// the rounds).
    pub fn settling(
        &self,
        mut req: DescentRequest,
        (lower, upper): (&[f64], &[f64]),
        pinned: &[usize],
    ) -> DescentRequest {
        if self.eval.finishes_descents() {
            req.settle = Some(Settle {
                lower: lower.to_vec(),
                upper: upper.to_vec(),
                pinned: pinned.to_vec(),
            });
        }
        req
    }

    /// The minimum a descent of [`Self::settling`] leads to: its end where the evaluator settled
    /// it, else its end settled here ([`Self::orthant_rounds`] within `bounds`).
    pub async fn settled(
        &mut self,
        d: Descent,
        pinned: &[usize],
        bounds: (&[f64], &[f64]),
    ) -> Result<Local> {
        match d.pinned.clone() {
            Some(at_kink) => Ok(Self::local_of(d, &at_kink)),
            None => {
                let r = Self::local_of(d, pinned);
                self.orthant_rounds(r, bounds).await
            }
        }
    }

    /// Descents `reqs` on the data of the current stage, each from its own start: run whole by
    /// the evaluator where it offers that (a device: all of them in one batch), else here step
    /// by step ([`super::descent::on_host`]), in order.
    pub async fn run_all(&mut self, reqs: &[DescentRequest]) -> Result<Vec<Descent>> {
        if reqs.is_empty() {
            return Ok(Vec::new());
        }
        let data = stage_data(self.data, &self.soft, self.stage);
        let out = if self.eval.offers_descents() {
            let v = self.eval.descents(reqs, data).await?;
            if v.len() != reqs.len() {
                return Err(crate::InferError::Request(format!(
                    "the evaluator returned {} descents for {}",
                    v.len(),
                    reqs.len()
                )));
            }
            v
        } else {
            let mut v = Vec::with_capacity(reqs.len());
            for req in reqs {
                v.push(super::descent::on_host(self.eval, data, req).await?);
            }
            v
        };
        for d in &out {
            self.iterations += d.iterations;
            self.evaluations += d.evaluations;
        }
        Ok(out)
    }

    /// One descent (see [`Self::request`] and [`Self::run_all`]).
    pub async fn run(
        &mut self,
        z0: &[f64],
        bounds: (&[f64], &[f64]),
        passes: usize,
        watch: Option<Watch>,
    ) -> Result<Descent> {
        let req = self.request(z0, bounds, passes, watch);
        self.run_one(&req).await
    }

    /// The one descent `req` (see [`Self::run_all`]).
    pub async fn run_one(&mut self, req: &DescentRequest) -> Result<Descent> {
        let mut v = self.run_all(std::slice::from_ref(req)).await?;
        Ok(v.pop().expect("one descent asked, one returned"))
    }

    /// Whether the evaluator runs descents whole, so that independent ones are best asked
    /// together ([`Self::run_all`]).
    pub fn descents_together(&self) -> bool {
        self.eval.offers_descents()
    }

    /// The request of a descent with coordinate `k` kept to the side `side` (±1) of its kink
    /// (`lower`/`upper` end at 0 there; at 0 it is evaluated on that side's slope), given up
    /// from iteration `after` on where its own estimate puts the minimum it is heading
    /// for above `ceiling` (f − `factor`·EDM above it), or where coordinate `k` has sat at its
    /// kink, held there by the searched side's slope, for [`super::kinks::NEAR_HELD`]
    /// iterations in a row: a minimum with it there belongs to the side the fit started on
    /// too, whose best minimum is known.
    pub fn request_below(
        &mut self,
        z0: &[f64],
        bounds: (&[f64], &[f64]),
        (k, side): (usize, f64),
        ceiling: f64,
        (after, factor): (usize, f64),
    ) -> DescentRequest {
        let watch = Watch {
            k,
            ceiling,
            after,
            factor,
            held: super::kinks::NEAR_HELD,
        };
        self.side[k] = side;
        let req = self.request(z0, bounds, 0, Some(watch));
        self.side[k] = 0.0;
        req
    }

    /// L-BFGS-B from `z0` with the coordinates in `pinned` held at 0 and the bounds given,
    /// restarted from its minimum with fresh curvature memory until a pass gains nothing where
    /// the model has kinks (a stale quasi-Newton model can stall a little early at a kink;
    /// smooth models do not need it).
    pub async fn descend(
        &mut self,
        z0: &[f64],
        bounds: (&[f64], &[f64]),
        pinned: &[usize],
    ) -> Result<Local> {
        let passes = self.passes();
        self.descend_passes(z0, bounds, pinned, passes).await
    }

    /// [`Self::descend`] with a given number of restarts.
    pub async fn descend_passes(
        &mut self,
        z0: &[f64],
        bounds: (&[f64], &[f64]),
        pinned: &[usize],
        passes: usize,
    ) -> Result<Local> {
        let req = self.descend_request(z0, bounds, pinned, passes);
        let d = self.run_one(&req).await?;
        Ok(Self::local_of(d, pinned))
    }

    /// [`Self::descend`] settled at its kinks within `bounds` ([`Self::orthant_rounds`]).
    pub async fn descend_settled(
        &mut self,
        z0: &[f64],
        bounds: (&[f64], &[f64]),
        pinned: &[usize],
    ) -> Result<Local> {
        let req = self.settled_request(z0, bounds, pinned);
        let d = self.run_one(&req).await?;
        self.settled(d, pinned, bounds).await
    }

    /// The request of [`Self::descend_settled`] (settled by the evaluator where it finishes
    /// descents; [`Self::settled`] settles its end otherwise).
    pub fn settled_request(
        &self,
        z0: &[f64],
        bounds: (&[f64], &[f64]),
        pinned: &[usize],
    ) -> DescentRequest {
        let req = self.descend_request(z0, bounds, pinned, self.passes());
        self.settling(req, bounds, pinned)
    }

    /// The request of [`Self::descend_passes`]: the coordinates in `pinned` held at 0.
    pub fn descend_request(
        &self,
        z0: &[f64],
        bounds: (&[f64], &[f64]),
        pinned: &[usize],
        passes: usize,
    ) -> DescentRequest {
        let (mut lower, mut upper) = (bounds.0.to_vec(), bounds.1.to_vec());
        let mut z = z0.to_vec();
        for &k in pinned {
            (lower[k], upper[k], z[k]) = (0.0, 0.0, 0.0);
        }
        self.request(&z, (&lower, &upper), passes, None)
    }

    /// The restarts [`Self::descend`] makes.
    pub fn passes(&self) -> usize {
        if self.p.has_kinks() {
            4
        } else {
            0
        }
    }

    /// A descent's end as a minimum of the search, with the coordinates it held at their kink.
    pub fn local_of(d: Descent, pinned: &[usize]) -> Local {
        Local {
            z: d.z,
            f: d.f,
            converged: d.converged,
            reason: d.reason,
            pinned: pinned.to_vec(),
            compared: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The best minimum reachable from `z0`: descents on the wider empty-bin walls where the
    /// data have an empty bin, a descent on the data's own, then the kink checks where the model
    /// has kinks.
    pub async fn local_minimum(&mut self, z0: &[f64]) -> Result<Local> {
        let p = self.p;
        let z = self.soft_descents(z0).await?;
        let local = self.descend(&z, (&p.lower, &p.upper), &[]).await?;
        let local = self.leave_saddle(z0, local).await?;
        if p.has_kinks() {
            self.settle_kinks(local).await
        } else {
            Ok(local)
        }
    }

    /// L-BFGS-B from `z0` on each wall of [`SOFT_WALLS`] in turn, each from where the last
    /// ended; returns the last end point (`z0` where f was never finite), where the descent on
    /// the dataset's own wall begins. Data without an empty main bin
    /// ([`Dataset::has_empty_main_bin`]) have no wall to widen: `z0` itself.
    async fn soft_descents(&mut self, z0: &[f64]) -> Result<Vec<f64>> {
        let p = self.p;
        if !self.data.has_empty_main_bin() {
            return Ok(z0.to_vec());
        }
        if self.soft.is_empty() {
            self.soft = SOFT_WALLS
                .iter()
                .map(|&w| self.data.with_empty_bin_wall(w))
                .collect();
        }
        let mut z = z0.to_vec();
        for k in 0..SOFT_WALLS.len() {
            self.stage = Some(k);
            let run = self.run(&z, (&p.lower, &p.upper), 0, None).await;
            self.stage = None;
            let d = run?;
            if d.f.is_finite() {
                z = d.z;
            }
        }
        Ok(z)
    }

    /// A descent can end on a saddle it never saw. Where f is even in a coordinate about its
    /// start — a smoothly interpolated variation whose up and down shifts are equal (both 0 in
    /// published files) — its gradient there is exactly 0, so L-BFGS-B never moves it, even
    /// where the slice falls on both sides. (Where the likelihood declares a kink instead,
    /// [`super::kinks`] handles it.)
    /// Coordinates the descent left exactly where they started, off kinks and bounds, are
    /// probed a step of [`SADDLE_STEP`] (in units of their scale: the prior width, 1 for a
    /// free parameter) to either side; those where f falls are moved to their lower side and
    /// the descent resumed from there, keeping the lower minimum. A descent that moved nothing
    /// started at a minimum and is not probed.
    async fn leave_saddle(&mut self, z0: &[f64], local: Local) -> Result<Local> {
        let p = self.p;
        if !local.f.is_finite() || local.z == z0 {
            return Ok(local);
        }
        let unmoved: Vec<usize> = (0..z0.len())
            .filter(|&k| {
                local.z[k] == z0[k] && !p.kinks[k] && p.lower[k] < z0[k] && z0[k] < p.upper[k]
            })
            .collect();
        let mut z = local.z.clone();
        let mut moved = false;
        let resolution = 1e-12 * local.f.abs().max(1.0);
        // Every probe starts from the descent's end: all of them in one step.
        let probes: Vec<Vec<f64>> = unmoved
            .iter()
            .flat_map(|&k| {
                [1.0, -1.0].map(|side| {
                    let mut probe = local.z.clone();
                    probe[k] = (probe[k] + side * SADDLE_STEP).clamp(p.lower[k], p.upper[k]);
                    probe
                })
            })
            .collect();
        let fs = self.nll_many(&probes).await?;
        for (j, &k) in unmoved.iter().enumerate() {
            let mut best = (local.f - resolution, z[k]);
            for t in 2 * j..2 * j + 2 {
                if fs[t] < best.0 {
                    best = (fs[t], probes[t][k]);
                }
            }
            if best.1 != z[k] {
                z[k] = best.1;
                moved = true;
            }
        }
        if !moved {
            return Ok(local);
        }
        let again = self.descend(&z, (&p.lower, &p.upper), &[]).await?;
        Ok(if again.better_than(&local) {
            again
        } else {
            local
        })
    }
}

//! L-BFGS-B as an ask/tell state machine.
//!
//! Usage: `let mut opt = Lbfgsb::new(x0, lower, upper, options);` then loop
//! `match opt.ask() { Ask::Evaluate(x) => { let f = ...; opt.tell(f, &g) } Ask::Done => break }`.
//! Nothing in here blocks or calls back, so many instances can be advanced in lockstep (a GPU
//! batch) or interleaved on a thread pool.
//!
//! Each iteration: (1) the generalized Cauchy point of the quadratic model
//! `B = θI − W M Wᵀ` along the projected steepest-descent path, (2) minimisation of the model over
//! the variables free at that point (direct primal method), projected back into the box (falling
//! back to a truncated step if the projection is not a descent direction), (3) a line search
//! meeting the strong Wolfe conditions, bracketing then zooming with safeguarded cubic
//! interpolation, never leaving the box.

/// Tunables; the defaults suit likelihood fits (f = −ln L of order 10²–10⁴).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Number of correction pairs kept.
    pub memory: usize,
    /// Converged when ‖P(x − g) − x‖∞ ≤ pgtol.
    pub pgtol: f64,
    /// Converged when (f_k − f_{k+1}) ≤ ftol · max(|f_k|, |f_{k+1}|, 1).
    pub ftol: f64,
    /// Converged when the decrease the quadratic model predicts for the next step,
    /// EDM = −½ gᵀd, is at most this (Minuit's "estimated distance to minimum"), or at most
    /// 4 ulp of |f| where that is larger: a decrease below f's rounding cannot be found by a
    /// line search (|f| of a million events is ≈ 10⁷; below |f| ≈ 10⁴ the default 1e-11 is the
    /// larger). For f = −ln L, 1e-9 moves every parameter by under 1e-4 of its uncertainty.
    pub edm: f64,
    pub max_iterations: usize,
    pub max_evaluations: usize,
    /// Sufficient-decrease (Armijo) constant of the line search.
    pub c1: f64,
    /// Curvature constant of the strong Wolfe condition.
    pub c2: f64,
    /// While no curvature pair is held (the first iteration, and after a restart from steepest
    /// descent) the line search tries the step α = 1 (the direction −g whole) instead of a step
    /// of unit length: right where the coordinates are in units of the curvature
    /// (`ParameterSpace::curvature_units`), where −g is then close to the Newton step; a unit
    /// length is the safe guess where nothing is known of the scale.
    pub full_first_step: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            memory: 10,
            pgtol: 1e-8,
            ftol: 1e-15,
            edm: 1e-11,
            max_iterations: 5000,
            max_evaluations: 20000,
            c1: 1e-4,
            c2: 0.9,
            full_first_step: false,
        }
    }
}

/// Where the minimiser stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Running,
    Converged(String),
    Failed(String),
}

impl Status {
    pub fn is_done(&self) -> bool {
        !matches!(self, Status::Running)
    }
    pub fn converged(&self) -> bool {
        matches!(self, Status::Converged(_))
    }
    pub fn reason(&self) -> &str {
        match self {
            Status::Running => "running",
            Status::Converged(r) | Status::Failed(r) => r,
        }
    }
}

/// What the minimiser wants next.
#[derive(Debug)]
pub enum Ask<'a> {
    /// Evaluate f and ∇f here and `tell` them.
    Evaluate(&'a [f64]),
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Waiting for f, g at the starting point.
    Start,
    /// Line search, still looking for an interval that contains an acceptable step.
    Bracket,
    /// Line search, shrinking [lo, hi].
    Zoom,
    Done,
}

#[derive(Debug, Clone, Copy)]
struct Trial {
    alpha: f64,
    f: f64,
    dg: f64,
}

/// The L-BFGS-B state machine.
#[derive(Debug, Clone)]
pub struct Lbfgsb {
    opts: Options,
    n: usize,
    lower: Vec<f64>,
    upper: Vec<f64>,
    /// Current iterate and its f, g.
    x: Vec<f64>,
    f: f64,
    g: Vec<f64>,
    /// Limited memory: s and y vectors (oldest first), SᵀS and SᵀY (k×k, row-major in m×m).
    s: Vec<Vec<f64>>,
    y: Vec<Vec<f64>>,
    sts: Vec<f64>,
    sty: Vec<f64>,
    yty: Vec<f64>,
    theta: f64,
    /// 2k×2k middle matrix M of B = θI − W M Wᵀ.
    mmat: Vec<f64>,
    /// Search direction and line-search state.
    d: Vec<f64>,
    dg0: f64,
    alpha_max: f64,
    trial_x: Vec<f64>,
    trial: Trial,
    prev: Trial,
    lo: Trial,
    hi: Trial,
    lo_x: Vec<f64>,
    lo_g: Vec<f64>,
    ls_evals: usize,
    /// Coordinates where f has a kink at 0 (steps stop there).
    kinks: Vec<bool>,
    /// The direction was computed right after a memory reset (a failure then is final).
    fresh_memory: bool,
    phase: Phase,
    status: Status,
    pub iterations: usize,
    pub evaluations: usize,
}

impl Lbfgsb {
    /// Starts at `x0` (projected into the box). Bounds may be infinite.
    pub fn new(x0: &[f64], lower: &[f64], upper: &[f64], opts: Options) -> Lbfgsb {
        let n = x0.len();
        assert!(
            lower.len() == n && upper.len() == n,
            "bounds must have the length of x0"
        );
        let x: Vec<f64> = (0..n).map(|i| x0[i].clamp(lower[i], upper[i])).collect();
        let m = opts.memory.max(1);
        Lbfgsb {
            opts: Options { memory: m, ..opts },
            n,
            lower: lower.to_vec(),
            upper: upper.to_vec(),
            trial_x: x.clone(),
            x,
            f: f64::NAN,
            g: vec![0.0; n],
            s: Vec::new(),
            y: Vec::new(),
            sts: vec![0.0; m * m],
            sty: vec![0.0; m * m],
            yty: vec![0.0; m * m],
            theta: 1.0,
            mmat: Vec::new(),
            d: vec![0.0; n],
            dg0: 0.0,
            alpha_max: 0.0,
            trial: Trial {
                alpha: 0.0,
                f: 0.0,
                dg: 0.0,
            },
            prev: Trial {
                alpha: 0.0,
                f: 0.0,
                dg: 0.0,
            },
            lo: Trial {
                alpha: 0.0,
                f: 0.0,
                dg: 0.0,
            },
            hi: Trial {
                alpha: 0.0,
                f: 0.0,
                dg: 0.0,
            },
            lo_x: vec![0.0; n],
            lo_g: vec![0.0; n],
            ls_evals: 0,
            fresh_memory: true,
            kinks: vec![false; n],
            phase: Phase::Start,
            status: Status::Running,
            iterations: 0,
            evaluations: 0,
        }
    }

    /// Declares the coordinates where f is continuous but has a kink at 0 (interpolation codes 0
    /// and 1): line searches stop at such a kink instead of stepping across it.
    pub fn with_kinks(mut self, kinks: &[bool]) -> Lbfgsb {
        assert_eq!(kinks.len(), self.n, "kinks must have the length of x0");
        self.kinks = kinks.to_vec();
        self
    }

    pub fn ask(&self) -> Ask<'_> {
        match self.phase {
            Phase::Done => Ask::Done,
            _ => Ask::Evaluate(&self.trial_x),
        }
    }

    pub fn status(&self) -> &Status {
        &self.status
    }
    /// Best point so far, its f and gradient.
    pub fn x(&self) -> &[f64] {
        &self.x
    }
    pub fn f(&self) -> f64 {
        self.f
    }
    pub fn gradient(&self) -> &[f64] {
        &self.g
    }

    /// The estimated distance to the minimum of the current iterate, −½ gᵀd along the direction
    /// being searched (what f would fall by if the quasi-Newton model were exact); infinite
    /// before the first direction. Once the run has ended it is the last direction's (stale at
    /// most, never negative).
    pub fn edm(&self) -> f64 {
        match self.phase {
            Phase::Start => f64::INFINITY,
            _ => (-0.5 * self.dg0).max(0.0),
        }
    }

    /// ‖P(x − g) − x‖∞ at the current iterate.
    pub fn projected_gradient_norm(&self) -> f64 {
        (0..self.n)
            .map(|i| {
                ((self.x[i] - self.g[i]).clamp(self.lower[i], self.upper[i]) - self.x[i]).abs()
            })
            .fold(0.0, f64::max)
    }

    /// Reports f and ∇f at the point last returned by [`ask`](Self::ask).
    pub fn tell(&mut self, f: f64, g: &[f64]) {
        assert_eq!(g.len(), self.n, "gradient length");
        self.evaluations += 1;
        match self.phase {
            Phase::Start => {
                if !f.is_finite() || g.iter().any(|v| !v.is_finite()) {
                    return self.finish(Status::Failed(
                        "objective is not finite at the starting point".into(),
                    ));
                }
                self.f = f;
                self.g.copy_from_slice(g);
                if self.projected_gradient_norm() <= self.opts.pgtol {
                    return self.finish(Status::Converged(
                        "projected gradient below tolerance at the start".into(),
                    ));
                }
                self.begin_iteration();
            }
            Phase::Bracket | Phase::Zoom => self.line_search_step(f, g),
            Phase::Done => {}
        }
    }

    fn finish(&mut self, status: Status) {
        self.status = status;
        self.phase = Phase::Done;
        self.trial_x.copy_from_slice(&self.x);
    }

    fn k(&self) -> usize {
        self.s.len()
    }

    /// Computes the search direction and starts its line search.
    fn begin_iteration(&mut self) {
        if self.iterations >= self.opts.max_iterations {
            return self.finish(Status::Failed(format!(
                "reached the iteration limit ({})",
                self.opts.max_iterations
            )));
        }
        let xbar = match self.direction() {
            Some(xb) => xb,
            None => {
                if self.k() > 0 {
                    self.reset_memory();
                    return self.begin_iteration();
                }
                return self.finish(Status::Failed(
                    "could not compute a descent direction".into(),
                ));
            }
        };
        for i in 0..self.n {
            self.d[i] = xbar[i] - self.x[i];
        }
        self.dg0 = dot(&self.d, &self.g);
        let dnorm = self.d.iter().map(|v| v * v).sum::<f64>().sqrt();
        // Trust the model's predicted decrease only once it has curvature information. A
        // decrease below f's own rounding (a few ulp of |f|: a sum over a million events is
        // of order 10⁷) cannot be found by a line search; asking for it costs its 20 trials.
        if self.k() > 0 && self.dg0 < 0.0 && -0.5 * self.dg0 <= self.edm_floor() {
            let pg = self.projected_gradient_norm();
            return self.finish(Status::Converged(format!(
                "estimated distance to minimum {:.1e} below tolerance (projected gradient {pg:.2e})",
                -0.5 * self.dg0
            )));
        }
        if dnorm == 0.0 || self.dg0 >= 0.0 {
            if self.k() > 0 && !self.fresh_memory {
                self.reset_memory();
                return self.begin_iteration();
            }
            let pg = self.projected_gradient_norm();
            return self.finish(if pg <= 1e3 * self.opts.pgtol {
                Status::Converged(format!(
                    "no descent direction left (projected gradient {pg:.2e})"
                ))
            } else {
                Status::Failed(format!(
                    "no descent direction (projected gradient {pg:.2e})"
                ))
            });
        }
        // Largest step that keeps x + αd in the box (≥ 1: x̄ is feasible).
        let mut amax = f64::INFINITY;
        for i in 0..self.n {
            if self.d[i] > 0.0 {
                amax = amax.min((self.upper[i] - self.x[i]) / self.d[i]);
            } else if self.d[i] < 0.0 {
                amax = amax.min((self.lower[i] - self.x[i]) / self.d[i]);
            }
        }
        self.alpha_max = if amax.is_nan() {
            1.0
        } else {
            amax.clamp(1.0, 1e10)
        };
        // f is smooth only within each sign of a kinked coordinate: stop at the first kink the
        // step would cross, so the line search works on a smooth piece.
        for i in 0..self.n {
            if self.kinks[i]
                && self.x[i].abs() > 1e-12
                && self.d[i] != 0.0
                && self.x[i].signum() != self.d[i].signum()
            {
                self.alpha_max = self.alpha_max.min(-self.x[i] / self.d[i]);
            }
        }
        let alpha0 = if self.k() == 0 && !self.opts.full_first_step {
            (1.0 / dnorm).min(1.0)
        } else {
            1.0
        }
        .min(self.alpha_max);
        self.prev = Trial {
            alpha: 0.0,
            f: self.f,
            dg: self.dg0,
        };
        self.lo = self.prev;
        self.lo_x.copy_from_slice(&self.x);
        self.lo_g.copy_from_slice(&self.g);
        self.ls_evals = 0;
        self.phase = Phase::Bracket;
        self.set_trial(alpha0);
    }

    fn set_trial(&mut self, alpha: f64) {
        self.trial.alpha = alpha;
        for i in 0..self.n {
            self.trial_x[i] = (self.x[i] + alpha * self.d[i]).clamp(self.lower[i], self.upper[i]);
        }
    }

    fn line_search_step(&mut self, f: f64, g: &[f64]) {
        self.ls_evals += 1;
        let a = self.trial.alpha;
        let finite = f.is_finite() && g.iter().all(|v| v.is_finite());
        let dg = if finite { dot(g, &self.d) } else { f64::NAN };
        let cur = Trial {
            alpha: a,
            f: if finite { f } else { f64::INFINITY },
            dg,
        };
        let armijo = finite && f <= self.f + self.opts.c1 * a * self.dg0;
        let curvature = finite && dg.abs() <= -self.opts.c2 * self.dg0;
        match self.phase {
            Phase::Bracket => {
                if !armijo || (self.ls_evals > 1 && cur.f >= self.prev.f) {
                    self.hi = cur;
                    self.phase = Phase::Zoom;
                } else if curvature {
                    return self.accept(f, g);
                } else if dg >= 0.0 {
                    self.hi = self.prev;
                    self.set_lo(cur, g);
                    self.phase = Phase::Zoom;
                } else if a >= self.alpha_max {
                    return self.accept(f, g);
                } else {
                    self.set_lo(cur, g);
                    self.prev = cur;
                    return self.set_trial((4.0 * a).min(self.alpha_max));
                }
            }
            Phase::Zoom => {
                if !armijo || cur.f >= self.lo.f {
                    self.hi = cur;
                } else {
                    if curvature {
                        return self.accept(f, g);
                    }
                    if dg * (self.hi.alpha - self.lo.alpha) >= 0.0 {
                        self.hi = self.lo;
                    }
                    self.set_lo(cur, g);
                }
            }
            Phase::Start | Phase::Done => unreachable!(),
        }
        // Zoom: next trial inside [lo, hi].
        let width = (self.hi.alpha - self.lo.alpha).abs();
        if self.ls_evals >= 20 || width <= 1e-14 * self.hi.alpha.abs().max(self.lo.alpha.abs()) {
            return self.line_search_exhausted();
        }
        let next = interpolate(self.lo, self.hi);
        self.set_trial(next);
    }

    fn set_lo(&mut self, t: Trial, g: &[f64]) {
        self.lo = t;
        self.lo_x.copy_from_slice(&self.trial_x);
        self.lo_g.copy_from_slice(g);
    }

    /// The line search ran out of room: keep the best point with sufficient decrease if there is
    /// one, else restart from steepest descent, else stop.
    fn line_search_exhausted(&mut self) {
        if self.lo.alpha > 0.0 && self.lo.f < self.f {
            let (x, g) = (self.lo_x.clone(), self.lo_g.clone());
            let f = self.lo.f;
            self.trial_x.copy_from_slice(&x);
            return self.accept(f, &g);
        }
        if !self.fresh_memory {
            self.reset_memory();
            return self.begin_iteration();
        }
        let pg = self.projected_gradient_norm();
        let edm = -0.5 * self.dg0;
        // Near the minimum, rounding in f hides decreases smaller than ~1e-13·|f|: if the model
        // predicts no more than that (with margin), this is the precision limit, not a failure.
        let noise = 1e-12 * self.f.abs().max(1.0);
        self.finish(if pg <= self.opts.pgtol * 1e3 || edm <= (1e3 * self.opts.edm).max(noise) {
            Status::Converged(format!(
                "line search cannot reduce f further (estimated distance to minimum {edm:.1e}, projected gradient {pg:.2e})"
            ))
        } else {
            Status::Failed(format!(
                "line search failed to reduce f (estimated distance to minimum {edm:.1e}, projected gradient {pg:.2e})"
            ))
        })
    }

    /// The EDM below which an iteration stops: the tolerance, or f's rounding where that is
    /// larger (4 ulp of |f|; below |f| ≈ 10⁴ the tolerance 1e-11 is the larger).
    fn edm_floor(&self) -> f64 {
        self.opts.edm.max(4.0 * f64::EPSILON * self.f.abs())
    }

    fn reset_memory(&mut self) {
        self.s.clear();
        self.y.clear();
        self.theta = 1.0;
        self.fresh_memory = true;
    }

    /// Takes the trial point (in `trial_x`) as the new iterate.
    fn accept(&mut self, f: f64, g: &[f64]) {
        self.iterations += 1;
        let s: Vec<f64> = (0..self.n).map(|i| self.trial_x[i] - self.x[i]).collect();
        let y: Vec<f64> = (0..self.n).map(|i| g[i] - self.g[i]).collect();
        let f_old = self.f;
        self.x.copy_from_slice(&self.trial_x);
        self.f = f;
        self.g.copy_from_slice(g);
        let sy = dot(&s, &y);
        let yy = dot(&y, &y);
        if sy > f64::EPSILON * yy && sy > 0.0 {
            self.push_pair(s, y);
            self.theta = yy / sy;
            self.fresh_memory = false;
        }
        let pg = self.projected_gradient_norm();
        if pg <= self.opts.pgtol {
            return self.finish(Status::Converged(
                "projected gradient below tolerance".into(),
            ));
        }
        if f_old - f <= self.opts.ftol * f_old.abs().max(f.abs()).max(1.0) {
            return self.finish(Status::Converged(format!(
                "relative reduction of f below tolerance (projected gradient {pg:.2e})"
            )));
        }
        if self.evaluations >= self.opts.max_evaluations {
            return self.finish(Status::Failed(format!(
                "reached the evaluation limit ({})",
                self.opts.max_evaluations
            )));
        }
        self.begin_iteration();
    }

    fn push_pair(&mut self, s: Vec<f64>, y: Vec<f64>) {
        let m = self.opts.memory;
        if self.s.len() == m {
            self.s.remove(0);
            self.y.remove(0);
            // Shift the k×k blocks up-left by one.
            for i in 0..m - 1 {
                for j in 0..m - 1 {
                    self.sts[i * m + j] = self.sts[(i + 1) * m + j + 1];
                    self.sty[i * m + j] = self.sty[(i + 1) * m + j + 1];
                    self.yty[i * m + j] = self.yty[(i + 1) * m + j + 1];
                }
            }
        }
        self.s.push(s);
        self.y.push(y);
        let k = self.s.len();
        let last = k - 1;
        for i in 0..k {
            let ss = dot(&self.s[i], &self.s[last]);
            self.sts[i * m + last] = ss;
            self.sts[last * m + i] = ss;
            self.sty[i * m + last] = dot(&self.s[i], &self.y[last]);
            self.sty[last * m + i] = dot(&self.s[last], &self.y[i]);
            let yy = dot(&self.y[i], &self.y[last]);
            self.yty[i * m + last] = yy;
            self.yty[last * m + i] = yy;
        }
    }

    /// Wᵀv for an n-vector v (length 2k), by contiguous dot products.
    fn wt_times(&self, v: &[f64], out: &mut [f64]) {
        let k = self.k();
        for j in 0..k {
            out[j] = dot(&self.y[j], v);
            out[k + j] = self.theta * dot(&self.s[j], v);
        }
    }

    /// W·a for a 2k-vector a (length n), by contiguous axpys.
    fn w_times(&self, a: &[f64], out: &mut [f64]) {
        let k = self.k();
        out.iter_mut().for_each(|o| *o = 0.0);
        for j in 0..k {
            let (cy, cs) = (a[j], self.theta * a[k + j]);
            for ((o, y), s) in out.iter_mut().zip(&self.y[j]).zip(&self.s[j]) {
                *o += cy * y + cs * s;
            }
        }
    }

    /// Row `i` of W = [Y, θS] (length 2k).
    fn w_row(&self, i: usize, out: &mut [f64]) {
        let k = self.k();
        for j in 0..k {
            out[j] = self.y[j][i];
            out[k + j] = self.theta * self.s[j][i];
        }
    }

    /// Builds M = [[−D, Lᵀ], [L, θSᵀS]]⁻¹ by block elimination: with the Schur complement
    /// Sc = θSᵀS + L D⁻¹ Lᵀ (symmetric positive definite, k×k, Cholesky),
    /// M = [[−D⁻¹ + D⁻¹LᵀSc⁻¹LD⁻¹, D⁻¹LᵀSc⁻¹], [Sc⁻¹LD⁻¹, Sc⁻¹]] — a k³ job instead of
    /// inverting a general 2k×2k matrix every iteration. Returns false if it is singular.
    fn build_m(&mut self) -> bool {
        let k = self.k();
        let m = self.opts.memory;
        let n2 = 2 * k;
        let dinv: Vec<f64> = (0..k).map(|i| 1.0 / self.sty[i * m + i]).collect();
        if dinv.iter().any(|d| !d.is_finite() || *d <= 0.0) {
            return false;
        }
        // L_ij = s_iᵀy_j for i > j.
        let l = |i: usize, j: usize| if i > j { self.sty[i * m + j] } else { 0.0 };
        let mut sc = vec![0.0; k * k];
        for i in 0..k {
            for j in 0..=i {
                let mut v = self.theta * self.sts[i * m + j];
                for q in 0..j.min(i) {
                    v += l(i, q) * dinv[q] * l(j, q);
                }
                sc[i * k + j] = v;
                sc[j * k + i] = v;
            }
        }
        let Some((sci, true)) = crate::linalg::invert_symmetric(&sc, k) else {
            return false;
        };
        // G = Sc⁻¹ L D⁻¹ (k×k): the bottom-left block.
        let mut g = vec![0.0; k * k];
        for i in 0..k {
            for j in 0..k {
                let mut v = 0.0;
                for q in j + 1..k {
                    v += sci[i * k + q] * l(q, j);
                }
                g[i * k + j] = v * dinv[j];
            }
        }
        let mut mm = vec![0.0; n2 * n2];
        for i in 0..k {
            for j in 0..k {
                // Top-left: −D⁻¹ + D⁻¹ Lᵀ G.
                let mut v = 0.0;
                for q in i + 1..k {
                    v += l(q, i) * g[q * k + j];
                }
                v *= dinv[i];
                if i == j {
                    v -= dinv[i];
                }
                mm[i * n2 + j] = v;
                mm[(k + i) * n2 + j] = g[i * k + j];
                mm[j * n2 + k + i] = g[i * k + j];
                mm[(k + i) * n2 + k + j] = sci[i * k + j];
            }
        }
        self.mmat = mm;
        true
    }

    /// H·v for the limited-memory inverse Hessian with H₀ = I/θ (two-loop recursion): the
    /// inverse of the compact B = θI − W M Wᵀ that the Cauchy point uses.
    fn h_times(&self, v: &[f64]) -> Vec<f64> {
        let k = self.k();
        let mut q = v.to_vec();
        let mut a = vec![0.0; k];
        let rho: Vec<f64> = (0..k).map(|i| 1.0 / dot(&self.s[i], &self.y[i])).collect();
        for i in (0..k).rev() {
            a[i] = rho[i] * dot(&self.s[i], &q);
            for (qj, yj) in q.iter_mut().zip(&self.y[i]) {
                *qj -= a[i] * yj;
            }
        }
        for qj in q.iter_mut() {
            *qj /= self.theta;
        }
        for i in 0..k {
            let b = rho[i] * dot(&self.y[i], &q);
            for (qj, sj) in q.iter_mut().zip(&self.s[i]) {
                *qj += (a[i] - b) * sj;
            }
        }
        q
    }

    fn m_times(&self, v: &[f64], out: &mut [f64]) {
        let n2 = v.len();
        for i in 0..n2 {
            out[i] = (0..n2).map(|j| self.mmat[i * n2 + j] * v[j]).sum();
        }
    }

    /// Generalized Cauchy point followed by subspace minimisation; returns x̄ (feasible).
    fn direction(&mut self) -> Option<Vec<f64>> {
        let n = self.n;
        let k = self.k();
        let n2 = 2 * k;
        if k > 0 && !self.build_m() {
            return None;
        }
        let theta = self.theta;
        let (x, g, l, u) = (&self.x, &self.g, &self.lower, &self.upper);
        // Breakpoints.
        let mut t = vec![f64::INFINITY; n];
        let mut d = vec![0.0; n];
        for i in 0..n {
            if g[i] < 0.0 {
                t[i] = if u[i].is_finite() {
                    (x[i] - u[i]) / g[i]
                } else {
                    f64::INFINITY
                };
            } else if g[i] > 0.0 {
                t[i] = if l[i].is_finite() {
                    (x[i] - l[i]) / g[i]
                } else {
                    f64::INFINITY
                };
            }
            d[i] = if t[i] == 0.0 { 0.0 } else { -g[i] };
        }
        // Breakpoints in increasing order, from a heap: the search usually stops after the
        // first few, so a full sort would be wasted.
        let mut order: std::collections::BinaryHeap<std::cmp::Reverse<(Breakpoint, usize)>> = (0
            ..n)
            .filter(|&i| t[i] > 0.0 && t[i].is_finite())
            .map(|i| std::cmp::Reverse((Breakpoint(t[i]), i)))
            .collect();
        let mut wrow = vec![0.0; n2];
        let mut p = vec![0.0; n2];
        self.wt_times(&d, &mut p);
        let mut c = vec![0.0; n2];
        let mut mp = vec![0.0; n2];
        let mut mc = vec![0.0; n2];
        let mut mw = vec![0.0; n2];
        let dd: f64 = d.iter().map(|v| v * v).sum();
        let mut fp = -dd;
        self.m_times(&p, &mut mp);
        let mut fpp = theta * dd - dot(&p, &mp);
        let fpp0 = fpp.abs().max(f64::MIN_POSITIVE);
        let mut xcp = x.clone();
        let mut at_bound = vec![false; n];
        for i in 0..n {
            if t[i] == 0.0 {
                at_bound[i] = true;
            }
        }
        let mut dt_min = if fpp > 0.0 { -fp / fpp } else { f64::INFINITY };
        let mut t_old = 0.0;
        while let Some(std::cmp::Reverse((_, b))) = order.pop() {
            let dt = t[b] - t_old;
            if dt_min < dt {
                break;
            }
            xcp[b] = if d[b] > 0.0 { u[b] } else { l[b] };
            at_bound[b] = true;
            let zb = xcp[b] - x[b];
            for j in 0..n2 {
                c[j] += dt * p[j];
            }
            let gb = g[b];
            self.w_row(b, &mut wrow);
            self.m_times(&c, &mut mc);
            self.m_times(&wrow, &mut mw);
            fp += dt * fpp + gb * gb + theta * gb * zb - gb * dot(&wrow, &mc);
            fpp += -theta * gb * gb - 2.0 * gb * dot(&wrow, &mp) - gb * gb * dot(&wrow, &mw);
            for j in 0..n2 {
                p[j] += gb * wrow[j];
            }
            self.m_times(&p, &mut mp);
            d[b] = 0.0;
            fpp = fpp.max(f64::EPSILON * fpp0);
            dt_min = -fp / fpp;
            t_old = t[b];
        }
        let dt_min = dt_min.max(0.0);
        let t_cp = t_old + dt_min;
        for i in 0..n {
            if !at_bound[i] {
                xcp[i] = (x[i] + t_cp * d[i]).clamp(l[i], u[i]);
            }
        }
        for j in 0..n2 {
            c[j] += dt_min * p[j];
        }
        // Subspace minimisation over the variables free at the Cauchy point.
        let free: Vec<usize> = (0..n).filter(|&i| xcp[i] > l[i] && xcp[i] < u[i]).collect();
        if free.is_empty() {
            return Some(xcp);
        }
        if free.len() == n && !self.kinks.iter().any(|&k| k) {
            // Every variable free (the usual case inside wide bounds): the model's minimiser
            // over all of them is the quasi-Newton point x − H·g, whatever the Cauchy point —
            // the same point as the general formula below at a fraction of its cost. Kinked
            // problems keep the general formula: their fits at a kink are sensitive to the last
            // bits of the step, and that path is the one validated on them.
            let hg = self.h_times(g);
            let dhat: Vec<f64> = (0..n).map(|i| x[i] - hg[i] - xcp[i]).collect();
            return Some(self.project_step(&xcp, &free, &dhat));
        }
        self.m_times(&c, &mut mc);
        let mut wmc = vec![0.0; n];
        if k > 0 {
            self.w_times(&mc, &mut wmc);
        }
        let mut is_free = vec![false; n];
        for &i in &free {
            is_free[i] = true;
        }
        // Reduced gradient of the model at the Cauchy point, zero outside the free set.
        let mut rfull = vec![0.0; n];
        for &i in &free {
            rfull[i] = g[i] + theta * (xcp[i] - x[i]) - wmc[i];
        }
        let mut dhat: Vec<f64> = free.iter().map(|&i| -rfull[i] / theta).collect();
        if k > 0 {
            let mut v = vec![0.0; n2];
            self.wt_times(&rfull, &mut v);
            // WᶻᵀWᶻ = WᵀW minus the rows of the variables at a bound (usually few).
            let m = self.opts.memory;
            let mut wzw = vec![0.0; n2 * n2];
            for i in 0..k {
                for j in 0..k {
                    wzw[i * n2 + j] = self.yty[i * m + j];
                    let ys = self.sty[j * m + i]; // y_i·s_j
                    wzw[i * n2 + k + j] = theta * ys;
                    wzw[(k + j) * n2 + i] = theta * ys;
                    wzw[(k + i) * n2 + k + j] = theta * theta * self.sts[i * m + j];
                }
            }
            for i in (0..n).filter(|&i| !is_free[i]) {
                self.w_row(i, &mut wrow);
                for a in 0..n2 {
                    for b in 0..n2 {
                        wzw[a * n2 + b] -= wrow[a] * wrow[b];
                    }
                }
            }
            let mut mv = vec![0.0; n2];
            self.m_times(&v, &mut mv);
            // N = I − (1/θ) M WᶻᵀWᶻ
            let mut nmat = vec![0.0; n2 * n2];
            for a in 0..n2 {
                for b in 0..n2 {
                    let mw: f64 = (0..n2)
                        .map(|j| self.mmat[a * n2 + j] * wzw[j * n2 + b])
                        .sum();
                    nmat[a * n2 + b] = if a == b { 1.0 } else { 0.0 } - mw / theta;
                }
            }
            let ninv = crate::linalg::invert(&nmat, n2)?;
            let sol: Vec<f64> = (0..n2)
                .map(|a| (0..n2).map(|b| ninv[a * n2 + b] * mv[b]).sum())
                .collect();
            let mut wsol = vec![0.0; n];
            self.w_times(&sol, &mut wsol);
            for (fi, &i) in free.iter().enumerate() {
                dhat[fi] -= wsol[i] / (theta * theta);
            }
        }
        Some(self.project_step(&xcp, &free, &dhat))
    }

    /// x̄ = P(x_cp + d̂) over the free variables; if that is not a descent direction from x,
    /// the step is truncated at the first bound instead.
    fn project_step(&self, xcp: &[f64], free: &[usize], dhat: &[f64]) -> Vec<f64> {
        let (n, x, g, l, u) = (self.n, &self.x, &self.g, &self.lower, &self.upper);
        let mut xbar = xcp.to_vec();
        for (fi, &i) in free.iter().enumerate() {
            xbar[i] = (xcp[i] + dhat[fi]).clamp(l[i], u[i]);
        }
        let descent: f64 = (0..n).map(|i| (xbar[i] - x[i]) * g[i]).sum();
        if descent >= 0.0 {
            let mut alpha: f64 = 1.0;
            for (fi, &i) in free.iter().enumerate() {
                if dhat[fi] > 0.0 {
                    alpha = alpha.min((u[i] - xcp[i]) / dhat[fi]);
                } else if dhat[fi] < 0.0 {
                    alpha = alpha.min((l[i] - xcp[i]) / dhat[fi]);
                }
            }
            for (fi, &i) in free.iter().enumerate() {
                xbar[i] = (xcp[i] + alpha.max(0.0) * dhat[fi]).clamp(l[i], u[i]);
            }
        }
        xbar
    }
}

/// A breakpoint of the Cauchy search, ordered by `f64::total_cmp` (ties: by index).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Breakpoint(f64);

impl Eq for Breakpoint {}

impl PartialOrd for Breakpoint {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Breakpoint {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The next trial between two: the minimiser of the cubic through both (values and slopes), or of
/// the quadratic through lo's value and slope and hi's value where hi's slope is not finite. The
/// point is kept within [1 %, 90 %] of the way from lo to hi, not bisected: where f rises steeply
/// past lo (a wall — an empty bin whose mean reaches 0), the minimiser lies very close to lo, and
/// halving the interval twenty times would not reach it. Where hi's value is not finite either,
/// the step shrinks tenfold.
fn interpolate(lo: Trial, hi: Trial) -> f64 {
    let (a, b) = (lo.alpha, hi.alpha);
    let mut x = f64::NAN;
    if lo.f.is_finite() && hi.f.is_finite() && hi.dg.is_finite() {
        let d1 = lo.dg + hi.dg - 3.0 * (lo.f - hi.f) / (a - b);
        let disc = d1 * d1 - lo.dg * hi.dg;
        if disc >= 0.0 {
            let d2 = (b - a).signum() * disc.sqrt();
            x = b - (b - a) * (hi.dg + d2 - d1) / (hi.dg - lo.dg + 2.0 * d2);
        }
    }
    if !x.is_finite() && lo.f.is_finite() && hi.f.is_finite() {
        let h = b - a;
        let curvature = hi.f - lo.f - lo.dg * h;
        if curvature > 0.0 {
            x = a - lo.dg * h * h / (2.0 * curvature);
        }
    }
    let t = if x.is_finite() {
        ((x - a) / (b - a)).clamp(0.01, 0.9)
    } else if hi.f.is_finite() {
        0.5
    } else {
        0.1
    };
    a + t * (b - a)
}

/// Dot product with independent partial sums: a single running sum is one long chain of
/// dependent additions, and the optimizer's dot products over all parameters are its main cost.
/// Where the CPU has AVX2 and FMA a fused build runs (chosen once per process, so results are
/// the same on every call and thread of one machine).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features `dot_fused` is compiled for.
        return unsafe { dot_fused(a, b) };
    }
    dot_plain(a, b)
}

#[inline(always)]
fn dot_plain(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    for (x, y) in ra.iter().zip(rb) {
        acc[0] += x * y;
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dot_fused(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] = x[l].mul_add(y[l], acc[l]);
        }
    }
    for (x, y) in ra.iter().zip(rb) {
        acc[0] = x.mul_add(*y, acc[0]);
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

/// Runs the state machine to the end with a closure `fg(x, g) -> f`.
pub fn minimize<F: FnMut(&[f64], &mut [f64]) -> f64>(
    mut fg: F,
    x0: &[f64],
    lower: &[f64],
    upper: &[f64],
    opts: Options,
) -> Lbfgsb {
    let mut opt = Lbfgsb::new(x0, lower, upper, opts);
    let mut g = vec![0.0; x0.len()];
    while let Ask::Evaluate(x) = opt.ask() {
        let x = x.to_vec();
        let f = fg(&x, &mut g);
        opt.tell(f, &g);
    }
    opt
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stop on the projected gradient only: these problems have f* = 0 and no noise floor.
    fn tight() -> Options {
        Options {
            edm: 0.0,
            ..Options::default()
        }
    }

    fn rosenbrock(x: &[f64], g: &mut [f64]) -> f64 {
        let n = x.len();
        let mut f = 0.0;
        g.iter_mut().for_each(|v| *v = 0.0);
        for i in 0..n - 1 {
            let a = x[i + 1] - x[i] * x[i];
            let b = 1.0 - x[i];
            f += 100.0 * a * a + b * b;
            g[i] += -400.0 * x[i] * a - 2.0 * b;
            g[i + 1] += 200.0 * a;
        }
        f
    }

    /// −½ gᵀd is f − f* where the quasi-Newton model is the function: on ½|x|² the first
    /// direction is −g, so after the first evaluation `edm` equals f (f* = 0); before any
    /// direction it is infinite.
    #[test]
    fn edm_is_the_distance_to_the_minimum_on_a_quadratic() {
        let x0 = [3.0, -4.0, 0.5];
        let (lo, hi) = ([f64::NEG_INFINITY; 3], [f64::INFINITY; 3]);
        let mut opt = Lbfgsb::new(&x0, &lo, &hi, tight());
        assert_eq!(opt.edm(), f64::INFINITY);
        let quadratic = |x: &[f64], g: &mut [f64]| {
            g.copy_from_slice(x);
            0.5 * x.iter().map(|v| v * v).sum::<f64>()
        };
        let mut g = [0.0; 3];
        let Ask::Evaluate(x) = opt.ask() else {
            panic!("a first point to evaluate")
        };
        let x = x.to_vec();
        let f = quadratic(&x, &mut g);
        opt.tell(f, &g);
        assert!((opt.edm() - f).abs() <= 1e-12 * f, "{} vs {f}", opt.edm());
        while let Ask::Evaluate(x) = opt.ask() {
            let x = x.to_vec();
            let f = quadratic(&x, &mut g);
            opt.tell(f, &g);
        }
        // (Ended: `edm` is the last direction's, which the exact step consumed.)
        assert!(opt.status().converged() && opt.f() < 1e-20 && opt.edm() >= 0.0);
    }

    #[test]
    fn rosenbrock_unbounded() {
        let n = 10;
        let x0: Vec<f64> = (0..n)
            .map(|i| if i % 2 == 0 { -1.2 } else { 1.0 })
            .collect();
        let inf = vec![f64::INFINITY; n];
        let ninf = vec![f64::NEG_INFINITY; n];
        let opt = minimize(rosenbrock, &x0, &ninf, &inf, tight());
        assert!(opt.status().converged(), "{:?}", opt.status());
        for v in opt.x() {
            assert!((v - 1.0).abs() < 1e-6, "{:?}", opt.x());
        }
        assert!(opt.f() < 1e-12);
    }

    #[test]
    fn rosenbrock_with_active_upper_bound() {
        // Minimum of 2-d Rosenbrock with x0 ≤ 0.5: x0 = 0.5 active, x1 = 0.25.
        let opt = minimize(
            rosenbrock,
            &[-1.0, 2.0],
            &[-2.0, -2.0],
            &[0.5, 2.0],
            tight(),
        );
        assert!(opt.status().converged(), "{:?}", opt.status());
        assert!((opt.x()[0] - 0.5).abs() < 1e-12);
        assert!((opt.x()[1] - 0.25).abs() < 1e-6, "{:?}", opt.x());
    }

    #[test]
    fn quadratic_with_bounds_and_fixed_variables() {
        // f = Σ wᵢ (xᵢ − cᵢ)²; bounds clip some targets; a variable with lower == upper is fixed.
        let c = [3.0, -2.0, 0.5, 10.0, -7.0];
        let w = [1.0, 100.0, 0.01, 5.0, 2.0];
        let lower = [0.0, -1.0, -5.0, 1.0, -7.0];
        let upper = [2.0, 1.0, 5.0, 1.0, 7.0];
        let fg = |x: &[f64], g: &mut [f64]| {
            let mut f = 0.0;
            for i in 0..5 {
                f += w[i] * (x[i] - c[i]).powi(2);
                g[i] = 2.0 * w[i] * (x[i] - c[i]);
            }
            f
        };
        let opt = minimize(fg, &[1.0, 0.0, 0.0, 1.0, 0.0], &lower, &upper, tight());
        assert!(opt.status().converged(), "{:?}", opt.status());
        let want = [2.0, -1.0, 0.5, 1.0, -7.0];
        for (a, b) in opt.x().iter().zip(want) {
            assert!((a - b).abs() < 1e-7, "{:?}", opt.x());
        }
    }

    /// A minimum under a large constant (f ≈ 10⁷, as −ln L of a million events) stops once
    /// the predicted decrease is below f's rounding — at the minimum, without spending line
    /// searches of 20 trials on decreases it cannot see.
    #[test]
    fn stops_at_the_rounding_of_a_large_f() {
        let c = [3.0, -2.0, 0.5];
        let fg = |x: &[f64], g: &mut [f64]| {
            let mut f = -1.0e7;
            for i in 0..3 {
                f += 50.0 * (i as f64 + 1.0) * (x[i] - c[i]).powi(2);
                g[i] = 100.0 * (i as f64 + 1.0) * (x[i] - c[i]);
            }
            f
        };
        let opts = Options {
            pgtol: 0.0,
            ..Options::default()
        };
        let opt = minimize(fg, &[0.0; 3], &[-10.0; 3], &[10.0; 3], opts);
        assert!(opt.status().converged(), "{:?}", opt.status());
        assert!(
            opt.status().reason().contains("estimated distance"),
            "{:?}",
            opt.status()
        );
        for (a, b) in opt.x().iter().zip(c) {
            assert!((a - b).abs() < 1e-5, "{:?}", opt.x());
        }
        assert!(opt.evaluations < 40, "{} evaluations", opt.evaluations);
    }

    /// The block-eliminated M equals the inverse of the middle matrix, and H·v (two-loop) is
    /// the inverse of the compact B = θI − W M Wᵀ, on a memory filled by a real run.
    #[test]
    fn compact_matrices_are_consistent() {
        let n = 12;
        let mut opt = Lbfgsb::new(&vec![-1.2; n], &vec![-5.0; n], &vec![5.0; n], tight());
        let mut g = vec![0.0; n];
        for _ in 0..40 {
            match opt.ask() {
                Ask::Evaluate(x) => {
                    let x = x.to_vec();
                    let f = rosenbrock(&x, &mut g);
                    opt.tell(f, &g);
                }
                Ask::Done => break,
            }
        }
        let k = opt.k();
        assert!(k >= 3, "memory too short for the check: {k}");
        assert!(opt.build_m());
        let (m, n2) = (opt.opts.memory, 2 * k);
        let mut kmat = vec![0.0; n2 * n2];
        for i in 0..k {
            for j in 0..k {
                kmat[i * n2 + j] = if i == j { -opt.sty[i * m + i] } else { 0.0 };
                let l = if i > j { opt.sty[i * m + j] } else { 0.0 };
                kmat[(k + i) * n2 + j] = l;
                kmat[j * n2 + k + i] = l;
                kmat[(k + i) * n2 + k + j] = opt.theta * opt.sts[i * m + j];
            }
        }
        let inv = crate::linalg::invert(&kmat, n2).unwrap();
        for (a, b) in opt.mmat.iter().zip(&inv) {
            assert!((a - b).abs() <= 1e-8 * b.abs().max(1.0), "{a} vs {b}");
        }
        // B·(H·v) = v with B v = θv − W M Wᵀ v.
        let v: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin()).collect();
        let hv = opt.h_times(&v);
        let mut wt = vec![0.0; n2];
        opt.wt_times(&hv, &mut wt);
        let mut mwt = vec![0.0; n2];
        opt.m_times(&wt, &mut mwt);
        let mut wmwt = vec![0.0; n];
        opt.w_times(&mwt, &mut wmwt);
        for i in 0..n {
            let bhv = opt.theta * hv[i] - wmwt[i];
            assert!((bhv - v[i]).abs() <= 1e-8, "{i}: {bhv} vs {}", v[i]);
        }
    }

    #[test]
    fn ill_conditioned_quadratic() {
        let n = 50;
        let fg = |x: &[f64], g: &mut [f64]| {
            let mut f = 0.0;
            for i in 0..n {
                let s = 10f64.powf(4.0 * i as f64 / (n - 1) as f64);
                f += 0.5 * s * (x[i] - 1.0).powi(2);
                g[i] = s * (x[i] - 1.0);
            }
            f
        };
        let lower = vec![-10.0; n];
        let upper = vec![10.0; n];
        let opt = minimize(fg, &vec![0.0; n], &lower, &upper, tight());
        assert!(opt.status().converged(), "{:?}", opt.status());
        assert!(opt.f() < 1e-12, "f = {}", opt.f());
    }

    #[test]
    fn non_finite_region_is_avoided() {
        // f = x − ln x has its minimum at 1 and is +inf for x ≤ 0; the first step overshoots into it.
        let fg = |x: &[f64], g: &mut [f64]| {
            if x[0] <= 0.0 {
                g[0] = f64::NAN;
                return f64::INFINITY;
            }
            g[0] = 1.0 - 1.0 / x[0];
            x[0] - x[0].ln()
        };
        let opt = minimize(fg, &[20.0], &[-100.0], &[100.0], tight());
        assert!(opt.status().converged(), "{:?}", opt.status());
        assert!((opt.x()[0] - 1.0).abs() < 1e-7);
    }
}

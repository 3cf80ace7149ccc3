//! `histfit-seam`: the likelihood seam, whatever the likelihood.
//!
//! The [`Evaluator`] trait is the one seam between statistics and likelihoods on devices: a
//! [`ParameterSpace`] describing the parameters, −ln L and its gradient for a parameter vector and
//! a [`Dataset`], and data generation (Asimov data at θ, toys at θ keyed by (seed, toy index)).
//! Inference (`histfit-infer`) is written against this crate only and treats a `Dataset` as
//! opaque; this crate links no model crate — the HistFactory model's CPU evaluator lives in
//! `histfit-compute`, event-level models in `histfit-unbinned`, device evaluators in their
//! crates. Binned notions that the fits of every device share still live here (a dataset's
//! counts and empty-bin walls, the Poisson term, the yield-input traits) until they move behind
//! a capability of the likelihood. Helpers built purely on the trait (Hessian) live here too, the [`BatchEvaluator`]
//! trait through which a device evaluates many problems per launch, [`resident`]: the seam
//! through which a device fits whole toy ensembles itself, and [`rng`]: the counter-based
//! streams every device draws toys from.

pub mod dataset;
pub mod resident;
pub mod rng;
pub mod space;
pub mod yields;

pub use dataset::{count_constant, AuxTerm, Dataset, EventTable, Events, STIRLING_FROM};
pub use resident::kink_rules;
pub use resident::{
    Descent, DescentRequest, DescentSpace, Progress, ResidentFit, ResidentFits, ResidentRequest,
    ResidentSettings, ResidentStatus, Settle, Watch, AT_KINK, ORTHANT_PG, ORTHANT_ROUNDS,
};
pub use space::{ParameterSpace, Prior};
pub use yields::{AsimovTerm, YieldEvaluator, YieldGradTerms, YieldGradient};

/// An error from an evaluator (bad input sizes, a device failure).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ComputeError {
    #[error("{what}: expected {expected} values, got {got}")]
    Length {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("{place}: {rule}")]
    InvalidData { place: String, rule: String },
    #[error("device error: {0}")]
    Device(String),
    #[error("{0} is not available for this likelihood")]
    Unsupported(&'static str),
}

pub type Result<T> = std::result::Result<T, ComputeError>;

/// How a main bin with no observed events continues below λ = 0. There −ln L is λ (relative to
/// the saturated value); a negative Poisson mean has no meaning, yet data with an empty bin pull
/// its λ down, so the best fit can lie on the boundary λ = 0 — which L-BFGS-B, whose bounds are
/// per parameter, cannot follow when f simply becomes +inf past it (its line searches end at the
/// wall and the fit stops far from the minimum: most failed toy fits of real likelihoods). Below
/// 0 the term is λ + λ²/(2w) instead, with w this constant: equal to λ at 0 in value and slope,
/// rising again from λ = −w. Minima pressed against the boundary sit at λ ≈ −w, their −ln L
/// within about w of the minimum on it. (A C² cubic continuation was tried: no fewer failed
/// toy fits.) pyhf continues
/// with λ itself, without bound, and can run off to −∞ there; ROOT refuses negative means.
/// Every dataset carries it as [`Dataset::empty_bin_wall`], which evaluators read (CUDA gets
/// the default as a compiler definition; the f32 wgpu evaluator keeps this constant); fits widen
/// it in their first descents ([`SOFT_EMPTY_BIN_WALLS`]).
pub const EMPTY_BIN_WALL: f64 = 1e-6;

/// The wider empty-bin walls ([`Dataset::empty_bin_wall`]) of a fit's first descents, widest
/// first, before the last on [`EMPTY_BIN_WALL`] (histfit-infer's search, and the resident
/// kernel's fits, which get them as `SOFT_WALL_0`, `SOFT_WALL_1`). Where a minimum presses an
/// empty bin against λ = 0 it lies on the curved boundary λ_b(θ) = 0, and on the stiff wall
/// (curvature 1/w in λ) L-BFGS-B crawls along it: hundreds to thousands of iterations on 1–4 %
/// of the toys of public likelihoods (BENCHMARKS.md, issue 23, session 15). On a wider wall it
/// follows the boundary quickly, and each narrower wall starts next to its minimum. A wider
/// wall changes −ln L only where an empty bin's λ < 0. Raw L-BFGS-B iterations on 300 toys, p99
/// / max, one wall → these three: 1Lbb 1 556 / 2 168 → 620 / 824, 3L off-shell 656 / 1 085 →
/// 223 / 313, 4L 1 023 / 1 802 → 324 / 370, 3L resonance 1 685 / 2 477 → 468 / 694; the end
/// points as low or lower on all but a few (BENCHMARKS.md, issue 23, session 19).
pub const SOFT_EMPTY_BIN_WALLS: [f64; 2] = [1e-2, 1e-4];

/// −ln L of a Poisson constraint Pois(aux | τθ) relative to its saturated value, and its
/// derivative in θ (the caller refuses τθ < 0, and τθ = 0 with aux > 0). With θ̂ = aux/τ and
/// r = θ/θ̂ it is aux·(r − 1 − ln r): the same number as τθ − aux − aux·ln(τθ/aux), without
/// subtracting aux from τθ — a shapesys γ known to 1e-6 has τ ≈ 1e12, where that difference is
/// rounded to 1e-4 and −ln L would move in steps of that size as θ moves by 1e-16 (on the public
/// 3L eRJR likelihood: fits' minima 1e-6–1e-5 apart in twice_nll). Near r = 1 (|r − 1| < ½)
/// r − 1 − ln r is taken as ε − ln(1 + ε) with ε = (θ − θ̂)/θ̂, exact there; away from it as is,
/// exact where θ ≪ θ̂ (a γ at its lower bound 1e-10). The CUDA kernel computes the same.
#[inline(always)]
pub fn poisson_constraint(theta: f64, tau: f64, aux: f64) -> (f64, f64) {
    if aux > 0.0 {
        let hat = aux / tau;
        let r = theta / hat;
        let e = (theta - hat) / hat;
        let v = if e.abs() < 0.5 {
            e - e.ln_1p()
        } else {
            r - 1.0 - r.ln()
        };
        (aux * v, aux / hat * e / r)
    } else {
        (theta * tau, tau)
    }
}

/// −ln L of one main bin relative to its saturated value, and its derivative in λ; `None` where
/// the likelihood is zero (λ ≤ 0 with events observed, or λ not a number). `wall`: the width of
/// an empty bin's continuation below 0 ([`Dataset::empty_bin_wall`], normally
/// [`EMPTY_BIN_WALL`]).
#[inline(always)]
pub fn poisson_term(l: f64, n: f64, wall: f64) -> Option<(f64, f64)> {
    if l == f64::INFINITY {
        // A rate that overflowed: the likelihood is 0 (a NaN from ∞ − ∞ otherwise).
        return None;
    }
    if n > 0.0 {
        (l > 0.0).then(|| {
            // Where λ/n overflows (a count so small it is subnormal), the logarithm of the ratio
            // as a difference (fuzz: workspace_json crash-df502771, an observation of 5e-324).
            let r = l / n;
            let log_ratio = if r.is_finite() {
                r.ln()
            } else {
                l.ln() - n.ln()
            };
            (l - n - n * log_ratio, 1.0 - n / l)
        })
    } else if l >= 0.0 {
        Some((l, 1.0))
    } else if l.is_nan() {
        None
    } else {
        Some((l + l * l / (2.0 * wall), 1.0 + l / wall))
    }
}

/// Evaluates one likelihood: −ln L (pyhf's `-logpdf` for a HistFactory model) and its gradient,
/// and generates its data. Where the likelihood is zero (for a HistFactory model: a
/// non-positive rate where events are observed) the value is `+inf`, never a panic; HistFactory
/// bins without events continue below λ = 0 as [`EMPTY_BIN_WALL`] says, over the width the
/// dataset gives ([`Dataset::empty_bin_wall`]).
pub trait Evaluator {
    /// The likelihood's parameters.
    fn space(&self) -> &ParameterSpace;
    /// −ln L(params | data).
    fn nll(&mut self, params: &[f64], data: &Dataset) -> Result<f64>;
    /// −ln L and its gradient with respect to every parameter (fixed ones included).
    fn nll_grad(&mut self, params: &[f64], data: &Dataset, grad: &mut [f64]) -> Result<f64>;
    /// The Asimov dataset at `params`: the data the likelihood expects there.
    fn asimov(&mut self, params: &[f64]) -> Result<Dataset>;
    /// Toy datasets `indices` of `seed` drawn at `params`; toy i is a pure function of
    /// (likelihood, params, seed, i), the same bits on every device.
    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> Result<Vec<Dataset>>;
    /// Expected counts of the binned observations (for a HistFactory model: the main bins in
    /// channel order), for tables and plots; a likelihood without binned observations says so.
    fn expected_main(&mut self, _params: &[f64], _out: &mut [f64]) -> Result<()> {
        Err(ComputeError::Unsupported("expected binned data"))
    }
    /// The saturated model's side of a goodness of fit: −ln L(params) minus −ln L of the
    /// saturated model (every observation's expectation set to what was observed, the
    /// constraint terms as they are), and the number of observations it is made of. For binned
    /// observations (the default): Σ_b [λ_b − n_b − n_b ln(λ_b/n_b)] over the main bins.
    fn saturated_gap(&mut self, params: &[f64], data: &Dataset) -> Result<(f64, usize)> {
        if data.resident.is_some() {
            return Err(ComputeError::Unsupported(
                "a saturated model of data kept in device memory",
            ));
        }
        let mut lam = vec![0.0; data.main.len()];
        self.expected_main(params, &mut lam)?;
        let gap = lam
            .iter()
            .zip(&data.main)
            .map(|(&l, &n)| poisson_term(l, n, data.empty_bin_wall).map_or(f64::INFINITY, |t| t.0))
            .sum();
        Ok((gap, lam.len()))
    }
}

/// The future of one evaluation ([`AsyncEvaluator`]).
pub type EvalFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<f64>> + 'a>>;

/// The future of evaluations at several points ([`AsyncEvaluator::nll_grad_many`]).
pub type ManyFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + 'a>>;

/// The future of descents run whole by the evaluator ([`AsyncEvaluator::descents`]).
pub type DescentFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<Descent>>> + 'a>>;

/// The evaluator as the fitting code awaits it. A CPU evaluator answers at once ([`Blocking`]);
/// a client of a device batch answers once the batch its request joined has been evaluated, so
/// thousands of fits can be in flight on a few threads without a thread each.
pub trait AsyncEvaluator {
    fn space(&self) -> &ParameterSpace;
    /// −ln L and its gradient.
    fn nll_grad<'a>(
        &'a mut self,
        params: &'a [f64],
        data: &'a Dataset,
        grad: &'a mut [f64],
    ) -> EvalFuture<'a>;
    /// −ln L.
    fn nll<'a>(&'a mut self, params: &'a [f64], data: &'a Dataset) -> EvalFuture<'a>;
    /// −ln L and its gradient at k independent points (`params`: k whole parameter vectors)
    /// into `nll` (k values) and `grad` (k × n): a batch evaluator takes them in one step
    /// instead of one after the other. Each result is the one [`nll_grad`](Self::nll_grad)
    /// gives at that point.
    fn nll_grad_many<'a>(
        &'a mut self,
        params: &'a [f64],
        data: &'a Dataset,
        nll: &'a mut [f64],
        grad: &'a mut [f64],
    ) -> ManyFuture<'a> {
        Box::pin(async move {
            let n = self.space().len();
            for (k, v) in nll.iter_mut().enumerate() {
                let g = &mut grad[k * n..(k + 1) * n];
                *v = self.nll_grad(&params[k * n..(k + 1) * n], data, g).await?;
            }
            Ok(())
        })
    }
    /// −ln L at k independent points (`params`: k whole parameter vectors) into `nll`, each
    /// the value [`nll`](Self::nll) gives there.
    fn nll_many<'a>(
        &'a mut self,
        params: &'a [f64],
        data: &'a Dataset,
        nll: &'a mut [f64],
    ) -> ManyFuture<'a> {
        Box::pin(async move {
            let n = self.space().len();
            for (k, v) in nll.iter_mut().enumerate() {
                *v = self.nll(&params[k * n..(k + 1) * n], data).await?;
            }
            Ok(())
        })
    }
    /// Whether [`descents`](Self::descents) runs L-BFGS-B descents whole where the evaluations
    /// are (a device): a fit then hands it its descents instead of driving them step by step.
    fn offers_descents(&self) -> bool {
        false
    }
    /// Whether [`descents`](Self::descents) also settles the descents that ask for it
    /// ([`DescentRequest::settle`]) and makes Newton steps in place of a descent where asked
    /// ([`DescentRequest::polish`]); a fit makes those itself elsewhere.
    fn finishes_descents(&self) -> bool {
        false
    }
    /// The descents `reqs` of `data`, each from its own start, in order. Only where
    /// [`offers_descents`](Self::offers_descents).
    fn descents<'a>(
        &'a mut self,
        _reqs: &'a [DescentRequest],
        _data: &'a Dataset,
    ) -> DescentFuture<'a> {
        Box::pin(std::future::ready(Err(ComputeError::Unsupported(
            "descents run by the evaluator",
        ))))
    }
}

/// An [`Evaluator`] seen as an [`AsyncEvaluator`] whose futures are ready at once. Holds the
/// evaluator by value or by reference (`Blocking(&mut e)`).
#[derive(Debug, Clone)]
pub struct Blocking<E>(pub E);

impl<E: std::ops::DerefMut> AsyncEvaluator for Blocking<E>
where
    E::Target: Evaluator,
{
    fn space(&self) -> &ParameterSpace {
        self.0.space()
    }
    fn nll_grad<'a>(
        &'a mut self,
        params: &'a [f64],
        data: &'a Dataset,
        grad: &'a mut [f64],
    ) -> EvalFuture<'a> {
        Box::pin(std::future::ready(self.0.nll_grad(params, data, grad)))
    }
    fn nll<'a>(&'a mut self, params: &'a [f64], data: &'a Dataset) -> EvalFuture<'a> {
        Box::pin(std::future::ready(self.0.nll(params, data)))
    }
}

/// Runs a future whose evaluations are [`Blocking`] to completion on this thread. (A future that
/// waits for a device batch must be driven by its batch executor instead.)
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// Evaluates many problems of one model at once — B parameter vectors, each with its own dataset —
/// as a GPU does in one launch. Problem i reads `params[i·n..(i+1)·n]` (n parameters) and
/// `data[i]`, and writes `nll[i]` and `grad[i·n..(i+1)·n]`. Implementations may keep datasets
/// resident between calls (they are compared by content, so callers just pass them each time).
pub trait BatchEvaluator: Send {
    fn space(&self) -> &ParameterSpace;
    /// −ln L and its gradient for every problem.
    fn nll_grad_batch(
        &mut self,
        params: &[f64],
        data: &[&Dataset],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> Result<()>;
    /// As [`nll_grad_batch`](Self::nll_grad_batch), with datasets shared through `Arc`: the
    /// contents behind an `Arc` the evaluator keeps a clone of cannot change, so a device may
    /// key its resident copies on the pointer and skip comparing contents.
    fn nll_grad_batch_shared(
        &mut self,
        params: &[f64],
        data: &[std::sync::Arc<Dataset>],
        nll: &mut [f64],
        grad: &mut [f64],
    ) -> Result<()> {
        let refs: Vec<&Dataset> = data.iter().map(|d| &**d).collect();
        self.nll_grad_batch(params, &refs, nll, grad)
    }
    /// The Asimov dataset at `params` (one parameter vector), as [`Evaluator::asimov`].
    fn asimov(&mut self, params: &[f64]) -> Result<Dataset>;
    /// Toys `indices` of `seed` at `params` (one parameter vector), as [`Evaluator::toys`]; a
    /// device with its own generator draws them there and must give the host's bits.
    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> Result<Vec<Dataset>>;
    /// Expected binned counts for every parameter vector (`out`: B × n_main), as
    /// [`Evaluator::expected_main`].
    fn expected_main_batch(&mut self, _params: &[f64], _out: &mut [f64]) -> Result<()> {
        Err(ComputeError::Unsupported("expected binned data"))
    }
    /// Whole fits of generated toys on the device ([`resident`]), where it runs them.
    fn resident_fits(&mut self) -> Option<&mut dyn ResidentFits> {
        None
    }
    /// An evaluator of the same likelihood on the host, for the few one-off fits around an
    /// ensemble (a device answers one problem per launch far slower than a CPU core), where
    /// the device has one.
    fn host_evaluator(&self) -> Option<Box<dyn Evaluator + Send>> {
        None
    }
    /// Whether [`descents_batch`](Self::descents_batch) runs descents whole on the device.
    fn offers_descents(&self) -> bool {
        false
    }
    /// Whether [`descents_batch`](Self::descents_batch) settles the descents that ask for it
    /// ([`DescentRequest::settle`]) and makes the Newton steps asked for
    /// ([`DescentRequest::polish`]).
    fn finishes_descents(&self) -> bool {
        false
    }
    /// Descents ([`DescentRequest`]) of many fits in one launch: request i descends on
    /// `data[i]`; one result per request, in order.
    fn descents_batch(
        &mut self,
        _reqs: &[DescentRequest],
        _data: &[std::sync::Arc<Dataset>],
    ) -> Result<Vec<Descent>> {
        Err(ComputeError::Unsupported("descents run by the evaluator"))
    }
}

/// One problem at a time through a [`BatchEvaluator`] (B = 1): how a device evaluator serves the
/// single-model inference code (fits, scans, limits) unchanged.
#[derive(Debug, Clone)]
pub struct OneAtATime<B> {
    pub batch: B,
}

impl<B: BatchEvaluator> Evaluator for OneAtATime<B> {
    fn space(&self) -> &ParameterSpace {
        self.batch.space()
    }
    fn nll(&mut self, params: &[f64], data: &Dataset) -> Result<f64> {
        let mut g = vec![0.0; params.len()];
        self.nll_grad(params, data, &mut g)
    }
    fn nll_grad(&mut self, params: &[f64], data: &Dataset, grad: &mut [f64]) -> Result<f64> {
        let mut v = [0.0];
        self.batch.nll_grad_batch(params, &[data], &mut v, grad)?;
        Ok(v[0])
    }
    fn asimov(&mut self, params: &[f64]) -> Result<Dataset> {
        self.batch.asimov(params)
    }
    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> Result<Vec<Dataset>> {
        self.batch.toys(params, seed, indices)
    }
    fn expected_main(&mut self, params: &[f64], out: &mut [f64]) -> Result<()> {
        self.batch.expected_main_batch(params, out)
    }
}

/// Hessian of −ln L by forward differences of the analytic gradient, symmetrised, over the
/// parameters in `which` (row-major `which.len()²`): one gradient per column, or per group of
/// columns of parameters local to different terms ([`hessian_within`]). The step (1e-6 of
/// the parameter's size) keeps truncation and rounding both near 1e-6 relative, far below what an
/// uncertainty needs, at half the cost of central differences.
pub fn hessian<E: Evaluator + ?Sized>(
    eval: &mut E,
    params: &[f64],
    data: &Dataset,
    which: &[usize],
) -> Result<Vec<f64>> {
    block_on(hessian_async(&mut Blocking(eval), params, data, which))
}

/// [`hessian`] for an [`AsyncEvaluator`], its steps inside the evaluator's parameter bounds.
pub async fn hessian_async<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    params: &[f64],
    data: &Dataset,
    which: &[usize],
) -> Result<Vec<f64>> {
    let bounds = eval.space().bounds.clone();
    hessian_within(eval, params, data, which, &bounds).await
}

/// [`hessian_async`] with the steps inside `bounds` (one pair per parameter; a fit's request may
/// narrow or widen the model's): a column whose forward step would leave them is a backward
/// difference (a minimum on its upper bound), whose likelihood beyond the bound may not even be
/// defined.
///
/// Parameters local to one term ([`ParameterSpace::local_term`]: a binned model's staterror,
/// shapesys and shapefactor parameters of one bin, and any modifier of a one-bin sample) are stepped together, one from each term, in a single gradient: a local
/// parameter's gradient then moves only with the one stepped parameter of its own term, which
/// gives their mixed entry (and each one's diagonal) exactly as its own column would. The
/// entries between a local and a non-local parameter come from the non-local one's column.
/// On `workspace_tHu.json` the 41 one-bin γ take 1 gradient instead of 41.
pub async fn hessian_within<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    params: &[f64],
    data: &Dataset,
    which: &[usize],
    bounds: &[(f64, f64)],
) -> Result<Vec<f64>> {
    let n = params.len();
    let k = which.len();
    let columns = hessian_columns(&eval.space().local_term, which);
    // Entry (row, col) once known; a pair known both ways is averaged, one known once is copied.
    let mut h = vec![0.0; k * k];
    let mut known = vec![false; k * k];
    let mut x = params.to_vec();
    let (mut g0, mut gp) = (vec![0.0; n], vec![0.0; n]);
    // For a group's gradient: the stepped column on each term, and each column's step.
    let mut on_term: std::collections::HashMap<u32, usize> = Default::default();
    let mut steps = vec![0.0; k];
    eval.nll_grad(params, data, &mut g0).await?;
    for group in &columns {
        for &col in group {
            let j = which[col];
            let mut step = 1e-6 * params[j].abs().max(1.0);
            if params[j] + step > bounds[j].1 && params[j] - step >= bounds[j].0 {
                step = -step;
            }
            x[j] = params[j] + step;
            steps[col] = x[j] - params[j]; // the step actually taken in floating point
        }
        eval.nll_grad(&x, data, &mut gp).await?;
        for &col in group {
            x[which[col]] = params[which[col]];
        }
        if let [col] = group[..] {
            for (row, &i) in which.iter().enumerate() {
                h[row * k + col] = (gp[i] - g0[i]) / steps[col];
                known[row * k + col] = true;
            }
            continue;
        }
        on_term.clear();
        for &col in group {
            on_term.insert(
                eval.space().local_term[which[col]].expect("grouped: local"),
                col,
            );
        }
        for (row, &i) in which.iter().enumerate() {
            let stepped = eval.space().local_term[i].and_then(|t| on_term.get(&t));
            if let Some(&col) = stepped {
                h[row * k + col] = (gp[i] - g0[i]) / steps[col];
                known[row * k + col] = true;
            }
        }
    }
    for r in 0..k {
        for c in r..k {
            let (a, b) = (r * k + c, c * k + r);
            let m = match (known[a], known[b]) {
                (true, true) => 0.5 * (h[a] + h[b]),
                (true, false) => h[a],
                (false, true) => h[b],
                // Two local parameters of different terms: no mixed derivative.
                (false, false) => 0.0,
            };
            h[a] = m;
            h[b] = m;
        }
    }
    Ok(h)
}

/// The gradients a Hessian over `which` takes, as groups of columns stepped together: each
/// non-local parameter alone, the local ones in groups with one parameter per term (the i-th
/// local parameter of every term in the i-th group).
fn hessian_columns(local_term: &[Option<u32>], which: &[usize]) -> Vec<Vec<usize>> {
    let mut columns = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut seen: std::collections::HashMap<u32, usize> = Default::default();
    for (col, &j) in which.iter().enumerate() {
        match local_term[j] {
            None => columns.push(vec![col]),
            Some(t) => {
                let g = seen.entry(t).or_insert(0);
                if *g == groups.len() {
                    groups.push(Vec::new());
                }
                groups[*g].push(col);
                *g += 1;
            }
        }
    }
    columns.extend(groups);
    columns
}

/// A caught panic's message, where it carries one (worker threads turn panics into errors that
/// keep it).
pub fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod constraint_tests {
    use super::poisson_constraint;

    /// −ln Pois(aux | τθ) relative to its saturated value against the direct form where that is
    /// exact (moderate τθ), its gradient against differences of the value, and the regimes the
    /// direct form loses: τ = 1e12 near the minimum, θ at pyhf's lower bound 1e-10.
    #[test]
    fn poisson_constraints_are_exact_in_every_regime() {
        let direct = |theta: f64, tau: f64, aux: f64| {
            let rate = theta * tau;
            rate - aux - aux * (rate / aux).ln()
        };
        for (theta, tau, aux) in [
            (1.3, 25.0, 20.0),
            (0.4, 4.0, 7.0),
            (2.0, 0.058, 1.0),
            (1e-10, 25.0, 25.0),
        ] {
            let (v, g) = poisson_constraint(theta, tau, aux);
            let want = direct(theta, tau, aux);
            assert!(
                (v - want).abs() <= 1e-13 * want.abs().max(1.0),
                "{theta} {tau} {aux}: {v} {want}"
            );
            let h = 1e-7 * theta;
            let fd = (poisson_constraint(theta + h, tau, aux).0
                - poisson_constraint(theta - h, tau, aux).0)
                / (2.0 * h);
            assert!(
                (g - fd).abs() <= 1e-6 * g.abs().max(1.0),
                "{theta} {tau} {aux}: {g} {fd}"
            );
        }
        // τ = 1e12, aux = 1e12: the value at θ = 1 + δ is aux·δ²/2 (1 − 2δ/3 …), smooth in δ
        let (tau, aux) = (1e12, 1e12);
        for delta in [1e-9, 3e-8, -2e-7] {
            let (v, g) = poisson_constraint(1.0 + delta, tau, aux);
            let want = aux * delta * delta * (0.5 - delta / 3.0);
            assert!((v - want).abs() <= 1e-6 * want, "{delta}: {v} {want}");
            assert!(
                (g - aux * delta / (1.0 + delta)).abs() <= 1e-6 * g.abs(),
                "{delta}: {g}"
            );
        }
        // θ = 1e-10 against θ̂ = 1: aux·(r − 1 − ln r) with r = 1e-10
        let (v, _) = poisson_constraint(1e-10, 0.058, 0.058);
        let want = 0.058 * (1e-10 - 1.0 - (1e-10f64).ln());
        assert!((v - want).abs() <= 1e-14 * want, "{v} {want}");
        // no observed count: τθ
        assert_eq!(poisson_constraint(0.5, 4.0, 0.0), (2.0, 4.0));
    }
}

//! Maximum likelihood fits: free, conditional (any parameter fixed at a value) and warm-started,
//! with uncertainties and correlations from the Hessian at the minimum.
//!
//! A fit is a search for the lowest minimum it can certify:
//!
//! - [`problem`]: the request checked and put into scaled coordinates;
//! - [`starts`]: the starts — the requested point (the model's initial point where −ln L is not
//!   finite there) and, for models small enough, further deterministic starts that look for a
//!   lower basin;
//! - [`descent`]: one L-BFGS-B descent as a request (start, box, sides, restarts, a watch that
//!   gives it up), made on the host step by step or handed whole to an evaluator that runs it
//!   (a GPU);
//! - [`search`]: from each start, L-BFGS-B (first on wider empty-bin walls where the data have an
//!   empty bin, then on their own) and a probe of saddles it cannot see, and, where the
//!   model has kinks, [`kinks`]: one-sided first-order checks, orthant descents that treat each
//!   kink as a bound, the other side of concave kinks searched (greedily flipped together
//!   first);
//! - here: the lowest minimum, its certificate (a fit is converged only if the projected
//!   gradient, one-sided at kinks, is within [`CERTIFY_PG`]; where stiff directions leave it
//!   above, [`polish`] finishes the minimum by Newton steps first; a certified minimum whose
//!   projected gradient is still above [`POLISH_PG`] gets one more round of them, so that fits
//!   of the same data whose sums round differently end at the same point), and the
//!   uncertainties.
//!
//! Every fit of histfit-infer (free, conditional, Asimov, scans, ranking, toys on any device,
//! the differentiable statistics) comes through [`minimise_async`], so the same rules hold in
//! all of them.

mod descent;
pub(crate) use descent::on_host as descent_on_host;
mod kinks;
mod polish;
mod problem;
mod search;
mod starts;
pub(crate) use starts::{SecondStart, FURTHER_STARTS, PROBE_AROUND};
mod thin;
mod uncertainty;

use crate::Result;
use histfit_optim::Options;
use histfit_seam::{block_on, AsyncEvaluator, Blocking, Dataset, Evaluator};
use problem::Problem;
use search::{Local, Search};
use serde::Serialize;
use uncertainty::add_uncertainties;
pub use uncertainty::{check_dense, DENSE_HESSIAN_LIMIT};

/// A fit reports convergence only where no projected gradient component (one-sided at a kink,
/// per unit of each parameter's scale) exceeds this. At the optimizer's own stopping point
/// (estimated distance to minimum 1e-11) components are 1e-7–1e-4 on real models.
pub const CERTIFY_PG: f64 = 1e-3;

/// A certified fit that stops with a projected gradient above this is finished by one more
/// round of Newton steps (kept only where it stays certified): the precision that toy fits
/// compared across devices need (see `polish.rs`'s `sharpen`).
pub const POLISH_PG: f64 = 1e-4;

/// How many further starts a fit makes to look for a lower minimum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Starts {
    /// By the number of free parameters: 24 up to 16, fewer up to 64, none beyond; up to four
    /// times as many where the starts keep finding different minima. Where there are any, one
    /// more comes first: the free normalisations low (`starts::low_normalisations`).
    #[default]
    Auto,
    /// This many per batch, batches extended as for `Auto`, with the low start where N > 0
    /// (0: only the requested start).
    Count(usize),
}

impl Starts {
    /// Further starts per batch for a problem with `n_free` free parameters.
    fn per_batch(self, n_free: usize) -> usize {
        match self {
            Starts::Auto => starts::auto_starts(n_free),
            Starts::Count(n) => n,
        }
    }
}

/// What to fit and how.
#[derive(Debug, Clone, Default)]
pub struct FitOptions {
    /// Starting point (default: the model's suggested init).
    pub init: Option<Vec<f64>>,
    /// Parameters held at a value, on top of those the model fixes (index, value).
    pub fix: Vec<(usize, f64)>,
    /// Compute the Hessian, uncertainties and correlations at the minimum.
    pub uncertainties: bool,
    /// Optimizer settings (default when `None`).
    pub optimizer: Option<Options>,
    /// Replacement bounds for every parameter (default: the model's suggested bounds).
    pub bounds: Option<Vec<(f64, f64)>>,
    /// Further starts searched for a lower minimum.
    pub starts: Starts,
    /// The most free parameters whose dense Hessian the uncertainties may build (`None`:
    /// [`DENSE_HESSIAN_LIMIT`]); above it only the POI's uncertainty is computed, without the
    /// matrix (conjugate gradients on Hessian–vector products).
    pub max_dense_parameters: Option<usize>,
    /// The optimizer's unit of each parameter, one per parameter (`None`: the likelihood's,
    /// [`ParameterSpace::scales`](histfit_seam::ParameterSpace::scales)): the fit works in
    /// θ/scale, and its certificate ([`CERTIFY_PG`]) and further starts' spread are per unit of
    /// it; each free parameter's must be positive and finite (a held one's is not used).
    /// Ensembles of toys pass [`curvature_scales`] at their generating point.
    pub scales: Option<Vec<f64>>,
}

impl FitOptions {
    /// The dense-Hessian limit in force.
    pub fn dense_limit(&self) -> usize {
        self.max_dense_parameters.unwrap_or(DENSE_HESSIAN_LIMIT)
    }
}

/// The outcome of a fit. Uncertainties of fixed parameters are 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitResult {
    pub par_names: Vec<String>,
    pub bestfit: Vec<f64>,
    /// One per parameter (0 for fixed ones and those at their kink); NaN (`null` in JSON) for
    /// those not computed: above the dense-Hessian limit only the POI's is.
    pub uncertainties: Option<Vec<f64>>,
    /// Row-major n×n over all parameters (zero rows/columns for fixed ones); `None` above the
    /// dense-Hessian limit.
    pub covariance: Option<Vec<f64>>,
    pub correlation: Option<Vec<f64>>,
    pub twice_nll: f64,
    pub converged: bool,
    pub reason: String,
    pub iterations: usize,
    pub evaluations: usize,
    pub projected_gradient_norm: f64,
    /// Whether the Hessian at the minimum was positive definite (uncertainties are meaningful).
    pub hessian_positive_definite: Option<bool>,
    pub fixed: Vec<bool>,
    /// Searches made (1 + further starts whose point was finite).
    pub starts: usize,
    /// The kinked parameters (codes 0 and 1) that are free, and where each ended.
    pub kinks: Vec<KinkState>,
    /// What the caller should know about this minimum (several minima found, a start that was
    /// not finite, searches capped).
    pub warnings: Vec<String>,
}

/// Where a kinked parameter ended relative to its kink at 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KinkState {
    pub name: String,
    /// "at_kink", "above" or "below".
    pub side: &'static str,
    /// Whether the other side of its kink was searched for a lower minimum.
    pub other_side_searched: bool,
}

/// Fits `data` by minimising −ln L with L-BFGS-B.
pub fn fit<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    opts: &FitOptions,
) -> Result<FitResult> {
    block_on(fit_async(&mut Blocking(eval), data, opts))
}

/// [`fit`] for an [`AsyncEvaluator`]: the same fit, whose evaluations may wait for a device
/// batch (many fits then run in lockstep on a few threads).
pub async fn fit_async<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    opts: &FitOptions,
) -> Result<FitResult> {
    // Minimise −ln L without the dataset's constant and add it back to the result. The
    // constant (≈ 166 for tHu, next to a varying part of ≈ 14) would cost f four bits of
    // resolution, and the line search with them the last digits of the minimum, which the
    // envelope-theorem gradients of profiled statistics depend on.
    let varying = data.without_constant();
    let mut r = minimise_async(eval, &varying, opts).await?;
    r.twice_nll += 2.0 * data.constant_term();
    Ok(r)
}

/// [`fit_async`] on a dataset whose constant is zero (twice_nll without it): for drivers that
/// evaluate the batch themselves and so must hand the evaluator that same dataset.
pub(crate) async fn minimise_async<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    opts: &FitOptions,
) -> Result<FitResult> {
    let p = Problem::new(eval.space(), opts)?;
    if p.free.is_empty() {
        // Nothing to fit: the result is the likelihood at the given point.
        let f = eval.nll(&p.start, data).await?;
        return Ok(point_result(
            &p,
            2.0 * f,
            opts.uncertainties,
            opts.dense_limit(),
        ));
    }
    // A large event-level dataset's fit starts from its subsample's (see `thin`).
    let (warm, subsample_evaluations) = thin::warm_start(eval, data, &p, opts.starts).await?;
    let mut s = Search::new(eval, data, &p);
    s.evaluations += subsample_evaluations;
    let newton = match &warm {
        Some(w) => s.newton_from(w).await?,
        None => None,
    };
    let (best, starts) = match newton {
        Some(best) => (best, 1),
        None => search_starts(&mut s, opts.starts).await?,
    };
    let mut best = s.compare_near_kinks(best).await?;
    let cert = s.finish(&mut best).await?;
    let pg = cert
        .as_ref()
        .map_or(f64::INFINITY, |c| c.projected_gradient);
    let (converged, reason) = verdict(&p, &best, pg);
    let bestfit = p.x_of(&best.z);
    let kinks = kink_states(&p, &best);
    let mut warnings = s.notes;
    warnings.extend(best.notes.iter().cloned());
    let (iterations, evaluations) = (s.iterations, s.evaluations);
    let mut result = FitResult {
        par_names: p.names.clone(),
        bestfit,
        uncertainties: None,
        covariance: None,
        correlation: None,
        twice_nll: 2.0 * best.f,
        converged,
        reason,
        iterations,
        evaluations,
        projected_gradient_norm: pg,
        hessian_positive_definite: None,
        fixed: p.fixed.clone(),
        starts,
        kinks,
        warnings,
    };
    if opts.uncertainties {
        // A parameter at its kink has no curvature to speak of (the slope jumps there): its
        // uncertainty is reported as 0, as for a fixed one.
        let at_kink: Vec<usize> = (0..p.free.len())
            .filter(|&k| p.kinks[k] && best.z[k].abs() <= kinks::AT_KINK)
            .map(|k| p.free[k])
            .collect();
        add_uncertainties(eval, data, &p, &at_kink, opts.dense_limit(), &mut result).await?;
    }
    Ok(result)
}

/// Newton steps from a fit's minimum `x` (the parameters in `held` and the model's fixed ones
/// stay put; see [`polish`]): for callers that need the minimum beyond f's resolution, such as
/// the envelope-theorem gradients of profiled statistics.
pub(crate) fn polish_minimum<E: Evaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    x: &mut [f64],
    held: &[usize],
) -> Result<()> {
    let opts = FitOptions {
        init: Some(x.to_vec()),
        fix: held.iter().map(|&i| (i, x[i])).collect(),
        ..Default::default()
    };
    let p = Problem::new(eval.space(), &opts)?;
    let mut blocking = Blocking(eval);
    block_on(async {
        let mut s = Search::new(&mut blocking, data, &p);
        let z = p.z_of(x);
        let f = s.nll(&z).await?;
        let mut at = Local {
            z,
            f,
            converged: true,
            reason: String::new(),
            pinned: Vec::new(),
            compared: Vec::new(),
            notes: Vec::new(),
        };
        s.polish(&mut at).await?;
        p.set_x(&at.z, x);
        Ok(())
    })
}

/// Each parameter's unit for fits of data drawn at `at`: the width 1/√H_ii of −ln L of the
/// Asimov data there (the curvature toys drawn at `at` have on average), rounded to a power of
/// two; the likelihood's own scale where that curvature is not positive (a parameter the data
/// do not see). Parameters the fit holds (`opts.fix`, the model's fixed ones) keep their scale.
///
/// L-BFGS-B starts from a multiple of the identity as its Hessian: in these units every
/// direction has a curvature near 1, where the constraint widths leave free normalisations and
/// the POI at their curvature, often 100× apart. Toy fits take 2–8× fewer evaluations (tHu's
/// median 106 → 50 iterations, 3L off-shell's 253 → 38; BENCHMARKS.md, issue 23). Powers of two
/// make θ/scale exact in floating point. Ensembles compute these with the host's f64 evaluator
/// (`ToyRunner::single`), so every device, worker split and shard fits in the same units. Costs
/// one Hessian (one gradient per non-local parameter and one per group of one-bin parameters),
/// once per ensemble. What a fit measures in units of scale is then measured in curvature
/// widths: its certificate, and for models small enough to take further starts, their spread.
pub fn curvature_scales<E: Evaluator + ?Sized>(
    eval: &mut E,
    at: &[f64],
    opts: &FitOptions,
) -> Result<Vec<f64>> {
    let p = Problem::new(
        eval.space(),
        &FitOptions {
            init: Some(at.to_vec()),
            scales: None,
            ..opts.clone()
        },
    )?;
    let mut scales = eval.space().scales.clone();
    let asimov = eval.asimov(&p.start)?.without_constant();
    let bounds = p.x_bounds();
    let h = block_on(histfit_seam::hessian_within(
        &mut Blocking(eval),
        &p.start,
        &asimov,
        &p.free,
        &bounds,
    ))?;
    let k = p.free.len();
    for (j, &i) in p.free.iter().enumerate() {
        let hii = h[j * k + j];
        let s = 1.0 / hii.sqrt();
        // Within a factor 2²⁰ of the likelihood's scale: a sanity bound on a difference
        // quotient, far outside any model's real range.
        if s.is_finite() && s > 0.0 && (s / scales[i]).log2().abs() < 20.0 {
            scales[i] = s.log2().round().exp2();
        }
    }
    Ok(scales)
}

/// A fit a device may run whole ([`histfit_seam::ResidentFits`]): the request's parameters
/// in the fitting code's terms. Given only where the fit starts from one point (after those on
/// the wider empty-bin walls, which the device makes too) — no further starts; with kinks, the
/// device runs their rules as `kinks` and `search` do — so the device's end point, once
/// certified ([`device_fit_certified`]), is what this fit would report.
pub(crate) struct DevicePlan {
    pub init: Vec<f64>,
    /// Where the fit starts when −ln L is not finite at `init` (`search_starts`).
    pub model_init: Vec<f64>,
    pub fixed: Vec<bool>,
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    pub scales: Vec<f64>,
    pub kinks: Vec<bool>,
    pub settings: histfit_seam::ResidentSettings,
}

/// The device plan of a fit with `opts` on `space`, or `None` where the fit needs further
/// starts or uncertainties. A device makes a kinked fit's kink rules too (the host's, ported);
/// `HISTFIT_GPU_KINKED=hybrid` leaves them to the host, the device making its descents, for
/// comparisons.
pub(crate) fn device_plan(
    space: &histfit_seam::ParameterSpace,
    opts: &FitOptions,
) -> Result<Option<DevicePlan>> {
    let p = Problem::new(space, opts)?;
    let hybrid = std::env::var("HISTFIT_GPU_KINKED").is_ok_and(|v| v == "hybrid");
    if (p.has_kinks() && hybrid)
        || opts.starts.per_batch(p.free.len()) > 0
        || opts.uncertainties
        || p.free.is_empty()
    {
        return Ok(None);
    }
    // Bounds in θ (Problem holds the free ones in z): the device scales them itself.
    let (lower, upper) = opts
        .bounds
        .as_ref()
        .unwrap_or(&space.bounds)
        .iter()
        .copied()
        .unzip();
    Ok(Some(DevicePlan {
        settings: resident_settings(&p.options),
        init: p.start,
        model_init: p.model_start,
        fixed: p.fixed,
        lower,
        upper,
        scales: opts.scales.clone().unwrap_or_else(|| space.scales.clone()),
        kinks: space.kinked.clone(),
    }))
}

/// A device fit's settings: the optimizer's options, the fit's certificate and the threshold of
/// its last round of Newton steps.
pub fn resident_settings(o: &Options) -> histfit_seam::ResidentSettings {
    histfit_seam::ResidentSettings {
        memory: o.memory,
        pgtol: o.pgtol,
        ftol: o.ftol,
        edm: o.edm,
        max_iterations: o.max_iterations,
        max_evaluations: o.max_evaluations,
        c1: o.c1,
        c2: o.c2,
        full_first_step: o.full_first_step,
        certify: CERTIFY_PG,
        polish_pg: POLISH_PG,
        fit_evaluations: usize::MAX,
    }
}

/// Whether a device fit made under a [`DevicePlan`] is this fit's result: stopped by one of the
/// optimizer's rules (the device runs the same L-BFGS-B, so it takes the same path to the same
/// minimum), finite, not sent back by the device (a stalled search or a point its Newton round
/// leaves uncertified: the host's further finishing rounds), finished to [`POLISH_PG`] (the
/// device's Newton rounds are the host's; where
/// they leave the point above it, the host's `sharpen` may go on with a descent the smooth
/// kernel does not make) and no coordinate left at its start (where the search would probe for
/// a saddle; the kinked kernel makes that probe itself and reports none). Anything else is
/// fitted again on the host, so the fit's rules — its polish, saddle probe and failure
/// reasons — hold.
pub fn device_fit_certified(r: &histfit_seam::ResidentFit) -> bool {
    r.status == histfit_seam::ResidentStatus::Converged
        && r.nll.is_finite()
        && r.projected_gradient <= POLISH_PG
        && r.unmoved == 0
}

/// The lowest minimum over the fit's starts (see [`starts`]) and how many searches ran.
async fn search_starts<E: AsyncEvaluator + ?Sized>(
    s: &mut Search<'_, E>,
    policy: Starts,
) -> Result<(Local, usize)> {
    let p = s.p;
    let z_model = p.z_of(&p.model_start);
    let mut z_first = p.z_of(&p.start);
    let requested_finite = s.nll(&z_first).await?.is_finite();
    let mut fell_back = false;
    if !requested_finite && z_model != z_first && s.nll(&z_model).await?.is_finite() {
        s.notes.push(
            "-ln L is not finite at the requested start; the fit started from the model's initial point".into(),
        );
        z_first = z_model.clone();
        fell_back = true;
    }
    let mut best = s.local_minimum(&z_first).await?;
    let first_f = best.f;
    let extra = policy.per_batch(p.free.len());
    let (mut searches, mut tried) = (1, 1 + usize::from(fell_back));
    // Where the starts find more than one minimum the likelihood is multimodal, and a basin a
    // few starts in a hundred reach may still be missed: the starts go on in batches of the
    // same size while a batch finds minima that differ, up to four batches.
    let (mut batch_end, mut several) = (extra as u64, false);
    let mut lowest_converged = if best.converged { best.f } else { f64::NAN };
    // The first further start puts the free normalisations low, where the drawn ones never go.
    let mut low = match extra > 0 {
        true => starts::low_normalisations(p, &z_model),
        false => None,
    };
    let mut j = 0;
    while j < batch_end || low.is_some() {
        // Odd starts spread around the model's initial point; even ones hop from the lowest
        // minimum so far (a basin next to the best one is often the next lower).
        let z = match low.take() {
            Some(z) => z,
            None => {
                j += 1;
                match j % 2 == 1 {
                    true => starts::start_point(p, &z_model, j, 2.0),
                    false => starts::start_point(p, &best.z, j, 1.0),
                }
            }
        };
        tried += 1;
        if s.nll(&z).await?.is_finite() {
            searches += 1;
            let r = s.local_minimum(&z).await?;
            if r.converged {
                if (r.f - lowest_converged).abs() > 5e-7 {
                    several |= !lowest_converged.is_nan();
                }
                lowest_converged = lowest_converged.min(r.f);
            }
            if r.better_than(&best) {
                best = r;
            }
        }
        if j == batch_end && several && batch_end < (extra as u64).saturating_mul(4) {
            batch_end += extra as u64;
            several = false;
        }
    }
    // A lowest point where its search stopped short: one more search from there.
    if !best.converged && best.f.is_finite() && searches > 1 {
        let z = best.z.clone();
        let r = s.local_minimum(&z).await?;
        if r.better_than(&best) {
            best = r;
        }
    }
    if best.converged && first_f.is_finite() && first_f > best.f + 5e-7 {
        s.notes.push(format!(
            "the likelihood has several minima: the search from the first start ended {:.4} above the lowest of {searches} starts (reported), in twice_nll",
            2.0 * (first_f - best.f)
        ));
    }
    if !best.f.is_finite() && !requested_finite {
        best.reason = format!(
            "objective is not finite at the starting point, nor at {} other starts",
            tried - 1
        );
    }
    Ok((best, searches))
}

/// Whether `best` is a minimum by the certificate (projected gradient `pg`, one-sided at kinks,
/// within [`CERTIFY_PG`]), and the reason the result gives.
fn verdict(p: &Problem, best: &Local, pg: f64) -> (bool, String) {
    // A line search that found no decrease, at a point where Newton steps found none either and
    // the first-order conditions are met, stopped at a minimum to f's resolution.
    let certified_stall = polish::stalled(best) && pg <= CERTIFY_PG;
    let converged = (best.converged || certified_stall) && pg <= CERTIFY_PG;
    let mut reason = best.reason.clone();
    if certified_stall {
        reason = format!("{reason}; first-order conditions met (projected gradient {pg:.2e})");
    }
    if best.converged && !converged {
        reason = format!(
            "stopped where the projected gradient (one-sided at kinks) is {pg:.2e}, above {CERTIFY_PG:.0e}: not a minimum ({reason})"
        );
    }
    let at_kink = (0..p.free.len())
        .filter(|&k| p.kinks[k] && best.z[k].abs() <= kinks::AT_KINK)
        .count();
    if at_kink > 0 {
        reason = format!("{reason} ({at_kink} nuisance parameters at a kink minimum, alpha = 0)");
    }
    (converged, reason)
}

/// `n` flags, set at `indices`: a membership test without a scan of the list per element.
pub(crate) fn index_mask(n: usize, indices: &[usize]) -> Vec<bool> {
    let mut mask = vec![false; n];
    for &i in indices {
        mask[i] = true;
    }
    mask
}

/// Where each free kinked parameter ended.
fn kink_states(p: &Problem, best: &Local) -> Vec<KinkState> {
    let compared = index_mask(p.free.len(), &best.compared);
    (0..p.free.len())
        .filter(|&k| p.kinks[k])
        .map(|k| KinkState {
            name: p.names[p.free[k]].clone(),
            side: match best.z[k] {
                z if z.abs() <= kinks::AT_KINK => "at_kink",
                z if z > 0.0 => "above",
                _ => "below",
            },
            other_side_searched: compared[k],
        })
        .collect()
}

/// The result of a fit with nothing free: the likelihood at the given point.
fn point_result(p: &Problem, twice_nll: f64, uncertainties: bool, limit: usize) -> FitResult {
    let n = p.n();
    FitResult {
        par_names: p.names.clone(),
        bestfit: p.start.clone(),
        uncertainties: uncertainties.then(|| vec![0.0; n]),
        // The n×n zeros only where a dense matrix is allowed at all.
        covariance: (uncertainties && n <= limit).then(|| vec![0.0; n * n]),
        correlation: None,
        twice_nll,
        converged: true,
        reason: "no free parameters".into(),
        iterations: 0,
        evaluations: 1,
        projected_gradient_norm: 0.0,
        hessian_positive_definite: None,
        fixed: p.fixed.clone(),
        starts: 0,
        kinks: Vec::new(),
        warnings: Vec::new(),
    }
}

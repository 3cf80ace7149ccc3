//! Whole fits on the device that holds the likelihood: the seam for toy ensembles whose fits
//! run where the toys are drawn ([`ResidentFits`]), so an ensemble costs one launch instead of a
//! host round trip per optimizer step.
//!
//! A request is stated in the fitting code's own terms (histfit-infer's `fit/problem.rs`): the
//! scaled coordinates z = θ/s with their bounds, the fixed parameters, the kinks, and the
//! optimizer's tolerances. What comes back per toy is small: −ln L at the end point (without
//! and with the dataset's constant), the POI, the projected gradient, counts and a status — and
//! the fitted vector only when asked. Everything a host refit needs to decide whether to trust
//! a device result (a failed start, a stopped search, coordinates the fit never moved) is in
//! [`ResidentFit`]; inference decides what to do with it.
//!
//! Also the descents of host fits a device runs whole ([`DescentRequest`], [`Descent`]): the
//! fits it does not make itself (further starts; kinked fits where the hybrid is asked for)
//! stay on the host, their L-BFGS-B runs go to the device one request each.

use crate::Result;

/// The optimizer's settings for fits on the device (histfit-optim's `Options` fields that apply),
/// and the fit's certificate and last Newton round (histfit-infer's `CERTIFY_PG`, `POLISH_PG`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResidentSettings {
    pub memory: usize,
    pub pgtol: f64,
    pub ftol: f64,
    pub edm: f64,
    pub max_iterations: usize,
    pub max_evaluations: usize,
    pub c1: f64,
    pub c2: f64,
    /// histfit-optim's `full_first_step` (event-level models' fits; the CUDA kernels'
    /// L-BFGS-B takes a unit-length first step only and refuses it).
    pub full_first_step: bool,
    /// The fit's certificate: the largest projected gradient a converged fit may keep (above
    /// it, the device finishes the minimum by Newton steps as the host fit does).
    pub certify: f64,
    /// A certified fit stopped with a projected gradient above this is finished by one more
    /// round of Newton steps, kept where it stays certified (histfit-infer's `POLISH_PG`).
    pub polish_pg: f64,
    /// The most evaluations one whole fit makes on the device (`usize::MAX`: no budget): a fit
    /// that reaches it stops and comes back uncertified, for the host to fit again (or, for an
    /// ensemble's further start, to drop, as the host gives up its own beyond it). A launch
    /// lasts as long as its slowest fit, and one fit on a device is several times slower than
    /// on a host core.
    pub fit_evaluations: usize,
}

/// An ensemble to generate and fit: toys `indices` of `seed` drawn at `gen_params`, each fitted
/// from `init` with the parameters in `fixed` held (at their `init` values) within
/// `lower`..`upper`, in the coordinates θ/`scales`. A toy where −ln L is not finite at `init`
/// starts from `model_init` instead, where it is finite there (as histfit-infer's fit does).
#[derive(Debug, Clone)]
pub struct ResidentRequest<'a> {
    pub gen_params: &'a [f64],
    pub seed: u64,
    pub indices: std::ops::Range<u64>,
    pub init: &'a [f64],
    /// The fit's fallback start: the model's initial point with the fixed parameters at their
    /// values (a fixed parameter's entry is not read: it stays at its `init` value).
    pub model_init: &'a [f64],
    /// Each toy's own start in place of `init`, where given: n values per toy of `indices`, in
    /// their order (an ensemble's second starts; fixed parameters' entries are not read).
    pub starts: Option<&'a [f64]>,
    /// The toys to fit where given, in place of `indices` (which then numbers the positions in
    /// this list, 0..len, as `starts` does): a few toys picked from an ensemble.
    pub list: Option<&'a [u64]>,
    pub fixed: &'a [bool],
    pub lower: &'a [f64],
    pub upper: &'a [f64],
    pub scales: &'a [f64],
    pub kinks: &'a [bool],
    pub settings: ResidentSettings,
    /// The parameter whose fitted value each result carries (the POI), if any.
    pub report: Option<usize>,
    /// Bring every fitted vector back.
    pub want_params: bool,
    /// Told how many more toys the device has finished, while it fits (see [`Progress`]).
    pub progress: Option<Progress<'a>>,
}

impl<'a> ResidentRequest<'a> {
    /// The index of the toy at `i` of `indices`: `i`, or its entry of `list`.
    pub fn toy(&self, i: u64) -> u64 {
        match self.list {
            Some(l) => l[(i - self.indices.start) as usize],
            None => i,
        }
    }

    /// The request for toys `block` of its `indices` (a worker's share), each with its start
    /// (and its index, where listed).
    pub fn part(&self, block: std::ops::Range<u64>) -> ResidentRequest<'a> {
        let n = self.init.len();
        let at = |i: u64| (i - self.indices.start) as usize * n;
        let pos = |i: u64| (i - self.indices.start) as usize;
        ResidentRequest {
            starts: self.starts.map(|s| &s[at(block.start)..at(block.end)]),
            list: self.list.map(|l| &l[pos(block.start)..pos(block.end)]),
            indices: block,
            ..self.clone()
        }
    }
}

/// A resident ensemble's progress: called with the number of toys finished since its previous
/// call, from any thread (a split ensemble's workers each report their own), at the latest when
/// its launch ends; the calls of one ensemble add up to its toy count. Toys whose fit the device could not
/// certify are among them (the caller fits those again).
#[derive(Clone, Copy)]
pub struct Progress<'a>(pub &'a (dyn Fn(usize) + Sync));

impl std::fmt::Debug for Progress<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

/// How a fit on the device ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResidentStatus {
    /// One of the optimizer's stopping rules was met and the certificate holds.
    Converged,
    /// −ln L or its gradient is not finite at the start, nor −ln L at the model's initial point.
    FailedStart,
    /// The line search found no decrease away from a minimum.
    FailedLineSearch,
    /// The iteration or evaluation limit was reached.
    FailedLimit,
    /// No descent direction away from a minimum.
    FailedDirection,
    /// The optimizer stopped, but the projected gradient stayed above the certificate after
    /// the Newton steps; or a kinked fit ended at a point reached by flipping kinked parameters
    /// across their kinks and not descended from (the host fit says so in words only).
    Uncertified,
}

impl ResidentStatus {
    /// The codes the device writes (CUDA gets them as compiler definitions).
    pub const CODES: [(&'static str, i32, ResidentStatus); 6] = [
        ("FIT_CONVERGED", 1, ResidentStatus::Converged),
        ("FIT_FAILED_START", 2, ResidentStatus::FailedStart),
        (
            "FIT_FAILED_LINE_SEARCH",
            3,
            ResidentStatus::FailedLineSearch,
        ),
        ("FIT_FAILED_LIMIT", 4, ResidentStatus::FailedLimit),
        ("FIT_FAILED_DIRECTION", 5, ResidentStatus::FailedDirection),
        ("FIT_UNCERTIFIED", 6, ResidentStatus::Uncertified),
    ];

    pub fn from_code(code: i32) -> Option<ResidentStatus> {
        Self::CODES
            .iter()
            .find(|(_, c, _)| *c == code)
            .map(|(_, _, s)| *s)
    }

    pub fn describe(&self) -> &'static str {
        match self {
            ResidentStatus::Converged => "converged",
            ResidentStatus::FailedStart => {
                "-ln L is not finite at the starting point, nor at the model's initial point"
            }
            ResidentStatus::FailedLineSearch => "line search failed to reduce f",
            ResidentStatus::FailedLimit => "reached the iteration or evaluation limit",
            ResidentStatus::FailedDirection => "no descent direction",
            ResidentStatus::Uncertified => "stopped above the certificate's projected gradient",
        }
    }
}

/// One toy's fit on the device.
#[derive(Debug, Clone, PartialEq)]
pub struct ResidentFit {
    pub index: u64,
    /// −ln L at the end point without the dataset's constant (what the fit minimised).
    pub nll: f64,
    /// The toy dataset's constant ([`crate::Dataset::constant_term`]).
    pub constant: f64,
    /// The reported parameter's fitted value (0 when none was asked).
    pub poi: f64,
    /// ‖P(z − ∇f) − z‖∞ at the end point, in scaled coordinates.
    pub projected_gradient: f64,
    pub iterations: usize,
    pub evaluations: usize,
    pub status: ResidentStatus,
    /// Free coordinates off kinks and bounds that the fit left exactly at their start although
    /// others moved (the CPU fit probes those for a saddle).
    pub unmoved: usize,
    /// A free coordinate sat at one of its bounds at some iterate.
    pub bounded: bool,
    pub bestfit: Option<Vec<f64>>,
}

impl ResidentFit {
    pub fn twice_nll(&self) -> f64 {
        2.0 * (self.nll + self.constant)
    }
}

/// A device that runs whole fits of the toys it draws.
pub trait ResidentFits {
    /// Generates and fits the toys of `req`; one result per toy, in the order of its `indices`
    /// (of its `list`, where given: a toy listed twice is fitted twice).
    fn fit_toys_resident(&mut self, req: &ResidentRequest<'_>) -> Result<Vec<ResidentFit>>;
}

/// A fit's coordinates, for L-BFGS-B descents a device runs whole on behalf of a host fit
/// ([`Descent`]): histfit-infer's `Problem` as a device needs it. Shared by every descent of
/// that fit.
#[derive(Debug, Clone, PartialEq)]
pub struct DescentSpace {
    /// The parameters the fit moves, in the order of its coordinates z.
    pub free: Vec<usize>,
    /// Each coordinate's unit: θ = z·scale.
    pub scale: Vec<f64>,
    /// A whole parameter vector holding the values of the parameters the fit does not move
    /// (the free entries are not read).
    pub held: Vec<f64>,
    /// Per coordinate: −ln L has a kink at 0 (L-BFGS-B's steps stop there).
    pub kinks: Vec<bool>,
    /// The fit's bounds per coordinate: a descent's are these, or 0 where it keeps a
    /// coordinate to one side of its kink or holds it there (a device may take them as such).
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    /// The optimizer's settings (`certify` and `polish_pg` are not used by a descent).
    pub settings: ResidentSettings,
}

/// Given up, a descent watched by [`Watch`], once its own estimate puts the minimum it heads
/// for above a known one, or once a coordinate it keeps to one side of its kink sits there,
/// pushed back by that side's slope (histfit-infer's searches near kinks,
/// `Search::request_below`). Restarts after the first run are not watched. Checked once per
/// iteration, when an iteration has been taken, against the new iterate and the estimated
/// distance to the minimum (EDM = −½ gᵀd) of the direction computed from it (the last one
/// computed, where the run ended there).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Watch {
    /// The coordinate kept to one side (its bounds end at 0 on the other).
    pub k: usize,
    /// The known minimum's f (plus the margin a lower minimum must clear).
    pub ceiling: f64,
    /// Not before this many iterations.
    pub after: usize,
    /// Given up where f − factor·EDM > ceiling.
    pub factor: f64,
    /// Or where coordinate `k` has sat at 0, pushed back, this many iterations in a row.
    pub held: usize,
}

/// One descent: L-BFGS-B from `z0` within `lower`..`upper` (a coordinate with equal bounds is
/// held there), restarted with fresh memory from its end up to `passes` times while each run
/// converges and gains more than 1e-10 relative in f (a restart that converges no higher
/// replaces the point), given up where `watch` says so. A coordinate with `side` ±1 is
/// evaluated at ±1e-150 where it is exactly 0: on that side's slope, not the mean of both that
/// the model gives at a kink.
#[derive(Debug, Clone, PartialEq)]
pub struct DescentRequest {
    pub space: std::sync::Arc<DescentSpace>,
    pub z0: Vec<f64>,
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    pub side: Vec<f64>,
    pub passes: usize,
    pub watch: Option<Watch>,
    /// Where set, the descent's end is settled at the kinks it meets, as the fit's orthant
    /// descents do (histfit-infer's `Search::orthant_rounds`); only for an evaluator that
    /// [finishes descents](crate::AsyncEvaluator::finishes_descents).
    pub settle: Option<Settle>,
    /// Where set (f at `z0`), no descent: Newton steps from `z0` instead (histfit-infer's
    /// `Search::polish`), up to six, over the coordinates more than 1e-5 inside `lower`..`upper`
    /// and, where kinked, from 0 — conjugate gradients on Hessian–vector products from gradient
    /// differences, the full step or a quarter, a sixteenth … of it, kept where f falls below
    /// the f polishing started from, or stays within its rounding while the gradient halves.
    /// `passes`, `watch` and `settle` are then not used. Only for an evaluator that
    /// [finishes descents](crate::AsyncEvaluator::finishes_descents).
    pub polish: Option<f64>,
}

/// A kinked coordinate within this of 0 sits at its kink (a line search stops exactly there,
/// up to the rounding of x + αd): its one-sided slopes judge it.
pub const AT_KINK: f64 = 1e-10;

/// A point whose projected gradient over the kinked coordinates (one-sided at their kink) is
/// above this gets orthant rounds ([`Settle`]).
pub const ORTHANT_PG: f64 = 1e-5;

/// Orthant rounds per settlement: each lowers f, most fits need one or two.
pub const ORTHANT_ROUNDS: usize = 8;

/// The rules of a fit's kink checks (histfit-infer's `fit::kinks` and `fit::search`, which say
/// why each is what it is), shared with the devices that make a kinked fit whole.
pub mod kink_rules {
    /// One-sided slopes (per unit of z) below this do not start a search of the other side.
    pub const SIDE_SLOPE: f64 = 1e-4;
    /// Refits of other kink basins per round.
    pub const MAX_SIDE_REFITS: usize = 8;
    /// Kinked coordinates that end this close to their kink (in their own units) have the other
    /// side searched whatever the slice through the minimum says …
    pub const NEAR_KINK: f64 = 0.3;
    /// … from this far (closer, they are at their kink for the search).
    pub const NEAR_KINK_FROM: f64 = 1e-6;
    /// Searches of the other side near kinks per fit, the nearest first.
    pub const MAX_NEAR_SEARCHES: usize = 24;
    /// A search near a kink is given up from this iteration on where f minus this many times its
    /// estimated distance to the minimum is above the best minimum.
    pub const NEAR_ABANDON: (usize, f64) = (3, 30.0);
    /// Or where the searched coordinate has sat at its kink, held there by the side searched,
    /// this many iterations in a row.
    pub const NEAR_HELD: usize = 3;
    /// The saddle probe's step, in units of a coordinate's scale.
    pub const SADDLE_STEP: f64 = 0.05;
}

/// The orthant rounds that follow a descent where it asks for them
/// ([`DescentRequest::settle`]): while the end's first-order check, one-sided at the kinks,
/// fails (or the end is not converged) and f does not rise, every kinked coordinate is kept on
/// its side (one at its kink on the side whose slope descends, held there where neither does)
/// and L-BFGS-B descends again without restarts, at most 8 rounds; a lower or equal end replaces
/// the point. The rounds' bounds are `lower`..`upper` (each the fit's or 0, as a descent's); the
/// check's are the fit's own. `pinned`: the coordinates the descent itself holds at their kink
/// (its bounds 0..0), which the point keeps where no round replaces it.
#[derive(Debug, Clone, PartialEq)]
pub struct Settle {
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    pub pinned: Vec<usize>,
}

/// Where a descent ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Descent {
    /// The end point (the start, projected into the box, where f was not finite there).
    pub z: Vec<f64>,
    /// f at `z` (NaN where the start was not finite).
    pub f: f64,
    /// Stopped by one of the optimizer's convergence rules.
    pub converged: bool,
    /// Given up by its [`Watch`] (then `z` and `f` are where it stood).
    pub given_up: bool,
    /// Why it stopped, in the optimizer's words.
    pub reason: String,
    pub iterations: usize,
    pub evaluations: usize,
    /// Where the request asked to settle and the evaluator did: the coordinates held at their
    /// kink at the end (in increasing order). `None` where no settling was made.
    pub pinned: Option<Vec<usize>>,
}

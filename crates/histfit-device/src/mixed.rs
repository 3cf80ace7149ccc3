//! A likelihood with binned and event-level channels (an HS3 document whose likelihood pairs
//! `histfactory_dist` channels with parametric distributions, as ROOT exports a
//! `RooSimultaneous` of both):
//!
//!   −ln L(θ) = −ln L_binned(θ_b) − ln L_events(θ_e),
//!
//! the binned part histfit's HistFactory model, the event-level part an [`UnbinnedModel`], their
//! parameters joined by name (θ_b and θ_e are views of one θ). Each constraint term lives in
//! one part only (the reader assigns them: `hs3_histfactory::open_document`), so the sum counts
//! each once.
//!
//! A dataset of it holds the binned part's counts (`main`), both parts' auxiliary data — the
//! binned part's first — and the event-level part's events; toys draw each part with its own
//! streams of the same (seed, index): the binned part's streams 0 and 1, the event-level
//! part's from [`EVENT_STREAMS`] on.

use histfit_compute::{ComputeError, CpuEvaluator, Dataset, Evaluator, ParameterSpace, Prior};
use histfit_model::Model;
use histfit_unbinned::UnbinnedModel;
use std::sync::Arc;

/// The first toy stream of the event-level part (the binned part draws its counts from stream
/// 0 and its auxiliary data from stream 1).
pub const EVENT_STREAMS: u32 = 2;

/// A binned part and an event-level part sharing parameters, evaluated on the CPU.
#[derive(Debug, Clone)]
pub struct Mixed {
    binned: CpuEvaluator,
    events: UnbinnedModel,
    space: ParameterSpace,
    /// Each binned parameter's index in the joint space.
    of_binned: Vec<usize>,
    /// Each event-level parameter's index in the joint space.
    of_events: Vec<usize>,
    /// Scratch: each part's parameters and gradient.
    pb: Vec<f64>,
    pe: Vec<f64>,
    gb: Vec<f64>,
    ge: Vec<f64>,
}

impl Mixed {
    /// Joins the two parts; `poi` names the parameter of interest (in either part). Refused: a
    /// parameter the two parts bound disjointly, or one each part constrains.
    pub fn new(
        binned: Arc<Model>,
        mut events: UnbinnedModel,
        poi: Option<&str>,
    ) -> Result<Mixed, String> {
        events.toy_stream_base = EVENT_STREAMS;
        refuse_second_constraints(&binned, &events)?;
        let binned = CpuEvaluator::new(binned);
        let (space, of_binned, of_events) = join(binned.space(), &events.space, poi)?;
        let (nb, ne) = (of_binned.len(), of_events.len());
        Ok(Mixed {
            binned,
            events,
            space,
            of_binned,
            of_events,
            pb: vec![0.0; nb],
            pe: vec![0.0; ne],
            gb: vec![0.0; nb],
            ge: vec![0.0; ne],
        })
    }

    /// Whether joint parameter `k` is a parameter of the binned part.
    pub fn is_binned(&self, k: usize) -> bool {
        self.of_binned.contains(&k)
    }

    /// The binned part.
    pub fn binned_model(&self) -> &Arc<Model> {
        self.binned.shared_model()
    }

    /// The event-level part.
    pub fn events_model(&self) -> &UnbinnedModel {
        &self.events
    }

    /// The event-level part's parameters at the joint parameters `p`.
    pub fn events_params(&self, p: &[f64]) -> Vec<f64> {
        self.of_events.iter().map(|&k| p[k]).collect()
    }

    /// The binned part's parameters and their covariance (row-major) at the joint parameters
    /// `p` with covariance `cov` (the binned part's parameters come first in the joint space).
    pub fn binned_view(&self, p: &[f64], cov: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let (n, nb) = (p.len(), self.of_binned.len());
        let cov = match cov.len() == n * n {
            true => (0..nb)
                .flat_map(|i| cov[i * n..i * n + nb].iter().copied())
                .collect(),
            false => Vec::new(),
        };
        (p[..nb].to_vec(), cov)
    }

    /// Makes parameter `poi` (an index of the joint space, or none) the parameter of interest.
    pub fn set_poi(&mut self, poi: Option<usize>) {
        self.space.poi = poi;
    }

    /// The observed data.
    pub fn observed(&self) -> Dataset {
        Dataset::joined(
            histfit_compute::HistFactoryData::observed(self.binned_model()),
            self.events.observed_dataset(),
        )
    }

    /// The naive, SumW2 and sandwich uncertainties of a fit to weighted events at its minimum
    /// `at` on `d`, over the joint parameters `free` (`histfit_unbinned::weighted`). H and H₂
    /// are the joint likelihood's; the score's variance D adds the binned part's information
    /// (its counts are unweighted Poisson counts and its auxiliary data unweighted: their
    /// score's variance is their Hessian) to the event-level part's Σ w² s sᵀ and constraints.
    /// That Hessian is the observed one at the joint minimum, which estimates the information
    /// as the binned part's own fit would; where the binned channels pull hard against the
    /// events it can differ from the expected information Σ ∂λ∂λᵀ/λ, which is not used here.
    pub fn weighted_uncertainties(
        &mut self,
        d: &Dataset,
        at: &[f64],
        free: &[usize],
    ) -> histfit_compute::Result<histfit_unbinned::weighted::WeightedUncertainties> {
        use histfit_unbinned::weighted;
        let h = histfit_compute::hessian(self, at, d, free)?;
        let h2 = histfit_compute::hessian(self, at, &weighted::squared_weights(d)?, free)?;
        self.split(at)?;
        let (db, de) = self.parts(d)?;
        let k = free.len();
        let mut dm = vec![0.0; k * k];
        // Each part's share over its own free parameters, added where they sit among `free`.
        let mut add = |at_free: &[usize], m: &[f64]| {
            let n = at_free.len();
            for a in 0..n {
                for b in 0..n {
                    dm[at_free[a] * k + at_free[b]] += m[a * n + b];
                }
            }
        };
        let (local, at_free) = locals(&self.of_binned, free);
        let hb = histfit_compute::hessian(&mut self.binned, &self.pb, &db, &local)?;
        add(&at_free, &hb);
        let (local, at_free) = locals(&self.of_events, free);
        add(
            &at_free,
            &weighted::score_variance(&self.events, &de, &self.pe, &local)?,
        );
        weighted::from_matrices(free, &h, &h2, &dm)
    }

    /// The number of auxiliary data of the binned part (those of the event-level part follow).
    fn binned_aux(&self) -> usize {
        self.binned_model().aux_params.len()
    }

    /// Each part's view of the joint parameters `p`.
    fn split(&mut self, p: &[f64]) -> histfit_compute::Result<()> {
        if p.len() != self.space.len() {
            return Err(ComputeError::Length {
                what: "parameters",
                expected: self.space.len(),
                got: p.len(),
            });
        }
        for (x, &k) in self.pb.iter_mut().zip(&self.of_binned) {
            *x = p[k];
        }
        for (x, &k) in self.pe.iter_mut().zip(&self.of_events) {
            *x = p[k];
        }
        Ok(())
    }

    /// Each part's dataset: the binned part keeps the counts and the data's constant.
    fn parts(&self, d: &Dataset) -> histfit_compute::Result<(Dataset, Dataset)> {
        let nb = self.binned_aux();
        if d.aux.len() != nb + self.events.globals.len() {
            return Err(ComputeError::Length {
                what: "auxiliary data (the binned part's, then the event-level part's)",
                expected: nb + self.events.globals.len(),
                got: d.aux.len(),
            });
        }
        Ok((
            d.part(true, 0..nb, false, d.constant),
            d.part(false, nb..d.aux.len(), true, 0.0),
        ))
    }

    fn evaluate(
        &mut self,
        p: &[f64],
        d: &Dataset,
        grad: Option<&mut [f64]>,
    ) -> histfit_compute::Result<f64> {
        self.split(p)?;
        let (db, de) = self.parts(d)?;
        let Some(g) = grad else {
            return Ok(self.binned.nll(&self.pb, &db)? + self.events.nll(&self.pe, &de)?);
        };
        if g.len() != self.space.len() {
            return Err(ComputeError::Length {
                what: "gradient",
                expected: self.space.len(),
                got: g.len(),
            });
        }
        let fb = self.binned.nll_grad(&self.pb, &db, &mut self.gb)?;
        let fe = self.events.nll_grad(&self.pe, &de, &mut self.ge)?;
        g.fill(0.0);
        for (&x, &k) in self.gb.iter().zip(&self.of_binned) {
            g[k] += x;
        }
        for (&x, &k) in self.ge.iter().zip(&self.of_events) {
            g[k] += x;
        }
        Ok(fb + fe)
    }
}

impl Evaluator for Mixed {
    fn space(&self) -> &ParameterSpace {
        &self.space
    }

    fn nll(&mut self, p: &[f64], d: &Dataset) -> histfit_compute::Result<f64> {
        self.evaluate(p, d, None)
    }

    fn nll_grad(&mut self, p: &[f64], d: &Dataset, g: &mut [f64]) -> histfit_compute::Result<f64> {
        self.evaluate(p, d, Some(g))
    }

    fn asimov(&mut self, p: &[f64]) -> histfit_compute::Result<Dataset> {
        self.split(p)?;
        let b = self.binned.asimov(&self.pb)?;
        let e = self.events.asimov(&self.pe)?;
        Ok(Dataset::joined(b, e))
    }

    fn toys(
        &mut self,
        p: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_compute::Result<Vec<Dataset>> {
        self.split(p)?;
        let b = self.binned.toys(&self.pb, seed, indices.clone())?;
        let e = self.events.toys(&self.pe, seed, indices)?;
        Ok(b.into_iter()
            .zip(e)
            .map(|(b, e)| Dataset::joined(b, e))
            .collect())
    }

    /// The binned part's expected counts.
    fn expected_main(&mut self, p: &[f64], out: &mut [f64]) -> histfit_compute::Result<()> {
        self.split(p)?;
        self.binned.expected_main(&self.pb, out)
    }

    fn saturated_gap(&mut self, _p: &[f64], _d: &Dataset) -> histfit_compute::Result<(f64, usize)> {
        Err(ComputeError::Unsupported(
            "a saturated model of a likelihood with event-level channels",
        ))
    }
}

/// The parameters of a part (`of_part`: each of its parameters' index in the joint space) that
/// are among the joint `free`: their indices in the part, and their positions in `free`.
fn locals(of_part: &[usize], free: &[usize]) -> (Vec<usize>, Vec<usize>) {
    of_part
        .iter()
        .enumerate()
        .filter_map(|(i, k)| free.iter().position(|f| f == k).map(|at| (i, at)))
        .unzip()
}

/// Refuses an event-level constraint term on a parameter the binned part constrains already
/// (its modifiers' own constraint): counted twice, it would halve the parameter's width.
fn refuse_second_constraints(binned: &Model, events: &UnbinnedModel) -> Result<(), String> {
    use histfit_unbinned::graph::{Id, Op};
    let g = &events.graph;
    for k in g.needed(events.constraint_term) {
        let Op::Param(j) = g.op(Id(k)) else { continue };
        let name = &events.space.names[j];
        let constrained = binned
            .parameters
            .iter()
            .any(|p| &p.name == name && p.constraint != histfit_model::Constraint::None);
        if constrained && !events.space.fixed[j] {
            return Err(format!(
                "parameter \"{name}\": constrained by the binned channels' modifiers and again by an auxiliary distribution of the likelihood (one constraint term each)"
            ));
        }
    }
    Ok(())
}

/// The joint space of two parts: the binned part's parameters, then the event-level part's that
/// it does not have; each part's parameters' indices in it. A parameter of both takes the
/// binned part's start, the intersection of their bounds, the constraint of the part that has
/// one, the smaller scale; it is fixed or kinked where either part says so, and enters more
/// than one term.
fn join(
    b: &ParameterSpace,
    e: &ParameterSpace,
    poi: Option<&str>,
) -> Result<(ParameterSpace, Vec<usize>, Vec<usize>), String> {
    // (Not in curvature units: the binned part's scales are its constraints' widths.)
    let mut s = b.clone();
    let of_binned: Vec<usize> = (0..b.len()).collect();
    let mut of_events = Vec::with_capacity(e.len());
    for j in 0..e.len() {
        let name = &e.names[j];
        let Some(k) = b.index(name) else {
            of_events.push(s.names.len());
            s.names.push(name.clone());
            s.init.push(e.init[j]);
            s.bounds.push(e.bounds[j]);
            s.fixed.push(e.fixed[j]);
            s.priors.push(e.priors[j]);
            s.scales.push(e.scales[j]);
            s.kinked.push(e.kinked[j]);
            s.local_term.push(None);
            continue;
        };
        of_events.push(k);
        let (lo, hi) = (
            s.bounds[k].0.max(e.bounds[j].0),
            s.bounds[k].1.min(e.bounds[j].1),
        );
        if lo > hi || !(lo..=hi).contains(&s.init[k]) {
            return Err(format!(
                "parameter \"{name}\": its bounds in the binned channels [{}, {}] and in the event-level ones [{}, {}] leave no room for its start {}",
                b.bounds[k].0, b.bounds[k].1, e.bounds[j].0, e.bounds[j].1, s.init[k]
            ));
        }
        s.bounds[k] = (lo, hi);
        s.fixed[k] |= e.fixed[j];
        match (s.priors[k], e.priors[j]) {
            (_, Prior::Free) => {}
            (Prior::Free, prior) => s.priors[k] = prior,
            _ => {
                return Err(format!(
                    "parameter \"{name}\": constrained in the binned channels and again by an auxiliary distribution of the event-level ones (one constraint term each)"
                ))
            }
        }
        s.scales[k] = s.scales[k].min(e.scales[j]);
        s.kinked[k] |= e.kinked[j];
        s.local_term[k] = None;
    }
    s.poi = match poi {
        None => None,
        Some(n) => Some(s.index(n).ok_or_else(|| {
            format!("parameter of interest \"{n}\" is not a parameter of the likelihood")
        })?),
    };
    s.check().map_err(|e| e.to_string())?;
    Ok((s, of_binned, of_events))
}

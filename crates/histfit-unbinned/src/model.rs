//! The event-level likelihood:
//!
//!   −ln L = Σ_c [ν_c − Σ_i w_ci ln(ν_c f_c(x_ci))] + Σ_k −ln g_k(θ)
//!
//! for extended channels c (ν_c the sum of the mixture's yields; non-extended channels drop ν_c
//! and the factor ν_c inside the logarithm), with per-event weights w (1 when unweighted) and
//! constraint terms g_k — all nodes of one [`Graph`], each channel compiled to a [`Program`].
//! No term that depends on the data alone is added (RooFit's convention, not pyhf's binned one).

use crate::graph::{Graph, Id};
use crate::program::Program;
use crate::sample::SampleError;
use histfit_seam::rng::ToyStream;
use histfit_seam::{ComputeError, Dataset, Evaluator, EventTable, Events, ParameterSpace};
use rayon::prelude::*;
use std::sync::Arc;

/// An observable of a channel, with its domain (the PDFs' normalisation range).
#[derive(Debug, Clone, PartialEq)]
pub struct Observable {
    pub name: String,
    pub lo: f64,
    pub hi: f64,
}

/// A channel as the reader builds it: a distribution's terms on the graph and its data.
#[derive(Debug, Clone)]
pub struct ChannelSpec {
    pub name: String,
    pub data: String,
    pub event_term: Id,
    pub yield_term: Id,
    pub extended: bool,
    pub observables: Vec<Observable>,
    /// The summands of a top-level mixture, (name, c·f per event): see [`Channel::components`].
    pub components: Vec<(String, Id)>,
}

/// The global observable of a constraint term: a constant parameter of the graph whose value a
/// dataset carries (its auxiliary data), drawn in toys from its constraint at θ and set to the
/// constraint's mean in the Asimov dataset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlobalObservable {
    pub param: usize,
    /// The constraint's mean at θ.
    pub mean: Id,
    pub draw: Draw,
}

/// How a toy draws a global observable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Draw {
    /// N(mean(θ), sigma(θ)).
    Gaussian { sigma: Id },
    /// Poisson(mean(θ)).
    Poisson,
    /// HS3's generalised normal about mean(θ): mean ± alpha · G^(1/beta), G ~ Gamma(1/beta).
    GeneralizedNormal { alpha: Id, beta: Id },
    /// Row `row` of a multivariate normal: mean(θ) + Σ_j L[row][j] z_j, L the Cholesky factor
    /// of the covariance of group `group` ([`UnbinnedModel::correlated`]) and z_j the normal of
    /// the group's j-th member.
    Correlated { group: usize, row: usize },
}

/// The lower Cholesky factor (row-major, n × n) of a multivariate normal constraint's
/// covariance, and its members' indices in [`UnbinnedModel::globals`].
#[derive(Debug, Clone, PartialEq)]
pub struct Correlated {
    pub chol: Vec<f64>,
    pub members: Vec<usize>,
}

/// One channel: a distribution fitted to one table of events.
#[derive(Debug, Clone)]
pub struct Channel {
    /// The distribution's name.
    pub name: String,
    /// The dataset's name.
    pub data: String,
    /// ln(ν f(x)) per event (ln f(x) where not extended).
    pub event_term: Id,
    /// ν, or 0 where not extended.
    pub yield_term: Id,
    pub extended: bool,
    /// The observables, in the order of the channel's event table, with their domains.
    pub observables: Vec<Observable>,
    /// Where the distribution is a mixture, its summands as (name, c·f per event): their
    /// integrals over the domain are the expected counts (yields) or the fractions (a
    /// non-extended mixture); what the plot of a fit draws as components. Empty otherwise.
    pub components: Vec<(String, Id)>,
    program: Program,
}

/// An event-level likelihood, ready to evaluate.
#[derive(Debug, Clone)]
pub struct UnbinnedModel {
    pub graph: Graph,
    pub space: ParameterSpace,
    /// The graph's event columns by name (graph column j is `columns[j]`). Read-only once
    /// built, as `channels` are: the last evaluation kept for a repeated point
    /// ([`UnbinnedModel::remembered`]) assumes what it was computed by has not changed.
    pub columns: Vec<String>,
    /// The channels, each compiled at construction (read-only once built).
    pub channels: Vec<Channel>,
    /// −ln of every constraint term, summed (0 where there are none).
    pub constraint_term: Id,
    constraints: Program,
    /// The observed events.
    pub observed: Arc<Events>,
    /// What the reader chose or assumed, for the user to see.
    pub notes: Vec<String>,
    /// The global observables, in the order of a dataset's auxiliary data.
    pub globals: Vec<GlobalObservable>,
    /// The multivariate normal constraints among them.
    pub correlated: Vec<Correlated>,
    /// The first of the toy streams channels use (channel c: `base + 2c`, `base + 2c + 1`): 0,
    /// or past the streams of a binned part sharing the toy's (seed, index) in a mixed
    /// likelihood.
    pub toy_stream_base: u32,
    /// The last evaluation made through [`Evaluator`] (see [`UnbinnedModel::remembered`]).
    last: Option<Box<LastEvaluation>>,
    /// The events of the datasets last evaluated through [`Evaluator`] whose channels were
    /// grouped for their guarded selects (see [`group_events`]), the latest first: up to
    /// [`GROUPINGS_KEPT`], so that a hypothesis test's alternation of the observed and the Asimov
    /// data groups each once.
    grouped: Vec<Arc<Grouped>>,
}

/// A dataset's events in the order [`group_events`] gives them.
#[derive(Debug)]
struct Grouped {
    /// The events as the dataset holds them (held, so that their address is not reused).
    source: Arc<Events>,
    /// Per channel, its grouped events (`None`: the source's, not grouped).
    channels: Vec<Option<EventTable>>,
}

/// How many datasets' groupings a model keeps, the most recently used first: a hypothesis
/// test's observed and Asimov data, each with the subsample its fits' warm start takes
/// (`histfit_infer`'s `thin`), which each fit evaluates before its own data.
const GROUPINGS_KEPT: usize = 4;

/// The fewest events of a channel worth grouping (a pass over them against the blocks it lets
/// skip an arm).
const GROUP_FROM: usize = 4096;

/// Buckets of the grouping column's range: a select's boundary falls in one, whose events are
/// the only ones left in blocks that take both arms.
const GROUP_BUCKETS: usize = 256;

/// Events grouped per parallel task.
const GROUP_CHUNK: usize = 1 << 17;

/// A column's memory being written by several tasks at once, at positions each owns.
#[derive(Clone, Copy)]
struct Slots(*mut f64);

// SAFETY: the tasks write disjoint positions (see `group_events`), and nothing reads them
// before all have ended.
unsafe impl Sync for Slots {}

impl Slots {
    /// # Safety
    /// `i` within the allocation, and written by no other task.
    unsafe fn write(self, i: usize, x: f64) {
        self.0.add(i).write(x)
    }
}

/// `table`'s events reordered by bucket of column `by`'s value (GROUP_BUCKETS equal buckets of
/// its range, the events of a bucket in their own order): a counting sort, one pass to count
/// and one to move each column. Blocks of events then lie in a narrow range of the column, so
/// that a condition monotone in it (a Crystal Ball's core or tail, a double-sided shape's side)
/// takes one arm over nearly every block. −ln L is a sum: the order changes only its roundings,
/// and it is fixed by the events, so the value is the same bits on any number of threads.
pub(crate) fn group_events(table: &EventTable, by: usize) -> EventTable {
    let key = &table.columns[by];
    // The range of the finite keys (an infinite one would make every bucket's width infinite
    // and put every event in the first); NaN and infinities are clamped into the end buckets.
    let (lo, hi) = key
        .iter()
        .filter(|x| x.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    let scale = if hi > lo {
        GROUP_BUCKETS as f64 / (hi - lo)
    } else {
        0.0
    };
    // A value's bucket (NaN, −∞ and the top end clamped into range by the saturating cast and
    // min).
    let bucket = |x: f64| (((x - lo) * scale) as usize).min(GROUP_BUCKETS - 1);
    const _: () = assert!(GROUP_BUCKETS <= 256, "a bucket in a byte");
    // Per chunk of events, in parallel: each event's bucket, one byte (fresh memory costs a page
    // fault a 4 kB on first touch: an 8-byte position per event was a third of the grouping's
    // time at 1M events), and the bucket's counts.
    let n = key.len();
    let chunks: Vec<std::ops::Range<usize>> = (0..n)
        .step_by(GROUP_CHUNK)
        .map(|a| a..(a + GROUP_CHUNK).min(n))
        .collect();
    let per_chunk: Vec<(Vec<u8>, [usize; GROUP_BUCKETS])> = chunks
        .par_iter()
        .map(|r| {
            let buckets: Vec<u8> = key[r.clone()].iter().map(|&x| bucket(x) as u8).collect();
            let mut counts = [0usize; GROUP_BUCKETS];
            for &b in &buckets {
                counts[b as usize] += 1;
            }
            (buckets, counts)
        })
        .collect();
    // Each (chunk, bucket)'s first position: bucket by bucket, chunk after chunk within one — so
    // each bucket holds its events in their own order, whatever the chunks.
    let mut first = vec![[0usize; GROUP_BUCKETS]; chunks.len()];
    let mut at = 0;
    for b in 0..GROUP_BUCKETS {
        for (c, (_, counts)) in per_chunk.iter().enumerate() {
            first[c][b] = at;
            at += counts[b];
        }
    }
    let moved = |v: &Vec<f64>| {
        // (Every column of a table as long as its key: what makes the writes below cover it.)
        assert_eq!(v.len(), n, "a table's columns of one length");
        let mut out: Vec<f64> = Vec::with_capacity(n);
        let to = Slots(out.as_mut_ptr());
        chunks
            .par_iter()
            .zip(&per_chunk)
            .zip(&first)
            .for_each(|((r, (buckets, _)), first)| {
                let mut next = *first;
                for (&x, &b) in v[r.clone()].iter().zip(buckets) {
                    // SAFETY: the (chunk, bucket) ranges [first, first + count) partition
                    // 0..n, each written by its own chunk's task alone, within the capacity.
                    unsafe { to.write(next[b as usize], x) };
                    next[b as usize] += 1;
                }
            });
        // SAFETY: every position 0..n was written exactly once above.
        unsafe { out.set_len(n) };
        out
    };
    EventTable {
        names: table.names.clone(),
        columns: table.columns.iter().map(moved).collect(),
        weights: table.weights.as_ref().map(moved),
    }
}

/// An evaluation kept for the next request at the same point: a fit evaluates its minimum
/// again for its certificate and the Hessian's first column again after that — two full
/// passes over the events of some 22 a fit takes.
#[derive(Debug, Clone)]
struct LastEvaluation {
    /// The parameters as evaluated (global observables from the dataset's auxiliary data).
    params: Vec<f64>,
    /// The dataset's events, held so that their address cannot be taken by other events.
    events: Arc<Events>,
    constant: f64,
    value: f64,
    gradient: Option<Vec<f64>>,
}

impl UnbinnedModel {
    /// Assembles the model; `channels`' programs are compiled here.
    pub fn new(
        graph: Graph,
        space: ParameterSpace,
        columns: Vec<String>,
        channels: Vec<ChannelSpec>,
        constraint_term: Id,
        observed: Events,
        notes: Vec<String>,
    ) -> UnbinnedModel {
        let mut g = graph;
        let zero = g.constant(0.0);
        let channels = channels
            .into_iter()
            .map(|c| Channel {
                program: Program::new(&g, c.event_term, c.yield_term),
                name: c.name,
                data: c.data,
                event_term: c.event_term,
                yield_term: c.yield_term,
                extended: c.extended,
                observables: c.observables,
                components: c.components,
            })
            .collect();
        let constraints = Program::new(&g, zero, constraint_term);
        UnbinnedModel {
            graph: g,
            space,
            columns,
            channels,
            constraint_term,
            constraints,
            observed: Arc::new(observed),
            notes,
            globals: Vec::new(),
            correlated: Vec::new(),
            toy_stream_base: 0,
            last: None,
            grouped: Vec::new(),
        }
    }

    /// Declares the global observables (their observed values are the parameters' initial ones).
    pub fn set_global_observables(
        &mut self,
        globals: Vec<GlobalObservable>,
        correlated: Vec<Correlated>,
    ) {
        self.globals = globals;
        self.correlated = correlated;
    }

    /// Refuses a model whose −ln L is not finite at its initial point on the observed data,
    /// naming the channel: a normalisation that is zero or not finite over the domain, or an
    /// event where the density is 0. The value and gradient are kept (the observed dataset
    /// shares its events with every later one): a fit from the initial point on the observed
    /// data takes its first evaluation from here.
    pub fn check_initial_point(&mut self) -> Result<(), crate::Hs3Error> {
        let data = self.observed_dataset();
        let p = self
            .parameters_for(&self.space.init, &data)
            .map_err(|e| crate::Hs3Error {
                place: "model".into(),
                rule: e.to_string(),
            })?
            .into_owned();
        let init = self.space.init.clone();
        let mut g = vec![0.0; init.len()];
        if self
            .remembered(&init, &data, Some(&mut g))
            .is_ok_and(f64::is_finite)
        {
            return Ok(());
        }
        // Not finite: which term.
        self.last = None;
        let events = &self.observed.channels;
        for (c, table) in self.channels.iter().zip(events) {
            let v = c
                .program
                .eval(&p, &self.columns_of(table), table.weights.as_deref(), None);
            if !v.is_finite() {
                return Err(crate::Hs3Error {
                    place: format!("distribution \"{}\" on data \"{}\"", c.name, c.data),
                    rule: "−ln L is not finite at the initial parameters: a density whose normalisation over its observables' range is zero or not finite, or an event where the density is 0".into(),
                });
            }
        }
        let v = self.constraints.eval(&p, &[], None, None);
        if !v.is_finite() {
            return Err(crate::Hs3Error {
                place: "constraint terms".into(),
                rule: "−ln of the constraints is not finite at the initial parameters".into(),
            });
        }
        Ok(())
    }

    /// `params` with the global observables set to the dataset's values.
    fn parameters_for<'a>(
        &self,
        params: &'a [f64],
        data: &Dataset,
    ) -> histfit_seam::Result<std::borrow::Cow<'a, [f64]>> {
        if self.globals.is_empty() {
            return Ok(std::borrow::Cow::Borrowed(params));
        }
        if data.aux.len() != self.globals.len() {
            return Err(ComputeError::Length {
                what: "global observables (auxiliary data)",
                expected: self.globals.len(),
                got: data.aux.len(),
            });
        }
        let mut p = params.to_vec();
        for (g, &v) in self.globals.iter().zip(&data.aux) {
            p[g.param] = v;
        }
        Ok(std::borrow::Cow::Owned(p))
    }

    /// The global observables' values in the observed data.
    fn observed_globals(&self) -> Vec<f64> {
        self.globals
            .iter()
            .map(|g| self.space.init[g.param])
            .collect()
    }

    /// Each free parameter's natural step: 1/√(∂²(−ln L)/∂θ²) on the observed data at the
    /// initial point (by forward differences of the exact gradient), rounded to a power of two so that
    /// θ/scale is exact — the units fits work in. Where the curvature is not positive and
    /// finite the scale stays 1. Above [`SCALE_EVENTS`] events a channel's curvature is taken
    /// on every k-th event weighted by k: a power of two needs no more, and on a million
    /// events the gradients over every event cost as much as half the fit.
    pub fn set_curvature_scales(&mut self) {
        let thinned = Events {
            channels: self
                .observed
                .channels
                .iter()
                .map(|t| thin(t, SCALE_EVENTS))
                .collect(),
        };
        let data = Dataset::of_events(Arc::new(thinned), Vec::new(), self.observed_globals(), 0.0);
        let n = self.space.len();
        let at = self.space.init.clone();
        let mut scales = vec![1.0; n];
        // Forward differences of the exact gradient: one evaluation per parameter and one at
        // the point (a power of two needs no more accuracy than that).
        let (mut g0, mut g) = (vec![0.0; n], vec![0.0; n]);
        self.space.curvature_units = false;
        if self.evaluate(&at, &data, Some(&mut g0)).is_err() {
            self.space.scales = scales;
            return;
        }
        let mut every = true;
        for i in 0..n {
            if self.space.fixed[i] {
                continue;
            }
            let (lo, hi) = self.space.bounds[i];
            let h = 1e-5 * at[i].abs().max(1e-3).min(0.5 * (hi - lo));
            let mut p = at.clone();
            p[i] = if at[i] + h <= hi {
                at[i] + h
            } else {
                at[i] - h
            };
            let ok = self.evaluate(&p, &data, Some(&mut g)).is_ok();
            let curvature = (g[i] - g0[i]) / (p[i] - at[i]);
            let s = 1.0 / curvature.sqrt();
            if ok && s.is_finite() && s > 0.0 {
                scales[i] = s.log2().round().exp2();
            } else {
                every = false;
            }
        }
        self.space.scales = scales;
        // Only where every free parameter got its curvature's unit (see the flag).
        self.space.curvature_units = every;
    }

    /// Toy `toy` of `seed` at `params`: per channel, a Poisson count of mean ν where extended
    /// (else as many events as observed), drawn from the channel's density ([`crate::sample`]).
    /// Channel c's count uses stream 2c of (seed, toy) and its events stream 2c + 1 (both past
    /// [`UnbinnedModel::toy_stream_base`]), so a toy is a pure function of (model, params, seed,
    /// toy). The global observables of Gaussian
    /// constraints are drawn too ([`GlobalObservable`]).
    pub fn toy(&self, params: &[f64], seed: u64, toy: u64) -> histfit_seam::Result<Dataset> {
        let mut tables = Vec::with_capacity(self.channels.len());
        for (c, ch) in self.channels.iter().enumerate() {
            let stream_id = |k: usize| self.toy_stream_base + (2 * c + k) as u32;
            let n = if ch.extended {
                let nu = self.graph.value(ch.yield_term, params, &[]);
                ToyStream::new(seed, toy, stream_id(0)).poisson(nu) as usize
            } else {
                self.observed.channels[c].len()
            };
            let columns: Vec<usize> = ch
                .observables
                .iter()
                .map(|o| {
                    self.columns
                        .iter()
                        .position(|n| *n == o.name)
                        .expect("a graph column")
                })
                .collect();
            let domains: Vec<(f64, f64)> = ch.observables.iter().map(|o| (o.lo, o.hi)).collect();
            let stream = ToyStream::new(seed, toy, stream_id(1));
            let drawn = crate::sample::draw(&ch.program, params, &columns, &domains, n, &stream)
                .map_err(|e| ComputeError::InvalidData {
                    place: format!("toy {toy} of channel \"{}\"", ch.name),
                    rule: match e {
                        SampleError::NoMass => {
                            "the density is zero or not finite everywhere at the generating point"
                                .into()
                        }
                        SampleError::Envelope => {
                            "the density has a spike (or a histogram's bins) narrower than any sampling grid resolves".into()
                        }
                    },
                })?;
            tables.push(EventTable {
                names: ch.observables.iter().map(|o| o.name.clone()).collect(),
                columns: drawn,
                weights: None,
            });
        }
        Ok(Dataset::of_events(
            Arc::new(Events { channels: tables }),
            Vec::new(),
            self.toy_globals(params, seed, toy),
            0.0,
        ))
    }

    /// The per-event term E (ln ν f, or ln f) of channel `c` at every event of `table`.
    pub fn event_values(&self, c: usize, params: &[f64], table: &EventTable) -> Vec<f64> {
        let cols = self.columns_of(table);
        self.channels[c].program.event_values(params, &cols)
    }

    /// Each event's score ∂E_i/∂θ_j in channel `c` of `table` for the parameters `which`
    /// (row j: parameter `which[j]`), E_i the channel's per-event term (ln ν f, or ln f).
    pub fn event_scores(
        &self,
        c: usize,
        params: &[f64],
        table: &EventTable,
        which: &[usize],
    ) -> Vec<Vec<f64>> {
        let cols = self.columns_of(table);
        self.channels[c]
            .program
            .event_jacobian(params, &cols, which)
    }

    /// The Hessian of the constraint terms alone (−ln of every auxiliary distribution at the
    /// global observables of `data`) over the parameters `which`, at `params` (row-major
    /// `which.len()²`): forward differences of their exact gradient, one per parameter, the
    /// step 1e-6 of the parameter's size (backward where the bounds end first), symmetrised.
    /// What the auxiliary measurements contribute to the information of a fit.
    pub fn constraint_hessian(
        &self,
        params: &[f64],
        data: &Dataset,
        which: &[usize],
    ) -> histfit_seam::Result<Vec<f64>> {
        let at = self.parameters_for(params, data)?.into_owned();
        let (n, k) = (at.len(), which.len());
        let gradient = |x: &[f64]| {
            let mut g = vec![0.0; n];
            self.constraints.eval(x, &[], None, Some(&mut g));
            g
        };
        let g0 = gradient(&at);
        let mut h = vec![0.0; k * k];
        for (col, &j) in which.iter().enumerate() {
            let mut step = 1e-6 * at[j].abs().max(1.0);
            if at[j] + step > self.space.bounds[j].1 && at[j] - step >= self.space.bounds[j].0 {
                step = -step;
            }
            let mut x = at.clone();
            x[j] += step;
            let taken = x[j] - at[j];
            let g = gradient(&x);
            for (row, &i) in which.iter().enumerate() {
                h[row * k + col] = (g[i] - g0[i]) / taken;
            }
        }
        for r in 0..k {
            for c in r + 1..k {
                let m = 0.5 * (h[r * k + c] + h[c * k + r]);
                h[r * k + c] = m;
                h[c * k + r] = m;
            }
        }
        Ok(h)
    }

    /// The observed data as a dataset.
    pub fn observed_dataset(&self) -> Dataset {
        Dataset::of_events(
            self.observed.clone(),
            Vec::new(),
            self.observed_globals(),
            0.0,
        )
    }

    /// The global observables of a toy at `params`, each drawn from its constraint at θ with
    /// stream 2^31 + k of (seed, toy) for the k-th: a Gaussian's N(mean, sigma), a Poisson's
    /// count, a generalised normal's mean ± α G^(1/β), a multivariate normal's mean + L z with z_j from its j-th member's stream.
    fn toy_globals(&self, params: &[f64], seed: u64, toy: u64) -> Vec<f64> {
        let stream = |k: usize| ToyStream::new(seed, toy, (1 << 31) + k as u32);
        let normals: Vec<f64> = (0..self.globals.len())
            .map(|k| match self.globals[k].draw {
                Draw::Correlated { .. } => stream(k).normal(),
                _ => 0.0,
            })
            .collect();
        self.globals
            .iter()
            .enumerate()
            .map(|(k, g)| {
                let mean = self.graph.value(g.mean, params, &[]);
                match g.draw {
                    Draw::Gaussian { sigma } => {
                        mean + self.graph.value(sigma, params, &[]) * stream(k).normal()
                    }
                    // A mean that is not a number makes a toy that is not one (a failed
                    // toy, counted), not a count of 0.
                    Draw::Poisson if mean.is_nan() => f64::NAN,
                    Draw::Poisson => stream(k).poisson(mean.max(0.0)),
                    Draw::GeneralizedNormal { alpha, beta } => {
                        let (a, b) = (
                            self.graph.value(alpha, params, &[]),
                            self.graph.value(beta, params, &[]),
                        );
                        let mut s = stream(k);
                        let sign = if s.uniform() < 0.5 { -1.0 } else { 1.0 };
                        // |x − mean| = α G^(1/β), from ln G (G underflows for large β).
                        let t = s.ln_gamma_variate(1.0 / b) / b;
                        let g = if t < -700.0 {
                            0.0
                        } else {
                            histfit_seam::rng::portable_exp(t)
                        };
                        mean + sign * a * g
                    }
                    Draw::Correlated { group, row } => {
                        let c = &self.correlated[group];
                        let n = c.members.len();
                        mean + (0..=row)
                            .map(|j| c.chol[row * n + j] * normals[c.members[j]])
                            .sum::<f64>()
                    }
                }
            })
            .collect()
    }

    /// The global observables of the Asimov dataset at `params`: each constraint's mean.
    pub fn asimov_globals(&self, params: &[f64]) -> Vec<f64> {
        self.globals
            .iter()
            .map(|g| self.graph.value(g.mean, params, &[]))
            .collect()
    }

    /// The event columns of channel `c` of `events`, indexed by graph column.
    fn columns_of<'a>(&self, table: &'a EventTable) -> Vec<&'a [f64]> {
        self.columns
            .iter()
            .map(|name| table.column(name).unwrap_or(&[]))
            .collect()
    }

    fn events_of<'a>(&self, data: &'a Dataset) -> histfit_seam::Result<&'a Events> {
        let events = data.events.as_deref().ok_or(ComputeError::InvalidData {
            place: "dataset".into(),
            rule: "an event-level likelihood needs events".into(),
        })?;
        if events.channels.len() != self.channels.len() {
            return Err(ComputeError::InvalidData {
                place: "dataset".into(),
                rule: format!(
                    "{} event tables for {} channels",
                    events.channels.len(),
                    self.channels.len()
                ),
            });
        }
        Ok(events)
    }

    /// [`Self::evaluate`], answered from the last evaluation where it was made at the same
    /// point (the same bits of every parameter, global observables included) of the same
    /// events and constant, with a gradient where one is asked; the answer is then the same
    /// bits as evaluating again.
    fn remembered(
        &mut self,
        params: &[f64],
        data: &Dataset,
        grad: Option<&mut [f64]>,
    ) -> histfit_seam::Result<f64> {
        if params.len() != self.space.len() {
            // `evaluate` names the mismatch.
            return self.evaluate(params, data, grad);
        }
        self.group(data);
        let same = |last: &LastEvaluation, effective: &[f64], events: &Arc<Events>| {
            Arc::ptr_eq(&last.events, events)
                && last.constant.to_bits() == data.constant_term().to_bits()
                && last.params.len() == effective.len()
                && last
                    .params
                    .iter()
                    .zip(effective)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
        };
        let (Some(events), Ok(effective)) =
            (data.events.as_ref(), self.parameters_for(params, data))
        else {
            return self.evaluate(params, data, grad);
        };
        let effective = effective.into_owned();
        if let Some(last) = self.last.as_deref().filter(|l| same(l, &effective, events)) {
            match (grad, &last.gradient) {
                (None, _) => return Ok(last.value),
                (Some(g), Some(kept)) if g.len() == kept.len() => {
                    g.copy_from_slice(kept);
                    return Ok(last.value);
                }
                (grad, _) => return self.evaluate_and_keep(params, data, grad, effective),
            }
        }
        self.evaluate_and_keep(params, data, grad, effective)
    }

    /// Groups `data`'s events for the channels' guarded selects ([`group_events`]) where some
    /// channel has them and enough events, and they are not grouped already; kept for the
    /// dataset's later evaluations (the last [`GROUPINGS_KEPT`] datasets'). A dataset not worth
    /// grouping leaves the kept ones as they are.
    fn group(&mut self, data: &Dataset) {
        let Some(events) = &data.events else {
            return;
        };
        if events.channels.len() != self.channels.len() {
            return;
        }
        if let Some(at) = self
            .grouped
            .iter()
            .position(|g| Arc::ptr_eq(&g.source, events))
        {
            let g = self.grouped.remove(at);
            self.grouped.insert(0, g);
            return;
        }
        let by: Vec<Option<usize>> = self
            .channels
            .iter()
            .zip(&events.channels)
            .map(|(c, table)| {
                let name = &self.columns[c.program.grouping_column?];
                let by = table.names.iter().position(|n| n == name)?;
                (table.len() >= GROUP_FROM).then_some(by)
            })
            .collect();
        if by.iter().all(Option::is_none) {
            return;
        }
        let channels = events
            .channels
            .iter()
            .zip(by)
            .map(|(table, by)| by.map(|by| group_events(table, by)))
            .collect();
        self.grouped.insert(
            0,
            Arc::new(Grouped {
                source: events.clone(),
                channels,
            }),
        );
        self.grouped.truncate(GROUPINGS_KEPT);
    }

    /// [`Self::evaluate`], kept as the last evaluation (at the parameters `effective`).
    fn evaluate_and_keep(
        &mut self,
        params: &[f64],
        data: &Dataset,
        mut grad: Option<&mut [f64]>,
        effective: Vec<f64>,
    ) -> histfit_seam::Result<f64> {
        self.last = None;
        let value = self.evaluate(params, data, grad.as_deref_mut())?;
        if let Some(events) = data.events.clone() {
            self.last = Some(Box::new(LastEvaluation {
                params: effective,
                events,
                constant: data.constant_term(),
                value,
                gradient: grad.map(|g| g.to_vec()),
            }));
        }
        Ok(value)
    }

    fn evaluate(
        &self,
        params: &[f64],
        data: &Dataset,
        mut grad: Option<&mut [f64]>,
    ) -> histfit_seam::Result<f64> {
        let n = self.space.len();
        if params.len() != n {
            return Err(ComputeError::Length {
                what: "parameters",
                expected: n,
                got: params.len(),
            });
        }
        let events = self.events_of(data)?;
        let grouped = data
            .events
            .as_ref()
            .and_then(|e| self.grouped.iter().find(|g| Arc::ptr_eq(&g.source, e)));
        let params = &*self.parameters_for(params, data)?;
        if let Some(g) = grad.as_deref_mut() {
            if g.len() != n {
                return Err(ComputeError::Length {
                    what: "gradient",
                    expected: n,
                    got: g.len(),
                });
            }
            g.fill(0.0);
        }
        let mut total = self
            .constraints
            .eval(params, &[], None, grad.as_deref_mut());
        for (k, (c, table)) in self.channels.iter().zip(&events.channels).enumerate() {
            let table = grouped
                .and_then(|g| g.channels[k].as_ref())
                .unwrap_or(table);
            let cols = self.columns_of(table);
            total += c
                .program
                .eval(params, &cols, table.weights.as_deref(), grad.as_deref_mut());
        }
        // A density that is zero or undefined at an event makes the likelihood zero there.
        if total.is_nan() {
            total = f64::INFINITY;
        }
        Ok(total + data.constant_term())
    }
}

impl Evaluator for UnbinnedModel {
    fn space(&self) -> &ParameterSpace {
        &self.space
    }

    fn nll(&mut self, params: &[f64], data: &Dataset) -> histfit_seam::Result<f64> {
        self.remembered(params, data, None)
    }

    fn nll_grad(
        &mut self,
        params: &[f64],
        data: &Dataset,
        grad: &mut [f64],
    ) -> histfit_seam::Result<f64> {
        self.remembered(params, data, Some(grad))
    }

    fn asimov(&mut self, params: &[f64]) -> histfit_seam::Result<Dataset> {
        crate::asimov::asimov(self, params)
    }

    fn toys(
        &mut self,
        params: &[f64],
        seed: u64,
        indices: std::ops::Range<u64>,
    ) -> histfit_seam::Result<Vec<Dataset>> {
        histfit_seam::rng::check_generation_params(params)?;
        indices.map(|i| self.toy(params, seed, i)).collect()
    }

    fn saturated_gap(
        &mut self,
        _params: &[f64],
        _data: &Dataset,
    ) -> histfit_seam::Result<(f64, usize)> {
        Err(ComputeError::Unsupported(
            "a saturated model of unbinned data",
        ))
    }
}

/// Events above which the curvature scales are taken on a thinned sample.
const SCALE_EVENTS: usize = 16_384;

/// Every k-th event of `t` weighted by k (times its own weight), k the smallest stride that
/// leaves at most `max` events: an estimate of every sum over the events; `t` itself where it
/// is small enough.
fn thin(t: &EventTable, max: usize) -> EventTable {
    let n = t.len();
    if n <= max {
        return t.clone();
    }
    t.strided(n.div_ceil(max), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Grouping is a permutation of the events (weights moved with them) into buckets of the
    /// column's range in order, each bucket's events in their own order.
    #[test]
    fn grouping_orders_events_by_bucket_and_moves_their_weights() {
        // One task, and several (the last short).
        for n in [10_000, 3 * GROUP_CHUNK + 5] {
            let x: Vec<f64> = (0..n)
                .map(|i| ((i as f64) * 0.618_034).fract() * 60.0 + 60.0)
                .collect();
            let y: Vec<f64> = (0..n).map(|i| i as f64).collect();
            let w: Vec<f64> = (0..n).map(|i| 1.0 + i as f64).collect();
            let table = EventTable {
                names: vec!["y".into(), "x".into()],
                columns: vec![y, x.clone()],
                weights: Some(w),
            };
            let g = group_events(&table, 1);
            assert_eq!(g.names, table.names);
            let (gy, gx, gw) = (&g.columns[0], &g.columns[1], g.weights.as_ref().unwrap());
            // Each event's three values moved together (y is its original index).
            for i in 0..n {
                let k = gy[i] as usize;
                assert_eq!(gx[i], x[k]);
                assert_eq!(gw[i], 1.0 + k as f64);
            }
            let mut seen = gy.clone();
            seen.sort_by(f64::total_cmp);
            assert!(
                seen.iter().enumerate().all(|(i, &k)| k == i as f64),
                "a permutation"
            );
            // Buckets of the values' range in order; within one, the original order.
            let (lo, hi) = (
                x.iter().copied().fold(f64::INFINITY, f64::min),
                x.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            );
            let bucket = |x: f64| {
                (((x - lo) * (GROUP_BUCKETS as f64 / (hi - lo))) as usize).min(GROUP_BUCKETS - 1)
            };
            for i in 1..n {
                let (a, b) = (bucket(gx[i - 1]), bucket(gx[i]));
                assert!(a <= b, "bucket {a} before {b}");
                if a == b {
                    assert!(gy[i - 1] < gy[i]);
                }
            }
        }
    }

    /// No events, every key equal, NaN and infinite keys: a permutation that keeps each
    /// event's values together, never an index out of range; equal keys keep their order, and
    /// beside finite keys NaN and −∞ go to the first bucket and +∞ to the last.
    #[test]
    fn grouping_takes_empty_equal_and_nan_keys() {
        let order = |x: Vec<f64>| -> Vec<f64> {
            let n = x.len();
            let table = EventTable {
                names: vec!["i".into(), "x".into()],
                columns: vec![(0..n).map(|i| i as f64).collect(), x.clone()],
                weights: None,
            };
            let g = group_events(&table, 1);
            for (k, gx) in g.columns[0].iter().zip(&g.columns[1]) {
                assert_eq!(gx.to_bits(), x[*k as usize].to_bits());
            }
            g.columns[0].clone()
        };
        assert!(order(Vec::new()).is_empty());
        let n = GROUP_CHUNK + 3;
        let same = order(vec![7.0; n]);
        assert!(same.iter().enumerate().all(|(i, &k)| k == i as f64));
        let mixed: Vec<f64> = (0..n)
            .map(|i| match i % 5 {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => f64::NEG_INFINITY,
                _ => i as f64,
            })
            .collect();
        let got = order(mixed.clone());
        // The events of one bucket in their own order, the buckets by the finite keys' range.
        let (lo, hi) = (3.0, (n - 1) as f64);
        let bucket = |x: f64| {
            (((x - lo) * (GROUP_BUCKETS as f64 / (hi - lo))) as usize).min(GROUP_BUCKETS - 1)
        };
        let mut want: Vec<usize> = (0..n).collect();
        want.sort_by_key(|&i| bucket(mixed[i]));
        assert!(got.iter().zip(&want).all(|(&k, &i)| k == i as f64));
        assert_eq!(bucket(f64::NAN), 0);
        assert_eq!(bucket(f64::INFINITY), GROUP_BUCKETS - 1);
    }

    /// A Crystal Ball fit's events are grouped once per dataset, and −ln L and its gradient
    /// over them equal those over the events as given (to roundings).
    #[test]
    fn evaluations_run_over_grouped_events() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/hs3/cb_exp_ext.json"
        );
        let doc = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut m = crate::open(&doc, &crate::Choice::default()).unwrap();
        let t = &m.observed.channels[0];
        // The 2 000 observed events four times over: enough to group.
        let table = EventTable {
            names: t.names.clone(),
            columns: t.columns.iter().map(|c| c.repeat(4)).collect(),
            weights: None,
        };
        let data = Dataset::of_events(
            Arc::new(Events {
                channels: vec![table],
            }),
            Vec::new(),
            Vec::new(),
            0.0,
        );
        let p = m.space.init.clone();
        let mut direct = vec![0.0; p.len()];
        let want = m.evaluate(&p, &data, Some(&mut direct)).unwrap();
        assert!(m.grouped.is_empty());
        let mut grouped = vec![0.0; p.len()];
        let got = m.nll_grad(&p, &data, &mut grouped).unwrap();
        let kept = m.grouped[0].clone();
        assert!(Arc::ptr_eq(&kept.source, data.events.as_ref().unwrap()));
        assert!(kept.channels[0].is_some());
        assert!(
            (got - want).abs() <= 1e-12 * want.abs(),
            "{got} against {want}"
        );
        for (a, b) in grouped.iter().zip(&direct) {
            assert!((a - b).abs() <= 1e-9 * (1.0 + b.abs()), "{a} against {b}");
        }
        // The same dataset again: the same grouping, not another; a dataset too small to group
        // in between (the observed 2 000 events) leaves it kept.
        let mut q = p.clone();
        q[0] *= 1.0 + 1e-6;
        m.nll(&q, &data).unwrap();
        assert!(Arc::ptr_eq(&m.grouped[0], &kept));
        let small = m.observed_dataset();
        m.nll(&q, &small).unwrap();
        m.nll(&p, &data).unwrap();
        assert_eq!(m.grouped.len(), 1);
        assert!(Arc::ptr_eq(&m.grouped[0], &kept));
    }
}

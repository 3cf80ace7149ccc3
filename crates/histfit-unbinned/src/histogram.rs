//! What the plot of an event-level fit draws: per channel of one observable, the events
//! histogrammed (Σw and √Σw² per bin) and the model's expected counts per bin at a parameter
//! point, in total and per component (the summands of a mixture), with the pulls.
//!
//! A bin's expected count is the integral of the channel's event density over the bin (8-point
//! Gauss–Legendre on pieces of each bin, on the same graph the likelihood evaluates): ν f(x) for an
//! extended channel; N f(x) for one that is not, N the events' Σw (the fit fixes only the shape
//! there). The components are the mixture's summands c·f, scaled alike. A channel of several
//! observables (a product, a histogram over several) gives one histogram per observable: the
//! projection, the density integrated over the other observables' domains too (8-point
//! Gauss–Legendre on 128 pieces of each other axis for two observables, 32 for three, cut at
//! histogram edges; more than three observables, or more evaluations than a bound, are left
//! out and said). The pulls are (Σw − ν)/√(ν r), r = Σw²/Σw of the bin: the
//! Poisson spread of the expectation, scaled for weighted events (r = 1 without weights). Each
//! bin is integrated on at least 512 / bins pieces, so that a narrow peak in a wide bin is not
//! missed; an expectation that is not finite or negative is an error naming the bin.

use crate::model::UnbinnedModel;
use crate::pdf::GL8;

/// Pieces of each other observable's domain a projection integrates over (by the channel's
/// number of observables): as many as the one-observable plot gives a bin's pieces for two, a
/// quarter of that for three.
const OTHER_PIECES: [usize; 3] = [0, 128, 32];

/// The most density evaluations a channel's projection may make (about a minute on one core).
const MAX_PROJECTION_POINTS: usize = 200_000_000;

/// One channel's histogram and expectations.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelHistogram {
    /// The distribution's name.
    pub channel: String,
    /// The dataset's name.
    pub data: String,
    pub observable: String,
    /// `bins + 1` edges spanning the observable's domain.
    pub edges: Vec<f64>,
    /// Σw of the events per bin (the count where unweighted).
    pub counts: Vec<f64>,
    /// √Σw² per bin (√count where unweighted).
    pub errors: Vec<f64>,
    /// Expected counts per bin.
    pub expected: Vec<f64>,
    /// Expected counts per bin of each component (name, counts).
    pub components: Vec<(String, Vec<f64>)>,
    /// (Σw − expected) / √(expected · Σw²/Σw) per bin, Σw²/Σw the bin's (the channel's where
    /// it is empty; (count − expected) / √expected for unweighted events; 0 where nothing is
    /// expected).
    pub pulls: Vec<f64>,
}

impl ChannelHistogram {
    /// The channel as result documents write it (`histfit distributions --json`).
    pub fn document(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.channel, "data": self.data, "observable": self.observable,
            "edges": self.edges, "counts": self.counts, "errors": self.errors,
            "expected": self.expected, "pulls": self.pulls,
            "components": self.components.iter()
                .map(|(n, v)| serde_json::json!({"name": n, "expected": v}))
                .collect::<Vec<_>>(),
        })
    }
}

/// The histograms of `model`'s channels with `bins` equal bins, at `params`: one per channel
/// and observable (the projections of a channel over several); notes name the channels left
/// out (over more than three observables).
pub fn histograms(
    model: &UnbinnedModel,
    params: &[f64],
    bins: usize,
) -> Result<(Vec<ChannelHistogram>, Vec<String>), String> {
    let g = &model.graph;
    let mut vals = vec![0.0; g.ops().len()];
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for (c, table) in model.channels.iter().zip(&model.observed.channels) {
        let dims = c.observables.len();
        if dims > 3 {
            notes.push(format!(
                "channel \"{}\" has {dims} observables: projections are drawn for up to three",
                c.name
            ));
            continue;
        }
        let mut axes = Vec::with_capacity(dims);
        for obs in &c.observables {
            let Some(column) = model.columns.iter().position(|n| n == &obs.name) else {
                notes.push(format!(
                    "channel \"{}\": its observable \"{}\" is no column of the events",
                    c.name, obs.name
                ));
                break;
            };
            axes.push((column, obs.lo, obs.hi));
        }
        if axes.len() != dims {
            continue;
        }
        // Each projection's quadrature points over the other observables: bounded, so that a
        // fine binning of three observables does not run for hours.
        let points = bins.max(128) * 8 * (OTHER_PIECES[dims - 1] * 8).pow(dims as u32 - 1);
        if points > MAX_PROJECTION_POINTS {
            notes.push(format!(
                "channel \"{}\": its projections at {bins} bins would take {points} evaluations of the density; fewer bins draw them",
                c.name
            ));
            continue;
        }
        for (k, obs) in c.observables.iter().enumerate() {
            let Some(xs) = table.column(&obs.name) else {
                return Err(format!(
                    "channel \"{}\": the events have no column \"{}\"",
                    c.name, obs.name
                ));
            };
            out.push(projection(
                model, c, table, xs, &axes, k, params, bins, &mut vals,
            )?);
        }
    }
    Ok((out, notes))
}

/// The histogram of one channel's events in its observable `k` (`xs`: that column) against the
/// expected counts of the channel's density integrated over the other observables' domains.
#[allow(clippy::too_many_arguments)]
fn projection(
    model: &UnbinnedModel,
    c: &crate::model::Channel,
    table: &histfit_seam::EventTable,
    xs: &[f64],
    axes: &[(usize, f64, f64)],
    k: usize,
    params: &[f64],
    bins: usize,
    vals: &mut [f64],
) -> Result<ChannelHistogram, String> {
    let g = &model.graph;
    let obs = &c.observables[k];
    let bins = bins.max(1);
    let width = (obs.hi - obs.lo) / bins as f64;
    let edges: Vec<f64> = (0..=bins).map(|i| obs.lo + width * i as f64).collect();
    // The events histogrammed: Σw and Σw² per bin (the last bin closed at the domain's top).
    let (mut counts, mut sumw2) = (vec![0.0; bins], vec![0.0; bins]);
    for (i, &x) in xs.iter().enumerate() {
        // (By the edges themselves, so that an event on an edge is in the bin it opens.)
        let b = edges.partition_point(|e| *e <= x).clamp(1, bins) - 1;
        let w = table.weights.as_ref().map_or(1.0, |w| w[i]);
        counts[b] += w;
        sumw2[b] += w * w;
    }
    let scale = match c.extended {
        true => 1.0,
        false => table.sum_of_weights(),
    };
    // Each bin integrated on pieces small enough for a narrow peak (at least 512 pieces of 8
    // points over the domain for one observable, 128 for several), the other observables on a
    // fixed grid of pieces over their domains.
    let dims = axes.len();
    let pieces = (if dims == 1 { 512usize } else { 128 }).div_ceil(bins);
    let other_pieces = OTHER_PIECES[dims - 1];
    // The other observables' quadrature points: (values, weight) over the box of their domains.
    let mut others: Vec<(Vec<f64>, f64)> = vec![(Vec::new(), 1.0)];
    for (j, &(col, lo, hi)) in axes.iter().enumerate() {
        if j == k {
            continue;
        }
        let line = nodes(g, col, lo, hi, other_pieces);
        others = others
            .iter()
            .flat_map(|(point, weight)| {
                line.iter().map(move |(x, w)| {
                    let mut p = point.clone();
                    p.push(*x);
                    (p, weight * w)
                })
            })
            .collect();
    }
    let other_columns: Vec<usize> = axes
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != k)
        .map(|(_, a)| a.0)
        .collect();
    let mut columns = vec![f64::NAN; model.columns.len()];
    let mut integrate = |node: crate::graph::Id, log: bool| -> Vec<f64> {
        // The nodes no event moves (normalisations: up to 2¹⁸ quadrature nodes for a generic
        // PDF) once; only the varying ones at each of the many points.
        let (uniform, varying): (Vec<u32>, Vec<u32>) = g
            .needed(node)
            .into_iter()
            .partition(|&i| !g.varying(crate::graph::Id(i)));
        g.value_of(&uniform, params, &columns, vals);
        (0..bins)
            .map(|b| {
                let mut sum = 0.0;
                for (x, w) in nodes(g, axes[k].0, edges[b], edges[b + 1], pieces) {
                    columns[axes[k].0] = x;
                    for (point, weight) in &others {
                        for (&col, &v) in other_columns.iter().zip(point) {
                            columns[col] = v;
                        }
                        let v = match varying.is_empty() {
                            true => vals[node.0 as usize],
                            false => g.value_of(&varying, params, &columns, vals),
                        };
                        sum += w * weight * if log { v.exp() } else { v };
                    }
                }
                scale * sum
            })
            .collect()
    };
    let expected = integrate(c.event_term, true);
    if let Some(b) = expected.iter().position(|e| !(e.is_finite() && *e >= 0.0)) {
        return Err(format!(
            "channel \"{}\": the expected count of bin {b} of \"{}\" ([{}, {}]) is {} (the density is not defined or not finite there at these parameters)",
            c.name,
            obs.name,
            edges[b],
            edges[b + 1],
            expected[b]
        ));
    }
    let components = c
        .components
        .iter()
        .map(|(name, id)| (name.clone(), integrate(*id, false)))
        .collect();
    // The expected spread of a bin's Σw: ν r_b with r_b = Σw²/Σw of the bin (the channel's
    // where the bin is empty; 1 for unweighted events: Poisson's √ν).
    let (sw, sw2): (f64, f64) = (counts.iter().sum(), sumw2.iter().sum());
    let r = if sw > 0.0 { sw2 / sw } else { 1.0 };
    let pulls = (0..bins)
        .map(|b| {
            let rb = if counts[b] > 0.0 {
                sumw2[b] / counts[b]
            } else {
                r
            };
            let e = expected[b];
            if e > 0.0 {
                (counts[b] - e) / (e * rb).sqrt()
            } else {
                0.0
            }
        })
        .collect();
    Ok(ChannelHistogram {
        channel: c.name.clone(),
        data: c.data.clone(),
        observable: obs.name.clone(),
        edges,
        counts,
        errors: sumw2.iter().map(|s| s.sqrt()).collect(),
        expected,
        components,
        pulls,
    })
}

/// Gauss–Legendre nodes and weights (8 a piece) over [lo, hi] cut into `pieces` equal pieces and
/// at every edge of a histogram the graph reads column `col` through, so that each piece's
/// integrand is smooth (a histogram's steps integrate exactly).
fn nodes(g: &crate::graph::Graph, col: usize, lo: f64, hi: f64, pieces: usize) -> Vec<(f64, f64)> {
    let mut cuts: Vec<f64> = (0..=pieces)
        .map(|q| lo + (hi - lo) * q as f64 / pieces as f64)
        .collect();
    for op in g.ops() {
        if let crate::graph::Op::Hist(a, t) = *op {
            if g.op(a) == crate::graph::Op::Column(col) {
                cuts.extend(
                    g.tables()[t as usize]
                        .edges()
                        .iter()
                        .filter(|e| **e > lo && **e < hi),
                );
            }
        }
    }
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    cuts.windows(2)
        .flat_map(|p| {
            let (mid, half) = (0.5 * (p[0] + p[1]), 0.5 * (p[1] - p[0]));
            GL8.iter().map(move |(u, w)| (mid + half * u, half * w))
        })
        .collect()
}

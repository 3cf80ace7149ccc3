//! What the plot of an event-level fit draws: per channel of one observable, the events
//! histogrammed (Σw and √Σw² per bin) and the model's expected counts per bin at a parameter
//! point, in total and per component (the summands of a mixture), with the pulls.
//!
//! A bin's expected count is the integral of the channel's event density over the bin (8-point
//! Gauss–Legendre on pieces of each bin, on the same graph the likelihood evaluates): ν f(x) for an
//! extended channel; N f(x) for one that is not, N the events' Σw (the fit fixes only the shape
//! there). The components are the mixture's summands c·f, scaled alike. A channel of several
//! observables (a product) is left out and said: its projections need integrals over the other
//! observables, not drawn yet. The pulls are (Σw − ν)/√(ν r), r = Σw²/Σw of the bin: the
//! Poisson spread of the expectation, scaled for weighted events (r = 1 without weights). Each
//! bin is integrated on at least 512 / bins pieces, so that a narrow peak in a wide bin is not
//! missed; an expectation that is not finite or negative is an error naming the bin.

use crate::model::UnbinnedModel;
use crate::pdf::GL8;

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

/// The histograms of `model`'s one-observable channels with `bins` equal bins, at `params`;
/// notes name the channels left out.
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
        let [obs] = c.observables.as_slice() else {
            notes.push(format!(
                "channel \"{}\" has {} observables: its projections are not drawn yet",
                c.name,
                c.observables.len()
            ));
            continue;
        };
        let Some(column) = model.columns.iter().position(|n| n == &obs.name) else {
            notes.push(format!(
                "channel \"{}\": its observable \"{}\" is no column of the events",
                c.name, obs.name
            ));
            continue;
        };
        let bins = bins.max(1);
        let width = (obs.hi - obs.lo) / bins as f64;
        let edges: Vec<f64> = (0..=bins).map(|i| obs.lo + width * i as f64).collect();
        // The events histogrammed: Σw and Σw² per bin (the last bin closed at the domain's top).
        let (mut counts, mut sumw2) = (vec![0.0; bins], vec![0.0; bins]);
        let xs = &table.columns[0];
        for (i, &x) in xs.iter().enumerate() {
            // (By the edges themselves, so that an event on an edge is in the bin it opens.)
            let k = edges.partition_point(|e| *e <= x).clamp(1, bins) - 1;
            let w = table.weights.as_ref().map_or(1.0, |w| w[i]);
            counts[k] += w;
            sumw2[k] += w * w;
        }
        let scale = match c.extended {
            true => 1.0,
            false => table.sum_of_weights(),
        };
        let mut columns = vec![f64::NAN; model.columns.len()];
        // Each bin integrated on pieces small enough for a narrow peak: at least 512 pieces of
        // 8 points over the domain.
        let pieces = 512usize.div_ceil(bins);
        let h = width / pieces as f64;
        let mut integrate = |node, log: bool| -> Vec<f64> {
            let needed = g.needed(node);
            (0..bins)
                .map(|k| {
                    let sum: f64 = (0..pieces)
                        .flat_map(|q| GL8.iter().map(move |gl| (q, gl)))
                        .map(|(q, (u, w))| {
                            let mid = edges[k] + (q as f64 + 0.5) * h;
                            columns[column] = mid + 0.5 * h * u;
                            let v = g.value_of(&needed, params, &columns, &mut vals);
                            w * if log { v.exp() } else { v }
                        })
                        .sum();
                    scale * 0.5 * h * sum
                })
                .collect()
        };
        let expected = integrate(c.event_term, true);
        if let Some(k) = expected.iter().position(|e| !(e.is_finite() && *e >= 0.0)) {
            return Err(format!(
                "channel \"{}\": the expected count of bin {k} ([{}, {}]) is {} (the density is not defined or not finite there at these parameters)",
                c.name,
                edges[k],
                edges[k + 1],
                expected[k]
            ));
        }
        let components = c
            .components
            .iter()
            .map(|(name, id)| (name.clone(), integrate(*id, false)))
            .collect();
        // The expected spread of a bin's Σw: ν r_k with r_k = Σw²/Σw of the bin (the
        // channel's where the bin is empty; 1 for unweighted events: Poisson's √ν).
        let (sw, sw2): (f64, f64) = (counts.iter().sum(), sumw2.iter().sum());
        let r = if sw > 0.0 { sw2 / sw } else { 1.0 };
        let pulls = (0..bins)
            .map(|k| {
                let rk = if counts[k] > 0.0 {
                    sumw2[k] / counts[k]
                } else {
                    r
                };
                let e = expected[k];
                if e > 0.0 {
                    (counts[k] - e) / (e * rk).sqrt()
                } else {
                    0.0
                }
            })
            .collect();
        out.push(ChannelHistogram {
            channel: c.name.clone(),
            data: c.data.clone(),
            observable: obs.name.clone(),
            edges,
            counts,
            errors: sumw2.iter().map(|s| s.sqrt()).collect(),
            expected,
            components,
            pulls,
        });
    }
    Ok((out, notes))
}

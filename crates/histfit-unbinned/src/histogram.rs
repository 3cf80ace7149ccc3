//! What the plot of an event-level fit draws: per channel of one observable, the events
//! histogrammed (Σw and √Σw² per bin) and the model's expected counts per bin at a parameter
//! point, in total and per component (the summands of a mixture), with the pulls.
//!
//! A bin's expected count is the integral of the channel's event density over the bin (8-point
//! Gauss–Legendre on each bin, on the same graph the likelihood evaluates): ν f(x) for an
//! extended channel; N f(x) for one that is not, N the events' Σw (the fit fixes only the shape
//! there). The components are the mixture's summands c·f, scaled alike. A channel of several
//! observables (a product) is left out and said: its projections need integrals over the other
//! observables, not drawn yet.

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
    /// (count − expected) / √expected per bin (0 where nothing is expected).
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
) -> (Vec<ChannelHistogram>, Vec<String>) {
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
        let column = model.columns.iter().position(|n| n == &obs.name);
        let Some(column) = column else { continue };
        let bins = bins.max(1);
        let width = (obs.hi - obs.lo) / bins as f64;
        let edges: Vec<f64> = (0..=bins).map(|i| obs.lo + width * i as f64).collect();
        // The events histogrammed: Σw and Σw² per bin (the last bin closed at the domain's top).
        let (mut counts, mut sumw2) = (vec![0.0; bins], vec![0.0; bins]);
        let xs = &table.columns[0];
        for (i, &x) in xs.iter().enumerate() {
            let k = (((x - obs.lo) / width) as usize).min(bins - 1);
            let w = table.weights.as_ref().map_or(1.0, |w| w[i]);
            counts[k] += w;
            sumw2[k] += w * w;
        }
        let scale = match c.extended {
            true => 1.0,
            false => table.sum_of_weights(),
        };
        let mut columns = vec![f64::NAN; model.columns.len()];
        let mut integrate = |node, log: bool| -> Vec<f64> {
            let needed = g.needed(node);
            (0..bins)
                .map(|k| {
                    let mid = edges[k] + 0.5 * width;
                    let sum: f64 = GL8
                        .iter()
                        .map(|(u, w)| {
                            columns[column] = mid + 0.5 * width * u;
                            let v = g.value_of(&needed, params, &columns, &mut vals);
                            w * if log { v.exp() } else { v }
                        })
                        .sum();
                    scale * 0.5 * width * sum
                })
                .collect()
        };
        let expected = integrate(c.event_term, true);
        let components = c
            .components
            .iter()
            .map(|(name, id)| (name.clone(), integrate(*id, false)))
            .collect();
        let pulls = counts
            .iter()
            .zip(&expected)
            .map(|(&n, &e)| if e > 0.0 { (n - e) / e.sqrt() } else { 0.0 })
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
    (out, notes)
}

//! The Asimov dataset of an event-level model: the data it expects at θ, as weighted events —
//! each channel's observables' box cut into equal cells, one event at each cell's centre
//! carrying the expected number of events in the cell by the midpoint rule (ν f(x) · volume
//! where extended; where not, the observed number of events times f(x) · volume). A fit of it
//! returns θ to within the midpoint rule's O(h²) (checked in the tests), which is what
//! asymptotic tests (q̃μ's Asimov σ, expected limits and significances) need of it. HS3 leaves
//! weighted unbinned data's meaning open; here a weight is an expected count. The global
//! observables of Gaussian constraints are set to their means at θ.

use crate::model::UnbinnedModel;
use histfit_seam::{Dataset, EventTable, Events};
use std::sync::Arc;

/// Cells per observable for a channel of `d` observables (about 2·10⁵ cells at most).
pub fn cells_per_observable(d: usize) -> usize {
    match d {
        1 => 4000,
        2 => 400,
        3 => 60,
        _ => 12,
    }
}

/// The Asimov dataset at `params`.
pub fn asimov(model: &UnbinnedModel, params: &[f64]) -> histfit_seam::Result<Dataset> {
    histfit_seam::rng::check_generation_params(params)?;
    let mut tables = Vec::with_capacity(model.channels.len());
    for (c, ch) in model.channels.iter().enumerate() {
        let d = ch.observables.len();
        let k = cells_per_observable(d);
        let cells = k.pow(d as u32);
        let mut columns = vec![Vec::with_capacity(cells); d];
        let mut volume = 1.0;
        for o in &ch.observables {
            volume *= (o.hi - o.lo) / k as f64;
        }
        for cell in 0..cells {
            let mut rest = cell;
            for (j, o) in ch.observables.iter().enumerate() {
                let i = rest % k;
                rest /= k;
                let w = (o.hi - o.lo) / k as f64;
                columns[j].push(o.lo + (i as f64 + 0.5) * w);
            }
        }
        let table = EventTable {
            names: ch.observables.iter().map(|o| o.name.clone()).collect(),
            columns,
            weights: None,
        };
        let logs = model.event_values(c, params, &table);
        let scale = if ch.extended {
            volume
        } else {
            volume * model.observed.channels[c].len() as f64
        };
        // Cells where nothing is expected are left out: a weight of 0 on a log-density of −∞
        // would make −ln L undefined there.
        let keep: Vec<usize> = (0..cells)
            .filter(|&i| logs[i].exp() * scale > 0.0)
            .collect();
        tables.push(EventTable {
            columns: table
                .columns
                .iter()
                .map(|col| keep.iter().map(|&i| col[i]).collect())
                .collect(),
            weights: Some(keep.iter().map(|&i| logs[i].exp() * scale).collect()),
            names: table.names,
        });
    }
    Ok(Dataset::of_events(
        Arc::new(Events { channels: tables }),
        Vec::new(),
        model.asimov_globals(params),
        0.0,
    ))
}

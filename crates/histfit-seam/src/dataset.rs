//! A dataset the likelihood is evaluated against: main counts and auxiliary data, with the terms
//! that depend only on the data (ln Γ(n+1), Gaussian normalisations) summed once up front.

use crate::{ComputeError, Result};
use std::sync::Arc;

/// What an auxiliary datum is the observation of, for the constant of −ln L: a Gaussian
/// constraint of width `sigma`, or a Poisson one (a count).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AuxTerm {
    Gauss { sigma: f64 },
    Poisson,
}

/// The events of one event-level channel: one column per observable (structure of arrays, in
/// the order of `names`) and optional per-event weights.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventTable {
    pub names: Vec<String>,
    pub columns: Vec<Vec<f64>>,
    pub weights: Option<Vec<f64>>,
}

impl EventTable {
    /// The number of events.
    pub fn len(&self) -> usize {
        self.columns.first().map_or(0, Vec::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The column of an observable.
    pub fn column(&self, name: &str) -> Option<&[f64]> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| &self.columns[i][..])
    }

    /// Σ w (the number of events where unweighted).
    pub fn sum_of_weights(&self) -> f64 {
        self.weights
            .as_ref()
            .map_or(self.len() as f64, |w| w.iter().sum())
    }

    /// Every `k`-th event from the `first` (first, first + k, first + 2k, …), each weighted `k` times
    /// its own weight: an estimate of every sum over the events.
    pub fn strided(&self, k: usize, first: usize) -> EventTable {
        let k = k.max(1);
        let every = |v: &Vec<f64>| {
            v.iter()
                .skip(first)
                .step_by(k)
                .copied()
                .collect::<Vec<f64>>()
        };
        let weights = match &self.weights {
            Some(w) => w
                .iter()
                .skip(first)
                .step_by(k)
                .map(|w| w * k as f64)
                .collect(),
            None => vec![k as f64; self.len().saturating_sub(first).div_ceil(k)],
        };
        EventTable {
            names: self.names.clone(),
            columns: self.columns.iter().map(every).collect(),
            weights: Some(weights),
        }
    }
}

/// The events of an event-level likelihood, one table per channel, shared (never copied) by
/// every fit of the dataset.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Events {
    pub channels: Vec<EventTable>,
}

/// Counts from which [`count_constant`] takes Stirling's series (the CUDA kernel's too).
pub const STIRLING_FROM: f64 = 1e4;

/// The part of −ln L of one count n that depends on the data alone: ln Γ(n + 1) + n − n ln n.
/// Poisson terms are evaluated relative to their saturated value (λ = n), which keeps every
/// term O(1) and f resolvable to ~1e-13; what that shifts lives here: λ − n ln λ =
/// [λ − n − n ln(λ/n)] + (n − n ln n). From [`STIRLING_FROM`] on it is Stirling's series
/// ½ ln(2πn) + 1/(12n) − 1/(360n³) + 1/(1260n⁵) (exact to double precision there): the two
/// halves of the direct form are each ≈ n ln n, and for the auxiliary count of a shapesys γ
/// known to 1e-6 (n ≈ 1e12) their difference would be rounded to 0.004 — differently on each
/// device. The CUDA kernel's `count_constant` is the same function.
pub fn count_constant(n: f64) -> f64 {
    if n >= STIRLING_FROM {
        let r = 1.0 / n;
        let r2 = r * r;
        0.5 * (2.0 * std::f64::consts::PI * n).ln()
            + r * (1.0 / 12.0 - r2 * (1.0 / 360.0 - r2 / 1260.0))
    } else if n > 0.0 {
        libm::lgamma(n + 1.0) + (n - n * n.ln())
    } else {
        libm::lgamma(n + 1.0)
    }
}

/// Observed (or toy, or Asimov) data for one model.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub main: Vec<f64>,
    pub aux: Vec<f64>,
    /// Σ [ln Γ(n+1) + n − n ln n] over main bins and Poisson aux, plus Σ (ln σ + ½ ln 2π) of
    /// Gaussian constraints: everything in −ln L that does not depend on the parameters.
    pub constant: f64,
    /// Set when the main counts live only in the memory of the device evaluator that made the
    /// dataset (the key it gave out, see [`Dataset::on_device`]); `main` then holds NaN.
    pub resident: Option<u64>,
    /// How far below λ = 0 a main bin without events continues: the `w` of
    /// [`crate::EMPTY_BIN_WALL`], which every dataset has. A fit's first descent uses copies with
    /// wider walls ([`Dataset::with_empty_bin_wall`]) and ends on this one; it does not change
    /// −ln L where every λ ≥ 0.
    pub empty_bin_wall: f64,
    /// For a dataset whose counts a device holds: whether one of them is 0 (the device says).
    device_has_empty: bool,
    /// The events of an event-level likelihood (its binned channels' counts stay in `main`).
    pub events: Option<Arc<Events>>,
}

impl Dataset {
    /// A dataset of another likelihood kind, which defines what its values mean and computes
    /// its own constant (the part of −ln L that depends on the data alone).
    pub fn raw(main: Vec<f64>, aux: Vec<f64>, constant: f64) -> Dataset {
        Dataset {
            main,
            aux,
            constant,
            resident: None,
            empty_bin_wall: crate::EMPTY_BIN_WALL,
            device_has_empty: false,
            events: None,
        }
    }

    /// A dataset of events (and the binned counts and auxiliary data of the same likelihood),
    /// whose likelihood defines what its values mean and computes its own constant.
    pub fn of_events(events: Arc<Events>, main: Vec<f64>, aux: Vec<f64>, constant: f64) -> Dataset {
        Dataset {
            events: Some(events),
            ..Dataset::raw(main, aux, constant)
        }
    }

    /// Counts in `main` bins (Poisson) and auxiliary data, one per `aux_terms` entry, checked
    /// (finite, counts not negative) and with the part of −ln L that depends on them alone
    /// summed once.
    pub fn from_counts(main: Vec<f64>, aux: Vec<f64>, aux_terms: &[AuxTerm]) -> Result<Dataset> {
        if aux.len() != aux_terms.len() {
            return Err(ComputeError::Length {
                what: "auxiliary data",
                expected: aux_terms.len(),
                got: aux.len(),
            });
        }
        for (what, xs) in [("main data", &main), ("auxiliary data", &aux)] {
            if let Some(i) = xs.iter().position(|x| !x.is_finite()) {
                return Err(ComputeError::InvalidData {
                    place: format!("{what}[{i}]"),
                    rule: "must be finite".into(),
                });
            }
        }
        if let Some(i) = main.iter().position(|x| *x < 0.0) {
            return Err(ComputeError::InvalidData {
                place: format!("main data[{i}]"),
                rule: "counts must not be negative".into(),
            });
        }
        // Poisson terms are evaluated relative to their saturated value (λ = n), which keeps every
        // per-bin term O(1) and f resolvable to ~1e-13; what that shifts lives in the constant:
        // λ − n ln λ = [λ − n − n ln(λ/n)] + (n − n ln n).
        let mut constant: f64 = main.iter().map(|&n| count_constant(n)).sum();
        let half_ln_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
        for (term, &a) in aux_terms.iter().zip(&aux) {
            match *term {
                AuxTerm::Gauss { sigma } => constant += sigma.ln() + half_ln_2pi,
                AuxTerm::Poisson => constant += count_constant(a),
            }
        }
        Ok(Dataset::raw(main, aux, constant))
    }

    /// A dataset whose main counts a device evaluator keeps in its own memory under `key` (an
    /// Asimov dataset built from yields that live there). Only that evaluator can use it: the
    /// host sees NaN counts. `main_constant`: the main counts' part of [`Dataset::constant`]
    /// (Σ ln Γ(n+1) + n − n ln n), summed by the device; `has_empty`: whether a main count is 0
    /// (see [`Dataset::has_empty_main_bin`]).
    pub fn on_device(
        n_main: usize,
        aux: Vec<f64>,
        aux_terms: &[AuxTerm],
        main_constant: f64,
        has_empty: bool,
        key: u64,
    ) -> Result<Dataset> {
        let mut d = Dataset::from_counts(vec![0.0; n_main], aux, aux_terms)?;
        d.main.fill(f64::NAN);
        d.constant += main_constant;
        d.resident = Some(key);
        d.device_has_empty = has_empty;
        Ok(d)
    }

    /// Whether a main bin has no events (as the device says for a dataset it holds): only then
    /// does [`Dataset::empty_bin_wall`] matter, and only then do fits widen it first.
    pub fn has_empty_main_bin(&self) -> bool {
        if self.resident.is_some() {
            self.device_has_empty
        } else {
            self.main.contains(&0.0)
        }
    }

    /// The part of −ln L that depends on the data alone.
    pub fn constant_term(&self) -> f64 {
        self.constant
    }

    /// This dataset with its constant set to 0: what fits minimise, so the constant (≈ 166 for
    /// tHu next to a varying part of ≈ 14) costs f no bits of resolution.
    pub fn without_constant(&self) -> Dataset {
        Dataset {
            constant: 0.0,
            ..self.clone()
        }
    }

    /// The number of events over every channel (0 for bin counts alone).
    pub fn event_count(&self) -> usize {
        self.events
            .as_ref()
            .map_or(0, |e| e.channels.iter().map(EventTable::len).sum())
    }

    /// This dataset with every `k`-th event — the middle one of each block of `k` — of each
    /// channel of at least `from` events, weighted `k` times ([`EventTable::strided`]; smaller
    /// channels whole): −ln L of the events follows the whole dataset's at about 1/k of the
    /// cost, a fit's warm start. (The middle of each block: a grid of events, as an Asimov
    /// dataset's, thins to the centres of its blocks.) The bin counts and auxiliary data stay.
    /// `None` without events.
    pub fn thinned(&self, k: usize, from: usize) -> Option<Dataset> {
        let events = self.events.as_ref()?;
        let channels = events
            .channels
            .iter()
            .map(|t| match t.len() >= from {
                true => t.strided(k, k / 2),
                false => t.clone(),
            })
            .collect();
        Some(Dataset {
            events: Some(Arc::new(Events { channels })),
            ..self.clone()
        })
    }

    /// This dataset with empty main bins continuing below λ = 0 over a width `wall` instead
    /// (see [`Dataset::empty_bin_wall`]; a positive, finite width).
    pub fn with_empty_bin_wall(&self, wall: f64) -> Dataset {
        assert!(
            wall > 0.0 && wall.is_finite(),
            "an empty-bin wall is a positive width, not {wall}"
        );
        Dataset {
            empty_bin_wall: wall,
            ..self.clone()
        }
    }

    /// The dataset one part of a mixed likelihood reads: these main counts (or none), the
    /// auxiliary data `aux`, the events (or none) and the constant given; the empty-bin wall and
    /// the device's view of the counts as they are.
    pub fn part(
        &self,
        main: bool,
        aux: std::ops::Range<usize>,
        events: bool,
        constant: f64,
    ) -> Dataset {
        Dataset {
            main: if main { self.main.clone() } else { Vec::new() },
            aux: self.aux[aux].to_vec(),
            constant,
            resident: if main { self.resident } else { None },
            empty_bin_wall: self.empty_bin_wall,
            device_has_empty: main && self.device_has_empty,
            events: if events { self.events.clone() } else { None },
        }
    }

    /// A mixed likelihood's dataset from its parts' (the inverse of [`Dataset::part`]): the
    /// binned part's counts, both parts' auxiliary data (the binned part's first), the
    /// event-level part's events, the constants summed.
    pub fn joined(binned: Dataset, events: Dataset) -> Dataset {
        let mut aux = binned.aux;
        aux.extend_from_slice(&events.aux);
        Dataset {
            main: binned.main,
            aux,
            constant: binned.constant + events.constant,
            events: events.events,
            ..binned
        }
    }

    /// pyhf's flat layout.
    pub fn to_vec(&self) -> Vec<f64> {
        let mut v = self.main.clone();
        v.extend_from_slice(&self.aux);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::{count_constant, STIRLING_FROM};

    /// Stirling's series meets the direct form where it takes over, and moves smoothly with
    /// counts of 1e9–1e12 (by 1/(2n) a count), where the direct form's two halves of ≈ n ln n
    /// would round their difference to 1e-6–1e-3.
    #[test]
    fn count_constants_are_smooth_at_large_counts() {
        let n = STIRLING_FROM;
        let direct = libm::lgamma(n + 1.0) + (n - n * n.ln());
        assert!((count_constant(n) - direct).abs() < 1e-10);
        assert_eq!(count_constant(0.0), 0.0);
        assert!((count_constant(1.0) - 1.0).abs() < 1e-15);
        for n in [1e9, 3.7e10, 1e12] {
            let step = count_constant(n + 1.0) - count_constant(n);
            assert!((step - 0.5 / n).abs() < 1e-14, "{n}: {step}");
        }
    }
}

#[cfg(test)]
mod thinning_tests {
    use super::*;

    /// A thinned dataset keeps the middle event of each block of k (weighted k times its own
    /// weight) in channels of at least `from` events, and smaller channels whole.
    #[test]
    fn thinning_keeps_each_blocks_middle_event_of_large_channels() {
        let table = |n: usize, weights: bool| EventTable {
            names: vec!["x".into()],
            columns: vec![(0..n).map(|i| i as f64).collect()],
            weights: weights.then(|| (0..n).map(|i| 1.0 + i as f64).collect()),
        };
        let data = Dataset::of_events(
            Arc::new(Events {
                channels: vec![table(100, false), table(35, true), table(3, false)],
            }),
            Vec::new(),
            Vec::new(),
            0.0,
        );
        let thin = data.thinned(16, 10).unwrap();
        let ch = &thin.events.as_ref().unwrap().channels;
        assert_eq!(ch[0].columns[0], [8.0, 24.0, 40.0, 56.0, 72.0, 88.0]);
        assert_eq!(ch[0].weights.as_deref(), Some(&[16.0; 6][..]));
        assert_eq!(ch[1].columns[0], [8.0, 24.0]);
        assert_eq!(
            ch[1].weights.as_deref(),
            Some(&[16.0 * 9.0, 16.0 * 25.0][..])
        );
        assert_eq!(ch[2], table(3, false));
        assert_eq!(data.event_count(), 138);
        assert!(Dataset::raw(vec![1.0], Vec::new(), 0.0)
            .thinned(16, 10)
            .is_none());
    }
}

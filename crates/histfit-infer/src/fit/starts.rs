//! Where a fit starts its searches: the requested point, the model's initial point when the
//! request is not finite there, and deterministic further starts that look for a lower basin:
//! one with the free normalisations low ([`low_normalisations`]), then points around the
//! model's initial point.
//!
//! Binned likelihoods of real analyses are multimodal more often than one would hope: variations
//! on one side of the nominal (hi and lo both above it) make a yield fall and rise again with α,
//! free normalisations of processes sharing bins trade events between them, and interpolation
//! kinks split basins. From one start any local method ends in the basin it meets first. More starts
//! find the lower basins; they cost one local search each, so their number falls with the
//! number of free parameters (see [`auto_starts`]), grows where they keep finding different
//! minima (up to four batches), and can be set per fit ([`super::Starts`]).

use super::problem::Problem;

/// Further starts for a problem with `n_free` free parameters when the caller leaves it to the
/// fit: 24 for up to 16 parameters, falling as 384/n (one search costs about n times more
/// evaluations of n-dimensional gradients), none above 64, where one search is already tens of
/// milliseconds and real models are rarely this multimodal in practice.
pub(crate) fn auto_starts(n_free: usize) -> usize {
    match n_free {
        0 => 0,
        1..=16 => 24,
        17..=64 => 384 / n_free,
        _ => 0,
    }
}

/// Start number `j` (1, 2, …) around `center`: every free coordinate drawn uniformly within
/// `width` of it — θ within ±0.5 for factors around 1 with a lower bound of 0 or more
/// (normalisations, γ), ±2 units of the scale otherwise — and clamped inside the bounds. The
/// draws come from a fixed hash of (j, coordinate), so a fit gives the same result on every run
/// and device.
pub(crate) fn start_point(p: &Problem, center: &[f64], j: u64, width: f64) -> Vec<f64> {
    (0..center.len())
        .map(|k| start_coordinate(p, center, j, width, k))
        .collect()
}

/// The start with every free normalisation at a tenth of its value at `center` (the optimizer's
/// coordinates, within the bounds), the others as there; `None` where that is `center` itself
/// (no free normalisation, or bounds that keep them where they are).
/// [`start_point`]'s draws keep factors within ±0.5 of 1, so they never reach the corner where
/// processes sharing bins are small, and a basin there is one a start in a hundred finds: on
/// random workspace 51/8899 (smooth codes) two normalisations at 0 with a normsys moved across
/// lie 0.90 lower in twice_nll (BENCHMARKS.md, issue 21, session 25). A tenth rather than 0:
/// with every process of a bin at 0 its Poisson term is not finite.
pub(crate) fn low_normalisations(p: &Problem, center: &[f64]) -> Option<Vec<f64>> {
    if !p.normalisations.iter().any(|&n| n) {
        return None;
    }
    let low = |(k, &z): (usize, &f64)| match p.normalisations[k] {
        true => (0.1 * z).clamp(p.lower[k], p.upper[k]),
        false => z,
    };
    let z: Vec<f64> = center.iter().enumerate().map(low).collect();
    (z != center).then_some(z)
}

/// Free coordinate `k` of [`start_point`].
fn start_coordinate(p: &Problem, center: &[f64], j: u64, width: f64, k: usize) -> f64 {
    let u = 2.0 * unit(j, k as u64) - 1.0;
    let s = p.scale[k];
    let factor = (center[k] * s - 1.0).abs() < 0.5 && p.lower[k] >= 0.0;
    let w = if factor { 0.25 * width / s } else { width };
    let (lo, hi) = (p.lower[k], p.upper[k]);
    // Inside the bounds by a little, where a bound is finite (γ at 0 is not finite).
    let margin = 1e-3 * (hi - lo).min(1.0);
    (center[k] + w * u).clamp(lo + margin, hi - margin)
}

/// Starts made for a toy whose first two starts ended in different basins (see
/// [`SecondStart::further`]).
pub(crate) const FURTHER_STARTS: usize = 4;

/// The second start of every toy of a large model's ensemble ([`crate::toys`]): the mirror of a
/// fit's end point through its start, 2·start − end in the optimizer's units (θ/scale), inside
/// the bounds. Where the first descent walked from the generating point into one basin, the
/// mirror lies as far on the other side, where the other basin of a ridge the first descent
/// crossed usually is (session 19 of BENCHMARKS.md, issue 21: on the public 1Lbb and 3L
/// off-shell likelihoods it found the lower minimum on every toy where a random restart did).
pub(crate) struct SecondStart {
    p: Problem,
    z_start: Vec<f64>,
    /// Points around the model's initial point that every toy also starts from where asked
    /// (an explicit [`super::Starts::Count`]); `None`: [`AROUND_STARTS`] where the ensemble's
    /// basin probe finds a lower basin, none elsewhere.
    asked: Option<usize>,
}

/// Starts around the model's initial point that every toy of an ensemble makes, unless asked
/// otherwise, where the ensemble's basin probe found a lower basin: a likelihood shown to be
/// multimodal near its toys. The mirror and the further starts miss basins that a few random
/// points in a hundred reach; 8 such points found them on all but 1 of 800 toys of four public
/// likelihoods checked against sign-flip and random restarts (BENCHMARKS.md, issue 21,
/// session 22), but not on the public 3L eRJR likelihood (smooth codes, seed 0): toy 499's
/// lowest basin (2.75 below) took 12 of them, toy 191's (0.52 below) 32, and the toys' own
/// starts gave no sign of either (all 8 ended in one basin) — while one device's descents
/// reached it and the other's did not (issue 51, s42). With 32 no toy of its first 200 ends
/// above the lowest of 60 starts, at 2.1× the ensemble's time there (1Lbb 1.9×); a likelihood
/// whose probe finds no lower basin pays nothing.
pub(crate) const AROUND_STARTS: usize = 32;

/// The number of the first of the basin probe's starts around the initial point
/// ([`SecondStart::probe_around`]): 8, what [`AROUND_STARTS`] was when the probe's points were
/// chosen — kept so that the probe decides as it did. A probe toy's own starts repeat its 4
/// (the same fits, the same minima: 800 fits more an ensemble, 1 % at 4 000 toys).
const PROBE_FIRST: usize = 8;

/// Starts around the model's initial point that each toy of an ensemble's basin probe makes
/// (consulted where the mirror found no lower basin; a device makes them in the mirror's launch
/// whatever the mirror finds). On the public 3L resonance likelihood under pyhf's
/// codes 3 of the probe's 200 toys have a lower basin that 8 such starts reach; four found
/// them where a single start per toy found none (BENCHMARKS.md, issue 21, session 24).
pub(crate) const PROBE_AROUND: usize = 4;

impl SecondStart {
    /// The second start of fits under `opts` (which start at `opts.init`), where those fits make
    /// one: a model with more free parameters than [`auto_starts`] makes further starts for,
    /// its starts left to the fit ([`super::Starts::Auto`]) or set to a count above 0, which
    /// becomes that many [`SecondStart::around_all`] starts per toy. `None` otherwise (a model
    /// whose fits make their own further starts, or `Starts::Count(0)`: one start only).
    pub fn new(
        space: &histfit_seam::ParameterSpace,
        opts: &super::FitOptions,
    ) -> crate::Result<Option<Self>> {
        let asked = match opts.starts {
            super::Starts::Auto => None,
            super::Starts::Count(0) => return Ok(None),
            super::Starts::Count(k) => Some(k),
        };
        let p = Problem::new(space, opts)?;
        let n = p.free.len();
        if n == 0 || auto_starts(n) > 0 {
            return Ok(None);
        }
        let z_start = p.z_of(&p.start);
        Ok(Some(SecondStart { p, z_start, asked }))
    }

    /// How many [`SecondStart::around_all`] starts every toy makes, given whether the ensemble's
    /// basin probe found a lower basin.
    pub fn around_count(&self, probe_lower: bool) -> usize {
        self.asked
            .unwrap_or(if probe_lower { AROUND_STARTS } else { 0 })
    }

    /// Extra start `r` (0, 1, …) of toy `index` written over `x` (a copy of the fit's start): a
    /// point around the model's initial point (`z_model`, in the optimizer's units) drawn as a
    /// fit's further starts are ([`start_point`]), from a stream apart from
    /// [`SecondStart::further`]'s (the top bit of the draw's number set).
    fn around_into(&self, z_model: &[f64], index: u64, r: usize, x: &mut [f64]) {
        let p = &self.p;
        let j = (1u64 << 63) | index.wrapping_mul(1 << 16).wrapping_add(r as u64);
        for (k, &i) in p.free.iter().enumerate() {
            x[i] = start_coordinate(p, z_model, j, 2.0, k) * p.scale[k];
        }
    }

    /// Starts `0..count` around the model's initial point ([`SecondStart::around_into`]) for
    /// every toy of `list`, in one flat buffer:
    /// start 0 of each toy of the list in order, then start 1 of each, … (n values a start),
    /// as one device launch of further starts takes them. Built by all threads straight into the
    /// buffer: for 100 000 toys of a 328-parameter model, 8 starts are 2.1 GB, which one thread
    /// took seconds to build and copy while the devices waited (BENCHMARKS.md, issue 24); the
    /// ensemble asks for blocks of toys of at most 1 GB (`toys::Pass::around`).
    pub fn around_all(&self, list: &[u64], count: usize) -> Vec<f64> {
        self.around_starts(list, 0..count)
    }

    /// The basin probe's [`PROBE_AROUND`] starts around the model's initial point for every toy
    /// of `list`, start after start as [`SecondStart::around_all`] lays them out: numbers
    /// [`PROBE_FIRST`] onwards of [`SecondStart::around_into`]. `None` where the toys' starts
    /// around it were asked for (their count does not depend on the probe).
    pub fn probe_around(&self, list: &[u64]) -> Option<Vec<f64>> {
        self.asked
            .is_none()
            .then(|| self.around_starts(list, PROBE_FIRST..PROBE_FIRST + PROBE_AROUND))
    }

    /// Starts `rs` around the model's initial point for every toy of `list`, start after start.
    fn around_starts(&self, list: &[u64], rs: std::ops::Range<usize>) -> Vec<f64> {
        use rayon::prelude::*;
        let p = &self.p;
        let n = p.start.len();
        let z_model = p.z_of(&p.model_start);
        let mut out = vec![0.0; n * list.len() * rs.len()];
        if n == 0 || list.is_empty() {
            return out;
        }
        out.par_chunks_mut(n).enumerate().for_each(|(k, x)| {
            x.copy_from_slice(&p.start);
            self.around_into(&z_model, list[k % list.len()], rs.start + k / list.len(), x);
        });
        out
    }

    /// Further starts of toy `index` whose first two starts ended in different basins: the
    /// model's initial point and [`FURTHER_STARTS`] − 1 points spread around it as a fit's own
    /// further starts are ([`start_point`], drawn from the toy's index).
    pub fn further(&self, index: u64) -> Vec<Vec<f64>> {
        let p = &self.p;
        let z_model = p.z_of(&p.model_start);
        let mut out = vec![p.x_of(&z_model)];
        for r in 1..FURTHER_STARTS as u64 {
            let j = index.wrapping_mul(FURTHER_STARTS as u64).wrapping_add(r);
            out.push(p.x_of(&start_point(p, &z_model, j, 2.0)));
        }
        out
    }

    /// The second start of a fit that ended at `end` (every parameter; a coordinate that is not
    /// finite there stays at the start).
    pub fn of(&self, end: &[f64]) -> Vec<f64> {
        let p = &self.p;
        let z_end = p.z_of(end);
        let z: Vec<f64> = (0..p.free.len())
            .map(|k| {
                let (lo, hi) = (p.lower[k], p.upper[k]);
                let margin = 1e-3 * (hi - lo).min(1.0);
                let m = 2.0 * self.z_start[k] - z_end[k];
                if m.is_finite() {
                    m.clamp(lo + margin, hi - margin)
                } else {
                    self.z_start[k]
                }
            })
            .collect();
        p.x_of(&z)
    }
}

/// A uniform number in [0, 1) from (j, k): SplitMix64 of their combination.
fn unit(j: u64, k: u64) -> f64 {
    let mut z = j
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(k.wrapping_mul(0xD1B5_4A32_D192_ED03))
        .wrapping_add(0x632B_E59B_D9B4_E019);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The second start of `workspace_tHu`'s fits (smooth codes) under `opts`.
    fn thu_second(opts: &crate::fit::FitOptions) -> Option<SecondStart> {
        use histfit_seam::Evaluator;
        let (model, _) =
            histfit_testutil::load("workspace_tHu", histfit_testutil::settings("smooth"));
        let ev = histfit_compute::CpuEvaluator::new(model);
        SecondStart::new(ev.space(), opts).unwrap()
    }

    /// The low start moves the free normalisations (here the POI `mu`) to a tenth of their
    /// value, inside their bounds, and nothing else; none where that moves nothing.
    #[test]
    fn the_low_start_moves_only_free_normalisations() {
        use histfit_seam::Evaluator;
        let (model, _) =
            histfit_testutil::load("simple_workspace", histfit_testutil::settings("smooth"));
        let ev = histfit_compute::CpuEvaluator::new(model.clone());
        let space = ev.space().clone();
        let mu = model.poi.unwrap();
        let problem = |o: &crate::fit::FitOptions| Problem::new(&space, o).unwrap();
        let with_mu_bounds = |lo: f64| crate::fit::FitOptions {
            bounds: Some({
                let mut b = space.bounds.clone();
                b[mu] = (lo, 10.0);
                b
            }),
            ..Default::default()
        };
        let p = problem(&Default::default());
        let k = p.free.iter().position(|&i| i == mu).unwrap();
        assert_eq!(p.normalisations.iter().filter(|&&n| n).count(), 1);
        assert!(p.normalisations[k]);
        let z = p.z_of(&p.model_start);
        let low = low_normalisations(&p, &z).unwrap();
        for (j, (a, b)) in low.iter().zip(&z).enumerate() {
            match j == k {
                true => assert_eq!(*a, 0.1 * b),
                false => assert_eq!(a, b),
            }
        }
        // Within the bounds, and none where the bound keeps the normalisation where it is.
        let p = problem(&with_mu_bounds(0.5));
        let low = low_normalisations(&p, &p.z_of(&p.model_start)).unwrap();
        assert_eq!(low[k] * p.scale[k], 0.5);
        let p = problem(&with_mu_bounds(1.0));
        assert!(low_normalisations(&p, &p.z_of(&p.model_start)).is_none());
        let held = crate::fit::FitOptions {
            fix: vec![(mu, 1.0)],
            ..Default::default()
        };
        let p = problem(&held);
        assert!(low_normalisations(&p, &p.z_of(&p.model_start)).is_none());
    }

    #[test]
    fn draws_are_uniform_and_distinct() {
        let n = 20_000;
        let draws: Vec<f64> = (0..n).map(|j| unit(j as u64, 3)).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
        assert!(draws.iter().all(|&u| (0.0..1.0).contains(&u)));
        assert_ne!(unit(1, 2), unit(2, 1));
    }

    /// The flat buffer holds, for pass r and toy i, the point drawn for (i, r) around the
    /// model's initial point (fixed parameters at the fit's start), pass after pass.
    #[test]
    fn starts_around_the_init_are_laid_out_pass_after_pass() {
        let second = thu_second(&crate::fit::FitOptions::default())
            .expect("tHu's fits leave the further starts to the ensemble");
        let p = &second.p;
        let n = p.start.len();
        let z_model = p.z_of(&p.model_start);
        let list = [7u64, 2, 40_000];
        let all = second.around_all(&list, 3);
        assert_eq!(all.len(), 3 * list.len() * n);
        let mut seen = Vec::new();
        for r in 0..3 {
            for (k, &i) in list.iter().enumerate() {
                let j = (1u64 << 63) | i.wrapping_mul(1 << 16).wrapping_add(r as u64);
                let want = p.x_of(&start_point(p, &z_model, j, 2.0));
                let got = &all[(r * list.len() + k) * n..(r * list.len() + k + 1) * n];
                assert_eq!(got, &want[..], "toy {i}, start {r}");
                seen.push(got.to_vec());
            }
        }
        seen.sort_by(|a, b| a.partial_cmp(b).unwrap());
        seen.dedup();
        assert_eq!(seen.len(), 9, "every toy's every start its own point");
        assert!(second.around_all(&[], 8).is_empty());
    }

    /// The probe's starts around the init are the stream's starts PROBE_FIRST onwards, laid
    /// out as `around_all` lays out its own. None where the toys' count of such starts was
    /// asked for.
    #[test]
    fn the_probes_starts_around_the_init_follow_the_ensembles() {
        let second = thu_second(&crate::fit::FitOptions::default())
            .expect("tHu's fits leave the further starts to the ensemble");
        let list = [0u64, 1, 199];
        let n = second.p.start.len();
        let per = list.len() * n;
        let all = second.around_all(&list, PROBE_FIRST + PROBE_AROUND);
        let probe = second.probe_around(&list).expect("starts left to the fit");
        assert_eq!(probe[..], all[PROBE_FIRST * per..]);
        assert_eq!(probe.len(), PROBE_AROUND * per);
        let asked = crate::fit::FitOptions {
            starts: crate::fit::Starts::Count(8),
            ..Default::default()
        };
        assert!(thu_second(&asked).unwrap().probe_around(&list).is_none());
    }
}

//! The binned HistFactory model seen through the seam: its [`ParameterSpace`] (constraints,
//! scales, interpolation kinks), its data generation (Asimov and toy datasets in pyhf's layout)
//! and the shape checks every HistFactory evaluator shares. Every device's HistFactory evaluator
//! answers the seam's questions with these functions, so they agree by construction.

use crate::space::{ParameterSpace, Prior};
use crate::HistFactoryData;
use crate::{rng, ComputeError, Dataset, Evaluator, Result};
use histfit_model::{Constraint, InterpCode, Model};

/// The parameter space of a compiled model. Constraint centres are the model's observed
/// auxiliary data (Gaussian: aux; Poisson: aux/τ), widths the prior standard deviations (σ; 1/√τ).
pub fn parameter_space(model: &Model) -> ParameterSpace {
    let priors = model
        .parameters
        .iter()
        .map(|p| {
            let aux = p.aux_index.map(|k| model.observed[model.n_main + k]);
            match (p.constraint, aux) {
                (Constraint::Gauss { sigma }, Some(a)) => Prior::Gauss {
                    centre: a,
                    width: sigma,
                },
                (Constraint::Poisson { tau }, Some(a)) => Prior::Poisson {
                    centre: a / tau,
                    width: 1.0 / tau.sqrt(),
                },
                _ => Prior::Free,
            }
        })
        .collect();
    ParameterSpace {
        names: model.par_names(),
        init: model.init(),
        bounds: model.bounds(),
        fixed: model.fixed(),
        poi: model.poi,
        priors,
        scales: parameter_scales(model),
        kinked: kinked_parameters(model),
        local_term: single_bin_parameters(model),
        curvature_units: false,
    }
}

/// Each parameter's main bin, where it modifies that bin alone: the staterror, shapesys and
/// shapefactor parameters of one bin, and any modifier of a one-bin sample. Its constraint is its
/// own auxiliary datum's, so two such parameters on different bins share no term.
fn single_bin_parameters(model: &Model) -> Vec<Option<u32>> {
    // `None` with `many` false: not seen yet; `many`: seen on two bins (or a whole sample's).
    let n = model.parameters.len();
    let (mut bin, mut many) = (vec![None; n], vec![false; n]);
    let mut touch = |p: usize, lo: usize, hi: usize| {
        if hi != lo + 1 || bin[p].is_some_and(|b| b != lo as u32) {
            many[p] = true;
        }
        bin[p] = Some(lo as u32);
    };
    for s in &model.samples {
        let (lo, hi) = (s.bin_start, s.bin_start + s.n_bins);
        let pars = model.scale_factors[s.scale_factors.0 as usize..s.scale_factors.1 as usize]
            .iter()
            .copied()
            .chain(
                model.normsys[s.normsys.0 as usize..s.normsys.1 as usize]
                    .iter()
                    .map(|e| e.par),
            )
            .chain(
                model.histosys[s.histosys.0 as usize..s.histosys.1 as usize]
                    .iter()
                    .map(|e| e.par),
            );
        for p in pars {
            touch(p as usize, lo, hi);
        }
        for b in 0..s.n_bins {
            let sb = s.sb_start + b;
            let (f0, f1) = (
                model.bin_factor_offsets[sb],
                model.bin_factor_offsets[sb + 1],
            );
            for &p in &model.bin_factors[f0 as usize..f1 as usize] {
                touch(p as usize, lo + b, lo + b + 1);
            }
        }
    }
    bin.iter()
        .zip(&many)
        .map(|(&b, &m)| if m { None } else { b })
        .collect()
}

/// Each parameter's natural scale: its constraint's width (σ, or 1/√τ for a Poisson one), else
/// one. Fits and polishing steps work in θ/scale, so a lumi with σ = 2 % and a free
/// normalisation have similar curvature, which is what L-BFGS-B's single scalar θ assumes.
fn parameter_scales(model: &Model) -> Vec<f64> {
    model
        .parameters
        .iter()
        .map(|p| match p.constraint {
            Constraint::Gauss { sigma } if sigma > 0.0 => sigma,
            Constraint::Poisson { tau } if tau > 0.0 => 1.0 / tau.sqrt(),
            _ => 1.0,
        })
        .collect()
}

/// The parameters whose interpolation has a kink at 0: those driving a normsys or histosys
/// interpolated with code 0 or 1 (piecewise linear or exponential: the slopes differ either side).
fn kinked_parameters(model: &Model) -> Vec<bool> {
    let kinked_code = |c: InterpCode| matches!(c, InterpCode::Code0 | InterpCode::Code1);
    let mut k = vec![false; model.parameters.len()];
    if kinked_code(model.settings.normsys) {
        for e in &model.normsys {
            k[e.par as usize] = true;
        }
    }
    if kinked_code(model.settings.histosys) {
        for e in &model.histosys {
            k[e.par as usize] = true;
        }
    }
    k
}

/// The auxiliary data each constraint expects at `params` (θ for Gaussian, θ·τ for Poisson).
pub fn expected_aux(model: &Model, params: &[f64]) -> Vec<f64> {
    model
        .aux_params
        .iter()
        .map(|&p| match model.parameters[p].constraint {
            Constraint::Poisson { tau } => params[p] * tau,
            _ => params[p],
        })
        .collect()
}

/// Expected data of a HistFactory model in pyhf's layout: main bins, then the auxiliary data
/// each constraint expects (θ for Gaussian, θ·τ for Poisson constraints).
pub fn expected_data<E: Evaluator + ?Sized>(
    eval: &mut E,
    model: &Model,
    params: &[f64],
) -> Result<Vec<f64>> {
    let mut out = vec![0.0; model.n_main];
    eval.expected_main(params, &mut out)?;
    out.extend(expected_aux(model, params));
    Ok(out)
}

/// Why −ln L is not finite at `params` on `data`: each main bin where events are observed but
/// the expected count is not positive, or where it is not finite, named by channel and bin. Empty when
/// every bin is fine (then a constraint term is what is not finite).
pub fn zero_likelihood_bins<E: Evaluator + ?Sized>(
    eval: &mut E,
    model: &Model,
    data: &Dataset,
    params: &[f64],
) -> Result<Vec<String>> {
    let mut lam = vec![0.0; model.n_main];
    eval.expected_main(params, &mut lam)?;
    let mut out = Vec::new();
    for c in &model.channels {
        for k in 0..c.n_bins {
            let (l, n) = (lam[c.bin_start + k], data.main[c.bin_start + k]);
            if !l.is_finite() || (n > 0.0 && l <= 0.0) {
                out.push(format!(
                    "channel \"{}\" bin {k}: {n} events observed, {l} expected",
                    c.name
                ));
            }
        }
    }
    Ok(out)
}

/// The Asimov dataset at `params` from the expected main counts there. An empty bin held at its
/// boundary λ = 0 sits a hair below it at a fit ([`crate::EMPTY_BIN_WALL`]); as data, a Poisson
/// mean is not negative, so such counts become 0.
pub fn asimov(model: &Model, mut expected_main: Vec<f64>, params: &[f64]) -> Result<Dataset> {
    for v in &mut expected_main {
        *v = v.max(0.0);
    }
    Dataset::from_parts(model, expected_main, expected_aux(model, params))
}

/// Toys `indices` of `seed` drawn on the host at `params` ([`rng::generate_toy`]).
pub fn toys(
    model: &Model,
    expected_main: &[f64],
    params: &[f64],
    seed: u64,
    indices: std::ops::Range<u64>,
) -> Result<Vec<Dataset>> {
    indices
        .map(|i| rng::generate_toy(model, expected_main, params, seed, i))
        .collect()
}

/// Checks the shapes of a batch request against the model; returns the number of problems.
pub fn check_batch(
    model: &Model,
    params: &[f64],
    data: &[&Dataset],
    nll: &[f64],
    grad: &[f64],
) -> Result<usize> {
    let n = model.n_params();
    let b = data.len();
    for (what, expected, got) in [
        ("batch parameters", b * n, params.len()),
        ("batch values", b, nll.len()),
        ("batch gradients", b * n, grad.len()),
    ] {
        if expected != got {
            return Err(ComputeError::Length {
                what,
                expected,
                got,
            });
        }
    }
    for d in data {
        if d.main.len() != model.n_main || d.aux.len() != model.n_aux() {
            return Err(ComputeError::Length {
                what: "batch dataset",
                expected: model.n_main + model.n_aux(),
                got: d.main.len() + d.aux.len(),
            });
        }
    }
    Ok(b)
}

/// Yields of one sample (or a channel's total) in the bins of its channel, with their standard
/// deviations.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BinYields {
    pub name: String,
    pub yields: Vec<f64>,
    pub uncertainties: Vec<f64>,
    /// A sample the POI scales (a normfactor that is the POI): the signal, which plots stack on
    /// top of the backgrounds.
    pub signal: bool,
}

/// A channel's yields: per sample, the total and the data.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChannelYields {
    pub name: String,
    pub data: Vec<f64>,
    pub samples: Vec<BinYields>,
    pub total: BinYields,
}

/// Yields per channel, sample and bin at `params`, each with its standard deviation propagated
/// through the full `covariance` of the parameters (row-major n×n; zero rows for fixed ones):
/// σ²(y) = J C Jᵀ with J the yields' gradient, by central differences of the evaluator's
/// sample yields (steps of 1e-5 of each parameter's scale). Totals take the correlations between
/// samples into account. `data`: the main bins shown beside them.
pub fn yields(
    eval: &mut crate::CpuEvaluator,
    params: &[f64],
    covariance: &[f64],
    data: &[f64],
) -> Result<Vec<ChannelYields>> {
    let model = eval.shared_model().clone();
    let n = model.n_params();
    if covariance.len() != n * n || data.len() != model.n_main {
        return Err(ComputeError::Length {
            what: "covariance (n×n) or data (main bins)",
            expected: n * n + model.n_main,
            got: covariance.len() + data.len(),
        });
    }
    let at = eval.sample_yields(params)?;
    let n_sb = at.len();
    // Only parameters with some variance move the yields' uncertainty.
    let varied: Vec<usize> = (0..n).filter(|&j| covariance[j * n + j] > 0.0).collect();
    let scales = parameter_scales(&model);
    let mut jac = vec![0.0; varied.len() * n_sb]; // row k: ∂y/∂θ_varied[k]
    let mut x = params.to_vec();
    for (k, &j) in varied.iter().enumerate() {
        let (lo, hi) = (model.parameters[j].lower, model.parameters[j].upper);
        let h = 1e-5 * scales[j];
        let (a, b) = ((params[j] - h).max(lo), (params[j] + h).min(hi));
        x[j] = b;
        let up = eval.sample_yields(&x)?;
        x[j] = a;
        let dn = eval.sample_yields(&x)?;
        x[j] = params[j];
        for sb in 0..n_sb {
            jac[k * n_sb + sb] = (up[sb] - dn[sb]) / (b - a);
        }
    }
    // σ² of a linear combination Σ w_sb y_sb: wᵀ Jᵀ C J w over the varied parameters.
    let variance = |w: &dyn Fn(usize) -> f64, sbs: &[usize]| -> f64 {
        let g: Vec<f64> = (0..varied.len())
            .map(|k| sbs.iter().map(|&sb| w(sb) * jac[k * n_sb + sb]).sum())
            .collect();
        let mut v = 0.0;
        for (k, &j) in varied.iter().enumerate() {
            for (l, &i) in varied.iter().enumerate() {
                v += g[k] * covariance[j * n + i] * g[l];
            }
        }
        v.max(0.0)
    };
    let mut out = Vec::with_capacity(model.channels.len());
    // The samples of each channel, in one pass (not a scan of every sample per channel).
    let mut by_channel: Vec<Vec<&histfit_model::compile::SampleLayout>> =
        vec![Vec::new(); model.channels.len()];
    for s in &model.samples {
        by_channel[s.channel].push(s);
    }
    for (ch, samples) in model.channels.iter().zip(&by_channel) {
        let mut rows = Vec::with_capacity(samples.len());
        for smp in samples {
            let sbs: Vec<usize> = (smp.sb_start..smp.sb_start + smp.n_bins).collect();
            let scaled_by =
                &model.scale_factors[smp.scale_factors.0 as usize..smp.scale_factors.1 as usize];
            rows.push(BinYields {
                signal: model.poi.is_some_and(|p| scaled_by.contains(&(p as u32))),
                name: smp.name.clone(),
                yields: sbs.iter().map(|&sb| at[sb]).collect(),
                uncertainties: sbs
                    .iter()
                    .map(|&sb| variance(&|_| 1.0, &[sb]).sqrt())
                    .collect(),
            });
        }
        let mut total = BinYields {
            signal: false,
            name: "total".into(),
            yields: vec![0.0; ch.n_bins],
            uncertainties: vec![0.0; ch.n_bins],
        };
        for b in 0..ch.n_bins {
            let sbs: Vec<usize> = samples.iter().map(|s| s.sb_start + b).collect();
            total.yields[b] = sbs.iter().map(|&sb| at[sb]).sum();
            total.uncertainties[b] = variance(&|_| 1.0, &sbs).sqrt();
        }
        out.push(ChannelYields {
            name: ch.name.clone(),
            data: data[ch.bin_start..ch.bin_start + ch.n_bins].to_vec(),
            samples: rows,
            total,
        });
    }
    Ok(out)
}

//! `histfit fit`: the maximum likelihood fit with uncertainties, pulls and constraints.

use super::OutputArgs;
use crate::device::Likelihood;
use crate::model_args::{FitArgs, ModelArgs};
use anyhow::Result;
use histfit_compute::{Evaluator, ParameterSpace};
use histfit_infer::{fit, FitOptions, FitResult, Starts};
use serde_json::{json, Value};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    fit: FitArgs,
    /// Further starts searched for a lower minimum, per batch; batches go on (up to four)
    /// while they find different minima (default: by model size, 24 for up to 16 free
    /// parameters, none above 64); where N > 0 one more comes first, with the free
    /// normalisations at a tenth of their initial values.
    #[arg(long, value_name = "N")]
    starts: Option<usize>,
    /// MINOS asymmetric interval of a parameter: where the profile likelihood rises by ½
    /// (repeatable; "all" for every free parameter).
    #[arg(long, value_name = "NAME")]
    minos: Vec<String>,
    /// Goodness of fit against the saturated model (statistic, degrees of freedom, p-value).
    #[arg(long)]
    gof: bool,
    /// Break the POI's uncertainty down: its statistical part (every constrained parameter held
    /// at the fit) and each group's impact √(σ² − σ²_group held), by refits. Groups: --group,
    /// else (pyhf workspaces) one per modifier type.
    #[arg(long)]
    breakdown: bool,
    /// A group of the breakdown: NAME=GLOB over parameter names (repeatable; implies
    /// --breakdown), e.g. --group 'jets=JET_*'.
    #[arg(long, value_name = "NAME=GLOB")]
    group: Vec<String>,
    #[command(flatten)]
    out: OutputArgs,
}

/// The groups of `--breakdown`: those `--group NAME=GLOB` names, else one per modifier type of a
/// pyhf workspace (the POI left out), else none (the statistical part alone).
fn breakdown_groups(
    model: &Likelihood,
    space: &ParameterSpace,
    asked: &[String],
) -> Result<Vec<histfit_infer::Group>> {
    if !asked.is_empty() {
        return asked
            .iter()
            .map(|g| {
                let (name, glob) = g
                    .split_once('=')
                    .filter(|(n, p)| !n.is_empty() && !p.is_empty())
                    .ok_or_else(|| {
                        anyhow::anyhow!("--group {g}: expected NAME=GLOB, e.g. jets=JET_*")
                    })?;
                let parameters: Vec<usize> = (0..space.len())
                    .filter(|&i| super::grid::glob_match(glob, &space.names[i]))
                    .collect();
                if parameters.is_empty() {
                    anyhow::bail!("--group {g}: no parameter matches {glob}");
                }
                Ok(histfit_infer::Group {
                    name: name.to_owned(),
                    parameters,
                })
            })
            .collect();
    }
    let Likelihood::HistFactory(m) = model else {
        return Ok(Vec::new());
    };
    let mut groups: Vec<histfit_infer::Group> = Vec::new();
    for set in &m.sets {
        let members = (set.start..set.start + set.len).filter(|&i| Some(i) != space.poi);
        match groups.iter_mut().find(|g| g.name == set.kind) {
            Some(g) => g.parameters.extend(members),
            None => groups.push(histfit_infer::Group {
                name: set.kind.to_owned(),
                parameters: members.collect(),
            }),
        }
    }
    groups.retain(|g| !g.parameters.is_empty());
    Ok(groups)
}

/// The breakdown's lines of the table.
fn breakdown_table(b: &histfit_infer::Breakdown) -> String {
    let mut s = format!(
        "\nuncertainty of {}: {:.6} = {:.6} (stat) ⊕ {:.6} (syst)\n",
        b.poi, b.total, b.stat, b.syst
    );
    for g in &b.groups {
        s.push_str(&format!(
            "  {:<28} {:>12.6}   ({} parameters){}\n",
            g.group,
            g.impact,
            g.parameters.len(),
            if g.converged {
                ""
            } else {
                "  (a refit did not converge)"
            }
        ));
    }
    s
}

/// Exit status 3 when the fit did not converge (the result is still written).
pub fn run(a: Args) -> Result<ExitCode> {
    let (model, source, data, mut eval, base) = a.model.prepare_fit(&a.fit)?;
    let started = std::time::Instant::now();
    let options = FitOptions {
        uncertainties: true,
        starts: a.starts.map_or(base.starts, Starts::Count),
        ..base
    };
    let result = fit(&mut eval, &data, &options)?;
    let fit_seconds = started.elapsed().as_secs_f64();
    let which = minos_parameters(eval.space(), &result, &a.minos)?;
    let minos = if which.is_empty() {
        Vec::new()
    } else {
        histfit_infer::minos(&mut eval, &data, &result, &which, &options)?
    };
    if minos.iter().any(|m| !m.converged) {
        eprintln!("warning: a conditional fit of a MINOS interval did not converge (\"converged\": false)");
    }
    let gof = if a.gof {
        Some(histfit_infer::goodness_of_fit(&mut eval, &data, &result)?)
    } else {
        None
    };
    let weighted = weighted_uncertainties(&model, &data, &result, a.fit.asimov)?;
    let breakdown = if a.breakdown || !a.group.is_empty() {
        let groups = breakdown_groups(&model, eval.space(), &a.group)?;
        let b = histfit_infer::uncertainty_breakdown(&mut eval, &data, &options, &result, &groups)?;
        if !b.converged {
            eprintln!("warning: a refit of the uncertainty breakdown did not converge");
        }
        Some(b)
    } else {
        None
    };
    if !result.converged {
        eprintln!("warning: the fit did not converge: {}", result.reason);
        if let (false, Likelihood::HistFactory(binned)) = (result.twice_nll.is_finite(), &model) {
            // Name the bins with events where nothing is expected (a likelihood of 0).
            let bins = histfit_compute::histfactory::zero_likelihood_bins(
                &mut eval,
                binned,
                &data,
                &result.bestfit,
            );
            for b in bins.unwrap_or_default() {
                eprintln!("warning: the likelihood is 0 at the fit's last point: {b}");
            }
        }
    }
    super::warn_all(&result.warnings);
    if result.hessian_positive_definite == Some(false) {
        eprintln!("warning: the Hessian at the minimum is not positive definite; uncertainties are unreliable");
    }
    let space = eval.space();
    a.out.emit(
        || {
            let mut doc = fit_json(&model, space, &source, &result, fit_seconds);
            if !minos.is_empty() {
                doc["minos"] = serde_json::to_value(&minos).expect("serializable");
            }
            if let Some(g) = &gof {
                doc["goodness_of_fit"] = serde_json::to_value(g).expect("serializable");
            }
            if let Some(w) = &weighted {
                doc["weighted_uncertainties"] = weighted_json(space, w);
            }
            if let Some(b) = &breakdown {
                doc["breakdown"] = serde_json::to_value(b).expect("serializable");
            }
            serde_json::to_string_pretty(&doc).expect("serializable") + "\n"
        },
        || {
            let mut s = fit_table(&model, space, &result);
            if !minos.is_empty() {
                s.push_str("\nMINOS intervals (2ΔNLL = 1):\n");
                for m in &minos {
                    s.push_str(&format!(
                        "  {:<24} {:>14.8}  {:>+12.6}{}  {:>+12.6}{}\n",
                        m.name,
                        m.value,
                        m.lower_error,
                        if m.lower_at_bound { " (bound)" } else { "" },
                        m.upper_error,
                        if m.upper_at_bound { " (bound)" } else { "" },
                    ));
                }
            }
            if let Some(w) = &weighted {
                s.push_str("\nweighted events: uncertainties       naive          SumW2       sandwich\n");
                for (j, &i) in w.free.iter().enumerate() {
                    s.push_str(&format!(
                        "  {:<28} {:>14.6} {:>14.6} {:>14.6}\n",
                        space.names[i], w.naive[j], w.sumw2[j], w.sandwich[j]
                    ));
                }
                s.push_str("  (the sandwich is the asymptotically correct one; the table's errors above are the naive ones)\n");
            }
            if let Some(b) = &breakdown {
                s.push_str(&breakdown_table(b));
            }
            if let Some(g) = &gof {
                s.push_str(&format!(
                    "\ngoodness of fit (saturated model): -2 ln λ = {:.4}, {} degrees of freedom, p = {:.4}\n",
                    g.statistic, g.dof, g.p_value
                ));
            }
            s
        },
    )?;
    Ok(if result.converged {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

/// For a fit to weighted events: the naive, SumW2 and sandwich uncertainties
/// (`histfit_unbinned::weighted`); `None` where no event is weighted.
fn weighted_uncertainties(
    model: &Likelihood,
    data: &histfit_compute::Dataset,
    r: &FitResult,
    asimov: bool,
) -> Result<Option<histfit_unbinned::weighted::WeightedUncertainties>> {
    // An Asimov dataset's weights are expected counts, not event weights.
    if asimov {
        return Ok(None);
    }
    match model.weighted_uncertainties(data, r) {
        Some(Ok(w)) => Ok(Some(w)),
        Some(Err(e)) => {
            eprintln!("warning: no uncertainties for weighted events: {e}");
            Ok(None)
        }
        None => Ok(None),
    }
}

fn weighted_json(
    space: &ParameterSpace,
    w: &histfit_unbinned::weighted::WeightedUncertainties,
) -> Value {
    let by_name = |v: &[f64]| -> Value {
        w.free
            .iter()
            .zip(v)
            .map(|(&i, x)| (space.names[i].clone(), json!(x)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    json!({
        "naive": by_name(&w.naive),
        "sumw2": by_name(&w.sumw2),
        "sandwich": by_name(&w.sandwich),
    })
}

/// The parameters named by `--minos` ("all": every free one), in the model's order.
fn minos_parameters(space: &ParameterSpace, r: &FitResult, names: &[String]) -> Result<Vec<usize>> {
    if names.iter().any(|n| n == "all") {
        return Ok((0..space.len()).filter(|&i| !r.fixed[i]).collect());
    }
    names
        .iter()
        .map(|n| {
            space
                .index(n)
                .ok_or_else(|| anyhow::anyhow!("--minos {n}: not a parameter of the model"))
        })
        .collect()
}

fn fit_json(
    model: &Likelihood,
    space: &ParameterSpace,
    source: &str,
    r: &FitResult,
    fit_seconds: f64,
) -> Value {
    let n = space.len();
    let pars: Vec<Value> = (0..n)
        .map(|i| {
            let unc = r.uncertainties.as_ref().map(|u| u[i]);
            let mut v = json!({
                "name": space.names[i],
                "value": r.bestfit[i],
                "uncertainty": unc,
                "fixed": r.fixed[i],
            });
            if let Some((centre, width)) = space.priors[i].centre_width() {
                v["pull"] = json!((r.bestfit[i] - centre) / width);
                v["constraint"] = json!(unc.map(|u| u / width));
            }
            v
        })
        .collect();
    let correlation = r.correlation.as_ref().map(|c| {
        (0..n)
            .map(|i| c[i * n..(i + 1) * n].to_vec())
            .collect::<Vec<_>>()
    });
    let mut doc = Value::Object(model.header(source));
    let fields = json!({
        "poi": space.poi_name(),
        "poi_index": space.poi,
        "converged": r.converged,
        "reason": r.reason,
        "twice_nll": r.twice_nll,
        "iterations": r.iterations,
        "evaluations": r.evaluations,
        "projected_gradient_norm": r.projected_gradient_norm,
        "hessian_positive_definite": r.hessian_positive_definite,
        "starts": r.starts,
        "kinks": r.kinks,
        "warnings": r.warnings,
        "parameters": pars,
        "correlation": correlation,
        "fit_seconds": fit_seconds,
    });
    if let (Value::Object(d), Value::Object(f)) = (&mut doc, fields) {
        d.extend(f);
    }
    doc
}

fn fit_table(model: &Likelihood, space: &ParameterSpace, r: &FitResult) -> String {
    let mut s = String::new();
    let width = space
        .names
        .iter()
        .map(String::len)
        .max()
        .unwrap_or(9)
        .max(9);
    let settings = match model {
        Likelihood::HistFactory(m) => {
            format!(
                "; normsys {}, histosys {}",
                m.settings.normsys, m.settings.histosys
            )
        }
        Likelihood::Mixed(m) => {
            let b = m.binned_model();
            format!(
                "; binned channels: normsys {}, histosys {}",
                b.settings.normsys, b.settings.histosys
            )
        }
        Likelihood::Events(_) => String::new(),
    };
    s.push_str(&format!(
        "fit: {} ({}{settings})\n",
        if r.converged {
            "converged"
        } else {
            "NOT CONVERGED"
        },
        r.reason,
    ));
    s.push_str(&format!(
        "twice_nll = {:.10}   iterations {}   evaluations {}   |proj. grad| {:.1e}\n\n",
        r.twice_nll, r.iterations, r.evaluations, r.projected_gradient_norm
    ));
    s.push_str(&format!(
        "{:<width$}  {:>14}  {:>12}  {:>8}  {:>10}\n",
        "parameter", "value", "error", "pull", "constraint"
    ));
    for (i, name) in space.names.iter().enumerate() {
        let unc = r.uncertainties.as_ref().map(|u| u[i]);
        let err = match (r.fixed[i], unc) {
            (true, _) => "fixed".to_string(),
            (false, Some(u)) if u.is_finite() => format!("±{u:.6}"),
            // Not computed (above the dense-Hessian limit; the warnings say so).
            (false, _) => "-".to_string(),
        };
        let (pull, constraint) = match space.priors[i].centre_width() {
            Some((c, w)) if !r.fixed[i] => (
                format!("{:+.3}", (r.bestfit[i] - c) / w),
                unc.filter(|u| u.is_finite())
                    .map(|u| format!("{:.3}", u / w))
                    .unwrap_or_default(),
            ),
            _ => (String::new(), String::new()),
        };
        let marker = if Some(i) == space.poi { " (POI)" } else { "" };
        s.push_str(&format!(
            "{:<width$}  {:>14.8}  {:>12}  {:>8}  {:>10}{marker}\n",
            name, r.bestfit[i], err, pull, constraint
        ));
    }
    s
}

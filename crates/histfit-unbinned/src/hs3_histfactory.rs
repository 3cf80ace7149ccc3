//! HS3 `histfactory_dist` — binned HistFactory channels, as the standard describes them and as
//! ROOT 6.40's `RooJSONFactoryWSTool` writes a HistFactory workspace — translated into a pyhf
//! workspace, so that a HistFactory model exported by ROOT is fitted by histfit's binned model
//! (every command, every device) exactly as its pyhf JSON would be.
//!
//! What ROOT writes, and what it means here (checked against RooFit on the workspaces ROOT
//! exported: `scripts/make_hs3_histfactory.py`, `tests/hs3_histfactory.rs`):
//! - a sample's `data.contents` are its nominal yields, `data.errors` its MC statistical
//!   uncertainties (absolute; used by `staterror`);
//! - `normfactor`: a free factor; with a `constraint_name` naming a Gaussian of the parameter
//!   (ROOT's `Lumi`), a luminosity-like constrained factor (pyhf's `lumi`);
//! - `normsys` (`data.hi`/`data.lo` factors) and `histosys` (`data.hi.contents`/`data.lo.contents`)
//!   with ROOT's interpolation codes: 5 is pyhf's code 4 (exponential, 6th-order polynomial
//!   inside |α| < 1: ROOT 6.40's default for normsys), 4 is code 4p (linear outside, polynomial
//!   inside: its default for histosys, written by omitting the key), 0, 1 and 2 as pyhf's;
//!   their constraint a unit Gaussian centred on 0;
//! - `staterror`: per bin one γ (the names in `parameters`), Gaussian with the relative width
//!   √Σ errors² / Σ contents over the channel's samples that carry it (pyhf's definition);
//! - `shapesys`: `data.vals` are relative uncertainties, each bin's γ Poisson-constrained with
//!   τ = 1/val²; a bin whose val is 0 has no constraint (ROOT writes a `ShapeFactor` as a
//!   shapesys whose vals are all 0: a free γ per bin, pyhf's `shapefactor`);
//! - `shapefactor`: a free γ per bin;
//! - parameters' starting values, bounds and `const` flags from `parameter_points` and
//!   `domains`, as for every HS3 model (ROOT holds γs whose relative error is below its
//!   threshold `const`).
//!
//! A likelihood whose channels mix `histfactory_dist` with event-level distributions is refused
//! (not yet supported), as are constraint kinds pyhf's model has no term for.

use crate::hs3::{
    err, histogram_edges, list, parameter_info, str_field, Choice, Doc, ParamInfo, Result,
};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// A document's likelihood as a pyhf workspace, with what the workspace cannot say.
#[derive(Debug, Clone)]
pub struct BinnedDoc {
    /// The pyhf workspace (JSON).
    pub workspace: Value,
    /// Interpolation codes of normsys and histosys, by histfit's names ("code4", "code4p", …).
    pub normsys: &'static str,
    pub histosys: &'static str,
    /// Every parameter of the compiled model, by its pyhf name, with its name in the document
    /// and what the document says of it.
    pub parameters: Vec<BinnedParameter>,
    /// What the reader assumed or chose, for the user to see.
    pub notes: Vec<String>,
}

/// One parameter: its pyhf name (`staterror_SR[3]` for a component of a per-bin set), its name
/// in the document, and its starting value, bounds and constancy there.
#[derive(Debug, Clone, PartialEq)]
pub struct BinnedParameter {
    pub pyhf: String,
    pub name: String,
    pub value: Option<f64>,
    pub bounds: (f64, f64),
    pub constant: bool,
}

/// The likelihood `choice` names as a pyhf workspace, where its distributions are
/// `histfactory_dist`s; `None` where they are event-level ones.
pub fn histfactory(doc: &Value, choice: &Choice) -> Result<Option<BinnedDoc>> {
    let d = Doc::index(doc)?;
    let plan = d.plan(choice)?;
    let is_binned = |name: &str| {
        d.dists
            .get(name)
            .is_some_and(|(_, v)| v["type"] == "histfactory_dist")
    };
    let binned: Vec<&str> = plan
        .pairs
        .iter()
        .map(|(dist, _)| dist.as_str())
        .filter(|n| is_binned(n))
        .collect();
    if binned.is_empty() {
        return Ok(None);
    }
    if let Some((other, _)) = plan.pairs.iter().find(|(n, _)| !is_binned(n)) {
        return Err(err(
            format!("distributions \"{other}\""),
            format!(
                "a likelihood with both binned histfactory_dist channels ({}) and event-level distributions is not supported yet",
                binned.join(", ")
            ),
        ));
    }
    let mut t = Translation {
        doc: &d,
        info: parameter_info(doc)?,
        channels: Vec::new(),
        observations: Vec::new(),
        lumi: Vec::new(),
        normsys: None,
        histosys: None,
        per_bin: HashMap::new(),
        used_constraints: Vec::new(),
    };
    for (dist, data) in &plan.pairs {
        t.channel(dist, data)?;
    }
    if let Some(aux) = plan
        .aux
        .iter()
        .find(|a| !t.used_constraints.iter().any(|u| u == *a))
    {
        return Err(err(
            format!("likelihoods: aux_distributions \"{aux}\""),
            "a HistFactory likelihood's constraints are its modifiers' (constraint_name); this one belongs to none",
        ));
    }
    t.finish(&plan.pois, plan.name.as_deref(), plan.notes)
        .map(Some)
}

/// The state of one translation: the document, and the workspace's parts as they are made.
struct Translation<'a> {
    doc: &'a Doc<'a>,
    info: HashMap<String, ParamInfo>,
    channels: Vec<Value>,
    observations: Vec<Value>,
    /// Constrained normfactors: (parameter, centre, width).
    lumi: Vec<(String, f64, f64)>,
    /// The interpolation code seen first, and where.
    normsys: Option<(&'static str, String)>,
    histosys: Option<(&'static str, String)>,
    /// Per-bin sets by pyhf name: the document's names of their components.
    per_bin: HashMap<String, Vec<String>>,
    used_constraints: Vec<String>,
}

/// A list of `n` finite numbers at `v`.
fn numbers(v: Option<&Value>, n: usize, place: &str) -> Result<Vec<f64>> {
    let a = v
        .and_then(Value::as_array)
        .ok_or_else(|| err(place, format!("expected a list of {n} numbers")))?;
    if a.len() != n {
        return Err(err(
            place,
            format!("{} numbers where the channel has {n} bins", a.len()),
        ));
    }
    a.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_f64()
                .filter(|x| x.is_finite())
                .ok_or_else(|| err(format!("{place}[{i}]"), "expected a finite number"))
        })
        .collect()
}

/// ROOT's interpolation code as histfit's (and pyhf's) name.
fn interpolation(m: &Value, default: i64, place: &str) -> Result<&'static str> {
    let code = match m.get("interpolation") {
        None => default,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| err(format!("{place}.interpolation"), "expected a code number"))?,
    };
    Ok(match code {
        0 => "code0",
        1 => "code1",
        2 => "code2",
        4 => "code4p",
        5 => "code4",
        other => {
            return Err(err(
                format!("{place}.interpolation"),
                format!("interpolation code {other} is not one histfit has (0, 1, 2, 4 and 5 are: ROOT's 5 is pyhf's code 4, its 4 is code 4p)"),
            ))
        }
    })
}

/// Refuses a per-bin modifier whose constraint (ROOT's `constraint_type`, the standard's
/// `constraint`; `want` where it names none) is not `want`, the only kind histfit's (pyhf's)
/// `what` has.
fn constraint_is(m: &Value, want: &str, what: &str, place: &str) -> Result<()> {
    let kind = m
        .get("constraint_type")
        .or(m.get("constraint"))
        .and_then(Value::as_str)
        .unwrap_or(want);
    match kind == want {
        true => Ok(()),
        false => Err(err(
            place,
            format!(
                "a {kind} constraint on a {what}: histfit's (pyhf's) {what} is {want}-constrained"
            ),
        )),
    }
}

/// The one code every modifier of a kind uses (histfit's model has one per kind).
fn one_code(
    seen: &mut Option<(&'static str, String)>,
    code: &'static str,
    kind: &str,
    place: &str,
) -> Result<()> {
    match seen {
        None => *seen = Some((code, place.to_string())),
        Some((c, first)) if *c != code => {
            return Err(err(
                place,
                format!("{kind} interpolation {code} where {first} has {c}: histfit's model has one code per modifier kind"),
            ))
        }
        _ => {}
    }
    Ok(())
}

impl Translation<'_> {
    /// A number, or the value the document gives the parameter it names.
    fn value(&self, v: &Value, place: &str) -> Result<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => self.info.get(s.as_str()).and_then(|i| i.value),
            _ => None,
        }
        .filter(|x| x.is_finite())
        .ok_or_else(|| err(place, "expected a number, or a parameter with a value"))
    }

    /// The Gaussian constraint a modifier names (`constraint_name`): its centre and width,
    /// which must be of `parameter`.
    fn gaussian(&mut self, m: &Value, parameter: &str, place: &str) -> Result<Option<(f64, f64)>> {
        let Some(name) = m.get("constraint_name") else {
            return Ok(None);
        };
        let name = name
            .as_str()
            .ok_or_else(|| err(format!("{place}.constraint_name"), "expected a name"))?;
        let (i, c) = self.doc.dists.get(name).ok_or_else(|| {
            err(
                format!("{place}.constraint_name"),
                format!("no distribution \"{name}\""),
            )
        })?;
        let cp = format!("distributions[{i}]");
        if !matches!(c["type"].as_str(), Some("gaussian_dist" | "normal_dist"))
            || c["x"] != parameter
        {
            return Err(err(
                cp,
                format!("the constraint of \"{parameter}\": histfit reads a Gaussian of it (gaussian_dist with x = \"{parameter}\")"),
            ));
        }
        let centre = self.value(&c["mean"], &format!("{cp}.mean"))?;
        let width = self.value(&c["sigma"], &format!("{cp}.sigma"))?;
        if width <= 0.0 {
            return Err(err(format!("{cp}.sigma"), "a width must be positive"));
        }
        self.used_constraints.push(name.to_string());
        Ok(Some((centre, width)))
    }

    /// An α's constraint: a unit Gaussian centred on 0 (named, or assumed where none is named).
    fn unit_gaussian(&mut self, m: &Value, parameter: &str, place: &str) -> Result<()> {
        if let Some(kind) = m.get("constraint").and_then(Value::as_str) {
            if kind != "Gauss" {
                return Err(err(
                    format!("{place}.constraint"),
                    format!("a {kind} constraint on \"{parameter}\": histfit's HistFactory model has Gaussian ones"),
                ));
            }
        }
        match self.gaussian(m, parameter, place)? {
            None | Some((0.0, 1.0)) => Ok(()),
            Some((c, w)) => Err(err(
                place,
                format!("the constraint of \"{parameter}\" is a Gaussian of centre {c} and width {w}: histfit's HistFactory model has unit ones centred on 0"),
            )),
        }
    }

    /// A per-bin set's component names: the document's `parameters`, one per bin, the same
    /// wherever the set appears.
    fn per_bin_names(&mut self, m: &Value, set: &str, n: usize, place: &str) -> Result<()> {
        let names: Vec<String> = match m.get("parameters") {
            None => (0..n).map(|b| format!("{set}[{b}]")).collect(),
            Some(v) => {
                let a = v
                    .as_array()
                    .filter(|a| a.len() == n && a.iter().all(Value::is_string))
                    .ok_or_else(|| {
                        err(
                            format!("{place}.parameters"),
                            format!("expected {n} names, one per bin"),
                        )
                    })?;
                a.iter()
                    .map(|x| x.as_str().unwrap_or("").to_string())
                    .collect()
            }
        };
        match self.per_bin.get(set) {
            Some(before) if *before != names => Err(err(
                format!("{place}.parameters"),
                format!("\"{set}\" has other parameters where it appears before"),
            )),
            Some(_) => Ok(()),
            None => {
                self.per_bin.insert(set.to_string(), names);
                Ok(())
            }
        }
    }

    /// One modifier of a sample as pyhf's.
    fn modifier(
        &mut self,
        m: &Value,
        channel: &str,
        nominal: &[f64],
        errors: Option<&[f64]>,
        place: &str,
    ) -> Result<Value> {
        let kind = str_field(m, "type", place)?;
        let n = nominal.len();
        let parameter = m
            .get("parameter")
            .or(m.get("name"))
            .and_then(Value::as_str)
            .ok_or_else(|| err(place, "missing or non-text \"parameter\" (or \"name\")"))?
            .to_string();
        let name = m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(&parameter)
            .to_string();
        Ok(match kind {
            "normfactor" => match self.gaussian(m, &parameter, place)? {
                None => json!({"type": "normfactor", "name": parameter, "data": null}),
                Some((centre, width)) => {
                    match self.lumi.iter().find(|l| l.0 == parameter) {
                        Some(l) if (l.1, l.2) != (centre, width) => {
                            return Err(err(
                                place,
                                format!("\"{parameter}\" is constrained differently where it appears before"),
                            ))
                        }
                        Some(_) => {}
                        None => self.lumi.push((parameter.clone(), centre, width)),
                    }
                    json!({"type": "lumi", "name": parameter, "data": null})
                }
            },
            "normsys" => {
                let code = interpolation(m, 5, place)?;
                one_code(&mut self.normsys, code, "normsys", place)?;
                self.unit_gaussian(m, &parameter, place)?;
                let f = |k: &str| {
                    m["data"][k]
                        .as_f64()
                        .filter(|x| x.is_finite())
                        .ok_or_else(|| err(format!("{place}.data.{k}"), "expected a finite number"))
                };
                json!({"type": "normsys", "name": parameter, "data": {"hi": f("hi")?, "lo": f("lo")?}})
            }
            "histosys" => {
                let code = interpolation(m, 4, place)?;
                one_code(&mut self.histosys, code, "histosys", place)?;
                self.unit_gaussian(m, &parameter, place)?;
                let hi = numbers(m["data"]["hi"].get("contents"), n, &format!("{place}.data.hi.contents"))?;
                let lo = numbers(m["data"]["lo"].get("contents"), n, &format!("{place}.data.lo.contents"))?;
                json!({"type": "histosys", "name": parameter, "data": {"hi_data": hi, "lo_data": lo}})
            }
            "staterror" => {
                constraint_is(m, "Gauss", "staterror", place)?;
                let set = format!("staterror_{channel}");
                self.per_bin_names(m, &set, n, place)?;
                let data = errors.map_or_else(|| vec![0.0; n], <[f64]>::to_vec);
                json!({"type": "staterror", "name": set, "data": data})
            }
            "shapesys" => {
                let vals = numbers(m["data"].get("vals"), n, &format!("{place}.data.vals"))?;
                if vals.iter().any(|v| *v < 0.0) {
                    return Err(err(format!("{place}.data.vals"), "relative uncertainties are not negative"));
                }
                self.per_bin_names(m, &name, n, place)?;
                if vals.iter().all(|v| *v == 0.0) {
                    // ROOT's export of a ShapeFactor: unconstrained γs.
                    return Ok(json!({"type": "shapefactor", "name": name, "data": null}));
                }
                constraint_is(m, "Poisson", "shapesys", place)?;
                let absolute: Vec<f64> = vals.iter().zip(nominal).map(|(v, x)| v * x).collect();
                json!({"type": "shapesys", "name": name, "data": absolute})
            }
            "shapefactor" => {
                self.per_bin_names(m, &name, n, place)?;
                json!({"type": "shapefactor", "name": name, "data": null})
            }
            other => {
                return Err(err(
                    format!("{place}.type"),
                    format!("unknown modifier type \"{other}\" (histfit reads normfactor, normsys, histosys, staterror, shapesys, shapefactor)"),
                ))
            }
        })
    }

    /// One channel: a `histfactory_dist` and its binned dataset.
    fn channel(&mut self, dist: &str, data: &str) -> Result<()> {
        let (di, dv) = self.doc.dists[dist];
        let place = format!("distributions[{di}]");
        let samples = list(dv, "samples", &place)?;
        let axes = list(dv, "axes", &place)?;
        let mut n = 1usize;
        for (k, axis) in axes.iter().enumerate() {
            n = n.saturating_mul(histogram_edges(axis, &format!("{place}.axes[{k}]"))?.len() - 1);
        }
        if axes.is_empty() {
            n = samples
                .first()
                .and_then(|s| s["data"]["contents"].as_array())
                .map_or(0, Vec::len);
        }
        if samples.is_empty() || n == 0 {
            return Err(err(&place, "a histfactory_dist needs samples and bins"));
        }
        let (xi, xv) = self.doc.data.get(data).copied().ok_or_else(|| {
            err(
                format!("likelihoods: data \"{data}\""),
                "no dataset of that name",
            )
        })?;
        let xplace = format!("data[{xi}]");
        if xv.get("type").is_some_and(|t| t != "binned") {
            return Err(err(
                format!("{xplace}.type"),
                format!(
                    "a histfactory_dist is fitted to binned data, not {}",
                    xv["type"]
                ),
            ));
        }
        let observed = numbers(xv.get("contents"), n, &format!("{xplace}.contents"))?;
        let channel = dist
            .strip_prefix("model_")
            .filter(|c| !c.is_empty())
            .unwrap_or(dist)
            .to_string();
        let mut out = Vec::new();
        for (s, sample) in samples.iter().enumerate() {
            let sp = format!("{place}.samples[{s}]");
            let name = str_field(sample, "name", &sp)?;
            let nominal = numbers(
                sample["data"].get("contents"),
                n,
                &format!("{sp}.data.contents"),
            )?;
            let errors = match sample["data"].get("errors") {
                None => None,
                e => Some(numbers(e, n, &format!("{sp}.data.errors"))?),
            };
            let mut modifiers = Vec::new();
            for (k, m) in list(sample, "modifiers", &sp)?.iter().enumerate() {
                let mp = format!("{sp}.modifiers[{k}]");
                modifiers.push(self.modifier(m, &channel, &nominal, errors.as_deref(), &mp)?);
            }
            out.push(json!({"name": name, "data": nominal, "modifiers": modifiers}));
        }
        self.channels.push(json!({"name": channel, "samples": out}));
        self.observations
            .push(json!({"name": channel, "data": observed}));
        Ok(())
    }

    /// What the document says of the parameter it calls `name`.
    fn parameter(&self, pyhf: String, name: String) -> BinnedParameter {
        let i = self.info.get(&name);
        BinnedParameter {
            pyhf,
            value: i.and_then(|i| i.value),
            bounds: i.map_or((f64::NEG_INFINITY, f64::INFINITY), |i| i.bounds),
            constant: i.is_some_and(|i| i.constant),
            name,
        }
    }

    fn finish(self, pois: &[String], name: Option<&str>, notes: Vec<String>) -> Result<BinnedDoc> {
        let measurement = name.unwrap_or("hs3").to_string();
        let config: Vec<Value> = self
            .lumi
            .iter()
            .map(|(p, centre, width)| json!({"name": p, "auxdata": [centre], "sigmas": [width]}))
            .collect();
        let mut scalars: Vec<String> = Vec::new();
        for c in &self.channels {
            for s in c["samples"].as_array().into_iter().flatten() {
                for m in s["modifiers"].as_array().into_iter().flatten() {
                    let n = m["name"].as_str().unwrap_or("").to_string();
                    if !self.per_bin.contains_key(&n) && !scalars.contains(&n) {
                        scalars.push(n);
                    }
                }
            }
        }
        let poi = pois.first().cloned().unwrap_or_default();
        if !poi.is_empty() && !scalars.contains(&poi) {
            return Err(err(
                "analyses: parameters_of_interest",
                format!("\"{poi}\" is not a parameter of the channels' modifiers"),
            ));
        }
        let mut parameters: Vec<BinnedParameter> = scalars
            .iter()
            .map(|s| self.parameter(s.clone(), s.clone()))
            .collect();
        let mut sets: Vec<(&String, &Vec<String>)> = self.per_bin.iter().collect();
        sets.sort();
        for (set, names) in sets {
            for (b, n) in names.iter().enumerate() {
                parameters.push(self.parameter(format!("{set}[{b}]"), n.clone()));
            }
        }
        let mut m = Map::new();
        m.insert("name".into(), json!(measurement));
        m.insert("config".into(), json!({"poi": poi, "parameters": config}));
        let workspace = json!({
            "channels": self.channels,
            "observations": self.observations,
            "measurements": [Value::Object(m)],
            "version": "1.0.0",
        });
        Ok(BinnedDoc {
            workspace,
            normsys: self.normsys.map_or("code4", |c| c.0),
            histosys: self.histosys.map_or("code4p", |c| c.0),
            parameters,
            notes,
        })
    }
}

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
//! - `staterror`: per bin one γ (the names in `parameters`; ROOT's `gamma_stat_<channel>_bin_<i>`
//!   where it gives none), Gaussian with the relative width √Σ errors² / Σ contents over the
//!   channel's samples that carry it (pyhf's definition);
//! - `shapesys`: `data.vals` are relative uncertainties, each bin's γ (`gamma_<name>_bin_<i>`
//!   by default) Poisson-constrained with τ = 1/val²; a bin whose val is 0 has no constraint and
//!   ROOT holds its γ const (histfit, as pyhf, at 1; a document leaving it free is refused,
//!   unless no sample carrying the set has a yield in that bin, where the γ multiplies
//!   nothing); all vals 0 is
//!   how ROOT writes a `ShapeFactor`: a free γ per bin, pyhf's `shapefactor`;
//! - `shapefactor`: a free γ per bin;
//! - a modifier without `parameter` gets ROOT's name for it (`alpha_<name>` for normsys and
//!   histosys); global observables the document gives values must be the nominal ones;
//! - the data: `binned` contents, or — as ROOT writes the Asimov data — `unbinned` weighted
//!   entries, counted into the channel's bins;
//! - parameters' starting values, bounds and `const` flags from `parameter_points` and
//!   `domains`, as for every HS3 model (ROOT holds γs whose relative error is below its
//!   threshold `const`).
//!
//! A likelihood whose channels mix `histfactory_dist` with event-level distributions opens as
//! both parts ([`open_document`], [`Opened::Mixed`]): the binned channels with the constraints
//! their modifiers name, the event-level ones with every other auxiliary distribution. Constraint
//! kinds pyhf's model has no term for are refused.

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
    /// Per-bin sets: their name in the workspace, and the name results show.
    pub sets: Vec<(String, String)>,
    /// What the reader assumed or chose, for the user to see.
    pub notes: Vec<String>,
    /// The constraint distributions the modifiers name (`constraint_name`), which the binned
    /// model's own constraint terms stand for.
    pub constraints: Vec<String>,
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
    /// A γ that multiplies no yield (a shapesys bin of nominal content 0), which pyhf holds at
    /// 1 whatever the document says: nothing the likelihood means depends on it.
    pub inert: bool,
}

/// The likelihood `choice` names as a pyhf workspace, where its distributions are all
/// `histfactory_dist`s; `None` where some or all are event-level ones ([`open_document`] opens
/// every kind).
pub fn histfactory(doc: &Value, choice: &Choice) -> Result<Option<BinnedDoc>> {
    let d = Doc::index(doc)?;
    let plan = d.plan(choice)?;
    if plan.pairs.iter().any(|(n, _)| !is_binned(&d, n)) {
        return Ok(None);
    }
    translate(&d, &plan, doc)
}

/// Whether distribution `name` is a `histfactory_dist`.
fn is_binned(d: &Doc, name: &str) -> bool {
    d.dists
        .get(name)
        .is_some_and(|(_, v)| v["type"] == "histfactory_dist")
}

/// The plan's `histfactory_dist` channels.
fn binned_channels<'p>(d: &Doc, plan: &'p crate::hs3::Plan) -> Vec<&'p str> {
    plan.pairs
        .iter()
        .map(|(dist, _)| dist.as_str())
        .filter(|n| is_binned(d, n))
        .collect()
}

/// The plan's `histfactory_dist` channels as a pyhf workspace (`None` where it has none). In a
/// plan that has event-level channels too, the POI is kept only where a modifier names it and
/// the constraints no modifier names are left to the event-level part ([`BinnedDoc::constraints`]
/// says which it took).
fn translate(d: &Doc, plan: &crate::hs3::Plan, doc: &Value) -> Result<Option<BinnedDoc>> {
    let binned = binned_channels(d, plan);
    if binned.is_empty() {
        return Ok(None);
    }
    let mixed = binned.len() < plan.pairs.len();
    let mut t = Translation {
        doc: d,
        info: parameter_info(doc)?,
        channels: Vec::new(),
        observations: Vec::new(),
        lumi: Vec::new(),
        normsys: None,
        histosys: None,
        per_bin: HashMap::new(),
        live: HashMap::new(),
        used_constraints: Vec::new(),
    };
    for (dist, data) in plan.pairs.iter().filter(|(n, _)| is_binned(d, n)) {
        t.channel(dist, data)?;
    }
    let unused = plan
        .aux
        .iter()
        .find(|a| !t.used_constraints.iter().any(|u| u == *a));
    if let (Some(aux), false) = (unused, mixed) {
        return Err(err(
            format!("likelihoods: aux_distributions \"{aux}\""),
            "a HistFactory likelihood's constraints are its modifiers' (constraint_name); this one belongs to none",
        ));
    }
    t.finish(&plan.pois, mixed, plan.name.as_deref(), plan.notes.clone())
        .map(Some)
}

/// A likelihood opened from an HS3 document: binned HistFactory channels as histfit's binned
/// model, event-level distributions as an event-level model, or both — a likelihood whose
/// channels are of both kinds, as ROOT exports a `RooSimultaneous` of HistFactory channels and
/// parametric ones. The two parts of a mixed likelihood share parameters by name; each
/// constraint term is in exactly one of them (the binned part's own modifiers' constraints in
/// the binned model, every other auxiliary distribution in the event-level one).
#[derive(Debug, Clone)]
// Made once per opened document and unpacked at once: the size difference does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Opened {
    Binned(histfit_model::Model),
    Events(crate::UnbinnedModel),
    Mixed {
        binned: histfit_model::Model,
        events: crate::UnbinnedModel,
        /// The POI the document names (in either part).
        poi: Option<String>,
    },
}

/// Opens the likelihood `choice` names, whatever the kinds of its channels.
pub fn open_document(doc: &Value, choice: &Choice) -> Result<Opened> {
    let d = Doc::index(doc)?;
    let plan = d.plan(choice)?;
    let Some(binned) = translate(&d, &plan, doc)? else {
        return crate::hs3::open(doc, choice).map(Opened::Events);
    };
    let model = binned_model(&binned)?;
    if binned_channels(&d, &plan).len() == plan.pairs.len() {
        return Ok(Opened::Binned(model));
    }
    let events = crate::hs3::open_part(doc, choice, |p| crate::hs3::Plan {
        pairs: p
            .pairs
            .into_iter()
            .filter(|(n, _)| !is_binned(&d, n))
            .collect(),
        aux: p
            .aux
            .into_iter()
            .filter(|a| !binned.constraints.contains(a))
            .collect(),
        held: binned.constraints.clone(),
        pois: Vec::new(),
        ..p
    })?;
    Ok(Opened::Mixed {
        binned: model,
        events,
        poi: plan.pois.first().cloned(),
    })
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
    /// Per-bin sets by pyhf name: the name results show, and the document's names of their
    /// components.
    per_bin: HashMap<String, (String, Vec<String>)>,
    /// Per shapesys set, per bin: whether a sample carrying it has a yield there (a γ of a bin
    /// where none has multiplies nothing: pyhf holds it at 1, which changes nothing).
    live: HashMap<String, Vec<bool>>,
    used_constraints: Vec<String>,
}

/// The most bins a channel may have (a bound for hostile input; real channels have tens).
const MAX_BINS: usize = 1_000_000;

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

    /// A per-bin set's component names — the document's `parameters`, one per bin, or where it
    /// names none ROOT's (`prefix` and the bin: `gamma_stat_SR_bin_0`, `gamma_NAME_bin_0`) —
    /// the same wherever the set appears. `set` is the pyhf workspace's name for it (kind and
    /// name: it cannot meet a scalar parameter's), `display` the name results show.
    fn per_bin_names(
        &mut self,
        m: &Value,
        set: &str,
        (display, prefix): (&str, &str),
        n: usize,
        place: &str,
    ) -> Result<()> {
        let names: Vec<String> = match m.get("parameters") {
            None => (0..n).map(|b| format!("{prefix}_bin_{b}")).collect(),
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
            Some((_, before)) if *before != names => Err(err(
                format!("{place}.parameters"),
                format!("\"{display}\" has other parameters where it appears before"),
            )),
            Some(_) => Ok(()),
            None => {
                self.per_bin
                    .insert(set.to_string(), (display.to_string(), names));
                Ok(())
            }
        }
    }

    /// Checks a per-bin γ's global observable where the document gives it a value
    /// (`nom_<γ>`): histfit's constraint terms are at the nominal ones — 1 for a Gaussian
    /// staterror, τ = 1/val² for a Poisson shapesys.
    fn nominal_global(&self, set: &str, nominal: &[Option<f64>], place: &str) -> Result<()> {
        let Some((_, names)) = self.per_bin.get(set) else {
            return Ok(());
        };
        // (A bin without a constraint has no global observable to check.)
        for (g, want) in names.iter().zip(nominal) {
            let Some(want) = want else { continue };
            let key = format!("nom_{g}");
            if let Some(v) = self.info.get(&key).and_then(|i| i.value) {
                if (v - want).abs() > 1e-9 * want.abs().max(1.0) {
                    return Err(err(
                        place,
                        format!("the global observable \"{key}\" is {v}: histfit reads HistFactory channels at their nominal global observables ({want} here)"),
                    ));
                }
            }
        }
        Ok(())
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
        let name = match (m.get("name"), m.get("parameter")) {
            (Some(n), _) | (None, Some(n)) => n
                .as_str()
                .ok_or_else(|| err(place, "a modifier's \"name\" (or \"parameter\") is text"))?
                .to_string(),
            (None, None) => return Err(err(place, "missing \"name\" (or \"parameter\")")),
        };
        // Where a modifier names no parameter, ROOT's reader makes it so: `alpha_<name>` for
        // normsys and histosys, the name itself for a normfactor.
        let parameter = match m.get("parameter") {
            None if matches!(kind, "normsys" | "histosys") => format!("alpha_{name}"),
            None => name.clone(),
            Some(v) => v
                .as_str()
                .ok_or_else(|| err(format!("{place}.parameter"), "expected a name"))?
                .to_string(),
        };
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
                let set = format!("staterror:{channel}");
                let display = format!("staterror_{channel}");
                let prefix = format!("gamma_stat_{channel}");
                self.per_bin_names(m, &set, (&display, &prefix), n, place)?;
                self.nominal_global(&set, &vec![Some(1.0); n], place)?;
                let data = errors.map_or_else(|| vec![0.0; n], <[f64]>::to_vec);
                json!({"type": "staterror", "name": set, "data": data})
            }
            "shapesys" => {
                let vals = numbers(m["data"].get("vals"), n, &format!("{place}.data.vals"))?;
                if vals.iter().any(|v| *v < 0.0) {
                    return Err(err(format!("{place}.data.vals"), "relative uncertainties are not negative"));
                }
                let prefix = format!("gamma_{name}");
                if vals.iter().all(|v| *v == 0.0) {
                    // ROOT's export of a ShapeFactor: unconstrained γs.
                    let set = format!("shapefactor:{name}");
                    self.per_bin_names(m, &set, (&name, &prefix), n, place)?;
                    return Ok(json!({"type": "shapefactor", "name": set, "data": null}));
                }
                constraint_is(m, "Poisson", "shapesys", place)?;
                let set = format!("shapesys:{name}");
                self.per_bin_names(m, &set, (&name, &prefix), n, place)?;
                let tau: Vec<Option<f64>> = vals.iter().map(|v| (*v > 0.0).then(|| 1.0 / (v * v))).collect();
                self.nominal_global(&set, &tau, place)?;
                let live = self.live.entry(set.clone()).or_insert_with(|| vec![false; n]);
                for (l, x) in live.iter_mut().zip(nominal) {
                    *l |= *x != 0.0;
                }
                let absolute: Vec<f64> = vals.iter().zip(nominal).map(|(v, x)| v * x).collect();
                json!({"type": "shapesys", "name": set, "data": absolute})
            }
            "shapefactor" => {
                let set = format!("shapefactor:{name}");
                let prefix = format!("gamma_{name}");
                self.per_bin_names(m, &set, (&name, &prefix), n, place)?;
                json!({"type": "shapefactor", "name": set, "data": null})
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
        let (di, dv) = *self.doc.dists.get(dist).ok_or_else(|| {
            err(
                format!("likelihoods: distributions \"{dist}\""),
                "no distribution of that name",
            )
        })?;
        let place = format!("distributions[{di}]");
        let samples = list(dv, "samples", &place)?;
        let mut axes = Vec::new();
        for (k, axis) in list(dv, "axes", &place)?.iter().enumerate() {
            let ap = format!("{place}.axes[{k}]");
            axes.push((
                str_field(axis, "name", &ap)?.to_string(),
                histogram_edges(axis, &ap)?,
            ));
        }
        let n = match axes.is_empty() {
            true => samples
                .first()
                .and_then(|s| s["data"]["contents"].as_array())
                .map_or(0, Vec::len),
            false => axes
                .iter()
                .try_fold(1usize, |n, (_, e)| n.checked_mul(e.len() - 1))
                .filter(|&n| n <= MAX_BINS)
                .ok_or_else(|| err(&place, format!("more than {MAX_BINS} bins")))?,
        };
        if samples.is_empty() || n == 0 {
            return Err(err(&place, "a histfactory_dist needs samples and bins"));
        }
        let channel = dist
            .strip_prefix("model_")
            .filter(|c| !c.is_empty())
            .unwrap_or(dist)
            .to_string();
        if self.channels.iter().any(|c| c["name"] == channel.as_str()) {
            return Err(err(
                &place,
                format!("a second channel \"{channel}\" in the likelihood (a distribution fitted twice, or both \"{channel}\" and \"model_{channel}\")"),
            ));
        }
        let observed = self.observed(data, &axes, n)?;
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

    /// The counts of dataset `data` in a channel of `n` bins over `axes` (name, edges): a
    /// `binned` dataset's `contents`, or an `unbinned` one's (weighted) entries counted into the
    /// bins — ROOT writes the Asimov data of a HistFactory workspace so, one weighted entry at
    /// each non-empty bin's centre. Its axes, where it states them, must be the channel's.
    fn observed(&self, data: &str, axes: &[(String, Vec<f64>)], n: usize) -> Result<Vec<f64>> {
        let (xi, xv) = self.doc.data.get(data).copied().ok_or_else(|| {
            err(
                format!("likelihoods: data \"{data}\""),
                "no dataset of that name",
            )
        })?;
        let xplace = format!("data[{xi}]");
        let stated = list(xv, "axes", &xplace)?;
        if !stated.is_empty() {
            let names: Vec<&str> = stated
                .iter()
                .map(|a| a["name"].as_str().unwrap_or(""))
                .collect();
            let want: Vec<&str> = axes.iter().map(|(a, _)| a.as_str()).collect();
            if names != want {
                return Err(err(
                    format!("{xplace}.axes"),
                    format!("axes {names:?} where the channel's are {want:?}"),
                ));
            }
        }
        let counts = match xv.get("type").and_then(Value::as_str).unwrap_or("binned") {
            "binned" => {
                for (k, a) in stated.iter().enumerate() {
                    let edges = histogram_edges(a, &format!("{xplace}.axes[{k}]"))?;
                    // (`edges` and `min`/`max`/`nbins` may give one binning in other roundings)
                    let same = edges.len() == axes[k].1.len()
                        && edges.iter().zip(&axes[k].1).all(|(a, b)| {
                            (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
                        });
                    if !same {
                        return Err(err(
                            format!("{xplace}.axes[{k}]"),
                            "bin edges other than the channel's",
                        ));
                    }
                }
                numbers(xv.get("contents"), n, &format!("{xplace}.contents"))?
            }
            "unbinned" if !axes.is_empty() => self.counted(xv, &xplace, axes, n)?,
            other => {
                return Err(err(
                    format!("{xplace}.type"),
                    format!("a histfactory_dist is fitted to binned data (or unbinned entries over its axes), not \"{other}\""),
                ))
            }
        };
        if let Some(b) = counts.iter().position(|c| *c < 0.0) {
            return Err(err(
                format!("{xplace}.contents[{b}]"),
                "a count is not negative",
            ));
        }
        Ok(counts)
    }

    /// An unbinned dataset's entries (one value per axis) and weights counted into the bins of
    /// `axes`, the last axis fastest; an entry outside the edges is an error naming it.
    fn counted(
        &self,
        xv: &Value,
        xplace: &str,
        axes: &[(String, Vec<f64>)],
        n: usize,
    ) -> Result<Vec<f64>> {
        let entries = list(xv, "entries", xplace)?;
        let weights = match xv.get("weights") {
            None => vec![1.0; entries.len()],
            w => numbers(w, entries.len(), &format!("{xplace}.weights"))?,
        };
        let mut counts = vec![0.0; n];
        for (i, e) in entries.iter().enumerate() {
            let ep = format!("{xplace}.entries[{i}]");
            let values = numbers(Some(e), axes.len(), &ep)?;
            let mut flat = 0usize;
            for ((name, edges), x) in axes.iter().zip(&values) {
                let inside = *x >= edges[0] && *x <= edges[edges.len() - 1];
                if !inside {
                    return Err(err(
                        &ep,
                        format!("{x} lies outside the edges of \"{name}\""),
                    ));
                }
                let b = (edges.partition_point(|e| e <= x) - 1).min(edges.len() - 2);
                flat = flat * (edges.len() - 1) + b;
            }
            counts[flat] += weights[i];
        }
        Ok(counts)
    }

    /// What the document says of the parameter it calls `name`.
    fn parameter(&self, pyhf: String, name: String) -> BinnedParameter {
        let i = self.info.get(&name);
        BinnedParameter {
            pyhf,
            value: i.and_then(|i| i.value),
            bounds: i.map_or((f64::NEG_INFINITY, f64::INFINITY), |i| i.bounds),
            constant: i.is_some_and(|i| i.constant),
            inert: false,
            name,
        }
    }

    /// The workspace; `mixed`: the likelihood has event-level channels too, where a POI no
    /// modifier names may be.
    fn finish(
        self,
        pois: &[String],
        mixed: bool,
        name: Option<&str>,
        notes: Vec<String>,
    ) -> Result<BinnedDoc> {
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
        let mut poi = pois.first().cloned().unwrap_or_default();
        if mixed && !scalars.contains(&poi) {
            poi.clear();
        }
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
        let mut sets: Vec<(&String, &(String, Vec<String>))> = self.per_bin.iter().collect();
        sets.sort();
        for (set, (_, names)) in &sets {
            let live = self.live.get(*set);
            for (b, n) in names.iter().enumerate() {
                let mut p = self.parameter(format!("{set}[{b}]"), n.clone());
                p.inert = live.is_some_and(|l| !l[b]);
                parameters.push(p);
            }
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(twice) = parameters.iter().find(|p| !seen.insert(p.name.as_str())) {
            return Err(err(
                format!("parameter \"{}\"", twice.name),
                "names two parameters of the channels (a γ of two per-bin sets, or a γ and a scalar parameter): histfit's HistFactory model shares no γ between sets",
            ));
        }
        // Sets are shown by the document's modifier names where those name nothing else.
        let shown = |d: &String| {
            sets.iter().filter(|(_, (x, _))| x == d).count() == 1 && !scalars.contains(d)
        };
        let sets = sets
            .iter()
            .filter(|(_, (display, _))| shown(display))
            .map(|(set, (display, _))| ((*set).clone(), display.clone()))
            .collect();
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
            sets,
            notes,
            constraints: self.used_constraints,
        })
    }
}

/// The binned model of the likelihood `choice` names in an HS3 document, where its
/// distributions are all `histfactory_dist` channels; `None` (nothing opened, no event read)
/// where they are not.
pub fn open_binned(doc: &Value, choice: &Choice) -> Result<Option<histfit_model::Model>> {
    histfactory(doc, choice)?
        .map(|b| binned_model(&b))
        .transpose()
}

/// The binned model of an HS3 document's HistFactory channels: its pyhf workspace compiled with
/// the document's interpolation codes, each parameter renamed as the document names it and
/// given the document's starting value, bounds and constancy.
fn binned_model(binned: &BinnedDoc) -> Result<histfit_model::Model> {
    // What the model's compiler refuses names the translated workspace's places: say whose.
    let translated = |e: histfit_model::ModelError| {
        err(
            "the histfactory_dist channels (read as a pyhf workspace)",
            e.to_string(),
        )
    };
    let code = |e: String| err("histfactory_dist", e);
    let ws = histfit_model::workspace_from_value(&binned.workspace, "histfactory_dist")
        .map_err(translated)?;
    let settings = histfit_model::Settings {
        normsys: binned.normsys.parse().map_err(code)?,
        histosys: binned.histosys.parse().map_err(code)?,
        ..histfit_model::Settings::smooth()
    };
    let mut model = histfit_model::compile(&ws, None, &settings).map_err(translated)?;
    for p in &mut model.parameters {
        let Some(d) = binned.parameters.iter().find(|d| d.pyhf == p.name) else {
            continue;
        };
        let known = d.value.is_some() || d.bounds.0.is_finite() || d.bounds.1.is_finite();
        if p.fixed && known && !d.constant && !d.inert {
            // pyhf holds a shapesys γ of zero uncertainty at 1; ROOT would float it unconstrained.
            return Err(err(
                format!("parameter \"{}\"", d.name),
                "a shapesys bin with no uncertainty that the document leaves free (histfit, as pyhf, has no unconstrained γ in a shapesys: give it const, or make the set a shapefactor)",
            ));
        }
        // The document's bounds where it gives them; a constrained γ's −ln L is infinite at 0,
        // where ROOT's domains start: there pyhf's 1e-10.
        let (lo, hi) = d.bounds;
        if lo.is_finite() {
            p.lower = match p.constraint {
                histfit_model::Constraint::None => lo,
                _ if d.pyhf.contains(':') => lo.max(1e-10),
                _ => lo,
            };
        }
        if hi.is_finite() {
            p.upper = hi;
        }
        let start = d.value.unwrap_or(p.init);
        if !(p.lower..=p.upper).contains(&start) {
            let whose = match d.value {
                Some(_) => "its value",
                None => "with no value in parameter_points, its default start",
            };
            return Err(err(
                format!("parameter \"{}\"", d.name),
                format!(
                    "{whose} {start} lies outside its domain [{}, {}]",
                    p.lower, p.upper
                ),
            ));
        }
        p.init = start;
        p.fixed |= d.constant;
        p.name = d.name.clone();
    }
    for set in &mut model.sets {
        if let Some((_, display)) = binned.sets.iter().find(|(s, _)| *s == set.name) {
            set.name = display.clone();
        }
    }
    model.warnings.extend(binned.notes.iter().cloned());
    Ok(model)
}

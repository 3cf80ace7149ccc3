//! The HS3 reader: a JSON document (HS3 v0.2, as the standard specifies it and as ROOT 6.40's
//! `RooJSONFactoryWSTool` writes it) into an [`UnbinnedModel`]. Distributions and functions
//! become nodes of one graph ([`crate::pdf`], [`crate::expr`]); a name that is neither a
//! distribution, a function, an observable of the fitted data nor a number is a parameter, its
//! starting value from `parameter_points` and its bounds from `domains`.
//!
//! Which distributions are fitted to which data: the `analyses` entry (its likelihood and
//! parameters of interest) or the `likelihoods` entry chosen (or the only one); where a file has
//! neither (ROOT writes them only with a ModelConfig), its one top-level distribution and its one
//! dataset, with a note saying so. `metadata` and `misc` are ignored.

use crate::graph::{Graph, Id, Op, Table};
use crate::model::{ChannelSpec, Correlated, Draw, GlobalObservable, Observable, UnbinnedModel};
use crate::pdf::{self, Domain};
use histfit_seam::{EventTable, Events, ParameterSpace, Prior};
use serde_json::Value;
use std::collections::HashMap;

/// Bad input: the JSON path (or file object) and the rule it breaks.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{place}: {rule}")]
pub struct Hs3Error {
    pub place: String,
    pub rule: String,
}

/// A histogram axis's bin edges: `edges` (increasing, finite), or `nbins` equal bins between
/// `min` and `max`.
pub(crate) fn histogram_edges(axis: &Value, place: &str) -> Result<Vec<f64>> {
    if let Some(e) = axis.get("edges") {
        let edges: Vec<f64> = e
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .filter(|v: &Vec<f64>| v.len() == e.as_array().map_or(0, Vec::len))
            .ok_or_else(|| err(format!("{place}.edges"), "expected a list of numbers"))?;
        if edges.len() < 2
            || edges.iter().any(|e| !e.is_finite())
            || edges.windows(2).any(|w| w[1] <= w[0])
        {
            return Err(err(
                format!("{place}.edges"),
                "expected at least two finite edges, increasing",
            ));
        }
        return Ok(edges);
    }
    let num = |k: &str| {
        axis.get(k)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite())
            .ok_or_else(|| err(format!("{place}.{k}"), "expected a finite number"))
    };
    let (lo, hi) = (num("min")?, num("max")?);
    let n = axis
        .get("nbins")
        .and_then(Value::as_u64)
        .filter(|&n| (1..=10_000_000).contains(&n))
        .ok_or_else(|| {
            err(
                format!("{place}.nbins"),
                "expected a number of bins from 1 to 10⁷",
            )
        })? as usize;
    if hi <= lo {
        return Err(err(place, format!("max {hi} is not above min {lo}")));
    }
    Ok((0..=n)
        .map(|b| {
            if b == n {
                hi
            } else {
                lo + (hi - lo) * b as f64 / n as f64
            }
        })
        .collect())
}

/// A multivariate normal's log-density, its means and the Cholesky factor of its covariance.
struct Mvn {
    log_density: Id,
    means: Vec<Id>,
    chol: Vec<f64>,
}

/// An n × n covariance matrix: finite numbers, symmetric to 1e-12 of its entries.
fn covariance(v: Option<&Value>, n: usize, place: &str) -> Result<Vec<f64>> {
    let rows = v
        .and_then(Value::as_array)
        .filter(|r| r.len() == n)
        .ok_or_else(|| err(place, format!("expected {n} rows of {n} numbers")))?;
    let mut m = Vec::with_capacity(n * n);
    for (i, row) in rows.iter().enumerate() {
        let row = row
            .as_array()
            .filter(|r| r.len() == n)
            .ok_or_else(|| err(format!("{place}[{i}]"), format!("expected {n} numbers")))?;
        for (j, x) in row.iter().enumerate() {
            match x.as_f64() {
                Some(x) if x.is_finite() => m.push(x),
                _ => {
                    return Err(err(
                        format!("{place}[{i}][{j}]"),
                        "expected a finite number",
                    ))
                }
            }
        }
    }
    for i in 0..n {
        for j in 0..i {
            let (a, b) = (m[i * n + j], m[j * n + i]);
            if (a - b).abs() > 1e-12 * a.abs().max(b.abs()) {
                return Err(err(
                    format!("{place}[{i}][{j}]"),
                    format!("not symmetric: {a} against [{j}][{i}] = {b}"),
                ));
            }
        }
    }
    Ok(m)
}

/// The lower Cholesky factor of a symmetric n × n matrix (row-major), or `None` where it is not
/// positive definite.
fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
            if i == j {
                let d = a[i * n + i] - s;
                if d.is_nan() || d <= 0.0 {
                    return None;
                }
                l[i * n + i] = d.sqrt();
            } else {
                l[i * n + j] = (a[i * n + j] - s) / l[j * n + j];
            }
        }
    }
    Some(l)
}

pub(crate) fn err(place: impl Into<String>, rule: impl Into<String>) -> Hs3Error {
    Hs3Error {
        place: place.into(),
        rule: rule.into(),
    }
}

pub(crate) type Result<T> = std::result::Result<T, Hs3Error>;

/// Which likelihood of a document to open.
#[derive(Debug, Clone, Default)]
pub struct Choice {
    pub analysis: Option<String>,
    pub likelihood: Option<String>,
    /// Where the files a dataset names (`histfit_source`) are found: the document's own
    /// directory; `None` for the working directory.
    pub directory: Option<std::path::PathBuf>,
    /// Events given by the caller (NumPy arrays from Python) for datasets by name, in place of
    /// what the document says: columns named by the dataset's axes, in any order.
    pub events: Vec<(String, EventTable)>,
}

/// Whether a JSON document is an HS3 document (rather than a pyhf workspace).
pub fn is_hs3(doc: &Value) -> bool {
    doc.get("distributions").is_some()
        || doc
            .get("metadata")
            .and_then(|m| m.get("hs3_version"))
            .is_some()
}

/// Relative accuracy asked of quadrature normalisations.
pub const QUADRATURE_TOLERANCE: f64 = 1e-10;

/// The types of a `decay_dist`'s resolution models: the standard's (`gauss_model_function`,
/// `truth_model_function`) and what ROOT writes (`gauss_resolution_model`, and `mixture_model`
/// for a RooAddModel of several).
/// The most resolution models (leaves of nested mixtures) a decay is convolved with.
const MAX_RESOLUTION_MODELS: usize = 64;

const RESOLUTION_MODELS: [&str; 4] = [
    "gauss_model_function",
    "gauss_resolution_model",
    "truth_model_function",
    "mixture_model",
];

/// What one Voigtian's log-shape costs, counted in graph nodes for the quadrature's budget: a
/// Faddeeva value takes as long as some 60 plain nodes (its rational series of 40 terms), so the
/// rule stops at 512 pieces (4 096 values an evaluation; the fixtures' peaks reach 1e-10 on far fewer)
/// where a domain too wide for any rule would otherwise take 4 096 (a fuzzed document spent
/// 0.7 s opening on one 10⁵⁸ wide).
const VOIGTIAN_COST: usize = 64;

/// RooFFTConvPdf's window for its second density, in widths of the range: the range and its
/// two buffers of 5 % (its default buffer fraction, 10 %).
const CONVOLUTION_WINDOW: f64 = 1.1;

/// The most nodes that vary with the events a convolution's integral may take (its rule's nodes
/// times what the first density costs at one of them): 1 024 rule nodes of a Landau or a
/// Breit–Wigner, an evaluation ≈ 10⁴ operations an event.
const CONVOLUTION_NODES: usize = 1 << 14;

/// Opens the likelihood `choice` names in the HS3 document `doc`.
pub fn open(doc: &Value, choice: &Choice) -> Result<UnbinnedModel> {
    open_part(doc, choice, |p| p)
}

/// [`open`] with the plan edited first (the event-level part of a mixed likelihood: its
/// event-level channels and the constraints the binned part does not hold).
pub(crate) fn open_part(
    doc: &Value,
    choice: &Choice,
    edit: impl FnOnce(Plan) -> Plan,
) -> Result<UnbinnedModel> {
    let mut doc = Doc::index(doc)?;
    doc.directory = choice.directory.clone();
    doc.supplied = choice.events.clone();
    if let Some((name, _)) = choice
        .events
        .iter()
        .find(|(n, _)| !doc.data.contains_key(n.as_str()))
    {
        return Err(err(
            format!("events[\"{name}\"]"),
            format!(
                "no dataset of that name in the document (it has {})",
                listing(list(doc.root, "data", "the document").unwrap_or(&[]))
            ),
        ));
    }
    let plan = edit(doc.plan(choice)?);
    if let Some((name, _)) = choice
        .events
        .iter()
        .find(|(n, _)| !plan.pairs.iter().any(|(_, d)| d == n))
    {
        let used: Vec<&str> = plan.pairs.iter().map(|(_, d)| d.as_str()).collect();
        return Err(err(
            format!("events[\"{name}\"]"),
            format!(
                "the likelihood opened does not fit this dataset (it fits {})",
                used.join(", ")
            ),
        ));
    }
    Builder::new(&doc, &plan)?.build(&plan)
}

/// A document's named objects.
pub(crate) struct Doc<'a> {
    pub(crate) root: &'a Value,
    pub(crate) dists: HashMap<&'a str, (usize, &'a Value)>,
    funcs: HashMap<&'a str, (usize, &'a Value)>,
    pub(crate) data: HashMap<&'a str, (usize, &'a Value)>,
    /// Where the files datasets name are found.
    directory: Option<std::path::PathBuf>,
    /// Events the caller gave, by dataset name.
    supplied: Vec<(String, EventTable)>,
}

/// What to fit: (distribution, dataset) pairs, constraint distributions, the POIs.
/// What a likelihood's objects name (for telling a prior from a constraint): the axes of its
/// datasets, and per distribution or function it reaches from its distributions and auxiliary
/// distributions, the names that object references.
pub(crate) struct Uses {
    axes: Vec<String>,
    by: Vec<(String, Vec<String>)>,
}

pub(crate) struct Plan {
    pub(crate) pairs: Vec<(String, String)>,
    pub(crate) aux: Vec<String>,
    pub(crate) pois: Vec<String>,
    pub(crate) notes: Vec<String>,
    /// Constraint distributions another part of the likelihood holds (a mixed likelihood's
    /// binned part): a product naming one leaves it out.
    pub(crate) held: Vec<String>,
    /// The likelihood's name, where the document names one.
    pub(crate) name: Option<String>,
}

pub(crate) fn str_field<'a>(v: &'a Value, key: &str, place: &str) -> Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| err(place, format!("missing or non-text \"{key}\"")))
}

pub(crate) fn list<'a>(v: &'a Value, key: &str, place: &str) -> Result<&'a [Value]> {
    match v.get(key) {
        None => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(err(format!("{place}.{key}"), "expected a list")),
    }
}

/// The observables a distribution names: its `x` list, or the first of its `x`, `m` or `mass`.
fn observable_names(d: &Value) -> Vec<String> {
    if let Some(Value::Array(a)) = d.get("x") {
        return a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
    }
    ["x", "m", "mass"]
        .iter()
        .find_map(|k| match d.get(*k) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Array(a)) => a.first().and_then(Value::as_str).map(str::to_string),
            _ => None,
        })
        .into_iter()
        .collect()
}

pub(crate) fn names(v: &Value, key: &str, place: &str) -> Result<Vec<String>> {
    list(v, key, place)?
        .iter()
        .enumerate()
        .map(|(i, x)| match x {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            _ => Err(err(format!("{place}.{key}[{i}]"), "expected a name")),
        })
        .collect()
}

impl<'a> Doc<'a> {
    pub(crate) fn index(root: &'a Value) -> Result<Doc<'a>> {
        if !root.is_object() {
            return Err(err("document", "an HS3 document is a JSON object"));
        }
        let table = |key: &str| -> Result<HashMap<&'a str, (usize, &'a Value)>> {
            let mut m = HashMap::new();
            for (i, v) in list(root, key, "document")?.iter().enumerate() {
                let place = format!("{key}[{i}]");
                let name = str_field(v, "name", &place)?;
                if m.insert(name, (i, v)).is_some() {
                    return Err(err(place, format!("a second object named \"{name}\"")));
                }
            }
            Ok(m)
        };
        Ok(Doc {
            root,
            dists: table("distributions")?,
            funcs: table("functions")?,
            data: table("data")?,
            directory: None,
            supplied: Vec::new(),
        })
    }

    /// The names a distribution refers to (strings anywhere in it but its name and type).
    /// The [`Uses`] of `plan`'s likelihood.
    fn uses(&self, plan: &Plan) -> Uses {
        let mut axes = Vec::new();
        for (_, data) in &plan.pairs {
            if let Some((_, v)) = self.data.get(data.as_str()) {
                if let Some(list) = v.get("axes").and_then(Value::as_array) {
                    axes.extend(
                        list.iter()
                            .filter_map(|a| a["name"].as_str().map(String::from)),
                    );
                }
            }
        }
        let mut todo: Vec<String> = plan.pairs.iter().map(|(d, _)| d.clone()).collect();
        todo.extend(plan.aux.iter().cloned());
        let mut by: Vec<(String, Vec<String>)> = Vec::new();
        while let Some(n) = todo.pop() {
            if by.iter().any(|(m, _)| *m == n) {
                continue;
            }
            let Some((_, v)) = self.dists.get(n.as_str()).or(self.funcs.get(n.as_str())) else {
                continue;
            };
            let mut refs = Vec::new();
            Doc::references(v, &mut refs);
            todo.extend(
                refs.iter()
                    .filter(|r| {
                        self.dists.contains_key(r.as_str()) || self.funcs.contains_key(r.as_str())
                    })
                    .cloned(),
            );
            by.push((n, refs));
        }
        Uses { axes, by }
    }

    fn references(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| Doc::references(x, out)),
            Value::Object(o) => o
                .iter()
                .filter(|(k, _)| *k != "name" && *k != "type")
                .for_each(|(_, x)| Doc::references(x, out)),
            _ => {}
        }
    }

    pub(crate) fn plan(&self, choice: &Choice) -> Result<Plan> {
        let analyses = list(self.root, "analyses", "document")?;
        let likelihoods = list(self.root, "likelihoods", "document")?;
        let pick = |items: &'a [Value], asked: &Option<String>, what: &str, flag: &str| {
            let found = |n: &str| items.iter().position(|a| a["name"] == n);
            match asked {
                Some(n) => found(n).map(|i| Some((i, &items[i]))).ok_or_else(|| {
                    err(
                        format!("{flag} {n}"),
                        format!(
                            "no {what} of that name (the document has {})",
                            listing(items)
                        ),
                    )
                }),
                None if items.len() == 1 => Ok(Some((0, &items[0]))),
                None if items.is_empty() => Ok(None),
                None => Err(err(
                    what,
                    format!(
                        "the document has {} of them ({}): choose one with {flag} NAME",
                        items.len(),
                        listing(items)
                    ),
                )),
            }
        };
        let mut notes = Vec::new();
        let mut pois = Vec::new();
        let mut likelihood_name = choice.likelihood.clone();
        let mut asked = choice.analysis.clone();
        if choice.likelihood.is_none() && asked.is_none() {
            if let Some(observed) = observed_of_pair(analyses, likelihoods) {
                notes.push(format!(
                    "opening analysis \"{observed}\" (the observed data; ROOT writes one analysis per dataset of a HistFactory workspace): --analysis names another"
                ));
                asked = Some(observed);
            }
        }
        if choice.likelihood.is_none() {
            if let Some((i, a)) = pick(analyses, &asked, "analyses", "--analysis")? {
                let place = format!("analyses[{i}]");
                likelihood_name = Some(str_field(a, "likelihood", &place)?.to_string());
                pois = names(a, "parameters_of_interest", &place)?;
            }
        }
        if let Some((i, l)) = pick(likelihoods, &likelihood_name, "likelihoods", "--likelihood")? {
            let place = format!("likelihoods[{i}]");
            let ds = names(l, "distributions", &place)?;
            let data = names(l, "data", &place)?;
            if ds.len() != data.len() {
                return Err(err(
                    place,
                    format!(
                        "{} distributions but {} datasets: they go in pairs",
                        ds.len(),
                        data.len()
                    ),
                ));
            }
            let aux = names(l, "aux_distributions", &place)?;
            return Ok(Plan {
                pairs: ds.into_iter().zip(data).collect(),
                aux,
                pois,
                notes,
                held: Vec::new(),
                name: l["name"].as_str().map(str::to_string),
            });
        }
        // No likelihood: one top-level distribution and one dataset.
        let mut referenced = Vec::new();
        for (_, v) in self.dists.values().chain(self.funcs.values()) {
            Doc::references(v, &mut referenced);
        }
        let mut top: Vec<(usize, &str)> = self
            .dists
            .iter()
            .filter(|(n, _)| !referenced.iter().any(|r| r == *n))
            // Resolution models are not densities of data (ROOT also writes copies of them
            // that nothing names).
            .filter(|(_, (_, v))| !RESOLUTION_MODELS.contains(&v["type"].as_str().unwrap_or("")))
            .map(|(n, (i, _))| (*i, *n))
            .collect();
        top.sort();
        let mut data: Vec<(usize, &str)> = self.data.iter().map(|(n, (i, _))| (*i, *n)).collect();
        data.sort();
        match (top.as_slice(), data.as_slice()) {
            ([(_, d)], [(_, x)]) => {
                notes.push(format!(
                    "the document names no likelihood: fitting its one top-level distribution \"{d}\" to its one dataset \"{x}\""
                ));
                Ok(Plan {
                    pairs: vec![(d.to_string(), x.to_string())],
                    aux: Vec::new(),
                    held: Vec::new(),
                    pois,
                    notes,
                    name: None,
                })
            }
            _ => Err(err(
                "likelihoods",
                format!(
                    "the document names no likelihood and has {} top-level distributions ({}) and {} datasets ({}): add a likelihood to it, or choose one with --likelihood",
                    top.len(),
                    top.iter().map(|t| t.1).collect::<Vec<_>>().join(", "),
                    data.len(),
                    data.iter().map(|t| t.1).collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }
}

/// Where the analyses are the pair ROOT writes for a HistFactory workspace — one on the observed
/// data (`obsData_<channel>` datasets), one on the Asimov data (`asimovData_<channel>`) — the
/// observed one's name: what a physicist opening the file means.
fn observed_of_pair(analyses: &[Value], likelihoods: &[Value]) -> Option<String> {
    if analyses.len() != 2 {
        return None;
    }
    let datasets = |a: &Value| -> Option<Vec<String>> {
        let l = likelihoods.iter().find(|l| l["name"] == a["likelihood"])?;
        Some(
            l["data"]
                .as_array()?
                .iter()
                .map(|d| d.as_str().unwrap_or("").to_string())
                .collect(),
        )
    };
    let all = |a: &Value, prefix: &str| {
        datasets(a).is_some_and(|d| !d.is_empty() && d.iter().all(|n| n.starts_with(prefix)))
    };
    let observed: Vec<&Value> = analyses.iter().filter(|a| all(a, "obsData")).collect();
    let asimov = analyses.iter().filter(|a| all(a, "asimovData")).count();
    match (observed.as_slice(), asimov) {
        ([one], 1) => one["name"].as_str().map(str::to_string),
        _ => None,
    }
}

/// A dataset's observables with their domains (its `axes`).
fn axes(d: &Value, place: &str) -> Result<Vec<Observable>> {
    let mut observables = Vec::new();
    for (k, a) in list(d, "axes", place)?.iter().enumerate() {
        let ap = format!("{place}.axes[{k}]");
        let n = str_field(a, "name", &ap)?;
        let lo = a.get("min").and_then(Value::as_f64);
        let hi = a.get("max").and_then(Value::as_f64);
        let (lo, hi) = match (lo, hi) {
            (Some(lo), Some(hi)) if lo < hi && lo.is_finite() && hi.is_finite() => (lo, hi),
            _ => return Err(err(ap, "an observable needs finite min < max")),
        };
        observables.push(Observable {
            name: n.to_string(),
            lo,
            hi,
        });
    }
    if observables.is_empty() {
        return Err(err(place, "no axes: unbinned data need their observables"));
    }
    Ok(observables)
}

/// What [`check_events`] found wrong: a column (by axis) or a weight (by event).
enum Checked<'a> {
    Column(&'a str),
    Weight(usize),
}

/// The rules events keep wherever they come from: each inside its axis' domain (NaN is outside
/// every one) and each weight finite and not negative; `place` names where a broken one is.
fn check_events(
    columns: &[Vec<f64>],
    weights: Option<&[f64]>,
    observables: &[Observable],
    place: &dyn Fn(Checked) -> String,
) -> Result<()> {
    for (col, Observable { name, lo, hi }) in columns.iter().zip(observables) {
        let outside = histfit_events::count_outside(col, *lo, *hi);
        if outside > 0 {
            return Err(err(
                place(Checked::Column(name)),
                format!("{outside} events with \"{name}\" outside its domain [{lo}, {hi}] (or not numbers)"),
            ));
        }
    }
    if let Some(i) = weights.and_then(|w| w.iter().position(|v| !(v.is_finite() && *v >= 0.0))) {
        return Err(err(
            place(Checked::Weight(i)),
            format!(
                "{}: weights must be finite and not negative",
                weights.unwrap_or(&[])[i]
            ),
        ));
    }
    Ok(())
}

/// Events the caller gave for a dataset: one column per axis (by name, put in axis order), all of
/// one length and inside the domains, weights finite and not negative.
fn supplied_events(
    table: &EventTable,
    observables: &[Observable],
    place: &str,
) -> Result<EventTable> {
    if let Some(extra) = table
        .names
        .iter()
        .find(|n| !observables.iter().any(|o| &o.name == *n))
    {
        return Err(err(
            format!("{place}[\"{extra}\"]"),
            format!(
                "not an axis of the dataset (its axes: {})",
                observables
                    .iter()
                    .map(|o| o.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let n = table.len();
    let mut columns = Vec::with_capacity(observables.len());
    for Observable { name, .. } in observables {
        let k = table
            .names
            .iter()
            .position(|c| c == name)
            .ok_or_else(|| err(place, format!("no column for axis \"{name}\"")))?;
        let col = &table.columns[k];
        if col.len() != n {
            return Err(err(
                format!("{place}[\"{name}\"]"),
                format!("{} values where the first column has {n}", col.len()),
            ));
        }
        columns.push(col.clone());
    }
    if let Some(w) = &table.weights {
        if w.len() != n {
            return Err(err(
                format!("{place}.weights"),
                format!("{} weights for {n} events", w.len()),
            ));
        }
    }
    check_events(
        &columns,
        table.weights.as_deref(),
        observables,
        &|what| match what {
            Checked::Column(name) => format!("{place}[\"{name}\"]"),
            Checked::Weight(i) => format!("{place}.weights[{i}]"),
        },
    )?;
    if n == 0 {
        return Err(err(place, "no events"));
    }
    Ok(EventTable {
        names: observables.iter().map(|o| o.name.clone()).collect(),
        columns,
        weights: table.weights.clone(),
    })
}

/// The events written in the document (`entries`, optional `weights`).
fn inline_events(d: &Value, observables: &[Observable], place: &str) -> Result<EventTable> {
    let entries = list(d, "entries", place)?;
    let mut columns = vec![Vec::with_capacity(entries.len()); observables.len()];
    for (e, row) in entries.iter().enumerate() {
        let row = row
            .as_array()
            .filter(|r| r.len() == observables.len())
            .ok_or_else(|| {
                err(
                    format!("{place}.entries[{e}]"),
                    format!("expected {} numbers (one per axis)", observables.len()),
                )
            })?;
        for (k, v) in row.iter().enumerate() {
            let v = v
                .as_f64()
                .ok_or_else(|| err(format!("{place}.entries[{e}][{k}]"), "not a number"))?;
            columns[k].push(v);
        }
    }
    let weights = match d.get("weights") {
        None => None,
        Some(w) => {
            let w = w
                .as_array()
                .filter(|w| w.len() == entries.len())
                .ok_or_else(|| {
                    err(
                        format!("{place}.weights"),
                        format!("expected {} numbers (one per entry)", entries.len()),
                    )
                })?;
            let mut ws = Vec::with_capacity(w.len());
            for (e, v) in w.iter().enumerate() {
                ws.push(
                    v.as_f64()
                        .ok_or_else(|| err(format!("{place}.weights[{e}]"), "not a number"))?,
                );
            }
            Some(ws)
        }
    };
    check_events(
        &columns,
        weights.as_deref(),
        observables,
        &|what| match what {
            Checked::Column(_) => place.to_string(),
            Checked::Weight(e) => format!("{place}.weights[{e}]"),
        },
    )?;
    Ok(EventTable {
        names: observables.iter().map(|o| o.name.clone()).collect(),
        columns,
        weights,
    })
}

/// Where a dataset's events come from.
enum Source {
    Parquet(histfit_events::SourceSpec),
    Tree(crate::tree_source::TreeSource),
}

/// A dataset's `histfit_source` (the `histfit_events::parquet` module, and
/// [`crate::tree_source`] for ROOT trees), its file found from `directory`.
fn source_spec(
    v: &Value,
    observables: &[Observable],
    directory: Option<&std::path::Path>,
    place: &str,
) -> Result<Source> {
    let format = str_field(v, "format", place)?;
    let tree = match format {
        "parquet" => None,
        "root" => Some(str_field(v, "tree", place)?.to_string()),
        _ => {
            return Err(err(
                format!("{place}.format"),
                format!("\"{format}\": the formats read are \"parquet\" and \"root\" (a TTree)"),
            ))
        }
    };
    let file = std::path::PathBuf::from(str_field(v, "file", place)?);
    let file = match directory {
        Some(d) if file.is_relative() => d.join(file),
        _ => file,
    };
    let names = v.get("columns");
    if names.is_some_and(|c| !c.is_object()) {
        return Err(err(
            format!("{place}.columns"),
            "expected an object {observable: column}",
        ));
    }
    // A Parquet column's name, or a tree's expression over branches.
    let columns = observables
        .iter()
        .map(|o| match names.and_then(|c| c.get(&o.name)) {
            None => Ok((o.clone(), o.name.clone())),
            Some(Value::String(c)) => Ok((o.clone(), c.clone())),
            Some(_) => Err(err(
                format!("{place}.columns.{}", o.name),
                match tree {
                    None => "expected a column name",
                    Some(_) => "expected an expression over the tree's branches",
                },
            )),
        })
        .collect::<Result<Vec<_>>>()?;
    if let Some(Value::Object(m)) = names {
        if let Some(k) = m
            .keys()
            .find(|k| !observables.iter().any(|o| &o.name == *k))
        {
            return Err(err(
                format!("{place}.columns.{k}"),
                "not an observable of the dataset (its axes)",
            ));
        }
    }
    let text = |key: &str, what: &str| match v.get(key) {
        None => Ok(None),
        Some(Value::String(w)) => Ok(Some(w.clone())),
        Some(_) => Err(err(format!("{place}.{key}"), format!("expected {what}"))),
    };
    let drop_outside = match v.get("outside").map(|o| o.as_str()) {
        None | Some(Some("error")) => false,
        Some(Some("drop")) => true,
        Some(_) => {
            return Err(err(
                format!("{place}.outside"),
                "expected \"error\" (the default) or \"drop\"",
            ))
        }
    };
    Ok(match tree {
        None => {
            if v.get("selection").is_some() {
                return Err(err(
                    format!("{place}.selection"),
                    "a selection is read for \"format\": \"root\" (Parquet files: write the selected events)",
                ));
            }
            Source::Parquet(histfit_events::SourceSpec {
                file,
                columns: columns
                    .into_iter()
                    .map(|(o, column)| histfit_events::ColumnRequest {
                        observable: o.name,
                        column,
                        lo: o.lo,
                        hi: o.hi,
                    })
                    .collect(),
                weight: text("weight", "a column name")?,
                drop_outside,
            })
        }
        Some(tree) => Source::Tree(crate::tree_source::TreeSource {
            file,
            tree,
            columns,
            weight: text("weight", "an expression over the tree's branches")?,
            selection: text("selection", "an expression over the tree's branches")?,
            drop_outside,
        }),
    })
}

pub(crate) fn listing(items: &[Value]) -> String {
    items
        .iter()
        .map(|v| v["name"].as_str().unwrap_or("?").to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every parameter the document describes, by name: bounds from the domains (every product
/// domain's axes), values and `const` from the parameter points — the set named
/// "default_values" where there is one, else the first.
pub(crate) fn parameter_info(root: &Value) -> Result<HashMap<String, ParamInfo>> {
    let mut info: HashMap<String, ParamInfo> = HashMap::new();
    for (i, d) in list(root, "domains", "document")?.iter().enumerate() {
        for (k, axis) in list(d, "axes", &format!("domains[{i}]"))?
            .iter()
            .enumerate()
        {
            let place = format!("domains[{i}].axes[{k}]");
            let name = str_field(axis, "name", &place)?;
            let lo = axis
                .get("min")
                .and_then(Value::as_f64)
                .unwrap_or(f64::NEG_INFINITY);
            let hi = axis
                .get("max")
                .and_then(Value::as_f64)
                .unwrap_or(f64::INFINITY);
            if lo > hi || lo.is_nan() || hi.is_nan() {
                return Err(err(place, format!("min {lo} above max {hi}")));
            }
            info.entry(name.to_string())
                .or_insert(ParamInfo {
                    value: None,
                    bounds: (lo, hi),
                    constant: false,
                })
                .bounds = (lo, hi);
        }
    }
    let points = list(root, "parameter_points", "document")?;
    let chosen = points
        .iter()
        .position(|p| p["name"] == "default_values")
        .or((!points.is_empty()).then_some(0));
    if let Some(pi) = chosen {
        let place = format!("parameter_points[{pi}]");
        for (k, p) in list(&points[pi], "parameters", &place)?.iter().enumerate() {
            let place = format!("{place}.parameters[{k}]");
            let name = str_field(p, "name", &place)?;
            let value = p
                .get("value")
                .and_then(Value::as_f64)
                .ok_or_else(|| err(&place, "missing or non-numeric \"value\""))?;
            let e = info.entry(name.to_string()).or_insert(ParamInfo {
                value: None,
                bounds: (
                    p.get("min")
                        .and_then(Value::as_f64)
                        .unwrap_or(f64::NEG_INFINITY),
                    p.get("max")
                        .and_then(Value::as_f64)
                        .unwrap_or(f64::INFINITY),
                ),
                constant: false,
            });
            e.value = Some(value);
            e.constant = p.get("const").and_then(Value::as_bool).unwrap_or(false);
        }
    }
    Ok(info)
}

/// A parameter as the document describes it.
#[derive(Debug, Clone)]
pub(crate) struct ParamInfo {
    pub(crate) value: Option<f64>,
    pub(crate) bounds: (f64, f64),
    pub(crate) constant: bool,
}

/// What a distribution contributes: ln f per event (varying), −ln of its factors that do not
/// depend on the events (constraints), and its expected count where extended.
struct Built {
    log_density: Id,
    constraint: Option<Id>,
    expected: Option<Id>,
    /// A mixture's summands with their coefficients, (name, c·f per event): extended they sum
    /// to the event density ν f, otherwise to f (yields divided by their sum). A product passes
    /// on those of its one factor over the events. Empty for other distributions.
    components: Vec<(String, Id)>,
}

struct Builder<'a> {
    doc: &'a Doc<'a>,
    g: Graph,
    params: Vec<String>,
    info: HashMap<String, ParamInfo>,
    /// Observables of the channel being built: name → (graph column, domain).
    observables: HashMap<String, (usize, Domain)>,
    columns: Vec<String>,
    funcs: HashMap<String, Id>,
    /// Templates of simulated events built in the channel: name → (ln f, total), shared by the
    /// distribution and its yield function.
    templates: HashMap<String, (Id, Id)>,
    /// Parameters a template interpolates by code 0: −ln L has a kink at 0 in them.
    kinked: Vec<usize>,
    /// Functions being built (a cycle is an error, not a stack overflow).
    building: Vec<String>,
    notes: Vec<String>,
    /// Global observables of constraint terms, with how toys draw them.
    globals: Vec<GlobalObservable>,
    /// The multivariate normal constraints' Cholesky factors and members.
    correlated: Vec<Correlated>,
    /// Constraint distributions whose term is in the likelihood already (built once here, or
    /// held by another part of it): a constraint two channels' products name (as ROOT writes a
    /// shared luminosity) is one term, as RooFit counts it.
    constrained: std::collections::HashSet<String>,
}

/// The most bins a `histfit_template_dist` may have.
const MAX_TEMPLATE_BINS: usize = 100_000;

/// How deeply distributions and functions may nest (a bound on recursion for hostile input).
const MAX_NESTING: usize = 200;

impl<'a> Builder<'a> {
    fn new(doc: &'a Doc<'a>, plan: &Plan) -> Result<Builder<'a>> {
        let info = parameter_info(doc.root)?;
        Ok(Builder {
            doc,
            g: Graph::new(),
            params: Vec::new(),
            info,
            observables: HashMap::new(),
            columns: Vec::new(),
            funcs: HashMap::new(),
            templates: HashMap::new(),
            kinked: Vec::new(),
            building: Vec::new(),
            notes: plan.notes.clone(),
            globals: Vec::new(),
            correlated: Vec::new(),
            constrained: plan.held.iter().cloned().collect(),
        })
    }

    fn build(mut self, plan: &Plan) -> Result<UnbinnedModel> {
        let mut channels = Vec::new();
        let mut constraints = Vec::new();
        let mut tables = Vec::new();
        for (dist, data) in &plan.pairs {
            let (table, observables, note) = self.events(data)?;
            self.notes.extend(note);
            // Functions are built anew per channel: what is an observable differs.
            self.observables.clear();
            self.funcs.clear();
            self.templates.clear();
            for Observable { name, lo, hi } in &observables {
                let j = match self.columns.iter().position(|c| c == name) {
                    Some(j) => j,
                    None => {
                        self.columns.push(name.clone());
                        self.columns.len() - 1
                    }
                };
                self.observables
                    .insert(name.clone(), (j, Domain { lo: *lo, hi: *hi }));
            }
            let built = self.distribution(dist, &format!("distribution \"{dist}\""))?;
            if !self.g.varying(built.log_density) {
                return Err(err(
                    format!("distribution \"{dist}\""),
                    format!(
                        "depends on none of the observables of dataset \"{data}\" ({})",
                        observables
                            .iter()
                            .map(|o| o.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            constraints.extend(built.constraint);
            let (event_term, yield_term, extended) = match built.expected {
                Some(nu) => {
                    let lnu = self.g.log(nu);
                    (self.g.add(built.log_density, lnu), nu, true)
                }
                None => (built.log_density, self.g.constant(0.0), false),
            };
            channels.push(ChannelSpec {
                name: dist.clone(),
                data: data.clone(),
                event_term,
                yield_term,
                extended,
                observables,
                components: built.components,
            });
            tables.push(table);
        }
        self.observables.clear();
        self.funcs.clear();
        self.templates.clear();
        let uses = self.doc.uses(plan);
        for name in &plan.aux {
            if self.constrained.contains(name) {
                continue;
            }
            let place = format!("aux distribution \"{name}\"");
            let b = self.distribution(name, &place)?;
            constraints.push(self.aux_term(name, b.log_density, &place, &uses)?);
            constraints.extend(b.constraint);
        }
        let constraint_term = self.g.sum(&constraints);
        let mut space = self.space(&plan.pois)?;
        self.set_priors_and_kinks(&mut space);
        let globals = std::mem::take(&mut self.globals);
        let correlated = std::mem::take(&mut self.correlated);
        let mut model = UnbinnedModel::new(
            self.g,
            space,
            self.columns,
            channels,
            constraint_term,
            Events { channels: tables },
            self.notes,
        );
        model.set_global_observables(globals, correlated);
        model.check_initial_point()?;
        model.set_curvature_scales();
        Ok(model)
    }

    /// A parameter that is itself the mean of a Gaussian constraint of fixed width (a member of a
    /// multivariate normal's, or a generalised normal's of fixed α and β) is a constrained
    /// nuisance parameter: centre its global observable, width the constraint's standard
    /// deviation — what the fit table's pulls, rankings and error breakdowns read. Parameters a
    /// template interpolates by code 0 are kinked (the fit treats a minimum at 0 as HistFactory
    /// fits do, and reports no curvature there).
    fn set_priors_and_kinks(&self, space: &mut ParameterSpace) {
        for &i in &self.kinked {
            space.kinked[i] = true;
        }
        for g in &self.globals {
            let crate::graph::Op::Param(i) = self.g.op(g.mean) else {
                continue;
            };
            // A width held fixed (a constant, or parameters ROOT marks constant) is known.
            let held = |id: Id| {
                self.g.needed(id).iter().all(|&k| match self.g.op(Id(k)) {
                    crate::graph::Op::Param(j) => space.fixed[j],
                    crate::graph::Op::Column(_) => false,
                    _ => true,
                })
            };
            let width = match g.draw {
                Draw::Gaussian { sigma } if held(sigma) => {
                    Some(self.g.value(sigma, &space.init, &[]))
                }
                Draw::Correlated { group, row } => {
                    let c = &self.correlated[group];
                    let n = c.members.len();
                    Some(
                        (0..=row)
                            .map(|j| c.chol[row * n + j].powi(2))
                            .sum::<f64>()
                            .sqrt(),
                    )
                }
                // Its standard deviation, α √(Γ(3/β)/Γ(1/β)).
                Draw::GeneralizedNormal { alpha, beta } if held(alpha) && held(beta) => {
                    let a = self.g.value(alpha, &space.init, &[]);
                    let b = self.g.value(beta, &space.init, &[]);
                    Some(a * (0.5 * (libm::lgamma(3.0 / b) - libm::lgamma(1.0 / b))).exp())
                }
                _ => None,
            };
            if let Some(width) = width.filter(|w| *w > 0.0 && w.is_finite()) {
                space.priors[i] = Prior::Gauss {
                    centre: space.init[g.param],
                    width,
                };
            }
        }
    }

    fn space(&self, pois: &[String]) -> Result<ParameterSpace> {
        let n = self.params.len();
        let mut init = Vec::with_capacity(n);
        let mut bounds = Vec::with_capacity(n);
        let mut fixed = Vec::with_capacity(n);
        for name in &self.params {
            let i = self.info.get(name).cloned().unwrap_or(ParamInfo {
                value: None,
                bounds: (f64::NEG_INFINITY, f64::INFINITY),
                constant: false,
            });
            let value = match i.value {
                Some(v) => v,
                None if i.bounds.0.is_finite() && i.bounds.1.is_finite() => {
                    0.5 * (i.bounds.0 + i.bounds.1)
                }
                None => return Err(err(
                    format!("parameter \"{name}\""),
                    "used but never defined: no value in parameter_points and no bounded domain",
                )),
            };
            init.push(value);
            bounds.push(i.bounds);
            fixed.push(i.constant);
        }
        let poi = match pois.first() {
            Some(p) => Some(self.params.iter().position(|n| n == p).ok_or_else(|| {
                err(
                    "analyses",
                    format!("parameter of interest \"{p}\" is not a parameter of the likelihood"),
                )
            })?),
            None => None,
        };
        Ok(ParameterSpace {
            names: self.params.clone(),
            init,
            bounds,
            fixed,
            poi,
            priors: vec![Prior::Free; n],
            scales: vec![1.0; n],
            kinked: vec![false; n],
            local_term: vec![None; n],
            curvature_units: false,
        })
    }

    /// The events of dataset `name`, its observables with their domains, and what reading them
    /// left out (events dropped outside the domains), to be said.
    fn events(&self, name: &str) -> Result<(EventTable, Vec<Observable>, Option<String>)> {
        let (i, d) = self
            .doc
            .data
            .get(name)
            .ok_or_else(|| err(format!("data \"{name}\""), "no dataset of that name"))?;
        let place = format!("data[{i}] (\"{name}\")");
        let kind = d.get("type").and_then(Value::as_str).unwrap_or("");
        if kind != "unbinned" {
            return Err(err(
                &place,
                format!("type \"{kind}\": only unbinned data are read so far"),
            ));
        }
        let observables = axes(d, &place)?;
        if let Some((_, table)) = self.doc.supplied.iter().find(|(n, _)| n == name) {
            let table = supplied_events(table, &observables, &format!("events[\"{name}\"]"))?;
            let note = format!(
                "dataset \"{name}\": {} events given by the caller",
                table.len()
            );
            return Ok((table, observables, Some(note)));
        }
        match d.get("histfit_source") {
            Some(source) => {
                if d.get("entries").is_some() {
                    return Err(err(
                        &place,
                        "both \"entries\" and \"histfit_source\": the events come from one of them",
                    ));
                }
                let spec = source_spec(
                    source,
                    &observables,
                    self.doc.directory.as_deref(),
                    &format!("{place}.histfit_source"),
                )?;
                let at = format!("{place}.histfit_source");
                let (table, note) = match spec {
                    Source::Parquet(spec) => {
                        let loaded = histfit_events::read_parquet(&spec)
                            .map_err(|e| err(&at, e.to_string()))?;
                        let note = (loaded.dropped > 0).then(|| {
                            format!(
                                "dataset \"{name}\": {} events outside the domains dropped ({} row groups and {} rows of pages not read), {} kept",
                                loaded.dropped,
                                loaded.row_groups_skipped,
                                loaded.page_rows_skipped,
                                loaded.table.len()
                            )
                        });
                        (loaded.table, note)
                    }
                    Source::Tree(src) => {
                        let read = crate::tree_source::read(&src).map_err(|e| {
                            let key = if e.key.is_empty() {
                                at.clone()
                            } else {
                                format!("{at}.{}", e.key)
                            };
                            err(key, e.rule)
                        })?;
                        let note = (read.not_selected + read.dropped > 0).then(|| {
                            format!(
                                "dataset \"{name}\": {} of {} entries of tree \"{}\" kept ({} not selected, {} outside the domains dropped)",
                                read.table.len(),
                                read.table.len() + read.not_selected + read.dropped,
                                src.tree,
                                read.not_selected,
                                read.dropped
                            )
                        });
                        (read.table, note)
                    }
                };
                if table.is_empty() {
                    return Err(err(at, "no event is left (selection and domains)"));
                }
                Ok((table, observables, note))
            }
            None => Ok((inline_events(d, &observables, &place)?, observables, None)),
        }
    }

    /// The node of a name used as a value: a number, an observable, a function or a parameter.
    fn value(&mut self, name: &str, place: &str) -> Result<Id> {
        if let Ok(v) = name.trim().parse::<f64>() {
            return Ok(self.g.constant(v));
        }
        if let Some(&(j, _)) = self.observables.get(name) {
            return Ok(self.g.column(j));
        }
        if let Some(&id) = self.funcs.get(name) {
            return Ok(id);
        }
        if let Some(&(i, f)) = self.doc.funcs.get(name) {
            if self.building.iter().any(|b| b == name) {
                return Err(err(
                    format!("functions[{i}] (\"{name}\")"),
                    "refers to itself through other functions",
                ));
            }
            if self.building.len() > MAX_NESTING {
                return Err(err(
                    format!("functions[{i}] (\"{name}\")"),
                    format!("nested more than {MAX_NESTING} deep"),
                ));
            }
            self.building.push(name.to_string());
            let id = self.function(i, f, name);
            self.building.pop();
            let id = id?;
            self.funcs.insert(name.to_string(), id);
            return Ok(id);
        }
        if self.doc.dists.contains_key(name) {
            return Err(err(
                place,
                format!("\"{name}\" is a distribution where a value is expected"),
            ));
        }
        // π and e where nothing of the document defines the name (TFormula's pi and e).
        if !self.info.contains_key(name) {
            match name {
                "pi" | "Pi" | "TMath::Pi" => return Ok(self.g.constant(std::f64::consts::PI)),
                "e" | "E" | "TMath::E" => return Ok(self.g.constant(std::f64::consts::E)),
                _ => {}
            }
        }
        let i = match self.params.iter().position(|p| p == name) {
            Some(i) => i,
            None => {
                // Said here, where it is used, before anything is built on it (a generic
                // PDF's quadrature, say).
                let defined = self.info.get(name).is_some_and(|i| {
                    i.value.is_some() || (i.bounds.0.is_finite() && i.bounds.1.is_finite())
                });
                if !defined {
                    return Err(err(
                        format!("parameter \"{name}\" (in {place})"),
                        "used but never defined: no value in parameter_points and no bounded domain",
                    ));
                }
                self.params.push(name.to_string());
                self.params.len() - 1
            }
        };
        Ok(self.g.param(i))
    }

    fn function(&mut self, i: usize, f: &Value, name: &str) -> Result<Id> {
        let place = format!("functions[{i}] (\"{name}\")");
        let kind = str_field(f, "type", &place)?;
        match kind {
            // `generic`: the name in the HS3 test suite's documents (written by ROOT 6.41).
            "generic_function" | "generic" => {
                let text = str_field(f, "expression", &place)?;
                self.expression(text, &place)
            }
            "polynomial" => {
                // Σ_k c_k x^k from k = 0 (HS3's polynomial; RooPolyVar of lowest order 0 — ROOT
                // writes a higher lowest order as leading coefficients 1, 0, …, which read
                // here as that polynomial's terms), by Horner's rule.
                let x = str_field(f, "x", &place)?;
                let x = self.value(x, &format!("{place}.x"))?;
                let cs = names(f, "coefficients", &place)?;
                let Some((last, rest)) = cs.split_last() else {
                    return Err(err(
                        format!("{place}.coefficients"),
                        "missing or empty: a polynomial needs at least one coefficient",
                    ));
                };
                let mut acc = self.value(last, &format!("{place}.coefficients[{}]", rest.len()))?;
                for (k, c) in rest.iter().enumerate().rev() {
                    let c = self.value(c, &format!("{place}.coefficients[{k}]"))?;
                    acc = self.g.fma(acc, x, c);
                }
                Ok(acc)
            }
            "sum" | "product" => {
                let items = names(
                    f,
                    if kind == "sum" { "summands" } else { "factors" },
                    &place,
                )?;
                let mut ids = Vec::new();
                for it in &items {
                    ids.push(self.value(it, &place)?);
                }
                Ok(if kind == "sum" {
                    self.g.sum(&ids)
                } else {
                    ids.iter().skip(1).fold(
                        ids.first().copied().unwrap_or_else(|| self.g.constant(1.0)),
                        |a, &b| self.g.mul(a, b),
                    )
                })
            }
            "histfit_template_yield" => {
                // The morphed sum of a template's weights: a process's yield that follows its
                // simulated events through their weight systematics.
                let t = str_field(f, "template", &place)?;
                let &(j, d) = self.doc.dists.get(t).ok_or_else(|| {
                    err(
                        format!("{place}.template"),
                        format!("no distribution named \"{t}\""),
                    )
                })?;
                if d.get("type").and_then(Value::as_str) != Some("histfit_template_dist") {
                    return Err(err(
                        format!("{place}.template"),
                        format!("\"{t}\" is not a histfit_template_dist"),
                    ));
                }
                Ok(self
                    .template(t, d, &format!("distributions[{j}] (\"{t}\")"))?
                    .1)
            }
            other => Err(err(
                format!("{place}.type"),
                format!("unknown function type \"{other}\""),
            )),
        }
    }

    fn expression(&mut self, text: &str, place: &str) -> Result<Id> {
        let mut g = std::mem::take(&mut self.g);
        let r = crate::expr::parse(&mut g, text, &mut |g, n| {
            // The parser holds the graph: lend it back for the name's own nodes.
            std::mem::swap(&mut self.g, g);
            let v = self.value(n, place);
            std::mem::swap(&mut self.g, g);
            v.map_err(|e| e.to_string())
        });
        self.g = g;
        r.map_err(|pe| err(format!("{place}.expression"), format!("\"{text}\" {pe}")))
    }

    /// The observable a distribution's `key` names, with its domain.
    fn observable(&mut self, d: &Value, keys: &[&str], place: &str) -> Result<(Id, Domain)> {
        let name = keys
            .iter()
            .find_map(|k| match d.get(*k) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Array(a)) => a.first().and_then(Value::as_str).map(str::to_string),
                _ => None,
            })
            .ok_or_else(|| err(place, format!("missing \"{}\"", keys[0])))?;
        if let Some(&(j, dom)) = self.observables.get(&name) {
            return Ok((self.g.column(j), dom));
        }
        // Not an observable of the data: a constraint's global observable or parameter,
        // normalised over its domain.
        let id = self.value(&name, place)?;
        let b = self
            .info
            .get(&name)
            .map(|i| i.bounds)
            .unwrap_or((f64::NEG_INFINITY, f64::INFINITY));
        Ok((id, Domain { lo: b.0, hi: b.1 }))
    }

    fn param_of(&mut self, d: &Value, keys: &[&str], place: &str) -> Result<Id> {
        let name = keys
            .iter()
            .find_map(|k| match d.get(*k) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            })
            .ok_or_else(|| err(place, format!("missing \"{}\"", keys[0])))?;
        self.value(&name, place)
    }

    fn coefficients(&mut self, d: &Value, place: &str) -> Result<Vec<Id>> {
        let cs = names(d, "coefficients", place)?;
        if cs.is_empty() && !matches!(d["type"].as_str(), Some("chebychev_dist")) {
            return Err(err(place, "no coefficients: the density would be 0"));
        }
        cs.iter().map(|c| self.value(c, place)).collect()
    }

    fn distribution(&mut self, name: &str, from: &str) -> Result<Built> {
        let &(i, d) = self
            .doc
            .dists
            .get(name)
            .ok_or_else(|| err(from, format!("no distribution named \"{name}\"")))?;
        let place = format!("distributions[{i}] (\"{name}\")");
        if self.building.iter().any(|b| b == name) {
            return Err(err(place, "contains itself"));
        }
        if self.building.len() > MAX_NESTING {
            return Err(err(place, format!("nested more than {MAX_NESTING} deep")));
        }
        self.building.push(name.to_string());
        let r = self.distribution_of(d, &place);
        self.building.pop();
        r
    }

    fn simple(log_density: Id) -> Built {
        Built {
            components: Vec::new(),
            log_density,
            constraint: None,
            expected: None,
        }
    }

    fn distribution_of(&mut self, d: &Value, place: &str) -> Result<Built> {
        let kind = str_field(d, "type", place)?;
        let p = place;
        Ok(match kind {
            "gaussian_dist" | "normal_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let mu = self.param_of(d, &["mean", "mu"], p)?;
                let s = self.param_of(d, &["sigma"], p)?;
                Builder::simple(pdf::gaussian(&mut self.g, x, mu, s, dom))
            }
            "bifurkated_gaussian_dist" | "bifurcated_gaussian_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let mu = self.param_of(d, &["mean"], p)?;
                let sl = self.param_of(d, &["sigmaL", "sigma_L"], p)?;
                let sr = self.param_of(d, &["sigmaR", "sigma_R"], p)?;
                Builder::simple(pdf::bifurcated_gaussian(&mut self.g, x, mu, sl, sr, dom))
            }
            "exponential_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let c = self.param_of(d, &["c"], p)?;
                Builder::simple(pdf::exponential(&mut self.g, x, c, dom))
            }
            "uniform_dist" => {
                let (_, dom) = self.observable(d, &["x"], p)?;
                Builder::simple(pdf::uniform(&mut self.g, dom))
            }
            "polynomial_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let cs = self.coefficients(d, p)?;
                Builder::simple(pdf::polynomial(&mut self.g, x, &cs, dom))
            }
            "chebychev_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let cs = self.coefficients(d, p)?;
                Builder::simple(pdf::chebychev(&mut self.g, x, &cs, dom))
            }
            "bernstein_poly_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let cs = self.coefficients(d, p)?;
                Builder::simple(pdf::bernstein(&mut self.g, x, &cs, dom))
            }
            "crystalball_dist" if d.get("alpha_L").is_some() => self.double_cb(d, p)?,
            "crystalball_doublesided_dist" => self.double_cb(d, p)?,
            "crystalball_dist" => {
                let (x, dom) = self.observable(d, &["m", "x"], p)?;
                let m0 = self.param_of(d, &["m0"], p)?;
                let s = self.param_of(d, &["sigma"], p)?;
                let a = self.param_of(d, &["alpha"], p)?;
                let n = self.param_of(d, &["n"], p)?;
                Builder::simple(pdf::crystal_ball(&mut self.g, x, m0, s, a, n, dom))
            }
            "lognormal_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                if dom.lo.is_nan() || dom.lo <= 0.0 {
                    return Err(err(
                        p,
                        format!("a log-normal density over [{}, {}]: its observable's range must lie above 0", dom.lo, dom.hi),
                    ));
                }
                let mu = self.param_of(d, &["mu"], p)?;
                let s = self.param_of(d, &["sigma"], p)?;
                Builder::simple(pdf::lognormal(&mut self.g, x, mu, s, dom))
            }
            "generalized_normal_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let mu = self.param_of(d, &["mean", "mu"], p)?;
                let alpha = self.param_of(d, &["alpha"], p)?;
                let beta = self.param_of(d, &["beta"], p)?;
                Builder::simple(pdf::generalized_normal(
                    &mut self.g,
                    x,
                    mu,
                    alpha,
                    beta,
                    dom,
                ))
            }
            "landau_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let mu = self.param_of(d, &["mean", "mu"], p)?;
                let s = self.param_of(d, &["sigma"], p)?;
                Builder::simple(pdf::landau(&mut self.g, x, mu, s, dom))
            }
            "histfit_spline_dist" => Builder::simple(self.spline(d, p)?),
            "histfit_kde_dist" => Builder::simple(self.kde(d, p)?),
            kind if RESOLUTION_MODELS.contains(&kind) => {
                return Err(err(
                    format!("{p}.type"),
                    format!("\"{kind}\" is a resolution model, not a density of events: a decay_dist convolves with it (its resolutionModel)"),
                ));
            }
            "decay_dist" => {
                let (t, dom) = self.observable(d, &["t", "x"], p)?;
                let tau = self.param_of(d, &["tau"], p)?;
                let basis = match d.get("decayType") {
                    None => pdf::DecayBasis::SingleSided,
                    Some(v) => match v.as_u64() {
                        Some(0) => pdf::DecayBasis::SingleSided,
                        Some(1) => pdf::DecayBasis::DoubleSided,
                        Some(2) => pdf::DecayBasis::Flipped,
                        _ => {
                            return Err(err(
                                format!("{p}.decayType"),
                                "0 (single-sided), 1 (double-sided) or 2 (flipped) is needed",
                            ))
                        }
                    },
                };
                let model = str_field(d, "resolutionModel", p)?.to_string();
                let t_name = d
                    .get("t")
                    .or_else(|| d.get("x"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let models = self.resolution_models(&model, t_name, p, 0)?;
                Builder::simple(pdf::decay(&mut self.g, t, tau, basis, &models, dom))
            }
            "relativistic_breit_wigner_dist" => {
                let (x, dom) = self.observable(d, &["x", "m"], p)?;
                let mass = self.param_of(d, &["mass"], p)?;
                let channels = self.bw_channels(d, p)?;
                let log_shape =
                    pdf::relativistic_breit_wigner_log_shape(&mut self.g, x, mass, &channels);
                let Op::Column(j) = self.g.op(x) else {
                    return Err(err(p, "the observable \"x\" is not an axis of the data: a Breit–Wigner is a density of its events"));
                };
                // Each channel's threshold inside the range: where its width starts to grow.
                let onsets: Vec<f64> = channels.iter().map(|c| c.m1 + c.m2).collect();
                Builder::simple(self.normalised_over(log_shape, (j, dom), &onsets, p).0)
            }
            "histfit_voigtian_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let mu = self.param_of(d, &["mean"], p)?;
                let width = self.param_of(d, &["width"], p)?;
                let sigma = self.param_of(d, &["sigma"], p)?;
                let init = self.current_values();
                let at = |id: Id| self.g.value(id, &init, &[]);
                let (m0, w0, s0) = (at(mu), at(width), at(sigma));
                let (l, _, acc) = pdf::normalised_by_quadrature(
                    &mut self.g,
                    x,
                    dom,
                    &[],
                    QUADRATURE_TOLERANCE,
                    VOIGTIAN_COST,
                    &|v| pdf::voigtian_log_shape_at(v, m0, w0, s0),
                    &mut |g: &mut Graph, at: Id| pdf::voigtian_log_shape(g, at, mu, width, sigma),
                );
                self.quadrature_note(p, acc);
                Builder::simple(l)
            }
            "rate_extended_dist" => {
                // HS3's Poisson point process: the underlying distribution with its global rate
                // as the expected count.
                // HS3's keys, and those ROOT's importer (pdf, norm) and others read.
                let inner = ["dist", "pdf", "distribution"]
                    .iter()
                    .find_map(|k| d.get(*k).and_then(Value::as_str))
                    .ok_or_else(|| err(p, "missing \"dist\" (the underlying distribution)"))?;
                let rate = self.param_of(d, &["rate", "norm"], p)?;
                let mut b = self.distribution(inner, p)?;
                if b.expected.is_some() {
                    return Err(err(
                        format!("{p}.dist"),
                        format!("\"{inner}\" is itself extended: its rate would be given twice"),
                    ));
                }
                for (_, c) in b.components.iter_mut() {
                    *c = self.g.mul(*c, rate);
                }
                b.expected = Some(rate);
                b
            }
            "ARGUS_dist" | "argus_dist" => {
                let (m, dom) = self.observable(d, &["mass", "m", "x"], p)?;
                let m0 = self.param_of(d, &["resonance", "m0"], p)?;
                let c = self.param_of(d, &["slope", "c"], p)?;
                let pw = self.param_of(d, &["power", "p"], p)?;
                Builder::simple(pdf::argus(&mut self.g, m, m0, c, pw, dom))
            }
            "generic_dist" => {
                let text = str_field(d, "expression", p)?.to_string();
                let x = self.only_observable(&text, p)?;
                let shape = self.expression(&text, p)?;
                let log_shape = self.g.log(shape);
                Builder::simple(self.normalised_over(log_shape, x, &[], place).0)
            }
            "efficiency_product_pdf_dist" => {
                // RooEffProd: a density times an efficiency function of its observable,
                // normalised again over the observable's range (by quadrature).
                let pdf_name = str_field(d, "pdf", p)?.to_string();
                let eff = str_field(d, "eff", p)?.to_string();
                let b = self.distribution(&pdf_name, p)?;
                if b.expected.is_some() || b.constraint.is_some() {
                    return Err(err(
                        format!("{p}.pdf"),
                        "an extended or constrained density: an efficiency multiplies a plain density",
                    ));
                }
                let e = self.value(&eff, &format!("{p}.eff"))?;
                let log_e = self.g.log(e);
                let log_shape = self.g.add(b.log_density, log_e);
                // The one observable the product is over: the columns its graph reads.
                let columns = self.columns_read(log_shape);
                let &[j] = columns.as_slice() else {
                    return Err(err(
                        p,
                        format!("the density and the efficiency read {} of the data's observables: an efficiency product over one observable is read", columns.len()),
                    ));
                };
                let Some(&(_, dom)) = self.observables.values().find(|o| o.0 == j) else {
                    return Err(err(p, "its observable is not an axis of the data"));
                };
                Builder::simple(self.normalised_over(log_shape, (j, dom), &[], place).0)
            }
            "product_dist" => {
                let factors = names(d, "factors", p)?;
                let mut logs = Vec::new();
                let mut constraints = Vec::new();
                let mut expected = None;
                // The components of the one factor over the events (a mixture times its
                // constraints, as ROOT exports constrained models): the plot draws them.
                let mut over_events = Vec::new();
                for f in &factors {
                    // A constraint counted already (another channel's, or the binned part's).
                    if self.constrained.contains(f) {
                        continue;
                    }
                    let b = self.distribution(f, p)?;
                    // A factor over an axis of the data is a density over the events even
                    // where it is flat there (a constant polynomial, RooFit's rf311): only a
                    // factor over none of them is a constraint.
                    if self.g.varying(b.log_density) || self.over_data_axis(f) {
                        logs.push(b.log_density);
                        over_events.push(b.components);
                    } else {
                        constraints.push(self.constraint(f, b.log_density, p)?);
                    }
                    constraints.extend(b.constraint);
                    if let Some(nu) = b.expected {
                        if expected.is_some() {
                            return Err(err(p, "two extended factors in one product"));
                        }
                        expected = Some(nu);
                    }
                }
                let log_density = self.g.sum(&logs);
                let components = match over_events.len() {
                    1 => over_events.pop().unwrap_or_default(),
                    _ => Vec::new(),
                };
                Built {
                    log_density,
                    constraint: (!constraints.is_empty()).then(|| self.g.sum(&constraints)),
                    expected,
                    components,
                }
            }
            "gamma_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let gamma = self.param_of(d, &["gamma"], p)?;
                let beta = self.param_of(d, &["beta"], p)?;
                let mu = self.param_of(d, &["mu"], p)?;
                Builder::simple(pdf::gamma(&mut self.g, x, gamma, beta, mu, dom))
            }
            "power_sum_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let cs = self.coefficients(d, p)?;
                let es = names(d, "exponents", p)?;
                if es.len() != cs.len() {
                    return Err(err(
                        p,
                        format!(
                            "{} coefficients for {} exponents (one each is needed)",
                            cs.len(),
                            es.len()
                        ),
                    ));
                }
                if !(dom.lo > 0.0 && dom.hi.is_finite() && dom.hi > dom.lo) {
                    return Err(err(
                        p,
                        format!("a power-law sum over [{}, {}]: its observable's range must lie above 0 and be finite", dom.lo, dom.hi),
                    ));
                }
                let es = es
                    .iter()
                    .enumerate()
                    .map(|(k, e)| self.value(e, &format!("{p}.exponents[{k}]")))
                    .collect::<Result<Vec<_>>>()?;
                Builder::simple(pdf::power_sum(&mut self.g, x, &cs, &es, dom))
            }
            "legacy_exp_poly_dist" => {
                let (x, dom) = self.observable(d, &["x"], p)?;
                let cs = self.coefficients(d, p)?;
                if cs.len() <= 2 {
                    Builder::simple(pdf::exp_linear(&mut self.g, x, &cs, dom))
                } else {
                    let Op::Column(j) = self.g.op(x) else {
                        return Err(err(p, "the observable \"x\" is not an axis of the data: an exponential of a polynomial is a density of its events"));
                    };
                    let log_shape = pdf::exp_poly_log_shape(&mut self.g, x, &cs);
                    Builder::simple(self.normalised_over(log_shape, (j, dom), &[], p).0)
                }
            }
            "weighted_sum_dist" => self.weighted_sum(d, p)?,
            "fft_conv_pdf" | "fft_convolution_dist" => self.convolution(d, p)?,
            "mixture_dist" => self.mixture(d, p)?,
            "poisson_dist" => {
                // ln P(k | λ) = k ln λ − λ − ln Γ(k + 1), normalised over every count. ROOT's
                // "integer" (k rounded down) changes nothing for the counts data and toys hold.
                let name = d.get("x").and_then(Value::as_str).unwrap_or_default();
                if self.observables.contains_key(name) {
                    return Err(err(
                        format!("{p}.x"),
                        format!("\"{name}\" is an observable of the data: a Poisson distribution over events is not read yet (as a constraint on a global observable it is)"),
                    ));
                }
                let (k, _) = self.observable(d, &["x"], p)?;
                let lambda = self.param_of(d, &["mean"], p)?;
                let ln_lambda = self.g.log(lambda);
                let k_ln = self.g.mul(k, ln_lambda);
                let one = self.g.constant(1.0);
                let k1 = self.g.add(k, one);
                let ln_fact = self.g.lgamma(k1);
                let t = self.g.sub(k_ln, lambda);
                Builder::simple(self.g.sub(t, ln_fact))
            }
            "histogram_dist" => Builder::simple(self.histogram(d, p)?),
            "histfit_template_dist" => {
                let name = str_field(d, "name", p)?.to_string();
                Builder::simple(self.template(&name, d, p)?.0)
            }
            "multivariate_normal_dist" => {
                let mvn = self.multivariate_normal(d, p)?;
                Builder::simple(mvn.log_density)
            }
            other => {
                return Err(err(
                    format!("{p}.type"),
                    format!("unknown or not yet supported distribution type \"{other}\""),
                ))
            }
        })
    }

    /// Whether distribution `name` declares an axis of the data as its observable (`x`, `m` or
    /// `mass`; any entry of an `x` list).
    fn over_data_axis(&self, name: &str) -> bool {
        let Some(&(_, d)) = self.doc.dists.get(name) else {
            return false;
        };
        ["x", "m", "mass"].iter().any(|k| match d.get(*k) {
            Some(Value::String(s)) => self.observables.contains_key(s.as_str()),
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .any(|s| self.observables.contains_key(s)),
            _ => false,
        })
    }

    /// −ln of a likelihood's auxiliary distribution: a constraint term ([`Self::constraint`]),
    /// or a prior — a distribution over parameters of the model itself (a hierarchical model's
    /// hyper-prior, a calibration's spread): every observable it names is a free parameter, not
    /// an axis of the likelihood's data, that another of the likelihood's distributions or the
    /// functions they name uses. Its term is its density at the
    /// parameters' values, normalised over their domains as any distribution over a non-data
    /// variable is ([`Self::observable`]); it is fitted with the rest and neither toys nor the
    /// Asimov dataset draw anything for it. A free variable that nothing else uses stays an
    /// error: it is a global observable the file forgot to mark constant, and taking its
    /// constraint for a prior would let the fit move the measurement away.
    fn aux_term(&mut self, name: &str, log_density: Id, place: &str, uses: &Uses) -> Result<Id> {
        let (_, d) = self.doc.dists[name];
        let xs = observable_names(d);
        let free_and_used = |b: &Self, x: &str| {
            b.info.get(x).is_some_and(|p| !p.constant)
                && !uses.axes.iter().any(|a| a == x)
                && uses
                    .by
                    .iter()
                    .any(|(n, refs)| n != name && refs.iter().any(|r| r == x))
        };
        if xs.is_empty() || !xs.iter().all(|x| free_and_used(self, x)) {
            return self.constraint(name, log_density, place);
        }
        self.constrained.insert(name.to_string());
        self.notes.push(format!(
            "{place}: a prior on {} (parameters of the model, not global observables): its density at their values is a term of the likelihood",
            xs.iter().map(|x| format!("\"{x}\"")).collect::<Vec<_>>().join(", ")
        ));
        Ok(self.g.neg(log_density))
    }

    /// −ln of a distribution that depends on no observable of the data: a constraint term,
    /// which it is only where its own observable is a constant (a global observable, as ROOT
    /// writes them) — else the data lack an axis the distribution needs, which is an error.
    /// A Gaussian constraint's global observable is recorded so that toys can draw it and the
    /// Asimov dataset can set it.
    fn constraint(&mut self, name: &str, log_density: Id, place: &str) -> Result<Id> {
        self.constrained.insert(name.to_string());
        let (i, d) = self.doc.dists[name];
        let xs = observable_names(d);
        let x = xs.first().cloned().unwrap_or_default();
        let global = !xs.is_empty()
            && xs
                .iter()
                .all(|x| self.info.get(x).is_some_and(|p| p.constant));
        if !global {
            return Err(err(
                format!("distributions[{i}] (\"{name}\"), in {place}"),
                format!(
                    "depends on none of the data's observables, and its observable \"{x}\" is not a constant (a constraint's global observable): the dataset lacks the axis \"{x}\""
                ),
            ));
        }
        let param = |b: &Self, x: &str| {
            b.params
                .iter()
                .position(|n| n == x)
                .filter(|&i| !b.globals.iter().any(|g| g.param == i))
        };
        let kind = d["type"].as_str().unwrap_or("?");
        if matches!(kind, "gaussian_dist" | "normal_dist") {
            let mean = self.param_of(d, &["mean", "mu"], place)?;
            let sigma = self.param_of(d, &["sigma"], place)?;
            if let Some(param) = param(self, &x) {
                self.globals.push(GlobalObservable {
                    param,
                    mean,
                    draw: Draw::Gaussian { sigma },
                });
            }
        } else if kind == "poisson_dist" {
            let mean = self.param_of(d, &["mean"], place)?;
            if let Some(param) = param(self, &x) {
                self.globals.push(GlobalObservable {
                    param,
                    mean,
                    draw: Draw::Poisson,
                });
            }
        } else if kind == "generalized_normal_dist" {
            let mean = self.param_of(d, &["mean", "mu"], place)?;
            let alpha = self.param_of(d, &["alpha"], place)?;
            let beta = self.param_of(d, &["beta"], place)?;
            if let Some(param) = param(self, &x) {
                self.globals.push(GlobalObservable {
                    param,
                    mean,
                    draw: Draw::GeneralizedNormal { alpha, beta },
                });
            }
        } else if kind == "multivariate_normal_dist" {
            let mvn = self.multivariate_normal(d, place)?;
            let members: Option<Vec<usize>> = xs.iter().map(|x| param(self, x)).collect();
            // A global observable already drawn by another constraint keeps that one's draw;
            // the group is then not drawn at all, and says so.
            if members.is_none() {
                self.notes.push(format!(
                    "{place}: the global observables of the multivariate normal constraint \"{name}\" ({}) are held at their observed values in toys and the Asimov dataset: one of them is also another constraint's",
                    xs.join(", ")
                ));
            }
            if let Some(members) = members {
                let group = self.correlated.len();
                let first = self.globals.len();
                for (row, (&param, &mean)) in members.iter().zip(&mvn.means).enumerate() {
                    self.globals.push(GlobalObservable {
                        param,
                        mean,
                        draw: Draw::Correlated { group, row },
                    });
                }
                self.correlated.push(Correlated {
                    chol: mvn.chol,
                    members: (first..first + members.len()).collect(),
                });
            }
        } else {
            self.notes.push(format!(
                "{place}: \"{x}\", the global observable of the {} constraint \"{name}\", is held at its observed value in toys and the Asimov dataset",
                d["type"].as_str().unwrap_or("?")
            ));
        }
        Ok(self.g.neg(log_density))
    }

    /// A multivariate normal N(x | μ, Σ) over constants (a constraint's global observables):
    /// −½ yᵀy − Σ ln L_ii − (n/2) ln 2π with L y = x − μ, L the Cholesky factor of Σ, which must
    /// be symmetric and positive definite. Normalised over the whole space, as RooFit's
    /// `RooMultiVarGaussian` is: a domain box that cuts off mass is not accounted for. Over
    /// the data's observables it is not read yet.
    fn multivariate_normal(&mut self, d: &Value, p: &str) -> Result<Mvn> {
        let xs = names(d, "x", p)?;
        let n = xs.len();
        if n == 0 {
            return Err(err(format!("{p}.x"), "no observables"));
        }
        if let Some(x) = xs.iter().find(|x| self.observables.contains_key(*x)) {
            return Err(err(
                format!("{p}.x"),
                format!("\"{x}\" is an observable of the data: a multivariate normal over events is not read yet (as a constraint on global observables it is)"),
            ));
        }
        let means: Vec<Id> = match d.get("mean") {
            Some(Value::Array(a)) if a.len() == n => a
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => self.value(s, p),
                    Value::Number(x) => Ok(self.g.constant(x.as_f64().unwrap_or(f64::NAN))),
                    _ => Err(err(format!("{p}.mean[{i}]"), "expected a name or a number")),
                })
                .collect::<Result<_>>()?,
            _ => {
                return Err(err(
                    format!("{p}.mean"),
                    format!("expected a list of {n} means"),
                ))
            }
        };
        let cov = covariance(d.get("covariances"), n, &format!("{p}.covariances"))?;
        let chol = cholesky(&cov, n)
            .ok_or_else(|| err(format!("{p}.covariances"), "not positive definite"))?;
        let mut ys: Vec<Id> = Vec::with_capacity(n);
        let mut log_density = self
            .g
            .constant(-0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln());
        for i in 0..n {
            let x = self.value(&xs[i], p)?;
            let mut r = self.g.sub(x, means[i]);
            for (j, &y) in ys.iter().enumerate() {
                let t = self.g.scale(y, chol[i * n + j]);
                r = self.g.sub(r, t);
            }
            let y = self.g.scale(r, 1.0 / chol[i * n + i]);
            ys.push(y);
            let y2 = self.g.powi(y, 2);
            let half = self.g.scale(y2, -0.5);
            let c = self.g.constant(-chol[i * n + i].ln());
            let term = self.g.add(half, c);
            log_density = self.g.add(log_density, term);
        }
        Ok(Mvn {
            log_density,
            means,
            chol,
        })
    }

    /// A histogram's density over one observable of the data, as ROOT's `RooHistPdf`: each
    /// bin's content spread evenly over its width, normalised over the observable's domain
    /// (the overlap of each bin with it); 0 outside the histogram's edges. The axis has `edges`,
    /// or `min`, `max` and `nbins`.
    /// `histfit_spline_dist`: a cubic spline through `knots` and `values` (non-negative numbers),
    /// `"interpolation"` `"pchip"` (default: monotone between knots, never below 0) or
    /// `"natural"` (twice differentiable; refused where it dips below 0 in the domain), 0 outside
    /// its knots, normalised over the domain exactly.
    fn spline(&mut self, d: &Value, p: &str) -> Result<Id> {
        let (x, dom) = self.observable(d, &["x"], p)?;
        let list = |key: &str| -> Result<Vec<f64>> {
            d.get(key)
                .and_then(Value::as_array)
                .and_then(|a| a.iter().map(Value::as_f64).collect::<Option<Vec<f64>>>())
                .filter(|v| v.iter().all(|x| x.is_finite()))
                .ok_or_else(|| err(format!("{p}.{key}"), "expected a list of finite numbers"))
        };
        let (knots, values) = (list("knots")?, list("values")?);
        if knots.len() < 2 || knots.len() != values.len() {
            return Err(err(
                p,
                format!(
                    "{} knots and {} values: a spline needs as many values as knots, at least 2",
                    knots.len(),
                    values.len()
                ),
            ));
        }
        if knots.windows(2).any(|w| w[1] <= w[0]) {
            return Err(err(format!("{p}.knots"), "knots must increase"));
        }
        if let Some(k) = values.iter().position(|&v| v < 0.0) {
            return Err(err(
                format!("{p}.values[{k}]"),
                format!("{}: a density is not negative", values[k]),
            ));
        }
        let pieces = match d.get("interpolation").map(|v| v.as_str()) {
            None | Some(Some("pchip")) => crate::smooth::pchip(&knots, &values),
            Some(Some("natural")) => crate::smooth::cubic_spline(&knots, &values, None),
            _ => {
                return Err(err(
                    format!("{p}.interpolation"),
                    "expected \"pchip\" or \"natural\"",
                ))
            }
        };
        if let Some((min, k)) = crate::smooth::minimum(&knots, &pieces, dom.lo, dom.hi) {
            if min < 0.0 {
                return Err(err(
                    p,
                    format!(
                        "the natural spline falls to {min:.3e} between knots {} and {}: a density is not negative (use \"interpolation\": \"pchip\")",
                        knots[k], knots[k + 1]
                    ),
                ));
            }
        }
        let mass = crate::smooth::integral(&knots, &pieces, dom.lo, dom.hi);
        if !(mass > 0.0 && mass.is_finite()) {
            return Err(err(
                p,
                format!("its integral over [{}, {}] is {mass}", dom.lo, dom.hi),
            ));
        }
        let t = self.g.table(Table::cubic(knots, &pieces));
        let s = self.g.spline(x, t);
        let ls = self.g.log(s);
        let ln_mass = self.g.constant(mass.ln());
        Ok(self.g.sub(ls, ln_mass))
    }

    /// `histfit_kde_dist`: a Gaussian kernel density estimate over the events of the dataset
    /// `events` (observable `x`, weights from `weight` or the dataset's), bandwidth `bandwidth`
    /// (a number, `"silverman"` — the default — or `"scott"`) times `rho` (default 1), the
    /// kernels' sum restricted to the domain and normalised there exactly, its logarithm
    /// tabulated as a cubic spline to 1e-10 relative ([`crate::smooth::Kde::log_spline`]).
    fn kde(&mut self, d: &Value, p: &str) -> Result<Id> {
        let (x, dom) = self.observable(d, &["x"], p)?;
        let x_name = str_field(d, "x", p)?.to_string();
        let source = str_field(d, "events", p)?;
        let (table, _, note) = self
            .events(source)
            .map_err(|e| err(format!("{p}.events"), e.to_string()))?;
        self.notes.extend(note);
        let (points, weights) = sample_axes(&table, d, source, &x_name, p)?;
        if points.is_empty() {
            return Err(err(
                format!("{p}.events"),
                format!("\"{source}\" holds no events"),
            ));
        }
        if let Some(i) = points.iter().position(|v| !v.is_finite()) {
            return Err(err(
                format!("{p}.x"),
                format!(
                    "event {i} of \"{source}\" has {x_name} = {}: a kernel sits at a finite point",
                    points[i]
                ),
            ));
        }
        if let Some(w) = &weights {
            if let Some(i) = w.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(err(
                    format!("{p}.weight"),
                    format!(
                        "event {i} has weight {}: a kernel's weight is not negative",
                        w[i]
                    ),
                ));
            }
        }
        let rule = match d.get("bandwidth") {
            None => crate::smooth::Bandwidth::Silverman,
            Some(Value::String(r)) if r == "silverman" => crate::smooth::Bandwidth::Silverman,
            Some(Value::String(r)) if r == "scott" => crate::smooth::Bandwidth::Scott,
            Some(v) => match v.as_f64() {
                Some(h) if h > 0.0 && h.is_finite() => crate::smooth::Bandwidth::Fixed(h),
                _ => {
                    return Err(err(
                        format!("{p}.bandwidth"),
                        "expected a positive number, \"silverman\" or \"scott\"",
                    ))
                }
            },
        };
        let rho = match d.get("rho") {
            None => 1.0,
            Some(v) => v
                .as_f64()
                .filter(|r| *r > 0.0 && r.is_finite())
                .ok_or_else(|| err(format!("{p}.rho"), "expected a positive number"))?,
        };
        let kde = crate::smooth::Kde::new(points, weights, rule, rho);
        if kde.is_empty() {
            return Err(err(
                format!("{p}.weight"),
                format!("every event of \"{source}\" has weight 0: no kernel is left"),
            ));
        }
        if !(kde.h > 0.0 && kde.h.is_finite()) {
            return Err(err(
                p,
                format!(
                    "the bandwidth rule gives {:.3e}: the events of \"{source}\" have no spread (give \"bandwidth\" a number)",
                    kde.h
                ),
            ));
        }
        let mass = kde.mass(dom.lo, dom.hi);
        if !(mass > 0.0 && mass.is_finite()) {
            return Err(err(
                p,
                format!(
                    "the kernels' mass over [{}, {}] is {mass:.3e}: the events of \"{source}\" give no density there",
                    dom.lo, dom.hi
                ),
            ));
        }
        let (knots, pieces, accuracy) = kde.log_spline(dom.lo, dom.hi, 1e-10);
        if !accuracy.is_finite() {
            return Err(err(
                p,
                format!(
                    "its logarithm is not finite over [{}, {}] (an infinite range?)",
                    dom.lo, dom.hi
                ),
            ));
        }
        if accuracy > 1e-10 {
            self.notes.push(format!(
                "{p}: the kernel density estimate is tabulated to a relative accuracy of {accuracy:.1e} only (asked 1e-10)"
            ));
        }
        let t = self.g.table(Table::cubic(knots, &pieces));
        let ls = self.g.spline(x, t);
        let ln_mass = self.g.constant(mass.ln());
        Ok(self.g.sub(ls, ln_mass))
    }

    fn histogram(&mut self, d: &Value, p: &str) -> Result<Id> {
        let data = d
            .get("data")
            .filter(|v| v.is_object())
            .ok_or_else(|| err(p, "missing \"data\" (the histogram's axes and contents)"))?;
        let axes = data
            .get("axes")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| err(format!("{p}.data.axes"), "expected a list of axes"))?;
        // Per axis: the observable's column and domain, and the bin edges.
        let mut dims: Vec<(usize, Domain, Vec<f64>)> = Vec::new();
        let mut bins = 1usize;
        for (k, axis) in axes.iter().enumerate() {
            let ap = format!("{p}.data.axes[{k}]");
            let name = str_field(axis, "name", &ap)?.to_string();
            let Some(&(j, dom)) = self.observables.get(&name) else {
                return Err(err(
                    format!("{ap}.name"),
                    format!("\"{name}\" is not an observable of the data"),
                ));
            };
            if dims.iter().any(|(i, ..)| *i == j) {
                return Err(err(
                    format!("{ap}.name"),
                    format!("\"{name}\" is a second axis of the same observable"),
                ));
            }
            let edges = histogram_edges(axis, &ap)?;
            bins = bins
                .checked_mul(edges.len() - 1)
                .filter(|&n| n <= MAX_TEMPLATE_BINS)
                .ok_or_else(|| {
                    err(
                        format!("{p}.data.axes"),
                        format!("more than {MAX_TEMPLATE_BINS} bins"),
                    )
                })?;
            dims.push((j, dom, edges));
        }
        let cp = format!("{p}.data.contents");
        let contents = data
            .get("contents")
            .and_then(Value::as_array)
            .filter(|c| c.len() == bins)
            .ok_or_else(|| {
                err(
                    &cp,
                    format!("expected {bins} numbers (one per bin, the last axis fastest)"),
                )
            })?;
        // Each bin's content spread over its box, and the mass inside the domains' box.
        let mut density = Vec::with_capacity(bins);
        let mut mass = 0.0;
        for (b, c) in contents.iter().enumerate() {
            let c = c
                .as_f64()
                .filter(|c| c.is_finite() && *c >= 0.0)
                .ok_or_else(|| err(format!("{cp}[{b}]"), "expected a finite number ≥ 0"))?;
            let (mut volume, mut inside, mut rest) = (1.0, 1.0, b);
            for (_, dom, edges) in dims.iter().rev() {
                let n = edges.len() - 1;
                let (e0, e1) = (edges[rest % n], edges[rest % n + 1]);
                rest /= n;
                volume *= e1 - e0;
                inside *= (e1.min(dom.hi) - e0.max(dom.lo)).max(0.0);
            }
            density.push(c / volume);
            mass += c / volume * inside;
        }
        if !(mass > 0.0 && mass.is_finite()) {
            return Err(err(
                cp,
                "no content within the observables' domains: the density would be 0",
            ));
        }
        let h = self.histogram_lookup(&dims, density);
        let log_h = self.g.log(h);
        let log_mass = self.g.constant(mass.ln());
        Ok(self.g.sub(log_h, log_mass))
    }

    /// The density of a histogram at each event: one table over one observable; over several, per
    /// axis the event's bin (a table of bin numbers) and whether it lies inside the edges (a
    /// table of ones), the flat bin number — the last axis fastest — made of them, and the
    /// densities as a table over flat bin numbers. Tables are piecewise constant: no parameter
    /// moves them, so no gradient flows through them.
    fn histogram_lookup(&mut self, dims: &[(usize, Domain, Vec<f64>)], density: Vec<f64>) -> Id {
        if let [(j, _, edges)] = dims {
            let x = self.g.column(*j);
            let t = self
                .g
                .table(crate::graph::Table::new(edges.clone(), density));
            return self.g.hist(x, t);
        }
        let mut flat = self.g.constant(0.0);
        let mut inside = self.g.constant(1.0);
        let mut stride = 1.0;
        for (j, _, edges) in dims.iter().rev() {
            let n = edges.len() - 1;
            let x = self.g.column(*j);
            let numbers = self.g.table(crate::graph::Table::new(
                edges.clone(),
                (0..n).map(|b| b as f64).collect(),
            ));
            let ones = self
                .g
                .table(crate::graph::Table::new(edges.clone(), vec![1.0; n]));
            let (bin, one) = (self.g.hist(x, numbers), self.g.hist(x, ones));
            let s = self.g.constant(stride);
            let term = self.g.mul(bin, s);
            flat = self.g.add(flat, term);
            inside = self.g.mul(inside, one);
            stride *= n as f64;
        }
        let n = density.len();
        let centres = (0..=n).map(|b| b as f64 - 0.5).collect();
        let t = self.g.table(crate::graph::Table::new(centres, density));
        let h = self.g.hist(flat, t);
        self.g.mul(h, inside)
    }

    /// A `histfit_template_dist` ([`crate::template`]): (ln f per event, the morphed total of its
    /// weights), built once per channel.
    fn template(&mut self, name: &str, d: &Value, p: &str) -> Result<(Id, Id)> {
        if let Some(&built) = self.templates.get(name) {
            return Ok(built);
        }
        let x_name = str_field(d, "x", p)?.to_string();
        let Some(&(j, dom)) = self.observables.get(&x_name) else {
            return Err(err(
                format!("{p}.x"),
                format!("\"{x_name}\" is not an observable of the data"),
            ));
        };
        let source = str_field(d, "events", p)?;
        let (table, _, note) = self
            .events(source)
            .map_err(|e| err(format!("{p}.events"), e.to_string()))?;
        self.notes.extend(note);
        let (x, weights) = sample_axes(&table, d, source, &x_name, p)?;
        let column = |key: &str, axis: &str| sample_axis(&table, source, p, key, axis);
        let weight = |i: usize| weights.map_or(1.0, |w| w[i]);
        let binning = d.get("binning").filter(|b| b.is_object()).ok_or_else(|| {
            err(
                p,
                "missing \"binning\": {\"nbins\": N} or {\"edges\": [...]}",
            )
        })?;
        let mut axis = binning.clone();
        if axis.get("edges").is_none() {
            axis["min"] = serde_json::json!(dom.lo);
            axis["max"] = serde_json::json!(dom.hi);
        }
        let bp = format!("{p}.binning");
        let edges = histogram_edges(&axis, &bp)?;
        // Each bin's content is a few graph nodes per systematic, evaluated at every point.
        if edges.len() - 1 > MAX_TEMPLATE_BINS {
            return Err(err(
                bp,
                format!(
                    "{} bins: a template has at most {MAX_TEMPLATE_BINS}",
                    edges.len() - 1
                ),
            ));
        }
        if edges[0] != dom.lo || edges[edges.len() - 1] != dom.hi {
            return Err(err(
                bp,
                format!(
                    "the edges span [{}, {}]: they must span the domain of \"{x_name}\", [{}, {}]",
                    edges[0],
                    edges[edges.len() - 1],
                    dom.lo,
                    dom.hi
                ),
            ));
        }
        let (nominal, outside) = crate::template::bin_sums(&edges, x, &weight);
        if let Some(b) = nominal.iter().position(|s| *s < 0.0) {
            return Err(err(
                format!("{p}.events"),
                format!(
                    "the weights of bin {b} [{}, {}] sum to {}: a template's content must not be negative",
                    edges[b],
                    edges[b + 1],
                    nominal[b]
                ),
            ));
        }
        if nominal.iter().sum::<f64>() <= 0.0 {
            return Err(err(
                format!("{p}.events"),
                "no weight within the binning: the density would be 0",
            ));
        }
        if outside > 0 {
            self.notes.push(format!(
                "{p}: {outside} of the {} simulated events of \"{source}\" lie outside the binning and are left out",
                x.len()
            ));
        }
        let mut systematics = Vec::new();
        let sys = match d.get("weight_systematics") {
            None => &[][..],
            Some(Value::Array(a)) => &a[..],
            Some(_) => return Err(err(format!("{p}.weight_systematics"), "expected a list")),
        };
        for (k, s) in sys.iter().enumerate() {
            let sp = format!("{p}.weight_systematics[{k}]");
            let param = str_field(s, "parameter", &sp)?;
            let alpha = self.value(param, &sp)?;
            let interpolation = match s.get("interpolation") {
                None => crate::template::Interpolation::Code4p,
                Some(v) => v
                    .as_str()
                    .and_then(crate::template::Interpolation::parse)
                    .ok_or_else(|| {
                        err(
                            format!("{sp}.interpolation"),
                            "expected \"code0\" or \"code4p\"",
                        )
                    })?,
            };
            let up = column(
                &format!("weight_systematics[{k}].up"),
                str_field(s, "up", &sp)?,
            )?;
            let down = column(
                &format!("weight_systematics[{k}].down"),
                str_field(s, "down", &sp)?,
            )?;
            if interpolation == crate::template::Interpolation::Code0 {
                match self.g.op(alpha) {
                    crate::graph::Op::Param(i) => self.kinked.push(i),
                    _ => self.notes.push(format!(
                        "{sp}: code 0 puts a kink in −ln L where \"{param}\" is 0, and \"{param}\" is not a parameter: the fit does not know where the kink lies in its parameters (code 4p has none)"
                    )),
                }
            }
            systematics.push(crate::template::Systematic {
                alpha,
                interpolation,
                up,
                down,
            });
        }
        let xid = self.g.column(j);
        let t =
            crate::template::build(&mut self.g, xid, x, &edges, &nominal, &weight, &systematics);
        self.templates
            .insert(name.to_string(), (t.log_density, t.total));
        Ok((t.log_density, t.total))
    }

    fn double_cb(&mut self, d: &Value, p: &str) -> Result<Built> {
        let (x, dom) = self.observable(d, &["m", "x"], p)?;
        let m0 = self.param_of(d, &["m0"], p)?;
        let sl = self.param_of(d, &["sigma_L"], p)?;
        let sr = self.param_of(d, &["sigma_R"], p)?;
        let al = self.param_of(d, &["alpha_L"], p)?;
        let nl = self.param_of(d, &["n_L"], p)?;
        let ar = self.param_of(d, &["alpha_R"], p)?;
        let nr = self.param_of(d, &["n_R"], p)?;
        Ok(Builder::simple(pdf::crystal_ball_double(
            &mut self.g,
            x,
            m0,
            sl,
            sr,
            al,
            nl,
            ar,
            nr,
            dom,
        )))
    }

    /// Σ c_p f_p: yields (as many coefficients as summands; extended where the document says
    /// so) or fractions (one fewer; the last summand takes 1 − Σ).
    /// The `coefficients` of a sum of `n` terms (`what`: the terms' key): one each, or one fewer
    /// as fractions, the last taking 1 − Σ c (then `true`).
    fn coefficients_for(
        &mut self,
        d: &Value,
        n: usize,
        what: &str,
        p: &str,
    ) -> Result<(Vec<Id>, bool)> {
        let mut cs = self.coefficients(d, p)?;
        if cs.len() + 1 == n {
            let total = self.g.sum(&cs);
            let one = self.g.constant(1.0);
            cs.push(self.g.sub(one, total));
            return Ok((cs, true));
        }
        if cs.len() != n {
            return Err(err(
                p,
                format!(
                    "{} coefficients for {n} {what} (expected as many, or one fewer)",
                    cs.len()
                ),
            ));
        }
        Ok((cs, false))
    }

    /// ROOT's `weighted_sum_dist` (RooRealSumPdf): Σ_i c_i s_i(x) over functions `samples`
    /// (or the observable itself), normalised over the observable's range by quadrature; one
    /// coefficient fewer than the samples are fractions (the last takes 1 − Σ c). Extended, its
    /// expected count is the sum's integral over the range.
    fn weighted_sum(&mut self, d: &Value, p: &str) -> Result<Built> {
        let samples = names(d, "samples", p)?;
        let extended = d.get("extended").and_then(Value::as_bool).unwrap_or(false);
        let (coeffs, _) = self.coefficients_for(d, samples.len(), "samples", p)?;
        let mut terms = Vec::new();
        for (s, &c) in samples.iter().zip(&coeffs) {
            let f = self.value(s, &format!("{p}.samples"))?;
            terms.push(self.g.mul(c, f));
        }
        let sum = self.g.sum(&terms);
        let log_shape = self.g.log(sum);
        let columns = self.columns_read(log_shape);
        let &[j] = columns.as_slice() else {
            return Err(err(
                p,
                format!("its samples read {} of the data's observables: a weighted sum over one observable is read", columns.len()),
            ));
        };
        let Some(&(_, dom)) = self.observables.values().find(|o| o.0 == j) else {
            return Err(err(p, "its observable is not an axis of the data"));
        };
        let (log_density, log_norm) = self.normalised_over(log_shape, (j, dom), &[], p);
        Ok(Built {
            log_density,
            constraint: None,
            expected: extended.then(|| self.g.exp(log_norm)),
            components: Vec::new(),
        })
    }

    /// ROOT's `fft_conv_pdf` (RooFFTConvPdf; the HS3 test suite's `fft_convolution_dist`): the
    /// convolution ∫ f₁(x − y) f₂(y) dy of `pdf1` and `pdf2`, each a density of the observable
    /// `conv_var` alone, normalised over its range. y runs over RooFFTConvPdf's window for the
    /// second density (the resolution): centred on 0, as wide as the range and its two 5 %
    /// buffers ([`CONVOLUTION_WINDOW`]); f₁ is taken wherever x − y falls. ROOT computes this by
    /// a cyclic FFT on the observable's cache binning, so f₁'s part beyond the buffers wraps
    /// around and the result is displaced by half a bin; histfit computes the linear
    /// convolution itself, by Gauss–Legendre quadrature in y — composite, the pieces doubled at
    /// the initial point until the convolution at points across the range moves by less than
    /// 1e-10 of its largest value, the finer of the two rules kept (a margin for a resolution
    /// that narrows in the fit), within [`CONVOLUTION_NODES`] — and normalises it with the same
    /// rule
    /// ([`Self::shifted_masses`]).
    fn convolution(&mut self, d: &Value, p: &str) -> Result<Built> {
        if d.get("conv_func").is_some() {
            return Err(err(
                format!("{p}.conv_func"),
                "a convolution in a function of the observable is not read yet",
            ));
        }
        let var = str_field(d, "conv_var", p)?.to_string();
        let Some(&(j, dom)) = self.observables.get(&var) else {
            return Err(err(
                format!("{p}.conv_var"),
                format!("\"{var}\" is not an axis of the data: a convolution is a density of its events"),
            ));
        };
        if !(dom.lo.is_finite() && dom.hi.is_finite() && dom.hi > dom.lo) {
            return Err(err(
                p,
                format!(
                    "a convolution over [{}, {}]: its observable's range must be finite",
                    dom.lo, dom.hi
                ),
            ));
        }
        let mut logs = Vec::new();
        for key in ["pdf1", "pdf2"] {
            let name = str_field(d, key, p)?.to_string();
            let b = self.distribution(&name, &format!("{p}.{key}"))?;
            if b.expected.is_some() || b.constraint.is_some() {
                return Err(err(
                    format!("{p}.{key}"),
                    format!("\"{name}\" is extended or constrained: a convolution takes plain densities"),
                ));
            }
            if self.columns_read(b.log_density) != [j] {
                return Err(err(
                    format!("{p}.{key}"),
                    format!("\"{name}\" must be a density of \"{var}\" alone (the convolution's variable)"),
                ));
            }
            logs.push(b.log_density);
        }
        let (l1, l2) = (logs[0], logs[1]);
        let xid = self.g.column(j);
        let half = 0.5 * CONVOLUTION_WINDOW * dom.width();
        let window = Domain {
            lo: -half,
            hi: half,
        };
        let g0 = self.g.clone();
        let (dep1, dep2) = (dependents(&g0, l1, xid), dependents(&g0, l2, xid));
        // The densities at the initial point: their parts that do not move with x once, then
        // only those that do, at each point.
        let init = self.current_values();
        let mut vals = vec![0.0; g0.ops().len()];
        let mut columns = vec![dom.lo; j + 1];
        for l in [l1, l2] {
            g0.value_of(&g0.needed(l), &init, &columns, &mut vals);
        }
        let mut at = |deps: &[u32], v: f64| {
            columns[j] = v;
            g0.value_of(deps, &init, &columns, &mut vals).exp()
        };
        let probes: Vec<f64> = (0..=16)
            .map(|k| dom.lo + dom.width() * k as f64 / 16.0)
            .collect();
        let mut conv_at = |pieces: usize| -> Vec<f64> {
            let nodes = pdf::rule(window, &[], pieces);
            let f2: Vec<f64> = nodes.iter().map(|&(y, w)| w * at(&dep2, y)).collect();
            probes
                .iter()
                .map(|&x| {
                    nodes
                        .iter()
                        .zip(&f2)
                        .map(|(&(y, _), &w2)| w2 * at(&dep1, x - y))
                        .sum()
                })
                .collect()
        };
        // Per event, each rule node costs f₁'s moving part and 4 more; once per point, f₂'s
        // and 16 of f₁'s for the normalisation (`shifted_masses`).
        let (c1, c2) = (dep1.len(), dep2.len());
        let most = (CONVOLUTION_NODES / (8 * (c1 + 4)))
            .min(pdf::QUADRATURE_NODES / (8 * (16 * c1 + c2 + 4)))
            .max(1);
        let mut pieces = 4.min(most);
        let mut last = conv_at(pieces);
        let mut accuracy = f64::NAN;
        while 2 * pieces <= most && last.iter().all(|v| v.is_finite()) {
            let next = conv_at(2 * pieces);
            let scale = next.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            accuracy = match scale > 0.0 && next.iter().all(|v| v.is_finite()) {
                true => last
                    .iter()
                    .zip(&next)
                    .map(|(a, b)| (a - b).abs() / scale)
                    .fold(0.0, f64::max),
                // Zero everywhere (a resolution no node has found yet): refined further.
                false => f64::NAN,
            };
            // The finer rule of the pair that agrees is kept: a margin of one doubling over the
            // coarsest that meets the tolerance here.
            pieces *= 2;
            last = next;
            if accuracy < QUADRATURE_TOLERANCE {
                break;
            }
        }
        let scale = last.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if !last.iter().all(|v| v.is_finite()) || scale == 0.0 {
            return Err(err(
                p,
                "the convolution is zero or not finite across the range at the initial parameters",
            ));
        }
        if accuracy.is_nan() || accuracy >= QUADRATURE_TOLERANCE {
            self.notes.push(format!(
                "{p}: the convolution's integral reaches a relative accuracy of {accuracy:.1e} only (asked {QUADRATURE_TOLERANCE:.0e}) on {pieces} pieces"
            ));
        }
        // Per event Σ_q w_q f₂(y_q) f₁(x − y_q), each term's logarithm summed before its
        // exponential; its integral over the range Σ_q w_q f₂(y_q) ∫ f₁(x − y_q) dx, the same
        // rule in y.
        let nodes = pdf::rule(window, &[], pieces);
        let mut terms = Vec::with_capacity(nodes.len());
        let mut weights = Vec::with_capacity(nodes.len());
        for &(y, w) in &nodes {
            let yq = self.g.constant(y);
            let shifted = self.g.sub(xid, yq);
            let a = substitute_along(&g0, &mut self.g, &dep1, xid, shifted);
            let b = substitute_along(&g0, &mut self.g, &dep2, xid, yq);
            let t = self.g.add(a, b);
            let e = self.g.exp(t);
            terms.push(self.g.scale(e, w));
            let f2 = self.g.exp(b);
            weights.push(self.g.scale(f2, w));
        }
        let sum = self.g.sum(&terms);
        let log_shape = self.g.log(sum);
        let masses = self.shifted_masses(&g0, &dep1, xid, dom, &nodes);
        let parts: Vec<Id> = weights
            .iter()
            .zip(&masses)
            .map(|(&w, &m)| self.g.mul(w, m))
            .collect();
        let n = self.g.sum(&parts);
        let log_norm = self.g.log(n);
        Ok(Builder::simple(self.g.sub(log_shape, log_norm)))
    }

    /// ∫ of f₁ (whose log's nodes moving with `xid` are `dep1`, the last its root) over the
    /// range shifted by each node's −y (`[lo − y, hi − y]`), as graph nodes: the ends of every
    /// shifted range, sorted, cut the line into intervals, each integrated by 8-point
    /// Gauss–Legendre (the ends are as close as the rule's nodes, so each interval is short:
    /// exact to the rule's order where f₁ is smooth there, less where it has a kink or a step
    /// inside one), and each mass is the difference of two running sums — 16 evaluations of
    /// f₁ a node, where a rule in x at every node would take the rule's nodes in x each.
    fn shifted_masses(
        &mut self,
        g0: &Graph,
        dep1: &[u32],
        xid: Id,
        dom: Domain,
        nodes: &[(f64, f64)],
    ) -> Vec<Id> {
        let mut ends: Vec<f64> = nodes
            .iter()
            .flat_map(|&(y, _)| [dom.lo - y, dom.hi - y])
            .collect();
        ends.sort_by(f64::total_cmp);
        ends.dedup();
        // The running integral from the first end, at each end.
        let mut running = Vec::with_capacity(ends.len());
        let mut acc = self.g.constant(0.0);
        running.push(acc);
        for pair in ends.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let (mid, half) = (0.5 * (a + b), 0.5 * (b - a));
            let piece: Vec<Id> = pdf::GL8
                .iter()
                .map(|&(u, w)| {
                    let at = self.g.constant(mid + half * u);
                    let l = substitute_along(g0, &mut self.g, dep1, xid, at);
                    let f = self.g.exp(l);
                    self.g.scale(f, half * w)
                })
                .collect();
            let s = self.g.sum(&piece);
            acc = self.g.add(acc, s);
            running.push(acc);
        }
        let at = |v: f64| {
            let k = ends.partition_point(|&e| e < v);
            running[k]
        };
        nodes
            .iter()
            .map(|&(y, _)| {
                let (lo, hi) = (at(dom.lo - y), at(dom.hi - y));
                self.g.sub(hi, lo)
            })
            .collect()
    }

    /// The data's columns a node reads, each once, in order.
    fn columns_read(&self, id: Id) -> Vec<usize> {
        let mut columns: Vec<usize> = self
            .g
            .needed(id)
            .into_iter()
            .filter_map(|k| match self.g.ops()[k as usize] {
                Op::Column(c) => Some(c),
                _ => None,
            })
            .collect();
        columns.sort_unstable();
        columns.dedup();
        columns
    }

    fn mixture(&mut self, d: &Value, p: &str) -> Result<Built> {
        let summands = names(d, "summands", p)?;
        let extended = d.get("extended").and_then(Value::as_bool).unwrap_or(false);
        if summands.is_empty() {
            return Err(err(p, "a mixture needs summands"));
        }
        let (coeffs, fractions) = self.coefficients_for(d, summands.len(), "summands", p)?;
        if fractions && extended {
            return Err(err(
                p,
                "an extended mixture needs one yield per summand, not fractions",
            ));
        }
        let mut terms = Vec::new();
        let mut constraints = Vec::new();
        let mut components = Vec::new();
        for (s, &c) in summands.iter().zip(&coeffs) {
            let b = self.distribution(s, p)?;
            if b.expected.is_some() {
                return Err(err(p, format!("summand \"{s}\" is itself extended")));
            }
            constraints.extend(b.constraint);
            let f = self.g.exp(b.log_density);
            let term = self.g.mul(c, f);
            terms.push(term);
            components.push((s.to_string(), term));
        }
        let sum = self.g.sum(&terms);
        let log_sum = self.g.log(sum);
        let (log_density, expected) = if fractions {
            (log_sum, None)
        } else {
            // Yields: the density is Σ ν_p f_p / Σ ν_p.
            let nu = self.g.sum(&coeffs);
            let lnu = self.g.log(nu);
            if !extended {
                // Not extended, the components are the density's parts ν_p f_p / Σ ν: they sum
                // to f, as a fraction mixture's do.
                for (_, c) in components.iter_mut() {
                    *c = self.g.div(*c, nu);
                }
            }
            (self.g.sub(log_sum, lnu), extended.then_some(nu))
        };
        Ok(Built {
            log_density,
            constraint: (!constraints.is_empty()).then(|| self.g.sum(&constraints)),
            expected,
            components,
        })
    }

    /// The one observable a generic distribution's expression uses.
    fn only_observable(&self, text: &str, place: &str) -> Result<(usize, Domain)> {
        let used: Vec<(&String, &(usize, Domain))> = self
            .observables
            .iter()
            .filter(|(n, _)| mentions(text, n))
            .collect();
        match used.as_slice() {
            [(_, &(j, dom))] => Ok((j, dom)),
            [] => Err(err(
                place,
                "the expression uses none of the data's observables",
            )),
            _ => Err(err(
                place,
                "a generic distribution over several observables is not read yet",
            )),
        }
    }

    /// The resolution model `name` (a distribution or a function of the document) as weighted
    /// models: a Gaussian (`gauss_model_function`, ROOT's `gauss_resolution_model`: `mean`,
    /// `sigma`), perfect resolution (`truth_model_function`), or ROOT's `mixture_model` of
    /// those (`summands`, and `coefficients`: one fewer than the summands as fractions, the last
    /// taking what is left, or one each as weights). Its variable `x` must be the decay's time.
    fn resolution_models(
        &mut self,
        name: &str,
        t_name: &str,
        from: &str,
        depth: usize,
    ) -> Result<Vec<(Id, pdf::Resolution)>> {
        let (place, r) = match (self.doc.dists.get(name), self.doc.funcs.get(name)) {
            (Some(&(i, r)), _) => (format!("distributions[{i}] (\"{name}\")"), r),
            (None, Some(&(i, r))) => (format!("functions[{i}] (\"{name}\")"), r),
            (None, None) => {
                return Err(err(
                    format!("{from}.resolutionModel"),
                    format!("no resolution model named \"{name}\""),
                ))
            }
        };
        if depth > MAX_NESTING {
            return Err(err(place, format!("nested more than {MAX_NESTING} deep")));
        }
        let kind = str_field(r, "type", &place)?;
        if kind != "mixture_model" {
            match r.get("x").and_then(Value::as_str) {
                Some(x) if x != t_name => {
                    return Err(err(format!("{place}.x"), format!("\"{x}\": a resolution model convolves in the decay's time \"{t_name}\"")));
                }
                _ => {}
            }
        }
        let one = self.g.constant(1.0);
        Ok(match kind {
            "truth_model_function" => vec![(one, pdf::Resolution::Truth)],
            "gauss_model_function" | "gauss_resolution_model" => {
                let mean = self.param_of(r, &["mean"], &place)?;
                let sigma = self.param_of(r, &["sigma"], &place)?;
                vec![(one, pdf::Resolution::Gauss { mean, sigma })]
            }
            "mixture_model" => {
                let summands = names(r, "summands", &place)?;
                let coefficients = names(r, "coefficients", &place)?;
                let n = summands.len();
                if n == 0 || (coefficients.len() != n && coefficients.len() + 1 != n) {
                    return Err(err(place, format!("{n} summands and {} coefficients: one coefficient each, or one fewer (fractions)", coefficients.len())));
                }
                let mut cs = coefficients
                    .iter()
                    .map(|c| self.value(c, &place))
                    .collect::<Result<Vec<_>>>()?;
                if cs.len() + 1 == n {
                    let rest = cs.iter().fold(one, |acc, &c| self.g.sub(acc, c));
                    cs.push(rest);
                } else {
                    // One weight each: normalised by their sum (as RooAddModel does), which
                    // matters where this mixture is itself a summand of another.
                    let total = cs[1..].iter().fold(cs[0], |acc, &c| self.g.add(acc, c));
                    cs = cs.iter().map(|&c| self.g.div(c, total)).collect();
                }
                let mut out = Vec::new();
                for (s, c) in summands.iter().zip(cs) {
                    for (w, m) in self.resolution_models(s, t_name, &place, depth + 1)? {
                        out.push((self.g.mul(c, w), m));
                    }
                    // Each summand may name mixtures again: the leaves double with every
                    // level that names a mixture twice.
                    if out.len() > MAX_RESOLUTION_MODELS {
                        return Err(err(
                            place,
                            format!("more than {MAX_RESOLUTION_MODELS} resolution models in all"),
                        ));
                    }
                }
                out
            }
            other => {
                return Err(err(format!("{place}.type"), format!("\"{other}\" is not a resolution model (gauss_model_function, gauss_resolution_model, truth_model_function, mixture_model)")));
            }
        })
    }

    /// A relativistic Breit–Wigner's `channels`: each with its partial width `Gamma` (a
    /// parameter or a number) and, as numbers, the daughters' masses `m1`, `m2` (default 0),
    /// the orbital angular momentum `l` (an integer from 0 to [`pdf::BW_MAX_L`], default 0)
    /// and the form factor's size `R` (default 3).
    fn bw_channels(&mut self, d: &Value, p: &str) -> Result<Vec<pdf::BwChannel>> {
        let list = match d.get("channels") {
            Some(Value::Array(a)) if !a.is_empty() => a,
            Some(Value::Array(_)) => {
                return Err(err(
                    p,
                    "no channels: the first names the decay whose mass spectrum is modelled",
                ))
            }
            Some(_) => return Err(err(format!("{p}.channels"), "not a list of channels")),
            None => return Err(err(p, "missing \"channels\"")),
        };
        let mut out = Vec::with_capacity(list.len());
        for (k, c) in list.iter().enumerate() {
            let at = format!("{p}.channels[{k}]");
            if !c.is_object() {
                return Err(err(at, "not an object"));
            }
            let number = |key: &str, default: f64| -> Result<f64> {
                match c.get(key) {
                    None => Ok(default),
                    Some(v) => v
                        .as_f64()
                        .filter(|v| v.is_finite() && *v >= 0.0)
                        .ok_or_else(|| {
                            err(
                                format!("{at}.{key}"),
                                "a number ≥ 0 is needed (a mass, a size)",
                            )
                        }),
                }
            };
            let (m1, m2, r) = (number("m1", 0.0)?, number("m2", 0.0)?, number("R", 3.0)?);
            let l = match c.get("l") {
                None => 0,
                Some(v) => v
                    .as_u64()
                    .filter(|&l| l <= u64::from(pdf::BW_MAX_L))
                    .ok_or_else(|| {
                        err(
                            format!("{at}.l"),
                            format!("an integer from 0 to {} is needed", pdf::BW_MAX_L),
                        )
                    })? as u32,
            };
            let gamma = self.param_of(c, &["Gamma"], &at)?;
            out.push(pdf::BwChannel {
                gamma,
                m1,
                m2,
                l,
                r,
            });
        }
        Ok(out)
    }

    /// e^log_shape normalised over observable `j` (its domain `dom`) by quadrature, the pieces
    /// chosen at the current values (see [`pdf::normalised_by_quadrature`]); a note says where
    /// the accuracy asked was not reached. The quadrature evaluates the same log-shape with the
    /// observable at each node: rebuilt there with the observable's column replaced by a
    /// constant. Returns the normalised log-density and the log of the integral.
    fn normalised_over(
        &mut self,
        log_shape: Id,
        (j, dom): (usize, Domain),
        onsets: &[f64],
        place: &str,
    ) -> (Id, Id) {
        let xid = self.g.column(j);
        let init = self.current_values();
        let g0 = self.g.clone();
        let mut shape_at = |g: &mut Graph, at: Id| -> Id {
            if at == xid {
                return log_shape;
            }
            substitute(&g0, g, log_shape, xid, at)
        };
        // (Only the nodes the shape needs: the graph before it may be large.)
        let needed = g0.needed(log_shape);
        // What one quadrature node costs: the nodes that move with the observable (a
        // density's own normalisation is built once, not at every node).
        let cost = needed.iter().filter(|&&k| g0.varying(Id(k))).count();
        let scratch = std::cell::RefCell::new((vec![0.0; g0.ops().len()], vec![f64::NAN; j + 1]));
        let at_init = |v: f64| {
            let (vals, columns) = &mut *scratch.borrow_mut();
            columns[j] = v;
            g0.value_of(&needed, &init, columns, vals)
        };
        let (l, ln, acc) = pdf::normalised_by_quadrature(
            &mut self.g,
            xid,
            dom,
            onsets,
            QUADRATURE_TOLERANCE,
            cost,
            &at_init,
            &mut shape_at,
        );
        self.quadrature_note(place, acc);
        (l, ln)
    }

    /// Every parameter's starting value as known so far (for choosing quadrature pieces).
    fn current_values(&self) -> Vec<f64> {
        self.params
            .iter()
            .map(|n| {
                let i = self.info.get(n);
                i.and_then(|i| i.value)
                    .or_else(|| i.map(|i| 0.5 * (i.bounds.0 + i.bounds.1)))
                    .unwrap_or(0.0)
            })
            .collect()
    }

    fn quadrature_note(&mut self, place: &str, accuracy: f64) {
        if accuracy >= QUADRATURE_TOLERANCE || accuracy.is_nan() {
            self.notes.push(format!(
                "{place}: normalised by quadrature to a relative accuracy of {accuracy:.1e} only (asked {QUADRATURE_TOLERANCE:.0e})"
            ));
        }
    }
}

/// Whether `name` appears in `text` as a whole word.
fn mentions(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// Axis `axis` of the sample dataset `source` (named by key `key` of the distribution at `p`).
fn sample_axis<'a>(
    table: &'a histfit_seam::EventTable,
    source: &str,
    p: &str,
    key: &str,
    axis: &str,
) -> Result<&'a [f64]> {
    table.column(axis).ok_or_else(|| {
        err(
            format!("{p}.{key}"),
            format!(
                "the dataset \"{source}\" has no axis \"{axis}\" (its axes: {})",
                table.names.join(", ")
            ),
        )
    })
}

/// A sample dataset's observable `x_name` and its weights — the axis `"weight"` names, else
/// the dataset's own — for a distribution built from simulated events (`d` at `p`).
fn sample_axes<'a>(
    table: &'a histfit_seam::EventTable,
    d: &Value,
    source: &str,
    x_name: &str,
    p: &str,
) -> Result<(&'a [f64], Option<&'a [f64]>)> {
    let x = sample_axis(table, source, p, "x", x_name)?;
    let weights = match d.get("weight") {
        Some(Value::String(axis)) => Some(sample_axis(table, source, p, "weight", axis)?),
        Some(_) => return Err(err(format!("{p}.weight"), "expected the name of an axis")),
        None => table.weights.as_deref(),
    };
    Ok((x, weights))
}

/// The nodes of `src` that `root` needs and that depend on `from` (`from` itself first), in
/// order: what [`substitute_along`] rebuilds. (Not every node that depends on `from`: another
/// density of the same observable built before — a second convolution of a mixture — is not
/// this one's.)
fn dependents(src: &Graph, root: Id, from: Id) -> Vec<u32> {
    let n = root.0 as usize + 1;
    let need = src.reachable(&[root]);
    let mut depends = vec![false; n];
    let mut out = Vec::new();
    for (i, op) in src.ops().iter().enumerate().take(n) {
        if i == from.0 as usize || (need[i] && op.args().any(|a| depends[a.0 as usize])) {
            depends[i] = true;
            out.push(i as u32);
        }
    }
    out
}

/// The last of `deps` (see [`dependents`]: the nodes of `src` that depend on `from` and that the root needs) rebuilt in
/// `dst` with `from` replaced by `to`; every other node is shared as it is (`dst` extends
/// `src`). Costs the dependents alone, where [`substitute`] walks the graph up to the root.
fn substitute_along(src: &Graph, dst: &mut Graph, deps: &[u32], from: Id, to: Id) -> Id {
    use crate::graph::Op;
    let mut map: HashMap<u32, Id> = HashMap::with_capacity(deps.len());
    let mut last = to;
    for &i in deps {
        let id = Id(i);
        last = if id == from {
            to
        } else {
            match src.op(id) {
                Op::Const(_) | Op::Param(_) | Op::Column(_) => id,
                op => dst.rebuild(op, |a| map.get(&a.0).copied().unwrap_or(a)),
            }
        };
        map.insert(i, last);
    }
    last
}

/// Node `root` of `src` rebuilt in `dst` with node `from` replaced by `to` (`dst` extends
/// `src`, so nodes that do not depend on `from` are shared as they are).
fn substitute(src: &Graph, dst: &mut Graph, root: Id, from: Id, to: Id) -> Id {
    use crate::graph::Op;
    let n = root.0 as usize + 1;
    let mut map: Vec<Id> = (0..n as u32).map(Id).collect();
    let mut depends = vec![false; n];
    for i in 0..n {
        let op = src.op(Id(i as u32));
        if Id(i as u32) == from {
            map[i] = to;
            depends[i] = true;
            continue;
        }
        if !op.args().any(|a| depends[a.0 as usize]) {
            continue;
        }
        depends[i] = true;
        map[i] = match op {
            Op::Const(_) | Op::Param(_) | Op::Column(_) => Id(i as u32),
            // `dst` extends `src`: its tables are the same.
            op => dst.rebuild(op, |a| map[a.0 as usize]),
        };
    }
    map[root.0 as usize]
}

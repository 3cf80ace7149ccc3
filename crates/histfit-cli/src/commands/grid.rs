//! Signal grids: one command (`limit`, `hypotest`) for every point of a pyhf patchset, in one
//! process — the background-only workspace and the patchset parsed once, each point patched,
//! compiled and computed in parallel on the CPU cores (one after another on a GPU). Each point
//! runs exactly what the single-point command runs on `--patch FILE:NAME`, so the results are
//! the same numbers. A point that fails is reported with its error and counted, never dropped.

use crate::model_args::{FitArgs, ModelArgs};
use crate::progress;
use anyhow::{bail, Result};
use histfit_compute::Dataset;
use histfit_compute::HistFactoryData;
use histfit_device::{AnyEval, Device};
use histfit_infer::FitOptions;
use histfit_model::patch::{apply_patch_point, patch_points, PatchPoint};
use histfit_model::{compile, read_json, workspace_from_value};
use rayon::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;

/// The options that turn `limit` or `hypotest` into a grid.
#[derive(clap::Args, Debug, Clone)]
pub struct GridArgs {
    /// Run for every patch of this pyhf patchset (WORKSPACE is then its background-only
    /// workspace): one JSON document or table with a row per point.
    #[arg(long, value_name = "FILE")]
    pub patchset: Option<String>,
    /// With --patchset: only the patches whose name matches this pattern (* and ? wildcards).
    #[arg(long, value_name = "GLOB", requires = "patchset")]
    pub patches: Option<String>,
    /// With --patchset: also write the grid as CSV, a row per point keyed by the patch values.
    #[arg(long, value_name = "FILE", requires = "patchset")]
    pub csv: Option<String>,
}

/// One point's outcome.
pub struct Point<T> {
    pub patch: PatchPoint,
    pub result: Result<T, Failure>,
    /// What compiling the patched workspace warned about (an orphan observation, an unused
    /// measurement setting), as a single `--patch` run prints it.
    pub warnings: Vec<String>,
}

/// Why a point has no result: the error's text, and the POI's bound where the point's limit lies
/// above it (its hypothesis not excluded up to there — a fact about the point, not a failure to
/// compute, which the contour draws as such).
#[derive(Debug, Clone)]
pub struct Failure {
    pub message: String,
    pub limit_above: Option<f64>,
}

impl Failure {
    fn of(e: &anyhow::Error) -> Failure {
        let limit_above = e.chain().find_map(|c| match c.downcast_ref() {
            Some(histfit_infer::InferError::AboveBound { bound }) => Some(*bound),
            _ => None,
        });
        Failure {
            message: format!("{e:#}"),
            limit_above,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A computed grid and what its document needs.
pub struct Grid<T> {
    pub labels: Vec<String>,
    pub points: Vec<Point<T>>,
    /// Measurement and POI of the first point that compiled.
    pub measurement: Option<String>,
    pub poi: Option<String>,
}

/// Runs `compute(evaluator, data, fit options)` for every selected patch, the data and options
/// those `fit` asks for at that point (observed or Asimov; fixed, started, bounded parameters).
pub fn run<T: Send>(
    model: &ModelArgs,
    fit: &FitArgs,
    grid: &GridArgs,
    compute: &(dyn Fn(&mut AnyEval, Dataset, &FitOptions) -> Result<T> + Sync),
) -> Result<Grid<T>> {
    let patchset = grid.patchset.as_deref().expect("a grid has a patchset");
    if model.patch.is_some() {
        bail!("--patch and --patchset: give one (--patchset runs every patch; --patches GLOB selects)");
    }
    let settings = model.settings()?;
    let base = read_json(&model.workspace)?;
    let ps = read_json(patchset)?;
    if !model.force {
        histfit_model::tools::check_patchset_digest(&base, &ps, patchset)?;
    }
    let (labels, mut points) = patch_points(&ps, patchset)?;
    if let Some(g) = &grid.patches {
        points.retain(|p| glob_match(g, &p.name));
        if points.is_empty() {
            bail!("--patches {g}: no patch of {patchset} matches");
        }
    }
    // Rows in the order a reader scans a mass grid: `_700_50` before `_700_400`.
    points.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    let device = model.device();
    let bar = progress::Bar::new("grid", points.len());
    type Header = (String, Option<String>, Vec<String>);
    let one = |p: &PatchPoint| -> Result<(T, Header)> {
        let mut v = base.clone();
        apply_patch_point(&mut v, &ps, p, patchset)?;
        let mut ws = workspace_from_value(&v, &model.workspace)?;
        model.apply_poi(&mut ws)?;
        let m = compile(&ws, model.measurement.as_deref(), &settings)
            .map_err(|e| anyhow::anyhow!("{}: {e}", model.workspace))?;
        let header = (
            m.measurement.clone(),
            m.poi_name().map(str::to_owned),
            m.warnings.clone(),
        );
        let observed = Dataset::observed(&m);
        let mut eval = crate::device::open(
            &crate::device::Likelihood::HistFactory(Arc::new(m)),
            device.clone(),
            false,
        )?;
        let options = fit.options(histfit_compute::Evaluator::space(&eval))?;
        let data = fit.data(&mut eval, observed, &options)?;
        let r = compute(&mut eval, data, &options)?;
        Ok((r, header))
    };
    let run_point = |p: &PatchPoint| {
        let r = one(p).map_err(|e| Failure::of(&e));
        bar.inc();
        r
    };
    // A GPU evaluates one point at a time (each point has its own model on the device); the
    // CPU runs points in parallel, each single-threaded inside.
    let results: Vec<_> = match &device {
        Device::Cpu => points.par_iter().map(run_point).collect(),
        _ => points.iter().map(run_point).collect(),
    };
    bar.finish();
    let mut header = None;
    let points: Vec<Point<T>> = points
        .into_iter()
        .zip(results)
        .map(|(patch, r)| match r {
            Ok((t, (measurement, poi, warnings))) => {
                header.get_or_insert((measurement, poi));
                Point {
                    patch,
                    result: Ok(t),
                    warnings,
                }
            }
            Err(e) => Point {
                patch,
                result: Err(e),
                warnings: Vec::new(),
            },
        })
        .collect();
    let warned = points.iter().filter(|p| !p.warnings.is_empty()).count();
    if warned > 0 {
        eprintln!(
            "warning: the workspace of {warned} points compiled with warnings (their \"workspace_warnings\")"
        );
    }
    let failed = points.iter().filter(|p| p.result.is_err()).count();
    if failed > 0 {
        eprintln!(
            "warning: {failed} of {} points failed (their \"error\" says why)",
            points.len()
        );
    }
    let (measurement, poi) = header.unzip();
    let poi = poi.flatten();
    Ok(Grid {
        labels,
        points,
        measurement,
        poi,
    })
}

/// CSV columns of a value with its expected band: `name`, `name_exp_minus2` … `name_exp_plus2`
/// (`exp` alone for the median), then `converged`.
pub fn band_columns(name: &str, exp: &str) -> Vec<String> {
    let mut c = vec![name.to_owned()];
    for s in ["_minus2", "_minus1", "", "_plus1", "_plus2"] {
        c.push(format!("{exp}{s}"));
    }
    c.push("converged".into());
    c
}

/// The CSV cells of [`band_columns`].
pub fn band_row(value: f64, band: [f64; 5], converged: bool) -> Vec<String> {
    std::iter::once(value)
        .chain(band)
        .map(csv_number)
        .chain([converged.to_string()])
        .collect()
}

/// The table's note on a point whose fits did not all converge.
pub fn convergence_note(converged: bool) -> &'static str {
    if converged {
        ""
    } else {
        "  (a fit did not converge)"
    }
}

impl<T: serde::Serialize> Grid<T> {
    pub fn failed(&self) -> usize {
        self.points.iter().filter(|p| p.result.is_err()).count()
    }

    /// 3 when some point failed (the others are still in the output), else success.
    pub fn exit_code(&self) -> std::process::ExitCode {
        if self.failed() > 0 {
            std::process::ExitCode::from(3)
        } else {
            std::process::ExitCode::SUCCESS
        }
    }

    /// Writes the CSV (see [`csv`](Self::csv)) where `--csv` asks for it.
    pub fn write_csv(
        &self,
        grid: &GridArgs,
        columns: &[String],
        row: impl Fn(&T) -> Vec<String>,
    ) -> Result<()> {
        match &grid.csv {
            Some(path) => crate::output::emit(&self.csv(columns, row), Some(path)),
            None => Ok(()),
        }
    }

    /// The grid's document: the common header, then one entry per point (its patch name and
    /// values, and the command's result fields or its error).
    pub fn json(&self, kind: &str, model: &ModelArgs, grid: &GridArgs) -> Result<String> {
        let settings = model.settings()?;
        let points: Vec<Value> = self
            .points
            .iter()
            .map(|p| {
                let mut v = json!({"patch": p.patch.name, "values": p.patch.values});
                match &p.result {
                    Ok(r) => {
                        if let (Value::Object(d), Ok(Value::Object(r))) =
                            (&mut v, serde_json::to_value(r))
                        {
                            d.extend(r);
                        }
                    }
                    Err(e) => {
                        v["error"] = json!(e.message);
                        if let Some(b) = e.limit_above {
                            v["limit_above"] = json!(b);
                        }
                    }
                }
                if !p.warnings.is_empty() {
                    v["workspace_warnings"] = json!(p.warnings);
                }
                v
            })
            .collect();
        let doc = json!({
            "kind": kind,
            "workspace": model.workspace,
            "patchset": grid.patchset,
            "measurement": self.measurement,
            "interpolation": {"normsys": settings.normsys.name(), "histosys": settings.histosys.name()},
            "poi": self.poi,
            "labels": self.labels,
            "n_points": self.points.len(),
            "failed": self.failed(),
            "points": points,
        });
        Ok(serde_json::to_string_pretty(&doc)? + "\n")
    }

    /// CSV rows: the patch, its values, then `columns` of each result (empty where the point
    /// failed, with its error in the last column).
    pub fn csv(&self, columns: &[String], row: impl Fn(&T) -> Vec<String>) -> String {
        let mut s = String::from("patch");
        for l in &self.labels {
            s.push_str(&format!(",{}", csv_field(l)));
        }
        for c in columns {
            s.push_str(&format!(",{c}"));
        }
        s.push_str(",error\n");
        for p in &self.points {
            s.push_str(&csv_field(&p.patch.name));
            for k in 0..self.labels.len() {
                let v = p.patch.values.get(k).map(value_text).unwrap_or_default();
                s.push_str(&format!(",{}", csv_field(&v)));
            }
            match &p.result {
                Ok(r) => {
                    for c in row(r) {
                        s.push_str(&format!(",{c}"));
                    }
                    s.push_str(",\n");
                }
                Err(e) => {
                    s.push_str(&",".repeat(columns.len()));
                    s.push_str(&format!(",{}\n", csv_field(&e.message)));
                }
            }
        }
        s
    }

    /// A readable table: a row per point (the patch, then `row` of its result or its error).
    pub fn table(&self, head: &str, row: impl Fn(&T) -> String) -> String {
        let width = self
            .points
            .iter()
            .map(|p| p.patch.name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let mut s = format!("{:<width$}  {head}\n", "patch");
        for p in &self.points {
            match &p.result {
                Ok(r) => s.push_str(&format!("{:<width$}  {}\n", p.patch.name, row(r))),
                Err(e) => s.push_str(&format!("{:<width$}  failed: {e}\n", p.patch.name)),
            }
        }
        s
    }
}

fn value_text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// A number as a spreadsheet or pandas reads it back exactly: the shortest decimal that round-
/// trips, in positional notation for magnitudes from 1e-4 to 1e15 and scientific outside.
pub fn csv_number(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || !v.is_finite() || (1e-4..1e15).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Compares names as a person orders them: runs of digits by their value, the rest as text, so
/// that `C1N2_700_50` comes before `C1N2_700_400`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> impl Iterator<Item = (bool, &str)> {
        let mut rest = s;
        std::iter::from_fn(move || {
            let first = rest.chars().next()?;
            let digit = first.is_ascii_digit();
            let end = rest
                .find(|c: char| c.is_ascii_digit() != digit)
                .unwrap_or(rest.len());
            let (chunk, tail) = rest.split_at(end);
            rest = tail;
            Some((digit, chunk))
        })
    }
    let number = |d: &str| {
        let t = d.trim_start_matches('0');
        (t.len(), t.to_owned())
    };
    let mut x = chunks(a);
    let mut y = chunks(b);
    loop {
        let ord = match (x.next(), y.next()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some((true, p)), Some((true, q))) => number(p).cmp(&number(q)),
            (Some((_, p)), Some((_, q))) => p.cmp(q),
        };
        if ord.is_ne() {
            return ord;
        }
    }
}

/// A CSV field, quoted where it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Shell-style wildcards: `*` any run of characters, `?` one character.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Greedy match with one backtrack point for the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        // A `*` in the pattern is always a wildcard, even where the name has one too.
        if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::{csv_number, glob_match, natural_cmp};

    /// Grid rows in mass order and CSV numbers as people write them (issue 52, item 8).
    #[test]
    fn names_in_natural_order_and_plain_numbers() {
        let mut names = [
            "C1N2_700_400",
            "C1N2_700_50",
            "C1N2_1000_0",
            "C1N2_700_050x",
            "C1N2_700",
        ];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            [
                "C1N2_700",
                "C1N2_700_50",
                "C1N2_700_050x",
                "C1N2_700_400",
                "C1N2_1000_0"
            ]
        );
        assert_eq!(csv_number(0.8476608695095137), "0.8476608695095137");
        assert_eq!(csv_number(2.5), "2.5");
        assert_eq!(csv_number(-3.0), "-3");
        assert_eq!(csv_number(0.0), "0");
        assert_eq!(csv_number(1.5e-7), "1.5e-7");
        assert_eq!(csv_number(f64::NAN), "NaN");
        for v in [0.8476608695095137, 1.2345678901234567e-5, 123456.789, 3e20] {
            assert_eq!(csv_number(v).parse::<f64>().unwrap(), v);
        }
    }

    #[test]
    fn wildcards() {
        assert!(glob_match("C1N2_Wh_hbb_*_0", "C1N2_Wh_hbb_1000_0"));
        assert!(!glob_match("C1N2_Wh_hbb_*_0", "C1N2_Wh_hbb_1000_150"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a?c*", "abcdef"));
        assert!(!glob_match("a?c", "abcd"));
        assert!(glob_match("*_*_*", "x_y_z"));
        assert!(glob_match("a*", "a*b"));
        assert!(glob_match("*", "*"));
    }
}

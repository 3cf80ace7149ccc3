//! A dataset's events from a ROOT TTree (`histfit_source` with `"format": "root"`):
//!
//! ```json
//! {"type": "unbinned", "name": "data", "axes": [{"name": "x", "min": 60, "max": 120}],
//!  "histfit_source": {"format": "root", "file": "events.root", "tree": "events",
//!                     "columns": {"x": "mass / 1000"}, "weight": "w * sf",
//!                     "selection": "pt > 20 && nJets >= 2", "outside": "drop"}}
//! ```
//!
//! Each observable's column, the weight and the selection are expressions over the tree's branches
//! in the language of `generic_function` ([`crate::expr`]: arithmetic, functions, comparisons,
//! `&& || !`); a bare branch name is the simplest. An observable's expression defaults to the
//! branch of its own name. The branches the expressions name are read whole (histfit's own ROOT
//! reader, `histfit_events::tree`), the selection keeps the entries where it is not 0, and of
//! those an event outside an observable's domain is an error naming the observable and the count,
//! or, with `"outside": "drop"`, dropped and counted. A weight that is negative or not finite is
//! an error naming the entry.

use crate::expr;
use crate::graph::{Graph, Id};
use crate::model::Observable;
use histfit_seam::EventTable;
use std::path::PathBuf;

/// What to read from a tree, as the document says it.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeSource {
    pub file: PathBuf,
    pub tree: String,
    /// Each observable's expression, in the dataset's axis order.
    pub columns: Vec<(Observable, String)>,
    pub weight: Option<String>,
    pub selection: Option<String>,
    pub drop_outside: bool,
}

/// The events read, with the counts left out.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeEvents {
    pub table: EventTable,
    /// Entries the selection left out.
    pub not_selected: usize,
    /// Selected entries outside the domains, dropped (`outside: "drop"`).
    pub dropped: usize,
}

/// Where reading failed: the document's key (`columns.x`, `selection`, …, or "" for the file) and
/// the rule.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeError {
    pub key: String,
    pub rule: String,
}

fn fail(key: impl Into<String>, rule: impl Into<String>) -> TreeError {
    TreeError {
        key: key.into(),
        rule: rule.into(),
    }
}

/// The expressions parsed into one graph whose columns are the branches they name.
struct Parsed {
    graph: Graph,
    branches: Vec<String>,
    /// The key of the expression that first names each branch (where a missing one is said).
    named_at: Vec<String>,
    columns: Vec<Id>,
    weight: Option<Id>,
    selection: Option<Id>,
}

fn parse(src: &TreeSource) -> Result<Parsed, TreeError> {
    let mut graph = Graph::new();
    let mut branches: Vec<String> = Vec::new();
    let mut named_at: Vec<String> = Vec::new();
    let mut one = |graph: &mut Graph, key: &str, text: &str| -> Result<Id, TreeError> {
        let mut resolve = |g: &mut Graph, name: &str| -> Result<Id, String> {
            let j = match branches.iter().position(|b| b == name) {
                Some(j) => j,
                None => {
                    branches.push(name.to_string());
                    named_at.push(key.to_string());
                    branches.len() - 1
                }
            };
            Ok(g.column(j))
        };
        expr::parse(graph, text, &mut resolve).map_err(|e| {
            fail(
                key,
                format!("the expression \"{text}\" does not parse: {e}"),
            )
        })
    };
    let columns = src
        .columns
        .iter()
        .map(|(o, text)| one(&mut graph, &format!("columns.{}", o.name), text))
        .collect::<Result<Vec<_>, _>>()?;
    let weight = match &src.weight {
        Some(w) => Some(one(&mut graph, "weight", w)?),
        None => None,
    };
    let selection = match &src.selection {
        Some(s) => Some(one(&mut graph, "selection", s)?),
        None => None,
    };
    Ok(Parsed {
        graph,
        branches,
        named_at,
        columns,
        weight,
        selection,
    })
}

/// Reads the tree's branches and computes the events.
pub fn read(src: &TreeSource) -> Result<TreeEvents, TreeError> {
    let p = parse(src)?;
    let mut tree = histfit_events::TreeFile::open(&src.file, &src.tree)
        .map_err(|e| fail("", e.to_string()))?;
    // A name that is no branch is said at the expression that uses it.
    let have = tree.branches();
    if let Some(j) = p.branches.iter().position(|b| !have.contains(&b.as_str())) {
        return Err(fail(
            &p.named_at[j],
            format!(
                "\"{}\" is no branch of tree \"{}\" in {} (it has {})",
                p.branches[j],
                src.tree,
                src.file.display(),
                listed(&have)
            ),
        ));
    }
    let values = p
        .branches
        .iter()
        .zip(&p.named_at)
        .map(|(b, at)| tree.read(b).map_err(|e| fail(at, e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let n = values.first().map_or(0, Vec::len);
    let n_obs = src.columns.len();
    let mut table = EventTable {
        names: src.columns.iter().map(|(o, _)| o.name.clone()).collect(),
        columns: vec![Vec::with_capacity(n); n_obs],
        weights: p.weight.map(|_| Vec::with_capacity(n)),
    };
    let mut outside = vec![0usize; n_obs];
    let (mut not_selected, mut dropped) = (0, 0);
    let mut row = vec![0.0; p.branches.len()];
    let mut nodes = vec![0.0; p.graph.ops().len()];
    let mut obs = vec![0.0; n_obs];
    for i in 0..n {
        for (r, v) in row.iter_mut().zip(&values) {
            *r = v[i];
        }
        p.graph.eval_all(&[], &row, &mut nodes);
        if let Some(s) = p.selection {
            let keep = nodes[s.0 as usize];
            if keep.is_nan() {
                return Err(fail("selection", format!("is not a number at entry {i}")));
            }
            if keep == 0.0 {
                not_selected += 1;
                continue;
            }
        }
        let mut inside = true;
        for (k, (&id, (o, _))) in p.columns.iter().zip(&src.columns).enumerate() {
            let x = nodes[id.0 as usize];
            obs[k] = x;
            // (NaN is outside every domain.)
            if !(x >= o.lo && x <= o.hi) {
                outside[k] += 1;
                inside = false;
            }
        }
        if !inside {
            dropped += 1;
            continue;
        }
        if let (Some(w), Some(ws)) = (p.weight, table.weights.as_mut()) {
            let w = nodes[w.0 as usize];
            if !(w.is_finite() && w >= 0.0) {
                return Err(fail(
                    "weight",
                    format!("{w} at entry {i}: weights must be finite and not negative"),
                ));
            }
            ws.push(w);
        }
        for (c, &x) in table.columns.iter_mut().zip(&obs) {
            c.push(x);
        }
    }
    if !src.drop_outside {
        if let Some(k) = outside.iter().position(|&c| c > 0) {
            let (o, text) = &src.columns[k];
            return Err(fail(
                format!("columns.{}", o.name),
                format!(
                    "{} selected events of \"{text}\" lie outside the domain [{}, {}] of observable \"{}\" (\"outside\": \"drop\" drops them)",
                    outside[k], o.lo, o.hi, o.name
                ),
            ));
        }
    }
    Ok(TreeEvents {
        table,
        not_selected,
        dropped,
    })
}

/// Names for a message: all of them up to 20, else the first 20 and how many more.
fn listed(names: &[&str]) -> String {
    match names.len() {
        0..=20 => names.join(", "),
        n => format!("{}, … and {} more", names[..20].join(", "), n - 20),
    }
}

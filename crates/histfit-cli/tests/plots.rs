//! `histfit plot`: every kind drawn from the document of the command that made its numbers, as a
//! valid SVG (parsed as XML, its labels present) and a PNG (signature and size), and the values
//! drawn (`--json`) equal to the document's.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> String {
    histfit_testutil::fixture(name)
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("histfit-plots-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn histfit(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs a command with `--json -o FILE` and returns the document.
fn document(name: &str, args: &[&str]) -> (String, Value) {
    let path = dir().join(format!("{name}.json"));
    let p = path.to_str().unwrap();
    let mut all = args.to_vec();
    all.extend(["--json", "-o", p]);
    let out = histfit(&all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        p.to_string(),
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap(),
    )
}

/// Draws `kind` from `doc` as SVG and PNG, checks both files, and returns what was drawn.
fn plot(kind: &str, doc: &str, extra: &[&str]) -> Value {
    let base = dir().join(format!(
        "{kind}-{}",
        Path::new(doc).file_stem().unwrap().to_str().unwrap()
    ));
    let svg = base.with_extension("svg");
    let png = base.with_extension("png");
    let mut drawn = Value::Null;
    for file in [&svg, &png] {
        let mut args = vec!["plot", kind, doc, "-o", file.to_str().unwrap(), "--json"];
        args.extend(extra);
        let out = histfit(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        drawn = serde_json::from_slice(&out.stdout).unwrap();
    }
    let (w, h) = (
        drawn["figure"]["width"].as_u64().unwrap(),
        drawn["figure"]["height"].as_u64().unwrap(),
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let xml =
        roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{kind}: invalid SVG: {e}"));
    assert_eq!(xml.root_element().tag_name().name(), "svg");
    assert_eq!(
        xml.root_element().attribute("width"),
        Some(w.to_string().as_str())
    );
    // Every labelled series appears in the legend.
    for panel in drawn["figure"]["panels"].as_array().unwrap() {
        for s in panel["elements"].as_array().unwrap() {
            if let Some(label) = s["label"].as_str() {
                if panel["legend"] == true {
                    assert!(
                        text.contains(&escape(label)),
                        "{kind}: legend lacks {label}"
                    );
                }
            }
        }
    }
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{kind}: not a PNG");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as u64;
    assert_eq!((be(16), be(20)), (w, h), "{kind}: PNG size");
    drawn
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn series<'a>(drawn: &'a Value, panel: usize, label: &str) -> &'a Value {
    drawn["figure"]["panels"][panel]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == label)
        .unwrap_or_else(|| panic!("no series {label}"))
}

#[test]
fn brazil_and_scan_draw_the_documents_values() {
    let ws = fixture("simple_workspace.json");
    let (doc, limit) = document("limit", &["limit", &ws, "--scan", "0:5:11"]);
    let drawn = plot("brazil", &doc, &[]);
    let mut evals: Vec<&Value> = limit["evaluations"].as_array().unwrap().iter().collect();
    evals.sort_by(|a, b| {
        a["mu"]
            .as_f64()
            .unwrap()
            .total_cmp(&b["mu"].as_f64().unwrap())
    });
    let obs = series(&drawn, 0, "observed");
    assert_eq!(
        floats(&obs["xs"]),
        evals
            .iter()
            .map(|e| e["mu"].as_f64().unwrap())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        floats(&obs["ys"]),
        evals
            .iter()
            .map(|e| e["cls_obs"].as_f64().unwrap())
            .collect::<Vec<_>>()
    );
    let band = series(&drawn, 0, "expected ±2σ");
    assert_eq!(
        floats(&band["hi"]),
        evals
            .iter()
            .map(|e| e["cls_exp"][4].as_f64().unwrap())
            .collect::<Vec<_>>()
    );
    let median = series(&drawn, 0, "expected");
    assert_eq!(
        floats(&median["ys"]),
        evals
            .iter()
            .map(|e| e["cls_exp"][2].as_f64().unwrap())
            .collect::<Vec<_>>()
    );
    // The observed limit is marked where the document puts it.
    let texts: Vec<&Value> = drawn["figure"]["panels"][0]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == "text")
        .collect();
    assert!(texts.iter().any(|t| t["x"] == limit["obs"]));
    // Text grows with the picture (issue 52, item 7): twice the default size, twice the fonts.
    assert_eq!(drawn["figure"]["font_scale"], 1.0);
    let big = plot("brazil", &doc, &["--size", "1600x1200"]);
    assert_eq!(big["figure"]["font_scale"], 2.0);

    let (doc, scan) = document(
        "scan",
        &["scan", &ws, "--poi-range", "0:2", "--points", "9"],
    );
    let drawn = plot("scan", &doc, &[]);
    let line = series(&drawn, 0, "profile likelihood");
    let points = scan["points"].as_array().unwrap();
    assert_eq!(
        floats(&line["xs"]),
        points
            .iter()
            .map(|p| p["mu"].as_f64().unwrap())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        floats(&line["ys"]),
        points
            .iter()
            .map(|p| p["delta_twice_nll"].as_f64().unwrap())
            .collect::<Vec<_>>()
    );
    assert_eq!(floats(&series(&drawn, 0, "1σ")["ys"]), vec![1.0, 1.0]);
}

/// The constrained parameters of a fit document (those with a pull).
fn constrained(fit: &Value) -> Vec<&Value> {
    fit["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p.get("pull").is_some() && p["fixed"] != true)
        .collect()
}

/// One numeric field of each parameter.
fn field_of(params: &[&Value], key: &str) -> Vec<f64> {
    params.iter().map(|p| p[key].as_f64().unwrap()).collect()
}

/// Above the dense-Hessian limit the constraints are not computed (null): the pulls are drawn
/// without bars rather than refused.
#[test]
fn pulls_without_constraints_draw_without_bars() {
    let (doc, fit) = document(
        "fit-poi-only",
        &[
            "fit",
            &fixture("complex_workspace.json"),
            "--max-hessian-parameters",
            "1",
        ],
    );
    let constrained = constrained(&fit);
    assert!(!constrained.is_empty(), "{fit}");
    assert!(
        constrained.iter().all(|p| p["constraint"].is_null()),
        "{fit}"
    );
    let drawn = plot("pulls", &doc, &[]);
    let pulls = series(&drawn, 0, "pull ± constraint");
    assert_eq!(floats(&pulls["xs"]), field_of(&constrained, "pull"));
    assert!(pulls["x_err"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e[0].as_f64() == Some(0.0) && e[1].as_f64() == Some(0.0)));
}

#[test]
fn fit_documents_draw_pulls_and_correlations() {
    // lumi held at its nominal value has no pull to draw (issue 52, item 7: it was drawn 0 ± 0).
    let (doc, fit) = document(
        "fit",
        &["fit", &fixture("complex_workspace.json"), "--fix", "lumi=1"],
    );
    assert!(fit["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "lumi" && p["fixed"] == true && p.get("pull").is_some()));
    let drawn = plot("pulls", &doc, &[]);
    let pulls = series(&drawn, 0, "pull ± constraint");
    let constrained = constrained(&fit);
    assert_eq!(floats(&pulls["xs"]), field_of(&constrained, "pull"));
    let errors: Vec<f64> = pulls["x_err"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[0].as_f64().unwrap())
        .collect();
    assert_eq!(errors, field_of(&constrained, "constraint"));
    // Names on the y axis, first at the top.
    let ticks = drawn["figure"]["panels"][0]["y"]["ticks"]
        .as_array()
        .unwrap();
    assert_eq!(ticks[0][1], constrained[0]["name"]);

    let drawn = plot("correlation", &doc, &["--top", "4"]);
    let cells = floats(&drawn["figure"]["panels"][0]["elements"][0]["values"]);
    let names: Vec<String> = drawn["figure"]["panels"][0]["x"]["ticks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t[1].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 4);
    let index = |n: &str| {
        fit["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .position(|p| p["name"] == n)
            .unwrap()
    };
    for (a, na) in names.iter().enumerate() {
        for (b, nb) in names.iter().enumerate() {
            assert_eq!(
                cells[a * 4 + b],
                fit["correlation"][index(na)][index(nb)].as_f64().unwrap()
            );
        }
    }
    assert!(
        names.contains(&"mu".to_string()),
        "the POI is kept: {names:?}"
    );
    // Each cell's value written in it, and a colour bar from −1 to +1 beside the matrix (issue
    // 52, item 7).
    let texts: Vec<&str> = drawn["figure"]["panels"][0]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "text")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts.len(), 16);
    assert_eq!(texts[1], format!("{:.2}", cells[1]));
    let bar = &drawn["figure"]["panels"][1];
    assert_eq!(bar["y"]["label"], "correlation");
    let scale = floats(&bar["elements"][0]["values"]);
    assert!(
        scale[0] < -0.98 && scale[scale.len() - 1] > 0.98,
        "{scale:?}"
    );
}

#[test]
fn ranking_draws_impacts_and_pulls() {
    let (doc, ranking) = document("ranking", &["ranking", &fixture("complex_workspace.json")]);
    let drawn = plot("ranking", &doc, &["--top", "5"]);
    let entries = &ranking["entries"].as_array().unwrap()[..5];
    // Panels: the legend in a row of its own above the bars (where it hides none), the bars,
    // an empty place, the pulls.
    let panels = drawn["figure"]["panels"].as_array().unwrap();
    assert_eq!(panels[0]["axes"], false);
    assert_eq!(panels[1]["legend"], false);
    for (label, key) in [
        (
            "post-fit impact, θ at +1σ (post-fit σ)",
            "impact_postfit_up",
        ),
        ("pre-fit impact, θ at −1σ (pre-fit σ)", "impact_prefit_down"),
    ] {
        assert!(series(&drawn, 0, label)["rects"]
            .as_array()
            .unwrap()
            .is_empty());
        let rects = series(&drawn, 1, label)["rects"].as_array().unwrap();
        assert_eq!(rects.len(), entries.len(), "{label}");
        for (r, e) in rects.iter().zip(entries) {
            let v = e[key].as_f64().unwrap();
            let (lo, hi) = (r[0].as_f64().unwrap(), r[1].as_f64().unwrap());
            assert_eq!((lo, hi), (v.min(0.0), v.max(0.0)), "{label}");
        }
    }
    let pulls = series(&drawn, 3, "pull ± constraint");
    let with_pull: Vec<f64> = entries.iter().filter_map(|e| e["pull"].as_f64()).collect();
    assert_eq!(floats(&pulls["xs"]), with_pull);
    // The pull panel has the ±1σ and ±2σ bands, as the pulls plot.
    let bands: Vec<f64> = panels[3]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "rects")
        .map(|e| e["rects"][0][1].as_f64().unwrap())
        .collect();
    assert_eq!(bands, [2.0, 1.0]);
}

#[test]
fn yields_stack_the_samples_over_the_data() {
    let (_, mut yields) = document(
        "yields",
        &["yields", &fixture("complex_workspace.json"), "--postfit"],
    );
    // The samples in reverse, so that the signal comes first in the document: it is still
    // stacked on top (issue 52, item 7).
    for ch in yields["channels"].as_array_mut().unwrap() {
        ch["samples"].as_array_mut().unwrap().reverse();
    }
    assert!(yields["channels"]
        .as_array()
        .unwrap()
        .iter()
        .any(|ch| ch["samples"][0]["signal"] == true && ch["samples"][1]["signal"] == false));
    let path = dir().join("yields-reversed.json");
    std::fs::write(&path, yields.to_string()).unwrap();
    let drawn = plot("yields", path.to_str().unwrap(), &[]);
    for (c, ch) in yields["channels"].as_array().unwrap().iter().enumerate() {
        let panel = c * 2;
        let mut stacked = vec![0.0; floats(&ch["data"]).len()];
        // The signal (the samples the POI scales) stacked on top of the backgrounds.
        let mut samples: Vec<&Value> = ch["samples"].as_array().unwrap().iter().collect();
        samples.sort_by_key(|s| s["signal"] == true);
        for s in samples {
            let rects = series(&drawn, panel, s["name"].as_str().unwrap())["rects"]
                .as_array()
                .unwrap();
            for (b, y) in floats(&s["yields"]).iter().enumerate() {
                assert_eq!(rects[b][2].as_f64().unwrap(), stacked[b]);
                stacked[b] += y;
                assert_eq!(rects[b][3].as_f64().unwrap(), stacked[b]);
            }
        }
        assert_eq!(
            floats(&series(&drawn, panel, "data")["ys"]),
            floats(&ch["data"])
        );
        let total = floats(&ch["total"]["yields"]);
        let ratio = &drawn["figure"]["panels"][panel + 1]["elements"][2];
        assert_eq!(floats(&ratio["ys"]).len(), total.len());
        for (b, r) in floats(&ratio["ys"]).iter().enumerate() {
            assert_eq!(*r, floats(&ch["data"])[b] / total[b]);
        }
    }
}

#[test]
fn the_contour_of_a_grid_document() {
    // A grid document as `limit --patchset` writes it: limits falling with m1.
    let mut points = Vec::new();
    for m1 in [100.0, 200.0, 300.0, 400.0] {
        for m2 in [0.0, 50.0, 100.0] {
            let l = m1 / 250.0;
            points.push(
                serde_json::json!({"patch": format!("p_{m1}_{m2}"), "values": [m1, m2],
                "obs": l, "exp": [0.6 * l, 0.8 * l, l, 1.25 * l, 1.6 * l]}),
            );
        }
    }
    points
        .push(serde_json::json!({"patch": "failed", "values": [500.0, 0.0], "error": "no limit"}));
    // A point whose limit lies above the POI's bound is not excluded, not an error (issue 52,
    // item 7: it was marked red "no limit (error)").
    points.push(
        serde_json::json!({"patch": "above", "values": [100.0, 150.0],
        "error": "CLs stays above α up to the POI's upper bound 10", "limit_above": 10.0}),
    );
    let doc = serde_json::json!({"kind": "limit", "labels": ["m1", "m2"], "points": points});
    let path = dir().join("grid.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let drawn = plot("contour", path.to_str().unwrap(), &[]);
    // ln(limit) is interpolated linearly between the grid's m1 = 200 and 300: the observed and
    // expected contours cross at 200 + 100·ln(1.25)/ln(1.5), every m2.
    let crossing = 200.0 + 100.0 * (1.25f64).ln() / 1.5f64.ln();
    for label in ["observed limit = 1", "expected limit = 1"] {
        let segments = series(&drawn, 0, label)["segments"].as_array().unwrap();
        assert_eq!(
            segments.len(),
            4,
            "{label}: one segment per triangle crossed"
        );
        for seg in segments {
            for p in seg.as_array().unwrap() {
                assert!(
                    (p[0].as_f64().unwrap() - crossing).abs() < 1e-9,
                    "{label}: {p}"
                );
            }
        }
    }
    // The ±1σ band: expected −1σ limit (0.8·m1/250) below 1 and +1σ limit (1.25·m1/250) above.
    let polygons = series(&drawn, 0, "expected ±1σ")["polygons"]
        .as_array()
        .unwrap();
    assert!(!polygons.is_empty());
    let (lo, hi) = (
        200.0,
        300.0 + 100.0 * (1.0f64 / 0.96).ln() / (1.28f64 / 0.96).ln(),
    );
    for poly in polygons {
        for p in poly.as_array().unwrap() {
            let x = p[0].as_f64().unwrap();
            assert!(
                x >= lo - 1e-9 && x <= hi + 1e-9,
                "band vertex {p} outside [{lo}, {hi}]"
            );
        }
    }
    assert_eq!(
        floats(&series(&drawn, 0, "no limit (error)")["xs"]),
        vec![500.0]
    );
    assert_eq!(
        floats(&series(&drawn, 0, "limit above the POI bound (not excluded)")["ys"]),
        vec![150.0]
    );
}

#[test]
fn plot_errors_are_one_line() {
    let (doc, _) = document(
        "fit-for-errors",
        &["fit", &fixture("simple_workspace.json")],
    );
    for (args, needle) in [
        (
            vec!["plot", "brazil", doc.as_str(), "-o", "/tmp/x.svg"],
            "histfit limit",
        ),
        (
            vec!["plot", "pulls", doc.as_str(), "-o", "/tmp/x.jpg"],
            "must end in .svg or .png",
        ),
        (
            vec![
                "plot",
                "pulls",
                doc.as_str(),
                "-o",
                "/nonexistent/dir/x.png",
            ],
            "directory does not exist",
        ),
        (
            vec![
                "plot",
                "pulls",
                doc.as_str(),
                "-o",
                "/tmp/x.svg",
                "--size",
                "5x5",
            ],
            "--size",
        ),
        (
            vec!["plot", "scan", "/nonexistent.json", "-o", "/tmp/x.svg"],
            "nonexistent.json",
        ),
    ] {
        let out = histfit(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{stderr}");
        assert!(lines[0].contains(needle), "{args:?}: {stderr}");
    }
}

/// A sample keeps one colour by its name in every panel, no two samples share a colour, and the
/// legend names every sample of every channel once, in its colour (tHu: channels stack different
/// sample subsets in different orders, with more than ten samples).
#[test]
fn yields_colour_each_sample_by_name_across_panels() {
    let (doc, yields) = document("yields-thu", &["yields", &fixture("workspace_tHu.json")]);
    let drawn = plot("yields", &doc, &[]);
    let mut colour_of: std::collections::HashMap<String, Value> = Default::default();
    let mut legend: Vec<(String, Value)> = Vec::new();
    for panel in drawn["figure"]["panels"].as_array().unwrap() {
        for e in panel["elements"].as_array().unwrap() {
            let (Some(label), "rects") = (e["label"].as_str(), e["type"].as_str().unwrap()) else {
                continue;
            };
            if panel["axes"] == false {
                legend.push((label.to_string(), e["color"].clone()));
                continue;
            }
            let seen = colour_of
                .entry(label.to_string())
                .or_insert_with(|| e["color"].clone());
            assert_eq!(*seen, e["color"], "{label} drawn in two colours");
        }
    }
    let mut names: Vec<String> = Vec::new();
    for ch in yields["channels"].as_array().unwrap() {
        for s in ch["samples"].as_array().unwrap() {
            let n = s["name"].as_str().unwrap().to_string();
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    assert!(names.len() > 10, "tHu has {} samples", names.len());
    assert_eq!(colour_of.len(), names.len());
    let distinct: std::collections::HashSet<String> =
        colour_of.values().map(|c| c.to_string()).collect();
    assert_eq!(distinct.len(), names.len(), "two samples share a colour");
    for n in &names {
        let entries: Vec<_> = legend.iter().filter(|(l, _)| l == n).collect();
        assert_eq!(
            entries.len(),
            1,
            "{n} is in the legend {} times",
            entries.len()
        );
        assert_eq!(entries[0].1, colour_of[n], "{n}'s legend colour");
    }
}

/// The plot of an event-level fit: the document's events per bin as the data points, the
/// expected counts as the fit's step and each component's, the pulls in the panel under it; the
/// components add up to the fit, and the events to the dataset.
#[test]
fn event_level_fits_draw_their_distributions() {
    let (doc, d) = document(
        "distributions",
        &[
            "distributions",
            &fixture("hs3/gauss_exp_ext.json"),
            "--bins",
            "20",
        ],
    );
    assert_eq!(d["kind"], "distributions");
    let c = &d["channels"][0];
    let (counts, expected) = (floats(&c["counts"]), floats(&c["expected"]));
    assert_eq!(counts.len(), 20);
    let comps: Vec<Vec<f64>> = c["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| floats(&x["expected"]))
        .collect();
    assert_eq!(comps.len(), 2);
    for k in 0..20 {
        let sum: f64 = comps.iter().map(|v| v[k]).sum();
        assert!((sum - expected[k]).abs() <= 1e-9 * expected[k], "bin {k}");
    }
    // Post-fit, the expected total is the fitted yields' sum: the events' count.
    let (n, e): (f64, f64) = (counts.iter().sum(), expected.iter().sum());
    assert!((n - e).abs() < 1e-3 * n, "{n} events, {e} expected");
    let drawn = plot("distributions", &doc, &[]);
    let data = series(&drawn, 0, "data");
    assert_eq!(floats(&data["ys"]), counts);
    let fit = series(&drawn, 0, "fit");
    let steps: Vec<f64> = expected.iter().flat_map(|v| [*v, *v]).collect();
    assert_eq!(floats(&fit["ys"]), steps);
    let pulls = &drawn["figure"]["panels"][1]["elements"][0]["rects"];
    assert_eq!(pulls.as_array().unwrap().len(), 20);
    // A binned workspace: its counts per bin are `yields`.
    let out = histfit(&["distributions", &fixture("simple_workspace.json")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("histfit yields"));
}

/// A style file: sample colours and legend labels, stack order, labels with units, log-y, a
/// region's overrides and the experiment label, all in what is drawn; one figure per region;
/// a misspelt key named.
#[test]
fn a_style_file_sets_colours_order_labels_and_log_axes() {
    let (doc, yields) = document(
        "yields-style",
        &["yields", &fixture("simple_workspace.json")],
    );
    let channel = yields["channels"][0]["name"].as_str().unwrap().to_string();
    let samples: Vec<String> = yields["channels"][0]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    assert!(samples.len() >= 2);
    // The last sample of the model at the bottom of the stack.
    let (first, last) = (&samples[0], &samples[samples.len() - 1]);
    let style = serde_json::json!({
        "experiment": "ATLAS", "status": "Internal", "text": "√s = 13 TeV, 139 fb⁻¹",
        "x_label": "m_T2", "x_unit": "GeV", "y_label": "Events", "log_y": true,
        "samples": {first.as_str(): {"color": "#ff0000", "label": "first sample"}},
        "order": [last],
        "regions": {channel.as_str(): {"title": "Signal region"}}
    });
    let path = dir().join("style.json");
    std::fs::write(&path, style.to_string()).unwrap();
    let drawn = plot("yields", &doc, &["--style", path.to_str().unwrap()]);
    let panels = drawn["figure"]["panels"].as_array().unwrap();
    let main = panels
        .iter()
        .find(|p| p["region"] == channel.as_str())
        .expect("the channel's panel");
    assert_eq!(main["title"], "Signal region");
    assert_eq!(main["y"]["label"], "Events");
    let ticks = main["y"]["ticks"].as_array().expect("log-y ticks");
    assert!(
        ticks.iter().any(|t| t[1] == "10" || t[1] == "100"),
        "{ticks:?}"
    );
    let rects: Vec<&Value> = main["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "rects")
        .collect();
    // Stack order: the style's first, at the bottom (its bar starts at the axis floor).
    assert_eq!(rects[0]["label"], last.as_str());
    let mine = rects
        .iter()
        .find(|e| e["label"] == "first sample")
        .expect("the relabelled sample");
    assert_eq!(mine["color"]["rgb"], serde_json::json!([255, 0, 0]));
    // Heights drawn as log10: the bottom bar's top is log10 of its yield in bin 0.
    let y0 = yields["channels"][0]["samples"][samples.len() - 1]["yields"][0]
        .as_f64()
        .unwrap();
    assert!((rects[0]["rects"][0][3].as_f64().unwrap() - y0.log10()).abs() < 1e-9);
    let texts: Vec<&str> = main["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert!(texts.contains(&"ATLAS Internal") && texts.contains(&"√s = 13 TeV, 139 fb⁻¹"));
    // The x label on the ratio panel under it, with its unit.
    let at = panels
        .iter()
        .position(|p| p["region"] == channel.as_str())
        .unwrap();
    assert_eq!(panels[at + 1]["x"]["label"], "m_T2 [GeV]");

    // One figure per region, named after it.
    let out = dir().join("per-region.svg");
    let o = histfit(&[
        "plot",
        "yields",
        &doc,
        "-o",
        out.to_str().unwrap(),
        "--per-region",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    let figures = d["figures"].as_array().unwrap();
    assert_eq!(figures.len(), yields["channels"].as_array().unwrap().len());
    assert!(dir().join(format!("per-region_{channel}.svg")).is_file());

    // A misspelt key, and a category axis made logarithmic, are errors naming them.
    let refused = |kind: &str, doc: &str, style: &str, needle: &str| {
        std::fs::write(&path, style).unwrap();
        let args = [kind, doc, "-o", out.to_str().unwrap(), "--style"];
        let mut all = vec!["plot"];
        all.extend(args);
        all.push(path.to_str().unwrap());
        let o = histfit(&all);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(needle), "{stderr}");
    };
    refused("yields", &doc, r#"{"logy": true}"#, "logy");
    let (fit, _) = document("fit-style", &["fit", &fixture("simple_workspace.json")]);
    refused("pulls", &fit, r#"{"log_y": true}"#, "log_y");
    // A region or sample the document lacks is a warning (one style file serves every plot).
    std::fs::write(
        &path,
        r#"{"regions": {"SRX": {}}, "order": ["ttbarr"], "samples": {"data": {"label": "Data"}}}"#,
    )
    .unwrap();
    let o = histfit(&[
        "plot",
        "yields",
        &doc,
        "-o",
        out.to_str().unwrap(),
        "--style",
        path.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: style: region \"SRX\" matches nothing"),
        "{stderr}"
    );
    assert!(stderr.contains("order entry \"ttbarr\""), "{stderr}");
    assert!(!stderr.contains("sample \"data\""), "{stderr}");
}

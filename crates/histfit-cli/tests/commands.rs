//! End-to-end runs of the `histfit` binary: JSON output of `fit` and `inspect`, patches, fixing.

use serde_json::Value;
use std::process::Command;

fn fixture(name: &str) -> String {
    histfit_testutil::fixture(name)
}

fn run_json(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn fit_json_reports_pyhf_minimum() {
    let v = run_json(&["fit", &fixture("simple_workspace.json"), "--json"]);
    assert_eq!(v["converged"], true);
    assert_eq!(v["poi"], "mu");
    // pyhf 0.7.6 best twice_nll 24.7179938878 (scipy); histfit finds the same minimum or lower.
    let t = v["twice_nll"].as_f64().unwrap();
    assert!(t <= 24.7179938878 + 1e-6 && t > 24.71799, "{t}");
    let pars = v["parameters"].as_array().unwrap();
    assert_eq!(pars.len(), 3);
    assert!((pars[0]["value"].as_f64().unwrap() - 0.524521).abs() < 1e-4);
    assert!(pars[1]["pull"].is_number() && pars[1]["constraint"].is_number());
    assert_eq!(v["correlation"].as_array().unwrap().len(), 3);
}

#[test]
fn fix_holds_a_parameter() {
    let v = run_json(&[
        "fit",
        &fixture("simple_workspace.json"),
        "--fix",
        "mu=2",
        "--json",
    ]);
    let pars = v["parameters"].as_array().unwrap();
    assert_eq!(pars[0]["value"], 2.0);
    assert_eq!(pars[0]["fixed"], true);
    assert_eq!(pars[0]["uncertainty"], 0.0);
    assert!(v["twice_nll"].as_f64().unwrap() > 24.72);
}

#[test]
fn patch_is_applied_before_fitting() {
    let ws = fixture("simple_workspace.json");
    let patch = format!("{}:signal_100", fixture("simple_patchset.json"));
    let patched = run_json(&["fit", &ws, "--patch", &patch, "--json"]);
    let plain = run_json(&["fit", &ws, "--json"]);
    // The patch quadruples the signal: μ̂ drops accordingly.
    let mu_p = patched["parameters"][0]["value"].as_f64().unwrap();
    let mu = plain["parameters"][0]["value"].as_f64().unwrap();
    assert!(mu_p < 0.5 * mu, "{mu_p} vs {mu}");
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args([
            "fit",
            &ws,
            "--patch",
            &format!("{}:signal_999", fixture("simple_patchset.json")),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no patch named \"signal_999\""));
}

#[test]
fn inspect_lists_the_model() {
    let v = run_json(&["inspect", &fixture("workspace_tHu.json"), "--json"]);
    assert_eq!(v["poi"], "SigXsecOverSM");
    assert_eq!(v["n_bins"], 41);
    assert_eq!(v["n_parameters"], 184);
    assert_eq!(v["channels"].as_array().unwrap().len(), 11);
    let text = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["inspect", &fixture("complex_workspace.json")])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("POI: mu") && text.contains("staterror") && text.contains("CR"),
        "{text}"
    );
}

#[test]
fn interpolation_settings_change_the_model() {
    let ws = fixture("workspace_tHu.json");
    let a = run_json(&["inspect", &ws, "--json", "--interp-defaults", "pyhf"]);
    assert_eq!(a["interpolation"]["normsys"], "code1");
    assert_eq!(a["interpolation"]["histosys"], "code0");
    let b = run_json(&["inspect", &ws, "--json", "--interp", "normsys=code2"]);
    assert_eq!(b["interpolation"]["normsys"], "code2");
    assert_eq!(b["interpolation"]["histosys"], "code4p");
}

#[test]
fn inference_commands_report_json() {
    let ws = fixture("simple_workspace.json");
    // pyhf 0.7.6 (goldens): CLs obs 0.40567 at μ = 1, upper limit 2.13248.
    let h = run_json(&["hypotest", &ws, "--mu", "1", "--json"]);
    assert_eq!(h["poi"], "mu");
    assert!((h["cls_obs"].as_f64().unwrap() / 0.40567153850532806 - 1.0).abs() < 1e-4);
    assert_eq!(h["cls_exp"].as_array().unwrap().len(), 5);
    let l = run_json(&["limit", &ws, "--json"]);
    assert!((l["obs"].as_f64().unwrap() / 2.132479263101433 - 1.0).abs() < 1e-4);
    let ls = run_json(&["limit", &ws, "--scan", "0:5:51", "--json"]);
    assert!((ls["obs"].as_f64().unwrap() / 2.132479263101433 - 1.0).abs() < 1e-2);
    let s = run_json(&["significance", &ws, "--json"]);
    assert!(s["z_obs"].as_f64().unwrap() > 0.0 && s["p0_obs"].as_f64().unwrap() < 0.5);
    let sc = run_json(&["scan", &ws, "--poi-range", "0:2", "--points", "5", "--json"]);
    let pts = sc["points"].as_array().unwrap();
    assert_eq!(pts.len(), 5);
    assert!(pts
        .iter()
        .all(|p| p["delta_twice_nll"].as_f64().unwrap() >= 0.0 && p["converged"] == true));
    // Without a range the scan covers μ̂ ± 3σ̂ (issue 52, item 7: 0:3 missed tHu's μ̂ = −0.03 ±
    // 0.15): its ends sit at 2ΔNLL ≈ 9, the middle point at μ̂.
    let fit = run_json(&["fit", &ws, "--json"]);
    let (mu, sigma) = (
        fit["parameters"][0]["value"].as_f64().unwrap(),
        fit["parameters"][0]["uncertainty"].as_f64().unwrap(),
    );
    let sc = run_json(&["scan", &ws, "--points", "5", "--json"]);
    let pts = sc["points"].as_array().unwrap();
    let at = |i: usize| pts[i]["mu"].as_f64().unwrap();
    assert!(
        (at(0) - (mu - 3.0 * sigma).max(0.0)).abs() < 1e-6 * sigma,
        "{sc}"
    );
    assert!((at(4) - (mu + 3.0 * sigma)).abs() < 1e-6 * sigma, "{sc}");
    let top = pts[4]["delta_twice_nll"].as_f64().unwrap();
    assert!((5.0..13.0).contains(&top), "{sc}");
}

/// Negative numbers are values, not flags: `--mu -1` reaches the model's bounds check (the
/// simple workspace's POI is bounded below by 0) instead of failing to parse.
#[test]
fn negative_values_parse() {
    let ws = fixture("simple_workspace.json");
    for args in [
        vec!["hypotest", &ws, "--mu", "-1"],
        vec!["hypotest-toys", &ws, "--mu", "-1", "--n-toys", "2"],
        vec!["toys", &ws, "--mu", "-1", "--n-toys", "2"],
        vec!["scan", &ws, "--poi-range", "-1:1", "--points", "3"],
        vec!["limit", &ws, "--scan", "-1:1:3"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("bound"), "{args:?}: {err}");
    }
}

#[test]
fn inference_commands_reject_bad_requests() {
    let ws = fixture("simple_workspace.json");
    for args in [
        vec!["hypotest", &ws, "--mu", "50"],
        vec!["scan", &ws, "--poi-range", "3:1"],
        vec!["limit", &ws, "--alpha", "2"],
        vec!["hypotest", &ws, "--test-stat", "zz"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("error:") && !err.contains("panicked"),
            "{err}"
        );
    }
}

#[test]
fn sharded_toys_merge_to_one_run() {
    let ws = fixture("simple_workspace.json");
    let dir = std::env::temp_dir().join(format!("histfit-toys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (cmd, extra) in [("toys", vec![]), ("hypotest-toys", vec!["--mu", "1"])] {
        let path = |tag: &str| {
            dir.join(format!("{cmd}-{tag}.json"))
                .to_string_lossy()
                .into_owned()
        };
        let mut base: Vec<&str> = vec![cmd, &ws, "--n-toys", "30", "--seed", "3", "--json"];
        base.extend(&extra);
        let whole = path("whole");
        let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(&base)
            .args(["-o", &whole])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut shards = Vec::new();
        for k in 1..=3 {
            let p = path(&format!("shard{k}"));
            let shard = format!("{k}/3");
            let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
                .args(&base)
                .args(["--shard", &shard, "-o", &p])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            shards.push(p);
        }
        let merged = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .arg("merge-toys")
            .args(&shards)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            merged.status.success(),
            "{}",
            String::from_utf8_lossy(&merged.stderr)
        );
        let a: Value = serde_json::from_slice(&merged.stdout).unwrap();
        let b: Value = serde_json::from_str(&std::fs::read_to_string(&whole).unwrap()).unwrap();
        assert_eq!(a, b, "{cmd}: merged shards differ from the single run");
        // Two of three shards: refused with one line, or merged as partial with a warning.
        let partial = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .arg("merge-toys")
            .args(&shards[..2])
            .arg("--json")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&partial.stderr);
        assert_eq!(partial.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("the shards hold 20 of the ensemble's 30") && err.lines().count() == 1,
            "{cmd}: {err}"
        );
        let partial = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .arg("merge-toys")
            .args(&shards[..2])
            .args(["--json", "--allow-partial"])
            .output()
            .unwrap();
        assert!(partial.status.success(), "{cmd}");
        let p: Value = serde_json::from_slice(&partial.stdout).unwrap();
        assert!(
            p["warnings"][0]
                .as_str()
                .unwrap()
                .contains("merged as a partial ensemble"),
            "{p}"
        );
        // The same shard twice is refused.
        let twice = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(["merge-toys", &shards[0], &shards[0], &shards[1], &shards[2]])
            .output()
            .unwrap();
        assert_eq!(twice.status.code(), Some(2), "{cmd}");
    }
    // Mixing kinds is refused.
    let t = dir.join("toys-shard1.json").to_string_lossy().into_owned();
    let h = dir
        .join("hypotest-toys-shard1.json")
        .to_string_lossy()
        .into_owned();
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["merge-toys", &t, &h])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `histfit devices --json` always lists the CPU, and either CUDA devices or why there are none.
#[test]
fn devices_lists_the_cpu_and_cuda() {
    let v = run_json(&["devices", "--json"]);
    assert_eq!(v["kind"], "devices");
    assert!(v["cpu"]["threads"].as_u64().unwrap() >= 1);
    let gpus = v["cuda"].as_array().unwrap();
    assert!(!gpus.is_empty() || v["cuda_unavailable_reason"].as_str().is_some());
}

/// On a machine with no desktop session (no XDG_RUNTIME_DIR), listing wgpu's adapters prints
/// nothing on stderr: Mesa's device-select layer used to make libwayland print "error:
/// XDG_RUNTIME_DIR is invalid…" twice before every wgpu command succeeded (issue 52, item 4).
#[test]
fn wgpu_commands_print_no_display_errors_without_a_session() {
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["devices"])
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("NODEVICE_SELECT")
        .env_remove("MESA_VK_DEVICE_SELECT")
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
}

/// q̃ with a POI allowed below 0 is q in effect: said in the warnings (as pyhf warns), without
/// marking the result unconverged; with a POI bounded at 0, or with q, nothing is said.
#[test]
fn qtilde_with_a_negative_poi_bound_warns() {
    let mut ws: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("simple_workspace.json")).unwrap())
            .unwrap();
    ws["measurements"][0]["config"]["parameters"] =
        serde_json::json!([{"name": "mu", "bounds": [[-5.0, 10.0]]}]);
    let path = std::env::temp_dir().join(format!("histfit-negpoi-{}.json", std::process::id()));
    std::fs::write(&path, ws.to_string()).unwrap();
    let path = path.to_string_lossy().into_owned();
    let said = |v: &Value| {
        v["warnings"].as_array().unwrap().iter().any(|w| {
            w.as_str()
                .unwrap()
                .starts_with("qtilde with the POI's lower bound at -5")
        })
    };
    let h = run_json(&["hypotest", &path, "--mu", "1", "--json"]);
    assert!(said(&h) && h["converged"] == true, "{h}");
    let l = run_json(&["limit", &path, "--json"]);
    assert!(said(&l) && l["converged"] == true, "{l}");
    let q = run_json(&["hypotest", &path, "--mu", "1", "--test-stat", "q", "--json"]);
    assert!(!said(&q), "{q}");
    let at0 = run_json(&["hypotest", &fixture("simple_workspace.json"), "--json"]);
    assert!(!said(&at0), "{at0}");
}

/// Equal up to float rounding across machines (1e-7 relative), ignoring what is volatile.
fn same_document(a: &Value, b: &Value, at: &str) -> Result<(), String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            // Timings, and what depends on the last bits of the arithmetic (another machine's
            // maths library can take a different path to the same minimum): the optimizer's
            // counts, its stopping message and its final gradient.
            let volatile = |k: &str| {
                k.ends_with("_seconds")
                    || [
                        "iterations",
                        "evaluations",
                        "reason",
                        "projected_gradient_norm",
                    ]
                    .contains(&k)
            };
            let keys = |m: &serde_json::Map<String, Value>| -> Vec<String> {
                m.keys().filter(|k| !volatile(k)).cloned().collect()
            };
            if keys(x) != keys(y) {
                return Err(format!("{at}: keys {:?} vs {:?}", keys(x), keys(y)));
            }
            for k in keys(x) {
                same_document(&x[&k], &y[&k], &format!("{at}.{k}"))?;
            }
            Ok(())
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .try_for_each(|(i, (p, q))| same_document(p, q, &format!("{at}[{i}]"))),
        (Value::Number(x), Value::Number(y)) => {
            let (p, q) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            if (p - q).abs() <= 1e-7 * p.abs().max(q.abs()) {
                Ok(())
            } else {
                Err(format!("{at}: {p} vs {q}"))
            }
        }
        _ if a == b => Ok(()),
        _ => Err(format!("{at}: {a} vs {b}")),
    }
}

/// The README's example outputs are real runs (`scripts/readme_examples.py` writes them).
#[test]
fn readme_examples_match_real_runs() {
    let root = histfit_testutil::repo_root().display().to_string();
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    let mut checked = 0;
    for (i, line) in lines.iter().enumerate() {
        let Some(args) = line
            .strip_prefix("<!-- example: histfit ")
            .and_then(|r| r.strip_suffix(" -->"))
        else {
            continue;
        };
        assert_eq!(lines[i + 1], "```json", "README line {}", i + 2);
        let end = i + 2 + lines[i + 2..].iter().position(|l| *l == "```").unwrap();
        let shown: Value = serde_json::from_str(&lines[i + 2..end].join("\n")).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(args.split_whitespace())
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(out.status.success(), "histfit {args}");
        let real: Value = serde_json::from_slice(&out.stdout).unwrap();
        if let Err(e) = same_document(&shown, &real, "") {
            panic!(
                "README example `histfit {args}` is stale ({e}): run scripts/readme_examples.py"
            );
        }
        checked += 1;
    }
    assert!(checked >= 2, "README examples found: {checked}");
}

/// A signal grid gives, point for point, the documents of separate `--patch` runs; the CSV has a
/// row per point keyed by the patch values; `--patches` selects; a point that fails is reported
/// and counted (exit 3), the others still computed.
#[test]
fn patchset_grids_equal_separate_runs() {
    let ws = fixture("simple_workspace.json");
    let ps = fixture("simple_patchset.json");
    let dir = std::env::temp_dir().join(format!("histfit-grid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("grid.csv");
    for (cmd, kind) in [("limit", "limit_grid"), ("hypotest", "hypotest_grid")] {
        let grid = run_json(&[
            cmd,
            &ws,
            "--patchset",
            &ps,
            "--json",
            "--csv",
            csv.to_str().unwrap(),
        ]);
        assert_eq!(grid["kind"], kind);
        assert_eq!(grid["labels"], serde_json::json!(["mass"]));
        assert_eq!(grid["n_points"], 2);
        assert_eq!(grid["failed"], 0);
        for p in grid["points"].as_array().unwrap() {
            let name = p["patch"].as_str().unwrap();
            let single = run_json(&[cmd, &ws, "--patch", &format!("{ps}:{name}"), "--json"]);
            for (k, v) in single.as_object().unwrap() {
                if !["workspace", "measurement", "interpolation", "poi"].contains(&k.as_str()) {
                    assert_eq!(&p[k], v, "{cmd} {name}: {k}");
                }
            }
        }
        let text = std::fs::read_to_string(&csv).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("patch,mass,"), "{text}");
        assert!(lines[1].starts_with("signal_100,100,"), "{text}");
        // Numbers as a person writes them (0.847…, not 8.47…e-1), each read back exactly.
        let cells: Vec<&str> = lines[1].split(',').collect();
        let obs = cells[2];
        assert!(!obs.contains('e'), "{text}");
        let first = &grid["points"][0];
        let key = if cmd == "limit" { "obs" } else { "cls_obs" };
        assert_eq!(
            obs.parse::<f64>().unwrap(),
            first[key].as_f64().unwrap(),
            "{text}"
        );
    }
    let one = run_json(&[
        "limit",
        &ws,
        "--patchset",
        &ps,
        "--patches",
        "*_2??",
        "--json",
    ]);
    assert_eq!(one["n_points"], 1);
    assert_eq!(one["points"][0]["patch"], "signal_200");
    // A patchset whose second patch breaks the workspace: that point fails, the first is kept.
    let bad = dir.join("bad_patchset.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&ps).unwrap()).unwrap();
    v["patches"][1]["patch"][0]["value"] = serde_json::json!([1.0, 2.0, 3.0]);
    std::fs::write(&bad, v.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args([
            "hypotest",
            &ws,
            "--patchset",
            bad.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["failed"], 1);
    assert!(doc["points"][0]["cls_obs"].is_number());
    let err = doc["points"][1]["error"].as_str().unwrap();
    assert!(err.contains("bins"), "{err}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 of 2 points failed"));
    std::fs::remove_dir_all(&dir).ok();
}

/// The fit options of every inference command: --asimov fits the pre-fit prediction (μ̂ = its μ),
/// --fix, --init and --bounds reach the fits, --poi chooses the parameter of interest, and bad
/// values are refused with the flag named.
#[test]
fn inference_options_on_every_command() {
    let ws = fixture("simple_workspace.json");
    let h = run_json(&["hypotest", &ws, "--mu", "1", "--asimov", "--json"]);
    assert!((h["mu_hat"].as_f64().unwrap() - 1.0).abs() < 1e-5, "{h}");
    assert_eq!(h["q_obs"].as_f64().unwrap(), 0.0);
    let h = run_json(&[
        "hypotest", &ws, "--mu", "1", "--asimov", "--init", "mu=2", "--json",
    ]);
    assert!((h["mu_hat"].as_f64().unwrap() - 2.0).abs() < 1e-5, "{h}");
    let plain = run_json(&["significance", &ws, "--json"]);
    let fixed = run_json(&[
        "significance",
        &ws,
        "--fix",
        "uncorr_bkguncrt[0]=1.2",
        "--json",
    ]);
    assert_ne!(plain["q0_obs"], fixed["q0_obs"]);
    let s = run_json(&[
        "scan",
        &ws,
        "--bounds",
        "mu=-1:5",
        "--poi-range",
        "-0.5:0.5",
        "--points",
        "3",
        "--json",
    ]);
    assert!(s["points"][0]["converged"].as_bool().unwrap(), "{s}");
    let f = run_json(&["fit", &ws, "--poi", "uncorr_bkguncrt[1]", "--json"]);
    assert_eq!(f["poi"], "uncorr_bkguncrt[1]");
    for (args, needle) in [
        (
            vec!["limit", &ws, "--bounds", "mu=0:3", "--init", "mu=4"],
            "--init mu=4: outside the bounds",
        ),
        (
            vec!["hypotest", &ws, "--init", "nope=1"],
            "--init nope=1: \"nope\" is not a parameter",
        ),
        (
            vec!["ranking", &ws, "--bounds", "mu=3:1"],
            "--bounds mu=3:1",
        ),
        (
            vec!["fit", &ws, "--bounds", "mu=2:5"],
            "lies outside [2, 5]; give --init too",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// `--poi none`: a background-only file whose POI only a signal patch adds. The fit works
/// without one; commands that need one say so.
#[test]
fn a_model_without_a_poi_fits_and_tests_say_they_need_one() {
    let mut ws: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("simple_workspace.json")).unwrap())
            .unwrap();
    // The signal sample (and with it the POI's normfactor) removed, the measurement unchanged.
    ws["channels"][0]["samples"]
        .as_array_mut()
        .unwrap()
        .remove(0);
    let dir = std::env::temp_dir().join(format!("histfit-nopoi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bkg_only.json");
    std::fs::write(&path, ws.to_string()).unwrap();
    let p = path.to_str().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["fit", p])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--poi none"));
    let f = run_json(&["fit", p, "--poi", "none", "--json"]);
    assert!(f["converged"].as_bool().unwrap());
    assert!(f["poi"].is_null() && f["poi_index"].is_null(), "{f}");
    // (An ensemble's fits need no POI: `toys` runs, each toy's POI null —
    // `toys_need_no_parameter_of_interest`.)
    let t = run_json(&["toys", p, "--poi", "none", "--n-toys", "3", "--json"]);
    assert!(t["summary"]["poi_mean"].is_null(), "{t}");
    for cmd in ["hypotest", "limit", "scan", "ranking", "significance"] {
        let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args([cmd, p, "--poi", "none"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("parameter of interest") && err.contains("needs one"),
            "{cmd}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The workspace tools write workspaces that validate again, and a patchset recorded for another
/// workspace is refused unless --force.
#[test]
fn workspace_tools_and_patchset_digests() {
    let ws = fixture("complex_workspace.json");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let d = run(&["digest", &ws]);
    assert!(d.starts_with("sha256:") && d.trim().len() == 7 + 64, "{d}");
    let dir = std::env::temp_dir().join(format!("histfit-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sorted = dir.join("sorted.json");
    run(&["sort", &ws, "-o", sorted.to_str().unwrap()]);
    // Sorting keeps the model: the same fit.
    let a = run_json(&["fit", &ws, "--json"]);
    let b = run_json(&["fit", sorted.to_str().unwrap(), "--json"]);
    assert_eq!(a["twice_nll"], b["twice_nll"]);
    let pruned: Value = serde_json::from_str(&run(&["prune", &ws, "-t", "histosys"])).unwrap();
    assert!(!pruned.to_string().contains("\"histosys\""));
    let renamed: Value =
        serde_json::from_str(&run(&["rename", &ws, "-c", "SR", "signal_region"])).unwrap();
    assert!(renamed["observations"]
        .to_string()
        .contains("signal_region"));
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["prune", &ws, "-c", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no channel \"nope\""));
    // A patchset recorded for another workspace.
    let simple = fixture("simple_workspace.json");
    let mut ps: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("simple_patchset.json")).unwrap())
            .unwrap();
    ps["metadata"]["digests"] = serde_json::json!({"sha256": "0".repeat(64)});
    let bad = dir.join("other_patchset.json");
    std::fs::write(&bad, ps.to_string()).unwrap();
    let patch = format!("{}:signal_100", bad.to_str().unwrap());
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["fit", &simple, "--patch", &patch])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    run(&["fit", &simple, "--patch", &patch, "--force"]);
    // Its own digest recorded: accepted.
    let own = run(&["digest", &simple]);
    ps["metadata"]["digests"] =
        serde_json::json!({"sha256": own.trim().trim_start_matches("sha256:")});
    std::fs::write(&bad, ps.to_string()).unwrap();
    run(&["fit", &simple, "--patch", &patch]);
    std::fs::remove_dir_all(&dir).ok();
}

/// `--patch FILE` with a JSON Patch (an array of operations, as single published signal points
/// come) gives the same fit as the same operations from a patchset; a patchset without a name is
/// refused with the form to use.
#[test]
fn json_patch_files_apply() {
    let ws = fixture("simple_workspace.json");
    let ps: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("simple_patchset.json")).unwrap())
            .unwrap();
    let dir = std::env::temp_dir().join(format!("histfit-jsonpatch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("patch.signal_100.json");
    std::fs::write(&file, ps["patches"][0]["patch"].to_string()).unwrap();
    let a = run_json(&["fit", &ws, "--patch", file.to_str().unwrap(), "--json"]);
    let b = run_json(&[
        "fit",
        &ws,
        "--patch",
        &format!("{}:signal_100", fixture("simple_patchset.json")),
        "--json",
    ]);
    assert_eq!(a["twice_nll"], b["twice_nll"]);
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["fit", &ws, "--patch", &fixture("simple_patchset.json")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FILE:NAME"));
    std::fs::remove_dir_all(&dir).ok();
}

/// `yields`: per channel, sample and bin, totals equal to the sum of the samples, uncertainties
/// non-negative, the data beside them; post-fit at the fit.
#[test]
fn yields_tables() {
    let ws = fixture("complex_workspace.json");
    for postfit in [false, true] {
        let mut args = vec!["yields", ws.as_str(), "--json"];
        if postfit {
            args.push("--postfit");
        }
        let d = run_json(&args);
        assert_eq!(d["kind"], "yields");
        assert_eq!(d["postfit"], postfit);
        let channels = d["channels"].as_array().unwrap();
        assert_eq!(channels.len(), 2);
        for c in channels {
            let n = c["data"].as_array().unwrap().len();
            for b in 0..n {
                let sum: f64 = c["samples"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["yields"][b].as_f64().unwrap())
                    .sum();
                let total = c["total"]["yields"][b].as_f64().unwrap();
                assert!((sum - total).abs() <= 1e-9 * total.abs(), "{c}");
                assert!(
                    c["total"]["uncertainties"][b].as_f64().unwrap() > 0.0,
                    "{c}"
                );
            }
        }
    }
}

/// What the review of the workflow commands found, each refused or honoured: the POI held by
/// --fix where a command varies it; toys generated with the toy fits' options; pre-fit yields of
/// a held parameter without its uncertainty; --fix outside --bounds; tools that would leave no
/// channel or a duplicate name; a JSON Patch file given a patch name.
#[test]
fn workflow_options_are_honoured_or_refused() {
    let ws = fixture("simple_workspace.json");
    let fails = |args: &[&str], needle: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    };
    for cmd in [
        "hypotest",
        "limit",
        "scan",
        "significance",
        "ranking",
        "hypotest-toys",
    ] {
        fails(&[cmd, &ws, "--fix", "mu=0.5"], "cannot be fixed");
    }
    let t = run_json(&[
        "toys",
        &ws,
        "--n-toys",
        "3",
        "--fix",
        "uncorr_bkguncrt[0]=1.2",
        "--json",
    ]);
    assert_eq!(t["gen_params"][1].as_f64().unwrap(), 1.2, "{t}");
    let y = run_json(&["yields", &ws, "--json"]);
    let yf = run_json(&[
        "yields",
        &ws,
        "--fix",
        "uncorr_bkguncrt[0]=1.0",
        "--fix",
        "uncorr_bkguncrt[1]=1.0",
        "--json",
    ]);
    let u = |d: &Value| {
        d["channels"][0]["total"]["uncertainties"][0]
            .as_f64()
            .unwrap()
    };
    assert!(u(&y) > 0.0 && u(&yf) == 0.0, "{y} {yf}");
    fails(
        &["fit", &ws, "--bounds", "mu=0:0.5", "--fix", "mu=0.9"],
        "outside its bounds [0, 0.5]",
    );
    fails(&["scan", &ws, "--poi-range", "0:inf"], "expected LO:HI");
    fails(
        &["prune", &ws, "-c", "singlechannel"],
        "no channel would remain",
    );
    let two = fixture("two_channel_workspace.json");
    let chans: Value = serde_json::from_str(&std::fs::read_to_string(&two).unwrap()).unwrap();
    let (a, b) = (
        chans["channels"][0]["name"].as_str().unwrap().to_owned(),
        chans["channels"][1]["name"].as_str().unwrap().to_owned(),
    );
    fails(&["rename", &two, "-c", &a, &b], "duplicate channel name");
    let dir = std::env::temp_dir().join(format!("histfit-review-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let patch = dir.join("p.json");
    std::fs::write(&patch, "[]").unwrap();
    fails(
        &[
            "fit",
            &ws,
            "--patch",
            &format!("{}:x", patch.to_str().unwrap()),
        ],
        "is a JSON Patch",
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `patchset list|apply|verify`: the patches and values; the applied workspace fits as `--patch`
/// does; a digest check that passes for the workspace recorded and fails for another.
#[test]
fn patchset_commands() {
    let ws = fixture("simple_workspace.json");
    let ps = fixture("simple_patchset.json");
    let l = run_json(&["patchset", "list", &ps, "--json"]);
    assert_eq!(l["labels"], serde_json::json!(["mass"]));
    assert_eq!(l["patches"][1]["name"], "signal_200");
    let dir = std::env::temp_dir().join(format!("histfit-patchset-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("signal_100.json");
    let st = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args([
            "patchset",
            "apply",
            &ws,
            &ps,
            "signal_100",
            "-o",
            out.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let a = run_json(&["fit", out.to_str().unwrap(), "--json"]);
    let b = run_json(&["fit", &ws, "--patch", &format!("{ps}:signal_100"), "--json"]);
    assert_eq!(a["twice_nll"], b["twice_nll"]);
    let digest = |p: &str| -> String {
        let o = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(["digest", p])
            .output()
            .unwrap();
        String::from_utf8(o.stdout)
            .unwrap()
            .trim()
            .trim_start_matches("sha256:")
            .to_owned()
    };
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&ps).unwrap()).unwrap();
    v["metadata"]["digests"] = serde_json::json!({"sha256": digest(&ws)});
    let recorded = dir.join("ps.json");
    std::fs::write(&recorded, v.to_string()).unwrap();
    let ok = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["patchset", "verify", &ws, recorded.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(ok.success());
    let other = fixture("complex_workspace.json");
    let bad = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["patchset", "verify", &other, recorded.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("was made for the workspace with sha256"));
    std::fs::remove_dir_all(&dir).ok();
}

/// `combine`: two workspaces with disjoint names make one whose fit has both channels; the same
/// workspace twice is refused under the none join and kept once under the outer join.
#[test]
fn combine_joins_workspaces() {
    let ws = fixture("simple_workspace.json");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["combine", &ws, &ws]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("in both workspaces"));
    let once: Value =
        serde_json::from_slice(&run(&["combine", &ws, &ws, "--join", "outer"]).stdout).unwrap();
    assert_eq!(once["channels"].as_array().unwrap().len(), 1);
    let dir = std::env::temp_dir().join(format!("histfit-combine-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let renamed = dir.join("renamed.json");
    let r = run(&[
        "rename",
        &ws,
        "-c",
        "singlechannel",
        "second",
        "--measurement",
        "GaussExample",
        "other",
        "-o",
        renamed.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let both = dir.join("both.json");
    let c = run(&[
        "combine",
        &ws,
        renamed.to_str().unwrap(),
        "-o",
        both.to_str().unwrap(),
    ]);
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let i = run_json(&["inspect", both.to_str().unwrap(), "--json"]);
    assert_eq!(i["channels"].as_array().unwrap().len(), 2);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn xml2json_writes_pyhf_s_workspace_and_it_fits() {
    // pyhf 0.7.6's xml2json of the same configuration (tests/fixtures/xml/goldens).
    let goldens: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("xml/goldens/xml_imports.json")).unwrap(),
    )
    .unwrap();
    let case = &goldens["xmlimport_input/config/example.xml"];
    let basedir = fixture("xml/xmlimport_input");
    let out = std::env::temp_dir().join(format!("histfit-xml2json-{}.json", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["xml2json", "config/example.xml", "--basedir", ".", "-o"])
        .arg(&out)
        .current_dir(&basedir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(status.status.success(), "{stderr}");
    // What pyhf ignores is said: the Gamma and LogNormal constraint terms, Poisson stat errors.
    assert!(stderr.contains("ConstraintTerm Type=\"Gamma\""), "{stderr}");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written, case["workspace"]);
    let fitted = run_json(&[
        "fit",
        out.to_str().unwrap(),
        "--json",
        "--interp-defaults",
        "pyhf",
    ]);
    let reference = case["best_twice_nll"].as_f64().unwrap();
    let t = fitted["twice_nll"].as_f64().unwrap();
    assert!(
        t <= reference + 1e-6 && t >= reference - 1e-3,
        "{t} vs pyhf {reference}"
    );
    let _ = std::fs::remove_file(out);
}

/// A workspace read from a pipe is read once: one the typed reader refuses (a key it does not
/// know, which the walk accepts) still loads, and the fit equals the file's.
#[test]
fn a_workspace_on_standard_input_is_read_once() {
    use std::io::Write;
    let mut spec: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("simple_workspace.json")).unwrap())
            .unwrap();
    spec["comment"] = Value::from("not a key the typed reader knows");
    let mut child = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["fit", "/dev/stdin", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let text = serde_json::to_string_pretty(&spec).unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let piped: Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = run_json(&["fit", &fixture("simple_workspace.json"), "--json"]);
    assert_eq!(piped["twice_nll"], file["twice_nll"]);
}

/// q0 is the test of μ = 0: asked without --mu it tests 0 (pyhf's number on the simple
/// workspace, 0.27277), and the document says so.
#[test]
fn q0_tests_mu_zero_by_default() {
    let ws = fixture("simple_workspace.json");
    let doc = run_json(&["hypotest", &ws, "--test-stat", "q0", "--json"]);
    assert_eq!(doc["mu"], 0.0);
    assert_eq!(doc["test_stat"], "q0");
    let cls = doc["cls_obs"].as_f64().unwrap();
    assert!((cls - 0.27277).abs() < 1e-5, "{cls}");
    let q = run_json(&["hypotest", &ws, "--json"]);
    assert_eq!(q["test_stat"], "qtilde");
    assert_eq!(q["mu"], 1.0);
}

/// An HS3 document written by ROOT opens in every inference command, the result documents
/// naming the model; commands that need a binned model say so in one line.
#[test]
fn hs3_documents_open_in_every_inference_command() {
    let f = fixture("hs3/gauss_exp_ext.json");
    let fit = run_json(&["fit", &f, "--json"]);
    assert_eq!(fit["format"], "hs3");
    assert_eq!(fit["model"], f.as_str());
    assert_eq!(fit["converged"], true);
    let nsig = fit["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "nsig")
        .unwrap()["value"]
        .as_f64()
        .unwrap();
    assert!((nsig - 585.6).abs() < 1.0, "{nsig}");
    let scan = run_json(&[
        "scan",
        &f,
        "--poi",
        "nsig",
        "--poi-range",
        "500:700",
        "--points",
        "3",
        "--json",
    ]);
    assert_eq!(scan["points"].as_array().unwrap().len(), 3);
    let h = run_json(&["hypotest", &f, "--poi", "nsig", "--mu", "700", "--json"]);
    assert!(h["cls_obs"].as_f64().unwrap() < 0.01);
    let toys = run_json(&["toys", &f, "--poi", "nsig", "--n-toys", "20", "--json"]);
    assert_eq!(toys["summary"]["converged"], 20);
    // Each toy is fitted once, as the observed data are (the basin search's 24 further starts
    // a toy made 50 fits of each, s35); `--starts` still asks for them.
    assert_eq!(toys["starts"], 0, "{}", toys["summary"]);
    let asked = run_json(&[
        "toys", &f, "--poi", "nsig", "--n-toys", "2", "--starts", "3", "--json",
    ]);
    assert_eq!(asked["starts"], 3);
    let w = run_json(&["fit", &fixture("hs3/weighted.json"), "--json"]);
    for kind in ["naive", "sumw2", "sandwich"] {
        assert!(w["weighted_uncertainties"][kind]["f"].as_f64().unwrap() > 0.0);
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["yields", &f])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("yields needs a binned (HistFactory) model"),
        "{err}"
    );
}

/// An ensemble needs no POI: on a document that names none, every toy reports its fitted POI
/// as null and the table says why; its shards merge (null figures read back).
#[test]
fn toys_need_no_parameter_of_interest() {
    let f = fixture("hs3/gauss_exp_ext.json");
    let whole = run_json(&["toys", &f, "--n-toys", "6", "--json"]);
    assert!(whole.get("poi").is_some_and(Value::is_null), "{whole}");
    assert_eq!(whole["summary"]["converged"], 6);
    assert_eq!(whole["summary"]["poi_mean"], Value::Null);
    assert!(whole["toys"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["poi"].is_null() && t["twice_nll"].is_f64()));
    // The same toys as with a POI named (a model this small makes no release pass, whose hold
    // sets leave the POI out): only the reported parameter differs.
    let named = run_json(&["toys", &f, "--poi", "nsig", "--n-toys", "6", "--json"]);
    for (a, b) in whole["toys"]
        .as_array()
        .unwrap()
        .iter()
        .zip(named["toys"].as_array().unwrap())
    {
        assert_eq!(a["twice_nll"], b["twice_nll"]);
    }
    let dir = std::env::temp_dir().join(format!("histfit-no-poi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shards: Vec<String> = (1..=2)
        .map(|k| {
            let p = dir
                .join(format!("shard{k}.json"))
                .to_string_lossy()
                .into_owned();
            let shard = format!("{k}/2");
            let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
                .args([
                    "toys", &f, "--n-toys", "6", "--shard", &shard, "--json", "-o", &p,
                ])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            p
        })
        .collect();
    let merged = run_json(&["merge-toys", &shards[0], &shards[1], "--json"]);
    assert_eq!(merged["toys"], whole["toys"]);
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["toys", &f, "--n-toys", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("fitted POI: none"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// `histfit pulls`: each toy of the study is the ensemble's toy of the same index (the same
/// minimum as `toys` finds for it), every free parameter summarised, and the summary the mean and
/// width of the per-toy pulls (θ̂ − θ_gen)/σ̂ recomputed here.
#[test]
fn pull_studies_summarise_the_toys_pulls() {
    let f = fixture("hs3/gauss_exp_ext.json");
    let p = run_json(&["pulls", &f, "--n-toys", "40", "--seed", "3", "--json"]);
    assert_eq!(p["kind"], "pulls");
    assert_eq!(
        p["used"].as_u64().unwrap() + p["left_out"].as_u64().unwrap(),
        40
    );
    let toys = run_json(&[
        "toys", &f, "--poi", "nsig", "--n-toys", "40", "--seed", "3", "--json",
    ]);
    let names: Vec<&str> = p["par_names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let k_nsig = names.iter().position(|n| *n == "nsig").unwrap();
    for (a, b) in p["toys"]
        .as_array()
        .unwrap()
        .iter()
        .zip(toys["toys"].as_array().unwrap())
    {
        assert_eq!(a["index"], b["index"]);
        let (x, y) = (
            a["twice_nll"].as_f64().unwrap(),
            b["twice_nll"].as_f64().unwrap(),
        );
        assert!((x - y).abs() < 1e-6, "toy {}: {x} vs {y}", a["index"]);
        let (m, n) = (
            a["bestfit"][k_nsig].as_f64().unwrap(),
            b["poi"].as_f64().unwrap(),
        );
        assert!(
            (m - n).abs() < 1e-3 * n.abs(),
            "toy {}: {m} vs {n}",
            a["index"]
        );
    }
    let gen: Vec<f64> = p["gen_params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let params = p["parameters"].as_array().unwrap();
    assert_eq!(params.len(), 5);
    for q in params {
        let k = names
            .iter()
            .position(|n| *n == q["name"].as_str().unwrap())
            .unwrap();
        let pulls: Vec<f64> = p["toys"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["used"] == true)
            .map(|t| {
                (t["bestfit"][k].as_f64().unwrap() - gen[k])
                    / t["uncertainties"][k].as_f64().unwrap()
            })
            .collect();
        let n = pulls.len() as f64;
        let mean = pulls.iter().sum::<f64>() / n;
        let width = (pulls.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        assert!((q["mean"].as_f64().unwrap() - mean).abs() < 1e-12);
        assert!((q["width"].as_f64().unwrap() - width).abs() < 1e-12);
        assert!((q["mean_error"].as_f64().unwrap() - width / n.sqrt()).abs() < 1e-12);
    }
}

/// Likelihoods as HEPData ships them (`.json.gz`) and on standard input (`-`) fit as the plain
/// file does.
#[test]
fn gzipped_files_and_standard_input_are_read() {
    use std::io::Write;
    let ws = fixture("simple_workspace.json");
    let plain = run_json(&["fit", &ws, "--json"]);
    let dir = std::env::temp_dir().join(format!("histfit-gz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gz = dir.join("simple_workspace.json.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&std::fs::read(&ws).unwrap()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let zipped = run_json(&["fit", gz.to_str().unwrap(), "--json"]);
    assert_eq!(zipped["twice_nll"], plain["twice_nll"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["fit", "-", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(&ws).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let piped: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(piped["twice_nll"], plain["twice_nll"]);
}

/// Yield tables as Markdown and LaTeX (issue 52): a table per channel, a row per sample, the
/// total and the data, a column per bin; TeX's special characters in names escaped.
#[test]
fn yield_tables_as_markdown_and_latex() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let ws = fixture("simple_workspace.json");
    let doc = run_json(&["yields", &ws, "--json"]);
    let signal = doc["channels"][0]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "signal")
        .unwrap()
        .clone();
    let md = run(&["yields", &ws, "--format", "md"]);
    assert!(md.contains("**singlechannel**"), "{md}");
    assert!(
        md.contains("| sample | bin 0 | bin 1 |\n|---|---:|---:|"),
        "{md}"
    );
    let row = format!(
        "| signal | {:.2} ± {:.2} | {:.2} ± {:.2} |",
        signal["yields"][0].as_f64().unwrap(),
        signal["uncertainties"][0].as_f64().unwrap(),
        signal["yields"][1].as_f64().unwrap(),
        signal["uncertainties"][1].as_f64().unwrap()
    );
    assert!(md.contains(&row), "{md} lacks {row}");
    assert!(md.contains("| data | 53 | 65 |"), "{md}");
    let tex = run(&["yields", &fixture("workspace_tHu.json"), "--format", "tex"]);
    assert!(tex.contains("\\begin{tabular}{l"), "{tex}");
    assert!(tex.contains("HFDecay\\_mu & "), "{tex}");
    assert!(tex.contains(" $\\pm$ "), "{tex}");
    assert_eq!(
        tex.matches("\\begin{table}").count(),
        tex.matches("\\end{table}").count()
    );
    assert!(tex.matches("\\begin{table}").count() >= 2);
}

/// The POI's uncertainty broken down by refits (issue 52): the statistical part equals the POI's
/// error of a fit with every constrained parameter held (by hand, with --fix) at the best fit, a
/// group's impact is √(σ² − σ²_held) with that group held by hand, and --group selects by name.
#[test]
fn uncertainty_breakdown_by_refits() {
    let ws = fixture("complex_workspace.json");
    let doc = run_json(&["fit", &ws, "--breakdown", "--json"]);
    let b = &doc["breakdown"];
    let pars = doc["parameters"].as_array().unwrap();
    let mu = |d: &Value| {
        d["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "mu")
            .unwrap()["uncertainty"]
            .as_f64()
            .unwrap()
    };
    let total = mu(&doc);
    assert_eq!(b["total"].as_f64().unwrap(), total);
    let held = |names: &dyn Fn(&str) -> bool| {
        let mut args: Vec<String> = vec!["fit".into(), ws.clone(), "--json".into()];
        for p in pars {
            let n = p["name"].as_str().unwrap();
            if names(n) && p["fixed"] == false {
                args.push("--fix".into());
                args.push(format!("{n}={}", p["value"].as_f64().unwrap()));
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        mu(&run_json(&args))
    };
    let constrained: Vec<String> = pars
        .iter()
        .filter(|p| p.get("pull").is_some())
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    let stat = held(&|n| constrained.iter().any(|c| c == n));
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * b.abs().max(1e-3);
    assert!(close(b["stat"].as_f64().unwrap(), stat), "{b} vs {stat}");
    let syst = (total * total - stat * stat).sqrt();
    assert!(close(b["syst"].as_f64().unwrap(), syst), "{b}");
    let group = |name: &str| {
        b["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group"] == name)
            .unwrap_or_else(|| panic!("no group {name}: {b}"))
            .clone()
    };
    let staterror = group("staterror");
    let by_hand = held(&|n| n.starts_with("staterror_"));
    let impact = (total * total - by_hand * by_hand).max(0.0).sqrt();
    assert!(
        close(staterror["impact"].as_f64().unwrap(), impact),
        "{staterror} vs {impact}"
    );
    assert!(group("lumi")["impact"].as_f64().unwrap() > 0.0);
    // A group named on the command line: the same refit.
    let asked = run_json(&["fit", &ws, "--group", "mc=staterror_*", "--json"]);
    let mc = &asked["breakdown"]["groups"][0];
    assert_eq!(mc["group"], "mc");
    assert_eq!(mc["impact"], staterror["impact"]);
    assert_eq!(asked["breakdown"]["groups"].as_array().unwrap().len(), 1);
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["fit", &ws, "--group", "x=nothing_*"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no parameter matches nothing_*"));
}

/// Toy-based upper limits (issue 52): each point of the scan is exactly `hypotest-toys` at that
/// μ with the same toys (seed), and the limits lie where the toys' CLs falls through α.
#[test]
fn toy_limits_are_hypotest_toys_at_each_point() {
    let ws = fixture("simple_workspace.json");
    let lim = run_json(&[
        "limit",
        &ws,
        "--toys",
        "60",
        "--seed",
        "3",
        "--scan",
        "0.2:6.2:5",
        "--json",
    ]);
    assert_eq!(lim["toys"]["n_toys"], 60);
    let evals = lim["evaluations"].as_array().unwrap();
    assert_eq!(evals.len(), 5);
    for e in evals {
        let mu = e["mu"].as_f64().unwrap();
        let h = run_json(&[
            "hypotest-toys",
            &ws,
            "--mu",
            &mu.to_string(),
            "--n-toys",
            "60",
            "--seed",
            "3",
            "--json",
        ]);
        assert_eq!(e["cls_obs"], h["summary"]["cls_obs"], "μ = {mu}");
        assert_eq!(e["cls_exp"], h["summary"]["cls_exp"], "μ = {mu}");
    }
    let obs = lim["obs"].as_f64().unwrap();
    let below = evals
        .iter()
        .rev()
        .find(|e| e["mu"].as_f64().unwrap() <= obs)
        .unwrap();
    assert!(below["cls_obs"].as_f64().unwrap() >= 0.05, "{lim}");
    assert!((0.2..=6.2).contains(&obs), "{lim}");
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["limit", &ws, "--seed", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--seed needs --toys");
}

/// A HistFactory workspace as ROOT exports it (HS3 `histfactory_dist`) opens as the binned
/// model in every command: `inspect` lists its channels and the document's set names, `fit`
/// uses ROOT's parameter names and codes and opens the observed analysis (saying so), `--poi`
/// picks another scalar parameter and refuses a per-bin γ, pyhf-only flags are refused.
#[test]
fn root_exported_histfactory_workspaces_open_as_binned_models() {
    let f = fixture("hs3/histfactory/shapefactor.json");
    let inspect = run_json(&["inspect", &f, "--json"]);
    let channels: Vec<&str> = inspect["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(channels, ["controlRegion", "signalRegion"]);
    let text = inspect.to_string();
    assert!(
        text.contains("gamma_stat_signalRegion_bin_0") && text.contains("\"Bkg2Shape\""),
        "{text}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["fit", &f, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("simPdf_obsData"));
    let fit: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(fit["poi"], "SigXsecOverSM");
    assert_eq!(fit["interpolation"]["normsys"], "code4");
    let names: Vec<&str> = fit["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"alpha_syst_signal") && names.contains(&"gamma_Bkg2Shape_bin_1"));
    let other = run_json(&["fit", &f, "--poi", "alpha_syst_signal", "--json"]);
    assert_eq!(other["poi"], "alpha_syst_signal");
    for (args, says) in [
        (
            vec!["fit", &f, "--poi", "gamma_Bkg2Shape_bin_0"],
            "per-bin set",
        ),
        (
            vec!["fit", &f, "--interp", "normsys=code1"],
            "applies to pyhf workspaces",
        ),
        (
            vec!["fit", &f, "--analysis", "nope"],
            "no analyses of that name",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(says), "{args:?}: {e}");
    }
}

/// A likelihood of binned and event-level channels (ROOT's export of a RooSimultaneous of two
/// HistFactory channels and a Gaussian + exponential one): the commands fit it whole, tables of
/// its binned channels come from the whole fit, plots of its event-level channel too.
#[test]
fn mixed_likelihoods_run_every_command() {
    let f = fixture("hs3/histfactory/mixed.json");
    let a = ["--analysis", "combPdf_obsData_all"];
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("hs3/histfactory/mixed.roofit.json")).unwrap(),
    )
    .unwrap();
    let fit = run_json(&[&["fit", &f, "--json"][..], &a].concat());
    assert_eq!(fit["poi"], "SigXsecOverSM");
    assert_eq!(
        fit["binned"]["channels"],
        serde_json::json!(["channel1", "channel2"])
    );
    assert_eq!(fit["likelihood"][0]["distribution"], "model_events");
    for p in fit["parameters"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let r = &want["fit"]["parameters"][name];
        let (v, e) = (r["value"].as_f64().unwrap(), r["error"].as_f64().unwrap());
        assert!(
            (p["value"].as_f64().unwrap() - v).abs() <= 0.01 * e,
            "{name}: {p} against RooFit's {r}"
        );
    }
    let scan = run_json(&[&["scan", &f, "--points", "3", "--json"][..], &a].concat());
    assert_eq!(scan["points"].as_array().map(Vec::len), Some(3), "{scan}");
    let limit = run_json(&[&["limit", &f, "--json"][..], &a].concat());
    assert!(limit["obs"].as_f64().unwrap() > 0.8, "{limit}");
    let toys = run_json(&[&["toys", &f, "--n-toys", "8", "--json"][..], &a].concat());
    assert_eq!(toys["summary"]["converged"], 8, "{toys}");
    let yields = run_json(&[&["yields", &f, "--postfit", "--json"][..], &a].concat());
    assert_eq!(yields["channels"].as_array().map(Vec::len), Some(2));
    let d = run_json(&[&["distributions", &f, "--bins", "10", "--json"][..], &a].concat());
    assert_eq!(d["channels"][0]["name"], "model_events", "{d}");
    assert_eq!(
        d["par_names"].as_array().map(Vec::len),
        fit["parameters"].as_array().map(Vec::len)
    );
}

/// A discovery test's expected figures: at 1 for a pyhf workspace's signal strength (pyhf's
/// rule), at the document's signal for an event-level POI (a yield: 900 events here, not one),
/// at `--expected-at` where asked — the same in `significance` and `hypotest --test-stat q0` —,
/// and a value outside the POI's bounds refused naming the option.
#[test]
fn discovery_figures_are_at_the_models_signal() {
    let binned = run_json(&["significance", &fixture("simple_workspace.json"), "--json"]);
    assert_eq!(binned["expected_at"], 1.0);
    let doc = fixture("events/gauss_exp.json");
    let at_doc = run_json(&["significance", &doc, "--poi", "nsig", "--json"]);
    assert_eq!(at_doc["expected_at"], 900.0);
    let asked = run_json(&[
        "significance",
        &doc,
        "--poi",
        "nsig",
        "--expected-at",
        "100",
        "--json",
    ]);
    assert_eq!(asked["expected_at"], 100.0);
    assert_eq!(asked["q0_obs"], at_doc["q0_obs"]);
    let (z_doc, z_asked) = (
        at_doc["z_exp"].as_f64().unwrap(),
        asked["z_exp"].as_f64().unwrap(),
    );
    assert!(z_asked > 0.5 && z_asked < z_doc, "{z_asked} {z_doc}");
    let h = run_json(&[
        "hypotest",
        &doc,
        "--poi",
        "nsig",
        "--test-stat",
        "q0",
        "--expected-at",
        "100",
        "--json",
    ]);
    let q_exp = asked["q0_exp"].as_f64().unwrap();
    assert!((h["q_asimov"].as_f64().unwrap() - q_exp).abs() <= 1e-9 * q_exp.max(1.0));
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["significance", &doc, "--poi", "nsig", "--expected-at=-5"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--expected-at") && err.contains("bounds"),
        "{err}"
    );
}

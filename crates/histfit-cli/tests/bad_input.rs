//! Every kind of bad input gets one clear line on stderr naming the place and the rule, exit
//! status 2, and no panic.

use serde_json::{json, Value};
use std::process::Command;

fn fixture(name: &str) -> String {
    histfit_testutil::fixture(name)
}

fn base() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("complex_workspace.json")).unwrap())
        .unwrap()
}

fn tmpfile(tag: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("histfit-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{tag}.json"));
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// Runs `histfit ARGS`, asserts exit 2 and a single-line error containing every `needle`.
fn expect_error(args: &[&str], needles: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "args {args:?}: status {:?}, stderr: {stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "one error line expected: {stderr}");
    for n in needles {
        assert!(lines[0].contains(n), "error line lacks {n:?}: {}", lines[0]);
    }
    assert!(out.stdout.is_empty(), "nothing on stdout when failing");
}

fn expect_ws_error(tag: &str, ws: &Value, needles: &[&str]) {
    let path = tmpfile(tag, &serde_json::to_string(ws).unwrap());
    expect_error(&["fit", &path], needles);
}

#[test]
fn malformed_json() {
    let p = tmpfile("malformed", "{\"channels\": [ {\"name\": \"SR\",, }");
    expect_error(&["fit", &p], &["malformed JSON", "line 1"]);
}

#[test]
fn nan_and_infinite_numbers() {
    let text = serde_json::to_string_pretty(&base())
        .unwrap()
        .replacen("12.0", "NaN", 1);
    expect_error(
        &["fit", &tmpfile("nan", &text)],
        &["non-finite number", "line"],
    );
    let text = serde_json::to_string_pretty(&base())
        .unwrap()
        .replacen("12.0", "1e999", 1);
    expect_error(
        &["fit", &tmpfile("inf", &text)],
        &["malformed JSON", "out of range"],
    );
}

#[test]
fn histosys_bin_count_mismatch() {
    let mut ws = base();
    ws["channels"][0]["samples"][1]["modifiers"][1]["data"]["hi_data"] =
        json!([110.0, 115.0, 120.0]);
    expect_ws_error(
        "histo_bins",
        &ws,
        &[
            "channels[0].samples[1].modifiers[1] (histosys \"bkg_shape\")",
            "hi_data has 3 bins",
            "channel \"SR\" has 2",
        ],
    );
}

#[test]
fn sample_bin_count_mismatch() {
    let mut ws = base();
    ws["channels"][0]["samples"][1]["data"] = json!([1.0]);
    expect_ws_error(
        "sample_bins",
        &ws,
        &["channels[0].samples[1].data", "has 1 bins"],
    );
}

/// The first sample's bin count is no more the channel's than any other's: a wrong one is
/// blamed on itself, not on the samples that agree with the observation.
#[test]
fn first_sample_bin_count_mismatch() {
    let mut ws = base();
    ws["channels"][0]["samples"][0]["data"] = json!([1.0]);
    expect_ws_error(
        "first_sample_bins",
        &ws,
        &["channels[0].samples[0].data", "has 1 bins"],
    );
}

/// Statistics from no toys and scans of no points are refused, never printed as results.
#[test]
fn empty_ensembles_and_scans() {
    let ws = fixture("simple_workspace.json");
    expect_error(&["hypotest-toys", &ws, "--n-toys", "0"], &["--n-toys", "0"]);
    expect_error(&["toys", &ws, "--n-toys", "0"], &["--n-toys", "0"]);
    expect_error(&["scan", &ws, "--points", "0"], &["--points", "0"]);
    expect_error(
        &["limit", &ws, "--scan", "0:1:1"],
        &["--scan 0:1:1", "at least 2"],
    );
    expect_error(
        &["hypotest-toys", &ws, "--test-stat", "q0", "--mu", "1"],
        &["q0 tests", "μ = 0"],
    );
}

#[test]
fn observation_bin_count_mismatch() {
    let mut ws = base();
    ws["observations"][1]["data"] = json!([1.0, 2.0, 3.0]);
    expect_ws_error("obs_bins", &ws, &["observations[1]", "has 3 bins"]);
}

#[test]
fn unknown_modifier_type() {
    let mut ws = base();
    ws["channels"][0]["samples"][0]["modifiers"][0]["type"] = json!("normfactr");
    expect_ws_error(
        "unknown_mod",
        &ws,
        &[
            "channels[0].samples[0].modifiers[0].type",
            "unknown modifier type \"normfactr\"",
        ],
    );
}

#[test]
fn observation_for_unknown_channel_and_missing_observation() {
    // An observation left behind by a patch that removed its channel: ignored with a warning,
    // as pyhf ignores it; the fit runs on the other channels.
    let mut ws = base();
    let mut orphan = ws["observations"][0].clone();
    orphan["name"] = json!("XR");
    ws["observations"].as_array_mut().unwrap().push(orphan);
    let path = tmpfile("obs_orphan", &serde_json::to_string(&ws).unwrap());
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["fit", &path])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("observations[2]")
            && stderr.contains("no channel \"XR\"")
            && stderr.contains("ignored"),
        "{stderr}"
    );
    // Renamed instead: its channel is left without data, which is an error.
    let mut ws = base();
    ws["observations"][1]["name"] = json!("XR");
    expect_ws_error(
        "obs_unknown",
        &ws,
        &["observations", "no observation for channel \"CR\""],
    );
    let mut ws = base();
    ws["observations"].as_array_mut().unwrap().pop();
    expect_ws_error(
        "obs_missing",
        &ws,
        &["observations", "no observation for channel \"CR\""],
    );
}

#[test]
fn missing_and_unknown_poi() {
    let mut ws = base();
    ws["measurements"][0]["config"]
        .as_object_mut()
        .unwrap()
        .remove("poi");
    expect_ws_error(
        "poi_missing",
        &ws,
        &["measurements[0].config.poi", "no parameter of interest"],
    );
    let mut ws = base();
    ws["measurements"][0]["config"]["poi"] = json!("xsec");
    expect_ws_error(
        "poi_unknown",
        &ws,
        &[
            "measurements[0].config.poi",
            "POI \"xsec\" is not a parameter",
        ],
    );
}

#[test]
fn duplicate_names() {
    let mut ws = base();
    ws["channels"][1]["name"] = json!("SR");
    expect_ws_error(
        "dup_channel",
        &ws,
        &["channels[1]", "duplicate channel name \"SR\""],
    );
    let mut ws = base();
    ws["channels"][0]["samples"][1]["name"] = json!("signal");
    expect_ws_error(
        "dup_sample",
        &ws,
        &["channels[0].samples[1]", "duplicate sample name \"signal\""],
    );
}

#[test]
fn lumi_without_config() {
    let mut ws = base();
    ws["measurements"][0]["config"]["parameters"] = json!([]);
    expect_ws_error(
        "lumi",
        &ws,
        &[
            "(lumi \"lumi\")",
            "needs an entry in the measurement's config.parameters",
        ],
    );
}

#[test]
fn normfactor_and_normsys_sharing_a_name() {
    let mut ws = base();
    ws["channels"][0]["samples"][0]["modifiers"][2]["name"] = json!("mu");
    expect_ws_error(
        "shared",
        &ws,
        &[
            "normsys \"mu\"",
            "normfactor",
            "cannot belong to two modifier types",
        ],
    );
}

#[test]
fn negative_yields() {
    let mut ws = base();
    ws["channels"][1]["samples"][0]["data"] = json!([-5.0, 510.0]);
    expect_ws_error(
        "negative",
        &ws,
        &[
            "channels[1].samples[0].data[0]",
            "negative nominal yield -5",
            "must be positive",
        ],
    );
    let mut ws = base();
    ws["channels"][0]["samples"][1]["modifiers"][2]["data"] = json!([10.0, -1.0]);
    expect_ws_error(
        "negative_unc",
        &ws,
        &["staterror \"staterror_SR\"", "must not be negative"],
    );
}

#[test]
fn wrong_types() {
    let mut ws = base();
    ws["channels"][0]["samples"][0]["data"] = json!("12, 11");
    expect_ws_error(
        "types",
        &ws,
        &[
            "channels[0].samples[0].data",
            "expected an array, found a string",
        ],
    );
}

#[test]
fn bad_command_line_values() {
    let ws = fixture("complex_workspace.json");
    expect_error(
        &["fit", &ws, "--fix", "nope=1"],
        &["--fix nope=1", "not a parameter"],
    );
    expect_error(
        &["fit", &ws, "--fix", "mu=50"],
        &["cannot fix \"mu\" at 50: outside its bounds [0, 10]"],
    );
    expect_error(
        &["fit", &ws, "--measurement", "other"],
        &["no measurement named \"other\""],
    );
    expect_error(
        &["fit", &ws, "--interp", "normsys=code9"],
        &["unknown interpolation code"],
    );
    expect_error(
        &["fit", "/nonexistent/ws.json"],
        &["/nonexistent/ws.json", "cannot read"],
    );
    expect_error(
        &["fit", &ws, "--patch", &format!("{ws}:nothing")],
        &["not a pyhf patchset"],
    );
}

/// On a machine without CUDA, `--gpu cuda` is one clear error (exit 2), on every GPU command.
#[test]
fn gpu_requested_without_cuda() {
    let gpu_present = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["devices", "--json"])
        .output()
        .map(|o| {
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            !v["cuda"].as_array().unwrap().is_empty()
        })
        .unwrap();
    if gpu_present {
        println!("a CUDA device is present: nothing to check here");
        return;
    }
    let ws = fixture("simple_workspace.json");
    for cmd in [
        "fit",
        "scan",
        "hypotest",
        "limit",
        "ranking",
        "toys",
        "hypotest-toys",
    ] {
        expect_error(
            &[cmd, &ws, "--gpu", "cuda"],
            &["--gpu cuda", "CUDA is not available"],
        );
    }
    expect_error(&["fit", &ws, "--gpu", "tpu"], &["unknown device"]);
    // No Metal adapter on Linux: one error naming the device. (Vulkan's loaders may print
    // their own lines on a headless machine, so the one-line check asks for Metal.)
    #[cfg(not(target_os = "macos"))]
    expect_error(
        &["toys", &ws, "--gpu", "metal:3"],
        &["--gpu metal:3", "no wgpu adapter"],
    );
}

#[test]
fn xml_import_errors_name_the_file_and_the_object() {
    let dir = std::env::temp_dir().join(format!("histfit-bad-xml-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let source = fixture("xml/multibin_histfactory");
    std::fs::copy(
        format!("{source}/data/data.root"),
        dir.join("data/data.root"),
    )
    .unwrap();
    let top = std::fs::read_to_string(format!("{source}/config/example.xml")).unwrap();
    let channel = std::fs::read_to_string(format!("{source}/config/example_channel.xml")).unwrap();
    std::fs::write(dir.join("config/example.xml"), &top).unwrap();
    let base = dir.to_str().unwrap();
    let config = dir.join("config/example.xml");
    let config = config.to_str().unwrap();
    let case = |channel_xml: String, needles: &[&str]| {
        std::fs::write(dir.join("config/example_channel.xml"), channel_xml).unwrap();
        expect_error(&["xml2json", config, "--basedir", base], needles);
    };
    case(
        channel.replace("</Channel>", "</Chanel>"),
        &["example_channel.xml", "malformed XML"],
    );
    case(
        channel.replace("HistoName=\"bkgerr\"", "HistoName=\"absent\""),
        &[
            "data.root",
            "no histogram \"absent\"",
            "<ShapeSys Name=\"uncorrshape\">",
        ],
    );
    case(
        channel.replace("./data/data.root", "./data/missing.root"),
        &["missing.root", "cannot open"],
    );
    // Without --basedir the XML's paths are read from the current directory: the error says
    // so, and names the XML's directory as the likely base.
    std::fs::write(dir.join("config/example_channel.xml"), &channel).unwrap();
    expect_error(
        &["xml2json", config],
        &["relative to --basedir", &format!("(--basedir {base})")],
    );
    std::fs::write(dir.join("data/text.root"), "not root").unwrap();
    case(
        channel.replace("./data/data.root", "./data/text.root"),
        &["text.root", "not a ROOT file"],
    );
    // The data histogram from another file, with 300 bins: every sample's 2 bins disagree.
    let other = fixture("xml/generated/zlib.root");
    case(
        channel.replace(
            "<Data HistoName=\"data\" HistoPath=\"\" />",
            &format!("<Data HistoName=\"weighted\" InputFile=\"{other}\" />"),
        ),
        &[
            "data.root: object \"sig\"",
            "2 bins where the channel's data has 300",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A limit whose CLs does not cross α in the range asked has no answer: exit 3 (as a grid's point
/// without one), not 2 (bad input), with one line saying why.
#[test]
fn a_limit_without_a_crossing_exits_3() {
    let ws = fixture("simple_workspace.json");
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["limit", &ws, "--scan", "0:0.1:2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("no upper limit") && stderr.contains("does not cross"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));
    // A limit above the POI's bound: exit 3 alone; in a grid, each point says the bound it lies
    // above ("limit_above"), which the contour draws as not excluded rather than as an error.
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args(["limit", &ws, "--bounds", "mu=0:0.5", "--init", "mu=0.2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("upper bound 0.5"), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_histfit"))
        .args([
            "limit",
            &ws,
            "--patchset",
            &fixture("simple_patchset.json"),
            "--bounds",
            "mu=0:0.5",
            "--init",
            "mu=0.2",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for p in doc["points"].as_array().unwrap() {
        assert_eq!(p["limit_above"], 0.5, "{p}");
    }
}

/// Events from a TTree that cannot be read: one line naming the dataset's source, exit 2.
#[test]
fn bad_tree_sources() {
    let events = std::path::PathBuf::from(fixture("events"));
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(events.join("gauss_exp.json")).unwrap())
            .unwrap();
    for (source, needles) in [
        (
            json!({"format": "root", "file": events.join("tree_kinds.root"), "tree": "sub/events",
                   "columns": {"x": "vec"}}),
            &["histfit_source", "branch \"vec\"", "not a flat branch"][..],
        ),
        (
            json!({"format": "root", "file": events.join("tree_zstd.root"), "tree": "events",
                   "columns": {"x": "mass"}, "selection": "pt >> 3"}),
            &["histfit_source.selection", "does not parse"][..],
        ),
    ] {
        doc["data"][0]["histfit_source"] = source;
        expect_ws_error("bad_tree", &doc, needles);
    }
}

/// A POI whose bounds leave out 0 (an event-level model's peak position or width) has no
/// background-only hypothesis: every test, limit and significance says so, naming the choice,
/// instead of failing a fit at a point outside the bounds.
#[test]
fn a_poi_without_a_background_only_hypothesis_is_refused() {
    let doc = fixture("events/gauss_exp.json");
    for args in [
        vec!["limit", &doc, "--poi", "sigma"],
        vec!["significance", &doc, "--poi", "mean"],
        vec!["hypotest", &doc, "--poi", "mean", "--mu", "85"],
        vec![
            "hypotest-toys",
            &doc,
            "--poi",
            "mean",
            "--mu",
            "85",
            "--n-toys",
            "5",
        ],
    ] {
        expect_error(&args, &["background-only hypothesis", "--poi NAME"]);
    }
}

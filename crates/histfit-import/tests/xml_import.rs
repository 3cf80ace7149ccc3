//! `xml2json` against pyhf 0.7.6's on every HistFactory configuration of pyhf's repository that
//! the fixtures hold (tests/fixtures/xml/goldens/xml_imports.json, made by
//! scripts/make_xml_goldens.py): the same workspace (every channel, sample, modifier, number and
//! measurement, in pyhf's order), the same likelihood at two points and a fit at least as good as
//! pyhf's; configurations pyhf refuses are refused with a message naming the file.

use histfit_compute::HistFactoryData;
use histfit_compute::{CpuEvaluator, Dataset, Evaluator};
use histfit_import::xml2json;
use histfit_infer::{fit, FitOptions};
use histfit_model::{compile, Settings, Workspace};
use histfit_testutil::{fixture, floats, json};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

fn import(
    config: &str,
    basedir: &str,
) -> Result<histfit_import::Imported, histfit_import::ImportError> {
    xml2json(
        Path::new(&fixture(&format!("xml/{config}"))),
        Path::new(&fixture(&format!("xml/{basedir}"))),
        &[],
    )
}

#[test]
fn every_configuration_imports_as_pyhf_imports_it() {
    let goldens = json("xml/goldens/xml_imports.json");
    let mut imported = 0;
    for (config, case) in goldens.as_object().expect("cases") {
        let result = import(config, case["basedir"].as_str().unwrap());
        if let Some(kind) = case.get("error") {
            let err = result
                .err()
                .unwrap_or_else(|| panic!("{config}: pyhf refuses it ({kind})"));
            println!("{config}: refused as pyhf refuses it ({kind}): {err}");
            assert!(
                err.place.contains(".xml") || err.place.contains(".root"),
                "{err}"
            );
            continue;
        }
        let result = result.unwrap_or_else(|e| panic!("{config}: {e}"));
        assert_eq!(
            result.workspace, case["workspace"],
            "{config}: workspace differs from pyhf's"
        );
        check_likelihood(config, &result.workspace, case);
        imported += 1;
    }
    assert_eq!(imported, 15);
}

/// The likelihood at pyhf's two points, and the fit (pyhf's interpolation setting).
fn check_likelihood(config: &str, workspace: &Value, case: &Value) {
    let mut workspace = workspace.clone();
    if case["poi"].is_null() {
        workspace["measurements"][0]["config"]["poi"] = Value::from("");
    }
    let ws = Workspace::from_value(&workspace).unwrap();
    let model = Arc::new(compile(&ws, None, &Settings::pyhf_defaults()).unwrap());
    let names: Vec<&str> = model.parameters.iter().map(|p| p.name.as_str()).collect();
    let expected_names: Vec<&str> = case["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let data = Dataset::observed(&model);
    let mut eval = CpuEvaluator::new(model.clone());
    let mut reordered = Vec::new();
    for (point, twice_nll) in case["points"]
        .as_array()
        .unwrap()
        .iter()
        .zip(floats(&case["twice_nll"]))
    {
        let pyhf_point = floats(point);
        // pyhf may order parameters differently: place each value by name.
        let x: Vec<f64> = names
            .iter()
            .map(|n| {
                pyhf_point[expected_names
                    .iter()
                    .position(|m| m == n)
                    .expect("same names")]
            })
            .collect();
        let got = 2.0 * eval.nll(&x, &data).unwrap();
        assert!(
            (got - twice_nll).abs() <= 1e-9 * twice_nll.abs().max(1.0),
            "{config}: twice_nll {got} vs pyhf {twice_nll}"
        );
        reordered.push(x);
    }
    let mut sorted_names = names.clone();
    sorted_names.sort();
    let mut sorted_expected = expected_names.clone();
    sorted_expected.sort();
    assert_eq!(sorted_names, sorted_expected, "{config}: parameters");
    let best = fit(&mut eval, &data, &FitOptions::default()).unwrap();
    let reference = case["best_twice_nll"].as_f64().unwrap();
    println!("{config}: fit {:.9} pyhf {reference:.9}", best.twice_nll);
    assert!(best.converged, "{config}: fit did not converge");
    assert!(
        best.twice_nll <= reference + 1e-6,
        "{config}: fit {} above pyhf's {reference}",
        best.twice_nll
    );
    assert!(
        best.twice_nll >= reference - 1e-3,
        "{config}: fit {} far below pyhf's {reference}",
        best.twice_nll
    );
}

#[test]
fn a_measurement_without_poi_is_refused_as_pyhf_refuses_it() {
    // pyhf's own test reads this configuration's channel from validation/xmlimport_input.
    let err = import("xmlimport_missingPOI/config/example.xml", "xmlimport_input").unwrap_err();
    assert!(
        err.place.contains("example.xml")
            && err.place.contains("<Measurement Name=\"GaussExample\">"),
        "{err}"
    );
    assert!(err.rule.contains("no <POI>"), "{err}");
}

/// A copy of multibin_histfactory with one file changed: each bad input gives one error that
/// names the file and the element or object, and the rule.
fn broken_copy(
    tag: &str,
    channel_xml: Option<&str>,
    top_xml: Option<&str>,
) -> (std::path::PathBuf, String) {
    let source = Path::new(&fixture("xml/multibin_histfactory")).to_path_buf();
    let dir = std::env::temp_dir().join(format!("histfit-xml-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::copy(source.join("data/data.root"), dir.join("data/data.root")).unwrap();
    let channel = std::fs::read_to_string(source.join("config/example_channel.xml")).unwrap();
    let top = std::fs::read_to_string(source.join("config/example.xml")).unwrap();
    std::fs::write(
        dir.join("config/example_channel.xml"),
        channel_xml.map(|f| f.to_string()).unwrap_or(channel),
    )
    .unwrap();
    std::fs::write(
        dir.join("config/example.xml"),
        top_xml.map(|f| f.to_string()).unwrap_or(top),
    )
    .unwrap();
    let err = xml2json(&dir.join("config/example.xml"), &dir, &[])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    (dir, err)
}

#[test]
fn bad_inputs_name_the_file_and_the_element() {
    let channel = std::fs::read_to_string(fixture(
        "xml/multibin_histfactory/config/example_channel.xml",
    ))
    .unwrap();
    // Malformed XML: the file and the position.
    let (_, e) = broken_copy(
        "malformed",
        Some(&channel.replace("</Channel>", "</Chanel>")),
        None,
    );
    assert!(
        e.contains("example_channel.xml") && e.contains("malformed XML"),
        "{e}"
    );
    // A histogram that is not in the ROOT file.
    let (_, e) = broken_copy(
        "missing",
        Some(&channel.replace("HistoName=\"bkgerr\"", "HistoName=\"nope\"")),
        None,
    );
    assert!(
        e.contains("data.root")
            && e.contains("no histogram \"nope\"")
            && e.contains("<ShapeSys Name=\"uncorrshape\">"),
        "{e}"
    );
    // A ROOT file that is not there.
    let (_, e) = broken_copy(
        "nofile",
        Some(&channel.replace("./data/data.root", "./data/other.root")),
        None,
    );
    assert!(e.contains("other.root") && e.contains("cannot open"), "{e}");
    // Samples binned otherwise than the channel's data (here: data of 300 bins, samples of 2).
    let generated = fixture("xml/generated/zlib.root");
    let rebinned = channel.replace(
        "<Data HistoName=\"data\" HistoPath=\"\" />",
        &format!("<Data HistoName=\"weighted\" InputFile=\"{generated}\" />"),
    );
    let (_, e) = broken_copy("binning", Some(&rebinned), None);
    assert!(
        e.contains("data.root")
            && e.contains("bins where the channel's data has 300")
            && e.contains("<Sample Name=\"signal\">"),
        "{e}"
    );
    // A missing attribute and a number that is not one.
    let (_, e) = broken_copy(
        "attr",
        Some(&channel.replace(" HistoName=\"sig\"", "")),
        None,
    );
    assert!(
        e.contains("<Sample Name=\"signal\">") && e.contains("missing attribute HistoName"),
        "{e}"
    );
    let (_, e) = broken_copy(
        "number",
        Some(&channel.replace("High=\"10.\"", "High=\"ten\"")),
        None,
    );
    assert!(
        e.contains("<NormFactor Name=\"SigXsecOverSM\">")
            && e.contains("High=\"ten\" is not a number"),
        "{e}"
    );
    // A gamma parameter set constant.
    let top =
        std::fs::read_to_string(fixture("xml/multibin_histfactory/config/example.xml")).unwrap();
    let (_, e) = broken_copy(
        "gamma",
        None,
        Some(&top.replace(
            "<POI>",
            "<ParamSetting Const=\"True\">gamma_uncorrshape_0</ParamSetting><POI>",
        )),
    );
    assert!(
        e.contains("example.xml") && e.contains("gamma_uncorrshape_0"),
        "{e}"
    );
}

/// `--mount HOST:MOUNT` as pyhf's: paths the XML writes as `./data/…` match a mount `data`.
#[test]
fn mounts_rewrite_the_paths_the_xml_names() {
    let case = &json("xml/goldens/xml_imports.json")["multibin_histfactory/config/example.xml"];
    let data_dir = Path::new(&fixture("xml/multibin_histfactory/data")).to_path_buf();
    // The configuration is read from its own directory; its data only through the mount.
    let dir = std::env::temp_dir().join(format!("histfit-xml-mount-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("config")).unwrap();
    for f in ["example.xml", "example_channel.xml"] {
        std::fs::copy(
            fixture(&format!("xml/multibin_histfactory/config/{f}")),
            dir.join("config").join(f),
        )
        .unwrap();
    }
    let mounts = [histfit_import::Mount {
        host: data_dir,
        mount: "data".into(),
    }];
    let imported = xml2json(&dir.join("config/example.xml"), &dir, &mounts).unwrap();
    assert_eq!(imported.workspace, case["workspace"]);
    let err = xml2json(&dir.join("config/example.xml"), &dir, &[]).unwrap_err();
    assert!(
        err.to_string().contains("data.root") && err.to_string().contains("cannot open"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

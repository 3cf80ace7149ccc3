//! Inference is written against the likelihood seam only: `histfit-infer`'s dependencies (not
//! its dev-dependencies, where tests use the HistFactory model as a likelihood) name no model or
//! evaluator crate.

#[test]
fn inference_links_no_model_crate() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("histfit-infer's manifest");
    let deps: Vec<&str> = manifest
        .lines()
        .skip_while(|l| l.trim() != "[dependencies]")
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter_map(|l| l.split('=').next().map(str::trim))
        .filter(|name| !name.is_empty())
        .collect();
    assert!(deps.contains(&"histfit-seam"), "{deps:?}");
    for crate_ in [
        "histfit-model",
        "histfit-compute",
        "histfit-unbinned",
        "histfit-device",
    ] {
        assert!(
            !deps.contains(&crate_),
            "histfit-infer depends on {crate_}: {deps:?}"
        );
    }
}

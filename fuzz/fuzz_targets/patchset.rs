//! A patchset (the bytes) applied to a shipped workspace chosen by the first byte: JSON Patch
//! operations, names, then the patched workspace as the workspace target checks it.
#![no_main]
use std::sync::OnceLock;

fn bases() -> &'static [serde_json::Value] {
    static BASES: OnceLock<Vec<serde_json::Value>> = OnceLock::new();
    BASES.get_or_init(|| {
        ["simple_workspace.json", "complex_workspace.json", "two_channel_workspace.json"]
            .iter()
            .map(|n| histfit_testutil::json(n))
            .collect()
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let base = &bases()[pick as usize % bases().len()];
    histfit_testutil::inputs::patchset_bytes(base, rest);
});

//! A HistFactory configuration: top-level XML, a NUL byte, a channel XML, imported against the
//! ROOT files of pyhf's validation inputs (copied once into a temporary directory's `data/`).
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("histfit-fuzz-xml-{}", std::process::id()));
        histfit_testutil::inputs::xml_sandbox(&dir);
        dir
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| histfit_testutil::inputs::xml_bytes(dir(), data));

//! A HistFactory configuration: top-level XML, a NUL byte, a channel XML, imported against the
//! ROOT files of pyhf's validation inputs (copied once into a temporary directory's `data/`).
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("histfit-fuzz-xml-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("config")).unwrap();
        std::fs::create_dir_all(dir.join("data")).unwrap();
        for (from, to) in [
            ("xml/xmlimport_input/data/example.root", "example.root"),
            ("xml/multichannel_histfactory/data/data.root", "data.root"),
            ("xml/xmlimport_input/data/ShapeSys.root", "ShapeSys.root"),
            ("xml/generated/zstd.root", "zstd.root"),
        ] {
            std::fs::copy(histfit_testutil::fixture(from), dir.join("data").join(to)).unwrap();
        }
        dir
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| histfit_testutil::inputs::xml_bytes(dir(), data));

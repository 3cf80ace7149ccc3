//! Raw bytes as a ROOT file: header, directories, keys, compressed records, every object read
//! as a one-dimensional histogram (`histfit_testutil::inputs::root_bytes`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| histfit_testutil::inputs::root_bytes(data));

//! Raw bytes as an HS3 document: open it as an event-level likelihood, −ln L and gradient at the
//! initial point (`histfit_testutil::inputs::hs3_bytes`). Dictionary: fuzz/json.dict.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| histfit_testutil::inputs::hs3_bytes(data));

//! Raw bytes as a pyhf workspace: parse, validate, compile (both settings), −ln L and gradient at
//! the initial point (`histfit_testutil::inputs::workspace_bytes`). Dictionary: fuzz/json.dict.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| histfit_testutil::inputs::workspace_bytes(data));

//! Raw bytes as a `generic_function` expression: parse into the expression graph and evaluate
//! (`histfit_testutil::inputs::expression_bytes`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| histfit_testutil::inputs::expression_bytes(data));

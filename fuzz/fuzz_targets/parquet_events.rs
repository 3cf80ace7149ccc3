//! Raw bytes as a Parquet file of events: read an observable, a weight column and the domain
//! as a fit range, with and without dropping (`histfit_testutil::inputs::parquet_bytes`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| histfit_testutil::inputs::parquet_bytes(data));

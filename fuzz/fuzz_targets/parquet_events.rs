//! Raw bytes as a Parquet file of events: read an observable, a weight column and the domain
//! as a fit range, with and without dropping (`histfit_testutil::inputs::parquet_bytes`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The parquet crate panics on some malformed files (in release builds too), which histfit
    // catches and reports as an error naming the file; libFuzzer's hook aborts on every panic,
    // so panics while a decoder is guarded are let through to that catch.
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !histfit_events::panic_is_guarded(info) {
                abort(info)
            }
        }));
    });
    histfit_testutil::inputs::parquet_bytes(data)
});

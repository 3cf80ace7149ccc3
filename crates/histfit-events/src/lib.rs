//! `histfit-events`: where an event-level likelihood's events come from, read into columns of
//! f64 (structure of arrays) with optional weights — [`parquet`] files and ROOT TTrees ([`tree`]);
//! arrays handed over from Python next. No statistics here: the HS3 reader in `histfit-unbinned`
//! says what to read (columns, domains, what to do with events outside them) and builds the
//! likelihood over what comes back.

pub mod parquet;
pub mod thrift_guard;
pub mod tree;

pub use self::parquet::{
    count_outside, read_parquet, read_parquet_bytes, ColumnRequest, Loaded, SourceError, SourceSpec,
};
pub use self::tree::{read_branches, TreeFile};

use std::sync::atomic::{AtomicUsize, Ordering};

/// Decoders of third-party crates running under [`guarded`] now.
static GUARDED: AtomicUsize = AtomicUsize::new(0);

/// The crates whose code a Parquet decoder runs: the parquet crate, and those it slices and
/// decompresses pages with (a page whose header claims more bytes than it holds panicked in
/// `bytes`: fuzz parquet_events crash-e8a500c0).
const DECODER_CRATES: &[&str] = &[
    "/parquet-",
    "/bytes-",
    "/snap-",
    "/lz4_flex-",
    "/zstd-",
    "/half-",
];

/// Whether the panic a hook sees is a third-party decoder's under [`guarded`] — one is running
/// and the panic's place is one of [`DECODER_CRATES`]' sources: it is caught and becomes an
/// error naming the file, so a panic hook (the CLI's, a fuzz harness's) should not report it.
/// Any other panic, histfit's own included and on any thread, is reported as ever.
pub fn panic_is_guarded(info: &std::panic::PanicHookInfo<'_>) -> bool {
    GUARDED.load(Ordering::Relaxed) > 0
        && info.location().is_some_and(|l| {
            let file = l.file().replace('\\', "/");
            DECODER_CRATES.iter().any(|c| file.contains(c))
        })
}

/// `f` with its panics caught: the parquet crate panics on some malformed files (a varint
/// longer than ten bytes asserts in its bit reader, in release builds too; fuzz:
/// parquet_events crash-f4b01be1), and a malformed file must be an error, never the end of the
/// process.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    GUARDED.fetch_add(1, Ordering::Relaxed);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    GUARDED.fetch_sub(1, Ordering::Relaxed);
    r
}

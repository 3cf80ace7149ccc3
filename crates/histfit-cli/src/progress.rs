//! A progress bar on stderr for long commands (scans, limit scans, ranking, toys), drawn only
//! when stderr is a terminal so logs and pipes stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

/// The bar and the most done so far (several workers report cumulative counts, not always in
/// order: the bar never moves back).
pub struct Bar(ProgressBar, AtomicU64);

impl Bar {
    pub fn new(label: &str, total: usize) -> Bar {
        let bar = ProgressBar::with_draw_target(
            Some(total as u64),
            if std::io::stderr().is_terminal() {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(label.to_owned());
        Bar(bar, AtomicU64::new(0))
    }

    pub fn set(&self, done: usize) {
        let done = done as u64;
        self.0
            .set_position(self.1.fetch_max(done, Ordering::Relaxed).max(done));
    }

    /// One more item done (from any thread).
    pub fn inc(&self) {
        self.0.inc(1);
    }

    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

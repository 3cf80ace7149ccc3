//! A progress bar on stderr for long commands (scans, limit scans, ranking, toys), drawn only
//! when stderr is a terminal so logs and pipes stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub struct Bar(ProgressBar);

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
        Bar(bar)
    }

    pub fn set(&self, done: usize) {
        self.0.set_position(done as u64);
    }

    /// One more item done (from any thread).
    pub fn inc(&self) {
        self.0.inc(1);
    }

    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

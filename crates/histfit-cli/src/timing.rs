//! `HISTFIT_TIMING` (set to anything, e.g. 1): the time since the start of the process at the
//! end of each phase of a command (reading and compiling, opening the device, baseline fits, the
//! ensemble, output), on stderr. It says where a GPU run's fixed costs go; the CUDA backend adds
//! its own lines (each device's opening, each block of a resident ensemble) under the same
//! variable.

use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<Option<Instant>> = OnceLock::new();

/// Starts the clock (first thing in `main`) if `HISTFIT_TIMING` is set.
pub fn start() {
    START.get_or_init(|| std::env::var_os("HISTFIT_TIMING").map(|_| Instant::now()));
}

/// Prints the time since [`start`] with what just ended.
pub fn mark(what: &str) {
    if let Some(Some(t)) = START.get() {
        eprintln!("timing: {:8.3} s  {what}", t.elapsed().as_secs_f64());
    }
}

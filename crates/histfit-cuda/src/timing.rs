//! `HISTFIT_TIMING` (set to anything): how long each device's opening and each block of a
//! resident ensemble take, on stderr (the CLI prints its phases under the same variable): what a
//! split over several GPUs pays once per device, and how its blocks went.

use std::time::Instant;

/// A stopwatch that exists only when `HISTFIT_TIMING` is set.
pub(crate) struct Clock(Option<std::cell::Cell<Instant>>);

impl Clock {
    pub(crate) fn start() -> Clock {
        Clock(std::env::var_os("HISTFIT_TIMING").map(|_| std::cell::Cell::new(Instant::now())))
    }

    /// Seconds since the start or the last lap (0 when not timing).
    pub(crate) fn lap(&self) -> f64 {
        self.0.as_ref().map_or(0.0, |c| {
            let now = Instant::now();
            let dt = now.duration_since(c.get()).as_secs_f64();
            c.set(now);
            dt
        })
    }

    /// Prints `line()` when timing.
    pub(crate) fn report(&self, line: impl FnOnce() -> String) {
        if self.0.is_some() {
            eprintln!("timing: {}", line());
        }
    }
}

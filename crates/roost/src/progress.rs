//! The one progress display of every command that moves data (get, put, mv, pcp): a bar on
//! standard error with the bytes moved, the rate and an ETA (a spinner when the total is
//! unknown), drawn only when standard error is a terminal and cleared when done.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// A transfer's progress.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A display for `what` (the command's name), moving `total` bytes if known.
    pub fn new(what: &'static str, total: Option<u64>) -> Progress {
        if unsafe { libc::isatty(libc::STDERR_FILENO) } != 1 {
            return Progress { bar: None };
        }
        let (bar, template) = match total {
            Some(total) => (
                ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr()),
                "{prefix} [{bar:24}] {percent:>3}% {binary_bytes}/{binary_total_bytes} \
                 {binary_bytes_per_sec} ETA {eta}",
            ),
            None => (
                ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
                "{prefix} {spinner} {binary_bytes} {binary_bytes_per_sec} {elapsed}",
            ),
        };
        let style = ProgressStyle::with_template(template)
            .expect("a valid template")
            .progress_chars("#>-");
        bar.set_style(style);
        bar.set_prefix(what);
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress { bar: Some(bar) }
    }

    /// A display that shows nothing (`-q`).
    pub fn hidden() -> Progress {
        Progress { bar: None }
    }

    /// Records `n` more bytes moved.
    pub fn advance(&mut self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    /// Clears the display.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

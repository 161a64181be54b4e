//! A one-line progress display on standard error for long transfers, shown only when standard
//! error is a terminal and the transfer takes more than a moment.

use std::io::Write;
use std::time::{Duration, Instant};

/// Transfers shorter than this never show a progress line.
const QUIET_FOR: Duration = Duration::from_millis(500);
/// Redraw at most this often.
const REDRAW_EVERY: Duration = Duration::from_millis(100);

pub struct Progress {
    what: &'static str,
    total: Option<u64>,
    done: u64,
    started: Instant,
    last_draw: Option<Instant>,
    enabled: bool,
}

impl Progress {
    /// `total` bytes if known.
    pub fn new(what: &'static str, total: Option<u64>) -> Progress {
        let enabled = unsafe { libc::isatty(libc::STDERR_FILENO) } == 1;
        Progress {
            what,
            total,
            done: 0,
            started: Instant::now(),
            last_draw: None,
            enabled,
        }
    }

    /// Records `n` more bytes moved.
    pub fn advance(&mut self, n: u64) {
        self.done += n;
        if !self.enabled || self.started.elapsed() < QUIET_FOR {
            return;
        }
        if self.last_draw.is_some_and(|t| t.elapsed() < REDRAW_EVERY) {
            return;
        }
        self.last_draw = Some(Instant::now());
        self.draw();
    }

    fn draw(&self) {
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = self.done as f64 / secs / 1e6;
        let line = match self.total {
            Some(total) if total > 0 => {
                let pct = (self.done as f64 * 100.0 / total as f64).min(100.0);
                let filled = (pct / 5.0) as usize;
                format!(
                    "{} [{}{}] {:5.1}% {} of {} {:.1} MB/s",
                    self.what,
                    "#".repeat(filled),
                    " ".repeat(20 - filled.min(20)),
                    pct,
                    human(self.done),
                    human(total),
                    rate
                )
            }
            _ => format!("{} {} {:.1} MB/s", self.what, human(self.done), rate),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}\x1b[K");
        let _ = err.flush();
    }

    /// Clears the progress line, if one was drawn.
    pub fn finish(&mut self) {
        if self.last_draw.is_some() {
            self.draw();
            let _ = writeln!(std::io::stderr());
        }
    }
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(5 << 30), "5.0 GiB");
    }
}

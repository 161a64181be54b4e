//! The progress line of a run on a terminal: tasks done, running, failed and waiting, hosts
//! still in the run, and the time so far, redrawn in place on standard error.

use crate::schedule::Scheduler;
use std::io::Write;
use std::time::Instant;

pub struct Line {
    total: usize,
    started: Instant,
    drawn: usize,
}

impl Line {
    pub fn new(total: usize, started: Instant) -> Line {
        Line {
            total,
            started,
            drawn: 0,
        }
    }

    /// The text for the scheduler's state now.
    pub fn text(&self, scheduler: &Scheduler) -> String {
        let (done, running, failed, pending, hosts) = scheduler.counts();
        let width = 20;
        let filled = (done * width).checked_div(self.total).unwrap_or(width);
        format!(
            "[{}{}] {done}/{} done, {running} running, {pending} waiting, {failed} failed; {hosts} host{} up; {:.1} s",
            "#".repeat(filled),
            " ".repeat(width - filled),
            self.total,
            if hosts == 1 { "" } else { "s" },
            self.started.elapsed().as_secs_f64()
        )
    }

    pub fn draw(&mut self, scheduler: &Scheduler) {
        let text = self.text(scheduler);
        let pad = self.drawn.saturating_sub(text.len());
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{text}{}", " ".repeat(pad));
        let _ = err.flush();
        self.drawn = text.len();
    }

    pub fn clear(&mut self) {
        if self.drawn > 0 {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{}\r", " ".repeat(self.drawn));
            let _ = err.flush();
            self.drawn = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_counts_tasks_and_hosts() {
        let now = Instant::now();
        let mut s = Scheduler::new(&[1.0; 4], 2, 0, false);
        let a = s.next(0, now).unwrap();
        s.next(1, now).unwrap();
        assert!(s.claim(a.task, 0, a.attempt));
        s.done(a.task, 0, a.attempt, now);
        let text = Line::new(4, now).text(&s);
        assert!(
            text.starts_with(
                "[#####               ] 1/4 done, 1 running, 2 waiting, 0 failed; 2 hosts up"
            ),
            "{text}"
        );
    }
}

//! `roost serve --supervise`, Legion's "phoenix": the server runs as a child process of a
//! supervisor that restarts it whenever it dies, and stops it when asked.
//!
//! The child is this same program with the same arguments, told by [`SUPERVISED`] in its
//! environment that it is the server; from the first restart on, [`SUPERVISED_PORT`] gives it
//! the port the first child announced, so `--port 0` keeps one port. Export, ACLs (files in
//! the export), job directory and ledger are named by the arguments, so a restarted server
//! takes them up as it left them. Each death is logged with its cause (exit status or
//! signal) and how long the server ran; the restart waits `--restart-delay`, doubled after
//! each death that came sooner than `--healthy-after` since its start, at most
//! `--restart-max-delay`. SIGTERM, SIGINT or SIGHUP to the supervisor sends SIGTERM to the
//! server (SIGKILL if it has not ended within [`STOP_GRACE`]) and ends the supervisor with
//! status 0. A server that dies before announcing itself at the very first start has bad
//! options or cannot listen: the supervisor ends with its exit status instead of looping.

use crate::serve::ServeArgs;
use crate::signals::StopSignals;
use roost_server::jobs::record::signal_name;
use roost_server::log::{self, Level};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Set in the server's environment: it is the supervised child.
pub const SUPERVISED: &str = roost_server::SUPERVISED_ENV;
/// Set in a restarted server's environment: the port to listen on.
pub const SUPERVISED_PORT: &str = "ROOST_SUPERVISED_PORT";
/// How long a stopping server may take before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often the supervisor looks at its child and the signals.
const LOOK: Duration = Duration::from_millis(50);

/// The back-off between restarts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
    pub healthy_after: Duration,
}

impl Backoff {
    fn from_args(args: &ServeArgs) -> Result<Backoff, String> {
        let positive = |option: &str, d: Duration| {
            if d.is_zero() {
                Err(format!("{option} 0: expected more than 0"))
            } else {
                Ok(d)
            }
        };
        let b = Backoff {
            first: positive("--restart-delay", args.restart_delay)?,
            max: positive("--restart-max-delay", args.restart_max_delay)?,
            healthy_after: positive("--healthy-after", args.healthy_after)?,
        };
        if b.max < b.first {
            return Err("--restart-max-delay must be at least --restart-delay".into());
        }
        Ok(b)
    }

    /// The wait before the next restart, after a server that ran `ran`; `previous` was the
    /// wait before the last one (`None` before the first).
    pub fn next(&self, previous: Option<Duration>, ran: Duration) -> Duration {
        match previous {
            Some(p) if ran < self.healthy_after => (p * 2).min(self.max),
            _ => self.first,
        }
    }
}

pub fn main(args: &ServeArgs) -> ExitCode {
    match supervise(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("roost serve: {message}");
            ExitCode::from(2)
        }
    }
}

/// Why a server ended, for the log.
fn cause(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) if status.core_dumped() => {
            format!("killed by {} (core dumped)", signal_name(signal))
        }
        (None, Some(signal)) => format!("killed by {}", signal_name(signal)),
        _ => "ended".into(),
    }
}

fn supervise(args: &ServeArgs) -> Result<ExitCode, String> {
    let backoff = Backoff::from_args(args)?;
    let signals = StopSignals::catch().map_err(|e| format!("cannot catch stop signals: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut port: Option<u16> = None;
    let mut wait: Option<Duration> = None;
    let mut restarts = 0u64;
    loop {
        let started = Instant::now();
        let mut command = Command::new(&exe);
        command
            .args(&argv)
            .env(SUPERVISED, "1")
            .stdout(Stdio::piped());
        if let Some(p) = port {
            command.env(SUPERVISED_PORT, p.to_string());
        }
        let supervisor = std::process::id() as libc::pid_t;
        // SAFETY: only system calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                // The server dies with its supervisor, even one killed with SIGKILL.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != supervisor {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start the server: {e}"))?;
        let announced = announcements(&mut child);
        log::event(
            Level::Info,
            "supervise",
            &[("pid", &child.id()), ("restarts", &restarts)],
        );
        let status = loop {
            if let Some(signal) = signals.poll(LOOK) {
                stop(&mut child, signal);
                return Ok(ExitCode::SUCCESS);
            }
            if let Ok(line) = announced.try_recv() {
                let addr = roost_server::announced_addr(&line);
                if port.is_none() {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                } else {
                    log::event(
                        Level::Info,
                        "restarted",
                        &[("pid", &child.id()), ("line", &line)],
                    );
                }
                port = port.or(addr.map(|a| a.port()));
            }
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => return Err(format!("cannot wait for the server: {e}")),
            }
        };
        let ran = started.elapsed();
        if port.is_none() && restarts == 0 {
            // Never came up: bad options or no port; restarting would not help.
            log::event(
                Level::Error,
                "supervise-gave-up",
                &[("cause", &cause(status))],
            );
            let code = status.code().unwrap_or(1).clamp(1, 255) as u8;
            return Ok(ExitCode::from(code));
        }
        let delay = backoff.next(wait, ran);
        wait = Some(delay);
        restarts += 1;
        log::event(
            Level::Error,
            "server-died",
            &[
                ("pid", &child.id()),
                ("cause", &cause(status)),
                ("ran_s", &format!("{:.1}", ran.as_secs_f64())),
                ("restart", &restarts),
                ("delay_s", &format!("{:.2}", delay.as_secs_f64())),
            ],
        );
        if signals.poll(delay).is_some() {
            log::event(Level::Info, "supervise-stop", &[("server", &"not running")]);
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// The child's announcement line, when it comes; the rest of its standard output is passed on.
fn announcements(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut reader = BufReader::new(out);
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) > 0 {
                let _ = tx.send(line.trim_end().to_string());
            }
            let _ = std::io::copy(&mut reader, &mut std::io::stdout());
        });
    }
    rx
}

/// Stops the server: SIGTERM, then SIGKILL after [`STOP_GRACE`].
fn stop(child: &mut Child, signal: i32) {
    log::event(
        Level::Info,
        "supervise-stop",
        &[("signal", &signal_name(signal)), ("pid", &child.id())],
    );
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + STOP_GRACE;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                log::event(Level::Info, "server-stopped", &[("cause", &cause(status))]);
                return;
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(LOOK),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                log::event(
                    Level::Error,
                    "server-killed",
                    &[("after_s", &STOP_GRACE.as_secs())],
                );
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_deaths_double_the_wait_up_to_the_cap_and_health_resets_it() {
        let b = Backoff {
            first: Duration::from_millis(200),
            max: Duration::from_secs(1),
            healthy_after: Duration::from_secs(5),
        };
        let quick = Duration::from_millis(10);
        let mut wait = None;
        let mut seen = Vec::new();
        for _ in 0..5 {
            let next = b.next(wait, quick);
            seen.push(next.as_millis());
            wait = Some(next);
        }
        assert_eq!(seen, [200, 400, 800, 1000, 1000]);
        assert_eq!(b.next(wait, Duration::from_secs(6)).as_millis(), 200);
    }
}

//! Structured logs: one line per event on standard error, with a UTC timestamp, as
//! `key=value` pairs or (`--log-format json`) one JSON object. Connections and errors log
//! at `info`; every RPC logs at `debug`. The libraries' own messages (rustls, ureq, which
//! log through the `log` crate) come out the same way, as `event=library` lines
//! ([`forward_library_logs`]), in `roost serve` and in every other command
//! ([`forward_library_logs_for_command`]).

use roost_base::date::Utc;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// How much the server says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 0,
    Info = 1,
    Debug = 2,
}

impl Level {
    pub fn parse(text: &str) -> Option<Level> {
        match text {
            "error" => Some(Level::Error),
            "info" => Some(Level::Info),
            "debug" => Some(Level::Debug),
            _ => None,
        }
    }

    fn from_u8(n: u8) -> Level {
        match n {
            0 => Level::Error,
            1 => Level::Info,
            _ => Level::Debug,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static JSON: AtomicBool = AtomicBool::new(false);

pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
    log::set_max_level(match level {
        Level::Error => log::LevelFilter::Warn,
        Level::Info => log::LevelFilter::Info,
        Level::Debug => log::LevelFilter::Debug,
    });
}

/// How lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `2026-11-22T06:30:40.848Z level=info event=connect peer=...`
    Text,
    /// `{"time":"2026-11-22T06:30:40.848Z","level":"info","event":"connect","peer":"..."}`
    Json,
}

pub fn set_format(format: Format) {
    JSON.store(format == Format::Json, Ordering::Relaxed);
}

/// Sends what libraries log through the `log` crate (rustls' TLS alerts, ureq) to these
/// lines, as `event=library target=... message=...`: warnings and errors at `error`, their
/// info at `info`, their debug at `debug`, as far as the log level ([`set_level`]) lets
/// through. Once per process; later calls do nothing.
pub fn forward_library_logs() {
    struct Forward;
    impl log::Log for Forward {
        fn enabled(&self, metadata: &log::Metadata) -> bool {
            metadata.level() <= log::max_level()
        }
        fn log(&self, record: &log::Record) {
            if self.enabled(record.metadata()) {
                write_event(
                    level_of(record.level()),
                    "library",
                    &[("target", &record.target()), ("message", record.args())],
                );
            }
        }
        fn flush(&self) {}
    }
    fn level_of(level: log::Level) -> Level {
        match level {
            log::Level::Error | log::Level::Warn => Level::Error,
            log::Level::Info => Level::Info,
            log::Level::Debug | log::Level::Trace => Level::Debug,
        }
    }
    static FORWARD: Forward = Forward;
    if log::set_logger(&FORWARD).is_ok() {
        set_level(Level::from_u8(LEVEL.load(Ordering::Relaxed)));
    }
}

/// [`forward_library_logs`] for a command that is not a server (the client commands, `roost
/// run`), whose own messages are not these lines: the libraries' errors only (`quiet`), also
/// their warnings (by default), or everything down to their debug messages (`verbose`).
pub fn forward_library_logs_for_command(verbose: bool, quiet: bool) {
    forward_library_logs();
    log::set_max_level(match (verbose, quiet) {
        (true, _) => log::LevelFilter::Debug,
        (false, true) => log::LevelFilter::Error,
        (false, false) => log::LevelFilter::Warn,
    });
}

pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Writes one event; values with spaces or quotes are quoted.
pub fn event(level: Level, name: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
    if enabled(level) {
        write_event(level, name, fields);
    }
}

/// Writes one event, whatever the level.
fn write_event(level: Level, name: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
    let line = if JSON.load(Ordering::Relaxed) {
        json_line(level, name, fields)
    } else {
        text_line(level, name, fields)
    };
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

fn text_line(level: Level, name: &str, fields: &[(&str, &dyn std::fmt::Display)]) -> String {
    let mut line = format!("{} level={} event={}", timestamp(), level.name(), name);
    for (key, value) in fields {
        let value = value.to_string();
        if value.is_empty()
            || value.contains([' ', '"', '='])
            || value.chars().any(char::is_control)
        {
            let _ = write!(line, " {key}={value:?}");
        } else {
            let _ = write!(line, " {key}={value}");
        }
    }
    line.push('\n');
    line
}

/// The same event as one JSON object: every value a string, keys as in the text form.
fn json_line(level: Level, name: &str, fields: &[(&str, &dyn std::fmt::Display)]) -> String {
    use roost_catalog::json::write_string;
    let mut line = String::from("{\"time\":");
    write_string(&timestamp(), &mut line);
    for (key, value) in [("level", level.name()), ("event", name)] {
        line.push(',');
        write_string(key, &mut line);
        line.push(':');
        write_string(value, &mut line);
    }
    for (key, value) in fields {
        line.push(',');
        write_string(key, &mut line);
        line.push(':');
        write_string(&value.to_string(), &mut line);
    }
    line.push_str("}\n");
    line
}

/// The current time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn timestamp() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let t = Utc::of(now.as_secs() as i64);
    format!(
        "{}T{:02}:{:02}:{:02}.{:03}Z",
        t.ymd(),
        t.hour,
        t.minute,
        t.second,
        now.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_parse_back_with_every_field() {
        let line = json_line(
            Level::Info,
            "denied",
            &[("subject", &"unix:bob"), ("why", &"needs 'l' on \"/\"\n")],
        );
        assert!(line.ends_with("}\n"));
        let v = roost_catalog::json::parse(line.trim_end().as_bytes()).unwrap();
        assert_eq!(v.get("level").unwrap().to_plain(), "info");
        assert_eq!(v.get("event").unwrap().to_plain(), "denied");
        assert_eq!(v.get("subject").unwrap().to_plain(), "unix:bob");
        assert_eq!(v.get("why").unwrap().to_plain(), "needs 'l' on \"/\"\n");
        assert!(v.get("time").unwrap().to_plain().ends_with('Z'));
    }
}

//! `--trace FILE` (one JSON object a line per trapped call: pid, syscall, logical path,
//! physical path, result, duration) and `--summary` (a table by operation and by path prefix:
//! count, errors, time), the profiling use of the Parrot paper.

use crate::arch::Sys;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

/// One finished call.
pub struct Record<'a> {
    pub pid: i32,
    pub syscall: Sys,
    pub logical: Option<&'a [u8]>,
    pub physical: Option<&'a [u8]>,
    pub result: i64,
    pub duration: Duration,
}

#[derive(Default, Clone, Copy)]
struct Totals {
    count: u64,
    errors: u64,
    time: Duration,
}

impl Totals {
    fn add(&mut self, r: &Record<'_>) {
        self.count += 1;
        self.errors += u64::from(r.result < 0);
        self.time += r.duration;
    }
}

/// The trace sink and the summary tables.
pub struct Tracer {
    out: Option<Box<dyn Write>>,
    summary: bool,
    by_op: BTreeMap<String, Totals>,
    by_prefix: BTreeMap<String, Totals>,
}

/// Appends `s` as a JSON string.
fn json_str(out: &mut String, s: &[u8]) {
    out.push('"');
    escape(out, s, true);
    out.push('"');
}

/// Appends `s` (lossily UTF-8) with backslashes and control characters escaped as JSON does
/// (`\\`, `\u000a`), and double quotes too when `in_quotes`: a name with a newline or an
/// escape sequence stays on its line in the trace and in the summary's table.
fn escape(out: &mut String, s: &[u8], in_quotes: bool) {
    for ch in String::from_utf8_lossy(s).chars() {
        match ch {
            '"' if in_quotes => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
}

/// The first two components of a logical path (`/usr/lib`), the summary's grouping.
fn prefix(path: &[u8]) -> String {
    if path.first() != Some(&b'/') {
        return "(relative)".into();
    }
    let parts: Vec<&[u8]> = roost_vfs::path::components(path).take(2).collect();
    let mut s = String::new();
    for p in &parts {
        s.push('/');
        escape(&mut s, p, false);
    }
    if s.is_empty() {
        s.push('/');
    }
    s
}

impl Tracer {
    pub fn new(out: Option<Box<dyn Write>>, summary: bool) -> Tracer {
        Tracer {
            out,
            summary,
            by_op: BTreeMap::new(),
            by_prefix: BTreeMap::new(),
        }
    }

    /// True when every trapped call needs its exit stop (to learn result and duration).
    pub fn wants_results(&self) -> bool {
        self.out.is_some() || self.summary
    }

    /// The JSON line of a record.
    pub fn json(r: &Record<'_>) -> String {
        let mut s = format!(
            "{{\"pid\":{},\"syscall\":\"{}\",\"logical\":",
            r.pid, r.syscall
        );
        match r.logical {
            Some(l) => json_str(&mut s, l),
            None => s.push_str("null"),
        }
        s.push_str(",\"physical\":");
        match r.physical {
            Some(p) => json_str(&mut s, p),
            None => s.push_str("null"),
        }
        s.push_str(&format!(
            ",\"result\":{},\"duration_us\":{:.1}}}",
            r.result,
            r.duration.as_secs_f64() * 1e6
        ));
        s
    }

    pub fn record(&mut self, r: &Record<'_>) -> io::Result<()> {
        if let Some(out) = &mut self.out {
            writeln!(out, "{}", Self::json(r))?;
        }
        if self.summary {
            self.by_op.entry(r.syscall.to_string()).or_default().add(r);
            if let Some(l) = r.logical {
                self.by_prefix.entry(prefix(l)).or_default().add(r);
            }
        }
        Ok(())
    }

    /// Flushes the trace and, with `--summary`, renders the tables.
    pub fn finish(&mut self) -> io::Result<Option<String>> {
        if let Some(out) = &mut self.out {
            out.flush()?;
        }
        if !self.summary {
            return Ok(None);
        }
        let mut s = String::new();
        for (title, table) in [("operation", &self.by_op), ("path prefix", &self.by_prefix)] {
            s.push_str(&format!(
                "{:<24} {:>9} {:>8} {:>12}\n",
                title, "count", "errors", "time_ms"
            ));
            let mut rows: Vec<_> = table.iter().collect();
            rows.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
            for (k, t) in rows {
                s.push_str(&format!(
                    "{:<24} {:>9} {:>8} {:>12.3}\n",
                    k,
                    t.count,
                    t.errors,
                    t.time.as_secs_f64() * 1e3
                ));
            }
            s.push('\n');
        }
        Ok(Some(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_escape_and_summary_groups() {
        let r = Record {
            pid: 7,
            syscall: Sys::Openat,
            logical: Some(b"/data/a\"b"),
            physical: Some(b"/tmp/x/a\"b"),
            result: -2,
            duration: Duration::from_micros(3),
        };
        assert_eq!(
            Tracer::json(&r),
            r#"{"pid":7,"syscall":"openat","logical":"/data/a\"b","physical":"/tmp/x/a\"b","result":-2,"duration_us":3.0}"#
        );
        let mut t = Tracer::new(None, true);
        t.record(&r).unwrap();
        t.record(&r).unwrap();
        let table = t.finish().unwrap().unwrap();
        assert!(table.contains("openat"), "{table}");
        assert!(
            table
                .lines()
                .any(|l| l.starts_with("/data/a\"b") && l.contains(" 2 ")),
            "{table}"
        );
    }

    #[test]
    fn summary_rows_escape_control_characters() {
        let r = Record {
            pid: 7,
            syscall: Sys::Openat,
            logical: Some(b"/d\nx/f\x1b[2J"),
            physical: None,
            result: 3,
            duration: Duration::from_micros(3),
        };
        let mut t = Tracer::new(None, true);
        t.record(&r).unwrap();
        let table = t.finish().unwrap().unwrap();
        assert!(
            table
                .lines()
                .any(|l| l.starts_with("/d\\u000ax/f\\u001b[2J ")),
            "{table}"
        );
        assert!(!table.contains('\x1b'), "{table}");
        assert!(Tracer::json(&r).contains(r#""/d\u000ax/f\u001b[2J""#));
    }
}

//! The owner's limits on guest work and when they hold: [`Limits`] (CPU percent of the whole
//! machine, memory bytes, for all guest jobs together) and the weekly [`Schedule`] read from
//! `roost serve --thermostat FILE`.
//!
//! The file has one rule a line; `#` starts a comment; blank lines are skipped:
//!
//! ```text
//! default       cpu 100% mem none     # when no other line matches (this is the default)
//! mon-fri 09-17 cpu 20%  mem 1G       # working hours: little
//! sat,sun *     cpu 80%               # the weekend: most (memory from the default line)
//! ```
//!
//! Days are `mon`..`sun`, ranges (`mon-fri`, `fri-mon` wraps), lists (`sat,sun`) or `*`;
//! hours are `HH-HH` from 00 to 24, the first included and the last not (`22-06` wraps past
//! midnight), or `*`. `cpu` takes 1% to 100%; `mem` a size (`512M`, `1G`, `1.5G`, bytes
//! without a suffix; K, M, G, T are powers of 1024) or `none`. The last matching line wins;
//! what it leaves out comes from the `default` line. Local time.

use std::fmt;

/// Limits on all guest jobs together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Percent of the whole machine's CPU time (all cores), 1 to 100.
    pub cpu_percent: u32,
    /// Resident memory of all guest processes together; `None` for no limit.
    pub mem_bytes: Option<u64>,
}

impl Limits {
    pub const UNLIMITED: Limits = Limits {
        cpu_percent: 100,
        mem_bytes: None,
    };
}

impl fmt::Display for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cpu {}% mem ", self.cpu_percent)?;
        match self.mem_bytes {
            None => f.write_str("none"),
            Some(b) => f.write_str(&size_text(b)),
        }
    }
}

/// A size in the file's own notation, exact (`1G`, `1536M`, `1000`).
pub fn size_text(bytes: u64) -> String {
    for (suffix, unit) in [
        ("T", 1u64 << 40),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ] {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// Parses `30%` or `30`: 1 to 100.
pub fn parse_cpu(text: &str) -> Result<u32, String> {
    let digits = text.strip_suffix('%').unwrap_or(text);
    match digits.parse::<u32>() {
        Ok(n) if (1..=100).contains(&n) => Ok(n),
        _ => Err(format!("cpu {text:?}: expected a percent from 1% to 100%")),
    }
}

/// Parses a size: `512M`, `1G`, `1.5G`, `100000`; K, M, G, T are powers of 1024. `none` is
/// `None`.
pub fn parse_mem(text: &str) -> Result<Option<u64>, String> {
    if text.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let bad = || format!("mem {text:?}: expected a size such as 512M, 1G or none");
    let (number, unit) = match text.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&text[..i], &text[i..]),
        None => (text, ""),
    };
    let shift = match unit.to_ascii_uppercase().trim_end_matches(['B', 'I']) {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(bad()),
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > (1u64 << 60) as f64 {
        return Err(bad());
    }
    Ok(Some(bytes as u64))
}

/// What a line sets; `None` leaves it to the default line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Setting {
    pub cpu: Option<u32>,
    pub mem: Option<Option<u64>>,
}

impl Setting {
    /// Parses `cpu N% mem SIZE` (either, both, in any order).
    pub fn parse(words: &[&str]) -> Result<Setting, String> {
        let mut setting = Setting::default();
        let mut rest = words.iter();
        while let Some(key) = rest.next() {
            let value = rest
                .next()
                .ok_or_else(|| format!("{key:?} needs a value"))?;
            match *key {
                "cpu" if setting.cpu.is_none() => setting.cpu = Some(parse_cpu(value)?),
                "mem" if setting.mem.is_none() => setting.mem = Some(parse_mem(value)?),
                "cpu" | "mem" => return Err(format!("{key} given twice")),
                _ => return Err(format!("{key:?}: expected cpu or mem")),
            }
        }
        if setting == Setting::default() {
            return Err("expected cpu N% and/or mem SIZE".into());
        }
        Ok(setting)
    }

    /// This setting, with what it leaves out taken from `base`.
    pub fn over(self, base: Limits) -> Limits {
        Limits {
            cpu_percent: self.cpu.unwrap_or(base.cpu_percent),
            mem_bytes: self.mem.unwrap_or(base.mem_bytes),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    /// Bit d set: day d (0 = Monday).
    days: u8,
    /// Bit h set: the hour from h:00 to h:59.
    hours: u32,
    setting: Setting,
}

/// The weekly schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    default: Limits,
    rules: Vec<Rule>,
}

impl Default for Schedule {
    fn default() -> Schedule {
        Schedule {
            default: Limits::UNLIMITED,
            rules: Vec::new(),
        }
    }
}

const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

fn day(text: &str) -> Result<u32, String> {
    DAYS.iter()
        .position(|d| text.eq_ignore_ascii_case(d))
        .map(|d| d as u32)
        .ok_or_else(|| format!("day {text:?}: expected mon, tue, wed, thu, fri, sat or sun"))
}

fn parse_days(text: &str) -> Result<u8, String> {
    if text == "*" {
        return Ok(0x7f);
    }
    let mut mask = 0u8;
    for part in text.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (day(a)?, day(b)?),
            None => (day(part)?, day(part)?),
        };
        let mut d = a;
        loop {
            mask |= 1 << d;
            if d == b {
                break;
            }
            d = (d + 1) % 7;
        }
    }
    Ok(mask)
}

pub(crate) fn parse_hours(text: &str) -> Result<u32, String> {
    if text == "*" {
        return Ok((1 << 24) - 1);
    }
    let bad = || format!("hours {text:?}: expected HH-HH (00 to 24) or *");
    let (a, b) = text.split_once('-').ok_or_else(bad)?;
    let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a > 23 || b > 24 || b == 0 || a == b {
        return Err(bad());
    }
    let mut mask = 0u32;
    let mut h = a;
    while h != b % 24 || mask == 0 {
        mask |= 1 << h;
        h = (h + 1) % 24;
    }
    Ok(mask)
}

/// The lines of a rule file (the schedule, the price file) that hold words: each line's
/// number (from 1), its text before any `#`, and its words.
pub(crate) fn rule_lines(text: &str) -> impl Iterator<Item = (usize, &str, Vec<&str>)> {
    text.lines().enumerate().filter_map(|(n, raw)| {
        let line = raw.split('#').next().unwrap_or("");
        let words: Vec<&str> = line.split_whitespace().collect();
        (!words.is_empty()).then_some((n + 1, line, words))
    })
}

impl Schedule {
    /// Parses a schedule file's text; an error names the line (`line 3: ...`).
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let mut schedule = Schedule::default();
        let mut default_seen = false;
        for (n, line, words) in rule_lines(text) {
            let at = |e: String| format!("line {n}: {e}");
            if words[0] == "default" {
                if default_seen {
                    return Err(at("a second default line".into()));
                }
                default_seen = true;
                schedule.default = Setting::parse(&words[1..])
                    .map_err(at)?
                    .over(Limits::UNLIMITED);
                continue;
            }
            if words.len() < 2 {
                return Err(at(format!(
                    "{line:?}: expected DAYS HOURS cpu N% mem SIZE, or default ..."
                )));
            }
            schedule.rules.push(Rule {
                days: parse_days(words[0]).map_err(at)?,
                hours: parse_hours(words[1]).map_err(at)?,
                setting: Setting::parse(&words[2..]).map_err(at)?,
            });
        }
        Ok(schedule)
    }

    /// The limits at `weekday` (0 = Monday) and `hour` (0 to 23).
    pub fn at(&self, weekday: u32, hour: u32) -> Limits {
        let hit = self
            .rules
            .iter()
            .rev()
            .find(|r| r.days & (1 << (weekday % 7)) != 0 && r.hours & (1 << (hour % 24)) != 0);
        match hit {
            Some(rule) => rule.setting.over(self.default),
            None => self.default,
        }
    }

    /// The limits now, by local time.
    pub fn now(&self) -> Limits {
        // SAFETY: time(2) with a null pointer only returns the time.
        let (weekday, hour) = local_weekday_hour(unsafe { libc::time(std::ptr::null_mut()) });
        self.at(weekday, hour)
    }
}

/// The local weekday (0 = Monday) and hour at Unix time `t`.
pub fn local_weekday_hour(t: libc::time_t) -> (u32, u32) {
    // SAFETY: `struct tm` is plain data, valid all zeros (a null zone name).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: a live time_t in and a writable `struct tm` out.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return (0, 0);
    }
    (((tm.tm_wday + 6) % 7) as u32, tm.tm_hour as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_picks_the_last_matching_line() {
        let s = Schedule::parse(
            "# owner's rules\n\
             default cpu 50% mem 2G\n\
             mon-fri 09-17 cpu 20% mem 1G\n\
             sat,sun * cpu 80%   # weekend\n\
             fri-mon 22-06 mem 512M\n",
        )
        .unwrap();
        let gib = 1u64 << 30;
        assert_eq!(
            s.at(0, 10),
            Limits {
                cpu_percent: 20,
                mem_bytes: Some(gib)
            }
        );
        assert_eq!(s.at(0, 17).cpu_percent, 50);
        assert_eq!(
            s.at(5, 12),
            Limits {
                cpu_percent: 80,
                mem_bytes: Some(2 * gib)
            }
        );
        assert_eq!(s.at(6, 23).mem_bytes, Some(512 << 20));
        assert_eq!(s.at(0, 3).mem_bytes, Some(512 << 20));
        assert_eq!(s.at(2, 3).mem_bytes, Some(2 * gib));
        assert_eq!(Schedule::parse("").unwrap().at(3, 3), Limits::UNLIMITED);
    }

    #[test]
    fn sizes_and_percents() {
        assert_eq!(parse_mem("1.5G").unwrap(), Some(3 << 29));
        assert_eq!(parse_mem("100MiB").unwrap(), Some(100 << 20));
        assert_eq!(parse_mem("4096").unwrap(), Some(4096));
        assert_eq!(parse_mem("none").unwrap(), None);
        for bad in ["", "G", "-1G", "1X", "nan", "inf", "0", "1e30G"] {
            assert!(parse_mem(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_cpu("30%").unwrap(), 30);
        for bad in ["0%", "101%", "", "%", "-5", "30%%"] {
            assert!(parse_cpu(bad).is_err(), "{bad}");
        }
        assert_eq!(size_text(1 << 30), "1G");
        assert_eq!(size_text(1536 << 20), "1536M");
    }

    #[test]
    fn errors_name_the_line() {
        for (text, needle) in [
            ("default cpu 20%\nmon 09-17 cpu 120%", "line 2: cpu"),
            ("mon", "line 1:"),
            ("\n\nxyz 09-17 cpu 1%", "line 3: day"),
            ("mon 9-25 cpu 1%", "line 1: hours"),
            ("mon 09-09 cpu 1%", "line 1: hours"),
            ("mon 09-17", "line 1: expected cpu"),
            ("mon 09-17 cpu", "line 1: \"cpu\" needs"),
            ("mon 09-17 cpu 5% cpu 6%", "line 1: cpu given twice"),
            ("default cpu 5%\ndefault cpu 6%", "line 2: a second default"),
            ("mon 09-17 disk 5G", "line 1: \"disk\""),
        ] {
            let e = Schedule::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        let alphabet: &[u8] = b"monfriesatu*-,0123456789%GMK cpumemnonedefault#\n\t.";
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            let len = (x % 60) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect();
            let text = String::from_utf8_lossy(&text);
            if let Ok(s) = Schedule::parse(&text) {
                for d in 0..7 {
                    for h in 0..24 {
                        let l = s.at(d, h);
                        assert!((1..=100).contains(&l.cpu_percent));
                    }
                }
            }
        }
    }
}

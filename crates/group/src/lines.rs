//! Line equivalence classes: the aggregation behind `roost pgrep` (and a log follower).
//!
//! A member's data is split into lines; the lines that match (a fixed string or a regular
//! expression, or every line when no pattern is given) become classes keyed by their text,
//! and by line number when asked, each class holding the set of members that have that line.
//! Identical lines across a thousand hosts travel up the tree once, with their members
//! folded into strided ranges.

use crate::codec::{DecodeError, Decoder, Encoder};
use crate::ranges::IndexSet;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// What to look for in lines.
#[derive(Clone, Debug)]
pub enum Pattern {
    /// Every line.
    All,
    /// Lines containing this text.
    Fixed(String),
    /// Lines matching this regular expression (Rust `regex` syntax).
    Regex(regex::bytes::Regex),
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        match (self, other) {
            (Pattern::All, Pattern::All) => true,
            (Pattern::Fixed(a), Pattern::Fixed(b)) => a == b,
            (Pattern::Regex(a), Pattern::Regex(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

impl Pattern {
    /// Compiles a regular expression; the error text says what is wrong with it.
    pub fn regex(text: &str) -> Result<Pattern, String> {
        regex::bytes::Regex::new(text)
            .map(Pattern::Regex)
            .map_err(|e| e.to_string())
    }

    fn matches(&self, line: &[u8]) -> bool {
        match self {
            Pattern::All => true,
            Pattern::Fixed(text) => contains(line, text.as_bytes()),
            Pattern::Regex(re) => re.is_match(line),
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// The line aggregation's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct LineSpec {
    pub pattern: Pattern,
    /// Lines at different line numbers are different classes (`pgrep -n`).
    pub numbers: bool,
    /// Drop the host name and process id of syslog lines before comparing (`ptail
    /// --strip-syslog`), so one event logged on many hosts is one class.
    pub strip_syslog: bool,
    /// Reads stop after the last complete line even at end of file, so a line still being
    /// written is taken whole by a later read (`ptail`).
    pub complete_lines: bool,
}

/// A syslog line (`Mmm dd hh:mm:ss HOST TAG[PID]: MESSAGE`, RFC 3164) without its host name
/// and process id: `Mmm dd hh:mm:ss TAG: MESSAGE`. Other lines are returned as they are.
pub fn strip_syslog(line: &[u8]) -> Cow<'_, [u8]> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Cow::Borrowed(line);
    };
    let mut words = text.split(' ').filter(|w| !w.is_empty());
    let (Some(month), Some(day), Some(time), Some(host)) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Cow::Borrowed(line);
    };
    let is_stamp = month.len() == 3
        && month.bytes().all(|b| b.is_ascii_alphabetic())
        && day.len() <= 2
        && day.bytes().all(|b| b.is_ascii_digit())
        && time.len() == 8
        && time.bytes().filter(|&b| b == b':').count() == 2;
    if !is_stamp {
        return Cow::Borrowed(line);
    }
    // What follows the host, as written (its own spacing kept).
    let after_host = host.as_ptr() as usize - text.as_ptr() as usize + host.len();
    let rest = text[after_host..].trim_start_matches(' ');
    // TAG[PID]: message -> TAG: message
    let rest = match (rest.find('['), rest.find("]:")) {
        (Some(open), Some(close))
            if open < close && rest[open + 1..close].bytes().all(|b| b.is_ascii_digit()) =>
        {
            format!("{}{}", &rest[..open], &rest[close + 1..])
        }
        _ => rest.to_string(),
    };
    Cow::Owned(format!("{month} {day} {time} {rest}").into_bytes())
}

/// A class key: the line number (0 when numbers are not kept) and the text, without its
/// newline.
pub type LineKey = (u64, Vec<u8>);

/// Line classes: for each distinct line, the members that have it.
pub type LineClasses = BTreeMap<LineKey, IndexSet>;

impl LineSpec {
    /// The classes of one member's data, whose first line is line `before + 1` of the file.
    pub fn classify(&self, member: u32, data: &[u8], before: u64) -> LineClasses {
        let mut classes = LineClasses::new();
        let body = data.strip_suffix(b"\n").unwrap_or(data);
        if data.is_empty() {
            return classes;
        }
        for (i, line) in body.split(|&b| b == b'\n').enumerate() {
            let line = if self.strip_syslog {
                strip_syslog(line)
            } else {
                Cow::Borrowed(line)
            };
            if self.pattern.matches(&line) {
                let number = if self.numbers {
                    before + i as u64 + 1
                } else {
                    0
                };
                classes
                    .entry((number, line.into_owned()))
                    .or_insert_with(|| IndexSet::single(member));
            }
        }
        classes
    }

    pub fn encode(&self, e: &mut Encoder) {
        match &self.pattern {
            Pattern::All => e.uint(0),
            Pattern::Fixed(t) => e.uint(1).text(t),
            Pattern::Regex(re) => e.uint(2).text(re.as_str()),
        };
        e.uint(self.numbers.into())
            .uint(self.strip_syslog.into())
            .uint(self.complete_lines.into());
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<LineSpec, DecodeError> {
        let pattern = match d.uint()? {
            0 => Pattern::All,
            1 => Pattern::Fixed(d.text()?),
            2 => Pattern::regex(&d.text()?).map_err(|_| DecodeError("bad regular expression"))?,
            _ => return Err(DecodeError("unknown pattern kind")),
        };
        let mut flag = || match d.uint()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError("bad flag")),
        };
        let numbers = flag()?;
        let strip_syslog = flag()?;
        let complete_lines = flag()?;
        Ok(LineSpec {
            pattern,
            numbers,
            strip_syslog,
            complete_lines,
        })
    }
}

/// Merges `other`'s classes into `into`.
pub fn merge(into: &mut LineClasses, other: LineClasses) {
    for (key, members) in other {
        into.entry(key)
            .and_modify(|m| m.extend(&members))
            .or_insert(members);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_strings_and_regexes_pick_lines() {
        let data = b"udp 53\ntcp 80\nudp 123\n";
        let fixed = LineSpec {
            pattern: Pattern::Fixed("udp".into()),
            numbers: false,
            strip_syslog: false,
            complete_lines: false,
        };
        let keys: Vec<_> = fixed.classify(4, data, 0).into_keys().collect();
        assert_eq!(
            keys,
            vec![(0, b"udp 123".to_vec()), (0, b"udp 53".to_vec())]
        );
        let re = LineSpec {
            pattern: Pattern::regex("^[a-z]+ [0-9]{2}$").unwrap(),
            numbers: true,
            strip_syslog: false,
            complete_lines: false,
        };
        let keys: Vec<_> = re.classify(4, data, 10).into_keys().collect();
        assert_eq!(
            keys,
            vec![(11, b"udp 53".to_vec()), (12, b"tcp 80".to_vec())]
        );
    }

    #[test]
    fn identical_lines_fold_their_members() {
        let spec = LineSpec {
            pattern: Pattern::All,
            numbers: false,
            strip_syslog: false,
            complete_lines: false,
        };
        let mut all = LineClasses::new();
        for m in 0..10 {
            let text = if m % 3 == 0 { "odd one\n" } else { "same\n" };
            merge(&mut all, spec.classify(m, text.as_bytes(), 0));
        }
        assert_eq!(all[&(0, b"odd one".to_vec())].to_string(), "0:3:4");
        assert_eq!(all[&(0, b"same".to_vec())].len(), 6);
    }

    #[test]
    fn syslog_lines_lose_host_and_pid_and_fold_across_hosts() {
        let a = b"Nov 22 07:01:02 node3 sshd[4121]: Accepted key for alice";
        let b = b"Nov 22 07:01:02 node9 sshd[77]: Accepted key for alice";
        let stripped = b"Nov 22 07:01:02 sshd: Accepted key for alice";
        assert_eq!(&strip_syslog(a)[..], stripped);
        assert_eq!(&strip_syslog(b)[..], stripped);
        let kernel = strip_syslog(b"Nov  2 07:01:02 n1 kernel: x  y");
        assert_eq!(&kernel[..], b"Nov 2 07:01:02 kernel: x  y");
        assert_eq!(
            &strip_syslog(b"plain text line here")[..],
            b"plain text line here"
        );
        let spec = LineSpec {
            pattern: Pattern::Fixed("Accepted".into()),
            numbers: false,
            strip_syslog: true,
            complete_lines: false,
        };
        let mut all = LineClasses::new();
        merge(&mut all, spec.classify(0, a, 0));
        merge(&mut all, spec.classify(1, b, 0));
        assert_eq!(all.len(), 1);
        assert_eq!(all[&(0, stripped.to_vec())].to_string(), "0:1:2");
    }
}

//! Field aggregations: custom aggregations a tool describes instead of compiling.
//!
//! A tool names the numbers it wants with a regular expression whose capture groups are
//! numeric fields (`^(\S+) (\S+) (\S+)` over `/proc/loadavg`), and the aggregation keeps, for
//! every field over every match in every member, the count, sum, minimum and maximum. The
//! client then reads whichever of sum, min, max or average it needs: the paper's custom load
//! average aggregation (its Figure 2b) without code. The description travels with the
//! request and runs at every relay; nothing is loaded into the servers, so nothing can harm
//! them.
//!
//! Numbers are decimal (an optional sign, digits, up to 6 fractional digits kept) and are
//! carried as integers of millionths, so merging is exact and any tree gives the flat result.
//! Captures that are not numbers are skipped.

use crate::codec::{DecodeError, Decoder, Encoder};

/// Millionths in one unit.
pub const SCALE: i64 = 1_000_000;

/// A field aggregation's description: a regular expression whose capture groups are the
/// fields.
#[derive(Clone, Debug)]
pub struct FieldSpec {
    pub pattern: regex::bytes::Regex,
}

impl PartialEq for FieldSpec {
    fn eq(&self, other: &FieldSpec) -> bool {
        self.pattern.as_str() == other.pattern.as_str()
    }
}

impl FieldSpec {
    /// Compiles the description; the error says what is wrong with the expression.
    pub fn new(pattern: &str) -> Result<FieldSpec, String> {
        regex::bytes::Regex::new(pattern)
            .map(|pattern| FieldSpec { pattern })
            .map_err(|e| e.to_string())
    }

    pub fn encode(&self, e: &mut Encoder) {
        e.text(self.pattern.as_str());
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<FieldSpec, DecodeError> {
        FieldSpec::new(&d.text()?).map_err(|_| DecodeError("bad regular expression"))
    }
}

/// The statistics of one field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldStats {
    pub count: u64,
    /// Sum, minimum and maximum, in millionths.
    pub sum: i64,
    pub min: i64,
    pub max: i64,
}

impl Default for FieldStats {
    fn default() -> FieldStats {
        FieldStats {
            count: 0,
            sum: 0,
            min: i64::MAX,
            max: i64::MIN,
        }
    }
}

impl FieldStats {
    fn add(&mut self, value: i64) {
        self.merge(&FieldStats {
            count: 1,
            sum: value,
            min: value,
            max: value,
        });
    }

    pub fn merge(&mut self, other: &FieldStats) {
        self.count += other.count;
        self.sum = self.sum.saturating_add(other.sum);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Sum, min, max and mean in units (`None` over no values).
    pub fn sum(&self) -> f64 {
        self.sum as f64 / SCALE as f64
    }

    pub fn min(&self) -> Option<f64> {
        (self.count > 0).then(|| self.min as f64 / SCALE as f64)
    }

    pub fn max(&self) -> Option<f64> {
        (self.count > 0).then(|| self.max as f64 / SCALE as f64)
    }

    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / SCALE as f64 / self.count as f64)
    }
}

/// Parses a decimal number into millionths (extra fractional digits are dropped).
pub fn parse_decimal(text: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(text).ok()?.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let valid = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !valid(whole) || !valid(fraction) {
        return None;
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut micro = 0i64;
    for (i, b) in fraction.bytes().take(6).enumerate() {
        micro += i64::from(b - b'0') * 10i64.pow(5 - i as u32);
    }
    let value = whole.checked_mul(SCALE)?.checked_add(micro)?;
    Some(if negative { -value } else { value })
}

/// The statistics of every capture group of `pattern` over `data`.
pub fn extract(pattern: &regex::bytes::Regex, data: &[u8]) -> Vec<FieldStats> {
    let mut stats = vec![FieldStats::default(); pattern.captures_len().saturating_sub(1)];
    for caps in pattern.captures_iter(data) {
        for (i, field) in stats.iter_mut().enumerate() {
            if let Some(value) = caps.get(i + 1).and_then(|m| parse_decimal(m.as_bytes())) {
                field.add(value);
            }
        }
    }
    stats
}

/// Merges field statistics element by element (missing fields count as empty).
pub fn merge(into: &mut Vec<FieldStats>, other: &[FieldStats]) {
    if into.len() < other.len() {
        into.resize(other.len(), FieldStats::default());
    }
    for (a, b) in into.iter_mut().zip(other) {
        a.merge(b);
    }
}

pub fn encode(e: &mut Encoder, stats: &[FieldStats]) {
    e.uint(stats.len() as u64);
    for s in stats {
        e.uint(s.count).int(s.sum).int(s.min).int(s.max);
    }
}

pub fn decode(d: &mut Decoder<'_>) -> Result<Vec<FieldStats>, DecodeError> {
    let n = d.count()?;
    let mut stats = Vec::with_capacity(n);
    for _ in 0..n {
        stats.push(FieldStats {
            count: d.uint()?,
            sum: d.int()?,
            min: d.int()?,
            max: d.int()?,
        });
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_parse_into_millionths() {
        assert_eq!(parse_decimal(b"0.52"), Some(520_000));
        assert_eq!(parse_decimal(b"-3"), Some(-3_000_000));
        assert_eq!(parse_decimal(b"+1.0000009"), Some(1_000_000));
        assert_eq!(parse_decimal(b".5"), Some(500_000));
        for bad in [
            &b""[..],
            b".",
            b"1.2.3",
            b"abc",
            b"1e5",
            b"99999999999999999999",
        ] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn load_averages_aggregate_per_field() {
        let re = regex::bytes::Regex::new(r"^(\S+) (\S+) (\S+)").unwrap();
        let mut all = Vec::new();
        for text in ["0.50 1.00 2.00 1/100 7", "1.50 3.00 x 2/90 8"] {
            merge(&mut all, &extract(&re, text.as_bytes()));
        }
        assert_eq!(all[0].mean(), Some(1.0));
        assert_eq!(all[1].max(), Some(3.0));
        assert_eq!((all[2].count, all[2].sum()), (1, 2.0));
        let mut e = Encoder::new();
        encode(&mut e, &all);
        let bytes = e.finish();
        assert_eq!(decode(&mut Decoder::new(&bytes)).unwrap(), all);
        assert_eq!(FieldStats::default().mean(), None);
    }

    #[test]
    fn merging_in_any_grouping_gives_the_same_statistics() {
        let re = regex::bytes::Regex::new(r"(-?\d+\.\d+)").unwrap();
        let members: Vec<Vec<FieldStats>> = (0..50)
            .map(|i| {
                extract(
                    &re,
                    format!("{}.{:03} x", i * 7 % 13, i * 37 % 1000).as_bytes(),
                )
            })
            .collect();
        let mut flat = Vec::new();
        for m in &members {
            merge(&mut flat, m);
        }
        for chunk in [2, 3, 7, 50] {
            let mut tree = Vec::new();
            for part in members.chunks(chunk) {
                let mut sub = Vec::new();
                for m in part.iter().rev() {
                    merge(&mut sub, m);
                }
                merge(&mut tree, &sub);
            }
            assert_eq!(tree, flat, "chunks of {chunk}");
        }
        assert_eq!(flat[0].count, 50);
    }
}

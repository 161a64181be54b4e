//! Sizes and durations given on the command line, the same for every option: a size is a
//! number of bytes, or with a K, M, G or T suffix (powers of 1024): `--cache-size 4G`,
//! `serve --max-message 16M`, `psync --block-size 4K`; a duration is a number, possibly
//! fractional, with a unit `ms`, `s`, `m`, `h` or `d` (`--timeout 2m`, `ptail --interval
//! 250ms`); a bare number is in the option's own unit (seconds, except where its help says
//! otherwise). Every such option is declared with value name SIZE or DURATION and one of the
//! clap value parsers below; a test walks the whole command line to check it.

/// `text` split into its digits and its unit letter (upper case; `default` without one).
fn split_unit(text: &str, default: char) -> (&str, char) {
    match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c.to_ascii_uppercase()),
        _ => (text, default),
    }
}

/// The seconds `text` (the value of `option`) says, at least one; the error names the
/// option.
pub fn parse_duration(option: &str, text: &str) -> Result<u64, String> {
    seconds(text).map_err(|why| format!("{option} {text}: {why}"))
}

/// The seconds `text` says, at least one: a clap value parser (clap names the option).
pub fn seconds(text: &str) -> Result<u64, String> {
    let expected = || "expected a number of seconds, or with s, m, h or d (90s, 2m)".to_string();
    let (digits, unit) = split_unit(text, 'S');
    let scale = match unit {
        'S' => 1,
        'M' => 60,
        'H' => 3600,
        'D' => 86_400,
        _ => return Err(expected()),
    };
    let n: u64 = digits.parse().map_err(|_| expected())?;
    match n.checked_mul(scale) {
        Some(0) => Err("must be at least one second".into()),
        Some(secs) if secs <= 100 * 365 * 86_400 => Ok(secs),
        _ => Err("too long (at most 100 years)".into()),
    }
}

/// A duration with a unit, or a bare number of `bare` (its unit's length), at most 100 years.
fn duration_in(text: &str, bare: std::time::Duration) -> Result<std::time::Duration, String> {
    use std::time::Duration;
    let expected =
        || "expected a number with a unit ms, s, m, h or d (250ms, 1.5s, 2m, 12h)".to_string();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" => bare,
        "ms" => Duration::from_millis(1),
        "s" => Duration::from_secs(1),
        "m" => Duration::from_secs(60),
        "h" => Duration::from_secs(3600),
        "d" => Duration::from_secs(86_400),
        _ => return Err(expected()),
    };
    let n: f64 = number.parse().map_err(|_| expected())?;
    if !n.is_finite() || n < 0.0 || number.starts_with(['+', '-']) {
        return Err(expected());
    }
    let secs = n * scale.as_secs_f64();
    if secs > 100.0 * 365.0 * 86_400.0 {
        return Err("too long (at most 100 years)".into());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A duration (clap value parser): a bare number is seconds.
pub fn duration(text: &str) -> Result<std::time::Duration, String> {
    duration_in(text, std::time::Duration::from_secs(1))
}

/// A duration (clap value parser) of at least one second.
pub fn duration_1s(text: &str) -> Result<std::time::Duration, String> {
    let d = duration(text)?;
    if d < std::time::Duration::from_secs(1) {
        return Err("must be at least one second".into());
    }
    Ok(d)
}

/// A duration (clap value parser) whose bare number is milliseconds.
pub fn duration_ms(text: &str) -> Result<std::time::Duration, String> {
    duration_in(text, std::time::Duration::from_millis(1))
}

/// A duration (clap value parser) whose bare number is microseconds.
pub fn duration_us(text: &str) -> Result<std::time::Duration, String> {
    duration_in(text, std::time::Duration::from_micros(1))
}

/// A size in bytes (clap value parser).
pub fn bytes(text: &str) -> Result<u64, String> {
    let expected = || "expected a number with K, M or G".to_string();
    let (digits, unit) = split_unit(text, 'B');
    let shift = match unit {
        'B' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        _ => return Err(expected()),
    };
    let n: u64 = digits.parse().map_err(|_| expected())?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| "too large".to_string())
}

/// A size in bytes, or `none` for no limit (`u64::MAX`) (clap value parser).
pub fn bytes_or_none(text: &str) -> Result<u64, String> {
    if text == "none" {
        return Ok(u64::MAX);
    }
    bytes(text).map_err(|e| format!("{e}, or none"))
}

/// The bytes `text` (the value of `option`) says; the error names the option.
pub fn parse_size(option: &str, text: &str) -> Result<u64, String> {
    bytes(text).map_err(|why| format!("{option} {text}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_and_without_suffixes() {
        assert_eq!(parse_size("--x", "4096"), Ok(4096));
        assert_eq!(parse_size("--x", "4k"), Ok(4096));
        assert_eq!(parse_size("--x", "64M"), Ok(64 << 20));
        assert_eq!(parse_size("--x", "2T"), Ok(2 << 40));
        for bad in ["", "M", "1.5G", "-1", "4Q"] {
            let e = parse_size("--block-size", bad).unwrap_err();
            assert!(
                e.starts_with(&format!("--block-size {bad}: expected")),
                "{e}"
            );
        }
        assert_eq!(
            parse_size("--x", "99999999999T"),
            Err("--x 99999999999T: too large".into())
        );
    }

    #[test]
    fn durations_take_units_and_fractions() {
        use std::time::Duration;
        assert_eq!(duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("12H"), Ok(Duration::from_secs(43_200)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        assert_eq!(duration_ms("250"), Ok(Duration::from_millis(250)));
        assert_eq!(duration_ms("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(duration_us("50"), Ok(Duration::from_micros(50)));
        for bad in ["", "s", "-1", "+1", "3w", "1.5.2s", "nan", "inf", "1e999"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
        assert!(duration("36501d").unwrap_err().contains("too long"));
        assert!(duration_1s("500ms").is_err());
        assert_eq!(bytes("16M"), Ok(16 << 20));
        assert_eq!(bytes("4k"), Ok(4096));
        assert!(bytes("4Q")
            .unwrap_err()
            .starts_with("expected a number with K, M or G"));
        assert_eq!(bytes_or_none("none"), Ok(u64::MAX));
        assert_eq!(bytes_or_none("2G"), Ok(2 << 30));
    }

    #[test]
    fn durations_with_and_without_suffixes() {
        assert_eq!(parse_duration("--x", "45"), Ok(45));
        assert_eq!(parse_duration("--x", "45s"), Ok(45));
        assert_eq!(parse_duration("--x", "90m"), Ok(5400));
        assert_eq!(parse_duration("--x", "12H"), Ok(43_200));
        assert_eq!(parse_duration("--x", "30d"), Ok(30 * 86_400));
        for bad in ["", "d", "1.5d", "-1", "3w"] {
            let e = parse_duration("--expires-in", bad).unwrap_err();
            assert!(
                e.starts_with(&format!("--expires-in {bad}: expected")),
                "{e}"
            );
        }
        assert!(parse_duration("--x", "0d")
            .unwrap_err()
            .contains("at least one second"));
        assert!(parse_duration("--x", "99999999999999d")
            .unwrap_err()
            .contains("too long"));
        assert!(parse_duration("--x", "36501d")
            .unwrap_err()
            .contains("too long"));
    }
}

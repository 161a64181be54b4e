//! Sizes and durations given on the command line: a number of bytes, or with a K, M, G or
//! T suffix (powers of 1024): `--cache-size 4G`, `--http-block-threshold 64M`, `roost index
//! --block-size 4M`; a number of seconds, or with an s, m, h or d suffix: `roost index
//! --expires-in 30d`.

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

/// The bytes `text` (the value of `option`) says; the error names the option.
pub fn parse_size(option: &str, text: &str) -> Result<u64, String> {
    let expected = || format!("{option} {text}: expected a number with K, M or G");
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
        .ok_or_else(|| format!("{option} {text}: too large"))
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

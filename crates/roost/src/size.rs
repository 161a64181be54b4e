//! Sizes given on the command line: a number of bytes, or with a K, M, G or T suffix
//! (powers of 1024): `--cache-size 4G`, `--http-block-threshold 64M`, `roost index
//! --block-size 4M`.

/// The bytes `text` (the value of `option`) says; the error names the option.
pub fn parse_size(option: &str, text: &str) -> Result<u64, String> {
    let expected = || format!("{option} {text}: expected a number with K, M or G");
    let (digits, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c.to_ascii_uppercase()),
        _ => (text, 'B'),
    };
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
}

//! Member names printed as host sets: `node[1-64/3]`, `web[01-04],db1`.
//!
//! Names that end in a number and share the text before it fold into one bracket of numeric
//! ranges, `a-b` for consecutive numbers and `a-b/s` for every `s`-th; numbers keep their
//! width when zero-padded (`node01`..`node04` is `node[01-04]`). Other names print as they are.
//! A second pass folds an earlier number the same way where the folded sets that follow it
//! are identical, so names with two numbers, as in `rack03-node17`, fold into
//! `rack[01-16]-node[01-64]` instead of one bracket per rack. Groups print in the order of
//! their first name, comma-separated.

use std::collections::BTreeMap;

/// A number as written in a name: its value, its digit count, and whether it is zero-padded.
#[derive(Clone, Copy)]
struct Number {
    value: u64,
    digits: usize,
    padded: bool,
}

/// A name split into the text before a trailing number and the number.
fn split(name: &str) -> Option<(&str, Number)> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 18 {
        return None;
    }
    let (prefix, number) = name.split_at(name.len() - digits);
    let padded = number.len() > 1 && number.starts_with('0');
    Some((
        prefix,
        Number {
            value: number.parse().ok()?,
            digits,
            padded,
        },
    ))
}

/// A folded text `A<number>B[...]` split at the last number before its first bracket: A,
/// the number, and the rest from B on.
fn split_outer(text: &str) -> Option<(&str, Number, &str)> {
    let bracket = text.find('[')?;
    let before = text[..bracket].trim_end_matches(|c: char| !c.is_ascii_digit());
    let (prefix, number) = split(before)?;
    Some((prefix, number, &text[before.len()..]))
}

/// Folds names that differ only in one number: each entry is (text before the number, text
/// after it, position of the first name, the number). Numbers of one width print with it:
/// `08`, `09` and `10` fold into `[08-10]`; unpadded numbers of any length fold together.
fn fold(entries: Vec<(String, String, usize, Number)>) -> Vec<(usize, String)> {
    let mut groups: BTreeMap<(String, String), (usize, Vec<Number>)> = BTreeMap::new();
    for (prefix, suffix, position, number) in entries {
        let group = groups
            .entry((prefix, suffix))
            .or_insert_with(|| (position, Vec::new()));
        group.0 = group.0.min(position);
        group.1.push(number);
    }
    let mut out = Vec::new();
    for ((prefix, suffix), (position, numbers)) in groups {
        // The widths some padded number fixes; the other numbers of those lengths join them.
        let padded: Vec<usize> = numbers
            .iter()
            .filter(|n| n.padded)
            .map(|n| n.digits)
            .collect();
        let mut by_width: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        for n in &numbers {
            let width = if padded.contains(&n.digits) {
                n.digits
            } else {
                0
            };
            by_width.entry(width).or_default().push(n.value);
        }
        for (width, mut values) in by_width {
            values.sort_unstable();
            values.dedup();
            let text = if values.len() == 1 {
                format!("{prefix}{:0width$}{suffix}", values[0])
            } else {
                format!("{prefix}[{}]{suffix}", number_ranges(&values, width))
            };
            out.push((position, text));
        }
    }
    out
}

/// Formats names as a host set (see the module documentation).
pub fn format<S: AsRef<str>>(names: &[S]) -> String {
    let mut parts: Vec<(usize, String)> = Vec::new();
    let mut numbered = Vec::new();
    for (position, name) in names.iter().enumerate() {
        let name = name.as_ref();
        match split(name) {
            Some((prefix, n)) => numbered.push((prefix.to_string(), String::new(), position, n)),
            None => parts.push((position, name.to_string())),
        }
    }
    // The second pass: bracketed texts that differ only in an earlier number.
    let mut outer = Vec::new();
    for (position, text) in fold(numbered) {
        match split_outer(&text) {
            Some((prefix, n, rest)) => {
                outer.push((prefix.to_string(), rest.to_string(), position, n))
            }
            None => parts.push((position, text)),
        }
    }
    parts.extend(fold(outer));
    parts.sort();
    parts
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// Sorted distinct numbers as `a-b/s` pieces, separated by commas.
fn number_ranges(numbers: &[u64], width: usize) -> String {
    // Runs of a repeated gap, as index sets fold; a lone pair with a gap prints as two.
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < numbers.len() {
        let start = numbers[i];
        if i + 1 == numbers.len() {
            pieces.push(format!("{start:0width$}"));
            break;
        }
        let gap = numbers[i + 1] - start;
        let mut count = 2;
        while i + count < numbers.len() && numbers[i + count] - numbers[i + count - 1] == gap {
            count += 1;
        }
        if count == 2 && gap != 1 {
            pieces.push(format!("{start:0width$}"));
            i += 1;
            continue;
        }
        let end = numbers[i + count - 1];
        pieces.push(if gap == 1 {
            format!("{start:0width$}-{end:0width$}")
        } else {
            format!("{start:0width$}-{end:0width$}/{gap}")
        });
        i += count;
    }
    pieces.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, numbers: impl Iterator<Item = u64>) -> Vec<String> {
        numbers.map(|n| format!("{prefix}{n}")).collect()
    }

    #[test]
    fn strided_hosts_fold_with_their_stride() {
        assert_eq!(format(&names("node", (1..=64).step_by(3))), "node[1-64/3]");
        assert_eq!(format(&names("node", 1..=64)), "node[1-64]");
    }

    #[test]
    fn mixed_names_keep_their_first_position() {
        let list = ["web01", "web02", "db1", "web03", "gateway", "web04"];
        assert_eq!(format(&list), "web[01-04],db1,gateway");
        assert_eq!(format(&["a1", "a2", "a5"]), "a[1-2,5]");
        assert_eq!(format(&["a1", "a3", "a9"]), "a[1,3,9]");
        assert_eq!(format(&["solo"]), "solo");
        assert_eq!(format(&["n7"]), "n7");
        assert_eq!(format(&["n08", "n09", "n10", "n11"]), "n[08-11]");
        assert_eq!(format(&["n9", "n10", "n11"]), "n[9-11]");
    }

    #[test]
    fn names_with_two_numbers_fold_on_both() {
        let grid: Vec<String> = (0..16)
            .flat_map(|r| (0..64).map(move |n| format!("n{r:02}-{n:02}")))
            .collect();
        assert_eq!(format(&grid), "n[00-15]-[00-63]");
        // Racks with different members keep their own brackets; lone names stay.
        let list = [
            "r1-n1", "r1-n2", "r2-n1", "r2-n2", "r3-n1", "r3-n5", "r4-n9",
        ];
        assert_eq!(format(&list), "r[1-2]-n[1-2],r3-n[1,5],r4-n9");
    }
}

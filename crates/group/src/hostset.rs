//! Member names printed as host sets: `node[1-64/3]`, `web[01-04],db1`.
//!
//! Names that end in a number and share the text before it fold into one bracket of numeric
//! ranges, `a-b` for consecutive numbers and `a-b/s` for every `s`-th; numbers keep their
//! width when zero-padded (`node01`..`node04` is `node[01-04]`). Other names print as they are.
//! Groups print in the order of their first name, comma-separated.

use std::collections::BTreeMap;

/// A name split into the text before a trailing number, the number, and its digit count
/// when zero-padded (0 otherwise).
fn split(name: &str) -> Option<(&str, u64, usize)> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 18 {
        return None;
    }
    let (prefix, number) = name.split_at(name.len() - digits);
    let width = if number.len() > 1 && number.starts_with('0') {
        number.len()
    } else {
        0
    };
    Some((prefix, number.parse().ok()?, width))
}

/// Formats names as a host set (see the module documentation).
pub fn format<S: AsRef<str>>(names: &[S]) -> String {
    // Group key: (prefix, width); groups keep the position of their first name.
    let mut groups: BTreeMap<(&str, usize), (usize, Vec<u64>)> = BTreeMap::new();
    let mut plain: Vec<(usize, &str)> = Vec::new();
    for (position, name) in names.iter().enumerate() {
        let name = name.as_ref();
        match split(name) {
            Some((prefix, n, width)) => groups
                .entry((prefix, width))
                .or_insert_with(|| (position, Vec::new()))
                .1
                .push(n),
            None => plain.push((position, name)),
        }
    }
    let mut parts: Vec<(usize, String)> = plain
        .into_iter()
        .map(|(p, name)| (p, name.to_string()))
        .collect();
    for ((prefix, width), (position, mut numbers)) in groups {
        numbers.sort_unstable();
        numbers.dedup();
        let text = if numbers.len() == 1 {
            format!("{prefix}{:0width$}", numbers[0])
        } else {
            format!("{prefix}[{}]", number_ranges(&numbers, width))
        };
        parts.push((position, text));
    }
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
    }
}

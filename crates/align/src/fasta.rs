//! FASTA libraries: `>name description` header lines, each followed by the sequence's
//! residues over any number of lines. Parsing is strict and names the line of a mistake.

use std::fmt::Write as _;

/// One sequence of a library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sequence {
    /// The header's first word.
    pub name: String,
    /// The residues as letters (upper case as written; `*` allowed).
    pub residues: Vec<u8>,
}

/// Parses a FASTA library. Blank lines and `;` comment lines are skipped; residues are
/// letters and `*`, with spaces and tabs ignored. A mistake is reported as `line N: why`.
pub fn parse(text: &[u8]) -> Result<Vec<Sequence>, String> {
    let mut library: Vec<Sequence> = Vec::new();
    for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.iter().all(u8::is_ascii_whitespace) || line.starts_with(b";") {
            continue;
        }
        if let Some(header) = line.strip_prefix(b">") {
            let header = std::str::from_utf8(header)
                .map_err(|_| format!("line {number}: the header is not UTF-8"))?;
            let name = header.split_whitespace().next().unwrap_or("");
            if name.is_empty() {
                return Err(format!("line {number}: a header with no name"));
            }
            library.push(Sequence {
                name: name.to_string(),
                residues: Vec::new(),
            });
            continue;
        }
        let Some(sequence) = library.last_mut() else {
            return Err(format!(
                "line {number}: residues before the first '>' header"
            ));
        };
        for &b in line {
            match b {
                b' ' | b'\t' => {}
                b'*' => sequence.residues.push(b),
                _ if b.is_ascii_alphabetic() => sequence.residues.push(b),
                _ => {
                    return Err(format!(
                        "line {number}: {:?} is not a residue (letters and '*')",
                        char::from(b)
                    ))
                }
            }
        }
    }
    Ok(library)
}

/// Writes a library as FASTA, 60 residues a line.
pub fn write(library: &[Sequence]) -> String {
    let mut out = String::new();
    for s in library {
        let _ = writeln!(out, ">{}", s.name);
        for line in s.residues.chunks(60) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
    }
    out
}

/// The total number of residues of a library.
pub fn residues(library: &[Sequence]) -> u64 {
    library.iter().map(|s| s.residues.len() as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_writes() {
        let library = vec![
            Sequence {
                name: "a".into(),
                residues: b"ACDEFGHIKLMNPQRSTVWY".repeat(7),
            },
            Sequence {
                name: "empty".into(),
                residues: vec![],
            },
            Sequence {
                name: "b".into(),
                residues: b"W*".to_vec(),
            },
        ];
        assert_eq!(parse(write(&library).as_bytes()).unwrap(), library);
        assert_eq!(residues(&library), 142);
    }

    #[test]
    fn headers_comments_and_line_ends() {
        let text = b";comment\r\n>sp|P1| the first\r\nAC DE\r\n\r\nfg\n>two\n";
        let library = parse(text).unwrap();
        assert_eq!(library.len(), 2);
        assert_eq!(library[0].name, "sp|P1|");
        assert_eq!(library[0].residues, b"ACDEfg");
        assert!(library[1].residues.is_empty());
    }

    #[test]
    fn mistakes_name_their_line() {
        assert_eq!(
            parse(b"ACD\n").unwrap_err(),
            "line 1: residues before the first '>' header"
        );
        assert_eq!(
            parse(b">a\nAC\n>\n").unwrap_err(),
            "line 3: a header with no name"
        );
        assert!(parse(b">a\nAC-D\n").unwrap_err().starts_with("line 2: '-'"));
    }

    #[test]
    fn random_and_cut_input_never_panics() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let good = write(&[Sequence {
            name: "x".into(),
            residues: b"MKV*".repeat(40),
        }]);
        for round in 0..2000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut bytes = good.as_bytes()[..(state >> 33) as usize % good.len()].to_vec();
            if round % 2 == 0 {
                let at = (state >> 20) as usize % bytes.len().max(1);
                if let Some(b) = bytes.get_mut(at) {
                    *b = (state >> 8) as u8;
                }
            }
            let _ = parse(&bytes);
        }
    }
}

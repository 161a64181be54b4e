//! ACL rights as the letters `setacl`, `resetacl` and `getacl` carry.
//!
//! `r` read, `w` write (which implies `p`, as in cctools), `l` list, `d` delete, `p` put
//! (create new files only), `a` admin, `x` execute, and `v(...)` reserve: the right to make a
//! directory in which the maker gets the rights in parentheses (`rwldpvax`). No rights at all
//! are written `n`; `n` and `-` parse as no rights. Letters are written in the order
//! `r w l d p a x v(...)`, cctools' order, so `getacl` output matches its server byte for byte.
//!
//! A subject an entry names is `METHOD:PATTERN` (`*` in the pattern matches anything), or `*`
//! alone for anyone; [`check_subject`] refuses the rest, which would never match anyone.

use std::fmt;

use crate::error::WireError;

/// A set of Chirp ACL rights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rights {
    /// The plain rights, a union of the associated constants.
    pub bits: u8,
    /// `v(...)`: present if the reserve right is granted, holding the rights a reserved
    /// directory's maker receives (which may include [`Rights::RESERVE`]).
    pub reserve: Option<u8>,
}

/// Letters of the plain rights in output order.
const LETTERS: [(u8, u8); 7] = [
    (b'r', Rights::READ),
    (b'w', Rights::WRITE),
    (b'l', Rights::LIST),
    (b'd', Rights::DELETE),
    (b'p', Rights::PUT),
    (b'a', Rights::ADMIN),
    (b'x', Rights::EXECUTE),
];

/// Letters inside `v(...)` in output order.
const RESERVE_LETTERS: [(u8, u8); 8] = [
    (b'r', Rights::READ),
    (b'w', Rights::WRITE),
    (b'l', Rights::LIST),
    (b'd', Rights::DELETE),
    (b'p', Rights::PUT),
    (b'v', Rights::RESERVE),
    (b'a', Rights::ADMIN),
    (b'x', Rights::EXECUTE),
];

fn letter_bit(table: &[(u8, u8)], letter: u8) -> Result<u8, WireError> {
    table
        .iter()
        .find(|(l, _)| *l == letter)
        .map(|(_, b)| *b)
        .ok_or(WireError::BadArgument("rights"))
}

impl Rights {
    /// `r`: read files.
    pub const READ: u8 = 1;
    /// `w`: write and create files.
    pub const WRITE: u8 = 2;
    /// `l`: list directories and stat.
    pub const LIST: u8 = 4;
    /// `d`: delete.
    pub const DELETE: u8 = 8;
    /// `p`: put (create new files, never overwrite).
    pub const PUT: u8 = 16;
    /// `a`: administer the ACL.
    pub const ADMIN: u8 = 32;
    /// `x`: execute.
    pub const EXECUTE: u8 = 64;
    /// `v`: reserve (only meaningful inside a reserve set).
    pub const RESERVE: u8 = 128;

    /// No rights.
    pub const NONE: Rights = Rights {
        bits: 0,
        reserve: None,
    };

    /// Rights with the given plain bits and no reserve right.
    pub const fn new(bits: u8) -> Rights {
        Rights {
            bits,
            reserve: None,
        }
    }

    /// Parses rights letters (strict: unknown letters are an error).
    pub fn parse(text: &str) -> Result<Rights, WireError> {
        if text == "n" || text == "-" {
            return Ok(Rights::NONE);
        }
        if text.is_empty() {
            return Err(WireError::BadArgument("rights"));
        }
        let bytes = text.as_bytes();
        let mut r = Rights::NONE;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'v' {
                let mut inner = 0u8;
                if bytes.get(i + 1) == Some(&b'(') {
                    let len = bytes[i + 2..]
                        .iter()
                        .position(|&b| b == b')')
                        .ok_or(WireError::BadArgument("rights"))?;
                    for &l in &bytes[i + 2..i + 2 + len] {
                        inner |= letter_bit(&RESERVE_LETTERS, l)?;
                    }
                    i += len + 2;
                }
                r.reserve = Some(r.reserve.unwrap_or(0) | inner);
            } else {
                let bit = letter_bit(&LETTERS, bytes[i])?;
                r.bits |= if bit == Rights::WRITE {
                    Rights::WRITE | Rights::PUT
                } else {
                    bit
                };
            }
            i += 1;
        }
        Ok(r)
    }

    /// The letters (`n` for no rights).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (l, bit) in LETTERS {
            if self.bits & bit != 0 {
                s.push(char::from(l));
            }
        }
        if let Some(inner) = self.reserve {
            s.push_str("v(");
            for (l, bit) in RESERVE_LETTERS {
                if inner & bit != 0 {
                    s.push(char::from(l));
                }
            }
            s.push(')');
        }
        if s.is_empty() {
            s.push('n');
        }
        s
    }

    /// True if every plain right in `bits` is granted.
    pub fn allows(&self, bits: u8) -> bool {
        self.bits & bits == bits
    }

    /// True if no right at all is granted.
    pub fn is_empty(&self) -> bool {
        self.bits == 0 && self.reserve.is_none()
    }

    /// The union of two sets.
    pub fn union(self, other: Rights) -> Rights {
        let reserve = match (self.reserve, other.reserve) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) | b.unwrap_or(0)),
        };
        Rights {
            bits: self.bits | other.bits,
            reserve,
        }
    }
}

impl fmt::Display for Rights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// The methods roost's server authenticates.
pub const ROOST_METHODS: [&str; 4] = ["address", "hostname", "unix", "hmac"];

/// The other methods cctools' chirp writes in ACLs (`group:` names a group of subjects),
/// accepted so that ACLs shared with cctools servers keep working.
pub const CCTOOLS_METHODS: [&str; 4] = ["kerberos", "globus", "ticket", "group"];

/// Checks that `subject` can name someone: `*`, or `METHOD:PATTERN` with a method roost or
/// cctools knows (or `*`) and a pattern of one word. The error names the subject and lists
/// the methods.
pub fn check_subject(subject: &str) -> Result<(), String> {
    if subject == "*" {
        return Ok(());
    }
    let why = match subject.split_once(':') {
        _ if subject.is_empty() => "it is empty",
        _ if subject.chars().any(|c| c.is_whitespace() || c.is_control()) => {
            "it holds a space or a control character"
        }
        None => "it has no METHOD: part",
        Some((method, _))
            if method != "*"
                && !ROOST_METHODS.contains(&method)
                && !CCTOOLS_METHODS.contains(&method) =>
        {
            "its method is unknown"
        }
        Some((_, "")) => "its pattern is empty",
        Some(_) => return Ok(()),
    };
    Err(format!(
        "{subject:?} is not an ACL subject ({why}): expected METHOD:PATTERN, METHOD being {} \
         (or cctools' {}), e.g. unix:alice, hmac:build, address:10.0.0.*; or * for anyone",
        ROOST_METHODS.join(", "),
        CCTOOLS_METHODS.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_name_a_known_method_and_a_pattern() {
        for good in [
            "*",
            "unix:alice",
            "address:10.0.0.*",
            "hostname:*.example.org",
            "hmac:build",
            "kerberos:alice@EXAMPLE.ORG",
            "globus:/O=Grid/CN=Alice",
            "ticket:abc",
            "group:/staff",
            "*:*",
        ] {
            assert_eq!(check_subject(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("bob", "no METHOD"),
            ("foo:bar", "unknown"),
            ("unix:", "empty"),
            (":alice", "unknown"),
            ("", "empty"),
            ("unix:a b", "space"),
        ] {
            let e = check_subject(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")) && e.contains(why), "{e}");
            assert!(e.contains("address, hostname, unix, hmac") && e.contains("kerberos"));
        }
    }

    #[test]
    fn write_implies_put_as_in_cctools() {
        assert_eq!(Rights::parse("rwl").unwrap().to_text(), "rwlp");
    }

    #[test]
    fn all_letters_round_trip_in_cctools_order() {
        for text in ["r", "rwldpax", "lv(rwl)", "rwlpv(rwldpvax)", "v()", "n"] {
            assert_eq!(Rights::parse(text).unwrap().to_text(), text, "{text}");
        }
        assert_eq!(Rights::parse("xal").unwrap().to_text(), "lax");
    }

    #[test]
    fn none_spellings_and_bad_letters() {
        assert!(Rights::parse("n").unwrap().is_empty());
        assert!(Rights::parse("-").unwrap().is_empty());
        assert!(Rights::parse("").is_err());
        assert!(Rights::parse("rq").is_err());
        assert!(Rights::parse("v(rw").is_err());
        assert!(Rights::parse("v(q)").is_err());
    }

    #[test]
    fn allows_and_union() {
        let r = Rights::parse("rl").unwrap();
        assert!(r.allows(Rights::READ | Rights::LIST));
        assert!(!r.allows(Rights::WRITE));
        let u = r.union(Rights::parse("v(r)").unwrap());
        assert_eq!(u.to_text(), "rlv(r)");
    }
}

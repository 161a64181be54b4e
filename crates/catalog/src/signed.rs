//! Signed reports. A server holding a catalog key (`roost serve --catalog-key NAME=FILE`)
//! signs each report, so that a catalog holding the same key (`roost catalog --catalog-key
//! NAME=FILE`) can tell it from a forgery, from a replay, and from a copy sent by another
//! host.
//!
//! A signed report is a JSON object like any report, with three members more, and the
//! signature last:
//!
//! ```text
//! {"type":"chirp","name":"fs7","port":9094,...,
//!  "signed_by":"pool","signed_at_ms":1795561433123,"signed_from":"10.0.0.7",
//!  "signature":"<64 hex digits>"}
//! ```
//!
//! `signed_by` names the key, `signed_at_ms` is when the report was made (Unix
//! milliseconds), `signed_from` the address the report is sent from, which is the address
//! the catalog records for the server. The signature is HMAC-SHA256 under the key's secret of
//! [`DOMAIN`] followed by the object as it was before the signature was added: the report's
//! exact bytes up to the comma before `"signature"`, and a closing brace. So the report is
//! signed byte for byte as it travels (no canonical form to agree on), and a catalog that
//! does not check signatures (cctools') reads it as an ordinary report with members more.
//!
//! The catalog ([`check`]) accepts a signed report only when the key is one it holds, the
//! signature is right, `signed_at_ms` is within its window of the catalog's clock, and
//! `signed_from` is the address the datagram came from; with the record it also keeps the
//! time, and refuses a report for the same server that is not newer (a replay).

use crate::json::{self, Value};
use crate::keys::{Key, Keys};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::net::IpAddr;
use std::time::Duration;

/// What the signature covers first: the purpose, so that a tag made for a report can serve
/// no other protocol using the same key (a Chirp hmac nonce is one line: it cannot hold it).
pub const DOMAIN: &[u8] = b"roost catalog report v1\n";
/// The members a signed report adds, and the one the catalog adds to every record it shows.
pub const SIGNED_BY: &str = "signed_by";
pub const SIGNED_AT_MS: &str = "signed_at_ms";
pub const SIGNED_FROM: &str = "signed_from";
pub const SIGNATURE: &str = "signature";
pub const VERIFIED: &str = "verified";
/// Every member about signatures: an unsigned report's own are removed, so it cannot claim
/// to be verified.
pub const MEMBERS: [&str; 5] = [SIGNED_BY, SIGNED_AT_MS, SIGNED_FROM, SIGNATURE, VERIFIED];
/// How the signature member starts, as [`seal`] writes it.
const TAIL: &[u8] = b",\"signature\":\"";
/// An HMAC-SHA256 tag in hex.
const TAG_HEX: usize = 64;

/// The tag of `signed` (the object without its signature) under `key`.
fn tag(key: &Key, signed: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.secret()).expect("HMAC takes any key");
    mac.update(DOMAIN);
    mac.update(signed);
    mac
}

/// `record` (a JSON object) signed with `key`, as sent from `from` at `at_ms` (Unix
/// milliseconds): its text, ready to send.
pub fn seal(record: &Value, key: &Key, from: IpAddr, at_ms: i64) -> String {
    let mut record = record.clone();
    for member in MEMBERS {
        record.remove(member);
    }
    record.set(SIGNED_BY, Value::String(key.name.clone()));
    record.set(SIGNED_AT_MS, Value::Int(at_ms));
    record.set(SIGNED_FROM, Value::String(from.to_canonical().to_string()));
    let text = record.to_json();
    let hex: String = tag(key, text.as_bytes())
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let open = text
        .strip_suffix('}')
        .expect("an object's text ends with }");
    format!("{open},\"signature\":\"{hex}\"}}")
}

/// A report that carries a signature, split: the object it signs, and the tag.
#[derive(Debug, PartialEq, Eq)]
pub struct Sealed {
    /// The object before the signature was added (what the tag covers).
    pub signed: Vec<u8>,
    pub tag: [u8; 32],
}

/// The parts of `text` (an update, uncompressed) if it ends as [`seal`] ends a report: a
/// signature member, last, of 64 hex digits. `None` for anything else, which is then an
/// unsigned report (or no report). Never panics.
pub fn split(text: &[u8]) -> Option<Sealed> {
    let end = text.iter().rposition(|b| !b.is_ascii_whitespace())? + 1;
    let text = &text[..end];
    let body = text.strip_suffix(b"\"}")?;
    let hex_start = body.len().checked_sub(TAG_HEX)?;
    let (before, hex) = body.split_at(hex_start);
    let open = before.strip_suffix(TAIL)?;
    if !open.starts_with(b"{") {
        return None;
    }
    let mut tag = [0u8; 32];
    for (i, pair) in hex.chunks(2).enumerate() {
        let digit = |b: u8| match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        };
        tag[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    let mut signed = open.to_vec();
    signed.push(b'}');
    Some(Sealed { signed, tag })
}

/// Who signed a report that checked out, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signer {
    pub key: String,
    pub at_ms: i64,
}

/// Why a signed report was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The signed object is not a report with the signing members.
    Malformed(String),
    /// Signed with a key the catalog does not hold.
    UnknownKey(String),
    /// The signature is not the key's over these bytes.
    BadSignature(String),
    /// Made longer ago than the window (or that far in the future): seconds off.
    OutOfWindow(i64),
    /// Signed for another address than the one it came from.
    WrongAddress { signed: String, from: IpAddr },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Malformed(why) => write!(f, "malformed signed report: {why}"),
            Problem::UnknownKey(k) => write!(
                f,
                "signed with key {k}, which this catalog does not hold (--catalog-key)"
            ),
            Problem::BadSignature(k) => write!(f, "bad signature for key {k}"),
            Problem::OutOfWindow(s) if *s < 0 => {
                write!(f, "signed {} s in the future (clocks apart?)", -s)
            }
            Problem::OutOfWindow(s) => write!(f, "signed {s} s ago: too old (a replay?)"),
            Problem::WrongAddress { signed, from } => {
                write!(f, "signed for address {signed} but sent from {from}")
            }
        }
    }
}

impl Problem {
    /// A short name for counting refusals of this kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Problem::Malformed(_) => "malformed",
            Problem::UnknownKey(_) => "unknown-key",
            Problem::BadSignature(_) => "bad-signature",
            Problem::OutOfWindow(_) => "out-of-window",
            Problem::WrongAddress { .. } => "wrong-address",
        }
    }
}

/// Checks a sealed report that came from `peer`, at `now_ms`: the record it carries (its
/// signing members left in, `verified` set by the caller) and who signed it, or why not.
/// Only a right signature makes the other members worth reading: it is checked first.
pub fn check(
    sealed: &Sealed,
    keys: &Keys,
    peer: IpAddr,
    now_ms: i64,
    window: Duration,
) -> Result<(Value, Signer), Problem> {
    let record = match json::parse(&sealed.signed) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return Err(Problem::Malformed("not an object".into())),
        Err(e) => return Err(Problem::Malformed(format!("invalid JSON: {e}"))),
    };
    let name = record
        .get(SIGNED_BY)
        .and_then(Value::as_str)
        .ok_or_else(|| Problem::Malformed(format!("no {SIGNED_BY}")))?;
    let key = keys
        .find(name)
        .ok_or_else(|| Problem::UnknownKey(printable(name)))?;
    tag(key, &sealed.signed)
        .verify_slice(&sealed.tag)
        .map_err(|_| Problem::BadSignature(key.name.clone()))?;
    let at_ms = match record.get(SIGNED_AT_MS) {
        Some(Value::Int(ms)) => *ms,
        _ => return Err(Problem::Malformed(format!("no integer {SIGNED_AT_MS}"))),
    };
    let off_ms = now_ms.saturating_sub(at_ms);
    let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    if off_ms.checked_abs().map_or(true, |off| off > window_ms) {
        return Err(Problem::OutOfWindow(off_ms / 1000));
    }
    let signed_from = record
        .get(SIGNED_FROM)
        .and_then(Value::as_str)
        .ok_or_else(|| Problem::Malformed(format!("no {SIGNED_FROM}")))?;
    let from = peer.to_canonical();
    if signed_from.parse::<IpAddr>().map(|a| a.to_canonical()) != Ok(from) {
        return Err(Problem::WrongAddress {
            signed: printable(signed_from),
            from,
        });
    }
    let signer = Signer {
        key: key.name.clone(),
        at_ms,
    };
    Ok((record, signer))
}

/// A name from a datagram, safe to log: at most 64 characters, controls escaped.
fn printable(text: &str) -> String {
    text.chars()
        .take(64)
        .flat_map(char::escape_default)
        .collect()
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Keys {
        Keys::new(vec![
            Key::new("pool", b"secret one").unwrap(),
            Key::new("other", b"secret two").unwrap(),
        ])
        .unwrap()
    }

    fn report() -> Value {
        json::parse(br#"{"type":"chirp","name":"fs7","port":9094,"cpus":2,"verified":true}"#)
            .unwrap()
    }

    const WINDOW: Duration = Duration::from_secs(300);

    #[test]
    fn a_sealed_report_checks_out_and_reads_as_an_ordinary_one() {
        let keys = keys();
        let key = keys.find("pool").unwrap();
        let peer: IpAddr = "10.0.0.7".parse().unwrap();
        let text = seal(&report(), key, peer, 1_000_000);
        // Any catalog reads it as a report.
        let plain = crate::update::parse_update(text.as_bytes()).unwrap();
        assert_eq!(plain.get("port"), Some(&Value::Int(9094)));
        let sealed = split(text.as_bytes()).expect("sealed");
        let (record, signer) = check(&sealed, &keys, peer, 1_000_500, WINDOW).unwrap();
        assert_eq!(
            signer,
            Signer {
                key: "pool".into(),
                at_ms: 1_000_000
            }
        );
        assert_eq!(record.get("name").unwrap().as_str(), Some("fs7"));
        assert_eq!(record.get(VERIFIED), None, "the report's own claim is gone");
        assert_eq!(record.get(SIGNATURE), None);
        // Trailing blanks are fine; a v4-mapped peer is the same address.
        let spaced = format!("{text}\n ");
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        let sealed = split(spaced.as_bytes()).unwrap();
        assert!(check(&sealed, &keys, mapped, 1_000_000, WINDOW).is_ok());
    }

    #[test]
    fn forged_stale_moved_and_foreign_reports_are_refused() {
        let keys = keys();
        let pool = keys.find("pool").unwrap();
        let peer: IpAddr = "10.0.0.7".parse().unwrap();
        let now = 10_000_000;
        let text = seal(&report(), pool, peer, now);
        // One byte changed: the cpus claimed.
        let forged = text.replace("\"cpus\":2", "\"cpus\":64");
        let sealed = split(forged.as_bytes()).unwrap();
        assert_eq!(
            check(&sealed, &keys, peer, now, WINDOW),
            Err(Problem::BadSignature("pool".into()))
        );
        // Signed with a key the catalog does not hold.
        let stranger = Key::new("stranger", b"x").unwrap();
        let sealed = split(seal(&report(), &stranger, peer, now).as_bytes()).unwrap();
        assert_eq!(
            check(&sealed, &keys, peer, now, WINDOW),
            Err(Problem::UnknownKey("stranger".into()))
        );
        // The right name, the wrong secret.
        let impostor = Key::new("pool", b"guess").unwrap();
        let sealed = split(seal(&report(), &impostor, peer, now).as_bytes()).unwrap();
        assert_eq!(
            check(&sealed, &keys, peer, now, WINDOW),
            Err(Problem::BadSignature("pool".into()))
        );
        // Replayed after the window, or from a clock far ahead.
        let sealed = split(text.as_bytes()).unwrap();
        assert_eq!(
            check(&sealed, &keys, peer, now + 301_000, WINDOW),
            Err(Problem::OutOfWindow(301))
        );
        assert_eq!(
            check(&sealed, &keys, peer, now - 400_000, WINDOW),
            Err(Problem::OutOfWindow(-400))
        );
        // Sent on by another host: it would be recorded at that host's address.
        let other: IpAddr = "10.0.0.66".parse().unwrap();
        assert!(matches!(
            check(&sealed, &keys, other, now, WINDOW),
            Err(Problem::WrongAddress { .. })
        ));
        // A report signed by `other` is another key's, not `pool`'s.
        let sealed = split(seal(&report(), keys.find("other").unwrap(), peer, now).as_bytes());
        assert_eq!(
            check(&sealed.unwrap(), &keys, peer, now, WINDOW)
                .unwrap()
                .1
                .key,
            "other"
        );
    }

    #[test]
    fn only_a_signature_at_the_end_makes_a_report_signed() {
        let hex = "ab".repeat(32);
        assert!(split(format!(r#"{{"a":1,"signature":"{hex}"}}"#).as_bytes()).is_some());
        for text in [
            format!(r#"{{"signature":"{hex}","a":1}}"#),
            format!(r#"{{"a":1, "signature":"{hex}"}}"#),
            format!(r#"{{"a":1,"signature":"{}"}}"#, "AB".repeat(32)),
            format!(r#"{{"a":1,"signature":"{}"}}"#, "ab".repeat(31)),
            format!(r#"["a",1,"signature":"{hex}"}}"#),
            "port 9094\nsignature abc\n".to_string(),
            String::new(),
            "\"}".to_string(),
        ] {
            assert_eq!(split(text.as_bytes()), None, "{text}");
        }
        let sealed = split(format!(r#"{{,"signature":"{hex}"}}"#).as_bytes()).unwrap();
        assert_eq!(sealed.signed, b"{}");
        assert!(matches!(
            check(&sealed, &keys(), "10.0.0.1".parse().unwrap(), 0, WINDOW),
            Err(Problem::Malformed(_))
        ));
    }

    /// Fuzz-style: random bytes, and mutations and truncations of a sealed report, never
    /// panic, and a mutated report never checks out unless it is the original.
    #[test]
    fn random_and_mutated_reports_never_panic_nor_pass() {
        let keys = keys();
        let peer: IpAddr = "10.0.0.7".parse().unwrap();
        let good = seal(&report(), keys.find("pool").unwrap(), peer, 5_000);
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let attempt =
            |bytes: &[u8]| split(bytes).and_then(|s| check(&s, &keys, peer, 5_000, WINDOW).ok());
        for cut in 0..good.len() {
            assert!(attempt(&good.as_bytes()[..cut]).is_none());
        }
        for _ in 0..20_000 {
            let mut bytes = good.clone().into_bytes();
            for _ in 0..=(next() % 4) {
                let i = (next() as usize) % bytes.len();
                bytes[i] = next() as u8;
            }
            if attempt(&bytes).is_some() {
                assert_eq!(bytes, good.as_bytes(), "a changed report passed");
            }
            let random: Vec<u8> = (0..(next() % 200)).map(|_| next() as u8).collect();
            let _ = attempt(&random);
        }
    }
}

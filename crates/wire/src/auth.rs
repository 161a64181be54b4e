//! The authentication handshake that opens every connection, as lines.
//!
//! The client offers a method name per line; the server answers `yes` (it will try) or `no`
//! (it will not; the client offers the next one). After `yes` comes the method's own exchange,
//! which ends with the server's verdict line, `yes` or `no`. After a `no` verdict the client
//! may offer another method. After a `yes` verdict the server sends three more lines:
//! `yes`, the method name and the subject name; the client's identity is then
//! `method:name` (e.g. `address:127.0.0.1`). Server bytes per method, after the offer:
//!
//! - `address`: `yes` `yes` then `yes` `address` `<client ip>`.
//! - `hostname`: `yes` then `yes` `yes` `hostname` `<name>` (reverse lookup, forward-confirmed)
//!   or `no`.
//! - `unix`: `yes`, then a challenge line naming a file path that must not exist. The client
//!   creates it (`O_CREAT|O_EXCL`) and answers `yes`, or answers `no` if it cannot (the server
//!   then sends nothing more for this method). The server looks at the file's owner and answers
//!   `yes` then `yes` `unix` `<user name>`, or `no`. The client removes the file afterwards.
//! - `hmac` (roost's shared-secret method): `yes`, then a nonce line of [`NONCE_LEN`] random
//!   bytes in lower-case hex. The client answers `<keyname> <hex HMAC-SHA256(secret, nonce hex
//!   text)>`; the server recomputes it with its copy of that key's secret and answers `yes`
//!   then `yes` `hmac` `<keyname>`, or `no`. The secret never crosses the wire.
//!
//! Methods the server does not offer (cctools' `globus`, `kerberos`, `ticket`) get `no`.

use std::fmt;

use crate::error::WireError;

/// The affirmative line.
pub const YES: &[u8] = b"yes\n";
/// The negative line.
pub const NO: &[u8] = b"no\n";
/// Bytes of randomness in an `hmac` nonce (sent as twice as many hex digits).
pub const NONCE_LEN: usize = 32;
/// Bytes of an HMAC-SHA256 tag.
pub const MAC_LEN: usize = 32;
/// The longest handshake line either side needs to accept, newline included.
pub const AUTH_LINE_MAX: usize = 1024;

/// An authentication method roost knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// The client's IP address.
    Address,
    /// The client's host name, by reverse lookup confirmed forward.
    Hostname,
    /// Same-host Unix user, proved by creating a file the server names.
    Unix,
    /// A shared secret proved by HMAC over a server nonce.
    Hmac,
}

impl Method {
    /// Every method, in the order clients try them by default.
    pub const ALL: [Method; 4] = [
        Method::Address,
        Method::Hostname,
        Method::Unix,
        Method::Hmac,
    ];

    /// The name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Method::Address => "address",
            Method::Hostname => "hostname",
            Method::Unix => "unix",
            Method::Hmac => "hmac",
        }
    }

    /// The method an offer line names, if roost knows it.
    pub fn parse(line: &[u8]) -> Option<Method> {
        let name = crate::strip_newline(line);
        Method::ALL
            .into_iter()
            .find(|m| m.name().as_bytes() == name)
    }

    /// The offer line, newline included.
    pub fn offer_line(self) -> Vec<u8> {
        format!("{}\n", self.name()).into_bytes()
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads a `yes`/`no` line.
pub fn parse_yes_no(line: &[u8]) -> Result<bool, WireError> {
    match crate::strip_newline(line) {
        b"yes" => Ok(true),
        b"no" => Ok(false),
        _ => Err(WireError::BadReply("expected yes or no")),
    }
}

/// Replaces whitespace and non-printable characters by `_`, as cctools does to subjects, so a
/// subject is always one word.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// The three lines that end a successful handshake: `yes`, the method, the (sanitized) name.
pub fn success_lines(method: &str, name: &str) -> Vec<u8> {
    format!("yes\n{}\n{}\n", sanitize(method), sanitize(name)).into_bytes()
}

/// An authenticated identity: `method:name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Subject {
    /// The method, e.g. `unix`.
    pub method: String,
    /// The name the method established, e.g. `alice`.
    pub name: String,
}

impl Subject {
    /// A subject from its parts (sanitized).
    pub fn new(method: &str, name: &str) -> Subject {
        Subject {
            method: sanitize(method),
            name: sanitize(name),
        }
    }

    /// Parses `method:name`.
    pub fn parse(text: &str) -> Result<Subject, WireError> {
        match text.split_once(':') {
            Some((m, n)) if !m.is_empty() && !n.is_empty() => Ok(Subject::new(m, n)),
            _ => Err(WireError::BadReply("subject")),
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.method, self.name)
    }
}

/// The `unix` challenge line naming the file the client must create.
pub fn challenge_line(path: &[u8]) -> Result<Vec<u8>, WireError> {
    if path.is_empty() || path.contains(&0) || path.contains(&b'\n') {
        return Err(WireError::BadArgument("challenge path"));
    }
    let mut line = path.to_vec();
    line.push(b'\n');
    Ok(line)
}

/// The path in a `unix` challenge line.
pub fn parse_challenge(line: &[u8]) -> Result<Vec<u8>, WireError> {
    let path = line.strip_suffix(b"\n").unwrap_or(line);
    if path.is_empty() || path.contains(&0) {
        return Err(WireError::BadReply("challenge path"));
    }
    Ok(path.to_vec())
}

/// The `hmac` nonce line: `nonce` in lower-case hex.
pub fn nonce_line(nonce: &[u8; NONCE_LEN]) -> Vec<u8> {
    let mut line = crate::hex::encode(nonce).into_bytes();
    line.push(b'\n');
    line
}

/// Checks an `hmac` nonce line and returns its hex text: the message the client must MAC.
pub fn parse_nonce_line(line: &[u8]) -> Result<String, WireError> {
    let text = crate::strip_newline(line);
    let ok =
        text.len() == 2 * NONCE_LEN && text.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !ok {
        return Err(WireError::BadReply("hmac nonce"));
    }
    Ok(String::from_utf8_lossy(text).into_owned())
}

/// True if `name` can name an `hmac` key: 1 to 64 of `A-Z a-z 0-9 . _ - @ +`.
pub fn is_valid_key_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@' | b'+'))
}

/// The client's `hmac` answer line: `<keyname> <hex tag>`.
pub fn response_line(key_name: &str, mac: &[u8]) -> Result<Vec<u8>, WireError> {
    if !is_valid_key_name(key_name) {
        return Err(WireError::BadArgument("key name"));
    }
    Ok(format!("{} {}\n", key_name, crate::hex::encode(mac)).into_bytes())
}

/// Parses the client's `hmac` answer into the key name and the raw tag. The tag must be
/// [`MAC_LEN`] bytes; the server compares it in constant time.
pub fn parse_response(line: &[u8]) -> Result<(String, Vec<u8>), WireError> {
    let text = std::str::from_utf8(crate::strip_newline(line))
        .map_err(|_| WireError::BadReply("hmac response"))?;
    let (name, tag) = text
        .split_once(' ')
        .ok_or(WireError::BadReply("hmac response"))?;
    let mac = crate::hex::decode(tag.as_bytes()).ok_or(WireError::BadReply("hmac response"))?;
    if !is_valid_key_name(name) || mac.len() != MAC_LEN {
        return Err(WireError::BadReply("hmac response"));
    }
    Ok((name.to_string(), mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_have_wire_names() {
        for m in Method::ALL {
            assert_eq!(Method::parse(&m.offer_line()), Some(m));
        }
        assert_eq!(Method::parse(b"globus\n"), None);
        assert_eq!(Method::Unix.to_string(), "unix");
    }

    #[test]
    fn success_matches_cctools_bytes() {
        // Captured from cctools 9.9: after "address\n" the server sends
        // "yes\nyes\nyes\naddress\n127.0.0.1\n"; the last three lines are these.
        assert_eq!(
            success_lines("address", "127.0.0.1"),
            b"yes\naddress\n127.0.0.1\n"
        );
        assert_eq!(success_lines("unix", "a b\x07"), b"yes\nunix\na_b_\n");
    }

    #[test]
    fn yes_no_lines() {
        assert!(parse_yes_no(YES).unwrap());
        assert!(!parse_yes_no(NO).unwrap());
        assert!(parse_yes_no(b"maybe\n").is_err());
    }

    #[test]
    fn subjects_print_and_parse() {
        let s = Subject::parse("hostname:*.example.org").unwrap();
        assert_eq!(
            (s.method.as_str(), s.name.as_str()),
            ("hostname", "*.example.org")
        );
        assert_eq!(s.to_string(), "hostname:*.example.org");
        assert_eq!(Subject::parse("unix:a:b").unwrap().name, "a:b");
        assert!(Subject::parse("nocolon").is_err());
    }

    #[test]
    fn unix_challenge_lines() {
        let line = challenge_line(b"/tmp/challenge.1.2").unwrap();
        assert_eq!(line, b"/tmp/challenge.1.2\n");
        assert_eq!(parse_challenge(&line).unwrap(), b"/tmp/challenge.1.2");
        assert!(challenge_line(b"a\nb").is_err());
    }

    #[test]
    fn hmac_nonce_and_response_lines() {
        let nonce = [0xabu8; NONCE_LEN];
        let line = nonce_line(&nonce);
        assert_eq!(line.len(), 2 * NONCE_LEN + 1);
        assert_eq!(parse_nonce_line(&line).unwrap(), "ab".repeat(NONCE_LEN));
        assert!(parse_nonce_line(b"abc\n").is_err());
        assert!(parse_nonce_line("AB".repeat(NONCE_LEN).as_bytes()).is_err());

        let mac = [7u8; MAC_LEN];
        let resp = response_line("ci-key", &mac).unwrap();
        assert_eq!(
            parse_response(&resp).unwrap(),
            ("ci-key".to_string(), mac.to_vec())
        );
        assert!(response_line("bad key", &mac).is_err());
        assert!(parse_response(b"k 0707\n").is_err());
        assert!(parse_response(b"nospace\n").is_err());
    }
}

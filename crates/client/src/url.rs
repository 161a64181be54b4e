//! Chirp locations: `chirp://host[:port]/path` and Parrot's `/chirp/host[:port]/path`.

use std::fmt;

use crate::error::Error;

/// A file on a Chirp server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChirpUrl {
    /// Host name or address (IPv6 addresses without brackets).
    pub host: String,
    /// TCP port (9094 unless given).
    pub port: u16,
    /// Absolute path on the server, `/` at least.
    pub path: String,
}

impl ChirpUrl {
    /// Parses `chirp://host[:port][/path]` or `/chirp/host[:port][/path]`; the path is taken
    /// literally, without %-decoding. IPv6 hosts go in brackets: `chirp://[::1]:9094/x`.
    pub fn parse(text: &str) -> Result<ChirpUrl, Error> {
        let rest = text
            .strip_prefix("chirp://")
            .or_else(|| text.strip_prefix("/chirp/"))
            .ok_or_else(|| {
                Error::BadAddress(format!("{text}: not a chirp:// or /chirp/ location"))
            })?;
        // The path starts at the first '/' after the host (after the ']' of an IPv6 host).
        let host_end = if rest.starts_with('[') {
            rest.find(']').unwrap_or(0)
        } else {
            0
        };
        let (authority, path) = match rest[host_end..].find('/') {
            Some(i) => rest.split_at(host_end + i),
            None => (rest, "/"),
        };
        let (host, port) =
            split_host_port(authority).ok_or_else(|| Error::BadAddress(text.to_string()))?;
        Ok(ChirpUrl {
            host,
            port,
            path: path.to_string(),
        })
    }

    /// `host:port`, bracketing IPv6 addresses, for connecting.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Splits `host[:port]` (or `[v6][:port]`); the port defaults to 9094. The port may also
/// follow a `+` (`host+port`): a name without a colon survives colon-separated lists
/// (`PATH`, `LD_LIBRARY_PATH`, `PYTHONPATH`), which split `/chirp/h:9201/lib` in two.
pub fn split_host_port(authority: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let close = inner.find(']')?;
        let after = &inner[close + 1..];
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix([':', '+'])?),
        };
        (&inner[..close], port)
    } else {
        match authority.rsplit_once([':', '+']) {
            Some((h, p)) if !h.contains([':', '+']) => (h, Some(p)),
            Some(_) => return None,
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(p) => p.parse().ok().filter(|&p| p != 0)?,
        None => roost_wire::DEFAULT_PORT,
    };
    Some((host.to_string(), port))
}

impl fmt::Display for ChirpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "chirp://{}{}", self.authority(), self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(host: &str, port: u16, path: &str) -> ChirpUrl {
        ChirpUrl {
            host: host.into(),
            port,
            path: path.into(),
        }
    }

    #[test]
    fn a_port_may_follow_a_plus_sign() {
        assert_eq!(
            ChirpUrl::parse("/chirp/127.0.0.1+9201/zd").unwrap(),
            u("127.0.0.1", 9201, "/zd")
        );
        assert_eq!(
            ChirpUrl::parse("chirp://[::1]+9201/").unwrap(),
            u("::1", 9201, "/")
        );
        assert_eq!(split_host_port("h+9"), Some(("h".into(), 9)));
        assert_eq!(split_host_port("h+0"), None);
        assert_eq!(split_host_port("h+x"), None);
        assert_eq!(split_host_port("a+b+9"), None);
        assert_eq!(split_host_port("h+9:10"), None);
        assert_eq!(split_host_port("::1+9"), None);
    }

    #[test]
    fn parses_both_spellings() {
        assert_eq!(
            ChirpUrl::parse("chirp://h.example.org:9000/a/b").unwrap(),
            u("h.example.org", 9000, "/a/b")
        );
        assert_eq!(
            ChirpUrl::parse("/chirp/h:9000/a/b").unwrap(),
            u("h", 9000, "/a/b")
        );
    }

    #[test]
    fn port_and_path_default() {
        assert_eq!(ChirpUrl::parse("chirp://h/x").unwrap(), u("h", 9094, "/x"));
        assert_eq!(ChirpUrl::parse("chirp://h").unwrap(), u("h", 9094, "/"));
        assert_eq!(ChirpUrl::parse("/chirp/h:1").unwrap(), u("h", 1, "/"));
    }

    #[test]
    fn ipv6_hosts_use_brackets() {
        let url = ChirpUrl::parse("chirp://[::1]:9095/d").unwrap();
        assert_eq!(url, u("::1", 9095, "/d"));
        assert_eq!(url.to_string(), "chirp://[::1]:9095/d");
        assert_eq!(
            ChirpUrl::parse("chirp://[::1]").unwrap(),
            u("::1", 9094, "/")
        );
    }

    #[test]
    fn refuses_bad_locations() {
        for bad in [
            "http://h/x",
            "chirp://:80/x",
            "chirp://h:0/x",
            "chirp://h:x/",
            "chirp://h:99999/",
            "chirp://::1/x",
            "/chirp/",
        ] {
            assert!(ChirpUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn displays_as_a_chirp_url() {
        assert_eq!(u("h", 9094, "/a b").to_string(), "chirp://h:9094/a b");
    }
}

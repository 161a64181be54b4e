//! The HTTP client of an agent: one `ureq` agent (rustls, the system's CA store, no async
//! runtime) whose pool keeps connections to each server alive and reuses them across
//! files. Redirects are not followed: a directory asked for without its trailing slash
//! answers 3xx, which is how an unindexed directory is told from a file.

use std::io::Read;
use std::time::Duration;

/// How a request failed.
#[derive(Debug)]
pub enum Failure {
    /// The server answered with this status (not 2xx, not 3xx).
    Status(u16),
    /// No answer: connection refused, reset, timed out, TLS refused...
    Transport(String),
}

impl Failure {
    /// The errno a program sees for it.
    pub fn errno(&self) -> i32 {
        match self {
            Failure::Status(404 | 410) => libc::ENOENT,
            Failure::Status(401 | 403) => libc::EACCES,
            _ => libc::EIO,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Status(s) => write!(f, "HTTP status {s}"),
            Failure::Transport(t) => write!(f, "{t}"),
        }
    }
}

/// An answer: its status (2xx or 3xx) and the response to read the body from.
pub struct Answer {
    pub status: u16,
    pub response: ureq::Response,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.response.header(name)
    }

    /// The length the server announced.
    pub fn content_length(&self) -> Option<u64> {
        self.header("Content-Length")?.trim().parse().ok()
    }

    /// The whole body, up to `limit` bytes (more is an error).
    pub fn body(self, limit: u64) -> Result<Vec<u8>, Failure> {
        let mut out = Vec::new();
        self.response
            .into_reader()
            .take(limit + 1)
            .read_to_end(&mut out)
            .map_err(|e| Failure::Transport(e.to_string()))?;
        if out.len() as u64 > limit {
            return Err(Failure::Transport(format!("body over {limit} bytes")));
        }
        Ok(out)
    }
}

/// The shared client.
pub struct Client {
    agent: ureq::Agent,
}

impl Client {
    pub fn new(timeout: Duration) -> Client {
        let agent = ureq::AgentBuilder::new()
            .redirects(0)
            .timeout_connect(timeout.min(Duration::from_secs(15)))
            .timeout_read(timeout)
            .max_idle_connections(64)
            .max_idle_connections_per_host(8)
            .user_agent(concat!("roost/", env!("CARGO_PKG_VERSION")))
            .build();
        Client { agent }
    }

    /// `method` on `url`; a 2xx or 3xx answer, else the failure.
    pub fn request(&self, method: &str, url: &str) -> Result<Answer, Failure> {
        match self.agent.request(method, url).call() {
            Ok(response) => Ok(Answer {
                status: response.status(),
                response,
            }),
            Err(ureq::Error::Status(code, response)) => {
                // Read the error page to its end, so the connection goes back to the pool.
                let _ = std::io::copy(
                    &mut response.into_reader().take(1 << 20),
                    &mut std::io::sink(),
                );
                Err(Failure::Status(code))
            }
            Err(ureq::Error::Transport(t)) => {
                // ureq's own text repeats the URL, which the caller says already.
                let mut text = t.kind().to_string();
                for part in [t.message().map(str::to_string), source_of(&t)]
                    .into_iter()
                    .flatten()
                {
                    text = format!("{text}: {part}");
                }
                Err(Failure::Transport(text))
            }
        }
    }
}

/// What caused a transport failure (a TLS or I/O error), if it says.
fn source_of(t: &ureq::Transport) -> Option<String> {
    std::error::Error::source(t).map(|e| e.to_string())
}

/// The URL of `path` (bytes, absolute) on `scheme://authority`: every byte but unreserved
/// characters and `/` percent-encoded.
pub fn url(scheme: &str, authority: &str, path: &[u8]) -> String {
    let mut out = format!("{scheme}://{authority}");
    for &b in path {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Seconds since the epoch of an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`, the only form
/// servers send today).
pub fn http_date(text: &str) -> Option<i64> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m == month)? as i64
        + 1;
    let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let hms: Vec<i64> = time
        .split(':')
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_escape_what_is_not_plain() {
        assert_eq!(
            url("http", "h:8", b"/a b/%c/d.txt"),
            "http://h:8/a%20b/%25c/d.txt"
        );
    }

    #[test]
    fn http_dates() {
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            http_date("Tue, 24 Nov 2026 18:00:00 GMT"),
            Some(1_795_543_200)
        );
        assert_eq!(http_date("yesterday"), None);
    }
}

//! The client's side of a catalog's answer: what it says of the servers a client means to
//! use. Each Chirp server's record becomes a [`Seen`] (up or down, how long ago it last
//! reported, how many reports), found by the `host:port` a client would connect to
//! ([`Servers::find`]: the reported name and port, or the address it resolves to). Clients
//! skip the servers the catalog shows down (`roost accounting`, the group tools) and follow
//! the pool during a run (`roost pool run`) with it.

use crate::json::Value;
use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};

/// What the catalog said of one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Not shown down (cctools' catalog shows no state: it forgets silent servers).
    pub up: bool,
    /// Seconds since its last report (roost's catalog), if known.
    pub age: Option<i64>,
    /// Reports the catalog has had from it (roost's catalog).
    pub reports: Option<i64>,
    /// When it last reported, in the catalog's Unix seconds.
    pub last_heard: Option<i64>,
}

impl Seen {
    fn of(record: &Value) -> Seen {
        let int = |k: &str| record.get(k).and_then(Value::as_i64);
        Seen {
            up: record.get("state").and_then(Value::as_str) != Some("down"),
            age: int("age"),
            reports: int("reports"),
            last_heard: int("lastheardfrom"),
        }
    }

    /// True if the server reported between `earlier` and this answer.
    pub fn reported_since(&self, earlier: &Seen) -> bool {
        match (self.reports, earlier.reports) {
            (Some(now), Some(then)) => now != then,
            _ => self.last_heard != earlier.last_heard,
        }
    }

    /// How the catalog shows it, for messages: `down in the catalog (no report for 12 s)`.
    pub fn describe(&self) -> String {
        let state = if self.up { "up" } else { "down" };
        match self.age {
            Some(age) if !self.up => format!("{state} in the catalog (no report for {age} s)"),
            _ => format!("{state} in the catalog"),
        }
    }
}

/// The Chirp servers of a catalog's answer, to be looked up by address.
#[derive(Clone, Debug, Default)]
pub struct Servers {
    by_address: HashMap<(IpAddr, u16), Seen>,
    /// Reported names, lower case; `None` where two records share one.
    by_name: HashMap<(String, u16), Option<Seen>>,
}

impl Servers {
    /// The Chirp servers among `records`.
    pub fn new(records: &[Value]) -> Servers {
        let mut servers = Servers::default();
        for r in records {
            if r.get("type").and_then(Value::as_str) != Some("chirp") {
                continue;
            }
            let Some(port) = r
                .get("port")
                .and_then(Value::as_i64)
                .and_then(|p| u16::try_from(p).ok())
            else {
                continue;
            };
            let seen = Seen::of(r);
            let address = r.get("address").and_then(Value::as_str);
            if let Some(ip) = address.and_then(|a| a.parse::<IpAddr>().ok()) {
                servers.by_address.insert((ip, port), seen.clone());
            }
            if let Some(name) = r.get("name").and_then(Value::as_str) {
                servers
                    .by_name
                    .entry((name.to_lowercase(), port))
                    .and_modify(|twin| *twin = None)
                    .or_insert(Some(seen));
            }
        }
        servers
    }

    /// What the catalog says of the server at `authority` (`host:port`, `[v6]:port`): by
    /// address when the host is one, else by the name it reports, else by the addresses the
    /// name resolves to. `None` when the catalog does not list it.
    pub fn find(&self, authority: &str) -> Option<&Seen> {
        let (host, port) = crate::parse_host_port(authority, 9094).ok()?;
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.by_address.get(&(ip, port));
        }
        if let Some(Some(seen)) = self.by_name.get(&(host.to_lowercase(), port)) {
            return Some(seen);
        }
        (host.as_str(), port)
            .to_socket_addrs()
            .ok()?
            .find_map(|a| self.by_address.get(&(a.ip(), port)))
    }

    /// True if the catalog shows the server at `authority` down (a server it does not list
    /// is not down: it may simply not report).
    pub fn is_down(&self, authority: &str) -> bool {
        self.find(authority).is_some_and(|s| !s.up)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: &str) -> Vec<Value> {
        match crate::json::parse(text.as_bytes()).unwrap() {
            Value::Array(r) => r,
            _ => unreachable!(),
        }
    }

    #[test]
    fn servers_are_found_by_address_name_or_resolved_name() {
        let all = records(
            r#"[{"type":"chirp","address":"127.0.0.1","name":"fs1","port":9001,"state":"down","age":12,"reports":3},
                {"type":"chirp","address":"10.0.0.2","name":"twin","port":9002,"state":"up"},
                {"type":"chirp","address":"10.0.0.3","name":"twin","port":9002,"state":"down"},
                {"type":"catalog","address":"127.0.0.1","port":9002}]"#,
        );
        let s = Servers::new(&all);
        let down = s.find("127.0.0.1:9001").unwrap();
        assert!(!down.up);
        assert_eq!(down.describe(), "down in the catalog (no report for 12 s)");
        assert!(s.is_down("FS1:9001"), "by reported name, any case");
        assert!(s.is_down("localhost:9001"), "by resolved address");
        assert!(
            !s.is_down("127.0.0.1:9002"),
            "a catalog record is no server"
        );
        assert_eq!(s.find("twin:9002"), None, "a shared name names no one");
        assert!(s.find("10.0.0.2:9002").unwrap().up);
        assert!(!s.is_down("10.9.9.9:1"), "not listed, not down");
    }

    #[test]
    fn a_new_report_is_told_by_its_count_or_its_time() {
        let seen = |reports: Option<i64>, last: i64| Seen {
            up: true,
            age: None,
            reports,
            last_heard: Some(last),
        };
        assert!(seen(Some(4), 10).reported_since(&seen(Some(3), 10)));
        assert!(!seen(Some(3), 11).reported_since(&seen(Some(3), 10)));
        assert!(seen(None, 11).reported_since(&seen(None, 10)));
        assert!(!seen(None, 10).reported_since(&seen(None, 10)));
    }
}

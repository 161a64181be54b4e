//! Which servers a run uses: the pool's records from the catalog, those that run jobs and
//! are up, ranked by the CPU their owners let guests have (their thermostat headroom).
//!
//! `roost serve --jobs --catalog` reports `jobs` (how many jobs it runs at once) and, with a
//! thermostat, `thermostat_cpu` (percent of the machine guests may use now); every server
//! reports `cpus` and `load1`. A host's headroom is `cpus * thermostat_cpu / 100` cores
//! (`cpus` without a thermostat); it takes at most `jobs` tasks at once, and no more than
//! its headroom rounded up. Speed beyond that is learned during the run from the rate at
//! which each host finishes work (see [`crate::schedule`]).
//!
//! A catalog that checks signatures (`roost catalog --catalog-key`) marks each record
//! `verified` or not; only verified records name hosts unless the run trusts unsigned ones
//! too ([`Trust`]), since anybody can send the catalog an unsigned report, claiming any
//! number of CPUs, and would then be sent tasks and their inputs.

use roost_catalog::json::Value;

/// Which catalog records may name a run's hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Only those the catalog shows `verified` (signed with a key it holds).
    SignedOnly,
    /// Unsigned ones too (`roost pool run --unsigned`).
    AlsoUnsigned,
}

impl Trust {
    /// Whether `record` may name a host.
    pub fn allows(self, record: &Value) -> bool {
        self == Trust::AlsoUnsigned || verified(record)
    }
}

/// Whether the catalog shows `record` verified: its reports signed with a key it holds.
pub fn verified(record: &Value) -> bool {
    record.get("verified") == Some(&Value::Bool(true))
}

/// A server tasks can run on.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    /// `host:port`, to connect to.
    pub authority: String,
    /// How it is shown: the catalog's name and port, or the authority.
    pub name: String,
    /// The cores guests may use (thermostat headroom).
    pub headroom: f64,
    /// Tasks run at once.
    pub slots: usize,
}

impl Host {
    /// A host named on the command line, with `slots` tasks at once.
    pub fn given(authority: &str, slots: usize) -> Host {
        Host {
            authority: authority.to_string(),
            name: authority.to_string(),
            headroom: slots as f64,
            slots: slots.max(1),
        }
    }

    /// The host a catalog record describes, if it is an up Chirp server that runs jobs.
    pub fn from_record(record: &Value) -> Option<Host> {
        let jobs = record
            .get("jobs")
            .and_then(Value::as_i64)
            .filter(|&j| j > 0)?;
        let mut host = Host::server_from_record(record)?;
        host.slots = host.slots.min(jobs as usize);
        Some(host)
    }

    /// The server a catalog record describes, if it is an up Chirp server, whether it runs
    /// jobs or not (to hold a run's files).
    pub fn server_from_record(record: &Value) -> Option<Host> {
        let text = |k: &str| record.get(k).and_then(Value::as_str);
        let number = |k: &str| record.get(k).and_then(Value::as_f64);
        if text("type") != Some("chirp") || text("state") == Some("down") {
            return None;
        }
        let port = record.get("port").and_then(Value::as_i64)?;
        let address = text("address").or(text("name"))?;
        let authority = if address.contains(':') {
            format!("[{address}]:{port}")
        } else {
            format!("{address}:{port}")
        };
        let cpus = number("cpus").filter(|c| *c >= 1.0).unwrap_or(1.0);
        let percent = number("thermostat_cpu")
            .filter(|p| *p > 0.0 && *p <= 100.0)
            .unwrap_or(100.0);
        let headroom = cpus * percent / 100.0;
        let slots = headroom.ceil().max(1.0) as usize;
        let name = match text("name") {
            Some(n) if n != address => format!("{n}:{port}"),
            _ => authority.clone(),
        };
        Some(Host {
            authority,
            name,
            headroom,
            slots,
        })
    }
}

/// The up Chirp servers of the catalog's records that `trust` allows, with jobs or not,
/// most headroom first.
pub fn choose_servers(records: &[Value], trust: Trust) -> Vec<Host> {
    rank(
        records
            .iter()
            .filter(|r| trust.allows(r))
            .filter_map(Host::server_from_record)
            .collect(),
        None,
    )
}

/// The hosts of the catalog's records that can take tasks and that `trust` allows, most
/// headroom first (ties by name), at most `most` of them.
pub fn choose(records: &[Value], most: Option<usize>, trust: Trust) -> Vec<Host> {
    rank(
        records
            .iter()
            .filter(|r| trust.allows(r))
            .filter_map(Host::from_record)
            .collect(),
        most,
    )
}

/// How many up Chirp servers of the records (that run jobs, if `jobs`) are not verified:
/// those a run leaves out unless it trusts unsigned ones.
pub fn unverified(records: &[Value], jobs: bool) -> usize {
    records
        .iter()
        .filter(|r| !verified(r))
        .filter(|r| {
            if jobs {
                Host::from_record(r).is_some()
            } else {
                Host::server_from_record(r).is_some()
            }
        })
        .count()
}

fn rank(mut hosts: Vec<Host>, most: Option<usize>) -> Vec<Host> {
    // Hosts that report the same name (namespaces, containers) are told apart by address.
    let names: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
    for h in &mut hosts {
        if names.iter().filter(|n| **n == h.name).count() > 1 {
            h.name = h.authority.clone();
        }
    }
    hosts.sort_by(|a, b| {
        b.headroom
            .total_cmp(&a.headroom)
            .then_with(|| a.name.cmp(&b.name))
    });
    hosts.dedup_by(|a, b| a.authority == b.authority);
    if let Some(most) = most {
        hosts.truncate(most);
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(text: &str) -> Value {
        roost_catalog::json::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn hosts_are_ranked_by_headroom() {
        let records = [
            record(
                r#"{"type":"chirp","address":"10.0.0.1","name":"a","port":9094,"cpus":8,"jobs":4,"thermostat_cpu":25}"#,
            ),
            record(
                r#"{"type":"chirp","address":"10.0.0.2","name":"10.0.0.2","port":9094,"cpus":1,"jobs":1}"#,
            ),
            record(
                r#"{"type":"chirp","address":"10.0.0.3","port":9094,"cpus":2,"jobs":1,"state":"down"}"#,
            ),
            record(r#"{"type":"chirp","address":"10.0.0.4","port":9094,"cpus":16}"#),
            record(r#"{"type":"catalog","address":"10.0.0.5","port":9097,"jobs":1}"#),
            record(
                r#"{"type":"chirp","address":"::1","port":9,"cpus":4,"jobs":8,"thermostat_cpu":10}"#,
            ),
        ];
        let hosts = choose(&records, None, Trust::AlsoUnsigned);
        let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["a:9094", "10.0.0.2:9094", "[::1]:9"]);
        assert_eq!(hosts[0].headroom, 2.0);
        assert_eq!(hosts[0].slots, 2, "4 jobs, but 2 cores of headroom");
        assert_eq!(hosts[0].authority, "10.0.0.1:9094");
        assert_eq!(hosts[2].slots, 1);
        assert!((hosts[2].headroom - 0.4).abs() < 1e-9);
        assert_eq!(choose(&records, Some(1), Trust::AlsoUnsigned).len(), 1);
        let twins = [
            record(r#"{"type":"chirp","address":"10.0.0.1","name":"vm","port":9094,"jobs":1}"#),
            record(r#"{"type":"chirp","address":"10.0.0.2","name":"vm","port":9094,"jobs":1}"#),
            record(r#"{"type":"chirp","address":"10.0.0.3","name":"other","port":9094,"jobs":1}"#),
        ];
        let names: Vec<String> = choose(&twins, None, Trust::AlsoUnsigned)
            .into_iter()
            .map(|h| h.name)
            .collect();
        assert_eq!(names, ["10.0.0.1:9094", "10.0.0.2:9094", "other:9094"]);
        // To hold files, a server need not run jobs.
        let servers = choose_servers(&records, Trust::AlsoUnsigned);
        let names: Vec<&str> = servers.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(
            names,
            ["10.0.0.4:9094", "a:9094", "10.0.0.2:9094", "[::1]:9"]
        );
    }

    #[test]
    fn only_verified_records_name_hosts_unless_unsigned_ones_are_trusted() {
        let records = [
            record(
                r#"{"type":"chirp","address":"10.0.0.1","port":9094,"cpus":2,"jobs":1,"verified":true}"#,
            ),
            record(
                r#"{"type":"chirp","address":"10.0.0.66","port":9094,"cpus":64,"jobs":64,"verified":false}"#,
            ),
            record(r#"{"type":"chirp","address":"10.0.0.67","port":9094,"cpus":64,"jobs":64}"#),
        ];
        let names =
            |hosts: Vec<Host>| -> Vec<String> { hosts.into_iter().map(|h| h.authority).collect() };
        assert_eq!(
            names(choose(&records, None, Trust::SignedOnly)),
            ["10.0.0.1:9094"]
        );
        assert_eq!(
            names(choose_servers(&records, Trust::SignedOnly)),
            ["10.0.0.1:9094"]
        );
        assert_eq!(choose(&records, None, Trust::AlsoUnsigned).len(), 3);
        assert_eq!(unverified(&records, true), 2);
    }
}

//! Balances from ledgers and prices, as Legion proposes: what each user consumed (debits),
//! what each owner's hosts contributed (credits: offered, used, held, served), and each
//! account's surplus or deficit.
//!
//! Every record is priced by the class of the host that wrote it (from the ledger's latest
//! `start` record) and the hour it names. An owner is credited for guests' CPU on their hosts
//! (`contributed`), and, per host, class and hour of the day, for the offered core-hours the
//! guests left unused (`offered`): offered minus contributed, never below zero. A user and an
//! owner are the same account when their names agree once a subject's method is dropped
//! (`unix:alice` and `hmac:alice` are `alice`; `address:` and `hostname:` subjects stay whole).

use super::prices::{Prices, Resource};
use super::record::{Kind, Record};
use std::collections::{BTreeMap, BTreeSet};

const GIB: f64 = (1u64 << 30) as f64;

/// What one user consumed across the pool, and what it costs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UserTotals {
    pub jobs: u64,
    pub cpu_us: u64,
    pub rpcs: u64,
    pub read: u64,
    pub written: u64,
    pub storage_byte_secs: u128,
    pub cost: f64,
}

/// What one owner's hosts offered and contributed, and what it earns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OwnerTotals {
    pub hosts: BTreeSet<String>,
    pub offered_core_secs: f64,
    pub contributed_cpu_us: u64,
    pub idle_core_secs: f64,
    pub hosted_byte_secs: u128,
    pub served: u64,
    pub credit: f64,
}

/// An account's consumption against its contribution.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Account {
    pub consumed: f64,
    pub contributed: f64,
}

impl Account {
    /// Surplus (positive) or deficit (negative).
    pub fn balance(&self) -> f64 {
        self.contributed - self.consumed
    }
}

/// The balances of a pool.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Balances {
    pub users: BTreeMap<String, UserTotals>,
    pub owners: BTreeMap<String, OwnerTotals>,
    pub accounts: BTreeMap<String, Account>,
}

impl Balances {
    pub fn consumed(&self) -> f64 {
        // (A float sum of nothing is -0.0; adding 0.0 makes it 0.)
        self.users.values().map(|u| u.cost).sum::<f64>() + 0.0
    }

    pub fn contributed(&self) -> f64 {
        self.owners.values().map(|o| o.credit).sum::<f64>() + 0.0
    }

    /// The system's surplus: what users paid beyond what owners earned (the spread between
    /// consumption and contribution prices).
    pub fn surplus(&self) -> f64 {
        self.consumed() - self.contributed()
    }
}

/// The account a user subject or owner name belongs to.
pub fn account_of(name: &str) -> &str {
    for method in ["unix:", "hmac:"] {
        if let Some(rest) = name.strip_prefix(method) {
            return rest;
        }
    }
    name
}

/// Offered and contributed time of one host in one class and hour of the day.
#[derive(Default)]
struct Bucket {
    offered_core_secs: f64,
    contributed_cpu_secs: f64,
}

/// Balances of the ledgers of several servers (each a name for messages and its records).
pub fn balances<'a>(
    ledgers: impl IntoIterator<Item = (&'a str, &'a [Record])>,
    prices: &Prices,
) -> Balances {
    let mut b = Balances::default();
    // (server, owner, class, hour) -> offered and contributed.
    let mut buckets: BTreeMap<(String, String, String, u8), Bucket> = BTreeMap::new();
    for (server, records) in ledgers {
        let mut owner = "(unknown)".to_string();
        let mut class = "default".to_string();
        let mut host = server.to_string();
        for record in records {
            let price = |r: Resource| prices.price(&class, record.hour, r);
            match &record.kind {
                Kind::Start {
                    host: h,
                    owner: o,
                    class: c,
                    ..
                } => {
                    (host, owner, class) = (h.clone(), o.clone(), c.clone());
                    b.owners
                        .entry(owner.clone())
                        .or_default()
                        .hosts
                        .insert(host.clone());
                    continue;
                }
                Kind::Use {
                    user,
                    rpcs,
                    read,
                    written,
                } => {
                    let u = b.users.entry(user.clone()).or_default();
                    u.rpcs += rpcs;
                    u.read += read;
                    u.written += written;
                    u.cost += *rpcs as f64 / 1000.0 * price(Resource::Rpc)
                        + *read as f64 / GIB * price(Resource::Read)
                        + *written as f64 / GIB * price(Resource::Write);
                    let o = b.owners.entry(owner.clone()).or_default();
                    o.served += read + written;
                    o.credit += (read + written) as f64 / GIB * price(Resource::Served);
                }
                Kind::Job { user, cpu_us, .. } => {
                    let hours = *cpu_us as f64 / 3.6e9;
                    let u = b.users.entry(user.clone()).or_default();
                    u.jobs += 1;
                    u.cpu_us += cpu_us;
                    u.cost += hours * price(Resource::Cpu);
                    let o = b.owners.entry(owner.clone()).or_default();
                    o.contributed_cpu_us += cpu_us;
                    o.credit += hours * price(Resource::Contributed);
                    buckets
                        .entry((host.clone(), owner.clone(), class.clone(), record.hour))
                        .or_default()
                        .contributed_cpu_secs += *cpu_us as f64 / 1e6;
                }
                Kind::Storage { user, bytes, secs } => {
                    let byte_secs = u128::from(*bytes) * u128::from(*secs);
                    let gib_hours = byte_secs as f64 / GIB / 3600.0;
                    let u = b.users.entry(user.clone()).or_default();
                    u.storage_byte_secs += byte_secs;
                    u.cost += gib_hours * price(Resource::Storage);
                    let o = b.owners.entry(owner.clone()).or_default();
                    o.hosted_byte_secs += byte_secs;
                    o.credit += gib_hours * price(Resource::Hosted);
                }
                Kind::Offer {
                    secs,
                    cores,
                    cpu_pct,
                    ..
                } => {
                    let core_secs = *secs as f64 * *cores as f64 * *cpu_pct as f64 / 100.0;
                    b.owners.entry(owner.clone()).or_default().offered_core_secs += core_secs;
                    buckets
                        .entry((host.clone(), owner.clone(), class.clone(), record.hour))
                        .or_default()
                        .offered_core_secs += core_secs;
                }
            }
            b.owners
                .entry(owner.clone())
                .or_default()
                .hosts
                .insert(host.clone());
        }
    }
    for ((_, owner, class, hour), bucket) in buckets {
        let idle = (bucket.offered_core_secs - bucket.contributed_cpu_secs).max(0.0);
        let o = b.owners.entry(owner).or_default();
        o.idle_core_secs += idle;
        o.credit += idle / 3600.0 * prices.price(&class, hour, Resource::Offered);
    }
    for (user, totals) in &b.users {
        b.accounts
            .entry(account_of(user).to_string())
            .or_default()
            .consumed += totals.cost;
    }
    for (owner, totals) in &b.owners {
        b.accounts
            .entry(account_of(owner).to_string())
            .or_default()
            .contributed += totals.credit;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(hour: u8, kind: Kind) -> Record {
        Record {
            time: 1_764_000_000,
            hour,
            kind,
        }
    }

    fn start(owner: &str, class: &str) -> Record {
        at(
            0,
            Kind::Start {
                host: format!("{owner}-host:9094"),
                owner: owner.into(),
                class: class.into(),
                cores: 2,
            },
        )
    }

    #[test]
    fn consumption_is_charged_and_contribution_credited_by_class_and_hour() {
        let prices = Prices::parse(
            "* * cpu 10\n\
             fast 09-17 cpu 30\n\
             * * read 1\n* * write 2\n* * rpc 0.5\n* * storage 4\n\
             * * contributed 8\n* * offered 1\n* * hosted 3\n* * served 0.5\n",
        )
        .unwrap();
        let hour = 3_600_000_000; // a CPU-hour in microseconds
        let a = [
            start("alice", "fast"),
            at(
                10,
                Kind::Job {
                    user: "hmac:bob".into(),
                    id: 1,
                    cpu_us: hour,
                },
            ),
            at(
                20,
                Kind::Job {
                    user: "hmac:bob".into(),
                    id: 2,
                    cpu_us: hour / 2,
                },
            ),
            at(
                10,
                Kind::Offer {
                    secs: 3600,
                    cores: 2,
                    cpu_pct: 50,
                    mem: None,
                },
            ),
            at(
                11,
                Kind::Use {
                    user: "unix:alice".into(),
                    rpcs: 2000,
                    read: 1 << 30,
                    written: 1 << 31,
                },
            ),
        ];
        let b = [
            start("carol", "slow"),
            at(
                1,
                Kind::Storage {
                    user: "hmac:bob".into(),
                    bytes: 1 << 30,
                    secs: 7200,
                },
            ),
        ];
        let result = balances([("a", &a[..]), ("b", &b[..])], &prices);
        assert!(
            balances([], &prices).surplus().is_sign_positive(),
            "no -0 for nothing"
        );
        let bob = &result.users["hmac:bob"];
        assert_eq!((bob.jobs, bob.cpu_us), (2, hour + hour / 2));
        // 1 CPU-hour at 30 (fast, 10:00) + 0.5 at 10 (20:00) + 2 GiB-hours at 4.
        assert!((bob.cost - (30.0 + 5.0 + 8.0)).abs() < 1e-9, "{bob:?}");
        let alice_use = &result.users["unix:alice"];
        assert_eq!(
            (alice_use.read, alice_use.written, alice_use.rpcs),
            (1 << 30, 1 << 31, 2000)
        );
        assert!((alice_use.cost - (1.0 + 4.0 + 1.0)).abs() < 1e-9);
        let alice = &result.owners["alice"];
        // Offered 3600 core-s at 10:00 minus 3600 CPU-s used then: none idle.
        assert_eq!(alice.offered_core_secs, 3600.0);
        assert_eq!(alice.idle_core_secs, 0.0);
        // 1.5 CPU-hours contributed at 8, 3 GiB served at 0.5.
        assert!((alice.credit - (12.0 + 1.5)).abs() < 1e-9, "{alice:?}");
        let carol = &result.owners["carol"];
        assert!((carol.credit - 6.0).abs() < 1e-9);
        assert_eq!(carol.hosts.iter().collect::<Vec<_>>(), ["carol-host:9094"]);
        let alice_account = &result.accounts["alice"];
        assert!((alice_account.balance() - (13.5 - 6.0)).abs() < 1e-9);
        assert!((result.accounts["bob"].balance() + 43.0).abs() < 1e-9);
        assert!((result.surplus() - (49.0 - 19.5)).abs() < 1e-9);
    }

    #[test]
    fn an_offer_left_unused_earns_the_offered_price() {
        let prices = Prices::parse("* * offered 2\n* 00-12 offered 1\n").unwrap();
        let records = [
            start("dave", "default"),
            at(
                13,
                Kind::Offer {
                    secs: 1800,
                    cores: 4,
                    cpu_pct: 25,
                    mem: Some(1),
                },
            ),
            at(
                5,
                Kind::Offer {
                    secs: 3600,
                    cores: 4,
                    cpu_pct: 100,
                    mem: None,
                },
            ),
            at(
                5,
                Kind::Job {
                    user: "hmac:erin".into(),
                    id: 9,
                    cpu_us: 3_600_000_000,
                },
            ),
        ];
        let b = balances([("d", &records[..])], &prices);
        let dave = &b.owners["dave"];
        assert_eq!(dave.offered_core_secs, 1800.0 + 14400.0);
        assert_eq!(dave.idle_core_secs, 1800.0 + 10800.0);
        assert!(
            (dave.credit - (0.5 * 2.0 + 3.0 * 1.0)).abs() < 1e-9,
            "{dave:?}"
        );
    }
}

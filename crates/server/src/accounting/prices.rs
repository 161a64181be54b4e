//! The price file of `roost accounting --prices FILE`: what a unit of each resource costs
//! (or earns) on each class of host at each hour of the day, Legion's "resource scale file".
//!
//! One rule a line, `#` starts a comment:
//!
//! ```text
//! # CLASS  HOURS  RESOURCE     PRICE
//! *        *      cpu          1.00    # users pay per CPU-hour of their jobs
//! fast     09-17  cpu          3.00    # a fast host's CPU in working hours costs more
//! *        *      contributed  0.80    # owners earn per CPU-hour their hosts ran for guests
//! *        *      offered      0.10    # ...and per core-hour offered and left idle
//! ```
//!
//! `CLASS` is a host class (`roost serve --host-class`) or `*`; `HOURS` is `HH-HH` (the first
//! hour included, the last not, `22-06` wraps) or `*`, in each server's local time; the
//! last matching line wins, and a resource no line prices costs nothing. See [`Resource`]
//! for the units.

use crate::thermostat::schedule::{parse_hours, rule_lines};

/// What can be priced, with its unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    /// Users pay per CPU-hour of their jobs.
    Cpu,
    /// Users pay per GiB read from exports.
    Read,
    /// Users pay per GiB written to exports.
    Write,
    /// Users pay per 1,000 requests.
    Rpc,
    /// Users pay per GiB-hour of files they created.
    Storage,
    /// Owners earn per core-hour offered to guest jobs and not used.
    Offered,
    /// Owners earn per CPU-hour of guests' jobs their hosts ran.
    Contributed,
    /// Owners earn per GiB-hour of guests' files their hosts held.
    Hosted,
    /// Owners earn per GiB guests read from or wrote to their hosts.
    Served,
}

impl Resource {
    pub const ALL: [Resource; 9] = [
        Resource::Cpu,
        Resource::Read,
        Resource::Write,
        Resource::Rpc,
        Resource::Storage,
        Resource::Offered,
        Resource::Contributed,
        Resource::Hosted,
        Resource::Served,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Read => "read",
            Resource::Write => "write",
            Resource::Rpc => "rpc",
            Resource::Storage => "storage",
            Resource::Offered => "offered",
            Resource::Contributed => "contributed",
            Resource::Hosted => "hosted",
            Resource::Served => "served",
        }
    }

    /// The unit a price is per.
    pub fn unit(self) -> &'static str {
        match self {
            Resource::Cpu | Resource::Contributed => "CPU-hour",
            Resource::Read | Resource::Write | Resource::Served => "GiB",
            Resource::Rpc => "1000 requests",
            Resource::Storage | Resource::Hosted => "GiB-hour",
            Resource::Offered => "core-hour",
        }
    }

    fn parse(text: &str) -> Option<Resource> {
        Resource::ALL.into_iter().find(|r| r.name() == text)
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Rule {
    /// `None`: every class.
    class: Option<String>,
    /// Bit h set: the hour from h:00 to h:59.
    hours: u32,
    resource: Resource,
    price: f64,
}

/// A parsed price file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prices {
    rules: Vec<Rule>,
}

impl Prices {
    /// Parses a price file's text; an error names the line (`line 3: ...`).
    pub fn parse(text: &str) -> Result<Prices, String> {
        let mut rules = Vec::new();
        for (n, line, words) in rule_lines(text) {
            let at = |e: String| format!("line {n}: {e}");
            let [class, hours, resource, price] = words[..] else {
                return Err(at(format!(
                    "{:?}: expected CLASS HOURS RESOURCE PRICE, e.g. \"* 09-17 cpu 2.5\"",
                    line.trim()
                )));
            };
            let resource = Resource::parse(resource).ok_or_else(|| {
                let names: Vec<&str> = Resource::ALL.iter().map(|r| r.name()).collect();
                at(format!(
                    "resource {resource:?}: expected one of {}",
                    names.join(", ")
                ))
            })?;
            let price: f64 = price
                .parse()
                .ok()
                .filter(|p: &f64| p.is_finite() && *p >= 0.0 && *p < 1e15)
                .ok_or_else(|| {
                    at(format!(
                        "price {price:?}: expected a number of at least 0, e.g. 0.25"
                    ))
                })?;
            if class.is_empty() || !class.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(at(format!("class {class:?}: expected a name or *")));
            }
            rules.push(Rule {
                class: (class != "*").then(|| class.to_string()),
                hours: parse_hours(hours).map_err(at)?,
                resource,
                price,
            });
        }
        Ok(Prices { rules })
    }

    /// The price of a unit of `resource` on a host of `class` at local `hour`.
    pub fn price(&self, class: &str, hour: u8, resource: Resource) -> f64 {
        self.rules
            .iter()
            .rev()
            .find(|r| {
                r.resource == resource
                    && r.hours & (1 << (hour % 24)) != 0
                    && (r.class.is_none() || r.class.as_deref() == Some(class))
            })
            .map_or(0.0, |r| r.price)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roost_group::fuzz_check::Rng;

    const EXAMPLE: &str = "\
# CLASS  HOURS  RESOURCE     PRICE
*        *      cpu          1.00    # everywhere
fast     09-17  cpu          3.00
*        22-06  cpu          0.25
*        *      offered      0.1
";

    #[test]
    fn the_last_matching_line_wins() {
        let p = Prices::parse(EXAMPLE).unwrap();
        assert_eq!(p.price("slow", 12, Resource::Cpu), 1.0);
        assert_eq!(p.price("fast", 12, Resource::Cpu), 3.0);
        assert_eq!(p.price("fast", 17, Resource::Cpu), 1.0);
        assert_eq!(p.price("fast", 23, Resource::Cpu), 0.25);
        assert_eq!(p.price("fast", 3, Resource::Offered), 0.1);
        assert_eq!(p.price("fast", 3, Resource::Storage), 0.0);
    }

    #[test]
    fn mistakes_name_the_line() {
        for (text, needle) in [
            ("* * cpu 1\n* * cpux 2\n", "line 2: resource \"cpux\""),
            ("\n\n* 09-25 cpu 1\n", "line 3: hours \"09-25\""),
            ("* * cpu -1\n", "line 1: price \"-1\""),
            ("* * cpu NaN\n", "line 1: price \"NaN\""),
            (
                "* * cpu\n",
                "line 1: \"* * cpu\": expected CLASS HOURS RESOURCE PRICE",
            ),
            ("* * cpu 1 2\n", "line 1:"),
        ] {
            let e = Prices::parse(text).unwrap_err();
            assert!(e.starts_with(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = Rng(0xfeed_5eed);
        let words = [
            "*", "fast", "09-17", "22-06", "cpu", "read", "1.5", "-", "#", "\n", " ",
        ];
        for round in 0..20_000 {
            let text: String = if round % 2 == 0 {
                (0..rng.below(30))
                    .map(|_| words[rng.below(words.len())])
                    .collect::<Vec<_>>()
                    .join(" ")
            } else {
                let mut bytes = EXAMPLE.as_bytes().to_vec();
                let i = rng.below(bytes.len());
                bytes[i] = rng.next_u64() as u8;
                bytes.truncate(rng.below(bytes.len() + 1));
                String::from_utf8_lossy(&bytes).into_owned()
            };
            if let Ok(p) = Prices::parse(&text) {
                let _ = p.price("fast", rng.below(24) as u8, Resource::Cpu);
            }
        }
    }
}

//! `roost accounting`: gathers the ledgers of many servers (one `ledger` request per server,
//! in parallel; see docs/pool.md for why not the group tree) or local ledger files, and
//! prints each user's consumption, each owner's contribution and each account's surplus or
//! deficit, priced by a price file (`roost_server::accounting::{prices, balance}`).

use crate::pool::{catalog_addresses, columns, human, query_first, record_host};
use crate::remote::{describe, options, ConnectArgs};
use clap::Args;
use roost_catalog::json::Value;
use roost_client::{Client, Options};
use roost_server::accounting::balance::{self, Balances};
use roost_server::accounting::ledger::{self, Reading};
use roost_server::accounting::prices::Prices;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `roost accounting`.
#[derive(Args)]
#[command(after_help = "\
Reading a server's ledger needs the a (admin) right on its /. Servers come from the
arguments, --hosts FILE (one HOST[:PORT] a line, # comments) and --catalog (every Chirp
server the catalog lists; those it shows down are skipped and named). --ledger reads ledger
files directly (e.g. a stopped server's).

The price file has a line per rule, CLASS HOURS RESOURCE PRICE (the last matching line wins):
  *     *      cpu          1.00   # users pay per CPU-hour of jobs
  fast  09-17  cpu          3.00   # on hosts of class fast in working hours
  *     *      read         0.01   # per GiB read (write: per GiB written)
  *     *      rpc          0.001  # per 1000 requests
  *     *      storage      0.05   # per GiB-hour of files a user created
  *     *      contributed  0.80   # owners earn per CPU-hour of guest jobs
  *     *      offered      0.10   # ... per core-hour offered and left idle
  *     *      hosted       0.04   # ... per GiB-hour of guests' files held
  *     *      served       0.005  # ... per GiB guests read or wrote

Exit status: 0 when every ledger was read whole, 1 when a server could not be reached or
refused, or a ledger holds corrupt records (each named, with its line, on standard error;
the balances are made of the rest), 2 for bad options or a bad price file.

Examples:
  roost accounting --prices prices --hosts pool.txt --key acct=/etc/roost/acct.key
  roost accounting -c catalog.example.org --json
  roost accounting --ledger /var/lib/roost/ledger/fs7.ledger")]
pub struct AccountingArgs {
    /// Servers to gather from, HOST[:PORT].
    pub servers: Vec<String>,
    /// A file naming servers, one HOST[:PORT] a line.
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<PathBuf>,
    /// Gather from every Chirp server this catalog lists (repeatable: the first that
    /// answers is used).
    #[arg(long = "catalog", short = 'c', value_name = "HOST[:PORT]")]
    pub catalogs: Vec<String>,
    /// Read this ledger file too (repeatable).
    #[arg(long = "ledger", value_name = "FILE")]
    pub ledgers: Vec<PathBuf>,
    /// The price file; without it every price is 0 and only quantities are shown.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Print everything as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// One ledger gathered, or why not.
struct Source {
    name: String,
    reading: Result<Reading, String>,
}

/// Most servers asked at once.
const PARALLEL: usize = 32;
/// Bytes asked per `ledger` request.
const PAGE: u64 = 1 << 20;

pub fn main(args: AccountingArgs) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("roost accounting: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: AccountingArgs) -> Result<ExitCode, String> {
    let prices = match &args.prices {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--prices {}: {e}", path.display()))?;
            Prices::parse(&text).map_err(|e| format!("--prices {}: {e}", path.display()))?
        }
        None => Prices::default(),
    };
    let options = options(&args.connect).map_err(|f| f.0)?;
    let mut servers = args.servers.clone();
    if let Some(file) = &args.hosts {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("--hosts {}: {e}", file.display()))?;
        servers.extend(
            text.lines()
                .map(|l| l.split('#').next().unwrap_or("").trim())
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
    }
    let mut failed = false;
    if !args.catalogs.is_empty() {
        let catalogs = catalog_addresses(&args.catalogs)?;
        let timeout = args.connect.timeout.max(Duration::from_secs(1));
        let records =
            query_first("roost accounting", &catalogs, timeout).ok_or("no catalog answered")?;
        for r in records
            .iter()
            .filter(|r| r.get("type").and_then(Value::as_str) == Some("chirp"))
        {
            let host = record_host(r);
            if r.get("state").and_then(Value::as_str) == Some("down") {
                eprintln!("roost accounting: {host}: down in the catalog, skipped");
                failed = true;
            } else {
                servers.push(host);
            }
        }
    }
    if servers.is_empty() && args.ledgers.is_empty() {
        return Err("name servers, --hosts FILE, --catalog HOST or --ledger FILE".into());
    }
    let mut sources = gather(&servers, &options);
    for path in &args.ledgers {
        sources.push(Source {
            name: path.display().to_string(),
            reading: std::fs::read(path)
                .map(|bytes| ledger::read(&bytes))
                .map_err(|e| e.to_string()),
        });
    }
    for source in &sources {
        failed |= report_problems(source);
    }
    let ledgers: Vec<(&str, &[roost_server::accounting::record::Record])> = sources
        .iter()
        .filter_map(|s| Some((s.name.as_str(), &s.reading.as_ref().ok()?.records[..])))
        .collect();
    let balances = balance::balances(ledgers, &prices);
    let text = if args.json {
        json(&sources, &balances).to_json() + "\n"
    } else {
        table(&balances)
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The ledgers of `servers`, asked [`PARALLEL`] at a time.
fn gather(servers: &[String], options: &Options) -> Vec<Source> {
    let mut sources = Vec::new();
    for chunk in servers.chunks(PARALLEL) {
        let readings: Vec<Result<Reading, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|server| scope.spawn(move || fetch(server, options)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("the reader failed".into())))
                .collect()
        });
        for (server, reading) in chunk.iter().zip(readings) {
            sources.push(Source {
                name: server.clone(),
                reading,
            });
        }
    }
    sources
}

/// One server's whole ledger, page by page.
fn fetch(server: &str, options: &Options) -> Result<Reading, String> {
    let mut client = Client::connect(server, options).map_err(|e| describe(&e))?;
    let mut bytes = Vec::new();
    loop {
        match client.ledger(bytes.len() as u64, PAGE) {
            Ok(page) if page.is_empty() => return Ok(ledger::read(&bytes)),
            Ok(page) => bytes.extend_from_slice(&page),
            Err(e) => {
                let why = client.explain().ok().flatten();
                return Err(match why {
                    Some(why) => format!("{}: {why}", describe(&e)),
                    None => describe(&e),
                });
            }
        }
    }
}

/// Says on standard error what was wrong with a source; whether it counts as a failure.
fn report_problems(source: &Source) -> bool {
    match &source.reading {
        Err(e) => {
            eprintln!("roost accounting: {}: {e}", source.name);
            true
        }
        Ok(reading) => {
            if let Some((line, why)) = &reading.torn {
                eprintln!(
                    "roost accounting: {}: ledger line {line}: torn last record skipped ({why})",
                    source.name
                );
            }
            for (line, why) in &reading.corrupt {
                eprintln!(
                    "roost accounting: {}: ledger line {line}: {why} (record skipped)",
                    source.name
                );
            }
            !reading.corrupt.is_empty()
        }
    }
}

fn int(v: u128) -> Value {
    i64::try_from(v).map_or(Value::Float(v as f64), Value::Int)
}

fn gib_hours(byte_secs: u128) -> f64 {
    byte_secs as f64 / (1u64 << 30) as f64 / 3600.0
}

fn standing(balance: f64) -> &'static str {
    if balance > 0.0 {
        "surplus"
    } else if balance < 0.0 {
        "deficit"
    } else {
        "even"
    }
}

/// Everything as one JSON object (see docs/pool.md for its members).
fn json(sources: &[Source], b: &Balances) -> Value {
    let s = |v: &str| Value::String(v.to_string());
    let servers = sources
        .iter()
        .map(|source| {
            let mut members = vec![("server".to_string(), s(&source.name))];
            match &source.reading {
                Ok(r) => {
                    members.push(("records".into(), int(r.records.len() as u128)));
                    members.push((
                        "torn_line".into(),
                        r.torn.as_ref().map_or(Value::Null, |t| int(t.0 as u128)),
                    ));
                    members.push((
                        "corrupt".into(),
                        Value::Array(
                            r.corrupt
                                .iter()
                                .map(|(line, why)| {
                                    Value::Object(vec![
                                        ("line".into(), int(*line as u128)),
                                        ("error".into(), s(why)),
                                    ])
                                })
                                .collect(),
                        ),
                    ));
                    members.push(("error".into(), Value::Null));
                }
                Err(e) => members.push(("error".into(), s(e))),
            }
            Value::Object(members)
        })
        .collect();
    let users = b
        .users
        .iter()
        .map(|(user, u)| {
            Value::Object(vec![
                ("user".into(), s(user)),
                ("account".into(), s(balance::account_of(user))),
                ("jobs".into(), int(u128::from(u.jobs))),
                ("cpu_seconds".into(), Value::Float(u.cpu_us as f64 / 1e6)),
                ("rpcs".into(), int(u128::from(u.rpcs))),
                ("read_bytes".into(), int(u128::from(u.read))),
                ("written_bytes".into(), int(u128::from(u.written))),
                ("storage_byte_seconds".into(), int(u.storage_byte_secs)),
                (
                    "storage_gib_hours".into(),
                    Value::Float(gib_hours(u.storage_byte_secs)),
                ),
                ("cost".into(), Value::Float(u.cost)),
            ])
        })
        .collect();
    let owners = b
        .owners
        .iter()
        .map(|(owner, o)| {
            Value::Object(vec![
                ("owner".into(), s(owner)),
                (
                    "hosts".into(),
                    Value::Array(o.hosts.iter().map(|h| s(h)).collect()),
                ),
                (
                    "offered_core_hours".into(),
                    Value::Float(o.offered_core_secs / 3600.0),
                ),
                (
                    "contributed_cpu_hours".into(),
                    Value::Float(o.contributed_cpu_us as f64 / 3.6e9),
                ),
                (
                    "idle_core_hours".into(),
                    Value::Float(o.idle_core_secs / 3600.0),
                ),
                (
                    "hosted_gib_hours".into(),
                    Value::Float(gib_hours(o.hosted_byte_secs)),
                ),
                ("served_bytes".into(), int(u128::from(o.served))),
                ("credit".into(), Value::Float(o.credit)),
            ])
        })
        .collect();
    let accounts = b
        .accounts
        .iter()
        .map(|(name, a)| {
            Value::Object(vec![
                ("account".into(), s(name)),
                ("consumed".into(), Value::Float(a.consumed)),
                ("contributed".into(), Value::Float(a.contributed)),
                ("balance".into(), Value::Float(a.balance())),
                ("standing".into(), s(standing(a.balance()))),
            ])
        })
        .collect();
    Value::Object(vec![
        ("servers".into(), Value::Array(servers)),
        ("users".into(), Value::Array(users)),
        ("owners".into(), Value::Array(owners)),
        ("accounts".into(), Value::Array(accounts)),
        ("consumed".into(), Value::Float(b.consumed())),
        ("contributed".into(), Value::Float(b.contributed())),
        ("surplus".into(), Value::Float(b.surplus())),
    ])
}

fn bytes(n: u64) -> String {
    human(Some(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// The three tables and the totals.
fn table(b: &Balances) -> String {
    let cells = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut users = vec![cells(&[
        "USER",
        "JOBS",
        "CPU-H",
        "READ",
        "WRITTEN",
        "RPCS",
        "STORAGE GiB-H",
        "COST",
    ])];
    for (user, u) in &b.users {
        users.push(vec![
            user.clone(),
            u.jobs.to_string(),
            format!("{:.4}", u.cpu_us as f64 / 3.6e9),
            bytes(u.read),
            bytes(u.written),
            u.rpcs.to_string(),
            format!("{:.4}", gib_hours(u.storage_byte_secs)),
            format!("{:.4}", u.cost),
        ]);
    }
    let mut owners = vec![cells(&[
        "OWNER",
        "HOSTS",
        "OFFERED CORE-H",
        "USED CPU-H",
        "IDLE CORE-H",
        "HOSTED GiB-H",
        "SERVED",
        "CREDIT",
    ])];
    for (owner, o) in &b.owners {
        owners.push(vec![
            owner.clone(),
            o.hosts.len().to_string(),
            format!("{:.4}", o.offered_core_secs / 3600.0),
            format!("{:.4}", o.contributed_cpu_us as f64 / 3.6e9),
            format!("{:.4}", o.idle_core_secs / 3600.0),
            format!("{:.4}", gib_hours(o.hosted_byte_secs)),
            bytes(o.served),
            format!("{:.4}", o.credit),
        ]);
    }
    let mut accounts = vec![cells(&[
        "ACCOUNT",
        "CONSUMED",
        "CONTRIBUTED",
        "BALANCE",
        "",
    ])];
    for (name, a) in &b.accounts {
        accounts.push(vec![
            name.clone(),
            format!("{:.4}", a.consumed),
            format!("{:.4}", a.contributed),
            format!("{:+.4}", a.balance()),
            standing(a.balance()).to_string(),
        ]);
    }
    format!(
        "{}\n{}\n{}\nconsumed {:.4}, contributed {:.4}, system surplus {:+.4}\n",
        columns(users),
        columns(owners),
        columns(accounts),
        b.consumed(),
        b.contributed(),
        b.surplus()
    )
}

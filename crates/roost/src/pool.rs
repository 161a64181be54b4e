//! The pool: `roost catalog` (the catalog server) and `roost status` (list the pool).

use clap::Args;
use roost_catalog::json::Value;
use roost_catalog::{CatalogServer, Config};
use std::io::Write;
use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `roost catalog`.
#[derive(Args)]
#[command(after_help = "\
Servers report themselves with `roost serve --catalog HOST[:PORT]`, or cctools'
`chirp_server -u HOST[:PORT]`. The catalog takes updates as UDP datagrams on PORT and as TCP
connections on PORT+1 (cctools' default since 7.10), and answers queries on PORT over HTTP:
/query.json, /query.text, / (a table). A server is shown down after missing 3 reports (or
--down-after seconds of silence) and up again when it reports.

With --catalog-key NAME=FILE (repeatable), reports signed with one of these keys (roost serve
--catalog-key) are shown verified (`verified: true`, `signed_by`); `roost pool run` uses only
those unless told --unsigned. Unsigned reports (cctools' servers send them) are still shown,
as unverified. A signed report is refused, and counted and logged, when its key is unknown,
its signature wrong, its time more than --report-window seconds from this catalog's clock,
it names another address than the one it came from, or it is not newer than the last one
taken for that server; once a server's reports are signed, an unsigned report for it is
refused too (it cannot be downgraded or taken over).

The first line on standard output names the address, e.g.
  roost catalog: listening on 0.0.0.0:9097 (udp and http; tcp updates on 9098)

Examples:
  roost catalog
  roost catalog --port 0 --listen 127.0.0.1 --down-after 30
  roost catalog --catalog-key pool=/etc/roost/pool.key")]
pub struct CatalogArgs {
    /// The port for UDP updates and HTTP queries (TCP updates use the next one); 0 picks a
    /// free one.
    #[arg(long, default_value_t = roost_catalog::DEFAULT_PORT)]
    pub port: u16,
    /// The address to listen on.
    #[arg(long, default_value = "0.0.0.0", value_name = "ADDR")]
    pub listen: IpAddr,
    /// Show a server down after this long without a report, whatever its interval
    /// (default: 3 of its report intervals).
    #[arg(long, value_name = "DURATION", value_parser = crate::size::duration)]
    pub down_after: Option<Duration>,
    /// Log every update, not only arrivals, departures and refusals.
    #[arg(short, long)]
    pub verbose: bool,
    /// Trust reports signed with the catalog key NAME, its secret read from FILE (private to
    /// its owner: chmod 600); repeatable.
    #[arg(long = "catalog-key", value_name = "NAME=FILE")]
    pub catalog_keys: Vec<String>,
    /// Refuse a signed report made more than this long before (or after) this catalog's
    /// clock.
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = crate::size::duration_1s)]
    pub report_window: Duration,
}

pub fn catalog_main(args: CatalogArgs) -> ExitCode {
    let down_after = args.down_after;
    if down_after.is_some_and(|d| d.is_zero()) {
        eprintln!("roost catalog: --down-after 0: expected more than 0");
        return ExitCode::from(2);
    }
    let keys = args
        .catalog_keys
        .iter()
        .map(|spec| {
            roost_catalog::keys::Key::from_spec(spec)
                .map_err(|e| format!("--catalog-key {spec}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()
        .and_then(roost_catalog::keys::Keys::new);
    let keys = match keys {
        Ok(k) => k,
        Err(e) => {
            eprintln!("roost catalog: {e}");
            return ExitCode::from(2);
        }
    };
    let config = Config {
        down_after,
        verbose: args.verbose,
        keys,
        window: args.report_window,
    };
    let server = match CatalogServer::bind(args.listen, args.port, config) {
        Ok(s) => s,
        Err(e) => {
            let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
                " (choose another --port, or 0 for any)"
            } else {
                ""
            };
            eprintln!(
                "roost catalog: cannot listen on {}:{} (and TCP {}): {e}{hint}",
                args.listen,
                args.port,
                args.port.wrapping_add(1)
            );
            return ExitCode::from(2);
        }
    };
    let addr = match server.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("roost catalog: {e}");
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "roost catalog: listening on {addr} (udp and http; tcp updates on {})",
        addr.port() + 1
    );
    let _ = out.flush();
    drop(out);
    roost_catalog::log(
        "start",
        &[("addr", &addr), ("keys", &args.catalog_keys.len())],
    );
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roost catalog: {e}");
            ExitCode::from(2)
        }
    }
}

/// Options of `roost status`.
#[derive(Args)]
#[command(after_help = "\
Without --catalog, the catalog is $ROOST_CATALOG, else cctools' $CATALOG_HOST, else
localhost:9097. Works with cctools' catalog_server too (it shows no down servers: it forgets
them instead).

Exit status: 0 when a catalog answered, 1 when none did, 2 for bad options.

Examples:
  roost status -c catalog.example.org
  roost status --all --json | jq '.[] | .name'")]
pub struct StatusArgs {
    /// The catalog to ask, HOST[:PORT] (repeatable: the first that answers is used).
    #[arg(long = "catalog", short = 'c', value_name = "HOST[:PORT]")]
    pub catalogs: Vec<String>,
    /// Print the records as a JSON array, one per line, with every member.
    #[arg(long)]
    pub json: bool,
    /// List every record, not only Chirp servers.
    #[arg(long, short)]
    pub all: bool,
    /// How long to wait for each catalog.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = crate::size::duration_1s)]
    pub timeout: Duration,
}

/// The catalogs to ask: those given, else $ROOST_CATALOG, else $CATALOG_HOST, else
/// localhost, each as (host, port).
pub(crate) fn catalog_addresses(given: &[String]) -> Result<Vec<(String, u16)>, String> {
    let specs: Vec<String> = if !given.is_empty() {
        given.to_vec()
    } else if let Some(v) = std::env::var("ROOST_CATALOG")
        .ok()
        .or_else(|| std::env::var("CATALOG_HOST").ok())
        .filter(|v| !v.trim().is_empty())
    {
        v.split(',').map(|s| s.trim().to_string()).collect()
    } else {
        vec!["localhost".to_string()]
    };
    specs
        .iter()
        .map(|spec| {
            roost_catalog::parse_host_port(spec, roost_catalog::DEFAULT_PORT)
                .map_err(|e| format!("--catalog {e}"))
        })
        .collect()
}

/// The records of the first catalog that answers; each failure is printed as `who: ...`.
pub(crate) fn query_first(
    who: &str,
    catalogs: &[(String, u16)],
    timeout: Duration,
) -> Option<Vec<Value>> {
    roost_catalog::query_first(catalogs, timeout)
        .map_err(|why| {
            for e in why {
                eprintln!("{who}: catalog {e}");
            }
        })
        .ok()
}

pub fn status_main(args: StatusArgs) -> ExitCode {
    let catalogs = match catalog_addresses(&args.catalogs) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("roost status: {e}");
            return ExitCode::from(2);
        }
    };
    let timeout = args.timeout;
    let Some(mut records) = query_first("roost status", &catalogs, timeout) else {
        return ExitCode::from(1);
    };
    if !args.all {
        records.retain(|r| r.get("type").and_then(Value::as_str) == Some("chirp"));
    }
    let mut out = std::io::stdout().lock();
    let text = if args.json {
        roost_catalog::records_json(&records)
    } else {
        table(&records, roost_catalog::unix_now())
    };
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    ExitCode::SUCCESS
}

/// Where a catalog record's server listens: `address:port` (IPv6 in brackets), else its
/// address or name.
pub(crate) fn record_host(r: &Value) -> String {
    let port = r.get("port").and_then(Value::as_i64);
    match (r.get("address").and_then(Value::as_str), port) {
        (Some(a), Some(p)) if a.contains(':') => format!("[{a}]:{p}"),
        (Some(a), Some(p)) => format!("{a}:{p}"),
        (Some(a), None) => a.to_string(),
        (None, _) => r
            .get("name")
            .map(Value::to_plain)
            .unwrap_or_else(|| "-".into()),
    }
}

/// Bytes in binary units: 512, 1.5K, 20G.
pub(crate) fn human(bytes: Option<i64>) -> String {
    let Some(b) = bytes.filter(|&b| b >= 0) else {
        return "-".into();
    };
    let mut v = b as f64;
    for unit in ["", "K", "M", "G", "T", "P"] {
        if v < 1024.0 || unit == "P" {
            return if unit.is_empty() {
                format!("{b}")
            } else if v < 10.0 {
                format!("{v:.1}{unit}")
            } else {
                format!("{v:.0}{unit}")
            };
        }
        v /= 1024.0;
    }
    unreachable!()
}

fn ago(seconds: Option<i64>) -> String {
    match seconds {
        None => "-".into(),
        Some(s) if s < 0 => "now".into(),
        Some(s) if s < 120 => format!("{s}s ago"),
        Some(s) if s < 7200 => format!("{}m ago", s / 60),
        Some(s) if s < 172_800 => format!("{}h ago", s / 3600),
        Some(s) => format!("{}d ago", s / 86_400),
    }
}

/// The pool as a table, one server a line.
fn table(records: &[Value], now: i64) -> String {
    let header = [
        "HOST",
        "NAME",
        "OWNER",
        "STATE",
        "SIGNED",
        "LOAD",
        "CPUS",
        "DISK FREE",
        "MEMORY",
        "SEEN",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in records {
        let text = |k: &str| r.get(k).map(Value::to_plain).unwrap_or_else(|| "-".into());
        let int = |k: &str| r.get(k).and_then(Value::as_i64);
        let host = record_host(r);
        let load = r
            .get("load1")
            .and_then(Value::as_f64)
            .map(|l| format!("{l:.2}"))
            .unwrap_or_else(|| "-".into());
        let seen = int("age").or_else(|| int("lastheardfrom").map(|t| now - t));
        rows.push(vec![
            host,
            text("name"),
            text("owner"),
            // cctools' catalog has no state: it drops servers instead.
            r.get("state")
                .map(Value::to_plain)
                .unwrap_or_else(|| "up".into()),
            signed(r),
            load,
            text("cpus"),
            format!("{}/{}", human(int("avail")), human(int("total"))),
            format!(
                "{}/{}",
                human(int("memory_avail")),
                human(int("memory_total"))
            ),
            ago(seen),
        ]);
    }
    columns(rows)
}

/// What the catalog says of a record's signature, for the table: the key it is signed with,
/// `no` when the catalog checked and it is not, `-` when the catalog does not say (cctools').
fn signed(r: &Value) -> String {
    match r.get(roost_catalog::signed::VERIFIED) {
        Some(Value::Bool(true)) => r
            .get(roost_catalog::signed::SIGNED_BY)
            .and_then(Value::as_str)
            .unwrap_or("yes")
            .to_string(),
        Some(Value::Bool(false)) => "no".into(),
        _ => "-".into(),
    }
}

/// Rows of cells as lined-up columns, two spaces apart; the first row is the header.
pub(crate) fn columns(rows: Vec<Vec<String>>) -> String {
    let count = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..count)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |cell| cell.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ages() {
        assert_eq!(human(Some(512)), "512");
        assert_eq!(human(Some(1536)), "1.5K");
        assert_eq!(human(Some(20 << 30)), "20G");
        assert_eq!(human(None), "-");
        assert_eq!(ago(Some(5)), "5s ago");
        assert_eq!(ago(Some(600)), "10m ago");
    }

    #[test]
    fn a_table_lines_up() {
        let r = roost_catalog::json::parse(
            br#"{"type":"chirp","name":"h","address":"127.0.0.1","port":9094,"owner":"u",
                 "state":"down","load1":0.5,"cpus":2,"avail":1024,"total":2048,"age":3}"#,
        )
        .unwrap();
        let t = table(&[r], 0);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("HOST"));
        assert!(lines[1].starts_with("127.0.0.1:9094"), "{t}");
        assert!(
            lines[1].contains("down") && lines[1].contains("1.0K/2.0K"),
            "{t}"
        );
    }
}

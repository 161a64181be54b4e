//! Reporting to pool catalogs (`roost serve --catalog HOST[:PORT]`): a thread sends, every
//! interval, one UDP datagram to each catalog describing this server, as a JSON object in the
//! format cctools' chirp_server sends (so cctools' catalog_server and chirp_status understand
//! it too), plus roost's `interval`, which lets the catalog tell when reports stop. With a
//! catalog key (`--catalog-key NAME=FILE`) each report is signed ([`roost_catalog::signed`])
//! for the address it is sent from, so a catalog holding the key can tell it from a forgery.

use roost_catalog::json::Value;
use roost_catalog::keys::Key;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use crate::log::{self, Level};

/// What to report and where.
#[derive(Clone, Debug)]
pub struct ReportConfig {
    /// Catalogs as `(host, port)`.
    pub catalogs: Vec<(String, u16)>,
    pub interval: Duration,
    /// Where the server listens: its port is reported, and a specific address is also the
    /// source of the datagrams, so the catalog records the address clients should use.
    pub listen: SocketAddr,
    /// The exported directory, whose file system's size is reported.
    pub export: PathBuf,
    /// The host's owner (`roost serve --owner`, default the server's unix user).
    pub owner: String,
    /// Set when the server runs jobs.
    pub jobs: Option<JobsReport>,
    /// The key reports are signed with (`--catalog-key`); `None`: unsigned, as cctools'.
    pub key: Option<Key>,
}

/// What a server running jobs adds to its reports, for `roost pool run` to choose hosts by:
/// `jobs` (how many it runs at once) and, from its thermostat's `thermostat.now`,
/// `thermostat_cpu` (percent of the machine guests may use now), `thermostat_mem` (bytes,
/// when limited) and `thermostat_mechanism`.
#[derive(Clone, Debug)]
pub struct JobsReport {
    pub concurrency: usize,
    pub job_dir: PathBuf,
}

/// Starts the reporting thread; the first report goes out at once.
pub fn spawn(config: ReportConfig) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("catalog report".into())
        .spawn(move || run(&config))
}

fn run(config: &ReportConfig) {
    let started = roost_catalog::unix_now();
    let mut failing = vec![false; config.catalogs.len()];
    loop {
        let record = report(config, started);
        // One time for the round: a copy sent to one catalog, replayed to another, is then no
        // newer than the one that catalog had.
        let signing = config
            .key
            .as_ref()
            .map(|key| (key, roost_catalog::signed::now_ms()));
        for (i, (host, port)) in config.catalogs.iter().enumerate() {
            let outcome = send(config.listen.ip(), host, *port, &record, signing);
            match (&outcome, failing[i]) {
                (Err(e), false) => log::event(
                    Level::Error,
                    "catalog",
                    &[("catalog", &format!("{host}:{port}")), ("error", e)],
                ),
                (Ok(()), true) => log::event(
                    Level::Info,
                    "catalog",
                    &[
                        ("catalog", &format!("{host}:{port}")),
                        ("state", &"reaching"),
                    ],
                ),
                _ => {}
            }
            failing[i] = outcome.is_err();
        }
        std::thread::sleep(config.interval);
    }
}

/// Sends `record` in one datagram to `host:port`, from the listening address if it is a
/// specific one; signed with the key of `signing` at its time (Unix ms) for the address it
/// goes out from (the one the catalog sees, which the kernel chooses by its routes when the
/// server listens on every address).
fn send(
    listen: IpAddr,
    host: &str,
    port: u16,
    record: &Value,
    signing: Option<(&Key, i64)>,
) -> Result<(), String> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    let mut last = format!("{host} has no address");
    for addr in addrs {
        let local = if !listen.is_unspecified() && listen.is_ipv4() == addr.is_ipv4() {
            SocketAddr::new(listen, 0)
        } else if addr.is_ipv4() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            SocketAddr::from(([0u16; 8], 0))
        };
        let sent = UdpSocket::bind(local).and_then(|socket| {
            socket.connect(addr)?;
            let text = match signing {
                Some((key, at_ms)) => {
                    let from = socket.local_addr()?.ip();
                    roost_catalog::signed::seal(record, key, from, at_ms)
                }
                None => record.to_json(),
            };
            socket.send(text.as_bytes())
        });
        match sent {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("{addr}: {e}"),
        }
    }
    Err(last)
}

/// This server's report now.
pub fn report(config: &ReportConfig, started: i64) -> Value {
    let name = host_name();
    let port = config.listen.port();
    let (total, avail) = disk(&config.export);
    let (mem_total, mem_avail) = memory();
    let load = load_average();
    let (sysname, release) = uname();
    // SAFETY: a plain query.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1);
    let s = |v: &str| Value::String(v.to_string());
    let i = |v: u64| Value::Int(i64::try_from(v).unwrap_or(i64::MAX));
    let mut value = Value::Object(vec![
        ("type".into(), s("chirp")),
        ("name".into(), s(&name)),
        ("port".into(), Value::Int(port.into())),
        ("owner".into(), s(&config.owner)),
        ("url".into(), s(&format!("chirp://{name}:{port}"))),
        ("total".into(), i(total)),
        ("avail".into(), i(avail)),
        ("cpus".into(), Value::Int(cpus as i64)),
        ("load1".into(), Value::Float(load[0])),
        ("load5".into(), Value::Float(load[1])),
        ("load15".into(), Value::Float(load[2])),
        ("memory_total".into(), i(mem_total)),
        ("memory_avail".into(), i(mem_avail)),
        ("cpu".into(), s(std::env::consts::ARCH)),
        ("opsys".into(), s(&sysname)),
        ("opsysversion".into(), s(&release)),
        ("starttime".into(), Value::Int(started)),
        ("version".into(), s(env!("CARGO_PKG_VERSION"))),
        ("software".into(), s("roost")),
        ("interval".into(), i(config.interval.as_secs().max(1))),
    ]);
    if let (Some(jobs), Value::Object(members)) = (&config.jobs, &mut value) {
        members.push(("jobs".into(), i(jobs.concurrency as u64)));
        if let Some((mechanism, limits)) = crate::thermostat::control::read_now(&jobs.job_dir) {
            members.push(("thermostat_cpu".into(), i(limits.cpu_percent.into())));
            if let Some(mem) = limits.mem_bytes {
                members.push(("thermostat_mem".into(), i(mem)));
            }
            members.push(("thermostat_mechanism".into(), s(&mechanism)));
            if let Some(holder) = crate::thermostat::control::read_memory_holder(&jobs.job_dir) {
                members.push(("thermostat_mem_by".into(), s(&holder)));
            }
        }
    }
    value
}

/// This host's name (`localhost` if it has none).
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; the name is cut at the first NUL below.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Total and available bytes of the file system holding `dir` (zeros if it cannot be read).
fn disk(dir: &std::path::Path) -> (u64, u64) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return (0, 0);
    };
    // SAFETY: `struct statvfs` is plain data, valid all zeros.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a writable `struct statvfs`.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return (0, 0);
    }
    let unit = st.f_frsize as u64;
    (
        (st.f_blocks as u64).saturating_mul(unit),
        (st.f_bavail as u64).saturating_mul(unit),
    )
}

/// Total and available memory in bytes, from /proc/meminfo.
fn memory() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    let total = field("MemTotal:").unwrap_or(0);
    let avail = field("MemAvailable:")
        .or_else(|| field("MemFree:"))
        .unwrap_or(0);
    (total, avail)
}

fn load_average() -> [f64; 3] {
    let mut avg = [0f64; 3];
    // SAFETY: `avg` holds the three doubles asked for.
    if unsafe { libc::getloadavg(avg.as_mut_ptr(), 3) } != 3 {
        return [0.0; 3];
    }
    avg.map(|v| (v * 100.0).round() / 100.0)
}

fn uname() -> (String, String) {
    // SAFETY: `struct utsname` is plain data, valid all zeros.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a writable `struct utsname`.
    if unsafe { libc::uname(&mut u) } != 0 {
        return ("linux".into(), String::new());
    }
    let text = |field: &[libc::c_char]| {
        let bytes: Vec<u8> = field
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).to_lowercase()
    };
    (text(&u.sysname), text(&u.release))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_parses_as_an_update() {
        let dir = std::env::temp_dir();
        let config = ReportConfig {
            catalogs: vec![],
            interval: Duration::from_secs(2),
            listen: "127.0.0.1:9094".parse().unwrap(),
            export: dir.clone(),
            jobs: None,
            owner: "alice".into(),
            key: None,
        };
        let text = report(&config, 7).to_json();
        assert!(text.len() < 1200, "fits one datagram uncompressed: {text}");
        let v = roost_catalog::update::parse_update(text.as_bytes()).unwrap();
        assert_eq!(v.get("type").unwrap().as_str(), Some("chirp"));
        assert_eq!(v.get("port"), Some(&Value::Int(9094)));
        assert_eq!(v.get("interval"), Some(&Value::Int(2)));
        assert!(v.get("total").unwrap().as_i64().unwrap() > 0);
        assert!(v.get("memory_total").unwrap().as_i64().unwrap() > 0);
        assert!(v.get("cpus").unwrap().as_i64().unwrap() >= 1);
        assert_eq!(v.get("jobs"), None);
    }

    #[test]
    fn a_server_with_jobs_reports_them_and_its_thermostat() {
        let job_dir = std::env::temp_dir().join(format!("roost-report-{}", std::process::id()));
        std::fs::create_dir_all(&job_dir).unwrap();
        let config = ReportConfig {
            catalogs: vec![],
            interval: Duration::from_secs(2),
            listen: "127.0.0.1:9094".parse().unwrap(),
            export: std::env::temp_dir(),
            jobs: Some(JobsReport {
                concurrency: 3,
                job_dir: job_dir.clone(),
            }),
            owner: "alice".into(),
            key: None,
        };
        let v = report(&config, 7);
        assert_eq!(v.get("jobs"), Some(&Value::Int(3)));
        assert_eq!(v.get("thermostat_cpu"), None, "no thermostat, nothing said");
        std::fs::write(
            job_dir.join(crate::thermostat::control::NOW_FILE),
            "mechanism cgroup1\nlimits cpu 15% mem 1G\nsource override\n",
        )
        .unwrap();
        let v = report(&config, 7);
        assert_eq!(v.get("thermostat_cpu"), Some(&Value::Int(15)));
        assert_eq!(v.get("thermostat_mem"), Some(&Value::Int(1 << 30)));
        assert_eq!(
            v.get("thermostat_mechanism").unwrap().as_str(),
            Some("cgroup1")
        );
        std::fs::remove_dir_all(&job_dir).unwrap();
    }
}

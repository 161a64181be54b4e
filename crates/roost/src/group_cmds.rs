//! The group tools: `roost pgrep` (each distinct matching line once, with its member set),
//! `roost ptail` (follow a group of logs, folding identical lines), `roost pcp` (a file
//! multicast to every member by group writes), `roost psync` (only the differences, by
//! rsync's algorithm per distinct content) and `roost ptop` (processes across hosts, grouped
//! by command), over a group directory or `--hosts FILE PATH`,
//! flat or through a relay tree (`docs/group.md`).

mod summary;

use crate::group_catalog;
use crate::members::Members;
use crate::remote::{options, ConnectArgs, Failure};
use clap::{Args, Subcommand};
use roost_catalog::json::Value;
use roost_client::{ChirpUrl, ErrorCode};
use roost_group::aggregate::{DataAggr, StatusAggr};
use roost_group::api::{
    gopen_members, merge_line_classes, read_group_dir, FileOp, Group, GroupData, GroupError,
    GroupOptions, MemberSpec, Outcome, O_BESTEFFORT, O_REPLACE,
};
use roost_group::hostset;
use roost_group::lines::{LineSpec, Pattern};
use roost_group::message::Whence;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Where the members are and how to reach them; shared by the group tools.
#[derive(Args)]
pub struct GroupArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Send the group to this root relay (HOST:PORT) and let the servers relay; the leaves
    /// see you only through an hmac key (--key), delegated for the group.
    #[arg(long, value_name = "HOST:PORT")]
    relay: Option<String>,
    /// Most children of each relay.
    #[arg(long, default_value_t = 32, value_name = "N")]
    fanout: u32,
    /// A file of host[:port] lines (# comments): the members are TARGET on each host,
    /// instead of the links of a group directory.
    #[arg(long, value_name = "FILE")]
    hosts: Option<PathBuf>,
    /// Ask this catalog (HOST[:PORT], repeatable: the first that answers) which servers are
    /// down: members on them are skipped at once, named on standard error, and never relay.
    #[arg(long = "catalog", short = 'c', value_name = "HOST[:PORT]")]
    catalogs: Vec<String>,
}

/// The group tools.
#[derive(Subcommand)]
pub enum GroupCommand {
    /// Search every member of a group; print each distinct matching line once, after the
    /// set of members that have it (node[1-64/3]: line).
    #[command(after_help = "\
Examples:
  roost pgrep -F 'Out of memory' logs/        # logs/: a group directory of links
  roost pgrep --hosts nodes.txt -n 'error|fail' /var/log/syslog
  roost pgrep --json ERROR logs/ | jq -r '.[] | .hosts'")]
    Pgrep {
        #[command(flatten)]
        group: GroupArgs,
        /// The pattern is a fixed string, not a regular expression.
        #[arg(short = 'F', long = "fixed-strings")]
        fixed: bool,
        /// Show line numbers (lines at different numbers are different lines).
        #[arg(short = 'n', long = "line-number")]
        numbers: bool,
        /// Print a JSON array, one object a distinct line: members, hosts, line, text.
        #[arg(long)]
        json: bool,
        /// A regular expression (Rust regex syntax), or with -F a string.
        pattern: String,
        /// A group directory (local or chirp://host:port/dir), or with --hosts the path on
        /// each host.
        target: String,
    },
    /// Follow a group of logs: print lines as they are appended to the members, each
    /// distinct line once with its member set.
    #[command(after_help = "\
Examples:
  roost ptail --strip-syslog logs/
  roost ptail --hosts nodes.txt --interval 500ms --for 10m /var/log/syslog
  roost ptail --json logs/ | jq -r .hosts")]
    Ptail {
        #[command(flatten)]
        group: GroupArgs,
        /// Print each distinct line as one JSON object a line (fields: docs/cli.md).
        #[arg(long)]
        json: bool,
        /// Compare syslog lines without their host name and process id.
        #[arg(long)]
        strip_syslog: bool,
        /// Time between polls (a bare number is milliseconds: 250, 250ms, 2s).
        #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = crate::size::duration_ms)]
        interval: Duration,
        /// Stop after this long (default: follow until interrupted).
        #[arg(long = "for", value_name = "DURATION", value_parser = crate::size::duration)]
        duration: Option<Duration>,
        /// A group directory, or with --hosts the path on each host.
        target: String,
    },
    /// Bring every member up to date with a local file, sending only what differs (rsync's
    /// algorithm, run once for each distinct content among the members); each member is
    /// replaced by a whole new file on its server, or left as it was.
    #[command(after_help = "\
Examples:
  roost psync hosts.conf etc-hosts/
  roost psync --hosts nodes.txt --block-size 4K --json app.conf /etc/app.conf")]
    Psync {
        #[command(flatten)]
        group: GroupArgs,
        /// Print the summary as one JSON object on standard output (fields: docs/cli.md).
        #[arg(long)]
        json: bool,
        /// Block size of the comparison (1K, 4K...).
        #[arg(long, default_value = "1K", value_name = "SIZE", value_parser = crate::size::bytes)]
        block_size: u64,
        /// The local file (at most 16 MiB).
        source: PathBuf,
        /// A group directory, or with --hosts the path on each host.
        target: String,
    },
    /// Show the busiest commands across a group of hosts, refreshed like top: each member is
    /// a host's /proc (served by `roost serve /proc`); processes are grouped by command.
    #[command(after_help = "\
Examples:
  roost ptop --hosts nodes.txt /
  roost ptop --by-user --sort mem --rows 10 --iterations 1 procs/
  roost ptop --json --iterations 2 --hosts nodes.txt / | jq '.rows[0]'")]
    Ptop {
        #[command(flatten)]
        group: GroupArgs,
        /// Print each refresh as one JSON object a line (fields: docs/cli.md).
        #[arg(long)]
        json: bool,
        /// Group by command and user id instead of by command alone.
        #[arg(long)]
        by_user: bool,
        /// Rows to show.
        #[arg(long = "rows", default_value_t = 20, value_name = "N")]
        rows: usize,
        /// Order rows by cpu, mem (total resident memory) or procs.
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "mem", "procs"])]
        sort: String,
        /// Time between refreshes.
        #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = crate::size::duration)]
        interval: Duration,
        /// Stop after this many tables (default: refresh until interrupted).
        #[arg(long, value_name = "N")]
        iterations: Option<u64>,
        /// A group directory, or with --hosts the path on each host (usually /).
        target: String,
    },
    /// Copy a local file to every member of a group by group writes; each member is written
    /// under a temporary name and renamed over the old file only when complete.
    #[command(after_help = "\
Examples:
  roost pcp input.tar copies/
  roost pcp --hosts nodes.txt --relay node1:9094 --key me=me.key --json input.tar /scratch/input.tar")]
    Pcp {
        #[command(flatten)]
        group: GroupArgs,
        /// Print the summary as one JSON object on standard output (fields: docs/cli.md).
        #[arg(long)]
        json: bool,
        /// The local file to copy.
        source: PathBuf,
        /// A group directory, or with --hosts the path on each host.
        target: String,
    },
}

/// Bytes each member reads in one group read.
const READ_BLOCK: u64 = 16 * 1024 * 1024;

/// Bytes sent in one group write.
const WRITE_BLOCK: usize = 1024 * 1024;

pub fn main(command: GroupCommand) -> ExitCode {
    let result = match command {
        GroupCommand::Pgrep {
            group,
            fixed,
            numbers,
            json,
            pattern,
            target,
        } => pgrep(&group, fixed, numbers, json, &pattern, &target),
        GroupCommand::Pcp {
            group,
            json,
            source,
            target,
        } => pcp(&group, json, &source, &target),
        GroupCommand::Psync {
            group,
            json,
            block_size,
            source,
            target,
        } => psync(&group, json, block_size, &source, &target),
        GroupCommand::Ptop {
            group,
            json,
            by_user,
            rows,
            sort,
            interval,
            iterations,
            target,
        } => ptop(
            &group,
            &TopView {
                json,
                by_user,
                rows,
                sort,
                interval: interval.max(Duration::from_millis(50)),
            },
            iterations,
            &target,
        ),
        GroupCommand::Ptail {
            group,
            json,
            strip_syslog,
            interval,
            duration,
            target,
        } => ptail(&group, (json, strip_syslog), interval, duration, &target),
    };
    match result {
        Ok(code) => code,
        Err(Failure(message)) => {
            eprintln!("roost: {message}");
            ExitCode::from(2)
        }
    }
}

fn group_options(args: &GroupArgs) -> Result<GroupOptions, Failure> {
    Ok(GroupOptions {
        connect: options(&args.connect)?,
        relay: args.relay.clone(),
        fanout: args.fanout.max(1),
        timeout: args.connect.timeout.max(Duration::from_secs(1)),
        ..GroupOptions::default()
    })
}

/// The members named by `--hosts FILE` and a path on each host.
fn hosts_members(file: &PathBuf, path: &str) -> Result<Vec<MemberSpec>, Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure(format!("--hosts {}: {e}", file.display())))?;
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|host| {
            let url = ChirpUrl::parse(&format!("chirp://{host}{path}"))
                .map_err(|e| Failure(format!("--hosts {}: {host}: {e}", file.display())))?;
            Ok(MemberSpec {
                name: host.to_string(),
                url,
            })
        })
        .collect()
}

/// Opens the group best effort, reporting members that did not open; with `--catalog`,
/// without the members on servers it shows down. Returns the group, how many members were
/// left out that way, and the members' locations for messages.
fn open(
    args: &GroupArgs,
    target: &str,
    flags: i32,
    mode: u32,
) -> Result<(Group, usize, Members), Failure> {
    let opened = open_some(args, target, flags, mode, false)?;
    let group = opened
        .group
        .ok_or_else(|| Failure(format!("{target}: no member could be opened")))?;
    Ok((group, opened.skipped, opened.why))
}

/// What [`open_some`] opened.
struct Opened {
    /// `None` when no member opened (and some were missing).
    group: Option<Group>,
    /// Members left out as down in the catalog.
    skipped: usize,
    why: Members,
    /// Members without the file (when asked for): not reported, not in the group.
    missing: Vec<MemberSpec>,
    /// Members that did not open for another reason (reported).
    refused: Vec<String>,
    options: GroupOptions,
}

/// [`open`], and with `missing_ok`, members that fail because their file does not exist are
/// neither reported nor an error: they are returned, for psync to create.
fn open_some(
    args: &GroupArgs,
    target: &str,
    flags: i32,
    mode: u32,
    missing_ok: bool,
) -> Result<Opened, Failure> {
    let options = group_options(args)?;
    if options.relay.is_some() && options.connect.credentials.hmac_key.is_none() {
        eprintln!(
            "roost: note: without an hmac key (--key or ROOST_HMAC_KEY) relays cannot act for \
             you; only members on the root relay itself can be reached"
        );
    }
    let flags = flags | O_BESTEFFORT;
    let mut members = match &args.hosts {
        Some(file) => hosts_members(file, target)?,
        // The error names the directory.
        None => read_group_dir(target, &options.connect).map_err(|e| Failure(e.to_string()))?,
    };
    let mut skipped = 0;
    if let Some(servers) = group_catalog::ask(&args.catalogs, options.timeout)? {
        if let Some(relay) = &options.relay {
            group_catalog::check_relay(&servers, relay)?;
        }
        (members, skipped) = group_catalog::skip_down(&servers, members);
        if members.is_empty() {
            return Err(Failure(format!(
                "{target}: every member's server is down in the catalog"
            )));
        }
    }
    let why = Members::new(&members, &options.connect);
    let is_missing = |code: &ErrorCode| missing_ok && *code == ErrorCode::DoesntExist;
    let (group, failures) = match gopen_members(members.clone(), flags, mode, &options) {
        Ok(group) => {
            let failures = group.open_failures().to_vec();
            (Some(group), failures)
        }
        Err(GroupError::Group { failed, .. }) if failed.iter().any(|(_, c)| is_missing(c)) => {
            (None, failed)
        }
        Err(e) => return Err(why.open_failure(target, e)),
    };
    let (missing, refused): (Vec<_>, Vec<_>) =
        failures.into_iter().partition(|(_, c)| is_missing(c));
    report_open_failures(&why, &refused);
    let missing: BTreeSet<String> = missing.into_iter().map(|(name, _)| name).collect();
    Ok(Opened {
        group,
        skipped,
        why,
        missing: members
            .into_iter()
            .filter(|m| missing.contains(&m.name))
            .collect(),
        refused: refused.into_iter().map(|(name, _)| name).collect(),
        options,
    })
}

/// Names on standard error each member that did not open, with the cause and the fix.
fn report_open_failures(why: &Members, failures: &[(String, ErrorCode)]) {
    why.prepare(failures.iter().map(|(n, c)| (n.as_str(), *c)));
    for (name, code) in failures {
        eprintln!("roost: {}", why.describe(name, *code));
    }
}

/// Reports members that failed (by their status of the last operation).
fn report_failures(group: &mut Group, why: &Members, failed: &BTreeSet<usize>) {
    let statuses = group.gstatus().unwrap_or_default();
    let codes: Vec<(&str, ErrorCode)> = failed
        .iter()
        .map(|&i| {
            let code = match statuses.get(i) {
                Some(Err(errno)) => ErrorCode::from_errno(*errno),
                _ => ErrorCode::Disconnected,
            };
            (group.gfiles()[i].as_str(), code)
        })
        .collect();
    why.prepare(codes.iter().copied());
    for (name, code) in codes {
        eprintln!("roost: {}", why.describe(name, code));
    }
}

/// Reports the members in `failed` not reported before, and remembers them.
fn report_new_failures(
    group: &mut Group,
    why: &Members,
    failed: &[usize],
    reported: &mut BTreeSet<usize>,
) {
    let new: BTreeSet<usize> = failed
        .iter()
        .copied()
        .filter(|i| !reported.contains(i))
        .collect();
    if !new.is_empty() {
        report_failures(group, why, &new);
        reported.extend(new);
    }
}

/// An operation's outcome whether or not some member failed (best effort lists them).
fn outcome_of(result: Result<Outcome, GroupError>) -> Result<Outcome, Failure> {
    match result {
        Ok(o) => Ok(o),
        Err(GroupError::Group {
            outcome: Some(o), ..
        }) => Ok(*o),
        Err(e) => Err(Failure(e.to_string())),
    }
}

fn pgrep(
    args: &GroupArgs,
    fixed: bool,
    numbers: bool,
    json: bool,
    pattern: &str,
    target: &str,
) -> Result<ExitCode, Failure> {
    let pattern = if fixed {
        Pattern::Fixed(pattern.to_string())
    } else {
        Pattern::regex(pattern).map_err(|e| Failure(format!("bad pattern: {e}")))?
    };
    let (mut group, skipped, why) = open(args, target, libc::O_RDONLY, 0)?;
    let spec = LineSpec {
        pattern,
        numbers,
        strip_syslog: false,
        complete_lines: false,
    };
    group.gbindaggr(
        FileOp::Read,
        Some(StatusAggr::Sum),
        Some(DataAggr::Lines(spec)),
    );
    let mut classes = BTreeMap::new();
    let mut failed = BTreeSet::new();
    loop {
        let out = outcome_of(group.read(READ_BLOCK))?;
        failed.extend(out.failed.iter().copied());
        if let GroupData::Lines(found) = out.data {
            merge_line_classes(&mut classes, found);
        }
        if out.status.unwrap_or(0) == 0 {
            break;
        }
    }
    if !failed.is_empty() {
        report_failures(&mut group, &why, &failed);
    }
    let mut stdout = std::io::stdout().lock();
    if json {
        let values: Vec<Value> = classes
            .iter()
            .map(|((number, text), members)| {
                summary::line_class(&group, members, numbers.then_some(*number), text)
            })
            .collect();
        let _ = stdout.write_all(roost_catalog::records_json(&values).as_bytes());
    } else {
        for ((number, text), members) in &classes {
            let number = if numbers { Some(*number) } else { None };
            if print_class(&mut stdout, &group, members, number, text).is_err() {
                break;
            }
        }
    }
    drop(stdout);
    let _ = group.close();
    let errors = !failed.is_empty() || !group.open_failures().is_empty() || skipped > 0;
    Ok(ExitCode::from(match (errors, classes.is_empty()) {
        (true, _) => 2,
        (false, false) => 0,
        (false, true) => 1,
    }))
}

/// Prints one line class: `MEMBERS[:NUMBER]: TEXT`.
fn print_class(
    out: &mut impl Write,
    group: &Group,
    members: &[usize],
    number: Option<u64>,
    text: &[u8],
) -> std::io::Result<()> {
    let names: Vec<&str> = members
        .iter()
        .map(|&i| group.gfiles()[i].as_str())
        .collect();
    let mut line = hostset::format(&names).into_bytes();
    if let Some(n) = number {
        line.extend_from_slice(format!(":{n}").as_bytes());
    }
    line.extend_from_slice(b": ");
    line.extend_from_slice(text);
    line.push(b'\n');
    out.write_all(&line)
}

/// Follows the members from their current ends: every poll reads what was appended (complete
/// lines only: a line still being written waits for a later poll) and prints its classes, in text order (for syslog lines, which begin
/// with their time, that is time order).
fn ptail(
    args: &GroupArgs,
    (json, strip_syslog): (bool, bool),
    interval: Duration,
    duration: Option<Duration>,
    target: &str,
) -> Result<ExitCode, Failure> {
    let (mut group, _, why) = open(args, target, libc::O_RDONLY, 0)?;
    let spec = LineSpec {
        pattern: Pattern::All,
        numbers: false,
        strip_syslog,
        complete_lines: true,
    };
    group.gbindaggr(
        FileOp::Read,
        Some(StatusAggr::Sum),
        Some(DataAggr::Lines(spec)),
    );
    group.gbindaggr(FileOp::Lseek, Some(StatusAggr::Max), None);
    outcome_of(group.lseek(0, Whence::End))?;
    let until = duration.map(|d| std::time::Instant::now() + d);
    let mut reported = BTreeSet::new();
    let mut stdout = std::io::stdout().lock();
    loop {
        let out = outcome_of(group.read(READ_BLOCK))?;
        report_new_failures(&mut group, &why, &out.failed, &mut reported);
        if let GroupData::Lines(classes) = out.data {
            for c in classes {
                if json {
                    let v = summary::line_class(&group, &c.members, None, &c.text);
                    writeln!(stdout, "{}", v.to_json())
                } else {
                    print_class(&mut stdout, &group, &c.members, None, &c.text)
                }
                .map_err(|e| Failure(format!("standard output: {e}")))?;
            }
            stdout
                .flush()
                .map_err(|e| Failure(format!("standard output: {e}")))?;
        }
        let expired = until.is_some_and(|t| std::time::Instant::now() >= t);
        if expired || reported.len() == group.gsize() {
            break;
        }
        // A read that returned data may have left more behind: poll again at once.
        if out.status.unwrap_or(0) == 0 {
            std::thread::sleep(interval.max(Duration::from_millis(10)));
        }
    }
    drop(stdout);
    let _ = group.close();
    Ok(if reported.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Updates members to `source`: one signature read groups the members that hold a file by
/// content, then each content gets the patch that turns it into the source; members without
/// the file get it whole, as pcp writes it. Either way a member is replaced by a complete
/// new file on its server, or left as it was.
fn psync(
    args: &GroupArgs,
    json: bool,
    block_size: u64,
    source: &PathBuf,
    target: &str,
) -> Result<ExitCode, Failure> {
    if !(64..=1 << 20).contains(&block_size) {
        return Err(Failure(format!(
            "--block-size {block_size}: expected 64 bytes to 1M"
        )));
    }
    let data = std::fs::read(source).map_err(|e| Failure(format!("{}: {e}", source.display())))?;
    if data.len() as u64 > roost_wire::MAX_BLOCK {
        return Err(Failure(format!(
            "{}: psync handles files up to 16 MiB",
            source.display()
        )));
    }
    let mode = std::fs::metadata(source)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
        .unwrap_or(0o644);
    let mut opened = open_some(args, target, libc::O_RDWR, 0, true)?;
    let existing = opened.group.take();
    let why = &opened.why;
    let mut failed: BTreeSet<String> = opened.refused.iter().cloned().collect();
    let mut patched = Patched::default();
    if let Some(mut group) = existing {
        patched = patch_all(&mut group, &data, block_size as u32, target)?;
        if !patched.failed.is_empty() {
            report_failures(&mut group, why, &patched.failed);
        }
        failed.extend(patched.failed.iter().map(|&i| group.gfiles()[i].clone()));
        let _ = group.close();
    }
    let mut created = 0;
    if !opened.missing.is_empty() {
        let flags = REPLACE_FLAGS | O_BESTEFFORT;
        let mut group = match gopen_members(opened.missing.clone(), flags, mode, &opened.options) {
            Ok(group) => group,
            Err(GroupError::Group { failed: none, .. }) => {
                report_open_failures(why, &none);
                failed.extend(none.into_iter().map(|(name, _)| name));
                return psync_summary(json, &opened, &patched, (&failed, 0), &data);
            }
            Err(e) => return Err(Failure(format!("{target}: {e}"))),
        };
        report_open_failures(why, group.open_failures());
        failed.extend(group.open_failures().iter().map(|(name, _)| name.clone()));
        let mut progress = crate::progress::Progress::new("psync", Some(data.len() as u64));
        let (sent, bad) = write_whole(&mut group, &mut data.as_slice(), source, &mut progress)?;
        if !bad.is_empty() {
            report_failures(&mut group, why, &bad);
        }
        failed.extend(bad.iter().map(|&i| group.gfiles()[i].clone()));
        created = group.gsize() - bad.len();
        patched.sent += sent as usize;
        let _ = group.close();
    }
    psync_summary(json, &opened, &patched, (&failed, created), &data)
}

/// What [`patch_all`] did.
#[derive(Default)]
struct Patched {
    /// Distinct contents among the members.
    contents: usize,
    /// Members already equal to the source.
    current: usize,
    /// Bytes of patches sent.
    sent: usize,
    /// Members that failed (group indices).
    failed: BTreeSet<usize>,
}

/// Brings every member of `group` (each holding a file) up to date with `data`.
fn patch_all(
    group: &mut Group,
    data: &[u8],
    block_size: u32,
    target: &str,
) -> Result<Patched, Failure> {
    group.gbindaggr(FileOp::Lseek, Some(StatusAggr::Max), None);
    let largest = outcome_of(group.lseek(0, Whence::End))?.status.unwrap_or(0);
    if largest as u64 > roost_wire::MAX_BLOCK {
        return Err(Failure(format!(
            "{target}: psync handles files up to 16 MiB"
        )));
    }
    let out = outcome_of(group.signatures(block_size))?;
    let mut done = Patched {
        failed: out.failed.iter().copied().collect(),
        ..Patched::default()
    };
    let GroupData::Signatures(contents) = out.data else {
        return Err(Failure("no signatures in the reply".into()));
    };
    done.contents = contents.len();
    for (signature, members) in &contents {
        if *signature == roost_group::blocks::Signature::of(data, signature.block_size) {
            done.current += members.len();
            continue;
        }
        let pieces = roost_group::blocks::delta(data, signature);
        done.sent += roost_group::blocks::cost(&pieces);
        let out = outcome_of(group.patch(members, signature.block_size, pieces))?;
        done.failed.extend(out.failed.iter().copied());
    }
    Ok(done)
}

/// psync's summary (on standard error, or as JSON on standard output) and exit status;
/// `failed` names the members that failed, of which `created` got the file whole.
fn psync_summary(
    json: bool,
    opened: &Opened,
    patched: &Patched,
    (failed, created): (&BTreeSet<String>, usize),
    data: &[u8],
) -> Result<ExitCode, Failure> {
    let names = opened.why.names();
    if json {
        let ok = names.iter().filter(|n| !failed.contains(*n)).cloned();
        let mut v = summary::named(ok, failed.iter().cloned(), names.len(), opened.skipped);
        v.set("contents", Value::Int(patched.contents as i64));
        v.set("current", Value::Int(patched.current as i64));
        v.set("created", Value::Int(created as i64));
        v.set("sent_bytes", Value::Int(patched.sent as i64));
        v.set("file_bytes", Value::Int(data.len() as i64));
        println!("{}", v.to_json());
    } else {
        eprintln!(
            "roost psync: {} members, {} distinct contents, {} already current, {created} \
             created; sent {} bytes for a {}-byte file",
            names.len() + opened.skipped,
            patched.contents,
            patched.current,
            patched.sent,
            data.len()
        );
    }
    Ok(if failed.is_empty() && opened.skipped == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// How ptop shows its table.
struct TopView {
    /// One JSON object a refresh instead of the table.
    json: bool,
    by_user: bool,
    rows: usize,
    sort: String,
    interval: Duration,
}

/// Refreshes a table of the busiest commands: each refresh is one group operation whose
/// process tables are merged in the tree; CPU use is the growth of each group's CPU time
/// since the previous refresh (clock ticks of this host's length).
fn ptop(
    args: &GroupArgs,
    view: &TopView,
    iterations: Option<u64>,
    target: &str,
) -> Result<ExitCode, Failure> {
    let (mut group, _, why) = open(args, target, libc::O_RDONLY, 0)?;
    let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let clear = !view.json && unsafe { libc::isatty(1) } == 1;
    let mut previous: BTreeMap<(String, Option<u32>), (u64, std::time::Instant)> = BTreeMap::new();
    let mut reported = BTreeSet::new();
    let mut shown = 0u64;
    loop {
        let out = outcome_of(group.proc_table(view.by_user))?;
        let now = std::time::Instant::now();
        report_new_failures(&mut group, &why, &out.failed, &mut reported);
        let GroupData::Procs(table) = out.data else {
            return Err(Failure("no process table in the reply".into()));
        };
        let mut rows: Vec<_> = table
            .iter()
            .map(|r| {
                let key = (r.command.clone(), r.uid);
                let cpu = previous.get(&key).map(|(ticks, at)| {
                    let seconds = now.duration_since(*at).as_secs_f64().max(1e-3);
                    r.cpu_ticks.saturating_sub(*ticks) as f64 / ticks_per_second / seconds * 100.0
                });
                (r, cpu)
            })
            .collect();
        match view.sort.as_str() {
            "mem" => rows.sort_by_key(|r| std::cmp::Reverse(r.0.rss_kib)),
            "procs" => rows.sort_by_key(|r| std::cmp::Reverse(r.0.processes)),
            _ => rows.sort_by(|a, b| {
                let cpu = |r: &(&roost_group::api::ProcRow, Option<f64>)| r.1.unwrap_or(0.0);
                cpu(b)
                    .total_cmp(&cpu(a))
                    .then(b.0.cpu_ticks.cmp(&a.0.cpu_ticks))
            }),
        }
        let hosts = group.gsize() - reported.len();
        let text = if view.json {
            let shown: Vec<_> = rows.iter().take(view.rows).copied().collect();
            format!(
                "{}\n",
                summary::top(&group, hosts, &table, &shown).to_json()
            )
        } else {
            top_table(&group, hosts, (&table, &rows), view.rows, clear)
        };
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(text.as_bytes())
            .and_then(|_| stdout.flush())
            .map_err(|e| Failure(format!("standard output: {e}")))?;
        previous = table
            .iter()
            .map(|r| ((r.command.clone(), r.uid), (r.cpu_ticks, now)))
            .collect();
        shown += 1;
        if iterations.is_some_and(|n| shown >= n) || reported.len() == group.gsize() {
            break;
        }
        std::thread::sleep(view.interval);
    }
    let _ = group.close();
    Ok(if reported.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A ptop row: the merged process group and its CPU use since the last refresh (percent of
/// one CPU; `None` on the first refresh).
type TopRow<'a> = (&'a roost_group::api::ProcRow, Option<f64>);

/// ptop's table as text: a summary line, a header, then the first `limit` of `rows`
/// (already sorted) of `table`; `clear` starts with the terminal's clear-screen.
fn top_table(
    group: &Group,
    hosts: usize,
    (table, rows): (&[roost_group::api::ProcRow], &[TopRow<'_>]),
    limit: usize,
    clear: bool,
) -> String {
    let mut text = String::new();
    if clear {
        text.push_str("\x1b[H\x1b[2J");
    }
    let processes: u64 = table.iter().map(|r| r.processes).sum();
    text.push_str(&format!(
        "ptop: {hosts} hosts, {processes} processes, {} commands\n",
        table.len()
    ));
    text.push_str(&format!(
        "{:<16} {:>6} {:>6} {:>7} {:>11} {:>9} {:>9}  HOSTS\n",
        "COMMAND", "USER", "PROCS", "CPU%", "RSS-TOTAL", "RSS-AVG", "RSS-MAX"
    ));
    for (r, cpu) in rows.iter().take(limit) {
        let names: Vec<&str> = r
            .members
            .iter()
            .map(|&i| group.gfiles()[i].as_str())
            .collect();
        text.push_str(&format!(
            "{:<16} {:>6} {:>6} {:>7} {:>10}K {:>8}K {:>8}K  {}\n",
            r.command,
            r.uid.map_or("*".to_string(), |u| u.to_string()),
            r.processes,
            cpu.map_or("-".to_string(), |c| format!("{c:.1}")),
            r.rss_kib,
            r.rss_kib / r.processes.max(1),
            r.max_rss_kib,
            hostset::format(&names)
        ));
    }
    text
}

fn pcp(args: &GroupArgs, json: bool, source: &PathBuf, target: &str) -> Result<ExitCode, Failure> {
    let mut file =
        std::fs::File::open(source).map_err(|e| Failure(format!("{}: {e}", source.display())))?;
    let mode = file
        .metadata()
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
        .unwrap_or(0o644);
    let size = file.metadata().map(|m| m.len()).ok();
    let started = std::time::Instant::now();
    let (mut group, skipped, why) = open(args, target, REPLACE_FLAGS, mode)?;
    let mut progress = crate::progress::Progress::new("pcp", size);
    let (sent, failed) = write_whole(&mut group, &mut file, source, &mut progress)?;
    if !failed.is_empty() {
        report_failures(&mut group, &why, &failed);
    }
    // Every member is settled by the commit: a close that fails changes nothing.
    let _ = group.close();
    let open_failed = group.open_failures().len();
    let secs = started.elapsed().as_secs_f64();
    let mut summary = format!(
        "roost pcp: {} members, {sent} bytes each in {secs:.1} s ({:.1} MB/s to each)",
        group.gsize() + open_failed,
        sent as f64 / secs.max(1e-3) / 1e6
    );
    if failed.len() + open_failed + skipped > 0 {
        summary.push_str(&format!(
            "; {open_failed} failed to open, {} failed while writing (they keep their old \
             files), {skipped} skipped (down)",
            failed.len()
        ));
    }
    if json {
        let mut v = summary::members(&group, &failed, skipped);
        v.set("bytes", Value::Int(sent as i64));
        v.set("seconds", Value::Float((secs * 1000.0).round() / 1000.0));
        println!("{}", v.to_json());
    } else {
        eprintln!("{summary}");
    }
    let ok = failed.is_empty() && open_failed == 0 && skipped == 0;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// How pcp (and psync, for members without the file) open a group: each member is replaced
/// whole, under a temporary name on its server until [`write_whole`] commits it.
const REPLACE_FLAGS: i32 = libc::O_WRONLY | libc::O_CREAT | O_REPLACE;

/// Writes all of `source` to every member of `group` (opened with [`REPLACE_FLAGS`]) by
/// group writes of 1 MiB, each sent once per child of each relay, then renames every member
/// that took each write over its old file. Returns the bytes sent and the members that
/// failed (group indices): they keep their old files, and their temporaries are removed.
/// An interruption anywhere (a signal ending this process, an error returned from here)
/// ends the group before the commit, and the servers remove every temporary.
fn write_whole(
    group: &mut Group,
    source: &mut impl Read,
    name: &std::path::Path,
    progress: &mut crate::progress::Progress,
) -> Result<(u64, BTreeSet<usize>), Failure> {
    let mut failed = BTreeSet::new();
    let mut block = vec![0u8; WRITE_BLOCK];
    let mut sent = 0u64;
    loop {
        let n = read_full(source, &mut block)
            .map_err(|e| Failure(format!("{}: {e}", name.display())))?;
        if n == 0 {
            break;
        }
        let out = outcome_of(group.write(&block[..n]))?;
        progress.advance(n as u64);
        sent += n as u64;
        failed.extend(out.failed.iter().copied());
        if failed.len() == group.gsize() {
            break;
        }
    }
    progress.finish();
    if failed.len() < group.gsize() {
        // Members that missed a write refuse the commit themselves: they fail again here.
        let committed = outcome_of(group.commit())?;
        failed.extend(committed.failed.iter().copied());
    }
    Ok((sent, failed))
}

/// Reads until `buf` is full or the source ends.
fn read_full(file: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

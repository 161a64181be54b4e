//! The `--json` forms of the group tools' results (`pgrep`'s and `ptail`'s line classes,
//! `pcp`'s and `psync`'s summaries, `ptop`'s refreshes), with the catalog's JSON writer. Field names are documented in
//! docs/cli.md: add fields, never rename them.

use roost_catalog::json::Value;
use roost_group::api::Group;
use roost_group::hostset;
use std::collections::BTreeSet;

fn names(list: impl IntoIterator<Item = String>) -> Value {
    Value::Array(list.into_iter().map(Value::String).collect())
}

/// A distinct line and the members that have it: `members` (their names), `hosts` (the
/// same folded as text prints it, `node[1-7/3]`), `line` (its number, or null without -n)
/// and `text`.
pub(super) fn line_class(
    group: &Group,
    members: &[usize],
    number: Option<u64>,
    text: &[u8],
) -> Value {
    let list: Vec<&str> = members
        .iter()
        .map(|&i| group.gfiles()[i].as_str())
        .collect();
    Value::Object(vec![
        ("hosts".into(), Value::String(hostset::format(&list))),
        ("members".into(), names(list.iter().map(|n| n.to_string()))),
        (
            "line".into(),
            number.map_or(Value::Null, |n| Value::Int(n as i64)),
        ),
        (
            "text".into(),
            Value::String(String::from_utf8_lossy(text).into_owned()),
        ),
    ])
}

/// Who an operation reached: `members` (every member named, also those that did not
/// open or were skipped as down), `ok` and `failed` (names: `failed` holds the members that
/// did not open and those in `failed`, indexes of the open group), `skipped` (a count).
pub(super) fn members(group: &Group, failed: &BTreeSet<usize>, skipped: usize) -> Value {
    let files = group.gfiles();
    let ok = (0..files.len())
        .filter(|i| !failed.contains(i))
        .map(|i| files[i].clone());
    let bad = failed
        .iter()
        .map(|&i| files[i].clone())
        .chain(group.open_failures().iter().map(|(n, _)| n.clone()));
    let opened = files.len() + group.open_failures().len();
    named(ok, bad, opened, skipped)
}

/// [`members`] from the names: `named` members were tried (not counting `skipped`).
pub(super) fn named(
    ok: impl IntoIterator<Item = String>,
    failed: impl IntoIterator<Item = String>,
    tried: usize,
    skipped: usize,
) -> Value {
    Value::Object(vec![
        ("members".into(), Value::Int((tried + skipped) as i64)),
        ("ok".into(), names(ok)),
        ("failed".into(), names(failed)),
        ("skipped".into(), Value::Int(skipped as i64)),
    ])
}

/// One ptop refresh: `hosts` (members that answered), `processes` and `commands` (in the
/// whole merged table), and `rows`, the rows shown, in order: `command`, `user` (the uid
/// with --by-user, else null), `processes`, `cpu_percent` (percent of one CPU since the
/// previous refresh; null on the first), `rss_total_kib`, `rss_avg_kib`, `rss_max_kib`,
/// `hosts` (folded as text prints it) and `members` (their names).
pub(super) fn top(
    group: &Group,
    hosts: usize,
    table: &[roost_group::api::ProcRow],
    rows: &[(&roost_group::api::ProcRow, Option<f64>)],
) -> Value {
    let row = |(r, cpu): &(&roost_group::api::ProcRow, Option<f64>)| {
        let list: Vec<&str> = r
            .members
            .iter()
            .map(|&i| group.gfiles()[i].as_str())
            .collect();
        Value::Object(vec![
            ("command".into(), Value::String(r.command.clone())),
            (
                "user".into(),
                r.uid.map_or(Value::Null, |u| Value::Int(i64::from(u))),
            ),
            ("processes".into(), Value::Int(r.processes as i64)),
            ("cpu_percent".into(), cpu.map_or(Value::Null, Value::Float)),
            ("rss_total_kib".into(), Value::Int(r.rss_kib as i64)),
            (
                "rss_avg_kib".into(),
                Value::Int((r.rss_kib / r.processes.max(1)) as i64),
            ),
            ("rss_max_kib".into(), Value::Int(r.max_rss_kib as i64)),
            ("hosts".into(), Value::String(hostset::format(&list))),
            ("members".into(), names(list.iter().map(|n| n.to_string()))),
        ])
    };
    let processes: u64 = table.iter().map(|r| r.processes).sum();
    Value::Object(vec![
        ("hosts".into(), Value::Int(hosts as i64)),
        ("processes".into(), Value::Int(processes as i64)),
        ("commands".into(), Value::Int(table.len() as i64)),
        ("rows".into(), Value::Array(rows.iter().map(row).collect())),
    ])
}

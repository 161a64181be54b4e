//! A bag of tasks for `roost pool run` tests (inputs, a staged program, a task file, the
//! outputs it must make) and readers of the run's JSON report; shared by the built-in
//! scheduler's tests and the Slurm ones (their servers: [`JobServer::one_at_a_time`]).
//!
//! [`JobServer::one_at_a_time`]: crate::jobs::JobServer::one_at_a_time

use roost_catalog::json::{self, Value};
use std::path::Path;
use std::process::Output;

pub fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn report(out: &Output) -> Value {
    json::parse(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e:?}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub fn array<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    match v.get(key) {
        Some(Value::Array(items)) => items,
        other => panic!("{key}: {other:?}"),
    }
}

pub fn int(v: &Value, key: &str) -> i64 {
    v.get(key)
        .and_then(Value::as_i64)
        .unwrap_or_else(|| panic!("{key} in {}", v.to_json()))
}

/// Hosts' names in the report, with how many tasks each did.
pub fn done_by_host(report: &Value) -> Vec<(String, i64)> {
    array(report, "hosts")
        .iter()
        .map(|h| (h.get("host").unwrap().to_plain(), int(h, "done")))
        .collect()
}

/// A work directory with `n` inputs, a program, and a task file: task i turns data/i.txt
/// into out/i.txt (upper case, then the task's own line), by the staged program.
pub fn bag(dir: &Path, n: usize, delay: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(
        dir.join("upper.sh"),
        format!("#!/bin/sh\nsleep {delay}\ntr a-z A-Z < \"$1\"\necho \"from $2\"\n"),
    )
    .unwrap();
    let mut tasks = String::from("# outputs : inputs : command\n");
    for i in 0..n {
        std::fs::write(
            dir.join(format!("data/{i}.txt")),
            format!("input number {i}\n"),
        )
        .unwrap();
        tasks.push_str(&format!(
            "out/{i}.txt=result : data/{i}.txt=in upper.sh : sh upper.sh in task{i} > result\n"
        ));
    }
    let file = dir.join("tasks");
    std::fs::write(&file, tasks).unwrap();
    file
}

pub fn check_outputs(dir: &Path, n: usize) {
    for i in 0..n {
        let got = std::fs::read_to_string(dir.join(format!("out/{i}.txt")))
            .unwrap_or_else(|e| panic!("out/{i}.txt: {e}"));
        assert_eq!(got, format!("INPUT NUMBER {i}\nfrom task{i}\n"));
    }
    let mut names: Vec<String> = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = (0..n).map(|i| format!("{i}.txt")).collect();
    want.sort();
    assert_eq!(names, want, "exactly the outputs, no leftovers");
}

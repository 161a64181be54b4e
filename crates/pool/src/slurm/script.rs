//! The batch script of one submission: a `case` on `$SLURM_ARRAY_TASK_ID` picks the task
//! and attempt, a fresh sandbox directory on the node is made, and the task's command runs
//! there under `roost run`, each of its files mounted from the run's server: inputs read
//! from `RUN/in/N`, outputs and standard error written to `RUN/out`, all through the agent.
//! Inside `roost run` the command is timed and its exit code, start, end and node are
//! written to `RUN/status/TASK.ATTEMPT`, the record roost reads when Slurm says it ended.

use std::fmt::Write as _;

/// One array task of a submission.
pub struct Entry<'a> {
    pub task: usize,
    pub attempt: u32,
    /// (path in the sandbox, path on the server).
    pub files: Vec<(&'a str, String)>,
    pub command: &'a str,
}

/// What every array task of the run shares.
pub struct Common<'a> {
    /// The roost program on the nodes.
    pub roost: &'a str,
    /// `HOST:PORT` of the server holding the run's files.
    pub server: &'a str,
    /// The run's directory on it.
    pub run_dir: &'a str,
    /// Options for `roost run` (authentication, cache mode, ...).
    pub run_args: &'a [String],
}

/// `text` as one word for /bin/sh.
pub fn quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,+@%".contains(&b))
    {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The script for `entries`, array index i running `entries[i]`.
pub fn batch(common: &Common, entries: &[Entry]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "#!/bin/sh\n# roost pool run --slurm: {} task{} of the run {} on {}, one per array index.",
        entries.len(),
        if entries.len() == 1 { "" } else { "s" },
        common.run_dir,
        common.server
    );
    let _ = writeln!(
        s,
        "r={}",
        quote(&format!("/chirp/{}{}", common.server, common.run_dir))
    );
    s.push_str("case \"${SLURM_ARRAY_TASK_ID:-}\" in\n");
    for (index, e) in entries.iter().enumerate() {
        let _ = write!(
            s,
            "{index}) t={} a={} c={}\n   set --",
            e.task,
            e.attempt,
            quote(e.command)
        );
        for (sandbox, server) in &e.files {
            let remote = server
                .strip_prefix(common.run_dir)
                .map_or_else(|| quote(server), |rest| format!("\"$r\"{}", quote(rest)));
            let _ = write!(s, " {} {remote}", quote(sandbox));
        }
        s.push_str(" ;;\n");
    }
    s.push_str(
        "*) echo \"roost pool: array index ${SLURM_ARRAY_TASK_ID:-(none)} is none of this run's\" >&2; exit 2 ;;\nesac\n",
    );
    s.push_str(
        r#"sb=$(mktemp -d "${TMPDIR:-/tmp}/roost-pool.XXXXXX") || exit 1
trap 'rm -rf "$sb"' EXIT
n=$#
while [ "$n" -gt 0 ]; do
    mkdir -p "$sb/$(dirname "$1")" || exit 1
    set -- "$@" --mount "$sb/$1=$2"
    shift 2
    n=$((n - 2))
done
cd "$sb" || exit 1
"#,
    );
    let mut run = vec![quote(common.roost), "run".into()];
    run.extend(common.run_args.iter().map(|a| quote(a)));
    let _ = write!(
        s,
        r#"{} "$@" \
    --mount "$sb/.roost.stderr=$r/out/$t.$a.stderr" --mount "$sb/.roost.status=$r/status/$t.$a" \
    -- /bin/sh -c 'start=$(date +%s.%N); /bin/sh -c "$1" 2>.roost.stderr; rc=$?
echo "$rc $start $(date +%s.%N) ${{SLURMD_NODENAME:-$(hostname)}}" >.roost.status; exit $rc' sh "$c"
"#,
        run.join(" ")
    );
    s
}

/// How an array task's command ended, as its status record says.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    pub exit: i32,
    /// Unix seconds.
    pub start: f64,
    pub end: f64,
    pub node: String,
}

/// Reads a status record: `EXIT START END NODE`.
pub fn parse_status(text: &str) -> Option<Status> {
    let mut words = text.split_whitespace();
    let exit = words.next()?.parse().ok()?;
    let start = words.next()?.parse().ok()?;
    let end = words.next()?.parse().ok()?;
    let node = words.next()?.to_string();
    Some(Status {
        exit,
        start,
        end,
        node,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::process::Command;

    #[test]
    fn words_are_quoted_for_the_shell() {
        assert_eq!(quote("in/a.txt"), "in/a.txt");
        assert_eq!(quote("it's here"), r"'it'\''s here'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("$HOME"), "'$HOME'");
    }

    #[test]
    fn status_records_are_read() {
        let s = parse_status("3 1700000000.25 1700000001.5 node7\n").unwrap();
        assert_eq!((s.exit, s.node.as_str()), (3, "node7"));
        assert!((s.end - s.start - 1.25).abs() < 1e-9);
        assert_eq!(parse_status("0 x 1 n"), None);
        assert_eq!(parse_status(""), None);
    }

    /// The script, run by /bin/sh with a stand-in for roost, mounts each file of the task
    /// its index names, in a sandbox, and passes the command whole.
    #[test]
    fn the_script_runs_the_task_its_index_names() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("roost");
        std::fs::write(
            &fake,
            "#!/bin/sh\npwd > \"$OUT\"\nfor a in \"$@\"; do echo \"[$a]\"; done >> \"$OUT\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, PermissionsExt::from_mode(0o755)).unwrap();
        let run_args = ["--auth".to_string(), "address".into()];
        let common = Common {
            roost: fake.to_str().unwrap(),
            server: "10.0.0.7:9094",
            run_dir: "/roost-pool/run 1",
            run_args: &run_args,
        };
        let entries = [
            Entry {
                task: 4,
                attempt: 1,
                files: vec![("x", "/roost-pool/run 1/in/0".into())],
                command: "true",
            },
            Entry {
                task: 7,
                attempt: 2,
                files: vec![
                    ("d/in put", "/roost-pool/run 1/in/3".into()),
                    ("out", "/roost-pool/run 1/out/7.2.0".into()),
                ],
                command: "tr a-z A-Z < 'd/in put' > out; echo \"$HOME\"",
            },
        ];
        let script = batch(&common, &entries);
        let out = dir.path().join("out");
        let status = Command::new("/bin/sh")
            .arg("-c")
            .arg(&script)
            .env("SLURM_ARRAY_TASK_ID", "1")
            .env("TMPDIR", dir.path())
            .env("OUT", &out)
            .status()
            .unwrap();
        assert!(status.success(), "{script}");
        let text = std::fs::read_to_string(&out).unwrap();
        let mut lines = text.lines();
        let sandbox = lines.next().unwrap().to_string();
        assert!(sandbox.starts_with(dir.path().to_str().unwrap()), "{text}");
        let args: Vec<&str> = lines.collect();
        let r = "/chirp/10.0.0.7:9094/roost-pool/run 1";
        let want = [
            "[run]".to_string(),
            "[--auth]".into(),
            "[address]".into(),
            "[--mount]".into(),
            format!("[{sandbox}/d/in put={r}/in/3]"),
            "[--mount]".into(),
            format!("[{sandbox}/out={r}/out/7.2.0]"),
            "[--mount]".into(),
            format!("[{sandbox}/.roost.stderr={r}/out/7.2.stderr]"),
            "[--mount]".into(),
            format!("[{sandbox}/.roost.status={r}/status/7.2]"),
            "[--]".into(),
            "[/bin/sh]".into(),
            "[-c]".into(),
        ];
        assert_eq!(args[..want.len()], want[..], "{text}");
        assert_eq!(args[args.len() - 2], "[sh]");
        assert_eq!(
            args[args.len() - 1],
            "[tr a-z A-Z < 'd/in put' > out; echo \"$HOME\"]"
        );
        assert!(!Path::new(&sandbox).exists(), "the sandbox is removed");
        let status = Command::new("/bin/sh")
            .arg("-c")
            .arg(&script)
            .env("SLURM_ARRAY_TASK_ID", "2")
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(2), "an index of no task");
    }
}

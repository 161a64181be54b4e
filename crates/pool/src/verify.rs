//! Checking results by running them twice (`roost pool run --verify FRACTION`), BOINC's
//! quorum of two: a random sample of the tasks gets a check task each, a copy that the
//! scheduler runs only once the task is done, and only on another host than the one whose
//! outputs were kept ([`crate::schedule::Scheduler::check`]). The check's outputs go to a
//! directory of their own beside the outputs; once the run is over they are compared byte for
//! byte with the task's, and a difference names the task, the output and both hosts: one of
//! them computed it wrong (or lied). Two results cannot tell which: both hosts are named.
//!
//! A check that cannot run (its task failed, no other host was left, the check itself failed
//! on every host it was tried) is reported unchecked, with why.

use crate::report::Report;
use crate::schedule::{Scheduler, Status};
use crate::taskfile::{FileSpec, Task};
use roost_catalog::json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Which tasks are checked, by which check tasks.
#[derive(Clone, Debug)]
pub struct Plan {
    /// (task, its check task), indices into the run's tasks (checks come after the tasks).
    pub pairs: Vec<(usize, usize)>,
    /// Where checks' outputs go, removed after the comparison.
    pub dir: PathBuf,
}

/// How many of `n` tasks a fraction samples: at least one when it is above 0.
pub fn sample_size(n: usize, fraction: f64) -> usize {
    if n == 0 || fraction <= 0.0 {
        return 0;
    }
    ((n as f64 * fraction).ceil() as usize).clamp(1, n)
}

/// The tasks with a check task appended for a random sample of `fraction` of them (`seed`
/// draws the sample), and the plan that pairs them; checks' outputs go to a directory in
/// `output_dir`.
pub fn plan(tasks: &[Task], fraction: f64, output_dir: &Path, seed: u64) -> (Vec<Task>, Plan) {
    let dir = output_dir.join(format!(".roost-verify-{}", std::process::id()));
    let mut chosen: Vec<usize> = (0..tasks.len()).collect();
    let count = sample_size(tasks.len(), fraction);
    let mut state = seed | 1;
    for i in 0..count {
        // xorshift64*: plenty for choosing a sample.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let r = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let j = i + (r % (chosen.len() - i) as u64) as usize;
        chosen.swap(i, j);
    }
    chosen.truncate(count);
    chosen.sort_unstable();
    let mut all = tasks.to_vec();
    let mut pairs = Vec::new();
    for (k, &t) in chosen.iter().enumerate() {
        let task = &tasks[t];
        let outputs = task
            .outputs
            .iter()
            .enumerate()
            .map(|(j, out)| FileSpec {
                local: dir.join(format!("{k}/{j}")),
                task_path: out.task_path.clone(),
            })
            .collect();
        all.push(Task {
            name: format!("{} (check)", task.name),
            outputs,
            ..task.clone()
        });
        pairs.push((t, all.len() - 1));
    }
    (all, Plan { pairs, dir })
}

/// Seed for a sample: from the kernel's random numbers, else the clock and the process
/// (which no host running the tasks can know either).
pub fn random_seed() -> u64 {
    if let Ok(bytes) = roost_client::random::bytes::<8>() {
        return u64::from_ne_bytes(bytes);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    now ^ u64::from(std::process::id()).rotate_left(32)
}

/// Two hosts' outputs of a task that differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    pub task: String,
    /// The output that differs (its local name), or why the outputs cannot be compared.
    pub output: String,
    /// The host whose outputs were kept, and the checking host.
    pub hosts: (String, String),
}

/// What the checks found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verification {
    /// Tasks given a check.
    pub sampled: usize,
    /// Checked, and the same on both hosts.
    pub agreed: usize,
    pub disagreements: Vec<Disagreement>,
    /// Tasks that could not be checked, and why.
    pub unchecked: Vec<(String, String)>,
}

impl Verification {
    /// One line, then a line per disagreement and per task not checked.
    pub fn text(&self) -> String {
        let mut out = format!(
            "verify: {} task{} run again on another host: {} agree, {} disagree, {} unchecked\n",
            self.sampled,
            if self.sampled == 1 { "" } else { "s" },
            self.agreed,
            self.disagreements.len(),
            self.unchecked.len()
        );
        for d in &self.disagreements {
            out.push_str(&format!(
                "verify: {}: {} and {} disagree on {}\n",
                d.task, d.hosts.0, d.hosts.1, d.output
            ));
        }
        for (task, why) in &self.unchecked {
            out.push_str(&format!("verify: {task}: unchecked: {why}\n"));
        }
        out
    }

    pub fn to_json(&self) -> Value {
        let s = |t: &str| Value::String(t.to_string());
        Value::Object(vec![
            ("sampled".into(), Value::Int(self.sampled as i64)),
            ("agreed".into(), Value::Int(self.agreed as i64)),
            (
                "disagreements".into(),
                Value::Array(
                    self.disagreements
                        .iter()
                        .map(|d| {
                            Value::Object(vec![
                                ("task".into(), s(&d.task)),
                                ("output".into(), s(&d.output)),
                                (
                                    "hosts".into(),
                                    Value::Array(vec![s(&d.hosts.0), s(&d.hosts.1)]),
                                ),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "unchecked".into(),
                Value::Array(
                    self.unchecked
                        .iter()
                        .map(|(task, why)| {
                            Value::Object(vec![("task".into(), s(task)), ("why".into(), s(why))])
                        })
                        .collect(),
                ),
            ),
        ])
    }
}

/// Compares each checked task's outputs with its check's, once the run is over, and removes
/// the checks' outputs. `report` names the hosts.
pub fn compare(
    plan: &Plan,
    tasks: &[Task],
    s: &Scheduler,
    report: &Report,
    output_dir: &Path,
) -> Verification {
    let mut v = Verification {
        sampled: plan.pairs.len(),
        ..Verification::default()
    };
    let host = |h: Option<usize>| {
        h.and_then(|h| report.hosts.get(h))
            .map_or_else(|| "?".to_string(), |h| h.name.clone())
    };
    for &(t, c) in &plan.pairs {
        let name = tasks[t].name.clone();
        match (s.status(t), s.status(c)) {
            (Status::Done, Status::Done) => {}
            (Status::Done, Status::Failed(why)) => {
                v.unchecked.push((name, why.clone()));
                continue;
            }
            (Status::Failed(_), _) => {
                v.unchecked.push((name, "the task failed".into()));
                continue;
            }
            _ => {
                v.unchecked.push((name, "the run did not finish".into()));
                continue;
            }
        }
        let hosts = (host(s.done_by(t)), host(s.done_by(c)));
        let differs =
            tasks[t].outputs.iter().zip(&tasks[c].outputs).find_map(
                |(kept, check)| match same_file(&output_dir.join(&kept.local), &check.local) {
                    Ok(true) => None,
                    Ok(false) => Some(kept.local.display().to_string()),
                    Err(e) => Some(format!("{} (cannot compare: {e})", kept.local.display())),
                },
            );
        match differs {
            None => v.agreed += 1,
            Some(output) => v.disagreements.push(Disagreement {
                task: name,
                output,
                hosts,
            }),
        }
    }
    let _ = std::fs::remove_dir_all(&plan.dir);
    v
}

/// Whether two files hold the same bytes.
fn same_file(a: &Path, b: &Path) -> std::io::Result<bool> {
    let (mut fa, mut fb) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut ba, mut bb) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(true);
        }
        fb.read_exact(&mut bb[..n])?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(i: usize) -> Task {
        Task {
            name: format!("line {i}"),
            inputs: vec![],
            outputs: vec![FileSpec {
                local: PathBuf::from(format!("out/{i}")),
                task_path: "result".into(),
            }],
            command: "true".into(),
            cost: 1.0,
        }
    }

    #[test]
    fn a_sample_of_the_fraction_gets_checks_writing_elsewhere() {
        let tasks: Vec<Task> = (0..10).map(task).collect();
        assert_eq!(sample_size(10, 0.25), 3);
        assert_eq!(sample_size(10, 0.01), 1);
        assert_eq!(sample_size(10, 1.0), 10);
        assert_eq!(sample_size(0, 1.0), 0);
        let (all, plan) = plan(&tasks, 0.25, Path::new("/work"), 42);
        assert_eq!(all.len(), 13);
        assert_eq!(plan.pairs.len(), 3);
        for &(t, c) in &plan.pairs {
            assert!(t < 10 && c >= 10);
            assert_eq!(all[c].name, format!("line {t} (check)"));
            assert_eq!(all[c].command, all[t].command);
            assert!(all[c].outputs[0].local.starts_with(&plan.dir));
            assert_eq!(all[c].outputs[0].task_path, "result");
        }
        let (_, again) = super::plan(&tasks, 0.25, Path::new("/work"), 43);
        let (_, same) = super::plan(&tasks, 0.25, Path::new("/work"), 42);
        assert_eq!(same.pairs, plan.pairs, "a seed draws one sample");
        let (_, all_of_them) = super::plan(&tasks, 1.0, Path::new("/work"), 7);
        assert_eq!(all_of_them.pairs.len(), 10);
        let _ = again;
    }

    #[test]
    fn files_compare_by_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let (a, b, c, d) = (
            f("a", "same"),
            f("b", "same"),
            f("c", "sane"),
            f("d", "longer"),
        );
        assert!(same_file(&a, &b).unwrap());
        assert!(!same_file(&a, &c).unwrap());
        assert!(!same_file(&a, &d).unwrap());
        assert!(same_file(&a, &dir.path().join("missing")).is_err());
    }
}

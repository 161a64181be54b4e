//! complib, the Legion paper's worked example: every sequence of a query library compared
//! with every sequence of a target library by Smith-Waterman, the target library split into
//! tasks that `roost-align search` runs on the pool's hosts. Reported, as in the paper, in
//! cell updates per second (query residues x target residues / seconds), and as efficiency:
//! the rate achieved over the sum of each host's standalone rate, measured first by running
//! one calibration task on each host alone, under the same thermostat share.
//!
//! The target library is split by "factoring": half of what is left goes out in one chunk
//! per host at a time, so chunks shrink as the run nears its end and the last hosts to
//! finish wait little for each other.

use crate::report::{human, Report};
use crate::taskfile::{FileSpec, Task};
use crate::Config;
use roost_align::fasta::{self, Sequence};
use roost_align::generate;
use roost_align::search::{self, Stats};
use roost_align::{Kernel, Scoring};
use roost_catalog::json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What to compare, and how.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Where the libraries, chunks, outputs and the combined scores go.
    pub work_dir: PathBuf,
    /// The `roost-align` program to stage on the hosts.
    pub program: PathBuf,
    /// The target library's size relative to the paper's (0 < scale <= 1).
    pub scale: f64,
    /// The fraction of the target library each host's calibration task compares (0: no
    /// calibration, no efficiency).
    pub calibrate: f64,
    /// How many (query, target) scores to recompute with the scalar reference here; `None`:
    /// all of them.
    pub verify: Option<usize>,
}

/// A chunk of the target library: its sequences `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub start: usize,
    pub end: usize,
}

/// Splits `targets` into chunks for `places` hosts' places: half of what is left in
/// `places` chunks of equal residues, again and again, down to chunks of `smallest`
/// residues.
pub fn split(targets: &[Sequence], places: usize, smallest: u64) -> Vec<Chunk> {
    let places = places.max(1) as u64;
    let total = fasta::residues(targets);
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut left = total;
    while start < targets.len() {
        let size = (left / 2 / places).max(smallest).max(1);
        let mut end = start;
        let mut taken = 0;
        while end < targets.len() && taken < size {
            taken += targets[end].residues.len() as u64;
            end += 1;
        }
        chunks.push(Chunk { start, end });
        left -= taken;
        start = end;
    }
    chunks
}

/// complib's outcome.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub run: Report,
    pub cells: u64,
    /// Each host's calibration task, where it ran.
    pub standalone: Vec<Option<Stats>>,
    /// Where the combined score table is.
    pub scores: PathBuf,
    /// Scores checked against the scalar reference, and how many differed.
    pub verified: usize,
    pub mismatches: usize,
    /// Why the run cannot be counted, if it cannot.
    pub problem: Option<String>,
}

impl Outcome {
    /// Cell updates per second over the run's wall-clock time.
    pub fn cups(&self) -> f64 {
        self.cells as f64 / self.run.seconds.max(1e-9)
    }

    /// The sum of the standalone rates (cells per wall-clock second of each host's
    /// calibration task, run alone under its share), if every host was calibrated.
    pub fn ideal(&self) -> Option<f64> {
        self.standalone
            .iter()
            .map(|s| s.map(|s| s.cups()))
            .sum::<Option<f64>>()
    }

    pub fn efficiency(&self) -> Option<f64> {
        self.ideal().map(|i| self.cups() / i)
    }

    pub fn text(&self) -> String {
        let mut out = self.run.table();
        let _ = writeln!(
            out,
            "standalone rates (cells/s, one task alone under its share):"
        );
        for (h, stats) in self.run.hosts.iter().zip(&self.standalone) {
            let _ = match stats {
                Some(st) => writeln!(
                    out,
                    "  {:24} {}  ({} per CPU-second)",
                    h.name,
                    human(st.cups()),
                    human(st.cells as f64 / st.cpu_seconds.max(1e-9))
                ),
                None => writeln!(out, "  {:24} -", h.name),
            };
        }
        let _ = writeln!(
            out,
            "complib: {} cells in {:.2} s = {} CUPS",
            self.cells,
            self.run.seconds,
            human(self.cups())
        );
        if let (Some(ideal), Some(e)) = (self.ideal(), self.efficiency()) {
            let _ = writeln!(
                out,
                "efficiency: {e:.3} (achieved {} / sum of standalone rates {})",
                human(self.cups()),
                human(ideal)
            );
        }
        let _ = writeln!(
            out,
            "scores: {} ({} checked against the scalar reference, {} differ)",
            self.scores.display(),
            self.verified,
            self.mismatches
        );
        if let Some(p) = &self.problem {
            let _ = writeln!(out, "problem: {p}");
        }
        out
    }

    pub fn to_json(&self) -> Value {
        let opt = |v: Option<f64>| v.map_or(Value::Null, Value::Float);
        Value::Object(vec![
            ("cells".into(), Value::Int(self.cells as i64)),
            ("seconds".into(), Value::Float(self.run.seconds)),
            ("cups".into(), Value::Float(self.cups())),
            (
                "standalone_cups".into(),
                Value::Array(
                    self.standalone
                        .iter()
                        .map(|st| opt(st.map(|st| st.cups())))
                        .collect(),
                ),
            ),
            (
                "standalone_cpu_cups".into(),
                Value::Array(
                    self.standalone
                        .iter()
                        .map(|st| opt(st.map(|st| st.cells as f64 / st.cpu_seconds.max(1e-9))))
                        .collect(),
                ),
            ),
            ("ideal_cups".into(), opt(self.ideal())),
            ("efficiency".into(), opt(self.efficiency())),
            ("verified".into(), Value::Int(self.verified as i64)),
            ("mismatches".into(), Value::Int(self.mismatches as i64)),
            (
                "problem".into(),
                self.problem
                    .as_deref()
                    .map_or(Value::Null, |p| Value::String(p.into())),
            ),
            ("run".into(), self.run.to_json()),
        ])
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The task comparing the queries with one file of targets.
fn task(setup: &Setup, name: String, targets: &Path, out: &Path, cells: u64) -> Task {
    let spec = |local: &Path, task_path: &str| FileSpec {
        local: local.to_path_buf(),
        task_path: task_path.into(),
    };
    Task {
        name,
        inputs: vec![
            spec(&setup.program, "roost-align"),
            spec(&setup.work_dir.join("queries.fa"), "queries.fa"),
            spec(targets, "targets.fa"),
        ],
        outputs: vec![
            spec(&out.with_extension("scores"), "scores.tsv"),
            spec(&out.with_extension("stats"), "stats"),
        ],
        command: "./roost-align search queries.fa targets.fa -o scores.tsv --stats stats".into(),
        cost: cells as f64,
    }
}

/// Runs complib over `config.hosts`: generate and split the libraries, calibrate each host
/// alone, run the comparison across all of them, gather and check the scores.
pub fn run(setup: &Setup, config: &Config) -> Result<Outcome, String> {
    let (queries, targets) = generate::complib_scaled(setup.scale);
    let query_residues = fasta::residues(&queries);
    write(&setup.work_dir.join("queries.fa"), &fasta::write(&queries))?;
    let places: usize = config.hosts.iter().map(|h| h.slots).sum();
    let total = fasta::residues(&targets);
    let chunks = split(
        &targets,
        places,
        (total / (places.max(1) as u64 * 16)).max(1),
    );
    let mut tasks = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        let part = &targets[c.start..c.end];
        let file = setup.work_dir.join(format!("chunks/{i:04}.fa"));
        write(&file, &fasta::write(part))?;
        let out = setup.work_dir.join(format!("out/{i:04}"));
        let cells = query_residues * fasta::residues(part);
        tasks.push(task(
            setup,
            format!("chunk {i} (targets {}..{})", c.start + 1, c.end),
            &file,
            &out,
            cells,
        ));
    }
    let standalone = calibrate(setup, config, &targets, query_residues)?;
    let mut run = crate::run(&tasks, config);
    if let Some(signal) = run.stopped {
        return Err(format!("stopped by signal {signal}"));
    }
    run.unit = "cells".into();
    let cells = query_residues * total;
    let scores = setup.work_dir.join("complib.scores");
    let mut outcome = Outcome {
        run,
        cells,
        standalone,
        scores: scores.clone(),
        verified: 0,
        mismatches: 0,
        problem: None,
    };
    if outcome.run.done() != tasks.len() {
        outcome.problem = Some(format!(
            "{} of {} tasks failed:\n{}",
            tasks.len() - outcome.run.done(),
            tasks.len(),
            outcome.run.failures()
        ));
        return Ok(outcome);
    }
    let table = gather(setup, &chunks, &queries, &targets)?;
    write(&scores, &table.text)?;
    let (verified, mismatches) = verify(&queries, &targets, &table.scores, setup.verify);
    outcome.verified = verified;
    outcome.mismatches = mismatches;
    if mismatches > 0 {
        outcome.problem = Some(format!(
            "{mismatches} scores differ from the scalar reference"
        ));
    }
    Ok(outcome)
}

/// Each host's calibration: one task of `setup.calibrate` of the targets, on it alone.
fn calibrate(
    setup: &Setup,
    config: &Config,
    targets: &[Sequence],
    query_residues: u64,
) -> Result<Vec<Option<Stats>>, String> {
    if setup.calibrate <= 0.0 {
        return Ok(vec![None; config.hosts.len()]);
    }
    let want = (fasta::residues(targets) as f64 * setup.calibrate) as u64;
    let mut end = 0;
    let mut taken = 0;
    while end < targets.len() && taken < want.max(1) {
        taken += targets[end].residues.len() as u64;
        end += 1;
    }
    let file = setup.work_dir.join("chunks/calibration.fa");
    write(&file, &fasta::write(&targets[..end]))?;
    let mut rates = Vec::new();
    for (i, host) in config.hosts.iter().enumerate() {
        let out = setup.work_dir.join(format!("calibration/{i}"));
        let t = task(
            setup,
            format!("calibration on {}", host.name),
            &file,
            &out,
            query_residues * taken,
        );
        let alone = Config {
            hosts: vec![host.clone()],
            progress: false,
            follow: None,
            ..config.clone()
        };
        let report = crate::run(std::slice::from_ref(&t), &alone);
        if let Some(signal) = config.stop.raised() {
            return Err(format!("stopped by signal {signal}"));
        }
        let rate = if report.done() == 1 {
            let text = std::fs::read_to_string(out.with_extension("stats"))
                .map_err(|e| format!("calibration on {}: {e}", host.name))?;
            Some(Stats::parse(&text)?)
        } else {
            None
        };
        rates.push(rate);
    }
    Ok(rates)
}

/// The combined score table and its scores (`scores[t * queries + q]`).
struct Gathered {
    text: String,
    scores: Vec<i32>,
}

/// Reads every chunk's table and checks that each target appears once, in order.
fn gather(
    setup: &Setup,
    chunks: &[Chunk],
    queries: &[Sequence],
    targets: &[Sequence],
) -> Result<Gathered, String> {
    let mut scores = Vec::with_capacity(queries.len() * targets.len());
    for (i, c) in chunks.iter().enumerate() {
        let path = setup.work_dir.join(format!("out/{i:04}.scores"));
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let table = search::parse_table(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let names: Vec<&str> = targets[c.start..c.end]
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        let got: Vec<&str> = table.rows.iter().map(|r| r.0.as_str()).collect();
        if got != names || table.queries.len() != queries.len() {
            return Err(format!(
                "{}: holds {} targets for {} queries, expected targets {}..{} for {}",
                path.display(),
                got.len(),
                table.queries.len(),
                c.start + 1,
                c.end,
                queries.len()
            ));
        }
        for (_, row) in table.rows {
            scores.extend(row);
        }
    }
    let text = search::write_table(queries, targets, &scores, &Scoring::default());
    Ok(Gathered { text, scores })
}

/// Recomputes `count` scores (all of them for `None`) with the scalar reference, the pairs
/// picked by a seeded generator; returns (checked, differing).
pub fn verify(
    queries: &[Sequence],
    targets: &[Sequence],
    scores: &[i32],
    count: Option<usize>,
) -> (usize, usize) {
    let scoring = Scoring::default();
    let encoded_queries: Vec<Vec<u8>> = queries
        .iter()
        .map(|q| roost_align::matrix::encode(&q.residues))
        .collect();
    let all = queries.len() * targets.len();
    let picks: Vec<usize> = match count {
        None => (0..all).collect(),
        Some(n) => {
            let mut rng = generate::Rng::new(0x5eed);
            (0..n.min(all))
                .map(|_| rng.below(all as u64) as usize)
                .collect()
        }
    };
    let mut differ = 0;
    for &i in &picks {
        let (t, q) = (i / queries.len(), i % queries.len());
        let target = roost_align::matrix::encode(&targets[t].residues);
        let reference = Kernel::Scalar.scores(&encoded_queries[q], &[&target], &scoring)[0];
        if scores.get(i) != Some(&reference) {
            differ += 1;
        }
    }
    (picks.len(), differ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_library_once_and_shrink() {
        let (_, targets) = generate::complib_scaled(0.05);
        let chunks = split(&targets, 4, 2000);
        assert_eq!(chunks[0].start, 0);
        assert_eq!(chunks.last().unwrap().end, targets.len());
        for pair in chunks.windows(2) {
            assert_eq!(pair[0].end, pair[1].start);
        }
        let sizes: Vec<u64> = chunks
            .iter()
            .map(|c| fasta::residues(&targets[c.start..c.end]))
            .collect();
        assert!(sizes[0] > 4 * sizes[sizes.len() - 2], "{sizes:?}");
        let total = fasta::residues(&targets);
        assert!(
            sizes[0] >= total / 8 && sizes[0] < total / 8 + 3000,
            "{sizes:?}"
        );
    }

    #[test]
    fn verification_notices_a_wrong_score() {
        let (queries, targets) = generate::complib_scaled(0.001);
        let (mut scores, _) =
            search::search(&queries, &targets, Kernel::best(), &Scoring::default());
        assert_eq!(verify(&queries, &targets, &scores, Some(50)), (50, 0));
        scores.iter_mut().for_each(|s| *s += 1);
        assert_eq!(verify(&queries, &targets, &scores, Some(50)), (50, 50));
    }
}

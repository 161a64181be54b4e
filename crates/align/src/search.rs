//! A library-against-library search: every query scored against every target with one
//! kernel, the score table written and read back as text, and the search's rate in cell
//! updates per second (a cell is one query residue against one target residue).
//!
//! The table is tab-separated: a `#` line saying how it was scored, a header naming the
//! queries, then one line per target with its score against each query:
//!
//! ```text
//! # roost-align scores: BLOSUM62, gaps open 10 extend 1
//! target<TAB>query1<TAB>query2
//! target1<TAB>31<TAB>24
//! ```

use crate::fasta::{self, Sequence};
use crate::matrix::{encode, Scoring};
use crate::Kernel;
use std::time::Instant;

/// What a search took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// Query residues times target residues.
    pub cells: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// CPU seconds of this process (user and system).
    pub cpu_seconds: f64,
}

impl Stats {
    /// Cell updates per second of wall-clock time.
    pub fn cups(&self) -> f64 {
        self.cells as f64 / self.seconds.max(1e-9)
    }

    /// One line of `key=value` words, as `roost-align search --stats` writes it.
    pub fn line(&self, kernel: Kernel) -> String {
        format!(
            "cells={} seconds={:.6} cpu_seconds={:.6} gcups={:.3} kernel={}\n",
            self.cells,
            self.seconds,
            self.cpu_seconds,
            self.cups() / 1e9,
            kernel.name()
        )
    }

    /// Reads a line written by [`Stats::line`].
    pub fn parse(text: &str) -> Result<Stats, String> {
        let field = |key: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
                .ok_or_else(|| format!("stats: no {key} in {text:?}"))
        };
        let number = |key: &str| {
            field(key)?
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("stats: {key} is not a number in {text:?}"))
        };
        Ok(Stats {
            cells: field("cells")?
                .parse()
                .map_err(|_| format!("stats: cells is not a count in {text:?}"))?,
            seconds: number("seconds")?,
            cpu_seconds: number("cpu_seconds")?,
        })
    }
}

/// The CPU seconds this process has used.
pub fn cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Scores every query against every target: `scores[t * queries.len() + q]`.
pub fn search(
    queries: &[Sequence],
    targets: &[Sequence],
    kernel: Kernel,
    scoring: &Scoring,
) -> (Vec<i32>, Stats) {
    let started = Instant::now();
    let cpu_before = cpu_seconds();
    let encoded: Vec<Vec<u8>> = targets.iter().map(|t| encode(&t.residues)).collect();
    let views: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    let mut scores = vec![0i32; queries.len() * targets.len()];
    for (q, query) in queries.iter().enumerate() {
        let column = kernel.scores(&encode(&query.residues), &views, scoring);
        for (t, score) in column.into_iter().enumerate() {
            scores[t * queries.len() + q] = score;
        }
    }
    let stats = Stats {
        cells: fasta::residues(queries) * fasta::residues(targets),
        seconds: started.elapsed().as_secs_f64(),
        cpu_seconds: cpu_seconds() - cpu_before,
    };
    (scores, stats)
}

/// The score table as text.
pub fn write_table(
    queries: &[Sequence],
    targets: &[Sequence],
    scores: &[i32],
    scoring: &Scoring,
) -> String {
    use std::fmt::Write as _;
    let mut out = format!("# roost-align scores: {}\ntarget", scoring.describe());
    for q in queries {
        out.push('\t');
        out.push_str(&q.name);
    }
    out.push('\n');
    for (t, target) in targets.iter().enumerate() {
        out.push_str(&target.name);
        for s in &scores[t * queries.len()..(t + 1) * queries.len()] {
            let _ = write!(out, "\t{s}");
        }
        out.push('\n');
    }
    out
}

/// A score table read back: query names, and each target's name and scores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub queries: Vec<String>,
    pub rows: Vec<(String, Vec<i32>)>,
}

/// Reads a table written by [`write_table`]; a mistake names its line.
pub fn parse_table(text: &str) -> Result<Table, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.is_empty());
    let (_, header) = lines.next().ok_or("an empty score table")?;
    let mut names = header.split('\t');
    if names.next() != Some("target") {
        return Err("the score table's header does not start with \"target\"".into());
    }
    let queries: Vec<String> = names.map(str::to_string).collect();
    let mut rows = Vec::new();
    for (index, line) in lines {
        let mut fields = line.split('\t');
        let name = fields.next().unwrap_or("").to_string();
        let scores = fields
            .map(|f| f.parse::<i32>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("line {}: {e}", index + 1))?;
        if scores.len() != queries.len() {
            return Err(format!(
                "line {}: {} scores for {} queries",
                index + 1,
                scores.len(),
                queries.len()
            ));
        }
        rows.push((name, scores));
    }
    Ok(Table { queries, rows })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{library, Spec};

    #[test]
    fn tables_and_stats_read_back() {
        let queries = library(
            Spec {
                count: 3,
                residues: 300,
                seed: 1,
                prefix: "q",
            },
            &[],
        );
        let targets = library(
            Spec {
                count: 5,
                residues: 900,
                seed: 2,
                prefix: "t",
            },
            &queries,
        );
        let scoring = Scoring::default();
        let (scores, stats) = search(&queries, &targets, Kernel::best(), &scoring);
        assert_eq!(stats.cells, 300 * 900);
        let (reference, _) = search(&queries, &targets, Kernel::Scalar, &scoring);
        assert_eq!(scores, reference);
        let table = parse_table(&write_table(&queries, &targets, &scores, &scoring)).unwrap();
        assert_eq!(table.queries, ["q1", "q2", "q3"]);
        assert_eq!(table.rows.len(), 5);
        assert_eq!(table.rows[4].0, "t5");
        assert_eq!(table.rows[4].1, scores[12..15]);
        let back = Stats::parse(&stats.line(Kernel::Scalar)).unwrap();
        assert_eq!(back.cells, stats.cells);
        assert!(Stats::parse("cells=1 seconds=x cpu_seconds=0").is_err());
        assert!(parse_table("target\tq\nt1\t1\t2\n").is_err());
    }
}

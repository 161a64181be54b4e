//! `roost-align`: the small program a complib task runs on a pool host (staged there with
//! its inputs), and the way to measure the Smith-Waterman kernels: `search` scores a query
//! library against a target library, `generate` writes complib's synthetic libraries,
//! `bench` reports each kernel's rate on this CPU.

use clap::{Parser, Subcommand};
use roost_align::generate;
use roost_align::search::{self, Stats};
use roost_align::{fasta, Kernel, Scoring};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Smith-Waterman local alignment scores (BLOSUM62, affine gaps), striped SIMD kernels.
#[derive(Parser)]
#[command(
    name = "roost-align",
    version,
    after_help = "\
A gap of length k costs OPEN + (k-1) * EXTEND (default 10 + (k-1) * 1), as in parasail, SSW
and EMBOSS. Kernels: avx2 (16 lanes of 16 bits), sse4.1 (8 lanes), scalar (the 32-bit
reference); auto picks the fastest this CPU runs. Scores that would overflow 16 bits are
recomputed by the reference, so every kernel gives the same scores.

Exit status: 0 on success, 1 when a file cannot be read or written, 2 for bad options or
a malformed library (the message names the line)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Score every query against every target; write the score table (see docs/pool.md).
    Search {
        /// The query library (FASTA).
        queries: PathBuf,
        /// The target library (FASTA).
        targets: PathBuf,
        /// Where to write the score table (default: standard output).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Where to write one line of statistics: cells, seconds, cpu_seconds, gcups, kernel.
        #[arg(long, value_name = "FILE")]
        stats: Option<PathBuf>,
        #[command(flatten)]
        scoring: ScoringArgs,
    },
    /// Write complib's libraries: 20 queries (4,478 residues) and 10,716 targets (3,647,403
    /// residues), the same bytes every time.
    Generate {
        /// The query library to write.
        #[arg(long, value_name = "FILE")]
        queries: PathBuf,
        /// The target library to write.
        #[arg(long, value_name = "FILE")]
        targets: PathBuf,
        /// Scale the target library's sequences and residues by this factor (0 < F <= 1).
        #[arg(long, default_value_t = 1.0, value_name = "F")]
        scale: f64,
    },
    /// Measure each kernel this CPU runs, on complib's queries against part of its targets.
    Bench {
        /// How many target residues to search (default 200,000: about 0.9 G cells).
        #[arg(long, default_value_t = 200_000, value_name = "N")]
        residues: u64,
        #[command(flatten)]
        scoring: ScoringArgs,
    },
}

#[derive(clap::Args)]
struct ScoringArgs {
    /// The kernel: auto, avx2, sse4.1 or scalar.
    #[arg(long, default_value = "auto")]
    kernel: String,
    /// The cost of a gap's first residue.
    #[arg(long, default_value_t = 10)]
    open: u16,
    /// The cost of each further residue of a gap.
    #[arg(long, default_value_t = 1)]
    extend: u16,
}

impl ScoringArgs {
    /// The kernel (`None`: every available one) and the scoring scheme.
    fn resolve(&self) -> Result<(Option<Kernel>, Scoring), String> {
        if self.extend == 0 || self.extend > self.open {
            return Err(format!(
                "--open {} --extend {}: need 1 <= extend <= open",
                self.open, self.extend
            ));
        }
        let kernel = Kernel::parse(&self.kernel)?;
        if let Some(k) = kernel.filter(|k| !k.available()) {
            return Err(format!("--kernel {}: this CPU cannot run it", k.name()));
        }
        Ok((kernel, Scoring::blosum62(self.open, self.extend)))
    }
}

/// A failure: exit status and message.
struct Failure(u8, String);

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(code, message)) => {
            eprintln!("roost-align: {message}");
            ExitCode::from(code)
        }
    }
}

fn read_library(path: &Path) -> Result<Vec<fasta::Sequence>, Failure> {
    let bytes = std::fs::read(path).map_err(|e| Failure(1, format!("{}: {e}", path.display())))?;
    fasta::parse(&bytes).map_err(|e| Failure(2, format!("{}: {e}", path.display())))
}

fn write(path: &Path, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text).map_err(|e| Failure(1, format!("{}: {e}", path.display())))
}

fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Search {
            queries,
            targets,
            output,
            stats,
            scoring,
        } => {
            let (kernel, scoring) = scoring.resolve().map_err(|e| Failure(2, e))?;
            let kernel = kernel.unwrap_or_else(Kernel::best);
            let queries = read_library(&queries)?;
            let targets = read_library(&targets)?;
            let (scores, took) = search::search(&queries, &targets, kernel, &scoring);
            let table = search::write_table(&queries, &targets, &scores, &scoring);
            match output {
                Some(path) => write(&path, &table)?,
                None => print!("{table}"),
            }
            if let Some(path) = stats {
                write(&path, &took.line(kernel))?;
            }
        }
        Command::Generate {
            queries,
            targets,
            scale,
        } => {
            if !(scale > 0.0 && scale <= 1.0) {
                return Err(Failure(2, format!("--scale {scale}: expected 0 < F <= 1")));
            }
            let (q, t) = generate::complib_scaled(scale);
            write(&queries, &fasta::write(&q))?;
            write(&targets, &fasta::write(&t))?;
            println!(
                "{}: {} sequences, {} residues; {}: {} sequences, {} residues",
                queries.display(),
                q.len(),
                fasta::residues(&q),
                targets.display(),
                t.len(),
                fasta::residues(&t)
            );
        }
        Command::Bench { residues, scoring } => {
            let (kernel, scoring) = scoring.resolve().map_err(|e| Failure(2, e))?;
            let (queries, all) = generate::complib();
            let mut targets = Vec::new();
            let mut taken = 0;
            for t in all {
                if taken >= residues {
                    break;
                }
                taken += t.residues.len() as u64;
                targets.push(t);
            }
            println!(
                "{}; {} cells a kernel, one thread",
                scoring.describe(),
                fasta::residues(&queries) * taken
            );
            for k in Kernel::ALL.into_iter().filter(|k| k.available()) {
                if kernel.is_some_and(|only| only != k) {
                    continue;
                }
                let (_, took): (_, Stats) = search::search(&queries, &targets, k, &scoring);
                println!(
                    "{:7} {:8.3} GCUPS  ({:.3} s, {:.3} s CPU)",
                    k.name(),
                    took.cups() / 1e9,
                    took.seconds,
                    took.cpu_seconds
                );
            }
        }
    }
    Ok(())
}

//! complib's libraries, made up reproducibly: the Legion paper's sizes (a 20-sequence query
//! library of 4,478 residues against 10,716 target sequences of 3,647,403 residues), drawn
//! from a seeded generator with the amino-acid background frequencies of Robinson &
//! Robinson (1991, the frequencies BLAST uses), right-skewed lengths, and, so that some
//! comparisons score high, one target in a hundred carrying a mutated piece of a query.
//!
//! Only integer arithmetic and correctly rounded `+ * /` on `f64` are used, so the same seed
//! gives the same bytes on every machine.

use crate::fasta::Sequence;

/// The paper's query library: sequences and residues.
pub const QUERIES: Spec = Spec {
    count: 20,
    residues: 4_478,
    seed: 0x1995_0101,
    prefix: "query",
};

/// The paper's target library.
pub const TARGETS: Spec = Spec {
    count: 10_716,
    residues: 3_647_403,
    seed: 0x1995_0102,
    prefix: "target",
};

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    pub count: usize,
    /// The total length, exactly.
    pub residues: u64,
    pub seed: u64,
    /// Sequence names are the prefix and a number from 1.
    pub prefix: &'static str,
}

/// Robinson & Robinson's frequencies, in thousandths of a percent.
const FREQUENCIES: [(u8, u32); 20] = [
    (b'A', 7805),
    (b'R', 5129),
    (b'N', 4487),
    (b'D', 5364),
    (b'C', 1925),
    (b'Q', 4264),
    (b'E', 6295),
    (b'G', 7377),
    (b'H', 2199),
    (b'I', 5142),
    (b'L', 9019),
    (b'K', 5744),
    (b'M', 2243),
    (b'F', 3856),
    (b'P', 5203),
    (b'S', 7120),
    (b'T', 5841),
    (b'W', 1330),
    (b'Y', 3216),
    (b'V', 6441),
];

/// SplitMix64: small, fast, and the same everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A residue with the background frequencies.
    pub fn residue(&mut self) -> u8 {
        let total: u32 = FREQUENCIES.iter().map(|f| f.1).sum();
        let mut pick = self.below(u64::from(total)) as u32;
        for (letter, weight) in FREQUENCIES {
            if pick < weight {
                return letter;
            }
            pick -= weight;
        }
        FREQUENCIES[19].0
    }
}

/// `count` lengths adding up to exactly `total`, right-skewed around the mean (the square of
/// a sum of three uniforms), each at least 1.
fn lengths(rng: &mut Rng, count: usize, total: u64) -> Vec<u64> {
    if count == 0 {
        return Vec::new();
    }
    let raw: Vec<f64> = (0..count)
        .map(|_| {
            let s = rng.unit() + rng.unit() + rng.unit();
            0.15 + s * s
        })
        .collect();
    let sum: f64 = raw.iter().sum();
    let spare = total.saturating_sub(count as u64);
    let exact: Vec<f64> = raw.iter().map(|r| r / sum * spare as f64).collect();
    let mut out: Vec<u64> = exact.iter().map(|e| 1 + *e as u64).collect();
    // Hand out what rounding down left, largest remainders first (ties: lower index).
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by(|&a, &b| {
        let fa = exact[a] - exact[a].floor();
        let fb = exact[b] - exact[b].floor();
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    let mut left = total.saturating_sub(out.iter().sum());
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        out[i] += 1;
        left -= 1;
    }
    out
}

/// A copy of `source` with about one residue in five substituted and an occasional short
/// insertion or deletion.
fn mutate(rng: &mut Rng, source: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(source.len() + 8);
    for &r in source {
        match rng.below(100) {
            0..=1 => {}                              // deleted
            2..=3 => out.extend([r, rng.residue()]), // an insertion after it
            4..=21 => out.push(rng.residue()),
            _ => out.push(r),
        }
    }
    out
}

/// Generates a library. Given `homologs_of`, one sequence in a hundred has a mutated piece
/// of one of those sequences written over part of it (its length stays).
pub fn library(spec: Spec, homologs_of: &[Sequence]) -> Vec<Sequence> {
    let mut rng = Rng::new(spec.seed);
    let lengths = lengths(&mut rng, spec.count, spec.residues);
    lengths
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let mut residues: Vec<u8> = (0..len).map(|_| rng.residue()).collect();
            if !homologs_of.is_empty() && rng.below(100) == 0 {
                let source = &homologs_of[rng.below(homologs_of.len() as u64) as usize].residues;
                let piece = mutate(&mut rng, source);
                let room = residues.len().min(piece.len());
                let at = rng.below((residues.len() - room) as u64 + 1) as usize;
                residues[at..at + room].copy_from_slice(&piece[..room]);
            }
            Sequence {
                name: format!("{}{}", spec.prefix, i + 1),
                residues,
            }
        })
        .collect()
}

/// complib's two libraries: (queries, targets).
pub fn complib() -> (Vec<Sequence>, Vec<Sequence>) {
    complib_scaled(1.0)
}

/// complib's libraries with the target library's sequences and residues scaled by `scale`
/// (a smaller, still reproducible, comparison for tests).
pub fn complib_scaled(scale: f64) -> (Vec<Sequence>, Vec<Sequence>) {
    let queries = library(QUERIES, &[]);
    let spec = Spec {
        count: ((TARGETS.count as f64 * scale).round() as usize).max(1),
        residues: ((TARGETS.residues as f64 * scale).round() as u64).max(1),
        ..TARGETS
    };
    let targets = library(spec, &queries);
    (queries, targets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fasta;

    #[test]
    fn libraries_have_the_papers_sizes_and_are_reproducible() {
        let queries = library(QUERIES, &[]);
        assert_eq!(queries.len(), 20);
        assert_eq!(fasta::residues(&queries), 4_478);
        assert_eq!(queries, library(QUERIES, &[]));
        let small = Spec {
            count: 500,
            residues: 170_000,
            seed: 7,
            prefix: "t",
        };
        let targets = library(small, &queries);
        assert_eq!(targets.len(), 500);
        assert_eq!(fasta::residues(&targets), 170_000);
        assert_eq!(targets, library(small, &queries));
        assert!(targets.iter().all(|t| !t.residues.is_empty()));
        assert_eq!(targets[9].name, "t10");
        // Skewed: the longest is well above the mean.
        let longest = targets.iter().map(|t| t.residues.len()).max().unwrap();
        assert!(longest > 2 * 340, "{longest}");
    }

    #[test]
    fn residues_follow_the_background_frequencies() {
        let mut rng = Rng::new(3);
        let mut counts = [0u32; 256];
        for _ in 0..200_000 {
            counts[usize::from(rng.residue())] += 1;
        }
        for (letter, weight) in FREQUENCIES {
            let seen = f64::from(counts[usize::from(letter)]) / 200_000.0;
            let want = f64::from(weight) / 100_000.0;
            assert!(
                (seen - want).abs() < 0.003,
                "{} {seen} {want}",
                letter as char
            );
        }
    }

    #[test]
    fn the_full_target_library_has_the_papers_size() {
        let (queries, targets) = complib();
        assert_eq!(targets.len(), 10_716);
        assert_eq!(fasta::residues(&targets), 3_647_403);
        assert_eq!(
            fasta::residues(&queries) * fasta::residues(&targets),
            16_333_070_634
        );
    }
}

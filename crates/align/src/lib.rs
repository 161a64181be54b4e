//! Smith-Waterman local alignment scores for protein sequences, fast: Farrar's striped
//! method over SIMD vectors ([`striped`], instantiated for SSE4.1 and AVX2 in `x86`), chosen
//! at run time by [`Kernel::best`], checked against a plain 32-bit reference ([`scalar`]).
//! Scoring is BLOSUM62 with affine gaps, open 10 and extend 1 by default ([`matrix`]).
//!
//! Also what complib (issue 13's worked example) needs around the kernel: FASTA libraries
//! ([`fasta`]), reproducible synthetic libraries of the paper's sizes ([`generate`]), and
//! library-against-library searches with their rates ([`search`]).

pub mod fasta;
pub mod generate;
pub mod matrix;
pub mod scalar;
pub mod search;
pub mod striped;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use matrix::Scoring;

/// An implementation of the score computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Striped, 16 lanes of 16 bits (x86-64 with AVX2).
    Avx2,
    /// Striped, 8 lanes of 16 bits (x86-64 with SSE4.1).
    Sse41,
    /// The 32-bit reference, one cell at a time.
    Scalar,
}

impl Kernel {
    /// Every kernel, fastest first.
    pub const ALL: [Kernel; 3] = [Kernel::Avx2, Kernel::Sse41, Kernel::Scalar];

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Avx2 => "avx2",
            Kernel::Sse41 => "sse4.1",
            Kernel::Scalar => "scalar",
        }
    }

    /// Parses a kernel's name, or `auto` (`None`: the best available).
    pub fn parse(text: &str) -> Result<Option<Kernel>, String> {
        match text {
            "auto" => Ok(None),
            "avx2" => Ok(Some(Kernel::Avx2)),
            "sse4.1" | "sse41" => Ok(Some(Kernel::Sse41)),
            "scalar" => Ok(Some(Kernel::Scalar)),
            _ => Err(format!(
                "kernel {text:?}: expected auto, avx2, sse4.1 or scalar"
            )),
        }
    }

    /// True if this CPU can run the kernel.
    pub fn available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Kernel::Sse41 => std::arch::is_x86_feature_detected!("sse4.1"),
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx2 | Kernel::Sse41 => false,
            Kernel::Scalar => true,
        }
    }

    /// The fastest kernel this CPU can run.
    pub fn best() -> Kernel {
        Kernel::ALL
            .into_iter()
            .find(|k| k.available())
            .unwrap_or(Kernel::Scalar)
    }

    /// The best local alignment score of `query` against each of `targets` (all encoded,
    /// see [`matrix::encode`]). Scores too high for 16 bits are recomputed by the reference,
    /// so every kernel gives the reference's scores.
    ///
    /// # Panics
    /// If this CPU cannot run the kernel (see [`Kernel::available`]).
    pub fn scores(self, query: &[u8], targets: &[&[u8]], scoring: &Scoring) -> Vec<i32> {
        assert!(
            self.available(),
            "this CPU cannot run the {} kernel",
            self.name()
        );
        let striped: Vec<Option<u16>> = match self {
            Kernel::Scalar => {
                return targets
                    .iter()
                    .map(|t| scalar::score(query, t, scoring))
                    .collect()
            }
            // SAFETY: the CPU has the instruction set (checked above).
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { x86::scores_avx2(query, targets, scoring) },
            #[cfg(target_arch = "x86_64")]
            Kernel::Sse41 => unsafe { x86::scores_sse41(query, targets, scoring) },
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx2 | Kernel::Sse41 => unreachable!("checked by available()"),
        };
        striped
            .into_iter()
            .zip(targets)
            .map(|(s, t)| s.map_or_else(|| scalar::score(query, t, scoring), i32::from))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use generate::Rng;

    /// Every kernel this CPU runs gives the reference's scores for `query` against `targets`.
    fn agree(query: &[u8], targets: &[Vec<u8>], scoring: &Scoring) {
        let views: Vec<&[u8]> = targets.iter().map(Vec::as_slice).collect();
        let reference = Kernel::Scalar.scores(query, &views, scoring);
        for kernel in Kernel::ALL.into_iter().filter(|k| k.available()) {
            assert_eq!(
                kernel.scores(query, &views, scoring),
                reference,
                "{} disagrees: query {:?}, {}",
                kernel.name(),
                String::from_utf8_lossy(
                    &query.iter().map(|&c| matrix::letter(c)).collect::<Vec<_>>()
                ),
                scoring.describe()
            );
        }
    }

    fn random(rng: &mut Rng, len: usize, letters: u64) -> Vec<u8> {
        (0..len).map(|_| rng.below(letters) as u8).collect()
    }

    /// Random codes below `letters`, of a random length below `most`.
    fn random_upto(rng: &mut Rng, most: u64, letters: u64) -> Vec<u8> {
        let len = rng.below(most) as usize;
        random(rng, len, letters)
    }

    #[test]
    fn the_best_kernel_is_simd_on_x86_64() {
        if cfg!(target_arch = "x86_64") && std::arch::is_x86_feature_detected!("avx2") {
            assert_eq!(Kernel::best(), Kernel::Avx2);
        }
        assert_eq!(Kernel::parse("sse41").unwrap(), Some(Kernel::Sse41));
        assert_eq!(Kernel::parse("auto").unwrap(), None);
        assert!(Kernel::parse("neon").is_err());
    }

    #[test]
    fn random_sequences_score_as_the_reference() {
        let mut rng = Rng::new(42);
        for scoring in [
            Scoring::default(),
            Scoring::blosum62(11, 1),
            Scoring::blosum62(5, 2),
            Scoring::blosum62(1, 1),
            Scoring::blosum62(3, 3),
        ] {
            for round in 0..40 {
                // Lengths around every lane count, and some long ones.
                let qlen = match round % 4 {
                    0 => rng.below(40) as usize,
                    1 => 8 * (1 + rng.below(6) as usize) + rng.below(3) as usize,
                    2 => 16 * (1 + rng.below(8) as usize) - rng.below(2) as usize,
                    _ => 100 + rng.below(400) as usize,
                };
                // Few letters make long matches and many gaps, exercising the lazy F loop.
                let letters = if round % 3 == 0 { 3 } else { 24 };
                let query = random(&mut rng, qlen, letters);
                let targets: Vec<Vec<u8>> = (0..12)
                    .map(|_| random_upto(&mut rng, 300, letters))
                    .collect();
                agree(&query, &targets, &scoring);
            }
        }
    }

    #[test]
    fn related_sequences_with_gaps_score_as_the_reference() {
        let mut rng = Rng::new(7);
        for _ in 0..30 {
            let query: Vec<u8> = matrix::encode(
                &(0..rng.below(350) + 1)
                    .map(|_| rng.residue())
                    .collect::<Vec<_>>(),
            );
            // The query with substitutions, insertions and deletions, inside random flanks.
            let mut target = random_upto(&mut rng, 50, 20);
            for &c in &query {
                match rng.below(20) {
                    0 => {}
                    1 => target.extend(random_upto(&mut rng, 12, 20)),
                    2 | 3 => target.push(rng.below(20) as u8),
                    _ => target.push(c),
                }
            }
            target.extend(random_upto(&mut rng, 50, 20));
            agree(
                &query,
                &[target.clone(), query.clone()],
                &Scoring::default(),
            );
        }
    }

    #[test]
    fn edge_cases_score_as_the_reference() {
        let s = Scoring::default();
        let w = matrix::encode(b"W");
        let stop = matrix::encode(b"*");
        agree(&[], &[vec![], w.clone()], &s);
        agree(&w, &[vec![], w.clone(), stop.clone()], &s);
        agree(&stop.repeat(50), &[stop.repeat(50), w.repeat(50)], &s);
        agree(
            &w.repeat(17),
            &[w.repeat(1), w.repeat(16), w.repeat(17), w.repeat(600)],
            &s,
        );
        // Scores past 16 bits: the kernels must notice and fall back to the reference.
        let long = w.repeat(7000);
        let views: Vec<&[u8]> = vec![&long];
        for kernel in Kernel::ALL.into_iter().filter(|k| k.available()) {
            assert_eq!(
                kernel.scores(&long, &views, &s),
                vec![77_000],
                "{}",
                kernel.name()
            );
        }
    }
}

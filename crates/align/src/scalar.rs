//! The reference: Smith-Waterman local alignment score with affine gaps (Gotoh), one cell at
//! a time in 32-bit integers. Plain and slow on purpose; the striped kernels must give the
//! same scores.

use crate::matrix::Scoring;

/// Far below any score, yet safe to subtract penalties from.
const NEG: i32 = i32::MIN / 4;

/// The best local alignment score of `query` against `target` (both encoded).
pub fn score(query: &[u8], target: &[u8], scoring: &Scoring) -> i32 {
    let open = i32::from(scoring.open);
    let extend = i32::from(scoring.extend);
    // h[i], e[i]: H and E of query position i in the previous target column.
    let mut h = vec![0i32; query.len()];
    let mut e = vec![NEG; query.len()];
    let mut best = 0;
    for &t in target {
        let mut diagonal = 0; // H(i-1, j-1); the boundary row is 0
        let mut up = 0; // H(i-1, j)
        let mut f = NEG; // F(i, j): a gap in the target, coming down the column
        for (i, &q) in query.iter().enumerate() {
            let e_here = (e[i] - extend).max(h[i] - open);
            f = (f - extend).max(up - open);
            let here = (diagonal + scoring.score(q, t)).max(e_here).max(f).max(0);
            diagonal = h[i];
            h[i] = here;
            e[i] = e_here;
            up = here;
            best = best.max(here);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::encode;

    fn sw(a: &str, b: &str) -> i32 {
        score(
            &encode(a.as_bytes()),
            &encode(b.as_bytes()),
            &Scoring::default(),
        )
    }

    #[test]
    fn hand_checked_scores() {
        assert_eq!(sw("", "ACDE"), 0);
        assert_eq!(sw("W", "W"), 11);
        // Identity: the sum of the diagonal.
        assert_eq!(
            sw("HEAGAWGHEE", "HEAGAWGHEE"),
            8 + 5 + 4 + 6 + 4 + 11 + 6 + 8 + 5 + 5
        );
        // Nothing scores above zero against a stop.
        assert_eq!(sw("AAAA", "****"), 0);
        // WWWW|WWWW with one inserted G: a gap of one costs open (10), less than the 44 of
        // the second half, so the whole alignment wins: 88 - 10 = 78.
        assert_eq!(sw("WWWWWWWW", "WWWWGWWWW"), 78);
        // A gap of three: 10 + 2 * 1 = 12.
        assert_eq!(sw("WWWWWWWW", "WWWWGGGWWWW"), 88 - 12);
        // Symmetric in its arguments (BLOSUM62 is).
        assert_eq!(sw("PAWHEAE", "HEAGAWGHEE"), sw("HEAGAWGHEE", "PAWHEAE"));
    }
}

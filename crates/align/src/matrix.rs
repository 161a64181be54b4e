//! The scoring scheme: the protein alphabet (NCBI's order, 24 letters), BLOSUM62, and affine
//! gap penalties. A gap of length k costs `open + (k - 1) * extend` (the convention of
//! parasail, SSW and EMBOSS); the default is open 10, extend 1.

/// The letters residues are encoded as, in NCBI's BLOSUM order: the 20 amino acids, then B
/// (D or N), Z (E or Q), X (any) and `*` (stop).
pub const ALPHABET: &[u8; 24] = b"ARNDCQEGHILKMFPSTWYVBZX*";

/// The number of letters.
pub const LETTERS: usize = ALPHABET.len();

/// The code of X, which every letter outside the alphabet (U, O, J, digits...) becomes.
pub const X: u8 = 22;

/// BLOSUM62 (Henikoff & Henikoff 1992), rows and columns in [`ALPHABET`] order.
#[rustfmt::skip]
pub const BLOSUM62: [[i8; LETTERS]; LETTERS] = [
    // A   R   N   D   C   Q   E   G   H   I   L   K   M   F   P   S   T   W   Y   V   B   Z   X   *
    [  4, -1, -2, -2,  0, -1, -1,  0, -2, -1, -1, -1, -1, -2, -1,  1,  0, -3, -2,  0, -2, -1,  0, -4], // A
    [ -1,  5,  0, -2, -3,  1,  0, -2,  0, -3, -2,  2, -1, -3, -2, -1, -1, -3, -2, -3, -1,  0, -1, -4], // R
    [ -2,  0,  6,  1, -3,  0,  0,  0,  1, -3, -3,  0, -2, -3, -2,  1,  0, -4, -2, -3,  3,  0, -1, -4], // N
    [ -2, -2,  1,  6, -3,  0,  2, -1, -1, -3, -4, -1, -3, -3, -1,  0, -1, -4, -3, -3,  4,  1, -1, -4], // D
    [  0, -3, -3, -3,  9, -3, -4, -3, -3, -1, -1, -3, -1, -2, -3, -1, -1, -2, -2, -1, -3, -3, -2, -4], // C
    [ -1,  1,  0,  0, -3,  5,  2, -2,  0, -3, -2,  1,  0, -3, -1,  0, -1, -2, -1, -2,  0,  3, -1, -4], // Q
    [ -1,  0,  0,  2, -4,  2,  5, -2,  0, -3, -3,  1, -2, -3, -1,  0, -1, -3, -2, -2,  1,  4, -1, -4], // E
    [  0, -2,  0, -1, -3, -2, -2,  6, -2, -4, -4, -2, -3, -3, -2,  0, -2, -2, -3, -3, -1, -2, -1, -4], // G
    [ -2,  0,  1, -1, -3,  0,  0, -2,  8, -3, -3, -1, -2, -1, -2, -1, -2, -2,  2, -3,  0,  0, -1, -4], // H
    [ -1, -3, -3, -3, -1, -3, -3, -4, -3,  4,  2, -3,  1,  0, -3, -2, -1, -3, -1,  3, -3, -3, -1, -4], // I
    [ -1, -2, -3, -4, -1, -2, -3, -4, -3,  2,  4, -2,  2,  0, -3, -2, -1, -2, -1,  1, -4, -3, -1, -4], // L
    [ -1,  2,  0, -1, -3,  1,  1, -2, -1, -3, -2,  5, -1, -3, -1,  0, -1, -3, -2, -2,  0,  1, -1, -4], // K
    [ -1, -1, -2, -3, -1,  0, -2, -3, -2,  1,  2, -1,  5,  0, -2, -1, -1, -1, -1,  1, -3, -1, -1, -4], // M
    [ -2, -3, -3, -3, -2, -3, -3, -3, -1,  0,  0, -3,  0,  6, -4, -2, -2,  1,  3, -1, -3, -3, -1, -4], // F
    [ -1, -2, -2, -1, -3, -1, -1, -2, -2, -3, -3, -1, -2, -4,  7, -1, -1, -4, -3, -2, -2, -1, -2, -4], // P
    [  1, -1,  1,  0, -1,  0,  0,  0, -1, -2, -2,  0, -1, -2, -1,  4,  1, -3, -2, -2,  0,  0,  0, -4], // S
    [  0, -1,  0, -1, -1, -1, -1, -2, -2, -1, -1, -1, -1, -2, -1,  1,  5, -2, -2,  0, -1, -1,  0, -4], // T
    [ -3, -3, -4, -4, -2, -2, -3, -2, -2, -3, -2, -3, -1,  1, -4, -3, -2, 11,  2, -3, -4, -3, -2, -4], // W
    [ -2, -2, -2, -3, -2, -1, -2, -3,  2, -1, -1, -2, -1,  3, -3, -2, -2,  2,  7, -1, -3, -2, -1, -4], // Y
    [  0, -3, -3, -3, -1, -2, -2, -3, -3,  3,  1, -2,  1, -1, -2, -2,  0, -3, -1,  4, -3, -2, -1, -4], // V
    [ -2, -1,  3,  4, -3,  0,  1, -1,  0, -3, -4,  0, -3, -3, -2,  0, -1, -4, -3, -3,  4,  1, -1, -4], // B
    [ -1,  0,  0,  1, -3,  3,  4, -2,  0, -3, -3,  1, -1, -3, -1,  0, -1, -3, -2, -2,  1,  4, -1, -4], // Z
    [  0, -1, -1, -1, -2, -1, -1, -1, -1, -1, -1, -1, -1, -1, -2,  0,  0, -2, -1, -1, -1, -1, -1, -4], // X
    [ -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4,  1], // *
];

/// Letter to code, for every byte: the alphabet in either case; everything else is X.
const CODES: [u8; 256] = {
    let mut codes = [X; 256];
    let mut i = 0;
    while i < LETTERS {
        let letter = ALPHABET[i];
        codes[letter as usize] = i as u8;
        codes[letter.to_ascii_lowercase() as usize] = i as u8;
        i += 1;
    }
    codes
};

/// Encodes residues as alphabet codes (letters outside the alphabet become X).
pub fn encode(residues: &[u8]) -> Vec<u8> {
    residues.iter().map(|&b| CODES[b as usize]).collect()
}

/// The letter of a code.
pub fn letter(code: u8) -> u8 {
    ALPHABET[usize::from(code) % LETTERS]
}

/// A substitution matrix and affine gap penalties.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scoring {
    /// `matrix[a][b]`: the score of aligning code `a` with code `b`.
    pub matrix: [[i8; LETTERS]; LETTERS],
    /// The cost of a gap's first residue (positive).
    pub open: u16,
    /// The cost of each further residue of a gap (positive).
    pub extend: u16,
}

impl Default for Scoring {
    /// BLOSUM62, gaps open 10, extend 1.
    fn default() -> Scoring {
        Scoring::blosum62(10, 1)
    }
}

impl Scoring {
    /// BLOSUM62 with the given gap penalties. `extend` must be at least 1 and at most `open`.
    pub fn blosum62(open: u16, extend: u16) -> Scoring {
        assert!(
            extend >= 1 && extend <= open,
            "gap penalties: 1 <= extend <= open"
        );
        Scoring {
            matrix: BLOSUM62,
            open,
            extend,
        }
    }

    /// The score of codes `a` and `b`.
    #[inline]
    pub fn score(&self, a: u8, b: u8) -> i32 {
        i32::from(self.matrix[usize::from(a)][usize::from(b)])
    }

    /// The most negative entry, as a positive bias (0 if none is negative).
    pub fn bias(&self) -> u16 {
        let min = self.matrix.iter().flatten().copied().min().unwrap_or(0);
        u16::try_from(-i32::from(min.min(0))).unwrap_or(0)
    }

    /// A one-line description: `BLOSUM62, gaps open 10 extend 1`.
    pub fn describe(&self) -> String {
        let name = if self.matrix == BLOSUM62 {
            "BLOSUM62"
        } else {
            "custom matrix"
        };
        format!("{name}, gaps open {} extend {}", self.open, self.extend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blosum62_is_symmetric_with_its_known_diagonal() {
        for (a, row) in BLOSUM62.iter().enumerate() {
            for (b, &score) in row.iter().enumerate() {
                assert_eq!(score, BLOSUM62[b][a], "{a} {b}");
            }
        }
        let diagonal: Vec<i8> = (0..20).map(|i| BLOSUM62[i][i]).collect();
        assert_eq!(
            diagonal,
            [4, 5, 6, 6, 9, 5, 5, 6, 8, 4, 4, 5, 5, 6, 7, 4, 5, 11, 7, 4]
        );
        let s = Scoring::default();
        let code = |c: u8| encode(&[c])[0];
        assert_eq!(s.score(code(b'W'), code(b'Y')), 2);
        assert_eq!(s.score(code(b'I'), code(b'V')), 3);
        assert_eq!(s.score(code(b'W'), code(b'P')), -4);
        assert_eq!(s.bias(), 4);
    }

    #[test]
    fn letters_outside_the_alphabet_are_x() {
        assert_eq!(encode(b"ArU*j1"), vec![0, 1, X, 23, X, X]);
        assert_eq!(letter(encode(b"w")[0]), b'W');
    }
}

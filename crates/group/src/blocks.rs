//! rsync's algorithm for `roost psync`: block signatures at the members, a delta against
//! the source at the client, and the patch a member applies to its old copy.
//!
//! A member's *signature* is its length and, for every block of `block_size` bytes, a weak
//! rolling checksum (rsync's: two 16-bit sums) and a strong one (the first 8 bytes of
//! SHA-256). Identical copies have identical signatures, so the signature aggregation
//! groups members by content as it climbs the tree. For each group the client slides a
//! window over the source, rolling the weak sum one byte at a time; where a window's sums
//! match a block of the old copy it sends "copy block N", elsewhere the literal bytes. The
//! member rebuilds the file from its old blocks and the literals.

use crate::codec::{DecodeError, Decoder, Encoder};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// rsync's weak checksum of a block: `a` = sum of bytes, `b` = sum of prefix sums, each mod
/// 2^16, packed as `a | b << 16`.
pub fn weak(block: &[u8]) -> u32 {
    let (mut a, mut b) = (0u32, 0u32);
    for (i, &x) in block.iter().enumerate() {
        a = a.wrapping_add(u32::from(x));
        b = b.wrapping_add((block.len() - i) as u32 * u32::from(x));
    }
    (a & 0xffff) | (b & 0xffff) << 16
}

fn strong(block: &[u8]) -> [u8; 8] {
    let digest = Sha256::digest(block);
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

/// A copy's signature.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Signature {
    pub length: u64,
    pub block_size: u32,
    /// (weak, strong) per block, the last one possibly short.
    pub blocks: Vec<(u32, [u8; 8])>,
}

impl Signature {
    pub fn of(data: &[u8], block_size: u32) -> Signature {
        let size = block_size.max(1) as usize;
        Signature {
            length: data.len() as u64,
            block_size: size as u32,
            blocks: data.chunks(size).map(|b| (weak(b), strong(b))).collect(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::new();
        e.uint(self.length).uint(self.block_size.into());
        e.uint(self.blocks.len() as u64);
        for (w, s) in &self.blocks {
            e.uint((*w).into()).blob(s);
        }
        e.finish()
    }

    pub fn decode(bytes: &[u8]) -> Result<Signature, DecodeError> {
        let mut d = Decoder::new(bytes);
        let length = d.uint()?;
        let block_size = d.u32()?;
        if block_size == 0 {
            return Err(DecodeError("block size 0"));
        }
        let mut blocks = Vec::with_capacity(d.count()?.min(1 << 20));
        let n = blocks.capacity();
        for _ in 0..n {
            let w = d.u32()?;
            let s: [u8; 8] = d
                .blob()?
                .try_into()
                .map_err(|_| DecodeError("bad checksum"))?;
            blocks.push((w, s));
        }
        d.end()?;
        Ok(Signature {
            length,
            block_size,
            blocks,
        })
    }
}

/// One step of a patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Block `n` of the old copy.
    Copy(u32),
    /// New bytes.
    Literal(Vec<u8>),
}

/// How to turn a copy with signature `old` into `source`.
pub fn delta(source: &[u8], old: &Signature) -> Vec<Piece> {
    let size = old.block_size as usize;
    let mut by_weak: HashMap<u32, Vec<u32>> = HashMap::new();
    for (i, (w, _)) in old.blocks.iter().enumerate() {
        // Only whole blocks are matched by the sliding window (a short last block is matched
        // only at the very end of the source, below).
        if (i + 1) * size <= old.length as usize {
            by_weak.entry(*w).or_default().push(i as u32);
        }
    }
    let mut pieces = Vec::new();
    let mut literal = Vec::new();
    let mut at = 0;
    let mut sum: Option<(u32, u32)> = None; // (a, b) of source[at..at + size]
    while at + size <= source.len() && size > 0 {
        let (a, b) = *sum.get_or_insert_with(|| {
            let w = weak(&source[at..at + size]);
            (w & 0xffff, w >> 16)
        });
        let w = (a & 0xffff) | (b & 0xffff) << 16;
        let window = &source[at..at + size];
        let found = by_weak.get(&w).and_then(|candidates| {
            let s = strong(window);
            candidates
                .iter()
                .copied()
                .find(|&n| old.blocks[n as usize].1 == s)
        });
        if let Some(n) = found {
            if !literal.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(&mut literal)));
            }
            pieces.push(Piece::Copy(n));
            at += size;
            sum = None;
            continue;
        }
        // Roll one byte: drop source[at], add source[at + size].
        let out = u32::from(source[at]);
        literal.push(source[at]);
        at += 1;
        if at + size <= source.len() {
            let inn = u32::from(source[at + size - 1]);
            let a2 = a.wrapping_sub(out).wrapping_add(inn) & 0xffff;
            let b2 = b
                .wrapping_sub((size as u32).wrapping_mul(out))
                .wrapping_add(a2)
                & 0xffff;
            sum = Some((a2, b2));
        }
    }
    let tail = &source[at..];
    let last = old.blocks.len().checked_sub(1);
    let short_last =
        last.filter(|&n| (n + 1) * size > old.length as usize && n * size < old.length as usize);
    match short_last {
        Some(n) if !tail.is_empty() && old.blocks[n] == (weak(tail), strong(tail)) => {
            if !literal.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(&mut literal)));
            }
            pieces.push(Piece::Copy(n as u32));
        }
        _ => literal.extend_from_slice(tail),
    }
    if !literal.is_empty() {
        pieces.push(Piece::Literal(literal));
    }
    pieces
}

/// Rebuilds the new content from the old copy and a patch; `None` if the patch names a
/// block the old copy does not have.
pub fn apply(old: &[u8], block_size: u32, pieces: &[Piece]) -> Option<Vec<u8>> {
    let size = block_size.max(1) as usize;
    let mut out = Vec::new();
    for p in pieces {
        match p {
            Piece::Literal(bytes) => out.extend_from_slice(bytes),
            Piece::Copy(n) => {
                let start = (*n as usize).checked_mul(size)?;
                if start >= old.len() {
                    return None;
                }
                out.extend_from_slice(&old[start..(start + size).min(old.len())]);
            }
        }
    }
    Some(out)
}

/// Bytes a patch costs on the wire beyond its encoding's framing: literals, plus 4 per copy.
pub fn cost(pieces: &[Piece]) -> usize {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Copy(_) => 4,
            Piece::Literal(b) => b.len(),
        })
        .sum()
}

pub fn encode_pieces(e: &mut Encoder, pieces: &[Piece]) {
    e.uint(pieces.len() as u64);
    for p in pieces {
        match p {
            Piece::Copy(n) => {
                e.uint(0).uint((*n).into());
            }
            Piece::Literal(bytes) => {
                e.uint(1).blob(bytes);
            }
        }
    }
}

pub fn decode_pieces(d: &mut Decoder<'_>) -> Result<Vec<Piece>, DecodeError> {
    let n = d.count()?;
    let mut pieces = Vec::with_capacity(n);
    for _ in 0..n {
        pieces.push(match d.uint()? {
            0 => Piece::Copy(d.u32()?),
            1 => Piece::Literal(d.blob()?.to_vec()),
            _ => return Err(DecodeError("bad patch piece")),
        });
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect()
    }

    fn round_trip(old: &[u8], new: &[u8], block: u32) -> Vec<Piece> {
        let sig = Signature::of(old, block);
        assert_eq!(Signature::decode(&sig.encode()).unwrap(), sig);
        let pieces = delta(new, &sig);
        assert_eq!(
            apply(old, block, &pieces).unwrap(),
            new,
            "old {} new {}",
            old.len(),
            new.len()
        );
        let mut e = Encoder::new();
        encode_pieces(&mut e, &pieces);
        let bytes = e.finish();
        assert_eq!(decode_pieces(&mut Decoder::new(&bytes)).unwrap(), pieces);
        pieces
    }

    #[test]
    fn the_rolling_sum_equals_the_sum_computed_afresh() {
        let data = sample(5000, 1);
        let old = Signature::of(&data[1..], 64);
        // Shifted by one byte: every block is found again by rolling.
        let pieces = delta(&data[1..], &old);
        assert!(pieces.iter().all(|p| matches!(p, Piece::Copy(_))));
        let shifted = round_trip(&data[1..], &data, 64);
        assert_eq!(cost(&shifted), 1 + 4 * (old.blocks.len()));
    }

    #[test]
    fn inserted_changed_and_removed_bytes_cost_little() {
        let old = sample(100_000, 2);
        let mut new = old.clone();
        new.splice(5000..5000, b"inserted text".iter().copied());
        new[60_000] ^= 0xff;
        new.drain(80_000..80_100);
        let pieces = round_trip(&old, &new, 1024);
        assert!(cost(&pieces) < 3 * 1024 + 13 + 4 * 100, "{}", cost(&pieces));
    }

    #[test]
    fn empty_short_and_unrelated_files_round_trip() {
        round_trip(b"", b"new content", 1024);
        round_trip(b"old", b"", 1024);
        round_trip(b"same short file", b"same short file", 1024);
        round_trip(&sample(3000, 3), &sample(2500, 4), 512);
        round_trip(&sample(3000, 5), &sample(3000, 5), 1000);
        assert_eq!(apply(b"abc", 2, &[Piece::Copy(5)]), None);
    }
}

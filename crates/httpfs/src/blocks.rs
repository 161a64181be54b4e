//! Per-block hashes of large files (`docs/httpfs.md`, "Large files in blocks"): an index
//! entry of a file at or over `roost index --block-threshold` carries the SHA-256 of each
//! block of `--block-size` bytes (the last one shorter), on a `b` line after its `f` line,
//! so the driver can fetch such a file as parallel Range requests and check each block as
//! it arrives. [`Blocks::parse`] never panics and never allocates by a count it was given;
//! [`Hasher`] computes a file's whole hash and its block hashes in one pass.

use sha2::Digest as _;
use std::fmt::Write as _;

/// The default block size: 4 MiB (see `docs/httpfs.md` for why).
pub const DEFAULT_BLOCK_SIZE: u64 = 4 << 20;
/// The default size from which files get block hashes (and are fetched in blocks).
pub const DEFAULT_THRESHOLD: u64 = 64 << 20;
/// The smallest block size an index may record.
pub const MIN_BLOCK_SIZE: u64 = 64 << 10;
/// The largest block size an index may record.
pub const MAX_BLOCK_SIZE: u64 = 1 << 30;

/// The block hashes of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocks {
    /// Bytes in each block but the last (a power of two, [`MIN_BLOCK_SIZE`] to
    /// [`MAX_BLOCK_SIZE`]).
    pub size: u64,
    /// The SHA-256 of each block, in order: as many as the file's size needs.
    pub hashes: Vec<[u8; 32]>,
}

/// Checks a block size: a power of two from [`MIN_BLOCK_SIZE`] to [`MAX_BLOCK_SIZE`].
pub fn check_block_size(size: u64) -> Result<(), String> {
    if size.is_power_of_two() && (MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&size) {
        Ok(())
    } else {
        Err(format!(
            "bad block size {size} (expected a power of two from {MIN_BLOCK_SIZE} to \
             {MAX_BLOCK_SIZE})"
        ))
    }
}

impl Blocks {
    /// How many blocks of `block_size` bytes a file of `file_size` bytes has.
    pub fn count(file_size: u64, block_size: u64) -> u64 {
        file_size.div_ceil(block_size)
    }

    /// The first byte and the length of block `i` of a file of `file_size` bytes.
    pub fn range(&self, i: usize, file_size: u64) -> (u64, u64) {
        let start = i as u64 * self.size;
        (start, self.size.min(file_size.saturating_sub(start)))
    }

    /// The fields of a `b` line after the `b` (`BLOCKSIZE HASH...`), for a file of
    /// `file_size` bytes; the error says what is wrong.
    pub fn parse(fields: &[&str], file_size: u64) -> Result<Blocks, String> {
        let Some((size, hashes)) = fields.split_first() else {
            return Err("expected a block size and block hashes".into());
        };
        let size: u64 = size
            .parse()
            .map_err(|_| format!("bad block size {size:?}"))?;
        check_block_size(size)?;
        let want = Blocks::count(file_size, size);
        if want != hashes.len() as u64 {
            return Err(format!(
                "expected {want} block hashes for {file_size} bytes in blocks of {size}, \
                 found {}",
                hashes.len()
            ));
        }
        let hashes = hashes
            .iter()
            .enumerate()
            .map(|(i, h)| {
                crate::index::unhex(h)
                    .and_then(|b| <[u8; 32]>::try_from(b).ok())
                    .ok_or_else(|| format!("bad sha256 of block {i}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Blocks { size, hashes })
    }

    /// The `b` line (without its newline).
    pub fn line(&self) -> String {
        let mut out = format!("b {}", self.size);
        for h in &self.hashes {
            let _ = write!(out, " {}", crate::index::hex(h));
        }
        out
    }

    /// Whether `data` is block `i` (its SHA-256 is the one listed).
    pub fn is_block(&self, i: usize, data: &[u8]) -> bool {
        self.hashes
            .get(i)
            .is_some_and(|h| sha2::Sha256::digest(data).as_slice() == h)
    }
}

/// The SHA-256 of a stream as a whole and, if asked, of each of its blocks.
pub struct Hasher {
    whole: sha2::Sha256,
    blocks: Option<BlockHasher>,
    total: u64,
}

/// The block hashes so far, and the block being hashed.
struct BlockHasher {
    size: u64,
    current: sha2::Sha256,
    filled: u64,
    done: Vec<[u8; 32]>,
}

impl Hasher {
    /// A hasher of the whole, and of blocks of `block_size` bytes if given.
    pub fn new(block_size: Option<u64>) -> Hasher {
        Hasher {
            whole: sha2::Sha256::new(),
            blocks: block_size.map(|size| BlockHasher {
                size,
                current: sha2::Sha256::new(),
                filled: 0,
                done: Vec::new(),
            }),
            total: 0,
        }
    }

    /// Hashes the next bytes of the stream.
    pub fn update(&mut self, mut data: &[u8]) {
        self.whole.update(data);
        self.total += data.len() as u64;
        let Some(b) = &mut self.blocks else {
            return;
        };
        while !data.is_empty() {
            let take = ((b.size - b.filled) as usize).min(data.len());
            b.current.update(&data[..take]);
            b.filled += take as u64;
            data = &data[take..];
            if b.filled == b.size {
                b.done
                    .push(std::mem::take(&mut b.current).finalize().into());
                b.filled = 0;
            }
        }
    }

    /// The bytes hashed so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The whole stream's hash and, if asked, its block hashes.
    pub fn finish(self) -> ([u8; 32], Option<Blocks>) {
        let blocks = self.blocks.map(|mut b| {
            if b.filled > 0 {
                b.done.push(b.current.finalize().into());
            }
            Blocks {
                size: b.size,
                hashes: b.done,
            }
        });
        (self.whole.finalize().into(), blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(data: &[u8]) -> [u8; 32] {
        sha2::Sha256::digest(data).into()
    }

    #[test]
    fn a_stream_hashes_whole_and_in_blocks_however_it_is_cut() {
        let data: Vec<u8> = (0..(3 * MIN_BLOCK_SIZE + 100))
            .map(|i| (i * 13 % 256) as u8)
            .collect();
        for piece in [1, 999, MIN_BLOCK_SIZE as usize, 1 << 20] {
            let mut h = Hasher::new(Some(MIN_BLOCK_SIZE));
            for chunk in data.chunks(piece) {
                h.update(chunk);
            }
            assert_eq!(h.total(), data.len() as u64);
            let (whole, blocks) = h.finish();
            assert_eq!(whole, sha(&data));
            let blocks = blocks.unwrap();
            let want: Vec<[u8; 32]> = data.chunks(MIN_BLOCK_SIZE as usize).map(sha).collect();
            assert_eq!(blocks.hashes, want, "pieces of {piece}");
            assert_eq!(
                blocks.range(3, data.len() as u64),
                (3 * MIN_BLOCK_SIZE, 100)
            );
        }
        let (_, none) = Hasher::new(None).finish();
        assert_eq!(none, None);
        // An empty stream has no blocks; an exact multiple no short last one.
        assert!(Hasher::new(Some(MIN_BLOCK_SIZE))
            .finish()
            .1
            .unwrap()
            .hashes
            .is_empty());
        let mut h = Hasher::new(Some(MIN_BLOCK_SIZE));
        h.update(&data[..2 * MIN_BLOCK_SIZE as usize]);
        assert_eq!(h.finish().1.unwrap().hashes.len(), 2);
    }

    #[test]
    fn block_lines_parse_back_and_bad_ones_say_why() {
        let b = Blocks {
            size: 1 << 20,
            hashes: vec![[1; 32], [2; 32], [3; 32]],
        };
        let line = b.line();
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields[0], "b");
        assert_eq!(Blocks::parse(&fields[1..], (2 << 20) + 1), Ok(b.clone()));
        let bad: &[(&[&str], u64, &str)] = &[
            (&[], 1, "expected a block size"),
            (&["x"], 1, "bad block size \"x\""),
            (
                &["1000000"],
                1,
                "bad block size 1000000 (expected a power of two",
            ),
            (&["4096"], 1, "bad block size 4096"),
            (&["2147483648"], 1, "bad block size"),
            (&["65536"], 65537, "expected 2 block hashes for 65537 bytes"),
            (&["65536", "00"], 1, "bad sha256 of block 0"),
            (&["18446744073709551616"], 1, "bad block size"),
        ];
        for (fields, file_size, want) in bad {
            let e = Blocks::parse(fields, *file_size).unwrap_err();
            assert!(e.contains(want), "{e:?} lacks {want:?}");
        }
        // A huge file with few hashes is refused without making room for its count.
        let e = Blocks::parse(&["65536"], u64::MAX).unwrap_err();
        assert!(e.contains("expected 281474976710656 block hashes"), "{e}");
    }
}

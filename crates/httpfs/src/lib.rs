//! HTTP as a read-only file system (the CDF paper's HTTP-FS, `docs/httpfs.md`): roost's
//! per-directory index and its writer ([`index`], used by `roost index`), cctools' GROW-FS
//! whole-tree listing ([`growfs`]), the HTTP client every agent shares ([`client`]), and the
//! driver that serves `/http/HOST[:PORT]/PATH` and `/https/...` to `roost run` ([`net`]),
//! which refuses indexes not signed by a pinned key when it is given some ([`sign`]),
//! fetches large files as parallel Range requests checked block by block ([`blocks`]),
//! prefetches the other files of a directory a program opens one of, and asks for indexes
//! again conditionally once their TTL is over.

// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod blocks;
pub mod client;
pub mod fuzz_check;
pub mod growfs;
pub mod index;
pub mod listing;
pub mod net;
pub mod scan;
pub mod sign;

pub use net::{HttpNet, HttpOptions};

/// `name` under the directory `dir` (`/` for the root).
pub(crate) fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = dir.to_vec();
    if !out.ends_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

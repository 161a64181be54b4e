//! Group file operations: open many files on many Chirp servers as one group, apply each
//! file operation to every member at once, and aggregate the results inside a tree of
//! relaying servers (after Brim and Miller, "Group File Operations for Scalable Tools and
//! Middleware").
//!
//! - [`api`]: `gopen` and the group operations (`gsize`, `gfiles`, `gindex`, `gstatus`,
//!   `gbindaggr`, read, write, lseek, ...), flat or through a root relay.
//! - [`ranges`]: member indices folded into strided ranges; [`hostset`]: names as `node[1-64/3]`.
//! - [`aggregate`]: status and data aggregations as partial + merge + finish;
//!   [`lines`]: line equivalence classes; [`blocks`]: rsync signatures and deltas;
//!   [`fields`]: numeric fields described by a regular expression; [`procs`]: process
//!   tables for ptop.
//! - [`codec`], [`message`]: the relay protocol's messages; [`delegation`]: the token by
//!   which a user lets relays act for it.
//! - [`node`]: one node of the tree (in the client or in a relaying server): its local
//!   members, its children, and the waves of requests and replies between them.

pub mod aggregate;
pub mod api;
pub mod blocks;
pub mod codec;
pub mod delegation;
pub mod fields;
pub mod fuzz_check;
pub mod hostset;
pub mod lines;
pub mod message;
pub mod node;
pub mod procs;
pub mod ranges;

/// Most members one group may have (and most indices one message may name).
pub const MAX_MEMBERS: usize = 1 << 20;

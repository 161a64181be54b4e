//! Group file operations: open many files on many Chirp servers as one group, apply each
//! file operation to every member at once, and aggregate the results inside a tree of
//! relaying servers (after Brim and Miller, "Group File Operations for Scalable Tools and
//! Middleware").
//!
//! - [`ranges`]: member indices folded into strided ranges; [`hostset`]: names as `node[1-64/3]`.
//! - [`aggregate`]: status and data aggregations as partial + merge + finish;
//!   [`lines`]: line equivalence classes.
//! - [`codec`], [`message`]: the relay protocol's messages; [`delegation`]: the token by
//!   which a user lets relays act for it.

pub mod aggregate;
pub mod codec;
pub mod hostset;
pub mod lines;
pub mod ranges;

/// Most members one group may have (and most indices one message may name).
pub const MAX_MEMBERS: usize = 1 << 20;

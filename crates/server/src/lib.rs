//! `roost serve`: a Chirp file server exporting one directory as a jail, with authentication,
//! per-directory ACLs and limits.
//!
//! - [`jail`]: path resolution that cannot leave the export.
//! - [`acl`]: per-directory access control lists.
//! - [`export`]: every name operation, checked and carried out.
//! - [`auth`]: the authentication handshake and its methods; [`socket_owner`]: who owns a
//!   local client's connection; [`throttle`]: slowing down guessers; [`random`]: bytes
//!   nobody may guess.
//! - [`session`]: one client's request loop; [`listener`]: accepting clients;
//!   [`stale_uploads`]: sweeping uploads a killed server left half-done.
//! - [`relay`]: group file operations (`group_open`, `group_op`), relayed down a tree.
//! - [`catalog_report`]: reporting this server to pool catalogs (`--catalog`).
//! - [`jobs`]: the Chirp job RPCs (`--jobs`): programs run in sandboxes on this host.
//! - [`reaper`]: forgetting the jobs and run directories clients abandoned.
//! - [`thermostat`]: the owner's limits on jobs; [`accounting`]: the ledger of what users
//!   consumed and owners offered, and the balances made from ledgers and prices.

// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

/// Set in a server's environment by `roost serve --supervise`: it is the supervised child
/// (its parent the supervisor).
pub const SUPERVISED_ENV: &str = "ROOST_SUPERVISED";

pub mod accounting;
pub mod acl;
pub mod auth;
pub mod catalog_report;
pub mod digest;
pub mod export;
pub mod input;
pub mod jail;
pub mod jobs;
pub mod listener;
pub mod lock;
pub mod log;
pub mod metrics;
pub mod output;
pub mod reaper;
pub mod relay;
pub mod session;
pub mod socket_owner;
pub mod splice;
pub mod stale_uploads;
pub mod thermostat;
pub mod throttle;
/// The one source of random bytes (the client's: group relays and pool runs use it too).
pub use roost_client::random;

pub use listener::{announced_addr, announcement, Limits, Server};

//! A Chirp client: connect, authenticate, and every RPC, with timeouts and pipelined bulk I/O.
//!
//! ```no_run
//! use roost_client::{Client, Options};
//! let mut c = Client::connect("127.0.0.1:9094", &Options::from_env()?)?;
//! println!("I am {}", c.subject());
//! let mut data = Vec::new();
//! c.getfile("/hello.txt", &mut data)?;
//! # Ok::<(), roost_client::Error>(())
//! ```
//!
//! Blocking `std::net` sockets, no async runtime. [`Client`] holds one authenticated
//! connection; [`ChirpUrl`] parses `chirp://host:port/path` and `/chirp/host:port/path`;
//! [`tree`] copies files and directory trees with progress reports (downloads through
//! [`partial`] files, renamed into place when complete); [`jobs`] holds the job
//! RPCs.

mod auth;
mod batch;
mod bulk;
mod client;
mod error;
pub mod jobs;
mod lines;
#[cfg(test)]
mod mock;
pub mod partial;
pub mod random;
pub mod receive;
mod rpc;
mod socket;
pub mod tree;
mod url;
mod xattr;

pub use auth::{read_secret_file, Credentials, HmacKey};
pub use batch::Reply;
pub use client::{Client, Options};
pub use error::{io_words, Error, Result};
pub use roost_wire::auth::{Method, Subject};
pub use roost_wire::{AclEntry, DirEntry, ErrorCode, OpenFlags, Stat, StatFs};
pub use socket::{set_keepalive, Keepalive};
pub use url::{split_host_port, ChirpUrl};

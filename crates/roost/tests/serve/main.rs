//! `roost serve`, the Chirp file server, started for real on 127.0.0.1 and talked to byte
//! by byte, by roost's client and by cctools': one test binary, a module per subject (a
//! binary links all of roost's crates, so one instead of one per file saves a link each).

mod acl;
mod appends;
mod cli;
mod hardening;
mod interop;
mod ipv6;
mod jail;
mod logins;
mod logs;
mod malformed;
mod metrics;
mod rpc;
mod state;

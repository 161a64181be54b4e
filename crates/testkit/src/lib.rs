//! What roost's integration tests (crates/roost/tests) share, as one library instead of a
//! copy of each support module compiled into every test binary: its items are public, so
//! the compiler does not call the ones a given test leaves unused dead code.
//!
//! - [`run`]: the `roost` binary, scratch trees, C test programs, `roost run` in both
//!   delivery modes.
//! - [`serve`]: a real `roost serve` on 127.0.0.1 and raw Chirp connections to it.
//! - [`remote`]: a `roost serve` export and a cache for `roost run` over Chirp.
//! - [`web`]: web servers (python, nginx) and a served tree for `roost run` over HTTP.
//! - [`group`], [`jobs`], [`bag`], [`pool`], [`slurm`], [`netns`]: clusters of servers,
//!   job servers, bags of tasks, catalogs, a local Slurm, hosts in network namespaces.
//! - [`peer`]: whether a peer a test needs (another project's program, root, a kernel
//!   feature) is here; a missing one fails the test under CI and is said otherwise.

pub mod bag;
pub mod group;
pub mod jobs;
pub mod netns;
pub mod peer;
pub mod pool;
pub mod remote;
pub mod run;
pub mod serve;
pub mod slurm;
pub mod web;

use std::path::{Path, PathBuf};

/// The `roost` binary cargo built for the running test: `target/PROFILE/roost` beside
/// `target/PROFILE/deps/TEST-HASH`, what `env!("CARGO_BIN_EXE_roost")` names in a test of
/// the roost crate (a library is not given that variable).
pub fn roost_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|profile| profile.join("roost"))
        .expect("a test binary in target/PROFILE/deps");
    assert!(
        bin.is_file(),
        "no roost binary at {} (run the tests with cargo test -p roost)",
        bin.display()
    );
    bin
}

/// crates/roost/tests, where the sources of the test programs (`run_support/`) sit beside
/// the tests that use them.
pub fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../roost/tests")
}

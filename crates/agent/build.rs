//! Builds the in-process fast path (`fastpath/roost_fastpath.c` and the parts beside it)
//! into a shared object that the agent carries in its own binary and writes out for each run
//! (`src/fastpath`). It is C built without the C library's start files: it must load into
//! any dynamically linked program and run from signal handlers.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let so = out.join("roost_fastpath.so");
    let sources = [
        "fastpath/roost_fastpath.c",
        "fastpath/realpath.c",
        "fastpath/dirs.c",
        "fastpath/streams.c",
    ];
    for file in sources
        .iter()
        .chain(&["fastpath/table.h", "fastpath/calls.h"])
    {
        println!("cargo:rerun-if-changed={file}");
    }
    println!("cargo:rerun-if-env-changed=CC");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args([
            "-O2",
            "-fPIC",
            "-shared",
            "-nostdlib",
            "-fno-builtin",
            "-ffreestanding",
            "-mno-red-zone",
            "-fvisibility=hidden",
            "-fno-stack-protector",
            "-fno-asynchronous-unwind-tables",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wl,-z,noexecstack",
            "-Wl,-z,now",
            "-Wl,--build-id=none",
            "-o",
        ])
        .arg(&so)
        .args(sources)
        .status()
        .unwrap_or_else(|e| panic!("roost-agent needs a C compiler ({cc}): {e}"));
    assert!(status.success(), "{cc} could not build {sources:?}");
}

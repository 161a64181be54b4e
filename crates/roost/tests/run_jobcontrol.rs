//! Interactive use: `roost run -- bash -i` in a pseudo-terminal keeps job control (Ctrl-Z,
//! fg), Ctrl-C and terminal size changes, and exits with bash's code
//! (run_support/jobctl.py drives the terminal); a job run under roost from an outer
//! interactive shell stops and resumes as its program does (run_support/outer_shell.py).

use roost_testkit::run::*;
use std::path::Path;
use std::process::{Command, Output};

/// Runs `run_support/SCRIPT` (which drives a pseudo-terminal) with roost's path.
fn drive(script: &str) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/run_support")
        .join(script);
    Command::new("python3")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_roost"))
        .output()
        .unwrap()
}

#[test]
fn interactive_bash_keeps_job_control_ctrl_c_and_resizes() {
    let o = drive("jobctl.py");
    assert_eq!(
        stdout(&o),
        "stopped True\ninterrupted True\nresized True\nexit 5\n",
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_job_run_under_roost_stops_and_resumes_as_the_program_does() {
    let o = drive("outer_shell.py");
    assert_eq!(
        stdout(&o),
        "ctrl-z stops the job True\nfg finishes it True\n\
         a stopped program stops the job True\nfg finishes it True\n",
        "{}",
        stderr(&o)
    );
}

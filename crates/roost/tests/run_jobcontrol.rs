//! Interactive use: `roost run -- bash -i` in a pseudo-terminal keeps job control (Ctrl-Z,
//! fg), Ctrl-C and terminal size changes, and exits with bash's code
//! (run_support/jobctl.py drives the terminal).

mod run_support;
use run_support::*;
use std::path::Path;
use std::process::Command;

#[test]
fn interactive_bash_keeps_job_control_ctrl_c_and_resizes() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run_support/jobctl.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_roost"))
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        "stopped True\ninterrupted True\nresized True\nexit 5\n",
        "{}",
        stderr(&o)
    );
}

//! CPython's own test suite, a file- and process-heavy subset, gives the same results under
//! `roost run` (with a mount list, so every path call is trapped) as natively: the same
//! totals and the same failing tests. About two and a half minutes on two cores, run by the
//! suite like every other test (`cargo test -p roost --release --test run_cpython` alone).

mod run_support;
use run_support::*;
use std::collections::BTreeSet;
use std::process::{Command, Output};

/// The totals line and the failing test names of a `python3 -m test -v` run.
fn outcome(o: &Output) -> (String, BTreeSet<String>) {
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let totals = text
        .lines()
        .find(|l| l.starts_with("Total tests:"))
        .unwrap_or_else(|| panic!("no totals in:\n{text}"))
        .to_string();
    let failing = text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("FAIL: ")
                .or_else(|| l.strip_prefix("ERROR: "))
        })
        .map(str::to_string)
        .collect();
    (totals, failing)
}

fn python_tests(modules: &[&str]) -> Command {
    let mut c = Command::new("python3");
    c.args(["-m", "test", "-v", "-j1"]).args(modules);
    c
}

fn compare(modules: &[&str]) {
    if Command::new("python3")
        .args(["-c", "import test.test_posix"])
        .output()
        .map_or(true, |o| !o.status.success())
    {
        panic!("python3's test package is missing (Debian: apt install libpython3.11-testsuite)");
    }
    let work = Tree::new("cpython");
    let native = python_tests(modules)
        .current_dir(&work.root)
        .output()
        .unwrap();
    let mut traced = roost();
    traced
        .args([
            "run",
            "--mount",
            "/roost-cpython-unused=/nonexistent",
            "--",
            "python3",
        ])
        .args(["-m", "test", "-v", "-j1"])
        .args(modules)
        .current_dir(&work.root);
    let traced = traced.output().unwrap();
    assert_eq!(outcome(&traced), outcome(&native));
}

#[test]
fn cpython_file_and_process_subset_matches_native() {
    compare(&[
        "test_os",
        "test_posix",
        "test_shutil",
        "test_subprocess",
        "test_signal",
        "test_threading",
        "test_tempfile",
        "test_glob",
        "test_pathlib",
    ]);
}

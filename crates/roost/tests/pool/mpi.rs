//! MPI programs on pool data (issue 13, item 8): an unmodified Open MPI job (Debian's
//! `openmpi-bin`, 4 ranks on this host through `mpirun`) runs under `roost run` with its
//! program and its data on a `roost serve` export, reached through a mount in both
//! consistency modes: the program is executed from the server, every rank reads the input
//! from it and writes its part back, and the ranks exchange a message large enough for Open
//! MPI's single-copy path between processes. Output and parts must equal a native run's.

use roost_testkit::run::*;
use roost_testkit::serve::TestServer;
use std::path::Path;
use std::process::{Command, Output};

/// `mpirun` with 4 ranks on 2 cores, allowed as root (CI runs as root), shared memory
/// between the ranks and single copies of large messages by `process_vm_readv` (CMA).
fn mpirun(program: &str, input: &str, outdir: &str) -> Vec<String> {
    [
        "env",
        "OMPI_ALLOW_RUN_AS_ROOT=1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
        "mpirun",
        "--oversubscribe",
        "-np",
        "4",
        "--mca",
        "btl",
        "self,vader",
        "--mca",
        "btl_vader_single_copy_mechanism",
        "cma",
        program,
        input,
        outdir,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The job's output, its lines sorted (ranks print in any order).
fn lines(o: &Output) -> Vec<String> {
    let mut l: Vec<String> = stdout(o).lines().map(str::to_string).collect();
    l.sort();
    l
}

/// The parts the ranks wrote into `dir`, by name.
fn parts(dir: &Path) -> Vec<(String, String)> {
    let mut p: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(e.path()).unwrap())
        })
        .collect();
    p.sort();
    p
}

#[test]
fn an_mpi_job_runs_unmodified_on_pool_data_in_both_modes() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run_support/mpi_sum.c");
    let server = TestServer::start(&["--auth", "address", "--acl", "address:127.0.0.1=rwldpax"]);
    let export = server.root();
    let built = Command::new("mpicc")
        .args(["-O2", "-Wall", "-o"])
        .arg(export.join("mpi_sum"))
        .arg(&source)
        .status()
        .expect(
            "mpicc not found: install openmpi-bin and libopenmpi-dev (./scripts/test --install)",
        );
    assert!(built.success(), "mpicc failed");
    let numbers: String = (1..=5000).map(|n| format!("{}\n", n * 7 % 1013)).collect();
    std::fs::write(export.join("numbers"), numbers).unwrap();

    // The same job natively, on the export as a local directory.
    let local = export.to_str().unwrap();
    std::fs::create_dir(export.join("native")).unwrap();
    let argv = mpirun(
        &format!("{local}/mpi_sum"),
        &format!("{local}/numbers"),
        &format!("{local}/native"),
    );
    let native = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
    assert!(native.status.success(), "native: {}", stderr(&native));
    let want = lines(&native);
    assert_eq!(want.len(), 2, "{want:?}");
    let want_parts = parts(&export.join("native"));
    assert_eq!(want_parts.len(), 4);

    let cache = tempfile::tempdir().unwrap();
    for mode in ["", ":cached"] {
        let outdir = format!("out{}", mode.replace(':', "-"));
        std::fs::create_dir(export.join(&outdir)).unwrap();
        let mount = format!("/pool=/chirp/127.0.0.1:{}/{mode}", server.port);
        let argv = mpirun("/pool/mpi_sum", "/pool/numbers", &format!("/pool/{outdir}"));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let o = run_with_cache(cache.path(), &[], &["--mount", &mount], &argv)
            .output()
            .unwrap();
        assert!(o.status.success(), "{mode}: {}", stderr(&o));
        assert_eq!(lines(&o), want, "{mode}: {}", stderr(&o));
        // What the ranks wrote is on the server once roost has returned.
        let got = parts(&export.join(&outdir));
        assert_eq!(got, want_parts, "{mode}");
    }
}

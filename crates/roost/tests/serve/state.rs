//! Where a server keeps its state by default: an explicitly set `XDG_STATE_HOME` wins, even
//! as root, so test runs (and users who set it) leave nothing in `/var/lib/roost`.

use roost_testkit::serve::serve_as_given;

#[test]
fn the_default_ledger_is_under_an_explicit_xdg_state_home() {
    let export = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (mut child, line) = serve_as_given(
        export.path(),
        &["--listen", "127.0.0.1", "--port", "0"],
        &[("XDG_STATE_HOME", state.path())],
    );
    assert!(line.contains("listening"), "{line}");
    let ledgers: Vec<_> = std::fs::read_dir(state.path().join("roost/ledger"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(ledgers.len(), 1, "{ledgers:?}");
    let name = export
        .path()
        .to_string_lossy()
        .trim_start_matches('/')
        .replace('/', "-");
    assert!(ledgers[0].starts_with(&name), "{ledgers:?} for {name}");
}

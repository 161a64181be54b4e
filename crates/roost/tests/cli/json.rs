//! `--json` on the client commands (issue 31): `ls`, `stat`, `getacl`, `whoami` and `df`
//! print the field names docs/cli.md lists, with numbers as numbers and times as Unix
//! seconds, and what they say is what the real export holds (compared with the local
//! directory a real `roost serve` on 127.0.0.1 exports, as this process sees it).

use roost_catalog::json::{self, Value};
use roost_testkit::serve::{cli_ok, TestServer};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn parse(text: &str) -> Value {
    json::parse(text.as_bytes()).unwrap_or_else(|e| panic!("not JSON ({e:?}): {text}"))
}

fn int(v: &Value, key: &str) -> i64 {
    match v.get(key) {
        Some(Value::Int(i)) => *i,
        other => panic!("{key}: not an integer: {other:?} in {}", v.to_json()),
    }
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{key}: not a string in {}", v.to_json()))
}

/// A served directory with a file, a directory, a symbolic link and a name with a blank,
/// with modes and times the test chose.
fn populated() -> TestServer {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rwldpa"]);
    let root = server.root();
    std::fs::write(root.join("a.txt"), b"hello").unwrap();
    std::fs::set_permissions(root.join("a.txt"), PermissionsExt::from_mode(0o640)).unwrap();
    std::fs::write(root.join("b c"), vec![7u8; 70_000]).unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::set_permissions(root.join("sub"), PermissionsExt::from_mode(0o750)).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("ln")).unwrap();
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    std::fs::File::options()
        .write(true)
        .open(root.join("a.txt"))
        .unwrap()
        .set_modified(when)
        .unwrap();
    server
}

/// The fields every entry of `ls --json` and `stat --json` has, checked against `path`'s
/// metadata (not following a link).
fn check_entry(entry: &Value, path: &Path) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    let kind = if meta.is_dir() {
        "directory"
    } else if meta.file_type().is_symlink() {
        "symlink"
    } else {
        "file"
    };
    let what = path.display();
    assert_eq!(text(entry, "type"), kind, "{what}");
    assert_eq!(int(entry, "size"), meta.size() as i64, "{what}");
    assert_eq!(int(entry, "mode"), (meta.mode() & 0o7777) as i64, "{what}");
    assert_eq!(int(entry, "mtime"), meta.mtime(), "{what}");
    assert_eq!(int(entry, "nlink"), meta.nlink() as i64, "{what}");
    assert_eq!(int(entry, "uid"), meta.uid() as i64, "{what}");
    assert_eq!(int(entry, "inode"), meta.ino() as i64, "{what}");
    let mode_string = text(entry, "mode_string");
    assert_eq!(mode_string.len(), 10, "{what}");
    assert_eq!(
        &mode_string[..1],
        &kind[..1].replace('f', "-").replace('s', "l")
    );
}

#[test]
fn ls_json_lists_what_the_export_holds() {
    let server = populated();
    let url = format!("chirp://127.0.0.1:{}", server.port);
    let listing = parse(&cli_ok(&["ls", "--json", &format!("{url}/")]));
    let Value::Array(entries) = listing else {
        panic!("ls --json: not an array");
    };
    let mut local: Vec<String> = std::fs::read_dir(server.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with(".__"))
        .collect();
    local.sort();
    let names: Vec<&str> = entries.iter().map(|e| text(e, "name")).collect();
    assert_eq!(names, local);
    for entry in &entries {
        check_entry(entry, &server.root().join(text(entry, "name")));
    }
    let sub = entries.iter().find(|e| text(e, "name") == "sub").unwrap();
    assert_eq!(text(sub, "mode_string"), "drwxr-x---");
    let link = entries.iter().find(|e| text(e, "name") == "ln").unwrap();
    assert_eq!(text(link, "target"), "a.txt");
    let a = entries.iter().find(|e| text(e, "name") == "a.txt").unwrap();
    assert_eq!(int(a, "mtime"), 1_700_000_000);
    assert_eq!(text(a, "mode_string"), "-rw-r-----");
    // A file's URL lists the file alone, under its path.
    let one = parse(&cli_ok(&["ls", "--json", &format!("{url}/b c")]));
    let Value::Array(one) = one else {
        panic!("not an array");
    };
    assert_eq!(one.len(), 1);
    assert_eq!(text(&one[0], "name"), "/b c");
    check_entry(&one[0], &server.root().join("b c"));
}

#[test]
fn stat_json_matches_the_file() {
    let server = populated();
    let url = format!("chirp://127.0.0.1:{}", server.port);
    for name in ["a.txt", "b c", "sub"] {
        let st = parse(&cli_ok(&["stat", "--json", &format!("{url}/{name}")]));
        assert_eq!(text(&st, "path"), format!("/{name}"));
        check_entry(&st, &server.root().join(name));
        let meta = std::fs::metadata(server.root().join(name)).unwrap();
        assert_eq!(int(&st, "gid"), meta.gid() as i64);
        assert_eq!(int(&st, "atime"), meta.atime());
        assert_eq!(int(&st, "ctime"), meta.ctime());
    }
}

#[test]
fn getacl_and_whoami_json() {
    let server = populated();
    let url = format!("chirp://127.0.0.1:{}", server.port);
    cli_ok(&[
        "setacl",
        &format!("{url}/sub"),
        "hostname:*.example.org",
        "rl",
    ]);
    let acl = parse(&cli_ok(&["getacl", "--json", &format!("{url}/sub")]));
    let Value::Array(entries) = acl else {
        panic!("getacl --json: not an array");
    };
    // The same entries as the ACL file the server keeps in the directory.
    let file = std::fs::read_to_string(server.root().join("sub/.__acl")).unwrap();
    let mut on_disk: Vec<(String, String)> = file
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(s, r)| (s.to_string(), r.trim().to_string()))
        .collect();
    let mut got: Vec<(String, String)> = entries
        .iter()
        .map(|e| {
            (
                text(e, "subject").to_string(),
                text(e, "rights").to_string(),
            )
        })
        .collect();
    on_disk.sort();
    got.sort();
    assert_eq!(got, on_disk);
    assert!(got.contains(&("hostname:*.example.org".into(), "rl".into())));
    let me = parse(&cli_ok(&["whoami", "--json", &url]));
    assert_eq!(text(&me, "subject"), "address:127.0.0.1");
    assert_eq!(text(&me, "method"), "address");
    assert_eq!(text(&me, "name"), "127.0.0.1");
}

#[test]
fn df_reports_the_export_s_file_system() {
    let server = populated();
    let url = format!("chirp://127.0.0.1:{}", server.port);
    let df = parse(&cli_ok(&["df", "--json", &format!("{url}/")]));
    // The server answers with statfs(2) of the export: sizes are its counts of f_bsize.
    let mut local: libc::statfs = unsafe { std::mem::zeroed() };
    let path = std::ffi::CString::new(server.root().as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::statfs(path.as_ptr(), &mut local) }, 0);
    let unit = local.f_bsize as i64;
    assert_eq!(int(&df, "block_size"), unit);
    assert_eq!(int(&df, "total_bytes"), local.f_blocks as i64 * unit);
    assert_eq!(int(&df, "files"), local.f_files as i64);
    assert_eq!(int(&df, "type"), local.f_type as i64);
    // Free space moves as other programs write; a few megabytes either way is the same disk.
    let near = |a: i64, b: i64| (a - b).abs() <= 64 << 20;
    assert!(
        near(int(&df, "free_bytes"), local.f_bfree as i64 * unit),
        "{}",
        df.to_json()
    );
    assert!(
        near(int(&df, "available_bytes"), local.f_bavail as i64 * unit),
        "{}",
        df.to_json()
    );
    assert_eq!(
        int(&df, "used_bytes"),
        int(&df, "total_bytes") - int(&df, "free_bytes")
    );
    assert_eq!(text(&df, "server"), format!("127.0.0.1:{}", server.port));
    // Without --json: one line under a header, sizes as df -h shows them.
    let plain = cli_ok(&["df", &format!("{url}/")]);
    let lines: Vec<&str> = plain.lines().collect();
    assert_eq!(lines.len(), 2, "{plain}");
    assert!(lines[0].starts_with("SERVER"), "{plain}");
    assert!(
        lines[1].starts_with(&format!("127.0.0.1:{}", server.port)),
        "{plain}"
    );
}

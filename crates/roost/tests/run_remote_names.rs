//! Remote names that survive colon-separated lists: `/chirp/HOST+PORT/...` names the same
//! file as `/chirp/HOST:PORT/...`, and works where the colon form is split in two
//! (`LD_LIBRARY_PATH`, `PYTHONPATH`); `roost run` warns about a colon form in such a list.

use roost_testkit::remote::open_server;
use roost_testkit::run::*;
use std::path::Path;
use std::process::{Command, Output};

const MODES: [&[&str]; 2] = [&[], &["--chirp-mode", "cached"]];

fn gcc(args: &[&str]) {
    let st = Command::new("gcc").args(args).status().expect("gcc");
    assert!(st.success(), "gcc {args:?}");
}

/// `roost run MODE -- ARGV` with `var=value` in the program's environment.
fn run_with(cache: &Path, mode: &[&str], var: &str, value: &str, argv: &[&str]) -> Output {
    run_with_cache(cache, mode, &[], argv)
        .env(var, value)
        .output()
        .unwrap()
}

/// A library in a server's export, found through `LD_LIBRARY_PATH` by a program built
/// against a local copy: the colon-free name loads it, in both modes; the colon form is
/// split by the loader (which then looks in `/chirp/127.0.0.1`, the default port) and
/// roost says which name to write.
#[test]
fn ld_library_path_takes_the_colon_free_name() {
    let s = open_server();
    let zd = s.root().join("zd");
    std::fs::create_dir(&zd).unwrap();
    let build = tempfile::tempdir().unwrap();
    let lib_c = build.path().join("zd.c");
    std::fs::write(&lib_c, "int zd_answer(void) { return 42; }\n").unwrap();
    let main_c = build.path().join("main.c");
    std::fs::write(
        &main_c,
        "#include <stdio.h>\nint zd_answer(void);\n\
         int main(void) { printf(\"answer %d\\n\", zd_answer()); return 0; }\n",
    )
    .unwrap();
    let lib = zd.join("libzd.so");
    gcc(&[
        "-shared",
        "-fPIC",
        "-o",
        lib.to_str().unwrap(),
        lib_c.to_str().unwrap(),
    ]);
    let prog = build.path().join("usezd");
    gcc(&[
        "-o",
        prog.to_str().unwrap(),
        main_c.to_str().unwrap(),
        &format!("-L{}", zd.display()),
        "-lzd",
    ]);
    let prog = prog.to_str().unwrap();
    let colon_free = format!("/chirp/127.0.0.1+{}/zd", s.port);
    let colon = format!("/chirp/127.0.0.1:{}/zd", s.port);
    for mode in MODES {
        let cache = tempfile::tempdir().unwrap();
        let o = run_with(cache.path(), mode, "LD_LIBRARY_PATH", &colon_free, &[prog]);
        assert_eq!(stdout(&o), "answer 42\n", "{mode:?}: {}", stderr(&o));
        assert!(o.status.success());
        assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));

        let o = run_with(cache.path(), mode, "LD_LIBRARY_PATH", &colon, &[prog]);
        assert_eq!(o.status.code(), Some(127), "{mode:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!(
                "roost run: warning: LD_LIBRARY_PATH holds {colon}, which splits at its ':'"
            )) && stderr(&o).contains(&format!("write {colon_free}\n")),
            "{}",
            stderr(&o)
        );
    }
}

/// Python imports a module from the colon-free name in `PYTHONPATH`, and names it so.
#[test]
fn pythonpath_takes_the_colon_free_name() {
    let s = open_server();
    std::fs::create_dir(s.root().join("py")).unwrap();
    std::fs::write(s.root().join("py/roostmod.py"), "ANSWER = 42\n").unwrap();
    let colon_free = format!("/chirp/127.0.0.1+{}/py", s.port);
    for mode in MODES {
        let cache = tempfile::tempdir().unwrap();
        let o = run_with(
            cache.path(),
            mode,
            "PYTHONPATH",
            &colon_free,
            &[
                "python3",
                "-B",
                "-c",
                "import roostmod; print(roostmod.ANSWER, roostmod.__file__)",
            ],
        );
        assert_eq!(
            stdout(&o),
            format!("42 {colon_free}/roostmod.py\n"),
            "{mode:?}: {}",
            stderr(&o)
        );
    }
}

/// Both spellings name one file: what is written through one is read through the other,
/// and a mount takes either.
#[test]
fn both_spellings_name_the_same_files() {
    let s = open_server();
    let cache = tempfile::tempdir().unwrap();
    for mode in MODES {
        let script = format!(
            "echo one > /chirp/127.0.0.1+{p}/f && cat /chirp/127.0.0.1:{p}/f && \
             echo two >> /chirp/127.0.0.1:{p}/f && cat /chirp/127.0.0.1+{p}/f && cat /m/f",
            p = s.port
        );
        let mount = format!("/m=/chirp/127.0.0.1+{}/", s.port);
        let o = run_with_cache(
            cache.path(),
            mode,
            &["--mount", &mount],
            &["sh", "-c", &script],
        )
        .output()
        .unwrap();
        assert_eq!(
            stdout(&o),
            "one\none\ntwo\none\ntwo\n",
            "{mode:?}: {}",
            stderr(&o)
        );
        assert_eq!(
            std::fs::read_to_string(s.root().join("f")).unwrap(),
            "one\ntwo\n"
        );
    }
}

/// `roost run -q` says only errors: not the warning about a colon form.
#[test]
fn quiet_runs_keep_the_warning_to_themselves() {
    let cache = tempfile::tempdir().unwrap();
    let colon = "/chirp/127.0.0.1:9094/py";
    let loud = run_with(cache.path(), &[], "PYTHONPATH", colon, &["true"]);
    assert!(
        String::from_utf8_lossy(&loud.stderr).contains("roost run: warning: PYTHONPATH"),
        "{loud:?}"
    );
    let quiet = run_with(cache.path(), &["-q"], "PYTHONPATH", colon, &["true"]);
    assert!(quiet.status.success(), "{quiet:?}");
    assert_eq!(String::from_utf8_lossy(&quiet.stderr), "");
}

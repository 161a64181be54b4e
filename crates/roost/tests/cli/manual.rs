//! Shell completions and man pages come from the command line's definition: bash completes
//! subcommands and options with the script `roost completions bash` prints, and `roost man`
//! writes a page for roost and for each subcommand, holding its options.

use std::process::Command;

fn roost() -> Command {
    Command::new(env!("CARGO_BIN_EXE_roost"))
}

/// What bash's completion offers for the words typed so far (the last one being completed).
fn bash_completes(words: &[&str]) -> Vec<String> {
    let script = roost().args(["completions", "bash"]).output().unwrap();
    assert!(script.status.success());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("roost.bash");
    std::fs::write(&file, &script.stdout).unwrap();
    let typed = words.join(" ");
    let run = format!(
        "source {} && COMP_WORDS=({typed}) && COMP_CWORD={} && COMP_LINE='{typed}' && \
         COMP_POINT=${{#COMP_LINE}} && _roost roost '{}' '{}' && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display(),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let o = Command::new("bash").args(["-c", &run]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_subcommands_and_their_options() {
    assert_eq!(bash_completes(&["roost", "ser"]), ["serve"]);
    let run_options = bash_completes(&["roost", "run", "--chirp-m"]);
    assert_eq!(run_options, ["--chirp-mode"]);
    let modes = bash_completes(&["roost", "run", "--chirp-mode", ""]);
    assert_eq!(modes, ["direct", "cached"]);
}

#[test]
fn other_shells_get_scripts_and_a_closed_pipe_is_no_error() {
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = roost().args(["completions", shell]).output().unwrap();
        assert!(o.status.success(), "{shell}");
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("serve"),
            "{shell}"
        );
    }
    let o = Command::new("sh")
        .args([
            "-c",
            &format!("{} completions zsh | head -1", env!("CARGO_BIN_EXE_roost")),
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = roost().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn man_writes_a_page_for_roost_and_each_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let o = roost().arg("man").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let help = roost().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    // Every subcommand --help lists has its page.
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(listed.contains(&"run") && listed.contains(&"pcp"), "{help}");
    for name in &listed {
        assert!(
            out.join(format!("roost-{name}.1")).exists(),
            "no page for {name}"
        );
    }
    let run = std::fs::read_to_string(out.join("roost-run.1")).unwrap();
    assert!(run.contains(".TH roost-run 1"), "{run}");
    assert!(run.contains("chirp\\-mode"), "{run}");
    let top = std::fs::read_to_string(out.join("roost.1")).unwrap();
    assert!(
        top.contains(".TH roost 1") && top.contains("roost\\-serve"),
        "{top}"
    );
}

//! The `roost` command: thin subcommands over the roost libraries.

mod accounting;
mod background;
mod group_catalog;
mod group_cmds;
mod identity;
mod index;
mod job;
mod manual;
mod members;
mod pool;
mod pool_run;
mod progress;
mod remote;
mod run;
mod serve;
mod signals;
mod size;
mod supervise;
mod thermostat;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// roost lets unmodified programs use distributed storage, with no privileges.
#[derive(Parser)]
#[command(
    name = "roost",
    version,
    about,
    long_about = None,
    after_help = "\
Exit status: 0 on success. Client commands (ls ... whoami): 1 when the operation failed
(a bad location, no connection, a malformed ACL subject, or the server refused: the message
names host, path and cause), 2 for bad options; get and mv stopped by SIGINT, SIGTERM or
SIGHUP remove what they had written and end by that signal. roost serve: 0 after a clean
stop (SIGTERM, SIGINT, SIGHUP), 2 when it cannot start. roost accounting: 1 when a server
could not be read or a ledger holds corrupt records, 2 for bad options or prices. pgrep: 0
when a line matched, 1 when none did, 2 on errors; the other group tools: 1 when a member
failed. roost run: see `roost run --help`.

Sizes take K, M, G or T suffixes (16M); durations a unit: ms, s, m, h or d (250ms, 2m)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program with a private namespace (ptrace + seccomp interposition).
    Run(run::RunArgs),
    /// Export a directory over the Chirp protocol, with authentication and ACLs.
    Serve(Box<serve::ServeArgs>),
    /// Write the index files that let a plain web server serve DIR as a file system.
    Index(index::IndexArgs),
    /// Keep the pool's membership: servers report to it, `roost status` lists them.
    Catalog(pool::CatalogArgs),
    /// List the pool's servers from a catalog: address, owner, up or down, load, disk, memory.
    Status(pool::StatusArgs),
    /// Run programs on a server through the Chirp job RPCs: create, commit, status, wait,
    /// kill, reap, or run one from start to end.
    Job(job::JobArgs),
    /// Show or change the owner's limits on a running `roost serve --jobs` (its thermostat).
    Thermostat(thermostat::ThermostatArgs),
    /// Run a bag of tasks across the pool (`run`), or complib, its Smith-Waterman example.
    Pool(pool_run::PoolArgs),
    /// Gather servers' ledgers and print what each user consumed, what each owner
    /// contributed, and each account's surplus or deficit, by a price file.
    Accounting(accounting::AccountingArgs),
    #[command(flatten)]
    Remote(remote::RemoteCommand),
    #[command(flatten)]
    Group(group_cmds::GroupCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(manual::CompletionsArgs),
    /// Write the man pages (roost.1 and roost-SUBCOMMAND.1) into a directory.
    Man(manual::ManArgs),
}

impl Command {
    /// The command's -v and -q, for the libraries' messages; `None` for `serve`, which
    /// forwards them at its log level, and for the commands that only print text.
    fn verbosity(&self) -> Option<(bool, bool)> {
        match self {
            Command::Serve(_) | Command::Completions(_) | Command::Man(_) => None,
            Command::Run(args) => Some((args.verbose, args.quiet)),
            Command::Index(args) => Some((args.verbose, args.quiet)),
            Command::Catalog(args) => Some((args.verbose, false)),
            Command::Pool(args) => Some((false, args.quiet())),
            _ => Some((false, false)),
        }
    }
}

fn main() -> ExitCode {
    // `roost serve --jobs` starts each job's first process as roost itself, under another
    // name; it never gets here.
    roost_server::jobs::keeper::run_if_called();
    let cli = Cli::parse();
    // What rustls and ureq log comes out on standard error as roost serve's
    // `event=library` lines: their warnings and errors (errors only with -q, down to
    // debug with -v).
    if let Some((verbose, quiet)) = cli.command.verbosity() {
        roost_server::log::forward_library_logs_for_command(verbose, quiet);
    }
    match cli.command {
        Command::Run(args) => run::main(args),
        Command::Serve(args) => serve::main(*args),
        Command::Index(args) => index::main(args),
        Command::Catalog(args) => pool::catalog_main(args),
        Command::Status(args) => pool::status_main(args),
        Command::Job(args) => job::main(args),
        Command::Thermostat(args) => thermostat::main(args),
        Command::Pool(args) => pool_run::main(args),
        Command::Accounting(args) => accounting::main(args),
        Command::Remote(command) => remote::main(command),
        Command::Group(command) => group_cmds::main(command),
        Command::Completions(args) => manual::completions(args, Cli::command()),
        Command::Man(args) => manual::man(args, Cli::command()),
    }
}

/// The rules every subcommand's options follow, checked over the whole clap definition.
#[cfg(test)]
mod cli_rules {
    use super::Cli;
    use clap::{Arg, Command, CommandFactory, Parser};
    use std::time::Duration;

    /// Size and duration options kept as text and parsed when the command runs (by
    /// `size::parse_size`, `size::parse_duration`, or the thermostat schedule's grammar),
    /// so that their messages name the command: each is checked below with its parser.
    const PARSED_AT_RUN: [&str; 8] = [
        "index --block-threshold",
        "index --block-size",
        "index --expires-in",
        "run --http-block-threshold",
        "run --http-prefetch",
        "run --http-prefetch-max",
        "run --cache-size",
        "thermostat set --mem",
    ];

    /// Every option of every subcommand: its command path (`job wait`) and its definition.
    fn options(cmd: &Command, path: &str, out: &mut Vec<(String, Command, Arg)>) {
        for arg in cmd.get_arguments() {
            out.push((path.to_string(), cmd.clone(), arg.clone()));
        }
        for sub in cmd.get_subcommands() {
            let name = sub.get_name();
            let path = if path.is_empty() {
                name.to_string()
            } else {
                format!("{path} {name}")
            };
            options(sub, &path, out);
        }
    }

    /// What clap makes of `--LONG VALUE` given to `arg` alone (without what it requires).
    fn parse<T: Clone + Send + Sync + 'static>(arg: &Arg, value: &str) -> Option<T> {
        let id = arg.get_id().clone();
        let alone = Arg::new(id.clone())
            .long(id.clone())
            .value_parser(arg.get_value_parser().clone());
        let matches = Command::new("t")
            .arg(alone)
            .try_get_matches_from(["t", &format!("--{id}"), value])
            .ok()?;
        matches
            .try_get_one::<T>(arg.get_id().as_str())
            .ok()
            .flatten()
            .cloned()
    }

    #[test]
    fn short_flags_have_long_forms_and_sizes_and_durations_take_units() {
        let mut all = Vec::new();
        let mut cli = Cli::command();
        cli.build();
        options(&cli, "", &mut all);
        let mut problems = Vec::new();
        let mut seen_at_run = Vec::new();
        let (mut sizes, mut durations) = (0, 0);
        for (path, _, arg) in &all {
            let name = format!("{path} --{}", arg.get_long().unwrap_or("?"));
            if let Some(short) = arg.get_short() {
                if arg.get_long().is_none() && short != 'h' && short != 'V' {
                    problems.push(format!("{path} -{short}: no long form"));
                }
            }
            let Some(value_name) = arg.get_value_names().and_then(|v| v.first()) else {
                continue;
            };
            match value_name.as_str() {
                "SECONDS" | "MS" | "MICROSECONDS" | "BYTES" => {
                    problems.push(format!("{name}: {value_name}: a DURATION or SIZE"))
                }
                _ if PARSED_AT_RUN.contains(&name.as_str()) => seen_at_run.push(name),
                "SIZE" => {
                    sizes += 1;
                    let got = parse::<u64>(arg, "16M");
                    if got != Some(16 << 20) || parse::<u64>(arg, "16Q").is_some() {
                        problems.push(format!("{name}: 16M gave {got:?}"));
                    }
                }
                "DURATION" => {
                    durations += 1;
                    let two_minutes = parse::<Duration>(arg, "2m");
                    let fraction = parse::<Duration>(arg, "1.5s");
                    if two_minutes != Some(Duration::from_secs(120))
                        || fraction != Some(Duration::from_millis(1500))
                        || parse::<Duration>(arg, "2w").is_some()
                    {
                        problems.push(format!(
                            "{name}: 2m gave {two_minutes:?}, 1.5s {fraction:?}"
                        ));
                    }
                }
                _ => {}
            }
        }
        seen_at_run.sort();
        let mut listed = PARSED_AT_RUN.map(String::from).to_vec();
        listed.sort();
        assert_eq!(
            seen_at_run, listed,
            "PARSED_AT_RUN names options that are gone"
        );
        assert!(problems.is_empty(), "\n{}", problems.join("\n"));
        assert!(
            sizes >= 4 && durations >= 20,
            "{sizes} sizes, {durations} durations"
        );
        // The ones parsed when the command runs take the same forms.
        assert_eq!(crate::size::parse_size("--x", "16M"), Ok(16 << 20));
        assert_eq!(crate::size::parse_duration("--x", "30d"), Ok(30 * 86_400));
        assert_eq!(
            roost_server::thermostat::schedule::parse_mem("16M"),
            Ok(Some(16 << 20))
        );
    }

    /// Every subcommand that runs (has no subcommands of its own), with its path and its
    /// parent.
    fn leaves(cmd: &Command, path: &str, out: &mut Vec<(String, Command, Command)>) {
        for sub in cmd.get_subcommands() {
            let name = sub.get_name();
            let path = format!("{path} {name}").trim().to_string();
            if name == "help" {
                continue;
            }
            if sub.has_subcommands() {
                leaves(sub, &path, out);
            } else {
                out.push((path, sub.clone(), cmd.clone()));
            }
        }
    }

    #[test]
    fn one_meaning_per_short_flag_and_option_and_help_everywhere() {
        let mut cli = Cli::command();
        cli.build();
        let mut all = Vec::new();
        options(&cli, "", &mut all);
        let mut problems = Vec::new();
        // A short flag means one long option in every command.
        let mut shorts: std::collections::BTreeMap<char, (String, String)> = Default::default();
        for (path, _, arg) in &all {
            let (Some(short), Some(long)) = (arg.get_short(), arg.get_long()) else {
                continue;
            };
            match shorts.get(&short) {
                Some((other, first)) if other != long => problems.push(format!(
                    "-{short}: --{long} in `{path}`, --{other} in `{first}`"
                )),
                _ => {
                    shorts.insert(short, (long.to_string(), path.clone()));
                }
            }
        }
        for (path, _, arg) in &all {
            let long = arg.get_long().unwrap_or("");
            // Verbosity is -v/-q; --hosts is always a file of hosts; --catalog is -c.
            let expected_short = match long {
                "verbose" => Some('v'),
                "quiet" => Some('q'),
                "catalog" => Some('c'),
                _ => None,
            };
            if expected_short.is_some() && arg.get_short() != expected_short {
                problems.push(format!("{path} --{long}: short is not {expected_short:?}"));
            }
            let value = arg.get_value_names().and_then(|v| v.first().cloned());
            if long == "hosts" && value.as_deref() != Some("FILE") {
                problems.push(format!("{path} --hosts takes {value:?}, not a FILE"));
            }
            // Positional arguments say what they are.
            if arg.is_positional() && arg.get_help().is_none() {
                problems.push(format!("{path} {}: positional without help", arg.get_id()));
            }
        }
        // Every command's --help ends with examples (its own, or its parent's for `job`'s
        // and `thermostat`'s subcommands, which share them).
        let mut commands = Vec::new();
        leaves(&cli, "", &mut commands);
        for (path, cmd, parent) in &commands {
            let shows = |c: &Command| {
                c.get_after_help()
                    .is_some_and(|h| h.to_string().contains("Examples:\n"))
            };
            let inherited = parent.get_name() != "roost" && shows(parent);
            if !shows(cmd) && !inherited {
                problems.push(format!("{path}: --help has no examples"));
            }
        }
        assert!(
            commands.len() >= 30,
            "{} commands: {commands:?}",
            commands.len()
        );
        assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    }

    /// Commands with -v and no -q: `catalog`, whose log lines (arrivals, departures,
    /// refusals) are what it is run for.
    const VERBOSE_ONLY: [&str; 1] = ["catalog"];

    #[test]
    fn every_command_with_v_takes_q_and_not_both() {
        let mut cli = Cli::command();
        cli.build();
        let mut commands = Vec::new();
        leaves(&cli, "", &mut commands);
        let mut problems = Vec::new();
        let mut with_both = Vec::new();
        for (path, cmd, _) in &commands {
            let has = |long: &str| cmd.get_arguments().any(|a| a.get_long() == Some(long));
            match (has("verbose"), has("quiet")) {
                (true, false) if !VERBOSE_ONLY.contains(&path.as_str()) => {
                    problems.push(format!("{path}: -v without -q"))
                }
                (true, true) => with_both.push(path.clone()),
                _ => {}
            }
        }
        assert!(problems.is_empty(), "\n{}", problems.join("\n"));
        for command in ["run", "index", "serve"] {
            assert!(with_both.iter().any(|p| p == command), "{with_both:?}");
        }
        // Both at once is an error, each alone is accepted.
        for path in &with_both {
            let mut words: Vec<&str> = vec!["roost"];
            words.extend(path.split(' '));
            let required: &[&str] = match path.as_str() {
                "run" => &["true"],
                "index" | "serve" => &["/srv"],
                _ => &[],
            };
            let parse = |flags: &[&str]| {
                Cli::try_parse_from([words.as_slice(), flags, required].concat()).map(|_| ())
            };
            assert!(parse(&["-v"]).is_ok(), "{path} -v");
            assert!(parse(&["-q"]).is_ok(), "{path} -q");
            assert!(parse(&["-v", "-q"]).is_err(), "{path} -v -q");
        }
    }

    #[test]
    fn serve_takes_v_and_q_for_its_log_level() {
        let level = |extra: &[&str]| {
            let cli = Cli::try_parse_from([&["roost", "serve", "/srv"], extra].concat())
                .map_err(|e| e.kind())?;
            let super::Command::Serve(args) = cli.command else {
                panic!("not serve");
            };
            Ok::<_, clap::error::ErrorKind>(crate::serve::log_level(&args).to_string())
        };
        assert_eq!(level(&[]), Ok("info".into()));
        assert_eq!(level(&["-v"]), Ok("debug".into()));
        assert_eq!(level(&["--quiet"]), Ok("error".into()));
        assert_eq!(level(&["--log-level", "debug"]), Ok("debug".into()));
        assert!(level(&["-v", "--log-level", "error"]).is_err());
        assert!(level(&["-v", "-q"]).is_err());
    }

    #[test]
    fn serve_defaults_are_the_server_s() {
        let cli = Cli::try_parse_from(["roost", "serve", "/srv"]).unwrap();
        let super::Command::Serve(args) = cli.command else {
            panic!("not serve");
        };
        let limits = roost_server::Limits::default();
        assert_eq!(args.idle_timeout, limits.idle_timeout);
        assert_eq!(args.stall_timeout, limits.stall_timeout);
        assert_eq!(args.max_message, limits.max_message);
        assert_eq!(args.poll_us, limits.request_poll);
        assert_eq!(args.reap_after, roost_server::reaper::DEFAULT_AFTER);
    }
}

//! `roost thermostat`: shows or changes the owner's limits on the guest jobs of a running
//! `roost serve --jobs --thermostat FILE`, through the files in its job directory (see
//! `roost_server::thermostat::control`): `set` writes the override, `clear` removes it,
//! `show` prints what the server reports holds now. The server applies a change within a
//! second or two.

use clap::{Args, Subcommand};
use roost_server::thermostat::control::{write_replace, NOW_FILE, SET_FILE};
use roost_server::thermostat::schedule::{parse_cpu, parse_mem, size_text};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "\
Examples:
  roost thermostat show --export /srv/data
  roost thermostat set 30% --mem 2G --job-dir /var/lib/roost/jobs
  roost thermostat clear --export /srv/data")]
pub struct ThermostatArgs {
    #[command(subcommand)]
    action: Action,
    /// The server's job directory (its --job-dir).
    #[arg(long, value_name = "DIR", global = true, conflicts_with = "export")]
    job_dir: Option<PathBuf>,
    /// The directory the server exports, to find its default job directory instead.
    #[arg(long, value_name = "DIR", global = true)]
    export: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Action {
    /// Limit guest jobs to CPU percent of the machine (e.g. 30%), and memory with --mem,
    /// until cleared; what is left out comes from the schedule.
    Set {
        /// CPU percent of the whole machine, 1% to 100%.
        cpu: String,
        /// Memory for all guest jobs together (512M, 1G, none).
        #[arg(long, value_name = "SIZE")]
        mem: Option<String>,
    },
    /// Remove the override: the schedule holds again.
    Clear,
    /// Print the limits that hold now, the mechanism and where the limits come from.
    Show,
}

pub fn main(args: ThermostatArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            eprintln!("roost thermostat: {message}");
            ExitCode::from(code)
        }
    }
}

fn run(args: ThermostatArgs) -> Result<(), (u8, String)> {
    let dir = match (&args.job_dir, &args.export) {
        (Some(d), _) => d.clone(),
        (None, Some(e)) => {
            let e =
                std::fs::canonicalize(e).map_err(|err| (2, format!("{}: {err}", e.display())))?;
            crate::serve::default_job_dir(&e)
        }
        (None, None) => return Err((2, "name the server's --job-dir DIR or --export DIR".into())),
    };
    let io = |path: PathBuf| move |e: std::io::Error| (1, format!("{}: {e}", path.display()));
    match args.action {
        Action::Set { cpu, mem } => {
            let cpu = parse_cpu(&cpu).map_err(|e| (2, e))?;
            let mut line = format!("cpu {cpu}%");
            if let Some(mem) = mem {
                let mem = parse_mem(&mem).map_err(|e| (2, format!("--{e}")))?;
                line += &format!(" mem {}", mem.map_or("none".into(), size_text));
            }
            let path = dir.join(SET_FILE);
            write_replace(&path, &format!("{line}\n")).map_err(io(path))?;
            println!("set {line} (the server applies it within 2 s)");
        }
        Action::Clear => {
            let path = dir.join(SET_FILE);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(path)(e)),
                _ => println!("cleared: the schedule holds (within 2 s)"),
            }
        }
        Action::Show => {
            let path = dir.join(NOW_FILE);
            let text = std::fs::read_to_string(&path).map_err(io(path))?;
            print!("{text}");
        }
    }
    Ok(())
}

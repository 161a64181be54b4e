//! The `roost` command: thin subcommands over the roost libraries.

mod accounting;
mod background;
mod group_catalog;
mod group_cmds;
mod identity;
mod index;
mod job;
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

use clap::{Parser, Subcommand};
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
(a bad location, no connection, or the server refused: the message names host, path and
cause), 2 for bad --auth/--key options. roost serve: 0 after a clean stop (SIGTERM,
SIGINT, SIGHUP), 2 when it cannot start. roost accounting: 1 when a server could not be
read or a ledger holds corrupt records, 2 for bad options or prices. pgrep: 0
when a line matched, 1 when none did, 2 on errors; the other group tools: 1 when a member
failed. roost run: see `roost run --help`."
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
}

fn main() -> ExitCode {
    // `roost serve --jobs` starts each job's first process as roost itself, under another
    // name; it never gets here.
    roost_server::jobs::keeper::run_if_called();
    match Cli::parse().command {
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
    }
}

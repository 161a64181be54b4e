//! The `roost` command: thin subcommands over the roost libraries.

mod group_cmds;
mod progress;
mod remote;
mod run;
mod serve;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// roost lets unmodified programs use distributed storage, with no privileges.
#[derive(Parser)]
#[command(name = "roost", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program with a private namespace (ptrace + seccomp interposition).
    Run(run::RunArgs),
    /// Export a directory over the Chirp protocol, with authentication and ACLs.
    Serve(serve::ServeArgs),
    #[command(flatten)]
    Remote(remote::RemoteCommand),
    #[command(flatten)]
    Group(group_cmds::GroupCommand),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => run::main(args),
        Command::Serve(args) => serve::main(args),
        Command::Remote(command) => remote::main(command),
        Command::Group(command) => group_cmds::main(command),
    }
}

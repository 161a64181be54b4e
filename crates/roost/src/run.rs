//! `roost run`: runs a program under the interposition agent.

use clap::Args;
use std::process::ExitCode;

/// Options of `roost run`.
#[derive(Args)]
pub struct RunArgs {
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true)]
    pub command: Vec<String>,
}

pub fn main(args: RunArgs) -> ExitCode {
    eprintln!("roost run: the agent is not built yet; cannot run {:?}", args.command);
    ExitCode::from(2)
}

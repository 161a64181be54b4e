//! Shell completions and man pages, generated from the command line's own definition (so
//! they never drift from `--help`): `roost completions SHELL` prints a completion script,
//! `roost man DIR` writes `roost.1` and a `roost-SUBCOMMAND.1` for each subcommand.

use clap::{Args, Command};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options of `roost completions`.
#[derive(Args)]
#[command(after_help = "\
Examples:
  roost completions bash > ~/.local/share/bash-completion/completions/roost
  roost completions zsh > ~/.zfunc/_roost        # with fpath+=(~/.zfunc) in ~/.zshrc
  roost completions fish > ~/.config/fish/completions/roost.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Options of `roost man`.
#[derive(Args)]
#[command(after_help = "\
Examples:
  roost man ~/.local/share/man/man1 && man roost-run
  roost man /usr/local/share/man/man1          # as root, for every user")]
pub struct ManArgs {
    /// The directory to write the pages to (made if missing).
    pub dir: PathBuf,
}

/// Prints the completion script of `command` for the shell asked.
pub fn completions(args: CompletionsArgs, mut command: Command) -> ExitCode {
    use std::io::Write;
    // Into memory first: the generator panics on a write error, and a reader that stops
    // early (`| head`) is no error.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "roost", &mut script);
    match std::io::stdout().write_all(&script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("roost completions: {e}");
            ExitCode::from(1)
        }
        _ => ExitCode::SUCCESS,
    }
}

/// Writes the man pages of `command` and of each of its subcommands.
pub fn man(args: ManArgs, command: Command) -> ExitCode {
    match write_pages(&args.dir, command) {
        Ok(count) => {
            eprintln!("roost man: wrote {count} pages to {}", args.dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("roost man: {e}");
            ExitCode::from(1)
        }
    }
}

fn write_pages(dir: &Path, command: Command) -> Result<usize, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let command = command.version(env!("CARGO_PKG_VERSION"));
    let mut pages = vec![command.clone()];
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        // `roost-run(1)`: the name man knows it by, as git's pages are named.
        let name = format!("roost-{}", sub.get_name());
        pages.push(sub.clone().name(name).version(env!("CARGO_PKG_VERSION")));
    }
    for page in &pages {
        let file = dir.join(format!("{}.1", page.get_name()));
        let mut out = Vec::new();
        clap_mangen::Man::new(page.clone())
            .render(&mut out)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        std::fs::write(&file, out).map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(pages.len())
}

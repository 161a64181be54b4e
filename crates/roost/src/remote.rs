//! The client commands: `roost ls`, `stat`, `cat`, `get`, `put`, `rm`, `mkdir`, `mv`, `ln`,
//! `getacl`, `setacl`, `whoami`, on `chirp://host[:port]/path` (or `/chirp/host:port/path`).

mod federation;
mod json_out;

use crate::progress::Progress;
use clap::{Args, Subcommand};
use federation::Unfollowed;
use roost_catalog::json::Value;
use roost_client::partial::{self, Registered};
use roost_client::tree::{self, CopyError};
use roost_client::{
    io_words, ChirpUrl, Client, Credentials, Error, HmacKey, Method, Options, Stat,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// How to reach servers; shared by every client command.
#[derive(Args, Clone)]
pub struct ConnectArgs {
    /// Authentication methods to offer, in order (repeatable): hmac, unix, hostname,
    /// address. Default: hmac (with a key), then unix (same host), hostname, address.
    #[arg(long = "auth", value_name = "METHOD")]
    pub auth: Vec<String>,
    /// A shared secret for the hmac method, as NAME=FILE (also ROOST_HMAC_KEY=NAME=FILE).
    #[arg(long = "key", value_name = "NAME=FILE")]
    pub key: Option<String>,
    /// How long to wait for a reply before giving up (seconds, or 90s, 5m).
    #[arg(long, default_value = "60", value_name = "DURATION", value_parser = crate::size::duration_1s)]
    pub timeout: Duration,
    /// How long to wait for a connection and the server's greeting (at most --timeout).
    #[arg(long, default_value = "15", value_name = "DURATION", value_parser = crate::size::duration_1s)]
    pub connect_timeout: Duration,
}

/// The timeouts in force (seconds: connecting, replies), for messages that say which option
/// waits longer; set once by [`options`].
static TIMEOUTS: std::sync::OnceLock<(f64, f64)> = std::sync::OnceLock::new();

/// The timeout that ran out (seconds) and the option that sets it: connecting (and the
/// handshake) or waiting for a reply.
fn timeout_of(connecting: bool) -> (f64, &'static str) {
    let (connect, reply) = TIMEOUTS.get().copied().unwrap_or((15.0, 60.0));
    if connecting && connect < reply {
        (connect, "--connect-timeout")
    } else {
        (reply, "--timeout")
    }
}

/// The client commands.
#[derive(Subcommand)]
pub enum RemoteCommand {
    /// List a directory (or name a file).
    #[command(after_help = "\
Examples:
  roost ls chirp://fs7/data
  roost ls -l chirp://fs7:9094/data/run1
  roost ls --json chirp://[::1]/ | jq -r '.[] | select(.type == \"file\") | .name'")]
    Ls {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Long listing: mode, links, size, date.
        #[arg(short, long)]
        long: bool,
        /// Print a JSON array, one object an entry (fields: docs/cli.md).
        #[arg(long)]
        json: bool,
        /// The directory or file: chirp://host[:port]/path.
        url: String,
    },
    /// Show a file's properties.
    #[command(after_help = "\
Examples:
  roost stat chirp://fs7/data/input.txt
  roost stat --json chirp://fs7/data | jq .mtime")]
    Stat {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Print one JSON object (fields: docs/cli.md).
        #[arg(long)]
        json: bool,
        /// The file: chirp://host[:port]/path.
        url: String,
    },
    /// Write files to standard output.
    #[command(after_help = "\
Examples:
  roost cat chirp://fs7/data/log.txt
  roost cat chirp://fs7/a chirp://fs8/b > both")]
    Cat {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The files, in order: chirp://host[:port]/path.
        #[arg(required = true)]
        urls: Vec<String>,
    },
    /// Copy a file (or with -r a directory tree) from a server.
    #[command(after_help = "\
Examples:
  roost get chirp://fs7/data/input.txt
  roost get chirp://fs7/data/input.txt /tmp/in.txt
  roost get -r chirp://fs7/data/run1 run1")]
    Get {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Copy directories recursively.
        #[arg(short, long)]
        recursive: bool,
        /// What to copy: chirp://host[:port]/path.
        url: String,
        /// Local destination (default: the file's name in the current directory).
        local: Option<PathBuf>,
    },
    /// Copy a local file (or with -r a directory tree) to a server.
    #[command(after_help = "\
Examples:
  roost put input.txt chirp://fs7/data/
  roost put -r results chirp://fs7/data/results")]
    Put {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Copy directories recursively.
        #[arg(short, long)]
        recursive: bool,
        /// The local file or directory.
        local: PathBuf,
        /// Where to: chirp://host[:port]/path (an existing directory keeps the file's name).
        url: String,
    },
    /// Remove a file, or with -r a whole tree.
    #[command(after_help = "\
Examples:
  roost rm chirp://fs7/data/old.txt
  roost rm -r chirp://fs7/data/run1")]
    Rm {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Remove directories and everything in them.
        #[arg(short, long)]
        recursive: bool,
        /// What to remove: chirp://host[:port]/path.
        #[arg(required = true)]
        urls: Vec<String>,
    },
    /// Make a directory (it inherits its parent's ACL).
    #[command(after_help = "\
Examples:
  roost mkdir chirp://fs7/data/run2
  roost mkdir -p chirp://fs7/data/a/b/c")]
    Mkdir {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Make missing parents too; an existing directory is fine.
        #[arg(short, long)]
        parents: bool,
        /// The directories: chirp://host[:port]/path.
        #[arg(required = true)]
        urls: Vec<String>,
    },
    /// Rename a file or directory; to another server (through a cross-server link, or a
    /// chirp URL), copy it there and remove it here.
    #[command(after_help = "\
Examples:
  roost mv chirp://fs7/data/a.txt /data/b.txt
  roost mv chirp://fs7/data/run1 chirp://fs8/archive/run1")]
    Mv {
        #[command(flatten)]
        connect: ConnectArgs,
        /// What to move: chirp://host[:port]/path.
        url: String,
        /// The new path: a path on the same server, or a chirp URL.
        to: String,
    },
    /// Make a link: with -s a symbolic one, whose TARGET may be a chirp URL on another
    /// server (stored as /chirp/HOST:PORT/PATH, which roost run and these commands
    /// follow: one name space across servers); without -s a hard link on the same server.
    #[command(after_help = "\
Examples:
  roost ln -s chirp://fs8/archive chirp://fs7/data/archive
  roost ln /data/a.txt chirp://fs7/data/a-again.txt")]
    Ln {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Make a symbolic link.
        #[arg(short, long)]
        symbolic: bool,
        /// What the link names: a chirp URL, or a path (as given, for -s).
        target: String,
        /// The new link: chirp://host[:port]/path.
        link: String,
    },
    /// Show a directory's ACL.
    #[command(after_help = "\
Examples:
  roost getacl chirp://fs7/data
  roost getacl --json chirp://fs7/data")]
    Getacl {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Print a JSON array of {\"subject\", \"rights\"} objects.
        #[arg(long)]
        json: bool,
        /// The directory: chirp://host[:port]/path.
        url: String,
    },
    /// Give SUBJECT RIGHTS (letters rwldpax; - removes the entry) on a directory.
    #[command(after_help = "\
Examples:
  roost setacl chirp://fs7/data unix:alice rwl
  roost setacl chirp://fs7/data 'hostname:*.example.org' rl
  roost setacl chirp://fs7/data hmac:build -")]
    Setacl {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The directory: chirp://host[:port]/path.
        url: String,
        /// Whom the entry is for, METHOD:PATTERN (unix:alice, hostname:*.example.org,
        /// address:10.0.0.*, hmac:build).
        subject: String,
        /// Letters of rwldpax, or - to remove the entry.
        rights: String,
    },
    /// Show the subject the server knows you as.
    #[command(after_help = "\
Examples:
  roost whoami chirp://fs7
  roost whoami --key build=build.key --json chirp://fs7")]
    Whoami {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Print one JSON object: subject, method, name.
        #[arg(long)]
        json: bool,
        /// The server: chirp://host[:port].
        url: String,
    },
    /// Show the size, use and free space of the file system a server exports (statfs).
    #[command(after_help = "\
Examples:
  roost df chirp://fs7
  roost df --json chirp://fs7/data | jq .available_bytes")]
    Df {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Print one JSON object (fields: docs/cli.md).
        #[arg(long)]
        json: bool,
        /// A path on the server: chirp://host[:port][/path] (default /).
        url: String,
    },
}

/// A failure, already phrased for the user.
pub(crate) struct Failure(pub(crate) String);

type Outcome = Result<(), Failure>;

impl RemoteCommand {
    fn connect(&self) -> &ConnectArgs {
        match self {
            RemoteCommand::Ls { connect, .. }
            | RemoteCommand::Stat { connect, .. }
            | RemoteCommand::Cat { connect, .. }
            | RemoteCommand::Get { connect, .. }
            | RemoteCommand::Put { connect, .. }
            | RemoteCommand::Rm { connect, .. }
            | RemoteCommand::Mkdir { connect, .. }
            | RemoteCommand::Mv { connect, .. }
            | RemoteCommand::Ln { connect, .. }
            | RemoteCommand::Getacl { connect, .. }
            | RemoteCommand::Setacl { connect, .. }
            | RemoteCommand::Whoami { connect, .. }
            | RemoteCommand::Df { connect, .. } => connect,
        }
    }
}

pub fn main(command: RemoteCommand) -> ExitCode {
    let outcome = match options(command.connect()) {
        Ok(options) => run(command, &options),
        Err(f) => {
            eprintln!("roost: {}", f.0);
            return ExitCode::from(2);
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(message)) => {
            eprintln!("roost: {message}");
            ExitCode::from(1)
        }
    }
}

/// Client options from the command line and the environment. `--key` wins over
/// `ROOST_HMAC_KEY`, which is then not read at all.
pub(crate) fn options(args: &ConnectArgs) -> Result<Options, Failure> {
    let mut credentials = match &args.key {
        Some(_) => Credentials::new(),
        None => Credentials::from_env().map_err(|e| Failure(format!("ROOST_HMAC_KEY: {e}")))?,
    };
    if !args.auth.is_empty() {
        let methods = args
            .auth
            .iter()
            .map(|m| {
                Method::parse(m.as_bytes()).ok_or_else(|| {
                    Failure(format!(
                        "--auth {m}: expected hmac, unix, hostname or address"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        credentials.methods = methods;
    }
    if let Some(spec) = &args.key {
        let key = HmacKey::from_spec(spec).map_err(|e| Failure(format!("--key {spec}: {e}")))?;
        credentials = credentials.with_key(key);
    }
    let reply = args.timeout.max(Duration::from_secs(1));
    let connect = args.connect_timeout.clamp(Duration::from_secs(1), reply);
    let _ = TIMEOUTS.set((connect.as_secs_f64(), reply.as_secs_f64()));
    Ok(Options {
        connect_timeout: connect,
        io_timeout: Some(reply),
        credentials,
        ..Options::default()
    })
}

/// One server location with an open connection to it.
struct Remote {
    url: ChirpUrl,
    client: Client,
}

/// Whether an operation acts on what a link at the end of its path leads to (`ls`, `cat`,
/// ...) or on the link itself (`rm`, `mv`, `ln`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    Follow,
    Keep,
}

impl Remote {
    /// Connects to the server `text` leads to, following cross-server links on the way
    /// (see [`crate::federation`]).
    fn open(text: &str, options: &Options, last: Last) -> Result<Remote, Failure> {
        let url = ChirpUrl::parse(text)
            .map_err(|e| Failure(format!("{e} (write chirp://host[:port]/path)")))?;
        match federation::locate(url, options, last == Last::Follow) {
            Ok((url, client)) => Ok(Remote { url, client }),
            Err(Unfollowed::Connect(url, e)) => Err(Failure(format!(
                "chirp://{}: {}",
                url.authority(),
                connect_advice(&e)
            ))),
            Err(Unfollowed::Loop(why)) => Err(Failure(why)),
        }
    }

    fn path(&self) -> &[u8] {
        self.url.path.as_bytes()
    }

    fn show(&self, path: &[u8]) -> String {
        format!(
            "chirp://{}{}",
            self.url.authority(),
            String::from_utf8_lossy(path)
        )
    }

    /// Phrases `error` for `path`, adding the server's explanation of a refusal.
    fn fail(&mut self, path: &[u8], error: Error) -> Failure {
        let mut message = format!("{}: {}", self.show(path), describe(&error));
        if error.errno() == libc::EACCES && !error.breaks_connection() {
            if let Ok(Some(why)) = self.client.explain() {
                message.push_str(&format!(" ({why})"));
            }
        }
        Failure(message)
    }

    fn copy_failure(&mut self, e: CopyError) -> Failure {
        if e.remote {
            let path = e.path.clone().into_bytes();
            self.fail(&path, e.error)
        } else {
            Failure(format!("{}: {}", e.path, describe(&e.error)))
        }
    }
}

/// The error in plain words: errno text for server answers ("permission denied").
pub(crate) fn describe(error: &Error) -> String {
    match error {
        Error::Remote { errno, .. } => io_words(&std::io::Error::from_raw_os_error(*errno)),
        Error::Local(e) => io_words(e),
        Error::Io(_) if error.errno() == libc::ETIMEDOUT => {
            let (secs, option) = timeout_of(false);
            format!("no reply within {secs} s (is the server or the network stuck or overloaded?); {option} waits longer")
        }
        Error::Silent(after) => {
            let (_, option) = timeout_of(true);
            format!(
                "connected, but the server said nothing within {} s (is it a Chirp server? a \
                 stuck one?); {option} waits longer",
                after.as_secs_f64()
            )
        }
        other => other.to_string(),
    }
}

pub(crate) fn connect_advice(error: &Error) -> String {
    match error {
        Error::AuthFailed(_) => {
            format!("{error}; ask the server's owner for an ACL entry, or offer another method with --auth/--key")
        }
        Error::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connection refused; is roost serve running on that host and port?".into()
        }
        Error::Io(_) if error.errno() == libc::ETIMEDOUT => {
            let (secs, option) = timeout_of(true);
            format!("could not connect within {secs} s (is the host up? a firewall dropping packets?); {option} waits longer")
        }
        other => describe(other),
    }
}

fn run(command: RemoteCommand, options: &Options) -> Outcome {
    if matches!(
        command,
        RemoteCommand::Get { .. } | RemoteCommand::Mv { .. }
    ) {
        partial::remove_on_signals().map_err(|e| Failure(format!("signals: {e}")))?;
    }
    match command {
        RemoteCommand::Ls {
            long, json, url, ..
        } => ls(&url, long, json, options),
        RemoteCommand::Stat { json, url, .. } => {
            let mut r = Remote::open(&url, options, Last::Follow)?;
            let path = r.path().to_vec();
            let st = r.client.stat(&path).map_err(|e| r.fail(&path, e))?;
            let name = String::from_utf8_lossy(&path);
            if json {
                print_out(&(json_out::stat("path", &name, &st, None).to_json() + "\n"))
            } else {
                print_stat(&name, &st);
                Ok(())
            }
        }
        RemoteCommand::Cat { urls, .. } => {
            let stdout = std::io::stdout();
            for url in urls {
                let mut r = Remote::open(&url, options, Last::Follow)?;
                let path = r.path().to_vec();
                let mut out = stdout.lock();
                r.client
                    .getfile(&path, &mut out)
                    .map_err(|e| r.fail(&path, e))?;
                out.flush()
                    .map_err(|e| Failure(format!("standard output: {e}")))?;
            }
            Ok(())
        }
        RemoteCommand::Get {
            recursive,
            url,
            local,
            ..
        } => {
            let mut r = Remote::open(&url, options, Last::Follow)?;
            let path = r.path().to_vec();
            let local = local.unwrap_or_else(|| default_local_name(&path));
            let st = r.client.stat(&path).map_err(|e| r.fail(&path, e))?;
            if st.is_dir() && !recursive {
                return Err(Failure(format!(
                    "{}: is a directory (use get -r)",
                    r.show(&path)
                )));
            }
            let mut progress = Progress::new(
                "get",
                if st.is_dir() {
                    None
                } else {
                    Some(st.size as u64)
                },
            );
            let result = if recursive {
                tree::get_tree(&mut r.client, &path, &local, &mut |n| progress.advance(n))
            } else {
                tree::get_file(&mut r.client, &path, &local, &mut |n| progress.advance(n))
            };
            progress.finish();
            result.map(drop).map_err(|e| r.copy_failure(e))
        }
        RemoteCommand::Put {
            recursive,
            local,
            url,
            ..
        } => {
            let meta = std::fs::metadata(&local)
                .map_err(|e| Failure(format!("{}: {}", local.display(), io_words(&e))))?;
            if meta.is_dir() && !recursive {
                return Err(Failure(format!(
                    "{}: is a directory (use put -r)",
                    local.display()
                )));
            }
            let mut r = Remote::open(&url, options, Last::Follow)?;
            let mut path = r.path().to_vec();
            // Putting into an existing directory keeps the file's own name, like cp.
            if !meta.is_dir() {
                if let Ok(st) = r.client.stat(&path) {
                    if st.is_dir() {
                        let name = local
                            .file_name()
                            .map(|n| n.as_encoded_bytes().to_vec())
                            .unwrap_or_default();
                        path = tree::join(&path, &name);
                    }
                }
            }
            let mut progress = Progress::new(
                "put",
                if meta.is_dir() {
                    None
                } else {
                    Some(meta.len())
                },
            );
            let result = if recursive {
                tree::put_tree(&mut r.client, &local, &path, &mut |n| progress.advance(n))
            } else {
                tree::put_file(&mut r.client, &local, &path, &mut |n| progress.advance(n))
            };
            progress.finish();
            result.map(drop).map_err(|e| r.copy_failure(e))
        }
        RemoteCommand::Rm {
            recursive, urls, ..
        } => {
            for url in urls {
                let mut r = Remote::open(&url, options, Last::Keep)?;
                let path = r.path().to_vec();
                let st = r.client.lstat(&path).map_err(|e| r.fail(&path, e))?;
                let result = if st.is_dir() {
                    if !recursive {
                        return Err(Failure(format!(
                            "{}: is a directory (use rm -r)",
                            r.show(&path)
                        )));
                    }
                    r.client.rmall(&path)
                } else {
                    r.client.unlink(&path)
                };
                result.map_err(|e| r.fail(&path, e))?;
            }
            Ok(())
        }
        RemoteCommand::Mkdir { parents, urls, .. } => {
            for url in urls {
                let mut r = Remote::open(&url, options, Last::Keep)?;
                let path = r.path().to_vec();
                if parents {
                    mkdir_parents(&mut r, &path)?;
                } else {
                    r.client.mkdir(&path, 0o755).map_err(|e| r.fail(&path, e))?;
                }
            }
            Ok(())
        }
        RemoteCommand::Mv { url, to, .. } => {
            let mut r = Remote::open(&url, options, Last::Keep)?;
            let Some(to) = location(&to, &url) else {
                return Err(Failure(format!(
                    "{to}: expected an absolute path or a chirp:// URL"
                )));
            };
            let mut dest = Remote::open(&to, options, Last::Keep)?;
            let path = r.path().to_vec();
            if dest.url.authority() == r.url.authority() {
                let target = dest.path().to_vec();
                return r
                    .client
                    .rename(&path, &target)
                    .map_err(|e| r.fail(&path, e));
            }
            move_across(&mut r, &mut dest)
        }
        RemoteCommand::Ln {
            symbolic,
            target,
            link,
            ..
        } => {
            let mut r = Remote::open(&link, options, Last::Keep)?;
            let path = r.path().to_vec();
            if symbolic {
                let text = federation::link_text(&target);
                return r
                    .client
                    .symlink(text.as_bytes(), &path)
                    .map_err(|e| r.fail(&path, e));
            }
            let Some(existing) = location(&target, &link) else {
                return Err(Failure(format!(
                    "{target}: a hard link needs an absolute path or a chirp:// URL (or use ln -s)"
                )));
            };
            let to = Remote::open(&existing, options, Last::Keep)?;
            if to.url.authority() != r.url.authority() {
                return Err(Failure(format!(
                    "{}: a hard link cannot reach another server ({}); use ln -s",
                    r.show(&path),
                    to.url.authority()
                )));
            }
            let existing = to.path().to_vec();
            r.client
                .link(&existing, &path)
                .map_err(|e| r.fail(&path, e))
        }
        RemoteCommand::Getacl { json, url, .. } => {
            let mut r = Remote::open(&url, options, Last::Follow)?;
            let path = r.path().to_vec();
            let entries = r.client.getacl(&path).map_err(|e| r.fail(&path, e))?;
            if json {
                let values: Vec<_> = entries
                    .iter()
                    .map(|e| json_out::acl_entry(&e.subject, &e.rights))
                    .collect();
                return print_out(&roost_catalog::records_json(&values));
            }
            let text: String = entries
                .iter()
                .map(|e| format!("{} {}\n", e.subject, e.rights))
                .collect();
            print_out(&text)
        }
        RemoteCommand::Setacl {
            url,
            subject,
            rights,
            ..
        } => {
            let Ok(parsed) = roost_wire::Rights::parse(&rights) else {
                return Err(Failure(format!(
                    "'{rights}' is not a set of rights (letters rwldpax, or - to remove)"
                )));
            };
            // A malformed entry already in an ACL can still be removed.
            if !parsed.is_empty() {
                roost_wire::acl::check_subject(&subject).map_err(Failure)?;
            }
            let mut r = Remote::open(&url, options, Last::Follow)?;
            let path = r.path().to_vec();
            r.client
                .setacl(&path, &subject, &rights)
                .map_err(|e| r.fail(&path, e))
        }
        RemoteCommand::Whoami { json, url, .. } => {
            let mut r = Remote::open(&url, options, Last::Keep)?;
            let path = r.path().to_vec();
            let me = r.client.whoami().map_err(|e| r.fail(&path, e))?;
            if json {
                print_out(&(json_out::whoami(&me).to_json() + "\n"))
            } else {
                print_out(&format!("{me}\n"))
            }
        }
        RemoteCommand::Df { json, url, .. } => {
            let mut r = Remote::open(&url, options, Last::Follow)?;
            let mut path = r.path().to_vec();
            if path.is_empty() {
                path.push(b'/');
            }
            let fs = r.client.statfs(&path).map_err(|e| r.fail(&path, e))?;
            let value = json_out::statfs(&r.url.authority(), &String::from_utf8_lossy(&path), &fs);
            if json {
                return print_out(&(value.to_json() + "\n"));
            }
            print_out(&df_table(&value))
        }
    }
}

fn ls(url: &str, long: bool, json: bool, options: &Options) -> Outcome {
    let mut r = Remote::open(url, options, Last::Follow)?;
    let path = r.path().to_vec();
    let st = r.client.stat(&path).map_err(|e| r.fail(&path, e))?;
    let mut out = std::io::stdout().lock();
    let write_err = |e: std::io::Error| Failure(format!("standard output: {e}"));
    if !st.is_dir() {
        let name = String::from_utf8_lossy(&path).into_owned();
        let line = if json {
            roost_catalog::records_json(&[json_out::stat("name", &name, &st, None)])
        } else if long {
            long_line(&name, &st) + "\n"
        } else {
            name + "\n"
        };
        return out.write_all(line.as_bytes()).map_err(write_err);
    }
    let mut entries = r.client.getlongdir(&path).map_err(|e| r.fail(&path, e))?;
    entries.retain(|e| e.name != b"." && e.name != b"..");
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let mut values = Vec::new();
    for entry in entries {
        let name = String::from_utf8_lossy(&entry.name).into_owned();
        // A link shows what it names, as ls -l does (another server's included).
        let target = match &entry.stat {
            Some(st) if st.is_symlink() && (long || json) => {
                let target = r.client.readlink(tree::join(&path, &entry.name));
                Some(target.map(|t| String::from_utf8_lossy(&t).into_owned()))
            }
            _ => None,
        };
        if json {
            if let Some(st) = &entry.stat {
                values.push(json_out::stat(
                    "name",
                    &name,
                    st,
                    target.and_then(Result::ok),
                ));
            } else {
                values.push(Value::Object(vec![("name".into(), Value::String(name))]));
            }
            continue;
        }
        let line = match (&entry.stat, long) {
            (Some(st), true) => match target {
                Some(target) => {
                    format!("{} -> {}", long_line(&name, st), target.unwrap_or_default())
                }
                None => long_line(&name, st),
            },
            _ => name,
        };
        writeln!(out, "{line}").map_err(write_err)?;
    }
    if json {
        out.write_all(roost_catalog::records_json(&values).as_bytes())
            .map_err(write_err)?;
    }
    Ok(())
}

/// Writes `text` to standard output.
fn print_out(text: &str) -> Outcome {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Failure(format!("standard output: {e}")))
}

/// `df`'s table: a header and the server's line, sizes as `df -h` shows them.
fn df_table(fs: &Value) -> String {
    let field = |k: &str| fs.get(k).and_then(Value::as_i64);
    let human = |k: &str| crate::pool::human(field(k));
    let total = field("total_bytes").unwrap_or(0);
    let used = field("used_bytes").unwrap_or(0);
    let percent = if total > 0 {
        format!("{}%", (used * 100 + total - 1) / total)
    } else {
        "-".into()
    };
    let text = |k: &str| fs.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    crate::pool::columns(vec![
        ["SERVER", "SIZE", "USED", "AVAIL", "USE%", "PATH"]
            .map(String::from)
            .to_vec(),
        vec![
            text("server"),
            human("total_bytes"),
            human("used_bytes"),
            human("available_bytes"),
            percent,
            text("path"),
        ],
    ])
}

/// `drwxr-xr-x  2  4096 2026-11-22 06:30 name`
fn long_line(name: &str, st: &Stat) -> String {
    format!(
        "{} {:>3} {:>12} {} {}",
        mode_string(st),
        st.nlink,
        st.size,
        date(st.mtime),
        name
    )
}

fn mode_string(st: &Stat) -> String {
    let kind = if st.is_dir() {
        'd'
    } else if st.is_symlink() {
        'l'
    } else {
        '-'
    };
    let bits = st.permissions();
    let mut s = String::from(kind);
    for shift in [6, 3, 0] {
        let b = (bits >> shift) & 7;
        s.push(if b & 4 != 0 { 'r' } else { '-' });
        s.push(if b & 2 != 0 { 'w' } else { '-' });
        s.push(if b & 1 != 0 { 'x' } else { '-' });
    }
    s
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM` (UTC).
fn date(secs: i64) -> String {
    let t = roost_base::date::Utc::of(secs);
    format!("{} {:02}:{:02}", t.ymd(), t.hour, t.minute)
}

fn print_stat(name: &str, st: &Stat) {
    println!("  file: {name}");
    println!(
        "  type: {}",
        if st.is_dir() {
            "directory"
        } else if st.is_symlink() {
            "symbolic link"
        } else {
            "file"
        }
    );
    println!("  size: {}", st.size);
    println!("  mode: {:04o} ({})", st.permissions(), mode_string(st));
    println!(" links: {}", st.nlink);
    println!(" inode: {}", st.ino);
    println!(" owner: {}:{}", st.uid, st.gid);
    println!("access: {} UTC", date(st.atime));
    println!("modify: {} UTC", date(st.mtime));
    println!("change: {} UTC", date(st.ctime));
}

fn default_local_name(path: &[u8]) -> PathBuf {
    let name = path
        .rsplit(|&b| b == b'/')
        .find(|c| !c.is_empty())
        .unwrap_or(b".");
    Path::new(std::ffi::OsStr::from_bytes(name)).to_path_buf()
}

use std::os::unix::ffi::OsStrExt;

/// A second location given to `mv` or `ln`: a chirp URL as it is, or an absolute path on
/// the server `first` (a URL) names; `None` for anything else.
fn location(text: &str, first: &str) -> Option<String> {
    if ChirpUrl::parse(text).is_ok() {
        return Some(text.to_string());
    }
    let base = ChirpUrl::parse(first).ok()?;
    text.starts_with('/').then(|| {
        ChirpUrl {
            path: text.to_string(),
            ..base
        }
        .to_string()
    })
}

/// `mv` to another server: the file or tree is copied there through a local temporary
/// copy (with progress), then removed here; the copy there is complete before anything
/// is removed. The rights both ends need are checked first (as far as the ACLs tell), so
/// that a move that cannot finish copies nothing; a removal that still fails says where
/// both copies are.
fn move_across(from: &mut Remote, to: &mut Remote) -> Outcome {
    let (src, dst) = (from.path().to_vec(), to.path().to_vec());
    let st = from.client.lstat(&src).map_err(|e| from.fail(&src, e))?;
    let dst_exists = to.client.lstat(&dst).is_ok();
    may_move(from, &src, to, &dst, dst_exists)?;
    if st.is_symlink() {
        // A link moves as itself.
        let target = from.client.readlink(&src).map_err(|e| from.fail(&src, e))?;
        to.client
            .symlink(&target, &dst)
            .map_err(|e| to.fail(&dst, e))?;
        return from
            .client
            .unlink(&src)
            .map_err(|e| both_copies(from, &src, to, &dst, e));
    }
    let scratch = std::env::temp_dir().join(format!("roost-mv.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir(&scratch).map_err(|e| {
        Failure(format!(
            "{}: {}",
            scratch.display(),
            describe(&Error::Local(e))
        ))
    })?;
    let local = scratch.join("x");
    // A stop signal removes the local copy of a file and the scratch directory (a tree's
    // copy stays: it is named in /tmp).
    let _listed = (
        Registered::new(&scratch, true),
        Registered::new(&local, false),
    );
    let moved = (|| {
        let mut progress = Progress::new("mv", (!st.is_dir()).then_some(st.size as u64 * 2));
        let fetched = if st.is_dir() {
            tree::get_tree(&mut from.client, &src, &local, &mut |n| progress.advance(n))
        } else {
            tree::get_file(&mut from.client, &src, &local, &mut |n| progress.advance(n))
        };
        fetched.map_err(|e| from.copy_failure(e))?;
        let sent = if st.is_dir() {
            tree::put_tree(&mut to.client, &local, &dst, &mut |n| progress.advance(n))
        } else {
            tree::put_file(&mut to.client, &local, &dst, &mut |n| progress.advance(n))
        };
        progress.finish();
        sent.map_err(|e| to.copy_failure(e))?;
        let removed = if st.is_dir() {
            from.client.rmall(&src)
        } else {
            from.client.unlink(&src)
        };
        removed.map_err(|e| both_copies(from, &src, to, &dst, e))
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    moved
}

/// Refuses a move across servers that the ACLs show cannot finish: 'd' is needed in the
/// source's directory (to remove it), 'w' in the destination's (or 'p' for a new name).
/// An ACL that cannot be read, or whose entries this client cannot judge (cctools' group:
/// subjects), lets the move try.
fn may_move(
    from: &mut Remote,
    src: &[u8],
    to: &mut Remote,
    dst: &[u8],
    dst_exists: bool,
) -> Outcome {
    use roost_wire::Rights;
    if let Some(rights) = rights_in(&mut from.client, parent(src)) {
        if !rights.allows(Rights::DELETE) {
            return Err(Failure(format!(
                "{}: cannot move it: {} has no 'd' right in {} there, so it could not be \
                 removed after the copy; nothing was copied (ask the owner for 'd', or copy \
                 with get and put)",
                from.show(src),
                from.client.subject(),
                String::from_utf8_lossy(parent(src))
            )));
        }
    }
    if let Some(rights) = rights_in(&mut to.client, parent(dst)) {
        let enough = rights.allows(Rights::WRITE) || (!dst_exists && rights.allows(Rights::PUT));
        if !enough {
            return Err(Failure(format!(
                "{}: cannot move there: {} has no 'w' right in {} on that server; nothing \
                 was copied",
                to.show(dst),
                to.client.subject(),
                String::from_utf8_lossy(parent(dst))
            )));
        }
    }
    Ok(())
}

/// This client's rights in directory `dir` by its ACL, if the ACL can be read and judged.
fn rights_in(client: &mut Client, dir: &[u8]) -> Option<roost_wire::Rights> {
    let me = client.subject().to_string();
    let mut rights = roost_wire::Rights::NONE;
    for entry in client.getacl(dir).ok()? {
        if entry.subject.starts_with("group:") {
            return None;
        }
        if roost_server::acl::wildcard_match(entry.subject.as_bytes(), me.as_bytes()) {
            rights = rights.union(roost_wire::Rights::parse(&entry.rights).ok()?);
        }
    }
    Some(rights)
}

/// The directory a server path is in.
fn parent(path: &[u8]) -> &[u8] {
    let path = path.strip_suffix(b"/").unwrap_or(path);
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) | None => b"/",
        Some(i) => &path[..i],
    }
}

/// The failure of a move whose copy is made but whose original could not be removed.
fn both_copies(from: &mut Remote, src: &[u8], to: &Remote, dst: &[u8], e: Error) -> Failure {
    let Failure(why) = from.fail(src, e);
    Failure(format!(
        "{why}; it was copied to {}, so both copies exist: remove one (roost rm)",
        to.show(dst)
    ))
}

fn mkdir_parents(r: &mut Remote, path: &[u8]) -> Outcome {
    let mut sofar = Vec::new();
    for part in path.split(|&b| b == b'/').filter(|p| !p.is_empty()) {
        sofar.push(b'/');
        sofar.extend_from_slice(part);
        match r.client.mkdir(&sofar, 0o755) {
            Ok(()) => {}
            Err(e) if e.errno() == libc::EEXIST => {
                let st = r
                    .client
                    .stat(&sofar)
                    .map_err(|e| r.fail(&sofar.clone(), e))?;
                if !st.is_dir() {
                    return Err(Failure(format!(
                        "{}: exists and is not a directory",
                        r.show(&sofar)
                    )));
                }
            }
            Err(e) => return Err(r.fail(&sofar.clone(), e)),
        }
    }
    Ok(())
}

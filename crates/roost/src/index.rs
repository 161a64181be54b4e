//! `roost index DIR`: writes the index files (`.roostindex`, one in each directory; format
//! in `docs/httpfs.md`) that let any plain web server serving DIR act as a read-only file
//! system for `roost run` (`/http/HOST/PATH`). Directories are indexed children first, so
//! each index records its subdirectories as they are once their own indexes are written;
//! an index whose content would not change is not rewritten (so an unchanged tree is left
//! exactly as it is, and a changed file rewrites only its directory's index), and a file
//! whose size and time are unchanged keeps the hash its index has. Writing an index gives
//! its directory back the times it had (where roost may: it owns the directory), so the
//! index (which lists the directory itself as `.`) and its parent's describe the
//! directory as it is.
//!
//! With `--sign KEYFILE` each index gets a `.roostindex.sig` next to it (written when it is
//! missing or does not verify for the index, its path and the key; see
//! `roost_httpfs::sign`); without, signatures left from a signed run are removed.
//! `--gen-key KEYFILE` makes a key pair.
//!
//! Files of at least `--block-threshold` bytes also get the SHA-256 of each block of
//! `--block-size` bytes (computed in the same pass as the whole file's), so `roost run`
//! can fetch them as parallel Range requests checked block by block.

use crate::progress::Progress;
use crate::size::parse_size;
use clap::Args;
use roost_httpfs::index::{self, INDEX_NAME};
use roost_httpfs::scan::{self, BlockPolicy};
use roost_httpfs::sign::{self, SigningKey, SIG_NAME};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options of `roost index`.
#[derive(Args)]
#[command(after_help = "\
Serve DIR with any web server (nginx, python3 -m http.server, ...) and run programs on it
with roost run: /http/HOST[:PORT]/PATH. Run roost index again after changing the tree:
only the indexes of changed directories are rewritten.

Signing: roost index --gen-key KEYFILE makes a key pair (KEYFILE: the private key, PKCS#8
DER, mode 0600; KEYFILE.pub: its public key line, also printed); roost index DIR --sign
KEYFILE writes a .roostindex.sig next to each index, and roost run --http-key KEYFILE.pub
then refuses any index the key did not sign. Keep KEYFILE off the web server. Each
signature carries a revision (it grows with each signing) and an expiry (--expires-in,
default 30d): clients refuse an expired signature, and an older revision of a directory
than one they saw. Re-run roost index --sign at least every half --expires-in. Keep the
.roostindex.sig files with the tree: after putting back an older tree, run roost index
--sign --resign, so that its directories get revisions above those clients saw.

Large files (--block-threshold, default 64M) are listed with the SHA-256 of each block
(--block-size, default 4M): roost run fetches them as parallel Range requests and checks
each block as it arrives. An index listing block hashes is version 2 (#roost-index 2),
which roosts older than block hashes refuse (naming the version); one without stays 1.

Exit status: 0 on success, 1 when some directory could not be indexed (each is named), 2
for a bad --block-size, --block-threshold or --expires-in, or a key file that cannot be read or written
(or --gen-key naming an existing file).

Examples:
  roost index /var/www/data
  roost index --gen-key site.key && roost index /var/www/data --sign site.key
  roost index /var/www/data --block-threshold 16M --block-size 1M")]
pub struct IndexArgs {
    /// The directory tree to index.
    #[arg(required_unless_present = "gen_key")]
    pub dir: Option<PathBuf>,
    /// Sign each index with the Ed25519 private key in KEYFILE (PKCS#8 DER, as --gen-key
    /// writes it); without, signatures left by an earlier signed run are removed.
    #[arg(long, value_name = "KEYFILE")]
    pub sign: Option<PathBuf>,
    /// How long a signature is valid (s, m, h or d suffix): clients refuse it after that.
    /// A signature with less than half of this left (or more than all of it: the option
    /// was shortened) is made again, so run roost index --sign at least that often.
    #[arg(
        long,
        default_value = "30d",
        value_name = "DURATION",
        requires = "sign"
    )]
    pub expires_in: String,
    /// Sign every directory anew, at a revision above its signature's, even one that
    /// verifies: after putting back an older tree with its signatures, which clients that
    /// saw newer revisions would otherwise refuse.
    #[arg(long, requires = "sign")]
    pub resign: bool,
    /// Write a new private key to KEYFILE (never over an existing file) and its public key
    /// to KEYFILE.pub, print the public key, and index nothing.
    #[arg(long, value_name = "KEYFILE", conflicts_with_all = ["dir", "sign"])]
    pub gen_key: Option<PathBuf>,
    /// Files of at least SIZE bytes (K, M, G suffixes) get block hashes.
    #[arg(long, default_value = "64M", value_name = "SIZE")]
    pub block_threshold: String,
    /// The block size of block hashes: a power of two from 64K to 1G.
    #[arg(long, default_value = "4M", value_name = "SIZE")]
    pub block_size: String,
    /// Name each index and signature written.
    #[arg(short, long)]
    pub verbose: bool,
    /// Print nothing but errors: no summary line, no progress bar.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
}

/// What a run did.
#[derive(Default)]
struct Tally {
    dirs: u64,
    written: u64,
    signed: u64,
    unsigned: u64,
    files: u64,
    hashed_bytes: u64,
    failed: u64,
}

struct Indexer {
    /// The top of the tree (signatures name directories relative to it).
    root: PathBuf,
    signer: Option<SigningKey>,
    /// How long a signature is valid, in seconds.
    validity: i64,
    /// Sign every directory anew (`--resign`).
    resign: bool,
    blocks: BlockPolicy,
    verbose: bool,
    progress: Progress,
    tally: Tally,
}

impl Indexer {
    /// Indexes `dir` and everything below it, children first.
    fn tree(&mut self, dir: &Path) {
        let subdirs: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(items) => items
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect(),
            Err(e) => return self.failed(dir, &e),
        };
        for sub in subdirs {
            self.tree(&sub);
        }
        if let Err(e) = self.one(dir) {
            self.failed(dir, &e);
        }
    }

    fn failed(&mut self, dir: &Path, e: &std::io::Error) {
        self.progress.finish();
        eprintln!("roost index: {}: {e}", dir.display());
        self.tally.failed += 1;
    }

    /// Writes the index of `dir` if its content changes, and its signature if it has
    /// none that verifies (or removes it when not signing).
    fn one(&mut self, dir: &Path) -> std::io::Result<()> {
        let at = dir.join(INDEX_NAME);
        let old = std::fs::read(&at).ok();
        let previous = old
            .as_deref()
            .and_then(|t| index::parse(t).ok())
            .unwrap_or_default();
        let progress = &mut self.progress;
        let hashed = &mut self.tally.hashed_bytes;
        let entries = scan::scan_dir(dir, &previous, self.blocks, &mut |n| {
            *hashed += n;
            progress.advance(n);
        })?;
        self.tally.dirs += 1;
        self.tally.files += entries.len() as u64;
        let text = index::write(&entries);
        let index_changed = old.as_deref() != Some(text.as_slice());
        let sig_at = dir.join(SIG_NAME);
        let sig = self.signature(dir, &sig_at, &text);
        if !index_changed && matches!(sig, SigFile::Keep) {
            return Ok(());
        }
        keeping_times(dir, || {
            if index_changed {
                write_file(&at, &text)?;
                self.tally.written += 1;
                self.said("wrote", &at);
            }
            match sig {
                SigFile::Write(sig) => {
                    write_file(&sig_at, &sig)?;
                    self.tally.signed += 1;
                    self.said("signed", &sig_at);
                }
                SigFile::Remove => {
                    std::fs::remove_file(&sig_at)?;
                    self.tally.unsigned += 1;
                    self.said("removed", &sig_at);
                }
                SigFile::Keep => {}
            }
            Ok(())
        })
    }

    /// What to do with `dir`'s signature file `sig_at`, for its index `text`.
    fn signature(&self, dir: &Path, sig_at: &Path, text: &[u8]) -> SigFile {
        let current = std::fs::read(sig_at).ok();
        let Some(signer) = &self.signer else {
            return match current {
                Some(_) => SigFile::Remove,
                None => SigFile::Keep,
            };
        };
        let path = relative(&self.root, dir);
        let key = signer.public();
        let now = sign::now();
        let current = current.and_then(|c| sign::parse(&c).ok());
        let valid = current.as_ref().is_some_and(|s| {
            s.path == path
                && s.key == key
                && s.verifies(text, &key)
                && (self.validity / 2..=self.validity).contains(&(s.expires - now))
        });
        if valid && !self.resign {
            return SigFile::Keep;
        }
        // The time in milliseconds (a signature that cannot be read any more is replaced
        // by one above it, but for a clock set back), and above the revision it replaces,
        // so that clients that saw that one take this.
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let revision = millis.max(current.map_or(0, |s| s.revision + 1));
        SigFile::Write(sign::write(&signer.sign(
            &path,
            revision,
            now + self.validity,
            text,
        )))
    }

    /// Says `what` `path` with --verbose.
    fn said(&mut self, what: &str, path: &Path) {
        if self.verbose {
            self.progress.finish();
            println!("{what} {}", path.display());
        }
    }
}

/// What becomes of a directory's `.roostindex.sig`.
enum SigFile {
    /// Left as it is: it verifies (or there is none, and no key).
    Keep,
    /// Removed: not signing.
    Remove,
    /// Written anew with this text.
    Write(Vec<u8>),
}

/// `dir`'s path below `root` as a signature names it: `/`, `/sub/deep`.
fn relative(root: &Path, dir: &Path) -> Vec<u8> {
    let below = dir.strip_prefix(root).unwrap_or(Path::new(""));
    let mut out = Vec::new();
    for c in below.components() {
        out.push(b'/');
        out.extend_from_slice(c.as_os_str().as_bytes());
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// Writes `data` to `at` (mode 0644) through a temporary name and a rename, so a server
/// never serves half a file.
fn write_file(at: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut tmp = at.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(data)?;
    drop(f);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
    std::fs::rename(&tmp, at)
}

/// Runs `change` (which writes into `dir`), then gives `dir` back the times it had, so
/// the index that lists it (as `.`, and in its parent) stays true. Best effort: only the
/// directory's owner may set its times.
fn keeping_times(dir: &Path, change: impl FnOnce() -> std::io::Result<()>) -> std::io::Result<()> {
    let before = std::fs::metadata(dir)?;
    let done = change();
    if let (Ok(accessed), Ok(modified)) = (before.accessed(), before.modified()) {
        let times = std::fs::FileTimes::new()
            .set_accessed(accessed)
            .set_modified(modified);
        let _ = std::fs::File::open(dir).and_then(|d| d.set_times(times));
    }
    done
}

/// The block policy `--block-threshold` and `--block-size` give.
fn block_policy(threshold: &str, size: &str) -> Result<BlockPolicy, String> {
    let size = parse_size("--block-size", size)?;
    roost_httpfs::blocks::check_block_size(size).map_err(|e| format!("--block-size: {e}"))?;
    Ok(BlockPolicy {
        threshold: parse_size("--block-threshold", threshold)?,
        size,
    })
}

/// `roost index --gen-key KEYFILE`.
fn gen_key(keyfile: &Path) -> ExitCode {
    match sign::generate_key_files(keyfile) {
        Ok(public) => {
            eprintln!(
                "roost index: wrote the private key {} (keep it secret) and the public key {}",
                keyfile.display(),
                sign::public_file(keyfile).display()
            );
            println!("{}", public.line());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("roost index: --gen-key {e}");
            ExitCode::from(2)
        }
    }
}

pub fn main(args: IndexArgs) -> ExitCode {
    if let Some(keyfile) = &args.gen_key {
        return gen_key(keyfile);
    }
    let Some(dir) = args.dir else {
        eprintln!("roost index: no DIR to index");
        return ExitCode::from(2);
    };
    let blocks = match block_policy(&args.block_threshold, &args.block_size) {
        Ok(blocks) => blocks,
        Err(e) => {
            eprintln!("roost index: {e}");
            return ExitCode::from(2);
        }
    };
    let validity = match crate::size::parse_duration("--expires-in", &args.expires_in) {
        Ok(secs) => secs as i64,
        Err(e) => {
            eprintln!("roost index: {e}");
            return ExitCode::from(2);
        }
    };
    let signer = match args.sign.as_deref().map(SigningKey::load).transpose() {
        Ok(signer) => signer,
        Err(e) => {
            eprintln!("roost index: --sign {e}");
            return ExitCode::from(2);
        }
    };
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            eprintln!("roost index: {}: not a directory", dir.display());
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("roost index: {}: {e}", dir.display());
            return ExitCode::from(1);
        }
    }
    if let (Some(signer), true) = (&signer, args.verbose) {
        println!("signing with {}", signer.public().line());
    }
    let mut indexer = Indexer {
        root: dir.clone(),
        signer,
        validity,
        resign: args.resign,
        blocks,
        verbose: args.verbose,
        progress: if args.quiet {
            Progress::hidden()
        } else {
            Progress::new("hashing", None)
        },
        tally: Tally::default(),
    };
    indexer.tree(&dir);
    indexer.progress.finish();
    let t = &indexer.tally;
    let mut signatures = String::new();
    if indexer.signer.is_some() {
        signatures += &format!(", {} signatures written", t.signed);
    }
    if t.unsigned > 0 {
        signatures += &format!(", {} signatures removed", t.unsigned);
    }
    if !args.quiet {
        println!(
            "roost index: {}: {} directories, {} entries, {} indexes written{signatures}, {} \
             bytes hashed",
            dir.display(),
            t.dirs,
            t.files,
            t.written,
            t.hashed_bytes
        );
    }
    if t.failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

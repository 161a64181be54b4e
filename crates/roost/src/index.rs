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

use crate::progress::Progress;
use clap::Args;
use roost_httpfs::index::{self, INDEX_NAME};
use roost_httpfs::scan;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options of `roost index`.
#[derive(Args)]
#[command(after_help = "\
Serve DIR with any web server (nginx, python3 -m http.server, ...) and run programs on it
with roost run: /http/HOST[:PORT]/PATH. Run roost index again after changing the tree:
only the indexes of changed directories are rewritten.
Exit status: 0 on success, 1 when some directory could not be indexed (each is named).")]
pub struct IndexArgs {
    /// The directory tree to index.
    pub dir: PathBuf,
    /// Name each index written.
    #[arg(short, long)]
    pub verbose: bool,
}

/// What a run did.
#[derive(Default)]
struct Tally {
    dirs: u64,
    written: u64,
    files: u64,
    hashed_bytes: u64,
    failed: u64,
}

struct Indexer {
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

    /// Writes the index of `dir` if its content changes.
    fn one(&mut self, dir: &Path) -> std::io::Result<()> {
        let at = dir.join(INDEX_NAME);
        let old = std::fs::read(&at).ok();
        let previous = old
            .as_deref()
            .and_then(|t| index::parse(t).ok())
            .unwrap_or_default();
        let progress = &mut self.progress;
        let hashed = &mut self.tally.hashed_bytes;
        let entries = scan::scan_dir(dir, &previous, &mut |n| {
            *hashed += n;
            progress.advance(n);
        })?;
        self.tally.dirs += 1;
        self.tally.files += entries.len() as u64;
        let text = index::write(&entries);
        if old.as_deref() == Some(text.as_slice()) {
            return Ok(());
        }
        let before = std::fs::metadata(dir)?;
        let tmp = dir.join(format!("{INDEX_NAME}.tmp.{}", std::process::id()));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&text)?;
        drop(f);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
        std::fs::rename(&tmp, &at)?;
        // Best effort: only the directory's owner may set its times.
        if let (Ok(accessed), Ok(modified)) = (before.accessed(), before.modified()) {
            let times = std::fs::FileTimes::new()
                .set_accessed(accessed)
                .set_modified(modified);
            let _ = std::fs::File::open(dir).and_then(|d| d.set_times(times));
        }
        self.tally.written += 1;
        if self.verbose {
            self.progress.finish();
            println!("wrote {}", at.display());
        }
        Ok(())
    }
}

pub fn main(args: IndexArgs) -> ExitCode {
    match std::fs::metadata(&args.dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            eprintln!("roost index: {}: not a directory", args.dir.display());
            return ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("roost index: {}: {e}", args.dir.display());
            return ExitCode::from(1);
        }
    }
    let mut indexer = Indexer {
        verbose: args.verbose,
        progress: Progress::new("hashing", None),
        tally: Tally::default(),
    };
    indexer.tree(&args.dir);
    indexer.progress.finish();
    let t = &indexer.tally;
    println!(
        "roost index: {}: {} directories, {} entries, {} indexes written, {} bytes hashed",
        args.dir.display(),
        t.dirs,
        t.files,
        t.written,
        t.hashed_bytes
    );
    if t.failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

//! Directory indexes kept in the shared cache for later runs. A run that fetched an index
//! leaves it as a note ([`roost_vfs::cache::Cache::remember`]); the next run takes it
//! without a request while the TTL lasts, counted from when the index was fetched or last
//! found unchanged, and after that asks for it conditionally with the validators kept
//! beside it. The signature is kept too and checked again when a note is read back, so a
//! note vouches for nothing the pinned keys do not. That a directory has no index is kept
//! the same way (it vouches for nothing). GROW-FS trees and answers of paths without an
//! index are not kept (a run asks for them once).

use super::directories::Dir;
use super::{HttpNet, Known};
use crate::client::Validators;
use crate::listing::Listing;
use crate::sign;
use roost_vfs::cache::Cache;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The first line of a note, naming its layout.
const MAGIC: &[u8] = b"roost index note 1\n";

/// The whole note of a directory with neither a `.roostindex` nor a `.growfsdir` (a served
/// tree's root, often): remembered too, or every run would ask for both, and fail while the
/// origin is down although all it needs below is in the cache.
const NO_INDEX: &[u8] = b"roost no index note 1\n";

/// An index as fetched: its text, its signature (when keys are pinned) and how to ask
/// whether it changed.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Note {
    pub text: Vec<u8>,
    pub sig: Option<Vec<u8>>,
    pub validators: Option<Validators>,
}

impl Note {
    /// The note's bytes: the magic line, the validators' line (empty without), the
    /// text's length, the signature's length (`-` without), then the text and the
    /// signature.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        let validators = self.validators.as_ref().map(Validators::to_line);
        let sig_len = self.sig.as_ref().map(|s| s.len().to_string());
        for line in [
            validators.unwrap_or_default(),
            self.text.len().to_string(),
            sig_len.unwrap_or_else(|| "-".to_string()),
        ] {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(&self.text);
        out.extend_from_slice(self.sig.as_deref().unwrap_or_default());
        out
    }

    /// The note [`Note::encode`] wrote; `None` for anything else (a torn or foreign file).
    pub fn decode(bytes: &[u8]) -> Option<Note> {
        let mut rest = bytes.strip_prefix(MAGIC)?;
        let mut line = || -> Option<&str> {
            let end = rest.iter().position(|&b| b == b'\n')?;
            let l = std::str::from_utf8(&rest[..end]).ok()?;
            rest = &rest[end + 1..];
            Some(l)
        };
        let validators = match line()? {
            "" => None,
            l => Some(Validators::from_line(l)?),
        };
        let text_len: usize = line()?.parse().ok()?;
        let sig_len: Option<usize> = match line()? {
            "-" => None,
            l => Some(l.parse().ok()?),
        };
        if rest.len() != text_len.checked_add(sig_len.unwrap_or(0))? {
            return None;
        }
        let (text, sig) = rest.split_at(text_len);
        Some(Note {
            text: text.to_vec(),
            sig: sig_len.map(|_| sig.to_vec()),
            validators,
        })
    }
}

impl HttpNet {
    /// The cache key of the note of `dir` on `authority` (another key than any file's).
    fn note_key(&self, authority: &str, dir: &[u8]) -> String {
        Cache::key(&format!("index+{}://{authority}", self.scheme), dir)
    }

    /// Keeps the index of `dir` for later runs.
    pub(super) fn note(&self, authority: &str, dir: &[u8], note: &Note) {
        self.cache
            .remember(&self.note_key(authority, dir), &note.encode());
    }

    /// Records that the kept index of `dir` is still the server's: a 304 answered
    /// `validators`, so the note is confirmed only if it is the one they came with (another
    /// run may have kept another since).
    pub(super) fn note_confirmed(&self, authority: &str, dir: &[u8], validators: &Validators) {
        let key = self.note_key(authority, dir);
        let kept = self
            .cache
            .remembered(&key)
            .and_then(|(b, _)| Note::decode(&b));
        if kept.is_some_and(|n| n.validators.as_ref() == Some(validators)) {
            self.cache.confirm(&key);
        }
    }

    /// Keeps for later runs that `dir` has no index.
    pub(super) fn note_unindexed(&self, authority: &str, dir: &[u8]) {
        self.cache
            .remember(&self.note_key(authority, dir), NO_INDEX);
    }

    /// Drops the kept index of `dir` (a file's content showed it out of date).
    pub(super) fn note_dropped(&self, authority: &str, dir: &[u8]) {
        self.cache.forget_note(&self.note_key(authority, dir));
    }

    /// The index of `dir` a run kept, parsed, if there is one that reads back whole, that
    /// parses, and (with pinned keys) whose kept signature one of them verifies, unexpired
    /// and at the highest revision seen; with how long ago it was last known current.
    pub(super) fn recall(&self, authority: &str, dir: &[u8]) -> Option<(Dir, Duration)> {
        let (bytes, at) = self.cache.remembered(&self.note_key(authority, dir))?;
        // A time ahead of the clock (it was set back): as old as can be.
        let age = SystemTime::now()
            .duration_since(at)
            .unwrap_or(Duration::MAX);
        // An age beyond what this machine's `Instant`s reach back to (its uptime): held as
        // known current now, which lengthens its TTL by at most that age.
        let known_at = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
        if bytes == NO_INDEX {
            let d = Dir {
                at: known_at,
                ..Dir::plain(Known::Unindexed)
            };
            return Some((d, age));
        }
        let note = Note::decode(&bytes)?;
        let keys = &self.options.keys;
        let (expires, revision) = if keys.is_empty() {
            (None, None)
        } else {
            let signed =
                sign::check(note.sig.as_deref(), &note.text, dir, keys, sign::now()).ok()?;
            if self.rollback(authority, dir, &signed).is_some() {
                return None;
            }
            (Some(signed.expires), Some(signed.revision))
        };
        let entries = crate::index::parse(&note.text).ok()?;
        // Counted and said when used as it is (past its TTL it is only asked about).
        if age < self.options.ttl {
            self.recalled.fetch_add(1, Ordering::Relaxed);
            if self.options.verbose {
                let url = self.url(
                    authority,
                    &crate::join(dir, crate::index::INDEX_NAME.as_bytes()),
                );
                eprintln!(
                    "roost: {url} from the cache (known current {:.0} s ago)",
                    age.as_secs_f64()
                );
            }
        }
        let d = Dir {
            known: Known::Indexed(Arc::new(Listing::new(entries))),
            at: known_at,
            validators: note.validators,
            expires,
            revision,
        };
        Some((d, age))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validators() -> Validators {
        Validators::from_line("\"6a-5f1\"\0Tue, 24 Nov 2026 18:00:00 GMT").unwrap()
    }

    #[test]
    fn notes_come_back_from_their_bytes() {
        for note in [
            Note {
                text: b"roost index 2\nf a\n".to_vec(),
                sig: Some(b"sig\nwith\nlines".to_vec()),
                validators: Some(validators()),
            },
            Note {
                text: Vec::new(),
                sig: None,
                validators: None,
            },
            Note {
                text: b"\n\n".to_vec(),
                sig: Some(Vec::new()),
                validators: None,
            },
        ] {
            assert_eq!(Note::decode(&note.encode()), Some(note));
        }
    }

    #[test]
    fn garbage_notes_never_panic_and_what_decodes_encodes_back() {
        let valid = [
            Note {
                text: b"#roost-index 1\nf 0644 3 1 1 - a\n".to_vec(),
                sig: Some(b"sig".to_vec()),
                validators: Some(validators()),
            },
            Note {
                text: b"x".to_vec(),
                sig: None,
                validators: None,
            },
        ]
        .map(|n| n.encode());
        let accepted = std::cell::Cell::new(0);
        crate::fuzz_check::check_garbage(0x0407_5eed, &valid, b"\n\0-0123456789", 200, |d| {
            let n = crate::fuzz_check::check_note_parser(d);
            accepted.set(accepted.get() + n);
            n
        });
        assert!(accepted.get() > 100, "{}", accepted.get());
    }

    /// A driver over a cache in a fresh directory (no server is asked anything).
    fn driver(dir: &std::path::Path, ttl: Duration) -> Arc<HttpNet> {
        let cache = Cache::new(dir, roost_vfs::cache::DEFAULT_LIMIT, false);
        let options = crate::net::HttpOptions {
            ttl,
            ..Default::default()
        };
        HttpNet::new("http", cache, options).unwrap()
    }

    fn index_text() -> Vec<u8> {
        crate::index::write(&crate::index::parse(b"#roost-index 1\n").unwrap())
    }

    #[test]
    fn a_304_confirms_only_the_note_its_validators_came_with() {
        let dir = tempfile::tempdir().unwrap();
        let net = driver(dir.path(), Duration::from_secs(300));
        let other = Validators::from_line("\"other\"\0").unwrap();
        net.note(
            "h:1",
            b"/d",
            &Note {
                text: index_text(),
                sig: None,
                validators: Some(validators()),
            },
        );
        let key = net.note_key("h:1", b"/d");
        let old = SystemTime::now() - Duration::from_secs(3600);
        let set_time = |t| {
            let objects = dir.path().join("objects").join(&key).join("note");
            std::fs::File::options()
                .write(true)
                .open(objects)
                .unwrap()
                .set_modified(t)
                .unwrap();
        };
        set_time(old);
        let time = || net.cache.remembered(&key).unwrap().1;
        // A 304 to other validators (another run kept another note since): untouched.
        net.note_confirmed("h:1", b"/d", &other);
        assert!(time() <= old);
        net.note_confirmed("h:1", b"/d", &validators());
        assert!(time() > old);
    }

    #[test]
    fn a_note_past_its_ttl_is_returned_to_ask_about_but_not_counted_as_used() {
        let dir = tempfile::tempdir().unwrap();
        let net = driver(dir.path(), Duration::from_secs(60));
        let note = Note {
            text: index_text(),
            sig: None,
            validators: Some(validators()),
        };
        net.note("h:1", b"/d", &note);
        let (_, age) = net.recall("h:1", b"/d").unwrap();
        assert!(age < Duration::from_secs(60));
        assert_eq!(net.recalled.load(Ordering::Relaxed), 1);
        let objects = dir.path().join("objects");
        let file = objects.join(net.note_key("h:1", b"/d")).join("note");
        std::fs::File::options()
            .write(true)
            .open(file)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(600))
            .unwrap();
        let (d, age) = net.recall("h:1", b"/d").unwrap();
        assert!(age >= Duration::from_secs(600));
        assert_eq!(d.validators, Some(validators()));
        assert_eq!(net.recalled.load(Ordering::Relaxed), 1, "not counted");
    }

    #[test]
    fn torn_or_foreign_notes_are_refused() {
        let whole = Note {
            text: b"abc".to_vec(),
            sig: Some(b"de".to_vec()),
            validators: Some(validators()),
        }
        .encode();
        for cut in 0..whole.len() {
            assert_eq!(Note::decode(&whole[..cut]), None, "cut at {cut}");
        }
        let mut longer = whole.clone();
        longer.push(b'x');
        assert_eq!(Note::decode(&longer), None);
        for bad in [
            &b"roost index note 2\n\n0\n-\n"[..],
            b"roost index note 1\nx\n0\n-\n",
            b"roost index note 1\n\n-1\n-\n",
            b"roost index note 1\n\n18446744073709551615\n1\n",
        ] {
            assert_eq!(Note::decode(bad), None, "{bad:?}");
        }
    }
}

//! Signed indexes (`docs/httpfs.md`, "Signed indexes"): Ed25519 (`ring`) signatures over
//! each directory's `.roostindex`, so a client that pins the public key refuses an index
//! someone else wrote (the CVMFS idea). Each `.roostindex.sig` signs the directory's path
//! relative to the indexed tree (escaped as index names are), a revision number and an
//! expiry time, then the exact bytes of the index; a client accepts it for a directory
//! whose path on the server ends with that path, until it expires, and (the driver's
//! part) never at a lower revision than it saw before for that directory, so an old
//! signed index cannot be served again in place of a newer one. Also the key files: the private key is a PKCS#8 document (as
//! `ring` and `openssl genpkey -algorithm ed25519 -outform DER` write it), the public key
//! one line `roost-ed25519 HEX`. The parsers never panic: bad input is an error saying
//! what is wrong.

use crate::index::{escape, hex, unescape, unhex};
use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file name of the signature next to each index.
pub const SIG_NAME: &str = ".roostindex.sig";
/// The first line of every signature file.
pub const SIG_HEADER: &str = "#roost-signature 2";
/// The first line of the signature files roosts before revisions wrote.
const SIG_HEADER_1: &str = "#roost-signature 1";
/// The first word of a public key line.
pub const KEY_PREFIX: &str = "roost-ed25519";

/// An Ed25519 public key, as pinned by clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublicKey(pub [u8; 32]);

impl PublicKey {
    /// Parses a public key line, `roost-ed25519 HEX` (64 hex digits), with optional
    /// surrounding white space.
    pub fn parse(text: &[u8]) -> Result<PublicKey, String> {
        let text = std::str::from_utf8(text).map_err(|_| "not UTF-8 text".to_string())?;
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            [KEY_PREFIX, key] => Self::from_hex(key),
            [first, ..] if *first != KEY_PREFIX => Err(format!(
                "expected a line `{KEY_PREFIX} HEX`, found {first:?}"
            )),
            _ => Err(format!("expected one line `{KEY_PREFIX} HEX`")),
        }
    }

    /// The key from 64 hexadecimal digits.
    fn from_hex(text: &str) -> Result<PublicKey, String> {
        unhex(text)
            .and_then(|b| b.try_into().ok())
            .map(PublicKey)
            .ok_or_else(|| "expected an Ed25519 key of 64 hexadecimal digits".to_string())
    }

    /// The key's line, `roost-ed25519 HEX` (without a newline).
    pub fn line(&self) -> String {
        format!("{KEY_PREFIX} {}", hex(&self.0))
    }

    /// Reads a public key file; the error names it.
    pub fn load(path: &Path) -> Result<PublicKey, String> {
        let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: not a public key: {e}", path.display()))
    }
}

/// A private key that signs indexes.
pub struct SigningKey(Ed25519KeyPair);

impl SigningKey {
    /// The key of a PKCS#8 document (v1 or v2, DER).
    pub fn from_pkcs8(der: &[u8]) -> Result<SigningKey, String> {
        if der.starts_with(b"-----BEGIN") {
            return Err("a PEM file; expected DER (convert it with \
                        `openssl pkey -in KEY -outform DER -out KEY.der`)"
                .into());
        }
        Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
            .map(SigningKey)
            .map_err(|e| format!("not an Ed25519 private key in PKCS#8 DER ({e})"))
    }

    /// Reads a private key file; the error names it.
    pub fn load(path: &Path) -> Result<SigningKey, String> {
        let der = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_pkcs8(&der).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Its public key, as clients pin it.
    pub fn public(&self) -> PublicKey {
        let mut key = [0u8; 32];
        key.copy_from_slice(self.0.public_key().as_ref());
        PublicKey(key)
    }

    /// The signature of the index `text` of the directory `path` (relative to the tree's
    /// top: `/`, `/sub/deep`) at `revision`, valid until `expires` (seconds since the
    /// epoch).
    pub fn sign(&self, path: &[u8], revision: u64, expires: i64, text: &[u8]) -> Signature {
        let mut sig = Signature {
            path: path.to_vec(),
            revision,
            expires,
            key: self.public(),
            signature: [0u8; 64],
        };
        let signed = self.0.sign(&sig.message(text));
        sig.signature.copy_from_slice(signed.as_ref());
        sig
    }
}

/// Where the public key of private key file `keyfile` goes: `KEYFILE.pub`.
pub fn public_file(keyfile: &Path) -> PathBuf {
    let mut name = keyfile.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// Makes a new key pair: the private key (PKCS#8 DER) in `keyfile`, mode 0600, and its
/// public key line in `KEYFILE.pub`. Neither file may exist already. The error names the
/// file.
pub fn generate_key_files(keyfile: &Path) -> Result<PublicKey, String> {
    let rng = ring::rand::SystemRandom::new();
    let der = Ed25519KeyPair::generate_pkcs8(&rng)
        .map_err(|_| "no random numbers for a new key".to_string())?;
    let public = SigningKey::from_pkcs8(der.as_ref())?.public();
    let pub_file = public_file(keyfile);
    let named = |path: &Path| {
        let path = path.display().to_string();
        move |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::AlreadyExists => format!("{path}: exists already; not overwritten"),
            _ => format!("{path}: {e}"),
        }
    };
    let open = |path: &Path, mode: u32| {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)
            .map_err(named(path))
    };
    // Both names are taken before anything is written, so a refusal leaves nothing behind
    // and touches nothing that was there.
    let mut pub_out = open(&pub_file, 0o644)?;
    let mut key_out = open(keyfile, 0o600).inspect_err(|_| {
        let _ = std::fs::remove_file(&pub_file);
    })?;
    let written = key_out
        .write_all(der.as_ref())
        .and_then(|_| key_out.sync_all())
        .map_err(named(keyfile))
        .and_then(|_| {
            pub_out
                .write_all(format!("{}\n", public.line()).as_bytes())
                .map_err(named(&pub_file))
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(keyfile);
        let _ = std::fs::remove_file(&pub_file);
        return Err(e);
    }
    Ok(public)
}

/// A `.roostindex.sig`: which directory, at which revision, until when, which key, and
/// the signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The directory's path relative to the indexed tree (`/`, `/sub/deep`).
    pub path: Vec<u8>,
    /// Grows with each signing of the directory (`roost index` takes the time in
    /// milliseconds, or one more than the signature it replaces).
    pub revision: u64,
    /// Seconds since the epoch after which the signature is refused.
    pub expires: i64,
    /// The key that signed it (said, not trusted: only pinned keys verify).
    pub key: PublicKey,
    pub signature: [u8; 64],
}

impl Signature {
    /// What is signed: the header line, the escaped path, the revision and the expiry,
    /// each on a line, then the index (a first line that no signature of version 1 could
    /// begin with: those began with the path).
    fn message(&self, text: &[u8]) -> Vec<u8> {
        let mut out = format!(
            "{SIG_HEADER}\n{}\n{}\n{}\n",
            escape(&self.path),
            self.revision,
            self.expires
        )
        .into_bytes();
        out.extend_from_slice(text);
        out
    }

    /// Whether this signs `text` with `key` (for its own path, revision and expiry).
    pub fn verifies(&self, text: &[u8], key: &PublicKey) -> bool {
        UnparsedPublicKey::new(&ED25519, key.0)
            .verify(&self.message(text), &self.signature)
            .is_ok()
    }

    /// Whether this signature may stand for the directory `dir` (a path on the server):
    /// its signed path is `dir`'s tail, whole components (`/` stands for any directory).
    pub fn covers(&self, dir: &[u8]) -> bool {
        self.path == b"/" || dir.ends_with(&self.path)
    }
}

/// Parses a signature file; the error names the line (1-based) and what is wrong.
pub fn parse(text: &[u8]) -> Result<Signature, String> {
    let text = std::str::from_utf8(text).map_err(|_| "not UTF-8 text".to_string())?;
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    match lines.first().copied() {
        Some(SIG_HEADER) => {}
        Some(SIG_HEADER_1) => {
            return Err(
                "line 1: a signature of version 1, without a revision or an expiry \
                        (made by an older roost index): sign the tree again with roost index \
                        --sign"
                    .into(),
            )
        }
        Some(other) if other.starts_with("#roost-signature ") => {
            return Err(format!("line 1: unknown signature version {other:?}"))
        }
        _ => return Err(format!("line 1: expected {SIG_HEADER:?}")),
    }
    if lines.len() != 6 {
        return Err(format!("expected 6 lines, found {}", lines.len()));
    }
    let field = |n: usize, name: &str| -> Result<&str, String> {
        lines[n - 1]
            .strip_prefix(name)
            .and_then(|v| v.strip_prefix(' '))
            .ok_or_else(|| format!("line {n}: expected `{name} ...`"))
    };
    let path = unescape(field(2, "path")?)
        .filter(|p| valid_path(p))
        .ok_or("line 2: expected a normalized absolute path")?;
    let revision = decimal(field(3, "revision")?).ok_or("line 3: expected a revision number")?;
    let expires = decimal(field(4, "expires")?)
        .and_then(|e| i64::try_from(e).ok())
        .ok_or("line 4: expected an expiry time (seconds since 1970)")?;
    let key = match field(5, "key")?.split_once(' ') {
        Some((KEY_PREFIX, key)) => PublicKey::from_hex(key).map_err(|e| format!("line 5: {e}"))?,
        _ => return Err(format!("line 5: expected `key {KEY_PREFIX} HEX`")),
    };
    let signature = unhex(field(6, "signature")?)
        .and_then(|b| b.try_into().ok())
        .ok_or("line 6: expected a signature of 128 hexadecimal digits")?;
    Ok(Signature {
        path,
        revision,
        expires,
        key,
        signature,
    })
}

/// A number written in decimal digits only (no sign, no leading zero but `0` itself), as
/// [`write`] writes it: one number has one text, and what verifies is what was signed.
fn decimal(text: &str) -> Option<u64> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

/// Whether `path` is absolute and normalized (`/`, or `/a/b` without `.`, `..`, empty
/// components or NUL).
fn valid_path(path: &[u8]) -> bool {
    path == b"/"
        || (path.starts_with(b"/")
            && path[1..]
                .split(|&b| b == b'/')
                .all(crate::index::valid_name))
}

/// The text of a signature file, the inverse of [`parse`].
pub fn write(sig: &Signature) -> Vec<u8> {
    format!(
        "{SIG_HEADER}\npath {}\nrevision {}\nexpires {}\nkey {}\nsignature {}\n",
        escape(&sig.path),
        sig.revision,
        sig.expires,
        sig.key.line(),
        hex(&sig.signature)
    )
    .into_bytes()
}

/// The time now, in seconds since the epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// How long ago `secs` seconds is, in words (`3 h`, `2 days`).
fn ago(secs: i64) -> String {
    if secs < 120 {
        format!("{secs} s")
    } else if secs < 7200 {
        format!("{} min", secs / 60)
    } else if secs < 172_800 {
        format!("{} h", secs / 3600)
    } else {
        format!("{} days", secs / 86_400)
    }
}

/// Checks the signature file `sig` (`None`: the server has none) of the index `text` of
/// directory `dir` (its path on the server) against the pinned `keys`, at time `now`
/// (seconds since the epoch). Returns the signature; the error is the reason, as said on
/// stderr. Whether its revision is one the caller saw outdone is the caller's to check.
pub fn check(
    sig: Option<&[u8]>,
    text: &[u8],
    dir: &[u8],
    keys: &[PublicKey],
    now: i64,
) -> Result<Signature, String> {
    let sig = parse(sig.ok_or("no signature")?).map_err(|e| format!("malformed signature: {e}"))?;
    if !sig.covers(dir) {
        return Err(format!(
            "the signature is for directory {} of a tree, not this one",
            escape(&sig.path)
        ));
    }
    if !keys.contains(&sig.key) {
        return Err(format!(
            "signature does not verify with the pinned key (it names the key {}, not pinned)",
            sig.key.line()
        ));
    }
    if !sig.verifies(text, &sig.key) {
        return Err(
            "signature does not verify with the pinned key (the index or its \
                    signature changed after signing)"
                .into(),
        );
    }
    if sig.expires <= now {
        return Err(format!(
            "the signature expired {} ago (expires {} in its {SIG_NAME}): sign the tree \
             again with roost index --sign",
            ago(now - sig.expires),
            sig.expires
        ));
    }
    Ok(sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> SigningKey {
        SigningKey(Ed25519KeyPair::from_seed_unchecked(&[seed; 32]).unwrap())
    }

    const INDEX: &[u8] = b"#roost-index 1\nd 0755 4096 1 2 - .\n";
    /// The time of the checks, and an expiry a day after it.
    const NOW: i64 = 1_795_000_000;
    const LATER: i64 = NOW + 86_400;

    /// `k`'s signature of [`INDEX`] for `path`, revision 7, valid until [`LATER`].
    fn signed(k: &SigningKey, path: &[u8]) -> Signature {
        k.sign(path, 7, LATER, INDEX)
    }

    fn ok(sig: &[u8], index: &[u8], dir: &[u8], keys: &[PublicKey]) -> bool {
        check(Some(sig), index, dir, keys, NOW).is_ok()
    }

    #[test]
    fn signed_indexes_verify_for_their_path_and_key_only() {
        let k = key(1);
        let sig = signed(&k, b"/sub/deep");
        let text = write(&sig);
        assert_eq!(parse(&text).unwrap(), sig);
        let keys = [key(2).public(), k.public()];
        assert_eq!(
            check(Some(&text), INDEX, b"/sub/deep", &keys, NOW),
            Ok(sig.clone())
        );
        assert!(ok(&text, INDEX, b"/base/sw/sub/deep", &keys));
        let refused = |sig: Option<&[u8]>, index: &[u8], dir: &[u8], keys: &[PublicKey]| {
            check(sig, index, dir, keys, NOW).unwrap_err()
        };
        assert_eq!(refused(None, INDEX, b"/sub/deep", &keys), "no signature");
        // Another directory: moved, or a name that merely ends the same.
        for dir in [&b"/sub"[..], b"/other/deep", b"/sub/xdeep", b"/"] {
            assert!(
                refused(Some(&text), INDEX, dir, &keys).contains("for directory /sub/deep"),
                "{dir:?}"
            );
        }
        // A changed index, or a key that is not pinned.
        let changed = b"#roost-index 1\nd 0755 4096 1 3 - .\n";
        assert!(refused(Some(&text), changed, b"/sub/deep", &keys).contains("changed after"));
        let e = refused(Some(&text), INDEX, b"/sub/deep", &[key(2).public()]);
        assert!(
            e.contains("not pinned") && e.contains(&k.public().line()),
            "{e}"
        );
        // A signature made for another path, relabelled: the path is signed too.
        let mut moved = signed(&k, b"/sub");
        moved.path = b"/sub/deep".to_vec();
        assert!(refused(Some(&write(&moved)), INDEX, b"/sub/deep", &keys).contains("changed"));
        // The revision and the expiry are signed too: neither can be changed.
        for change in [
            |s: &mut Signature| s.revision += 1,
            |s: &mut Signature| s.expires += 1,
        ] {
            let mut changed = sig.clone();
            change(&mut changed);
            let e = refused(Some(&write(&changed)), INDEX, b"/sub/deep", &keys);
            assert!(e.contains("changed after signing"), "{e}");
        }
        // The top's signature stands for any directory (see docs/httpfs.md).
        let top = write(&signed(&k, b"/"));
        assert!(ok(&top, INDEX, b"/a/b", &keys));
    }

    #[test]
    fn an_expired_signature_is_refused_saying_since_when() {
        let k = key(7);
        let keys = [k.public()];
        for (expires, said) in [
            (NOW, "expired 0 s ago"),
            (NOW - 90, "expired 90 s ago"),
            (NOW - 3 * 3600, "expired 3 h ago"),
            (NOW - 9 * 86_400, "expired 9 days ago"),
        ] {
            let sig = write(&k.sign(b"/d", 1, expires, INDEX));
            let e = check(Some(&sig), INDEX, b"/d", &keys, NOW).unwrap_err();
            assert!(e.contains(said) && e.contains("roost index --sign"), "{e}");
        }
        let sig = write(&k.sign(b"/d", 1, NOW + 1, INDEX));
        assert!(ok(&sig, INDEX, b"/d", &keys));
    }

    #[test]
    fn paths_with_odd_bytes_are_escaped() {
        let k = key(3);
        let sig = signed(&k, b"/a b/%\n\xff");
        let text = String::from_utf8(write(&sig)).unwrap();
        assert!(text.contains("\npath /a%20b/%25%0A%FF\n"), "{text}");
        assert!(ok(text.as_bytes(), INDEX, b"/x/a b/%\n\xff", &[k.public()]));
    }

    #[test]
    fn public_keys_read_back() {
        let k = key(4).public();
        assert_eq!(
            PublicKey::parse(format!("{}\n", k.line()).as_bytes()),
            Ok(k)
        );
        for (bad, want) in [
            (&b""[..], "expected one line"),
            (b"ssh-ed25519 AAAA", "found \"ssh-ed25519\""),
            (b"roost-ed25519 abcd", "64 hexadecimal"),
            (b"roost-ed25519", "expected one line"),
            (b"roost-ed25519 00 11", "expected one line"),
            (b"\xff", "UTF-8"),
        ] {
            let e = PublicKey::parse(bad).unwrap_err();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }

    #[test]
    fn malformed_signatures_are_errors_naming_the_line() {
        let good = String::from_utf8(write(&signed(&key(5), b"/d"))).unwrap();
        let lines: Vec<&str> = good.lines().collect();
        let with = |n: usize, line: &str| {
            let mut l = lines.clone();
            l[n] = line;
            l.join("\n") + "\n"
        };
        for (text, want) in [
            (String::new(), "line 1"),
            ("#roost-signature 3\n".into(), "unknown signature version"),
            (
                "#roost-signature 1\npath /d\nkey k\nsignature s\n".into(),
                "version 1, without a revision or an expiry",
            ),
            (
                good.replace("\nsignature", "\n\nsignature"),
                "expected 6 lines",
            ),
            (with(1, "path d"), "line 2: expected a normalized"),
            (with(1, "path /a/../b"), "line 2"),
            (with(1, "path /a/"), "line 2"),
            (with(1, "path /a%2"), "line 2"),
            (with(1, "paths /a"), "line 2: expected `path"),
            (with(2, "revision"), "line 3: expected `revision"),
            (with(2, "revision -1"), "line 3: expected a revision number"),
            (with(2, "revision 07"), "line 3: expected a revision number"),
            (with(2, "revision 1e3"), "line 3"),
            (with(2, "revision 99999999999999999999"), "line 3"),
            (with(3, "expires +5"), "line 4: expected an expiry time"),
            (with(3, "expires 9223372036854775808"), "line 4"),
            (with(3, "expire 5"), "line 4: expected `expires"),
            (
                with(4, "key ssh-ed25519 00"),
                "line 5: expected `key roost-ed25519",
            ),
            (
                with(4, "key roost-ed25519 00"),
                "line 5: expected an Ed25519 key",
            ),
            (with(5, "signature 00"), "line 6"),
        ] {
            let e = parse(text.as_bytes()).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e} lacks {want}");
        }
    }

    #[test]
    fn key_files_are_made_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let keyfile = dir.path().join("k");
        let public = generate_key_files(&keyfile).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&keyfile).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(PublicKey::load(&public_file(&keyfile)).unwrap(), public);
        let signer = SigningKey::load(&keyfile).unwrap();
        assert_eq!(signer.public(), public);
        let sig = signed(&signer, b"/");
        assert!(ok(&write(&sig), INDEX, b"/t", &[public]));
        // Not overwritten: neither the key nor its public half.
        let e = generate_key_files(&keyfile).unwrap_err();
        assert!(e.contains("k.pub: exists already"), "{e}");
        std::fs::remove_file(public_file(&keyfile)).unwrap();
        let e = generate_key_files(&keyfile).unwrap_err();
        assert!(e.contains("/k: exists already"), "{e}");
        assert!(!public_file(&keyfile).exists());
        assert_eq!(SigningKey::load(&keyfile).unwrap().public(), public);
        // Bad key files name the file and the trouble.
        std::fs::write(dir.path().join("pem"), "-----BEGIN PRIVATE KEY-----\n").unwrap();
        let e = SigningKey::load(&dir.path().join("pem")).err().unwrap();
        assert!(e.contains("/pem: a PEM file"), "{e}");
        let e = SigningKey::load(&public_file(&dir.path().join("k")))
            .err()
            .unwrap();
        assert!(e.contains("k.pub: No such file"), "{e}");
        let e = PublicKey::load(&keyfile).unwrap_err();
        assert!(e.contains("/k: not a public key"), "{e}");
    }

    #[test]
    fn garbage_never_panics() {
        use crate::fuzz_check::{check_garbage, check_signature_parsers};
        let valid = [write(&signed(&key(6), b"/a/b"))];
        check_garbage(
            0x9e37_79b9_7f4a_7c15,
            &valid,
            b" \n%/0f",
            300,
            check_signature_parsers,
        );
    }
}

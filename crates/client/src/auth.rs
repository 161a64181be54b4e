//! The client side of the authentication handshake (see `roost_wire::auth` for the lines).
//!
//! Methods are offered strongest first by default — `hmac` (when a key is configured), `unix`
//! (only when the server is on this host: the challenge file must be visible to both), then
//! `hostname` and `address` — because the server accepts the first method that succeeds and
//! its ACLs are written for subjects. cctools' client orders its methods the same way.
//!
//! For `unix` the client creates the file the server names — only if its name is one a
//! cctools or roost server would choose, so a hostile server cannot plant files elsewhere.
//!
//! An `hmac` key is a name and a secret. The secret lives in a file, read as `roost serve
//! --key NAME=FILE` reads it (the whole file, less one trailing newline), so both ends can
//! use the same file; `ROOST_HMAC_KEY=NAME=FILE` in the environment names the client's key.

use std::ffi::OsStr;
use std::io::{BufRead, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use hmac::{Hmac, Mac};
use roost_wire::auth::{self, Method, Subject};
use sha2::Sha256;

use crate::error::{Error, Result};
use crate::lines::read_line;

/// A shared secret for the `hmac` method.
#[derive(Clone, PartialEq, Eq)]
pub struct HmacKey {
    /// The key's name, which the server looks up and which becomes the subject `hmac:<name>`.
    pub name: String,
    /// The secret bytes.
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HmacKey")
            .field("name", &self.name)
            .field("secret", &"<hidden>")
            .finish()
    }
}

impl HmacKey {
    /// A key from its name and secret.
    pub fn new(name: &str, secret: &[u8]) -> Result<HmacKey> {
        if !auth::is_valid_key_name(name) {
            return Err(Error::BadKey(format!(
                "hmac key name {name:?}: use letters, digits and . _ - @ +"
            )));
        }
        if secret.is_empty() {
            return Err(Error::BadKey(format!("hmac key {name}: empty secret")));
        }
        Ok(HmacKey {
            name: name.to_string(),
            secret: secret.to_vec(),
        })
    }

    /// Key `name` with the secret in `path` (see [`read_secret_file`]).
    pub fn from_file(name: &str, path: &Path) -> Result<HmacKey> {
        let secret = read_secret_file(path).map_err(Error::BadKey)?;
        HmacKey::new(name, &secret)
    }

    /// Parses `NAME=FILE` and reads the key.
    pub fn from_spec(spec: &str) -> Result<HmacKey> {
        let (name, file) = spec
            .split_once('=')
            .ok_or_else(|| Error::BadKey(format!("hmac key {spec:?}: expected NAME=FILE")))?;
        HmacKey::from_file(name, Path::new(file))
    }

    /// The key named by `ROOST_HMAC_KEY` (`NAME=FILE`), if it is set.
    pub fn from_env() -> Option<Result<HmacKey>> {
        std::env::var("ROOST_HMAC_KEY")
            .ok()
            .map(|spec| HmacKey::from_spec(&spec))
    }

    /// HMAC-SHA256 of the nonce's hex text under this key.
    pub fn tag(&self, nonce_hex: &str) -> Vec<u8> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC accepts keys of any length");
        mac.update(nonce_hex.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }
}

/// The secret in a key file: the whole file, less one trailing newline. A file that its
/// group or others may read or write is refused, as ssh refuses such a private key: the
/// secret is as good as theirs; so is anything but a regular file, an empty one, and one of
/// 64 KiB or more (not a key). Errors name the file and say what to do.
pub fn read_secret_file(path: &Path) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    /// Far more than any secret.
    const MOST: u64 = 64 * 1024;
    let shown = path.display();
    let cannot = |e: std::io::Error| {
        format!(
            "cannot read the key file {shown}: {}",
            crate::error::io_words(&e)
        )
    };
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(format!(
            "{shown} is not a regular file: a key file holds the secret"
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{shown}: a key file must be private to its owner, but its mode is {:04o} \
             (run chmod 600 {shown})",
            meta.mode() & 0o7777
        ));
    }
    let mut secret = Vec::new();
    Read::take(&mut file, MOST)
        .read_to_end(&mut secret)
        .map_err(cannot)?;
    if secret.len() as u64 >= MOST {
        return Err(format!("{shown}: larger than 64 KiB: not a key file"));
    }
    if secret.last() == Some(&b'\n') {
        secret.pop();
    }
    if secret.is_empty() {
        return Err(format!("{shown} is empty: a key file holds the secret"));
    }
    Ok(secret)
}

/// Which methods to offer, in order, and the secrets they need.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// Methods in the order offered. `hmac` is skipped without a key, `unix` when the server
    /// is not on this host.
    pub methods: Vec<Method>,
    /// The key for `hmac`.
    pub hmac_key: Option<HmacKey>,
}

impl Credentials {
    /// The default order with no key.
    pub fn new() -> Credentials {
        Credentials {
            methods: vec![
                Method::Hmac,
                Method::Unix,
                Method::Hostname,
                Method::Address,
            ],
            hmac_key: None,
        }
    }

    /// The default order, with the key from the environment if one is configured.
    pub fn from_env() -> Result<Credentials> {
        let mut creds = Credentials::new();
        creds.hmac_key = HmacKey::from_env().transpose()?;
        Ok(creds)
    }

    /// What a server offers when it connects to another server on its own behalf
    /// (`whoareyou`, group relays): `address`, then `hostname`, as cctools' server does.
    /// Never `unix`: the server's client would create challenge files as the server's own
    /// user, which a client of the server could then claim (the challenge path is theirs to
    /// choose); never `hmac`, as a server holds no user's secret.
    pub fn server_to_server() -> Credentials {
        Credentials::only(&[Method::Address, Method::Hostname])
    }

    /// Only these methods, in this order.
    pub fn only(methods: &[Method]) -> Credentials {
        Credentials {
            methods: methods.to_vec(),
            hmac_key: None,
        }
    }

    /// The same credentials with an `hmac` key.
    pub fn with_key(mut self, key: HmacKey) -> Credentials {
        self.hmac_key = Some(key);
        self
    }
}

impl Default for Credentials {
    fn default() -> Credentials {
        Credentials::new()
    }
}

fn send<W: Write>(w: &mut W, bytes: &[u8]) -> Result<()> {
    w.write_all(bytes)?;
    w.flush()?;
    Ok(())
}

fn read_yes_no<R: BufRead>(r: &mut R) -> Result<bool> {
    Ok(auth::parse_yes_no(&read_line(r, auth::AUTH_LINE_MAX)?)?)
}

/// Reads the answer to the first offer: a peer whose first line is not `yes` or `no` (a web
/// server's status line, an ssh banner) does not speak Chirp at all, and the error shows
/// what it sent.
fn read_first_answer<R: BufRead>(r: &mut R) -> Result<bool> {
    /// Bytes of the peer's answer worth showing.
    const SHOWN: usize = 64;
    let seen = loop {
        match r.fill_buf() {
            Ok(buf) => break buf[..buf.len().min(SHOWN)].to_vec(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::Io(e)),
        }
    };
    match read_line(r, auth::AUTH_LINE_MAX) {
        Ok(line) => auth::parse_yes_no(&line).map_err(|_| Error::NotChirp(seen)),
        Err(Error::Protocol(_)) => Err(Error::NotChirp(seen)),
        Err(e) => Err(e),
    }
}

/// True if a server may ask us to create `path`: a file directly in a temporary directory
/// (`/tmp`, `/var/tmp` or `$TMPDIR`, where a server's challenges live) whose name is one
/// cctools (`challenge.*`) or roost (`roost-challenge.*`) would choose. A hostile server
/// could otherwise make the client create empty files with meaningful names anywhere the
/// user can write (`~/.hushlogin`, lock files...).
fn plausible_challenge(path: &Path) -> bool {
    let name = path.file_name().map(OsStr::as_bytes).unwrap_or_default();
    let named_so = name.starts_with(b"challenge.") || name.starts_with(b"roost-challenge.");
    let temp = std::env::temp_dir();
    let in_temp = path.parent().is_some_and(|dir| {
        [Path::new("/tmp"), Path::new("/var/tmp"), temp.as_path()].contains(&dir)
    });
    path.is_absolute() && named_so && in_temp
}

/// The `unix` method after the server's `yes`: create the named file, report, clean up.
fn prove_unix<R: BufRead, W: Write>(r: &mut R, w: &mut W) -> Result<bool> {
    let path = auth::parse_challenge(&read_line(r, auth::AUTH_LINE_MAX)?)?;
    let path = Path::new(OsStr::from_bytes(&path));
    if !plausible_challenge(path) {
        send(w, auth::NO)?;
        return Ok(false);
    }
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOCTTY)
        .open(path);
    if created.is_err() {
        send(w, auth::NO)?;
        return Ok(false);
    }
    let verdict = send(w, auth::YES).and_then(|()| read_yes_no(r));
    let _ = std::fs::remove_file(path);
    verdict
}

/// The `hmac` method after the server's `yes`: answer the nonce with the key's tag.
fn prove_hmac<R: BufRead, W: Write>(r: &mut R, w: &mut W, key: &HmacKey) -> Result<bool> {
    let nonce = auth::parse_nonce_line(&read_line(r, auth::AUTH_LINE_MAX)?)?;
    send(w, &auth::response_line(&key.name, &key.tag(&nonce))?)?;
    read_yes_no(r)
}

/// Runs the handshake: offers each usable method in order until one succeeds, and returns
/// the subject the server assigned. `peer_is_local` says whether `unix` can work.
pub fn authenticate<R: BufRead, W: Write>(
    r: &mut R,
    w: &mut W,
    creds: &Credentials,
    peer_is_local: bool,
) -> Result<Subject> {
    let mut tried = Vec::new();
    for &method in &creds.methods {
        let key = creds.hmac_key.as_ref();
        if (method == Method::Hmac && key.is_none()) || (method == Method::Unix && !peer_is_local) {
            continue;
        }
        let first = tried.is_empty();
        tried.push(method.name().to_string());
        send(w, &method.offer_line())?;
        let offered = if first {
            read_first_answer(r)?
        } else {
            read_yes_no(r)?
        };
        if !offered {
            continue;
        }
        let accepted = match (method, key) {
            (Method::Unix, _) => prove_unix(r, w)?,
            (Method::Hmac, Some(key)) => prove_hmac(r, w, key)?,
            _ => read_yes_no(r)?,
        };
        if !accepted {
            continue;
        }
        // The closing `yes`, method and name; cctools' client accepts anything but `yes` as
        // "not authorized to continue" and moves on, and so do we.
        if !read_yes_no(r)? {
            continue;
        }
        let m = read_line(r, auth::AUTH_LINE_MAX)?;
        let name = read_line(r, auth::AUTH_LINE_MAX)?;
        return Ok(Subject::new(
            &String::from_utf8_lossy(&m),
            &String::from_utf8_lossy(&name),
        ));
    }
    Err(Error::AuthFailed(tried))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::path::PathBuf;

    fn run(creds: &Credentials, server: &[u8], local: bool) -> (Result<Subject>, String) {
        let mut r = Cursor::new(server.to_vec());
        let mut w = Vec::new();
        let res = authenticate(&mut r, &mut w, creds, local);
        (res, String::from_utf8(w).unwrap())
    }

    #[test]
    fn address_handshake_matches_cctools_bytes() {
        let creds = Credentials::only(&[Method::Address]);
        let (subject, sent) = run(&creds, b"yes\nyes\nyes\naddress\n127.0.0.1\n", true);
        assert_eq!(subject.unwrap().to_string(), "address:127.0.0.1");
        assert_eq!(sent, "address\n");
    }

    #[test]
    fn refused_methods_fall_through_to_the_next() {
        let creds = Credentials::only(&[Method::Hostname, Method::Address]);
        let (subject, sent) = run(&creds, b"no\nyes\nyes\nyes\naddress\n10.0.0.1\n", true);
        assert_eq!(subject.unwrap().to_string(), "address:10.0.0.1");
        assert_eq!(sent, "hostname\naddress\n");
    }

    #[test]
    fn a_rejected_verdict_falls_through_too() {
        let creds = Credentials::only(&[Method::Hostname, Method::Address]);
        let (subject, _) = run(&creds, b"yes\nno\nyes\nyes\nyes\naddress\n10.0.0.1\n", true);
        assert_eq!(subject.unwrap().name, "10.0.0.1");
    }

    #[test]
    fn all_refused_is_auth_failed_naming_the_methods() {
        let creds = Credentials::only(&[Method::Hostname, Method::Address]);
        let (subject, _) = run(&creds, b"no\nno\n", true);
        let err = subject.unwrap_err();
        assert!(matches!(&err, Error::AuthFailed(t) if t == &["hostname", "address"]));
        assert_eq!(err.errno(), libc::EACCES);
    }

    #[test]
    fn a_peer_that_answers_no_chirp_is_named_with_its_first_bytes() {
        let creds = Credentials::only(&[Method::Address]);
        let (subject, _) = run(&creds, b"SSH-2.0-OpenSSH_9.6\r\n\x01", true);
        let err = subject.unwrap_err();
        assert!(matches!(&err, Error::NotChirp(first) if first.starts_with(b"SSH-2.0")));
        assert!(
            err.to_string()
                .contains("\"SSH-2.0-OpenSSH_9.6\\r\\n\\x01\""),
            "{err}"
        );
        // A refusal of a later offer is still just a refusal.
        let creds = Credentials::only(&[Method::Hostname, Method::Address]);
        let (subject, _) = run(&creds, b"no\nyes\nyes\nyes\naddress\n10.0.0.1\n", true);
        assert_eq!(subject.unwrap().name, "10.0.0.1");
    }

    #[test]
    fn hmac_answers_the_nonce_with_the_tag() {
        let key = HmacKey {
            name: "ci".into(),
            secret: b"s3cret".to_vec(),
        };
        let nonce = "ab".repeat(32);
        let creds = Credentials::only(&[Method::Hmac]).with_key(key.clone());
        let server = format!("yes\n{nonce}\nyes\nyes\nhmac\nci\n");
        let (subject, sent) = run(&creds, server.as_bytes(), false);
        assert_eq!(subject.unwrap().to_string(), "hmac:ci");
        let tag = roost_wire::hex::encode(&key.tag(&nonce));
        assert_eq!(sent, format!("hmac\nci {tag}\n"));
    }

    #[test]
    fn hmac_tag_is_rfc4231_hmac_sha256() {
        // RFC 4231 test case 2.
        let key = HmacKey {
            name: "k".into(),
            secret: b"Jefe".to_vec(),
        };
        let tag = key.tag("what do ya want for nothing?");
        assert_eq!(
            roost_wire::hex::encode(&tag),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn hmac_is_skipped_without_a_key_and_unix_when_remote() {
        let creds = Credentials::new();
        let (subject, sent) = run(&creds, b"yes\nyes\nyes\nhostname\nh.example.org\n", false);
        assert_eq!(subject.unwrap().to_string(), "hostname:h.example.org");
        assert_eq!(sent, "hostname\n");
    }

    #[test]
    fn unix_creates_the_challenge_file_and_removes_it() {
        let challenge =
            std::env::temp_dir().join(format!("roost-challenge.test.{}", std::process::id()));
        let creds = Credentials::only(&[Method::Unix]);
        let server = format!("yes\n{}\nyes\nyes\nunix\nalice\n", challenge.display());
        let (subject, sent) = run(&creds, server.as_bytes(), true);
        assert_eq!(subject.unwrap().to_string(), "unix:alice");
        assert_eq!(sent, "unix\nyes\n");
        assert!(!challenge.exists());
    }

    #[test]
    fn unix_refuses_to_create_files_a_server_should_not_ask_for() {
        let creds = Credentials::only(&[Method::Unix]);
        let dir = std::env::temp_dir();
        for bad in [
            dir.join(".hushlogin"),
            PathBuf::from("challenge.1"),
            dir.join("notes.txt"),
        ] {
            let existed = bad.exists();
            let server = format!("yes\n{}\n", bad.display());
            let (subject, sent) = run(&creds, server.as_bytes(), true);
            assert!(matches!(subject, Err(Error::AuthFailed(_))));
            assert_eq!(sent, "unix\nno\n");
            assert_eq!(bad.exists(), existed, "{}", bad.display());
        }
        assert!(plausible_challenge(Path::new("/tmp/challenge.12.34")));
        assert!(plausible_challenge(Path::new(
            "/var/tmp/roost-challenge.1.2"
        )));
        // Only directly in a temporary directory: not where a server's owner keeps files
        // of value, such as the export or a user's home.
        for elsewhere in [
            "/var/x/roost-challenge.1.2",
            "/tmp/sub/roost-challenge.1.2",
            "/tmp/../etc/challenge.1",
            "/root/.ssh/challenge.1",
        ] {
            assert!(!plausible_challenge(Path::new(elsewhere)), "{elsewhere}");
        }
    }

    #[test]
    fn unix_declines_a_challenge_it_cannot_meet() {
        let creds = Credentials::only(&[Method::Unix, Method::Address]);
        let server = b"yes\n/nonexistent-dir/challenge.1\nyes\nyes\nyes\naddress\n1.2.3.4\n";
        let (subject, sent) = run(&creds, server, true);
        assert_eq!(subject.unwrap().to_string(), "address:1.2.3.4");
        assert_eq!(sent, "unix\nno\naddress\n");
    }

    #[test]
    fn keys_read_like_the_servers_key_files() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile_dir("key");
        let path = dir.join("build.key");
        std::fs::write(&path, b"s3 cret\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let k = HmacKey::from_spec(&format!("build={}", path.display())).unwrap();
        assert_eq!(
            (k.name.as_str(), k.secret.as_slice()),
            ("build", &b"s3 cret"[..])
        );
        assert!(!format!("{k:?}").contains("s3"));
        std::fs::write(&path, b"\n").unwrap();
        assert!(HmacKey::from_file("build", &path).is_err());
        assert!(HmacKey::from_spec("no-equals").is_err());
        assert!(HmacKey::new("bad name", b"x").is_err());
        let missing = HmacKey::from_file("k", Path::new("/nonexistent/key")).unwrap_err();
        assert!(
            missing.to_string().contains("/nonexistent/key"),
            "{missing}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn key_files_others_may_read_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile_dir("open-key");
        let path = dir.join("k.key");
        std::fs::write(&path, b"secret").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = HmacKey::from_file("k", &path).unwrap_err().to_string();
            assert!(err.contains("chmod 600") && err.contains("k.key"), "{err}");
        }
        for mode in [0o600, 0o400] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert!(HmacKey::from_file("k", &path).is_ok(), "{mode:o}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir(what: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("roost-{what}-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

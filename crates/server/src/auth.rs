//! The server side of Chirp authentication.
//!
//! The client offers one method name a line; the server answers `no` to methods it does not
//! run, or `yes` and then the method's own exchange. On success the server sends
//! `yes\n<method>\n<name>\n` and the connection's subject is `<method>:<name>`.
//!
//! Methods: `address` (the peer's IP), `hostname` (reverse lookup confirmed by a forward one),
//! `unix` (a client on this host proves the user that owns its connection: it creates a file
//! the server names, and the file's owner must be the owner the kernel records for the
//! client's socket), and `hmac`, roost's shared-secret method: the server sends a nonce, the
//! client answers with a key name and HMAC-SHA256(secret, nonce); the secret never crosses
//! the wire. Wrong hmac answers are slowed per address ([`crate::throttle`]).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::HashMap;
use std::ffi::CString;
use std::io::{self, BufRead, Write};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

/// Longest line accepted during authentication.
const AUTH_LINE_MAX: usize = 1024;

/// How long one read may wait during the handshake.
pub const HANDSHAKE_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the whole handshake may take, from the connection's first byte to its subject:
/// a client that has not said who it is holds a slot only this long, however it dribbles.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(15);

/// Most methods one connection may try before it is dropped.
const MAX_ATTEMPTS: usize = 16;

pub use roost_wire::auth::Method;

/// What the server accepts, and the secrets behind `hmac`.
#[derive(Clone, Debug)]
pub struct AuthConfig {
    pub methods: Vec<Method>,
    /// Key name to secret, for `hmac`.
    pub keys: HashMap<String, Vec<u8>>,
    /// Where `unix` challenge files are created.
    pub challenge_dir: PathBuf,
    /// How long the client has to create a `unix` challenge file.
    pub challenge_timeout: Duration,
    /// Wrong `hmac` answers per address, shared by every connection.
    pub hmac_failures: std::sync::Arc<crate::throttle::Throttle>,
    /// Users whose `unix` logins are refused: the one guest jobs run as, when jobs may reach
    /// the network (on a server run by an ordinary user that is the server's own, so a job
    /// would otherwise log in as the owner).
    pub unix_refused: Vec<libc::uid_t>,
}

impl Default for AuthConfig {
    fn default() -> AuthConfig {
        AuthConfig {
            methods: vec![
                Method::Hmac,
                Method::Unix,
                Method::Hostname,
                Method::Address,
            ],
            keys: HashMap::new(),
            challenge_dir: PathBuf::from("/tmp"),
            challenge_timeout: Duration::from_secs(5),
            hmac_failures: Default::default(),
            unix_refused: Vec::new(),
        }
    }
}

/// The two ends of the connection being authenticated, as the server sees them.
#[derive(Clone, Copy, Debug)]
pub struct Endpoints {
    /// The client's address and port.
    pub peer: SocketAddr,
    /// The server's own end.
    pub local: SocketAddr,
}

/// Runs the handshake; `Ok(Some(subject))` on success, `Ok(None)` if the client gave up.
pub fn accept<R: BufRead, W: Write>(
    config: &AuthConfig,
    ends: Endpoints,
    reader: &mut R,
    writer: &mut W,
) -> io::Result<Option<String>> {
    let peer = ends.peer.ip();
    let started = std::time::Instant::now();
    for _ in 0..MAX_ATTEMPTS {
        if started.elapsed() > HANDSHAKE_DEADLINE {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "authentication took too long",
            ));
        }
        let Some(offer) = read_line(reader)? else {
            return Ok(None);
        };
        let method = Method::parse(offer.trim().as_bytes()).filter(|m| config.methods.contains(m));
        // `unix` proves the owner of the client's socket, so it is open only to a client
        // whose socket is on this host.
        let socket_owner = match method {
            Some(Method::Unix) => crate::socket_owner::owner(ends.peer, ends.local)
                .filter(|uid| !config.unix_refused.contains(uid)),
            _ => None,
        };
        let Some(method) = method.filter(|m| *m != Method::Unix || socket_owner.is_some()) else {
            send(writer, "no\n")?;
            continue;
        };
        send(writer, "yes\n")?;
        let outcome = match (method, socket_owner) {
            (Method::Address, _) => Outcome::Accepted(peer.to_string()),
            (Method::Hostname, _) => {
                confirmed_hostname(peer).map_or(Outcome::Rejected, Outcome::Accepted)
            }
            (Method::Unix, Some(owner)) => unix_challenge(config, owner, reader, writer)?,
            (Method::Unix, None) => Outcome::Rejected,
            (Method::Hmac, _) => hmac_challenge(config, peer, reader, writer)?,
        };
        match outcome {
            Outcome::Accepted(name) => {
                let name = roost_wire::auth::sanitize(&name);
                send(writer, &format!("yes\nyes\n{}\n{}\n", method.name(), name))?;
                return Ok(Some(format!("{}:{}", method.name(), name)));
            }
            Outcome::Rejected => send(writer, "no\n")?,
            Outcome::Abandoned => {}
        }
    }
    Ok(None)
}

/// How one method's exchange ended.
enum Outcome {
    /// The client proved this name.
    Accepted(String),
    /// The client's proof failed; the server says `no`.
    Rejected,
    /// The client gave up within the exchange (it said so itself); nothing more is sent.
    Abandoned,
}

fn send<W: Write>(writer: &mut W, text: &str) -> io::Result<()> {
    writer.write_all(text.as_bytes())?;
    writer.flush()
}

/// One line without its newline; `None` at end of stream. Over-long lines are an error.
fn read_line<R: BufRead>(reader: &mut R) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let mut limited = io::Read::take(&mut *reader, AUTH_LINE_MAX as u64 + 1);
    let n = limited.read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "authentication line too long or cut short",
        ));
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line).map(Some).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "authentication line is not UTF-8",
        )
    })
}

/// The peer's name by reverse lookup, kept only if that name resolves back to the peer.
fn confirmed_hostname(peer: IpAddr) -> Option<String> {
    let name = reverse_lookup(peer)?;
    let forward = (name.as_str(), 0).to_socket_addrs().ok()?;
    forward.into_iter().any(|a| a.ip() == peer).then_some(name)
}

fn reverse_lookup(peer: IpAddr) -> Option<String> {
    let addr: std::net::SocketAddr = (peer, 0).into();
    let (storage, len) = socket_addr_to_raw(&addr);
    let mut host = [0 as libc::c_char; 1025];
    // SAFETY: `storage` holds a sockaddr of `len` bytes, and `host` is writable for its length.
    let r = unsafe {
        libc::getnameinfo(
            &storage as *const libc::sockaddr_storage as *const libc::sockaddr,
            len,
            host.as_mut_ptr(),
            host.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        )
    };
    if r != 0 {
        return None;
    }
    // SAFETY: getnameinfo succeeded, so `host` holds a NUL-terminated name.
    let name = unsafe { std::ffi::CStr::from_ptr(host.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

fn socket_addr_to_raw(addr: &std::net::SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: `sockaddr_storage` is plain data, valid all zeros.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        std::net::SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `sockaddr_storage` is large and aligned enough for any socket address.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        std::net::SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: `sockaddr_storage` is large and aligned enough for any socket address.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The `unix` method: name a fresh path, wait for the client's "yes", and take the owner of
/// the file it created there, if that is `socket_owner`, the owner of the client's own
/// connection. A file alone proves only that someone made it: the server's own client when
/// `whoareyou` is pointed at a server that names this challenge, or another user whose fresh
/// file the client renamed into place. Unlike cctools, only a freshly made file counts: an
/// empty regular file (not a symlink, which would lend its target's owner), with one link
/// (not a hard link to somebody else's file) and born after the challenge was issued.
fn unix_challenge<R: BufRead, W: Write>(
    config: &AuthConfig,
    socket_owner: libc::uid_t,
    reader: &mut R,
    writer: &mut W,
) -> io::Result<Outcome> {
    let path = config.challenge_dir.join(format!(
        "roost-challenge.{}.{}",
        std::process::id(),
        crate::random::hex::<8>()?
    ));
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a NUL-terminated path; a failure (none there) is what we want.
    unsafe { libc::unlink(cpath.as_ptr()) };
    let issued = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    send(writer, &format!("{}\n", path.display()))?;
    let answer = read_line(reader)?;
    let mut outcome = Outcome::Abandoned;
    if answer.as_deref() == Some("yes") {
        outcome = Outcome::Rejected;
        let deadline = std::time::Instant::now() + config.challenge_timeout;
        loop {
            // SAFETY: `struct statx` is plain data, valid all zeros.
            let mut st: libc::statx = unsafe { std::mem::zeroed() };
            let mask = libc::STATX_BASIC_STATS | libc::STATX_BTIME;
            // SAFETY: a NUL-terminated path and a writable `struct statx`.
            let found = unsafe {
                libc::statx(
                    libc::AT_FDCWD,
                    cpath.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                    mask,
                    &mut st,
                )
            };
            if found == 0 {
                let regular = u32::from(st.stx_mode) & libc::S_IFMT == libc::S_IFREG;
                // File systems without birth times cannot tell a fresh file from an old one.
                let fresh =
                    st.stx_mask & libc::STATX_BTIME != 0 && st.stx_btime.tv_sec >= issued - 1;
                let owners_agree = st.stx_uid == socket_owner;
                if regular && st.stx_nlink == 1 && st.stx_size == 0 && fresh && owners_agree {
                    if let Some(user) = user_name(st.stx_uid) {
                        outcome = Outcome::Accepted(user);
                    }
                }
                break;
            }
            if std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // SAFETY: a NUL-terminated path; nothing is left to undo if it fails.
    unsafe { libc::unlink(cpath.as_ptr()) };
    Ok(outcome)
}

/// The login name of `uid`, if it has one.
pub fn user_name(uid: libc::uid_t) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: `struct passwd` is plain data, valid all zeros (null pointers).
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: `pwd`, `buf` (of its length) and `result` are writable, as getpwuid_r fills them.
    let r = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if r != 0 || result.is_null() {
        return None;
    }
    Some(
        // SAFETY: getpwuid_r succeeded, so `pw_name` is a NUL-terminated string in `buf`, still alive.
        unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// The `hmac` method: a fresh nonce out, `<key> <hex mac>` back, compared in constant time.
/// An address whose answers have been wrong waits its turn before the next is checked, so
/// guessing goes no faster over many connections than over one.
fn hmac_challenge<R: BufRead, W: Write>(
    config: &AuthConfig,
    peer: IpAddr,
    reader: &mut R,
    writer: &mut W,
) -> io::Result<Outcome> {
    let nonce = crate::random::hex::<32>()?;
    send(writer, &format!("{nonce}\n"))?;
    let Some(answer) = read_line(reader)? else {
        return Ok(Outcome::Abandoned);
    };
    if !config.hmac_failures.wait_turn(peer, HANDSHAKE_DEADLINE) {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "too many wrong hmac answers from this address",
        ));
    }
    let outcome = check_hmac(config, &nonce, &answer);
    if matches!(outcome, Outcome::Rejected) {
        config.hmac_failures.failed(peer);
    }
    Ok(outcome)
}

/// Whether `answer` is `<key> <hex mac>` for a key this server holds and `nonce`.
fn check_hmac(config: &AuthConfig, nonce: &str, answer: &str) -> Outcome {
    let mut words = answer.split_whitespace();
    let (Some(key), Some(mac_hex), None) = (words.next(), words.next(), words.next()) else {
        return Outcome::Rejected;
    };
    let (Some(secret), Some(mac)) = (
        config.keys.get(key),
        roost_wire::hex::decode(mac_hex.as_bytes()),
    ) else {
        return Outcome::Rejected;
    };
    let mut expected =
        Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    expected.update(nonce.as_bytes());
    match expected.verify_slice(&mac) {
        Ok(()) => Outcome::Accepted(key.to_string()),
        Err(_) => Outcome::Rejected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// A client on another host: no socket of this host owns the connection.
    const ENDS: Endpoints = Endpoints {
        peer: SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1)), 1),
        local: SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1)), 2),
    };

    fn run(config: &AuthConfig, client: &str) -> (Option<String>, String) {
        let mut reader = Cursor::new(client.as_bytes().to_vec());
        let mut out = Vec::new();
        let subject = accept(config, ENDS, &mut reader, &mut out).unwrap();
        (subject, String::from_utf8(out).unwrap())
    }

    #[test]
    fn refuses_unknown_methods_then_accepts_address() {
        let (subject, out) = run(&AuthConfig::default(), "kerberos\naddress\n");
        assert_eq!(subject.as_deref(), Some("address:127.0.0.1"));
        assert_eq!(out, "no\nyes\nyes\nyes\naddress\n127.0.0.1\n");
    }

    #[test]
    fn disabled_methods_are_refused() {
        let config = AuthConfig {
            methods: vec![Method::Unix],
            ..AuthConfig::default()
        };
        let (subject, out) = run(&config, "address\n");
        assert_eq!(subject, None);
        assert_eq!(out, "no\n");
    }

    #[test]
    fn unix_is_refused_when_no_socket_of_this_host_owns_the_connection() {
        // ENDS names a connection no local socket holds, as a client on another host.
        let (subject, out) = run(&AuthConfig::default(), "unix\naddress\n");
        assert_eq!(subject.as_deref(), Some("address:127.0.0.1"));
        assert!(out.starts_with("no\nyes\n"), "{out:?}");
    }

    #[test]
    fn unix_is_refused_for_the_user_guest_jobs_run_as() {
        use std::net::{TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        let ends = Endpoints {
            peer,
            local: accepted.local_addr().unwrap(),
        };
        let offer = |config: &AuthConfig| {
            let mut reader = Cursor::new(b"unix\n".to_vec());
            let mut out = Vec::new();
            accept(config, ends, &mut reader, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let mut config = AuthConfig::default();
        assert!(
            offer(&config).starts_with("yes\n"),
            "a local socket may try"
        );
        // SAFETY: a plain query of this process's user.
        config.unix_refused.push(unsafe { libc::geteuid() });
        assert_eq!(offer(&config), "no\n");
    }

    #[test]
    fn hmac_rejects_a_wrong_mac_and_unknown_keys() {
        let mut config = AuthConfig::default();
        config.keys.insert("build".into(), b"s3cret".to_vec());
        let (subject, _) = run(&config, &format!("hmac\nbuild {}\n", "00".repeat(32)));
        assert_eq!(subject, None);
        let (subject, _) = run(&config, "hmac\nnobody 00\n");
        assert_eq!(subject, None);
    }

    #[test]
    fn over_long_lines_are_an_error() {
        let mut reader = Cursor::new(vec![b'a'; 5000]);
        let mut out = Vec::new();
        assert!(accept(&AuthConfig::default(), ENDS, &mut reader, &mut out).is_err());
    }
}

//! `roost serve` for the tests: the real binary started on an ephemeral port of 127.0.0.1,
//! and the Chirp protocol talked to it byte by byte.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `roost serve` over a temporary export directory.
pub struct TestServer {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
}

impl TestServer {
    /// Starts a server exporting a fresh directory, with extra command-line arguments.
    pub fn start(args: &[&str]) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        TestServer::start_in(dir, args)
    }

    pub fn start_in(dir: tempfile::TempDir, args: &[&str]) -> TestServer {
        TestServer::launch(dir, args, &[], &[])
    }

    /// [`TestServer::start_in`] with the server run by `wrapper` (a command and its
    /// arguments that runs the rest, such as `setpriv --reuid=65534 ...`; empty: none) and
    /// with `envs` added to its environment.
    pub fn launch(
        dir: tempfile::TempDir,
        args: &[&str],
        wrapper: &[&str],
        envs: &[(&str, &str)],
    ) -> TestServer {
        let log = dir.path().with_extension("log");
        // The ledger beside the log, not in the state directory, unless the test names one.
        let ledger = dir.path().with_extension("ledger");
        let own_ledger = !args.contains(&"--ledger");
        let mut child = roost_through(wrapper)
            .envs(envs.iter().copied())
            .arg("serve")
            .arg(dir.path())
            .args(["--listen", "127.0.0.1", "--port", "0"])
            .args(own_ledger.then_some("--ledger"))
            .args(own_ledger.then_some(&ledger))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start roost serve");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut first)
            .expect("first line");
        let port = roost_server::announced_addr(&first)
            .unwrap_or_else(|| panic!("no address in first line {first:?}"))
            .port();
        TestServer {
            child,
            port,
            dir,
            log,
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A connection authenticated by address.
    pub fn connect(&self) -> Raw {
        let mut raw = Raw::connect(self.port);
        raw.auth_ok("address");
        raw
    }

    /// A connection authenticated with the hmac key `name`, whose secret is the name
    /// reversed (see [`TestServer::with_keys`]).
    pub fn connect_as(&self, name: &str) -> Raw {
        let mut raw = Raw::connect(self.port);
        let secret: String = name.chars().rev().collect();
        let subject = raw.auth_hmac(name, secret.as_bytes());
        assert_eq!(subject.as_deref(), Some(format!("hmac:{name}").as_str()));
        raw
    }

    /// Arguments that give the server an hmac key per name, each secret the name reversed.
    pub fn with_keys(dir: &Path, names: &[&str]) -> Vec<String> {
        let mut args = Vec::new();
        for name in names {
            let file = dir.join(format!("{name}.key"));
            write_private(&file, &name.chars().rev().collect::<String>());
            args.push("--key".to_string());
            args.push(format!("{name}={}", file.display()));
        }
        args
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the server process runs.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_file(self.dir.path().with_extension("ledger"));
    }
}

/// The `roost` binary run by `wrapper`, a command and its arguments that runs the rest
/// (such as `setpriv --reuid=65534 ...`; empty: none).
pub fn roost_through(wrapper: &[&str]) -> Command {
    match wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(crate::roost_bin());
            c
        }
        None => Command::new(crate::roost_bin()),
    }
}

/// `roost serve DIR ARGS` exactly as given (no `--listen` or ledger added), with `envs`
/// in its environment: the child and its first line (where it listens).
pub fn serve_as_given(dir: &Path, args: &[&str], envs: &[(&str, &Path)]) -> (Child, String) {
    let mut child = Command::new(crate::roost_bin())
        .arg("serve")
        .arg(dir)
        .args(args)
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start roost serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("first line");
    (child, line)
}

/// Client credentials of the hmac key `name` only, its secret the name reversed (as
/// [`TestServer::with_keys`] gives it to servers).
pub fn hmac_credentials(name: &str) -> roost_client::Credentials {
    use roost_client::{Credentials, HmacKey, Method};
    let secret: String = name.chars().rev().collect();
    Credentials::only(&[Method::Hmac]).with_key(HmacKey::new(name, secret.as_bytes()).unwrap())
}

/// A client of the server on 127.0.0.1:`port` with `credentials`.
pub fn client(port: u16, credentials: roost_client::Credentials) -> roost_client::Client {
    let options = roost_client::Options {
        credentials,
        ..roost_client::Options::default()
    };
    roost_client::Client::connect(&format!("127.0.0.1:{port}"), &options).expect("connect")
}

/// Writes a key file only its owner may read, as `--key` requires.
pub fn write_private(path: &Path, text: &str) {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .expect("key file");
    file.write_all(text.as_bytes()).expect("write key file");
}

/// A raw Chirp connection.
pub struct Raw {
    pub reader: BufReader<TcpStream>,
    pub writer: TcpStream,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        Raw::over(TcpStream::connect(("127.0.0.1", port)).expect("connect"))
    }

    /// A connection from another loopback address (`127.0.0.2`...), as from another host.
    pub fn connect_from(port: u16, local: &str) -> Raw {
        use std::os::fd::FromRawFd;
        let ip: std::net::Ipv4Addr = local.parse().expect("IPv4 address");
        let addr = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(ip.octets()),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: a fresh socket, bound and connected with valid sockaddr_in values, then
        // owned by the TcpStream.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket");
            let from = addr(ip, 0);
            assert_eq!(
                libc::bind(fd, (&from as *const libc::sockaddr_in).cast(), len),
                0
            );
            let to = addr(std::net::Ipv4Addr::LOCALHOST, port);
            assert_eq!(
                libc::connect(fd, (&to as *const libc::sockaddr_in).cast(), len),
                0
            );
            Raw::over(TcpStream::from_raw_fd(fd))
        }
    }

    fn over(stream: TcpStream) -> Raw {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Raw {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }

    /// Runs a cctools-style handshake for `method` with no method-specific exchange (address,
    /// hostname) and returns the subject, or `None` if refused.
    pub fn auth(&mut self, method: &str) -> Option<String> {
        self.send(format!("{method}\n").as_bytes());
        if self.line() != b"yes" {
            return None;
        }
        self.verdict()
    }

    /// The end of a method's exchange: the server's verdict, then, if it is `yes`, the
    /// subject it grants (`yes`, the method, the name); `None` if refused.
    pub fn verdict(&mut self) -> Option<String> {
        if self.line() != b"yes" {
            return None;
        }
        assert_eq!(self.line(), b"yes");
        let kind = String::from_utf8(self.line()).unwrap();
        let name = String::from_utf8(self.line()).unwrap();
        Some(format!("{kind}:{name}"))
    }

    /// roost's `hmac` method with key `name` and `secret`; the subject, or `None` if refused.
    pub fn auth_hmac(&mut self, name: &str, secret: &[u8]) -> Option<String> {
        use hmac::Mac;
        self.send(b"hmac\n");
        if self.line() != b"yes" {
            return None;
        }
        let nonce = self.line();
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
        mac.update(&nonce);
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.send(format!("{name} {hex}\n").as_bytes());
        self.verdict()
    }

    pub fn auth_ok(&mut self, method: &str) -> String {
        self.auth(method)
            .unwrap_or_else(|| panic!("{method} authentication refused"))
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("send");
    }

    /// One line without its newline.
    pub fn line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).expect("read line");
        assert_eq!(
            line.pop(),
            Some(b'\n'),
            "connection closed mid-reply: {line:?}"
        );
        line
    }

    pub fn result(&mut self) -> i64 {
        let line = self.line();
        String::from_utf8_lossy(&line)
            .parse()
            .unwrap_or_else(|_| panic!("not a result line: {:?}", String::from_utf8_lossy(&line)))
    }

    /// Sends a request line (newline added) and returns its result.
    pub fn rpc(&mut self, line: &str) -> i64 {
        self.send(format!("{line}\n").as_bytes());
        self.result()
    }

    /// Sends a request line and its payload, returns the result.
    pub fn rpc_with(&mut self, line: &str, payload: &[u8]) -> i64 {
        let mut bytes = format!("{line}\n").into_bytes();
        bytes.extend_from_slice(payload);
        self.send(&bytes);
        self.result()
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        self.reader.read_exact(&mut buf).expect("read payload");
        buf
    }

    /// Lines up to the empty line that ends a listing.
    pub fn list(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let line = self.line();
            if line.is_empty() {
                return out;
            }
            out.push(String::from_utf8(line).unwrap());
        }
    }

    /// True once the server has closed the connection.
    pub fn closed(&mut self) -> bool {
        let mut buf = [0u8; 1];
        matches!(self.reader.read(&mut buf), Ok(0) | Err(_))
    }
}

/// Makes a FIFO at `path` (clients cannot make one; an owner can leave one in an export).
pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {}",
        path.display()
    );
}

/// Percent-encodes a path for a request line.
pub fn enc(path: &str) -> String {
    let mut out = Vec::new();
    roost_wire::url::encode_into(path.as_bytes(), &mut out);
    String::from_utf8(out).unwrap()
}

/// The Chirp error code for an errno.
pub fn code(errno: i32) -> i64 {
    roost_wire::ErrorCode::from_errno(errno).as_i64()
}

/// Runs the `roost` binary with `args`.
pub fn roost_cli(args: &[&str]) -> std::process::Output {
    Command::new(crate::roost_bin())
        .args(args)
        .output()
        .expect("run roost")
}

/// Runs a client command authenticating by address; returns stdout, failing on error.
pub fn cli_ok(args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.extend(["--auth", "address"]);
    let out = roost_cli(&all);
    assert!(
        out.status.success(),
        "roost {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs a client command (authenticating by address) expected to fail; returns its exit
/// code and stderr.
pub fn cli_fails(args: &[&str]) -> (i32, String) {
    let mut all = args.to_vec();
    all.extend(["--auth", "address"]);
    let out = roost_cli(&all);
    assert!(!out.status.success(), "roost {args:?} should fail");
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

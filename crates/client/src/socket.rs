//! Opening the TCP connection: resolve, connect with a timeout, and tune the socket.
//!
//! Requests are small and latency-bound, so Nagle's algorithm is off (`TCP_NODELAY`). Idle
//! connections are kept alive with TCP keepalive probes after 30 s of silence, every 10 s,
//! giving up after 6 unanswered probes: NAT boxes and firewalls that forget flows quiet for a
//! minute see traffic well before then, and a dead peer is noticed within 90 s.

use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// TCP keepalive timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keepalive {
    /// Silence before the first probe.
    pub idle: Duration,
    /// Time between probes.
    pub interval: Duration,
    /// Unanswered probes before the connection is declared dead.
    pub count: u32,
}

impl Default for Keepalive {
    fn default() -> Keepalive {
        Keepalive {
            idle: Duration::from_secs(30),
            interval: Duration::from_secs(10),
            count: 6,
        }
    }
}

fn setsockopt_int(stream: &TcpStream, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the fd is a live socket owned by `stream`, and the option value is a plain int
    // whose size we pass.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(stream: &TcpStream, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: as above; `value` and `len` are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            level,
            name,
            (&mut value as *mut i32).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

/// Turns keepalive on with the given timing.
pub fn set_keepalive(stream: &TcpStream, ka: Keepalive) -> io::Result<()> {
    setsockopt_int(stream, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    setsockopt_int(stream, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs(ka.idle))?;
    setsockopt_int(
        stream,
        libc::IPPROTO_TCP,
        libc::TCP_KEEPINTVL,
        secs(ka.interval),
    )?;
    setsockopt_int(
        stream,
        libc::IPPROTO_TCP,
        libc::TCP_KEEPCNT,
        i32::try_from(ka.count).unwrap_or(i32::MAX),
    )
}

/// Reads back the keepalive settings (`None` if keepalive is off).
pub fn keepalive(stream: &TcpStream) -> io::Result<Option<Keepalive>> {
    if getsockopt_int(stream, libc::SOL_SOCKET, libc::SO_KEEPALIVE)? == 0 {
        return Ok(None);
    }
    let idle = getsockopt_int(stream, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE)?;
    let interval = getsockopt_int(stream, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL)?;
    let count = getsockopt_int(stream, libc::IPPROTO_TCP, libc::TCP_KEEPCNT)?;
    let d = |s: i32| Duration::from_secs(u64::try_from(s).unwrap_or(0));
    Ok(Some(Keepalive {
        idle: d(idle),
        interval: d(interval),
        count: u32::try_from(count).unwrap_or(0),
    }))
}

/// Resolves `authority` (`host:port`) and connects to the first address that answers within
/// `timeout`, then sets `TCP_NODELAY`, keepalive and the per-operation timeouts.
pub fn connect(
    authority: &str,
    timeout: Duration,
    io_timeout: Option<Duration>,
    ka: Option<Keepalive>,
) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{authority}: no address"));
    for addr in authority.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                if let Some(ka) = ka {
                    set_keepalive(&stream, ka)?;
                }
                stream.set_read_timeout(io_timeout)?;
                stream.set_write_timeout(io_timeout)?;
                return Ok(stream);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// True if the peer of `stream` is this host (loopback, or the same address as our end).
pub fn peer_is_local(stream: &TcpStream) -> bool {
    match (stream.peer_addr(), stream.local_addr()) {
        (Ok(peer), Ok(local)) => peer.ip().is_loopback() || peer.ip() == local.ip(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn connect_tunes_nodelay_keepalive_and_timeouts() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let timeout = Some(Duration::from_secs(7));
        let stream = connect(
            &addr,
            Duration::from_secs(2),
            timeout,
            Some(Keepalive::default()),
        )
        .unwrap();
        assert!(stream.nodelay().unwrap());
        assert_eq!(keepalive(&stream).unwrap(), Some(Keepalive::default()));
        assert_eq!(stream.read_timeout().unwrap(), timeout);
        assert_eq!(stream.write_timeout().unwrap(), timeout);
        assert!(peer_is_local(&stream));
    }

    #[test]
    fn connect_to_a_closed_port_fails() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let err = connect(
            &format!("127.0.0.1:{port}"),
            Duration::from_secs(2),
            None,
            None,
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
    }
}

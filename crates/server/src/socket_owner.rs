//! Who owns a client's TCP connection, when the client runs on this host: the kernel's own
//! record of the socket's owner (the uid column of `/proc/net/tcp` and `/proc/net/tcp6`).
//!
//! The `unix` login uses it to tie a challenge file to the connection that answered it. A
//! file only shows who could create a file at a path — the server's own client, or anyone
//! who can rename a file someone else made — while a socket's owner is fixed by the kernel
//! when the socket is made. The tables are those of the server's network namespace, so a
//! client in another namespace (or on another host) has no owner here.

use std::net::{IpAddr, SocketAddr};

/// The uid that owns the client end of the connection from `client` to `server` (both as
/// the server sees them), if that end is a socket on this host.
pub fn owner(client: SocketAddr, server: SocketAddr) -> Option<u32> {
    // An IPv4 address in its IPv4-mapped IPv6 spelling counts as the IPv4 address: a
    // dual-stack server sees a client as `::ffff:127.0.0.1` when its socket is plain IPv4.
    let client = crate::listener::canonical(client);
    let server = crate::listener::canonical(server);
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .find_map(|table| {
            let text = std::fs::read_to_string(table).ok()?;
            find(&text, client, server)
        })
}

/// State 01 of the tables: an established connection.
const ESTABLISHED: &str = "01";

/// The owner of the established socket whose local end is `client` and remote end `server`,
/// in one table's text.
fn find(table: &str, client: SocketAddr, server: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let mut fields = line.split_whitespace();
        let local = parse_endpoint(fields.nth(1)?)?;
        let remote = parse_endpoint(fields.next()?)?;
        let state = fields.next()?;
        let uid = fields.nth(3)?;
        (state == ESTABLISHED && local == client && remote == server)
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// `ADDRESS:PORT` as the tables print them: the address as 32-bit words in the kernel's
/// byte order (one word for IPv4, four for IPv6), the port in hex.
fn parse_endpoint(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = Vec::with_capacity(16);
    for word in addr.as_bytes().chunks(8) {
        let word = u32::from_str_radix(std::str::from_utf8(word).ok()?, 16).ok()?;
        bytes.extend_from_slice(&word.to_ne_bytes());
    }
    let ip = match bytes.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?),
        16 => IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?),
        _ => return None,
    };
    Some(crate::listener::canonical(SocketAddr::new(ip, port)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn endpoints_parse_in_the_kernels_byte_order() {
        let v4 = parse_endpoint("0100007F:1F90").unwrap();
        assert_eq!(v4, "127.0.0.1:8080".parse().unwrap());
        let v6 = parse_endpoint("00000000000000000000000001000000:0016").unwrap();
        assert_eq!(v6, "[::1]:22".parse().unwrap());
        let mapped = parse_endpoint("0000000000000000FFFF00000100007F:0050").unwrap();
        assert_eq!(mapped, "127.0.0.1:80".parse().unwrap());
        assert_eq!(parse_endpoint("zz:1"), None);
        assert_eq!(parse_endpoint("0100007F"), None);
    }

    #[test]
    fn finds_the_owner_of_a_local_connection_and_nothing_else() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        let server = listener.local_addr().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        // SAFETY: a plain query of this process's user.
        let me = unsafe { libc::geteuid() };
        assert_eq!(owner(peer, server), Some(me));
        // Another port of the same host is another connection.
        let other = SocketAddr::new(peer.ip(), peer.port().wrapping_add(1));
        assert_eq!(owner(other, server), None);
        let elsewhere: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        assert_eq!(owner(elsewhere, server), None);
    }

    #[test]
    fn a_dual_stack_server_finds_an_ipv4_client() {
        let Ok(listener) = TcpListener::bind("[::]:0") else {
            return; // no IPv6 on this host
        };
        let port = listener.local_addr().unwrap().port();
        let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        let server = accepted.local_addr().unwrap();
        // SAFETY: a plain query of this process's user.
        let me = unsafe { libc::geteuid() };
        assert_eq!(owner(peer, server), Some(me));
    }
}

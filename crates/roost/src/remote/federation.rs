//! The federated name space for the client commands (Legion's lmkdir, lmv, lrm): a link on
//! one server whose target is `/chirp/HOST[:PORT]/PATH` (or `chirp://...`) leads to another
//! server, as it does under `roost run`. A server cannot follow such a link itself (its
//! target lies outside its export), so the client does: before an operation it asks the
//! server for the target of every prefix of the path in one pipelined round trip, and when
//! one is a cross-server link it goes on from that target, on the other server. Links
//! within one server are the server's to follow.

use roost_client::{ChirpUrl, Client, Options, Reply};
use roost_wire::Request;

/// The most cross-server links one path may pass through (as the kernel's 40 symlinks).
const MAX_HOPS: usize = 40;

/// Why a path could not be followed: the server could not be reached (its address and
/// the error), or the links go round.
pub enum Unfollowed {
    Connect(ChirpUrl, roost_client::Error),
    Loop(String),
}

/// The server and path `url` leads to, with a connection to that server: cross-server
/// links in its directories are followed, and the last component's too when
/// `follow_last` (not for `rm`, `mv` or `ln`, which act on a link itself).
pub fn locate(
    url: ChirpUrl,
    options: &Options,
    follow_last: bool,
) -> Result<(ChirpUrl, Client), Unfollowed> {
    let shown = format!("chirp://{}{}", url.authority(), url.path);
    let mut url = url;
    for _ in 0..=MAX_HOPS {
        let mut client = match Client::connect(&url.authority(), options) {
            Ok(c) => c,
            Err(e) => return Err(Unfollowed::Connect(url, e)),
        };
        match cross_link(&mut client, &url.path, follow_last) {
            Some(next) => url = next,
            None => return Ok((url, client)),
        }
    }
    Err(Unfollowed::Loop(format!(
        "{shown}: more than {MAX_HOPS} cross-server links on the way (a loop?)"
    )))
}

/// Where the first cross-server link on `path` (its last component included when
/// `follow_last`) leads, with the rest of the path after it; `None` if it passes none.
/// A prefix the server cannot answer for (absent, refused) ends the search: the operation
/// itself will say what is wrong.
fn cross_link(client: &mut Client, path: &str, follow_last: bool) -> Option<ChirpUrl> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let checked = if follow_last {
        parts.len()
    } else {
        parts.len().saturating_sub(1)
    };
    if checked == 0 {
        return None;
    }
    let prefixes: Vec<String> = (1..=checked)
        .map(|n| format!("/{}", parts[..n].join("/")))
        .collect();
    let requests: Vec<Request> = prefixes
        .iter()
        .map(|p| Request::Readlink {
            path: p.as_bytes().to_vec(),
            length: 4096,
        })
        .collect();
    let replies = client.pipeline(&requests, 64).ok()?;
    for (n, reply) in replies.into_iter().enumerate() {
        match reply {
            Ok(Reply::Data(target)) => {
                if let Some(mut next) = cross_server_target(&target) {
                    let rest = &parts[n + 1..];
                    if !rest.is_empty() {
                        next.path =
                            format!("{}/{}", next.path.trim_end_matches('/'), rest.join("/"));
                    }
                    return Some(next);
                }
            }
            // EINVAL: not a link; anything else: nothing to follow beyond here.
            Err(e) if e.errno() == libc::EINVAL => {}
            _ => return None,
        }
    }
    None
}

/// The location a link's target names when it is on a Chirp server (`/chirp/...` or
/// `chirp://...`), the form `roost ln -s` writes and `roost run` follows.
pub fn cross_server_target(target: &[u8]) -> Option<ChirpUrl> {
    let text = std::str::from_utf8(target).ok()?;
    if !(text.starts_with("/chirp/") || text.starts_with("chirp://")) {
        return None;
    }
    ChirpUrl::parse(text).ok()
}

/// What `roost ln -s TARGET` stores: a Chirp location as `/chirp/HOST:PORT/PATH`, anything
/// else as given.
pub fn link_text(target: &str) -> String {
    match cross_server_target(target.as_bytes()) {
        Some(url) => format!("/chirp/{}{}", url.authority(), url.path),
        None => target.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_server_targets_are_chirp_locations_only() {
        let t = cross_server_target(b"/chirp/h:9000/data/x").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("h", 9000, "/data/x")
        );
        let t = cross_server_target(b"chirp://h/data").unwrap();
        assert_eq!((t.port, t.path.as_str()), (9094, "/data"));
        for other in [
            &b"/data/x"[..],
            b"../x",
            b"chirp:/h",
            b"/chirpy/h/x",
            b"\xff",
        ] {
            assert!(cross_server_target(other).is_none(), "{other:?}");
        }
    }

    #[test]
    fn links_are_written_in_the_form_roost_run_follows() {
        assert_eq!(link_text("chirp://h:9000/d"), "/chirp/h:9000/d");
        assert_eq!(link_text("chirp://h/d"), "/chirp/h:9094/d");
        assert_eq!(link_text("/chirp/h:1/"), "/chirp/h:1/");
        assert_eq!(link_text("../local/x"), "../local/x");
    }
}

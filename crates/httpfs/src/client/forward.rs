//! Plain-http requests through an HTTP proxy in the form proxies take (RFC 9112, section
//! 3.2.2): the request line names the whole URL (`GET http://HOST:PORT/PATH HTTP/1.1`),
//! and the proxy's credentials go in `Proxy-Authorization`.
//!
//! ureq 3 reaches every target through an HTTP proxy with `CONNECT`, whose tunnel a
//! caching proxy cannot cache (it only carries bytes), and which proxies refuse to ports
//! other than 443 (Squid's default) or do not offer at all (nginx). So a route's connector
//! chain starts with [`ForwardProxy`]: for an `http` URL with a proxy configured, it opens
//! the connection to the proxy itself and gives ureq an [`AbsoluteForm`] transport, which
//! rewrites each request's line as it goes out. `https` URLs pass on to ureq's `CONNECT`
//! connector (TLS end to end). Either way the connection goes back to the agent's pool
//! under the key (scheme, origin, proxy), so later files reuse it.
//!
//! This uses ureq's `unversioned` transport API (outside its semver promise), so the
//! ureq version is pinned to 3.5 in Cargo.toml.

use base64::Engine;
use ureq::http::uri::Scheme;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, NextTimeout, TcpConnector, Transport,
};
use ureq::Error;

/// The first connector of a route's chain: connects `http` requests through a proxy
/// (see the module's documentation); passes on everything else.
#[derive(Debug, Default)]
pub struct ForwardProxy;

impl Connector<()> for ForwardProxy {
    type Out = AbsoluteForm;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<AbsoluteForm>, Error> {
        let Some(proxy) = details.config.proxy() else {
            return Ok(None);
        };
        if details.uri.scheme() != Some(&Scheme::HTTP)
            || proxy.protocol() != ureq::ProxyProtocol::Http
        {
            return Ok(None);
        }
        let origin = details
            .uri
            .authority()
            .ok_or_else(|| Error::BadUri(format!("{} has no host", details.uri)))?;
        let at: ureq::http::Uri = format!("http://{}:{}/", proxy.host(), proxy.port())
            .parse()
            .map_err(|_| Error::InvalidProxyUrl)?;
        let addrs = details
            .resolver
            .resolve(&at, details.config, details.timeout)?;
        let to_proxy = ConnectionDetails {
            uri: &at,
            addrs,
            config: details.config,
            request_level: details.request_level,
            resolver: details.resolver,
            now: details.now,
            timeout: details.timeout,
            current_time: details.current_time.clone(),
            run_connector: details.run_connector.clone(),
            register_shutdown: details.register_shutdown.clone(),
        };
        let inner = Connector::<()>::connect(&TcpConnector::default(), &to_proxy, None)?
            .ok_or(Error::ConnectionFailed)?;
        let credentials = match (proxy.username(), proxy.password()) {
            (None, None) => None,
            (user, password) => Some(format!(
                "{}:{}",
                user.unwrap_or_default(),
                password.unwrap_or_default()
            )),
        };
        Ok(Some(AbsoluteForm::new(
            inner.boxed(),
            &format!("http://{origin}"),
            credentials.as_deref(),
        )))
    }
}

/// A connection to a proxy that sends each request's line in absolute form, followed by
/// the proxy's credentials if it has any.
#[derive(Debug)]
pub struct AbsoluteForm {
    inner: Box<dyn Transport>,
    /// `http://HOST[:PORT]`, put before each request's path.
    origin: Vec<u8>,
    /// The `Proxy-Authorization` line (with its CRLF), or nothing.
    authorization: Vec<u8>,
    /// Whether the next bytes sent begin a request: roost's requests have no bodies, so
    /// a request is all sent before its answer is read, and the first bytes sent after
    /// reading begin the next one.
    at_request: bool,
}

impl AbsoluteForm {
    /// Requests to the origin `origin` (`http://HOST[:PORT]`) over `inner`, with Basic
    /// `credentials` (`USER:PASSWORD`) if given.
    fn new(inner: Box<dyn Transport>, origin: &str, credentials: Option<&str>) -> AbsoluteForm {
        let authorization = credentials.map_or_else(Vec::new, |c| {
            let c = base64::engine::general_purpose::STANDARD.encode(c);
            format!("Proxy-Authorization: Basic {c}\r\n").into_bytes()
        });
        AbsoluteForm {
            inner,
            origin: origin.as_bytes().to_vec(),
            authorization,
            at_request: true,
        }
    }
}

/// Rewrites the request of `amount` bytes at the start of `buf` for a proxy: `origin` put
/// before the path of its first line, `header` after that line. Returns its new length.
fn rewrite(buf: &mut [u8], amount: usize, origin: &[u8], header: &[u8]) -> Result<usize, Error> {
    let head = &buf[..amount];
    let refused = |why: &str| {
        let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        Error::Io(std::io::Error::other(format!(
            "cannot send {line:?} through a proxy: {why}"
        )))
    };
    let path = head
        .iter()
        .position(|&b| b == b' ')
        .map(|sp| sp + 1)
        .filter(|&at| head.get(at) == Some(&b'/'))
        .ok_or_else(|| refused("no absolute path after the method"))?;
    let line_end = head
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or_else(|| refused("no end of the request line"))?
        + 2;
    let grown = amount + origin.len() + header.len();
    if grown > buf.len() {
        return Err(refused("the request is too long"));
    }
    buf.copy_within(line_end..amount, line_end + origin.len() + header.len());
    buf.copy_within(path..line_end, path + origin.len());
    buf[path..path + origin.len()].copy_from_slice(origin);
    let at = line_end + origin.len();
    buf[at..at + header.len()].copy_from_slice(header);
    Ok(grown)
}

impl Transport for AbsoluteForm {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        let amount = match std::mem::replace(&mut self.at_request, false) {
            true => rewrite(
                self.inner.buffers().output(),
                amount,
                &self.origin,
                &self.authorization,
            )?,
            false => amount,
        };
        self.inner.transmit_output(amount, timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.at_request = true;
        self.inner.await_input(timeout)
    }

    fn is_open(&mut self) -> bool {
        self.inner.is_open()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(request: &str, header: &str, room: usize) -> Result<String, String> {
        let mut buf = request.as_bytes().to_vec();
        buf.resize(request.len() + room, 0);
        let n = rewrite(&mut buf, request.len(), b"http://h:8", header.as_bytes())
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8(buf[..n].to_vec()).unwrap())
    }

    #[test]
    fn the_request_line_names_the_whole_url_and_the_credentials_follow_it() {
        let request = "GET /a%20b/c?x HTTP/1.1\r\nHost: h:8\r\n\r\n";
        assert_eq!(
            rewritten(request, "", 100).unwrap(),
            "GET http://h:8/a%20b/c?x HTTP/1.1\r\nHost: h:8\r\n\r\n"
        );
        assert_eq!(
            rewritten(request, "Proxy-Authorization: Basic dTpw\r\n", 100).unwrap(),
            "GET http://h:8/a%20b/c?x HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\n\
             Host: h:8\r\n\r\n"
        );
    }

    #[test]
    fn what_is_no_request_or_does_not_fit_is_refused() {
        let e = rewritten("GET * HTTP/1.1\r\n\r\n", "", 100).unwrap_err();
        assert!(
            e.contains("\"GET * HTTP/1.1\"") && e.contains("no absolute path"),
            "{e}"
        );
        let e = rewritten("GET /x HTTP/1.1", "", 100).unwrap_err();
        assert!(e.contains("no end of the request line"), "{e}");
        let e = rewritten("GET /x HTTP/1.1\r\n\r\n", "", 5).unwrap_err();
        assert!(e.contains("too long"), "{e}");
    }

    #[test]
    fn only_the_first_bytes_after_an_answer_begin_a_request() {
        type Sent = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;
        /// A transport that keeps what it is asked to send.
        #[derive(Debug)]
        struct Kept(ureq::unversioned::transport::LazyBuffers, Sent);
        impl Transport for Kept {
            fn buffers(&mut self) -> &mut dyn Buffers {
                &mut self.0
            }
            fn transmit_output(&mut self, n: usize, _: NextTimeout) -> Result<(), Error> {
                let out = self.0.output()[..n].to_vec();
                self.1.lock().unwrap().extend(out);
                Ok(())
            }
            fn await_input(&mut self, _: NextTimeout) -> Result<bool, Error> {
                Ok(false)
            }
            fn is_open(&mut self) -> bool {
                true
            }
        }
        let sent = Sent::default();
        let kept = Kept(
            ureq::unversioned::transport::LazyBuffers::new(256, 256),
            sent.clone(),
        );
        let mut t = AbsoluteForm::new(Box::new(kept), "http://o", Some("u:p"));
        let send = |t: &mut AbsoluteForm, text: &[u8]| {
            t.buffers().output()[..text.len()].copy_from_slice(text);
            t.transmit_output(text.len(), NextTimeout::default())
                .unwrap();
        };
        send(&mut t, b"GET /1 HTTP/1.1\r\n");
        send(&mut t, b"Host: o\r\n\r\n");
        t.await_input(NextTimeout::default()).unwrap();
        send(&mut t, b"HEAD /2 HTTP/1.1\r\n\r\n");
        let sent = String::from_utf8(sent.lock().unwrap().clone()).unwrap();
        assert_eq!(
            sent,
            "GET http://o/1 HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\nHost: o\r\n\r\n\
             HEAD http://o/2 HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\n\r\n"
        );
    }
}

//! The HTTP client of an agent: `ureq` agents (rustls, the system's CA store, no async
//! runtime), one for each route a request can take: each proxy, then the origin server
//! directly. Each agent's pool keeps connections alive and reuses them across files.
//! Redirects are not followed: a directory asked for without its trailing slash answers
//! 3xx, which is how an unindexed directory is told from a file.
//!
//! Proxies (the CDF paper's shared caching proxies): the agent starts at one picked at
//! random, so jobs spread their load, and keeps using it; a proxy that fails (no answer,
//! or a 5xx it gives where a later route answers) is left for the next, and after the last
//! for the origin, said once on stderr.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::Read;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// How a request failed.
#[derive(Debug)]
pub enum Failure {
    /// The server answered with this status (not 2xx, not 3xx).
    Status(u16),
    /// No answer: connection refused, reset, timed out, TLS refused...
    Transport(String),
    /// The server's certificate was refused: the server's doing (or the trust store's),
    /// never a proxy's, whose tunnel only carries it.
    Certificate(String),
}

impl Failure {
    /// The errno a program sees for it.
    pub fn errno(&self) -> i32 {
        match self {
            Failure::Status(404 | 410) => libc::ENOENT,
            Failure::Status(401 | 403) => libc::EACCES,
            _ => libc::EIO,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Status(s) => write!(f, "HTTP status {s}"),
            Failure::Transport(t) | Failure::Certificate(t) => write!(f, "{t}"),
        }
    }
}

/// An answer: its status (2xx or 3xx; or 416 to a Range request), the route it came by and
/// the response to read the body from.
pub struct Answer {
    pub status: u16,
    /// The route that answered (see [`Client::request`]).
    pub route: usize,
    pub response: ureq::Response,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.response.header(name)
    }

    /// The length the server announced.
    pub fn content_length(&self) -> Option<u64> {
        self.header("Content-Length")?.trim().parse().ok()
    }

    /// The whole body, up to `limit` bytes (more is an error, not a transport failure).
    pub fn body(self, limit: u64) -> Result<Vec<u8>, Body> {
        let mut out = Vec::new();
        self.response
            .into_reader()
            .take(limit + 1)
            .read_to_end(&mut out)
            .map_err(|e| Body::Cut(e.to_string()))?;
        if out.len() as u64 > limit {
            return Err(Body::TooLarge(limit));
        }
        Ok(out)
    }
}

/// Why a body was not read whole.
#[derive(Debug)]
pub enum Body {
    /// The connection failed while it arrived.
    Cut(String),
    /// It is over the limit.
    TooLarge(u64),
}

impl std::fmt::Display for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Cut(e) => write!(f, "{e}"),
            Body::TooLarge(limit) => write!(f, "body over {limit} bytes"),
        }
    }
}

/// The proxies of one scheme's requests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxyList {
    /// Proxy URLs (`http://[USER:PASSWORD@]HOST[:PORT]`), in the order given.
    pub proxies: Vec<String>,
    /// The origins reached directly (`no_proxy`): a host name (which covers its
    /// subdomains; a leading `.` is the same), an address, a CIDR block, each with an
    /// optional `:PORT`, or `*` for all.
    pub no_proxy: Vec<String>,
}

impl ProxyList {
    /// The proxies given on the command line, for every origin (loopback included); when
    /// none is given, those of the environment (`env` reads a variable): `SCHEME_proxy`,
    /// else `SCHEME_PROXY`, except for the origins `no_proxy` (else `NO_PROXY`) lists.
    pub fn choose(
        given: &[String],
        scheme: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> ProxyList {
        if !given.is_empty() {
            return ProxyList {
                proxies: given.to_vec(),
                no_proxy: Vec::new(),
            };
        }
        let var = |names: [String; 2]| {
            names
                .into_iter()
                .find_map(|n| env(&n).map(|v| v.trim().to_string()))
                .filter(|v| !v.is_empty())
        };
        let proxies = var([
            format!("{scheme}_proxy"),
            format!("{}_PROXY", scheme.to_ascii_uppercase()),
        ]);
        let no_proxy = var(["no_proxy".into(), "NO_PROXY".into()]).unwrap_or_default();
        ProxyList {
            proxies: proxies.into_iter().collect(),
            no_proxy: no_proxy
                .split([',', ' '])
                .filter(|p| !p.is_empty())
                .map(str::to_ascii_lowercase)
                .collect(),
        }
    }

    /// Whether the origin `authority` (`HOST[:PORT]`, from a URL) is reached directly.
    pub fn bypasses(&self, authority: &str) -> bool {
        let (host, port) = split_authority(authority);
        let host = host.to_ascii_lowercase();
        self.no_proxy.iter().any(|entry| {
            if entry == "*" {
                return true;
            }
            let (pattern, want_port) = split_authority(entry);
            if want_port.is_some() && want_port != port {
                return false;
            }
            if let Some((net, bits)) = pattern.split_once('/') {
                return match (net.parse::<IpAddr>(), host.parse::<IpAddr>(), bits.parse()) {
                    (Ok(net), Ok(ip), Ok(bits)) => in_block(ip, net, bits),
                    _ => false,
                };
            }
            let pattern = pattern.trim_start_matches('.');
            host == pattern
                || host
                    .strip_suffix(pattern)
                    .is_some_and(|rest| rest.ends_with('.'))
        })
    }
}

/// `HOST[:PORT]` (or `[V6][:PORT]`) as the host (without brackets) and the port.
fn split_authority(authority: &str) -> (&str, Option<&str>) {
    if let Some(inner) = authority.strip_prefix('[') {
        return match inner.split_once(']') {
            Some((host, rest)) => (host, rest.strip_prefix(':')),
            None => (inner, None),
        };
    }
    match authority.split_once(':') {
        // More than one colon: a bare IPv6 address.
        Some((_, rest)) if rest.contains(':') => (authority, None),
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    }
}

/// Whether `ip` is in the block of `bits` bits at `net`.
fn in_block(ip: IpAddr, net: IpAddr, bits: u32) -> bool {
    let (ip, net, width) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) as u128, u32::from(b) as u128, 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    if bits > width {
        return false;
    }
    let shift = width - bits;
    shift == width || ip >> shift == net >> shift
}

/// One way to a server: through a proxy, or directly.
struct Route {
    /// The proxy as said on stderr (no credentials); `None` for the origin.
    proxy: Option<String>,
    /// The proxy as ureq takes it.
    via: Option<ureq::Proxy>,
    /// Made on first use: building one loads the system's CA store (~150 files), which a
    /// run that reaches no web server should not pay.
    agent: std::sync::OnceLock<ureq::Agent>,
    timeout: Duration,
    /// Whether servers' certificates go unchecked (`--http-insecure`).
    insecure: bool,
    /// Whether leaving it was said.
    left: AtomicBool,
}

impl Route {
    /// The ureq agent of this route, made on first use.
    fn agent(&self) -> &ureq::Agent {
        self.agent.get_or_init(|| {
            let builder = ureq::AgentBuilder::new()
                .redirects(0)
                .timeout_connect(self.timeout.min(Duration::from_secs(15)))
                .timeout_read(self.timeout)
                .timeout_write(self.timeout)
                .max_idle_connections(64)
                .max_idle_connections_per_host(8)
                .user_agent(concat!("roost/", env!("CARGO_PKG_VERSION")));
            let builder = match &self.via {
                Some(p) => builder.proxy(p.clone()),
                None => builder,
            };
            match self.insecure {
                true => builder.tls_config(insecure_tls()),
                false => builder,
            }
            .build()
        })
    }
}

/// The client of one scheme: its routes and the one in use.
pub struct Client {
    /// This agent's proxies, starting at one picked at random, then the origin (last).
    routes: Vec<Route>,
    list: ProxyList,
    /// The route in use: only grows, as proxies fail.
    current: AtomicUsize,
}

/// A proxy URL as shown: without its credentials.
fn shown(proxy: &str) -> String {
    match proxy.split_once("://") {
        Some((scheme, rest)) => format!("{scheme}://{}", rest.rsplit('@').next().unwrap_or("")),
        None => format!("http://{}", proxy.rsplit('@').next().unwrap_or("")),
    }
    .trim_end_matches('/')
    .to_string()
}

/// A number no other agent is likely to draw (std's hasher keys are random per process).
fn random() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

impl Client {
    /// The client going through `list`'s proxies (from one picked at random), then to the
    /// origin; `timeout` bounds each connect and read. A proxy URL that is no
    /// `http://[USER:PASSWORD@]HOST[:PORT]` is an error.
    /// With `insecure`, https servers' certificates are not checked (TLS still is).
    pub fn new(timeout: Duration, list: ProxyList, insecure: bool) -> Result<Client, String> {
        let mut routes = Vec::new();
        for url in &list.proxies {
            let bad = || format!("proxy {url}: expected http://[USER:PASSWORD@]HOST[:PORT]");
            let scheme_ok = url.split_once("://").map_or(true, |(s, _)| s == "http");
            let proxy = ureq::Proxy::new(url).map_err(|_| bad())?;
            let shown = shown(url);
            let authority = shown.trim_start_matches("http://");
            // ureq takes neither a path nor a bracketed IPv6 address.
            if !scheme_ok || !crate::net::valid_authority(authority) || authority.starts_with('[') {
                return Err(bad());
            }
            routes.push(Route {
                proxy: Some(shown),
                via: Some(proxy),
                agent: std::sync::OnceLock::new(),
                timeout,
                insecure,
                left: AtomicBool::new(false),
            });
        }
        if !routes.is_empty() {
            let first = (random() % routes.len() as u64) as usize;
            routes.rotate_left(first);
        }
        routes.push(Route {
            proxy: None,
            via: None,
            agent: std::sync::OnceLock::new(),
            timeout,
            insecure,
            left: AtomicBool::new(false),
        });
        Ok(Client {
            routes,
            list,
            current: AtomicUsize::new(0),
        })
    }

    /// The route that goes to the origin directly (the last).
    pub fn origin(&self) -> usize {
        self.routes.len() - 1
    }

    /// The proxy of `route`, `None` for the origin.
    pub fn proxy(&self, route: usize) -> Option<&str> {
        self.routes.get(route)?.proxy.as_deref()
    }

    /// `method` on `url`, by the route in use or, if later, `from` (0 for any; see
    /// [`Client::origin`]); a 2xx or 3xx answer, else the failure. A proxy that does not
    /// answer or asks for credentials (407), or answers 5xx where a later route does not,
    /// is left for the next route (and for every later request).
    pub fn request(&self, from: usize, method: &str, url: &str) -> Result<Answer, Failure> {
        self.send(from, method, url, None)
    }

    /// A GET of bytes `first` to `last` (included) of `url`, by routes as
    /// [`Client::request`]. The answer is 206 with those bytes, 200 with the whole body (a
    /// server or proxy that does not answer ranges), or 416 (the file is shorter than
    /// `first`).
    pub fn get_range(
        &self,
        from: usize,
        url: &str,
        (first, last): (u64, u64),
    ) -> Result<Answer, Failure> {
        self.send(from, "GET", url, Some(&format!("bytes={first}-{last}")))
    }

    /// [`Client::request`], with a `Range` header if given.
    fn send(
        &self,
        from: usize,
        method: &str,
        url: &str,
        range: Option<&str>,
    ) -> Result<Answer, Failure> {
        let origin = self.origin();
        let authority = url
            .split_once("://")
            .map_or("", |(_, rest)| rest.split('/').next().unwrap_or(""));
        let mut route = if self.list.bypasses(authority) {
            origin
        } else {
            from.max(self.current.load(Ordering::Relaxed)).min(origin)
        };
        // The proxies that failed this request: where, why, and whether by status (which
        // may be the origin's fault, passed on).
        let mut failed: Vec<(usize, String, bool)> = Vec::new();
        loop {
            let answer = self.call(route, method, url, range);
            let failure = match &answer {
                Err(Failure::Transport(t)) => Some((t.clone(), false)),
                // The proxy's own: it wants credentials it was not given.
                Err(Failure::Status(407)) => Some(("HTTP status 407".to_string(), false)),
                Err(Failure::Status(s)) if *s >= 500 => Some((format!("HTTP status {s}"), true)),
                _ => None,
            };
            match failure {
                Some((why, by_status)) if route < origin => {
                    failed.push((route, why, by_status));
                    route += 1;
                }
                _ => {
                    // A route that answered is used from now on; when none did, a proxy
                    // that answered with an error may not be at fault and stays in use.
                    let to = if failure.is_none() {
                        route
                    } else {
                        failed.iter().find(|f| f.2).map_or(route, |f| f.0)
                    };
                    for (r, why, _) in failed.iter().filter(|f| f.0 < to) {
                        self.leave(*r, why, to);
                    }
                    return answer;
                }
            }
        }
    }

    /// The answer of `route` came cut short with `why`: a proxy is left (said once), and
    /// the route to ask again from is returned; `None` for the origin.
    pub fn cut(&self, route: usize, why: &str) -> Option<usize> {
        if route >= self.origin() {
            return None;
        }
        self.leave(route, why, route + 1);
        Some(route + 1)
    }

    /// Uses `to` instead of the proxy `route` (and anything before `to`) from now on,
    /// saying so once.
    fn leave(&self, route: usize, why: &str, to: usize) {
        self.current.fetch_max(to, Ordering::Relaxed);
        let (Some(proxy), false) = (
            self.proxy(route),
            self.routes[route].left.swap(true, Ordering::Relaxed),
        ) else {
            return;
        };
        let next = match self.proxy(to) {
            Some(p) => format!("proxy {p}"),
            None => "the origin server".to_string(),
        };
        eprintln!("roost: proxy {proxy} failed ({why}); using {next} instead");
    }

    /// One request by one route (with a `Range` header if given).
    fn call(
        &self,
        route: usize,
        method: &str,
        url: &str,
        range: Option<&str>,
    ) -> Result<Answer, Failure> {
        let mut request = self.routes[route].agent().request(method, url);
        if let Some(range) = range {
            request = request.set("Range", range);
        }
        match request.call() {
            Ok(response) => Ok(Answer {
                status: response.status(),
                route,
                response,
            }),
            // An answer about the file (shorter than the range), not a failure.
            Err(ureq::Error::Status(416, response)) if range.is_some() => Ok(Answer {
                status: 416,
                route,
                response,
            }),
            Err(ureq::Error::Status(code, response)) => {
                // Read the error page to its end, so the connection goes back to the pool.
                let _ = std::io::copy(
                    &mut response.into_reader().take(1 << 20),
                    &mut std::io::sink(),
                );
                Err(Failure::Status(code))
            }
            Err(ureq::Error::Transport(t)) => {
                // ureq's own text repeats the URL, which the caller says already, and
                // its source may repeat the kind.
                let kind = t.kind().to_string();
                let mut text = kind.clone();
                for part in [t.message().map(str::to_string), source_of(&t)]
                    .into_iter()
                    .flatten()
                {
                    let part = part.strip_prefix(&format!("{kind}: ")).unwrap_or(&part);
                    text = format!("{text}: {part}");
                }
                if let Some((why, fix)) = certificate_refused(&t) {
                    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
                    let authority = rest.split('/').next().unwrap_or("");
                    return Err(Failure::Certificate(format!(
                        "TLS: the certificate of {authority} is refused ({why}); if the server \
                         is the one meant, {fix}, or run with --http-insecure to not check \
                         {scheme} certificates"
                    )));
                }
                Err(Failure::Transport(text))
            }
        }
    }
}

/// Why rustls refused the server's certificate and what would make it pass, if that is
/// what failed.
fn certificate_refused(t: &ureq::Transport) -> Option<(String, &'static str)> {
    use rustls::CertificateError as C;
    let io = std::error::Error::source(t)?.downcast_ref::<std::io::Error>()?;
    let e = io.get_ref()?.downcast_ref::<rustls::Error>()?;
    let rustls::Error::InvalidCertificate(why) = e else {
        return None;
    };
    let fix = match why {
        C::UnknownIssuer | C::BadSignature => {
            "add its CA to the trusted ones (SSL_CERT_FILE=BUNDLE.pem with the system's CAs \
             and it)"
        }
        C::NotValidForName | C::NotValidForNameContext { .. } => "name it as its certificate does",
        _ => "have its certificate fixed",
    };
    Some((e.to_string(), fix))
}

/// The TLS configuration of `--http-insecure`: rustls with ureq's protocol versions and
/// crypto provider, taking any certificate as the server's. The handshake's signatures are
/// still checked against the certificate's key (by rustls), so the connection is encrypted
/// to whoever holds that key, only nothing says who that is.
fn insecure_tls() -> std::sync::Arc<rustls::ClientConfig> {
    use std::sync::Arc;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])
        .expect("ring supports TLS 1.2 and 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    Arc::new(config)
}

/// A certificate verifier that takes any certificate (`--http-insecure`), checking the
/// handshake's signatures with rustls' own functions.
#[derive(Debug)]
struct AnyCertificate(std::sync::Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// What caused a transport failure (a TLS or I/O error), if it says.
fn source_of(t: &ureq::Transport) -> Option<String> {
    std::error::Error::source(t).map(|e| e.to_string())
}

/// The URL of `path` (bytes, absolute) on `scheme://authority`: every byte but unreserved
/// characters and `/` percent-encoded.
pub fn url(scheme: &str, authority: &str, path: &[u8]) -> String {
    let mut out = format!("{scheme}://{authority}");
    for &b in path {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Seconds since the epoch of an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`, the only form
/// servers send today).
pub fn http_date(text: &str) -> Option<i64> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m == month)? as i64
        + 1;
    let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let hms: Vec<i64> = time
        .split(':')
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn proxies_given_win_over_the_environment_and_ignore_no_proxy() {
        let vars = [("http_proxy", "http://e:1"), ("no_proxy", "*")];
        let given = ProxyList::choose(&["http://g:2".into()], "http", env(&vars));
        assert_eq!(given.proxies, ["http://g:2"]);
        assert!(!given.bypasses("127.0.0.1:80"));
        let from_env = ProxyList::choose(&[], "http", env(&vars));
        assert_eq!(from_env.proxies, ["http://e:1"]);
        assert!(from_env.bypasses("anything:1"));
    }

    #[test]
    fn the_environment_names_a_proxy_for_each_scheme() {
        let vars = [
            ("HTTP_PROXY", "http://upper:1"),
            ("https_proxy", " http://s:3 "),
            ("NO_PROXY", "Example.org, .local,10.0.0.0/8,::1,h:8080"),
        ];
        let http = ProxyList::choose(&[], "http", env(&vars));
        assert_eq!(http.proxies, ["http://upper:1"]);
        assert_eq!(
            ProxyList::choose(&[], "https", env(&vars)).proxies,
            ["http://s:3"]
        );
        let lower = [
            ("http_proxy", "http://lower:1"),
            ("HTTP_PROXY", "http://upper:1"),
        ];
        assert_eq!(
            ProxyList::choose(&[], "http", env(&lower)).proxies,
            ["http://lower:1"]
        );
        assert!(ProxyList::choose(&[], "http", env(&[("http_proxy", "")]))
            .proxies
            .is_empty());
        for direct in [
            "example.org",
            "www.EXAMPLE.org:80",
            "a.local",
            "local",
            "10.1.2.3:8",
            "[::1]:80",
            "h:8080",
        ] {
            assert!(http.bypasses(direct), "{direct}");
        }
        for proxied in ["badexample.org", "locals", "11.0.0.1", "[::2]", "h:80", "h"] {
            assert!(!http.bypasses(proxied), "{proxied}");
        }
    }

    #[test]
    fn proxy_urls_are_checked_and_shown_without_credentials() {
        let list = |p: &str| ProxyList {
            proxies: vec![p.to_string()],
            no_proxy: Vec::new(),
        };
        let t = Duration::from_secs(1);
        for ok in [
            "http://h:3128",
            "h:3128",
            "http://u:p@h:1/",
            "http://10.0.0.1",
        ] {
            let c = Client::new(t, list(ok), false).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(c.origin(), 1);
            assert!(!c.proxy(0).unwrap().contains('@'), "{ok}");
            assert_eq!(c.proxy(1), None);
        }
        for bad in [
            "ftp://h:1",
            "socks5://h:1",
            "http://h:x",
            "http://h:1/path",
            "http://",
        ] {
            assert!(Client::new(t, list(bad), false).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_client_starts_at_a_proxy_picked_at_random() {
        let list = ProxyList {
            proxies: vec![
                "http://a:1".into(),
                "http://b:1".into(),
                "http://c:1".into(),
            ],
            no_proxy: Vec::new(),
        };
        let mut first = std::collections::BTreeSet::new();
        for _ in 0..60 {
            let c = Client::new(Duration::from_secs(1), list.clone(), false).unwrap();
            // The others follow in the order given, then the origin.
            let order: Vec<&str> = (0..3).map(|r| c.proxy(r).unwrap()).collect();
            let at = list.proxies.iter().position(|p| p == order[0]).unwrap();
            let mut want = list.proxies.clone();
            want.rotate_left(at);
            assert_eq!(order, want);
            first.insert(order[0].to_string());
        }
        assert_eq!(first.len(), 3, "{first:?}");
    }

    /// A server on 127.0.0.1 answering every request with `status` (an empty body), for
    /// as long as the test runs.
    fn answering(status: &'static str) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut c in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut reader = std::io::BufReader::new(c.try_clone().unwrap());
                    loop {
                        let mut line = String::new();
                        while std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) > 2 {
                            line.clear();
                        }
                        if line.is_empty() {
                            return;
                        }
                        let answer = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
                        if std::io::Write::write_all(&mut c, answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        format!("127.0.0.1:{port}")
    }

    #[test]
    fn a_proxy_is_left_only_when_the_fault_is_its_own() {
        let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let down = format!("127.0.0.1:{}", refused.local_addr().unwrap().port());
        drop(refused);
        let (failing, ok) = (answering("502 Bad Gateway"), answering("200 OK"));
        let client = |proxy: &str| {
            let list = ProxyList {
                proxies: vec![format!("http://{proxy}")],
                no_proxy: vec!["127.0.0.2".into()],
            };
            Client::new(Duration::from_secs(5), list, false).unwrap()
        };
        // A 5xx from the proxy where the origin answers: the proxy is left.
        let c = client(&failing);
        let a = c.request(0, "GET", &format!("http://{ok}/f")).unwrap();
        assert_eq!((a.status, a.route), (200, 1));
        assert_eq!(c.current.load(Ordering::Relaxed), 1);
        // A 5xx from the proxy where the origin is down: it may be the origin's fault, and
        // the proxy stays in use.
        let c = client(&failing);
        assert!(matches!(
            c.request(0, "GET", &format!("http://{down}/f")),
            Err(Failure::Transport(_))
        ));
        assert_eq!(c.current.load(Ordering::Relaxed), 0);
        // A proxy that does not answer is left, whatever the origin does.
        let c = client(&down);
        assert!(c.request(0, "GET", &format!("http://{down}/f")).is_err());
        assert_eq!(c.current.load(Ordering::Relaxed), 1);
        // A proxy that wants credentials is left.
        let c = client(&answering("407 Proxy Authentication Required"));
        assert_eq!(
            c.request(0, "GET", &format!("http://{ok}/f"))
                .unwrap()
                .route,
            1
        );
        assert_eq!(c.current.load(Ordering::Relaxed), 1);
        // A good proxy answers; `from` skips it; no_proxy hosts go to the origin.
        let c = client(&ok);
        assert_eq!(
            c.request(0, "GET", &format!("http://{down}/f"))
                .unwrap()
                .route,
            0
        );
        assert!(c.request(1, "GET", &format!("http://{down}/f")).is_err());
        assert!(c.request(0, "GET", "http://127.0.0.2:1/f").is_err());
        assert_eq!(c.current.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn urls_escape_what_is_not_plain() {
        assert_eq!(
            url("http", "h:8", b"/a b/%c/d.txt"),
            "http://h:8/a%20b/%25c/d.txt"
        );
    }

    #[test]
    fn http_dates() {
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            http_date("Tue, 24 Nov 2026 18:00:00 GMT"),
            Some(1_795_543_200)
        );
        assert_eq!(http_date("yesterday"), None);
    }
}

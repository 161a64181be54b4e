//! The HTTP client of an agent: `ureq` 3 agents (rustls, the system's CA store, no async
//! runtime), one for each route a request can take: each proxy, then the origin server
//! directly. Each agent's pool keeps connections alive and reuses them across files, to
//! proxies as to origins. Redirects are not followed: a directory asked for without its
//! trailing slash answers 3xx, which is how an unindexed directory is told from a file.
//!
//! Proxies (the CDF paper's shared caching proxies): the agent starts at one picked at
//! random, so jobs spread their load, and keeps using it; a proxy that fails (no answer,
//! or a 5xx it gives where a later route answers) is left for the next, and after the last
//! for the origin, said once on stderr.

mod agent;
mod conditional;
mod errors;
mod forward;
mod proxy_url;

pub use conditional::Validators;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::Read;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use proxy_url::ProxyUrl;

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

/// An answer: its status (2xx or 3xx, 304 included; or 416 to a Range request), the route
/// it came by and the response to read the body from.
pub struct Answer {
    pub status: u16,
    /// The route that answered (see [`Client::request`]).
    pub route: usize,
    pub response: Response,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.response.0.headers().get(name)?.to_str().ok()
    }

    /// The validators of its content, to ask for it again conditionally (see
    /// [`Validators::of`]).
    pub fn validators(&self) -> Option<Validators> {
        Validators::of(
            self.header("ETag"),
            self.header("Last-Modified"),
            self.header("Date"),
            crate::sign::now(),
        )
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

/// A response whose head has arrived.
pub struct Response(ureq::http::Response<ureq::Body>);

impl Response {
    /// The body, to read as it arrives (its errors worded as a request's are).
    pub fn into_reader(self) -> impl Read {
        errors::Reworded(self.0.into_body().into_reader())
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
    /// Its agents for plain http and for https, each made on first use: one for https
    /// loads the system's CA store (~150 files), which a run that reaches no https server
    /// should not pay.
    agents: [OnceLock<ureq::Agent>; 2],
    timeout: Duration,
    /// Whether servers' certificates go unchecked (`--http-insecure`).
    insecure: bool,
    /// Whether leaving it was said.
    left: AtomicBool,
}

impl Route {
    /// The route through `proxy`, or directly with `None`.
    fn new(proxy: Option<ProxyUrl>, timeout: Duration, insecure: bool) -> Route {
        let (proxy, via) = proxy.map(|p| (p.shown, p.proxy)).unzip();
        Route {
            proxy,
            via,
            agents: Default::default(),
            timeout,
            insecure,
            left: AtomicBool::new(false),
        }
    }

    /// `method` on `url` with `headers`, answered whatever its status.
    fn send(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let tls = url.starts_with("https://");
        let agent = self.agents[tls as usize]
            .get_or_init(|| agent::agent(self.via.clone(), self.timeout, tls, self.insecure));
        let mut request = ureq::http::Request::builder().method(method).uri(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        agent.run(request.body(())?)
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
        let mut routes = list
            .proxies
            .iter()
            .map(|url| Ok(Route::new(Some(ProxyUrl::parse(url)?), timeout, insecure)))
            .collect::<Result<Vec<_>, String>>()?;
        if !routes.is_empty() {
            let first = (random() % routes.len() as u64) as usize;
            routes.rotate_left(first);
        }
        routes.push(Route::new(None, timeout, insecure));
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
        self.send(from, method, url, &[])
    }

    /// A GET of `url` by routes as [`Client::request`], made conditional on `validators`
    /// (from an earlier answer for it): 304 when the server's content is still the one
    /// they describe, 200 with the content otherwise.
    pub fn get_unless(
        &self,
        from: usize,
        url: &str,
        validators: &Validators,
    ) -> Result<Answer, Failure> {
        self.send(from, "GET", url, &validators.headers())
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
        let range = format!("bytes={first}-{last}");
        self.send(from, "GET", url, &[("Range", &range)])
    }

    /// [`Client::request`], with `headers`.
    fn send(
        &self,
        from: usize,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
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
            let answer = self.call(route, method, url, headers);
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

    /// One request by one route, with `headers`. ureq 3 does not ask again (ureq 2 did,
    /// for GET and HEAD on a connection from its pool): a kept-alive connection the server
    /// closed as the request went out is asked again once here.
    fn call(
        &self,
        route: usize,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
    ) -> Result<Answer, Failure> {
        let by = &self.routes[route];
        let response = match by.send(method, url, headers) {
            Err(e) if errors::closed_early(&e) => by.send(method, url, headers),
            sent => sent,
        }
        .map_err(|e| errors::failure(&e, url))?;
        let status = response.status().as_u16();
        match status {
            100..=399 => {}
            // An answer about the file (shorter than the range), not a failure.
            416 if headers.iter().any(|(name, _)| *name == "Range") => {}
            _ => {
                // Read the error page to its end, so the connection goes back to the pool.
                let mut page = response.into_body().into_reader().take(1 << 20);
                let _ = std::io::copy(&mut page, &mut std::io::sink());
                return Err(Failure::Status(status));
            }
        }
        Ok(Answer {
            status,
            route,
            response: Response(response),
        })
    }
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
    .position(|m| m == month)? as u32
        + 1;
    let (day, year): (u32, i64) = (day.parse().ok()?, year.parse().ok()?);
    let hms: Vec<i64> = time
        .split(':')
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    let days = roost_base::date::days_from_civil(year, month, day);
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

    /// The requests a server received: the number of its connection (from 0) and the
    /// request's head, without its blank line.
    type Heard = std::sync::Arc<std::sync::Mutex<Vec<(usize, String)>>>;

    /// A server on 127.0.0.1 answering every request with `status` (an empty body), for
    /// as long as the test runs.
    fn answering(status: &'static str) -> String {
        recording(status).0
    }

    /// [`answering`], and the requests it heard.
    fn recording(status: &'static str) -> (String, Heard) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heard = Heard::default();
        let kept = heard.clone();
        std::thread::spawn(move || {
            for (n, mut c) in listener.incoming().flatten().enumerate() {
                let heard = kept.clone();
                std::thread::spawn(move || {
                    let mut reader = std::io::BufReader::new(c.try_clone().unwrap());
                    loop {
                        let (mut head, mut line) = (String::new(), String::new());
                        while std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) > 2 {
                            head.push_str(&std::mem::take(&mut line));
                        }
                        if line.is_empty() {
                            return;
                        }
                        heard.lock().unwrap().push((n, head));
                        let answer = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
                        if std::io::Write::write_all(&mut c, answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (format!("127.0.0.1:{port}"), heard)
    }

    /// A client through the proxy at `authority` as user `u` with password `p`.
    fn with_credentials(authority: &str) -> Client {
        let list = ProxyList {
            proxies: vec![format!("http://u:p@{authority}")],
            no_proxy: Vec::new(),
        };
        Client::new(Duration::from_secs(5), list, false).unwrap()
    }

    #[test]
    fn a_proxy_is_asked_in_absolute_form_with_its_credentials_on_one_connection() {
        let (proxy, heard) = recording("200 OK");
        let c = with_credentials(&proxy);
        for path in ["/a", "/b%20c"] {
            let a = c
                .request(0, "GET", &format!("http://origin.test:81{path}"))
                .unwrap();
            assert_eq!((a.status, a.route), (200, 0));
        }
        let heard = heard.lock().unwrap().clone();
        assert_eq!(heard.len(), 2, "{heard:?}");
        for ((connection, head), path) in heard.iter().zip(["/a", "/b%20c"]) {
            assert_eq!(*connection, 0, "{heard:?}");
            let lines: Vec<&str> = head.lines().collect();
            assert_eq!(
                lines[0],
                format!("GET http://origin.test:81{path} HTTP/1.1")
            );
            assert!(lines.contains(&"Proxy-Authorization: Basic dTpw"), "{head}");
            assert!(lines.contains(&"host: origin.test:81"), "{head}");
        }
    }

    #[test]
    fn https_goes_through_a_proxy_by_connect_with_its_credentials() {
        let (proxy, heard) = recording("407 Proxy Authentication Required");
        let c = with_credentials(&proxy);
        let failed = c.request(c.origin(), "GET", "https://127.0.0.1:1/f");
        assert!(matches!(failed, Err(Failure::Transport(_))));
        assert!(heard.lock().unwrap().is_empty());
        let failed = c.request(0, "GET", "https://origin.test:8443/f");
        assert!(matches!(failed, Err(Failure::Transport(_))));
        let heard = heard.lock().unwrap().clone();
        let head = &heard[0].1;
        assert!(
            head.starts_with("CONNECT origin.test:8443 HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(
            head.contains("\r\nProxy-Authorization: Basic dTpw\r\n"),
            "{head}"
        );
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

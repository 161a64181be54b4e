//! The ureq agent of a route: its settings (timeouts, pool, user agent, no redirects,
//! statuses left to roost), its TLS (rustls with the system's CAs, or no check with
//! `--http-insecure`) and its connector chain (a proxy's plain-http requests in absolute
//! form, see [`super::forward`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{
    ConnectProxyConnector, Connector, RustlsConnector, TcpConnector,
};

use super::forward::ForwardProxy;

/// An agent that reaches servers through `proxy` (or directly); `timeout` bounds each
/// connect (at most 15 s, TLS and a proxy's `CONNECT` included), each read and each write.
/// With `tls`, it checks servers' certificates against the system's CAs, or not at all
/// with `insecure`; without, it is for plain http and has no CAs loaded.
pub fn agent(
    proxy: Option<ureq::Proxy>,
    timeout: Duration,
    tls: bool,
    insecure: bool,
) -> ureq::Agent {
    let tls_config = match (tls, insecure) {
        (true, true) => TlsConfig::builder().disable_verification(true),
        (true, false) => TlsConfig::builder().root_certs(system_roots()),
        (false, _) => TlsConfig::builder().root_certs(RootCerts::Specific(Arc::default())),
    }
    .provider(TlsProvider::Rustls)
    .build();
    let config = ureq::Agent::config_builder()
        // Never the environment's: roost picks proxies itself (see `ProxyList`).
        .proxy(proxy)
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_connect(Some(timeout.min(Duration::from_secs(15))))
        .timeout_per_read(Some(timeout))
        .timeout_per_write(Some(timeout))
        .max_idle_connections(64)
        .max_idle_connections_per_host(8)
        .user_agent(concat!("roost/", env!("CARGO_PKG_VERSION")))
        .tls_config(tls_config)
        .build();
    let connector = ForwardProxy
        .chain(ConnectProxyConnector::default())
        .chain(TcpConnector::default())
        .chain(RustlsConnector::default());
    ureq::Agent::with_parts(config, connector, DefaultResolver::default())
}

/// The system's CAs (or `SSL_CERT_FILE`'s and `SSL_CERT_DIR`'s, which replace them), as
/// rustls-native-certs finds them; loaded once a process. None when they cannot be read:
/// every certificate is then refused (`roost run` says why at start).
fn system_roots() -> RootCerts {
    static ROOTS: OnceLock<RootCerts> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let certs = rustls_native_certs::load_native_certs().unwrap_or_default();
            certs
                .iter()
                .map(|c| Certificate::from_der(c.as_ref()).to_owned())
                .into()
        })
        .clone()
}

//! The remote drivers `roost run` offers, made from its options: each factory in
//! [`FACTORIES`] makes the drivers of its schemes, which the run's [`Registry`] holds.
//! A new driver is its crate and a line there.

use super::{ChirpMode, RunArgs};
use crate::size::parse_size;
use roost_chirpfs::{ChirpNet, ChirpOptions};
use roost_httpfs::client::ProxyList;
use roost_httpfs::sign::PublicKey;
use roost_httpfs::{HttpNet, HttpOptions};
use roost_vfs::cache::Cache;
use roost_vfs::{Registry, Scheme};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Makes drivers from the run's options, each under its scheme.
type Factory = fn(&RunArgs) -> Result<Vec<Scheme>, String>;

/// Every remote driver `roost run` offers: Chirp (`chirp`), and the web (`http`, `https`).
const FACTORIES: &[Factory] = &[chirp, web];

/// The registry of every remote driver, made from the run's options.
pub fn registry(args: &RunArgs) -> Result<Registry, String> {
    let mut drivers = Registry::new();
    for make in FACTORIES {
        for scheme in make(args)? {
            drivers.add(scheme.name, scheme.driver, scheme.direct);
        }
    }
    Ok(drivers)
}

/// Where remote files are cached unless `--cache` says.
fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("roost")
}

/// The driver of every Chirp server, with the cache and connection options given; a
/// target that names no mode is used as `--chirp-mode` says.
fn chirp(args: &RunArgs) -> Result<Vec<Scheme>, String> {
    let connect = crate::remote::ConnectArgs {
        auth: args.auth.clone(),
        key: args.key.clone(),
        timeout: args.io_timeout,
        connect_timeout: Duration::from_secs(15),
    };
    let client = crate::remote::options(&connect).map_err(|e| e.0)?;
    if args.attr_ttl > Duration::from_secs(86_400) {
        return Err(format!(
            "--attr-ttl {}: expected at most 1d",
            args.attr_ttl.as_secs_f64()
        ));
    }
    let options = ChirpOptions {
        client,
        timeout: args.timeout,
        attr_ttl: args.attr_ttl,
        verbose: args.verbose,
    };
    Ok(vec![Scheme {
        name: "chirp",
        driver: Arc::new(ChirpNet::new(cache_of(args)?, options)),
        direct: args.chirp_mode == ChirpMode::Direct,
    }])
}

/// The shared cache of remote files (`--cache`, `--cache-size`), with a mirror of its own
/// for the driver it is made for.
fn cache_of(args: &RunArgs) -> Result<Arc<Cache>, String> {
    let dir = args.cache.clone().unwrap_or_else(default_cache_dir);
    // Absolute: the mirror's paths are handed to the program's calls, which resolve a
    // relative one from wherever the program is (a `cd` into a remote directory then
    // failed, and so did `./configure` there).
    let dir = std::path::absolute(&dir).map_err(|e| format!("--cache {}: {e}", dir.display()))?;
    Ok(Cache::new(
        &dir,
        parse_size("--cache-size", &args.cache_size)?,
        args.verbose,
    ))
}

/// The drivers of every web server, over http and over https (one factory: the options
/// are checked, the keys read and the warnings given once for both). Their targets are
/// always direct: large files are read in place ([`roost_vfs::Driver::open_file`]).
fn web(args: &RunArgs) -> Result<Vec<Scheme>, String> {
    if args.http_ttl > Duration::from_secs(86_400) {
        return Err(format!(
            "--http-ttl {}: expected at most 1d",
            args.http_ttl.as_secs_f64()
        ));
    }
    if !(1..=16).contains(&args.http_streams) {
        return Err(format!(
            "--http-streams {}: expected 1 to 16",
            args.http_streams
        ));
    }
    let block_threshold = parse_size("--http-block-threshold", &args.http_block_threshold)?;
    let prefetch = parse_size("--http-prefetch", &args.http_prefetch)?;
    let prefetch_max = parse_size("--http-prefetch-max", &args.http_prefetch_max)?;
    let keys = args
        .http_keys
        .iter()
        .map(|f| PublicKey::load(f).map_err(|e| format!("--http-key {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    // rustls-native-certs reads SSL_CERT_FILE (and SSL_CERT_DIR) instead of the system's
    // CAs, and a file it cannot read, with no SSL_CERT_DIR, leaves no CA trusted, silently:
    // said here (unless --quiet).
    let lone_cert_file = std::env::var_os("SSL_CERT_FILE")
        .filter(|_| std::env::var_os("SSL_CERT_DIR").is_none() && !args.quiet);
    if let Some(file) = lone_cert_file {
        let shown = std::path::Path::new(&file).display().to_string();
        match std::fs::read(&file) {
            Ok(pem) if pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") => {}
            Ok(_) => eprintln!(
                "roost run: SSL_CERT_FILE={shown}: no PEM certificate in it; https servers \
                 will be refused"
            ),
            Err(e) => {
                eprintln!("roost run: SSL_CERT_FILE={shown}: {e}; https servers will be refused")
            }
        }
    }
    if args.http_insecure && !args.quiet {
        eprintln!(
            "roost run: --http-insecure: the certificates of https servers are not checked \
             (anyone on the path can pose as a server)"
        );
    }
    // The objects are shared with Chirp's; each driver's mirror is its own, since a mirror
    // holds driver paths (`/HOST:PORT/PATH`) and the root's listing replaces its entries.
    let web = |scheme: &'static str| -> Result<Scheme, String> {
        let mut options = HttpOptions {
            ttl: args.http_ttl,
            timeout: args.io_timeout,
            verbose: args.verbose,
            proxies: ProxyList::choose(&args.http_proxies, scheme, |v| std::env::var(v).ok()),
            keys: keys.clone(),
            block_threshold,
            streams: args.http_streams,
            insecure: args.http_insecure,
            prefetch,
            prefetch_max,
        };
        let driver = match HttpNet::new(scheme, cache_of(args)?, options.clone()) {
            Ok(driver) => driver,
            Err(e) if !args.http_proxies.is_empty() => return Err(format!("--http-proxy: {e}")),
            // A variable set for other programs need not stop this one: said, and ignored.
            Err(e) => {
                if !args.quiet {
                    eprintln!(
                        "roost run: {scheme}_proxy: {e}; {scheme} servers are reached directly"
                    );
                }
                options.proxies = ProxyList::default();
                HttpNet::new(scheme, cache_of(args)?, options)?
            }
        };
        Ok(Scheme {
            name: scheme,
            driver,
            direct: true,
        })
    };
    Ok(vec![web("http")?, web("https")?])
}

//! A proxy as named on the command line or in `http_proxy`:
//! `http://[USER:PASSWORD@]HOST[:PORT]` (the scheme may be left out, a trailing `/` is
//! allowed; port 80 by default), checked and turned into what ureq takes.

/// A proxy URL that was accepted.
pub struct ProxyUrl {
    /// As said on stderr: `http://HOST[:PORT]`, without the credentials.
    pub shown: String,
    /// As ureq takes it (credentials included, as given: nothing is percent-decoded).
    pub proxy: ureq::Proxy,
}

impl ProxyUrl {
    /// `url` checked: anything but `http://[USER:PASSWORD@]HOST[:PORT]` is an error naming
    /// it. A path or a bracketed IPv6 address is refused too.
    pub fn parse(url: &str) -> Result<ProxyUrl, String> {
        let bad = || format!("proxy {url}: expected http://[USER:PASSWORD@]HOST[:PORT]");
        let trimmed = url.trim_end_matches('/');
        let rest = match trimmed.split_once("://") {
            Some(("http", rest)) => rest,
            Some(_) => return Err(bad()),
            None => trimmed,
        };
        let (credentials, authority) = match rest.rsplit_once('@') {
            Some((credentials, authority)) => {
                let (user, password) = credentials.split_once(':').ok_or_else(bad)?;
                (Some((user, password)), authority)
            }
            None => (None, rest),
        };
        if !crate::net::valid_authority(authority) || authority.starts_with('[') {
            return Err(bad());
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, port.parse().map_err(|_| bad())?),
            None => (authority, 80),
        };
        let mut builder = ureq::Proxy::builder(ureq::ProxyProtocol::Http)
            .host(host)
            .port(port);
        if let Some((user, password)) = credentials {
            builder = builder.username(user).password(password);
        }
        Ok(ProxyUrl {
            shown: format!("http://{authority}"),
            proxy: builder.build().map_err(|_| bad())?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_kept_as_given_and_not_shown() {
        let p = ProxyUrl::parse("http://u%41:p@ss:w@h:3128/").unwrap();
        assert_eq!(p.shown, "http://h:3128");
        assert_eq!(p.proxy.username(), Some("u%41"));
        assert_eq!(p.proxy.password(), Some("p@ss:w"));
        assert_eq!((p.proxy.host(), p.proxy.port()), ("h", 3128));
        let p = ProxyUrl::parse("10.0.0.1").unwrap();
        assert_eq!(p.shown, "http://10.0.0.1");
        assert_eq!((p.proxy.port(), p.proxy.username()), (80, None));
    }

    #[test]
    fn anything_else_is_refused_naming_the_url() {
        for bad in [
            "https://h:1",
            "http://u@h:1",
            "http://[::1]:3128",
            "http://h:1/p",
            "http://h:0",
            "",
        ] {
            let e = ProxyUrl::parse(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad}"));
            assert!(e.starts_with(&format!("proxy {bad}: expected")), "{e}");
        }
    }
}

//! What a failed request says: ureq's errors turned into roost's one-line reasons (a
//! refused certificate with what to do about it, a connection that failed with the
//! system's reason), worded the same whatever ureq's own texts are.

use std::io::ErrorKind;

use super::Failure;

/// The failure of a request for `url` that ended with `e`.
pub fn failure(e: &ureq::Error, url: &str) -> Failure {
    if let Some((why, fix)) = certificate_refused(e) {
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let authority = rest.split('/').next().unwrap_or("");
        return Failure::Certificate(format!(
            "TLS: the certificate of {authority} is refused ({why}); if the server is the one \
             meant, {fix}, or run with --http-insecure to not check {scheme} certificates"
        ));
    }
    Failure::Transport(reason(e))
}

/// Whether `e` is a connection that ended before the answer began: a kept-alive
/// connection the server closed as the request went out, which a new connection may not
/// meet.
pub fn closed_early(e: &ureq::Error) -> bool {
    matches!(e, ureq::Error::Io(io) if matches!(
        io.kind(),
        ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
            | ErrorKind::UnexpectedEof
    ))
}

/// A body being read, whose errors say what failed as [`failure`] does.
pub struct Reworded<R>(pub R);

impl<R: std::io::Read> std::io::Read for Reworded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            match e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<ureq::Error>())
            {
                Some(ureq) => std::io::Error::new(e.kind(), reason(ureq)),
                None => e,
            }
        })
    }
}

/// The reason `e` says, as `WHAT: DETAIL`.
fn reason(e: &ureq::Error) -> String {
    use ureq::{Error as E, Timeout as T};
    if let Some(tls) = rustls_error(e) {
        return format!("Connection Failed: tls: {tls}");
    }
    match e {
        E::Io(io)
            if matches!(
                io.kind(),
                ErrorKind::ConnectionRefused
                    | ErrorKind::HostUnreachable
                    | ErrorKind::NetworkUnreachable
                    | ErrorKind::NetworkDown
                    | ErrorKind::AddrNotAvailable
            ) =>
        {
            format!("Connection Failed: Connect error: {io}")
        }
        E::Io(io) => format!("Network Error: {io}"),
        E::HostNotFound => "Dns Failed: host not found".to_string(),
        E::Timeout(T::Connect | T::Resolve) => "Connection Failed: timed out connecting".into(),
        E::Timeout(T::PerWrite | T::SendRequest | T::SendBody) => {
            "Network Error: timed out sending the request".into()
        }
        E::Timeout(T::PerRead | T::RecvResponse | T::RecvBody) => {
            "Network Error: timed out reading the answer".into()
        }
        E::Timeout(t) => format!("Network Error: timed out ({t})"),
        E::ConnectProxyFailed(why) => format!("Proxy Failed to Connect: {why}"),
        E::Protocol(_) | E::LargeResponseHeader(..) => format!("Bad Response: {e}"),
        _ => e.to_string(),
    }
}

/// The rustls error inside `e`, if TLS is what failed.
fn rustls_error(e: &ureq::Error) -> Option<&rustls::Error> {
    match e {
        ureq::Error::Rustls(tls) => Some(tls),
        ureq::Error::Io(io) => io.get_ref()?.downcast_ref::<rustls::Error>(),
        _ => None,
    }
}

/// Why rustls refused the server's certificate and what would make it pass, if that is
/// what failed.
fn certificate_refused(e: &ureq::Error) -> Option<(String, &'static str)> {
    use rustls::CertificateError as C;
    let tls = rustls_error(e)?;
    let rustls::Error::InvalidCertificate(why) = tls else {
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
    Some((tls.to_string(), fix))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that fails with its error (once).
    struct FailingRead(Option<std::io::Error>);

    impl std::io::Read for FailingRead {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(self.0.take().expect("read again after failing"))
        }
    }

    #[test]
    fn a_body_cut_short_says_why_as_a_request_does() {
        let timed_out = std::io::Error::other(ureq::Error::Timeout(ureq::Timeout::RecvBody));
        let mut body = Reworded(std::io::Read::chain(
            &b"ab"[..],
            FailingRead(Some(timed_out)),
        ));
        let mut read = Vec::new();
        let e = std::io::Read::read_to_end(&mut body, &mut read).unwrap_err();
        assert_eq!(read, b"ab");
        assert_eq!(e.to_string(), "Network Error: timed out reading the answer");
        let other = std::io::Error::new(ErrorKind::ConnectionReset, "reset, not by ureq");
        let mut body = Reworded(FailingRead(Some(other)));
        let e = std::io::Read::read(&mut body, &mut [0; 4]).unwrap_err();
        assert_eq!(e.to_string(), "reset, not by ureq");
    }

    #[test]
    fn reasons_name_what_failed() {
        let io = |kind: ErrorKind, text: &str| ureq::Error::Io(std::io::Error::new(kind, text));
        let refused = io(ErrorKind::ConnectionRefused, "Connection refused");
        assert_eq!(
            reason(&refused),
            "Connection Failed: Connect error: Connection refused"
        );
        assert_eq!(
            reason(&ureq::Error::Timeout(ureq::Timeout::PerRead)),
            "Network Error: timed out reading the answer"
        );
        let tls = ureq::Error::Io(std::io::Error::new(
            ErrorKind::InvalidData,
            rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
        ));
        assert!(
            reason(&tls).starts_with("Connection Failed: tls: "),
            "{}",
            reason(&tls)
        );
        assert!(closed_early(&io(
            ErrorKind::UnexpectedEof,
            "Peer disconnected"
        )));
        assert!(!closed_early(&refused));
    }

    #[test]
    fn a_refused_certificate_says_what_to_do() {
        let refused = |why| {
            let e = ureq::Error::Io(std::io::Error::new(
                ErrorKind::InvalidData,
                rustls::Error::InvalidCertificate(why),
            ));
            match failure(&e, "https://h:8443/t/f") {
                Failure::Certificate(text) => text,
                other => panic!("{other:?}"),
            }
        };
        let unknown = refused(rustls::CertificateError::UnknownIssuer);
        assert!(
            unknown.starts_with("TLS: the certificate of h:8443 is refused (invalid peer certificate: UnknownIssuer); if the server is the one meant, add its CA"),
            "{unknown}"
        );
        assert!(
            unknown.ends_with("to not check https certificates"),
            "{unknown}"
        );
        let expired = refused(rustls::CertificateError::Expired);
        assert!(expired.contains("have its certificate fixed"), "{expired}");
    }
}

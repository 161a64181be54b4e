//! `roost serve --metrics ADDR`: Prometheus text on `GET /metrics`, counting what clients
//! really did (requests and failures by RPC, file bytes both ways, connections).

use roost_testkit::serve::{cli_fails, cli_ok, TestServer};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// The metrics address the server logged at start.
fn metrics_addr(server: &TestServer) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = server.log_text();
        if let Some(at) = log
            .split_whitespace()
            .find_map(|w| w.strip_prefix("url=http://"))
        {
            return at.trim_end_matches("/metrics").to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no metrics url in the log: {log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The status line and body of `REQUEST_LINE` sent to the metrics address.
fn ask(addr: &str, request_line: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "{request_line}\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The value of the sample named exactly `sample` (`name{labels}`), 0 when absent.
fn value(body: &str, sample: &str) -> u64 {
    body.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn metrics_count_what_clients_did() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rwl", "--metrics", "127.0.0.1:0"]);
    let addr = metrics_addr(&server);
    let url = format!("chirp://127.0.0.1:{}", server.port);
    let local = tempfile::tempdir().unwrap();
    let file = local.path().join("f");
    std::fs::write(&file, vec![7u8; 100_000]).unwrap();
    cli_ok(&["put", file.to_str().unwrap(), &format!("{url}/f")]);
    assert_eq!(cli_ok(&["cat", &format!("{url}/f")]).len(), 100_000);
    cli_fails(&["stat", &format!("{url}/missing")]);

    let (status, body) = ask(&addr, "GET /metrics HTTP/1.1");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(
        value(&body, "roost_written_bytes_total") >= 100_000,
        "{body}"
    );
    assert!(value(&body, "roost_read_bytes_total") >= 100_000, "{body}");
    assert!(
        value(&body, "roost_connections_accepted_total") >= 3,
        "{body}"
    );
    let errors: u64 = body
        .lines()
        .filter(|l| l.starts_with("roost_request_errors_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(errors >= 1, "the failed stat is not counted: {body}");
    let requests: u64 = body
        .lines()
        .filter(|l| l.starts_with("roost_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(requests >= 3, "{body}");
    assert!(
        body.contains("# TYPE roost_requests_total counter"),
        "{body}"
    );

    assert_eq!(ask(&addr, "GET / HTTP/1.1").0, "HTTP/1.1 404 Not Found");
    assert_eq!(
        ask(&addr, "POST /metrics HTTP/1.1").0,
        "HTTP/1.1 405 Method Not Allowed"
    );
}

//! `roost serve --log-format json`: every line on standard error is one JSON object with the
//! same fields as the key=value form.

use roost_testkit::serve::{cli_ok, TestServer};

#[test]
fn json_log_lines_are_objects_with_the_text_forms_fields() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rl", "--log-format", "json"]);
    std::fs::write(server.root().join("f"), b"x").unwrap();
    cli_ok(&["cat", &format!("chirp://127.0.0.1:{}/f", server.port)]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let log = loop {
        let log = server.log_text();
        if log.contains("\"event\":\"disconnect\"") || std::time::Instant::now() > deadline {
            break log;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let events: Vec<String> = log
        .lines()
        .map(|line| {
            let v = roost_catalog::json::parse(line.as_bytes())
                .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            assert!(
                v.get("time").is_some() && v.get("level").is_some(),
                "{line}"
            );
            v.get("event").unwrap().to_plain()
        })
        .collect();
    for want in ["start", "connect", "disconnect"] {
        assert!(events.iter().any(|e| e == want), "no {want} in {events:?}");
    }
    let connect = log
        .lines()
        .find(|l| l.contains("\"event\":\"connect\""))
        .unwrap();
    assert!(
        connect.contains("\"subject\":\"address:127.0.0.1\""),
        "{connect}"
    );
}

//! `roost status` reads a catalog over HTTP as any server or proxy speaks it: through nginx
//! in front of `roost catalog`, which re-chunks the answer (`Transfer-Encoding: chunked`),
//! the same servers are listed as from the catalog itself.

use roost_catalog::json::{self, Value};
use roost_testkit::pool::{start_catalog, wait_for};
use roost_testkit::run::{roost, start_announcing};
use roost_testkit::web::Web;
use std::io::{Read, Write};
use std::process::Stdio;
use std::time::Duration;

/// `roost status --json --all` against `catalog` (HOST:PORT), as parsed records.
fn listed(catalog: &str) -> Result<Vec<Value>, String> {
    let o = roost()
        .args(["status", "--catalog", catalog, "--json", "--all"])
        .output()
        .unwrap();
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    match json::parse(&o.stdout) {
        Ok(Value::Array(records)) => Ok(records),
        other => Err(format!("{other:?}")),
    }
}

#[test]
fn status_reads_a_catalog_behind_nginx_that_chunks_its_answer() {
    let (_catalog, catalog_port) = start_catalog(&[]);
    let export = tempfile::tempdir().unwrap();
    let mut serve = roost();
    serve
        .arg("serve")
        .arg(export.path())
        .args(["--listen", "127.0.0.1", "--port", "0"])
        .args([
            "--catalog",
            &format!("127.0.0.1:{catalog_port}"),
            "--catalog-interval",
            "1",
        ])
        .stderr(Stdio::null());
    let (_server, server_port) = start_announcing(serve);
    let direct = format!("127.0.0.1:{catalog_port}");
    wait_for("the server's report", Duration::from_secs(20), || {
        listed(&direct).is_ok_and(|r| !r.is_empty())
    });
    // sub_filter rewrites the body as it streams, so nginx drops Content-Length and chunks.
    let web = Web::nginx_with(|_| {
        format!(
            "location / {{\n      proxy_pass http://127.0.0.1:{catalog_port};\n      \
             sub_filter_types application/json;\n      sub_filter '\"chirp\"' '\"chirp\"';\n      \
             sub_filter_once off;\n    }}"
        )
    });
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", web.port)).unwrap();
    write!(
        raw,
        "GET /query.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).unwrap();
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "nginx did not chunk: {answer}"
    );
    let through_nginx = listed(&format!("127.0.0.1:{}", web.port)).unwrap();
    let port_of = |r: &Value| r.get("port").and_then(Value::as_i64);
    assert!(
        through_nginx
            .iter()
            .any(|r| port_of(r) == Some(server_port.into())),
        "{through_nginx:?}"
    );
    assert_eq!(through_nginx.len(), listed(&direct).unwrap().len());
}

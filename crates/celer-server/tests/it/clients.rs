//! Real clients: curl and Python's http.client.

use std::process::Command;

use celer_test_support::run_tool;

use crate::support::start_default;

#[tokio::test]
async fn curl() {
    let srv = start_default().await;
    let url = format!("http://{}", srv.addr);
    let out = tokio::task::spawn_blocking(move || {
        run_tool(Command::new("curl").args([
            "-sS",
            "--fail-with-body",
            &format!("{url}/hello"),
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{num_connects}\n",
            &format!("{url}/hello"),
            "-d",
            "from curl",
            &format!("{url}/collect"),
        ]))
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("200 1\n"), "{text}");
    // Both later requests reused the first connection.
    assert!(text.contains("Hello, World!200 0\n"), "{text}");
    assert!(text.ends_with("len=9200 0\n"), "{text}");
}

#[tokio::test]
async fn curl_chunked_upload_with_expect_continue() {
    let srv = start_default().await;
    let url = format!("http://{}/collect", srv.addr);
    let out = tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("up.bin");
        std::fs::write(&file, vec![b'u'; 300_000]).unwrap();
        run_tool(Command::new("curl").args([
            "-sS",
            "-H",
            "Transfer-Encoding: chunked",
            "-H",
            "Expect: 100-continue",
            "--data-binary",
            &format!("@{}", file.display()),
            &url,
        ]))
    })
    .await
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "len=300000");
}

const PYTHON: &str = r#"
import http.client, sys
host, port = sys.argv[1], int(sys.argv[2])
c = http.client.HTTPConnection(host, port, timeout=10)
out = []
c.request("GET", "/hello"); r = c.getresponse(); out.append(f"{r.status} {r.read().decode()}")
c.request("POST", "/collect", body=b"x" * 12345); r = c.getresponse(); out.append(f"{r.status} {r.read().decode()}")
def gen():
    yield b"abc"
    yield b"defg"
c.request("POST", "/collect", body=gen(), encode_chunked=True); r = c.getresponse(); out.append(f"{r.status} {r.read().decode()}")
c.request("HEAD", "/hello"); r = c.getresponse(); out.append(f"{r.status} {r.getheader('content-length')} {r.read()!r}")
c.request("GET", "/stream"); r = c.getresponse(); out.append(f"{r.status} {r.read().decode()}")
c.request("GET", "/missing"); r = c.getresponse(); out.append(f"{r.status}")
print("|".join(out))
"#;

#[tokio::test]
async fn python_http_client() {
    let srv = start_default().await;
    let (host, port) = (srv.addr.ip().to_string(), srv.addr.port().to_string());
    let out = tokio::task::spawn_blocking(move || {
        run_tool(Command::new("python3").args(["-c", PYTHON, &host, &port]))
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "200 Hello, World!|200 len=12345|200 len=7|200 13 b''|200 one,two,three|404"
    );
}

//! What a connection speaks: HTTP/2 by prior knowledge on plain
//! connections only; over TLS, what ALPN chose.

use std::process::Command;

use celer_test_support::{bounded, run_tool};

use crate::shutdown::start_tls;

/// RFC 9113 §3.2 and §3.3: over TLS, HTTP/2 is chosen through ALPN only.
/// A client that offered no ALPN and sends the HTTP/2 preface speaks
/// HTTP/1.1 as far as the server knows, and gets its refusal of the
/// `PRI * HTTP/2.0` request line.
#[tokio::test]
async fn over_tls_the_preface_without_alpn_is_not_http2() {
    let (srv, _dir) = start_tls().await;
    let script = r#"
import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
s = ctx.wrap_socket(socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10))
assert s.selected_alpn_protocol() is None
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(data.split(b"\r\n")[0].decode("latin-1"))
"#;
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(script)
        .arg(srv.addr.ip().to_string())
        .arg(srv.addr.port().to_string());
    let out = bounded(tokio::task::spawn_blocking(move || run_tool(&mut cmd)))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.trim(), "HTTP/1.1 505 HTTP Version Not Supported");
}

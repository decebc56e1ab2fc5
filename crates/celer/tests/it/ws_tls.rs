//! WebSocket over TLS on HTTP/1.1 (`wss://`) with the Python `websockets`
//! client and Python's `ssl`: echo with permessage-deflate, a refusal by
//! the validate step, and the 1001 close at shutdown.

use std::process::Command;
use std::time::Duration;

use celer::serve::{Listen, Server, Shutdown};
use celer::ws::{Accept, Registry, WebSocket, WebSocketRoute};
use celer::{App, Request};
use celer_server::TlsConfig;
use http::StatusCode;

const T: Duration = Duration::from_secs(20);

const PY: &str = r#"
import asyncio, ssl, sys
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedOK, InvalidStatus

async def main():
    port, ca = sys.argv[1], sys.argv[2]
    tls = ssl.create_default_context(cafile=ca)
    async with connect(f"wss://localhost:{port}/echo", ssl=tls, compression="deflate",
                       max_size=2**24) as ws:
        assert ws.transport.get_extra_info("ssl_object").version() == "TLSv1.3"
        ext = [e.name for e in ws.protocol.extensions]
        assert ext == ["permessage-deflate"], ext
        for msg in ["hello", "κόσμε" * 1000, b"\x00\x01" * 70000, ""]:
            await ws.send(msg)
            assert await ws.recv() == msg
    try:
        async with connect(f"wss://localhost:{port}/private", ssl=tls):
            raise SystemExit("a refused handshake opened")
    except InvalidStatus as e:
        assert e.response.status_code == 403, e.response.status_code
        assert e.response.body == b"members only", e.response.body
    # Left open until the server shuts down.
    async with connect(f"wss://localhost:{port}/stay", ssl=tls) as ws:
        try:
            await ws.recv()
            raise SystemExit("a message instead of the close")
        except ConnectionClosedOK as e:
            assert e.rcvd.code == 1001, e.rcvd
    print("ok")

asyncio.run(main())
"#;

async fn drain(mut ws: WebSocket) {
    while ws.recv().await.is_some() {}
}

async fn echo(mut ws: WebSocket) {
    while let Some(msg) = ws.recv().await {
        if ws.send(msg).await.is_err() {
            break;
        }
    }
}

#[tokio::test]
async fn the_python_websockets_client_talks_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = celer_test_support::localhost_cert(dir.path());
    let tls = TlsConfig::builder()
        .cert_files(&cert, &key)
        .build()
        .unwrap();

    let stay = Registry::new();
    let mut app = App::new();
    app.websocket("/echo", WebSocketRoute::new(echo));
    app.websocket(
        "/private",
        WebSocketRoute::new(drain).validate(|_req: Request| async {
            Err::<Accept, _>((StatusCode::FORBIDDEN, "members only"))
        }),
    );
    app.websocket("/stay", WebSocketRoute::new(drain).registry(stay.clone()));
    let bound = Server::builder()
        .listen_tls(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .tls(tls)
        .bind()
        .unwrap();
    let port = bound.tcp_addr().unwrap().port().to_string();
    let shutdown = Shutdown::new();
    let server = tokio::spawn(app.serve(bound, shutdown.clone()));

    let ca = cert.to_str().unwrap().to_owned();
    let client = tokio::task::spawn_blocking(move || {
        celer_test_support::run_tool(Command::new("python3").args(["-c", PY, &port, &ca]))
    });
    tokio::time::timeout(T, async {
        // A client that failed before it got there is reported below.
        while stay.count() == 0 && !client.is_finished() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the client's last socket opened");
    shutdown.trigger();
    let out = client.await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tokio::time::timeout(T, server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

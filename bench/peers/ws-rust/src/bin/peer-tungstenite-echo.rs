//! Echo server on tokio-tungstenite: every message sent back as it came.
//! One thread (a current-thread runtime), like `example-ws-echo --workers 1`.
//!
//! peer-tungstenite-echo PORT

use futures_util::{SinkExt, StreamExt};

fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(9002);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        eprintln!("peer-tungstenite-echo listening on 127.0.0.1:{port}");
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let _ = tcp.set_nodelay(true);
            tokio::spawn(async move {
                let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else { return };
                let (mut tx, mut rx) = ws.split();
                while let Some(Ok(msg)) = rx.next().await {
                    if msg.is_text() || msg.is_binary() {
                        if tx.send(msg).await.is_err() {
                            break;
                        }
                    }
                }
            });
        }
    });
}

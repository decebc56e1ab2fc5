//! Echo and broadcast server on tokio-tungstenite, one thread (a
//! current-thread runtime), like `example-ws-echo --workers 1`: on
//! `/broadcast` every message received is sent to every connection of that
//! path (a tokio broadcast channel); on any other path it is sent back as it
//! came.
//!
//! peer-tungstenite-echo PORT

use futures_util::{SinkExt, StreamExt};
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(9002);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        eprintln!("peer-tungstenite-echo listening on 127.0.0.1:{port}");
        let (hub, _) = broadcast::channel::<Message>(1024);
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let _ = tcp.set_nodelay(true);
            let hub = hub.clone();
            tokio::spawn(async move {
                let mut path = String::new();
                let cb = |req: &Request, res: Response| {
                    path = req.uri().path().to_owned();
                    Ok(res)
                };
                let Ok(ws) = tokio_tungstenite::accept_hdr_async(tcp, cb).await else { return };
                let (mut tx, mut rx) = ws.split();
                if path != "/broadcast" {
                    while let Some(Ok(msg)) = rx.next().await {
                        if (msg.is_text() || msg.is_binary()) && tx.send(msg).await.is_err() {
                            break;
                        }
                    }
                    return;
                }
                let mut sub = hub.subscribe();
                loop {
                    tokio::select! {
                        m = rx.next() => match m {
                            Some(Ok(msg)) if msg.is_text() || msg.is_binary() => { let _ = hub.send(msg); }
                            Some(Ok(_)) => {}
                            _ => break,
                        },
                        m = sub.recv() => match m {
                            Ok(msg) => if tx.send(msg).await.is_err() { break },
                            Err(broadcast::error::RecvError::Lagged(_)) => {}
                            Err(_) => break,
                        },
                    }
                }
            });
        }
    });
}

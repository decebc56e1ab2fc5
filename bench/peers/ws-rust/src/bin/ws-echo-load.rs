//! Echo load: C connections, each sending a binary message of S bytes and
//! waiting for its echo, for D seconds; prints the messages echoed.
//!
//! ws-echo-load URL CONNECTIONS SIZE SECONDS

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args[1].clone();
    let conns: usize = args[2].parse().unwrap();
    let size: usize = args[3].parse().unwrap();
    let secs: u64 = args[4].parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    rt.block_on(async {
        let mut tasks = Vec::new();
        let mut sockets = Vec::new();
        for _ in 0..conns {
            let (ws, _) = tokio_tungstenite::connect_async(url.as_str()).await.expect("connect");
            sockets.push(ws);
        }
        for mut ws in sockets {
            let (done, stop) = (done.clone(), stop.clone());
            let payload = vec![0x5a_u8; size];
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if ws.send(Message::binary(payload.clone())).await.is_err() {
                        return;
                    }
                    match ws.next().await {
                        Some(Ok(_)) => {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => return,
                    }
                }
                let _ = ws.close(None).await;
            }));
        }
        println!("ready");
        tokio::time::sleep(Duration::from_secs(secs)).await;
        stop.store(true, Ordering::Relaxed);
        println!("{}", done.load(Ordering::Relaxed));
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
        }
    });
}

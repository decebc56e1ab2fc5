//! `example-chat` over loopback: the app served by `App::serve` on a real
//! socket, driven with raw HTTP/1.1 and a WebSocket client.

mod rest;
mod sse;
mod ws;

use std::net::SocketAddr;

use celer::serve::Shutdown;
use celer_test_support::{Raw, Resp, bounded};
use example_chat::Settings;
use serde_json::Value;

/// The app on a loopback port.
pub struct Served {
    pub addr: SocketAddr,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Served {
    pub async fn start() -> Served {
        Served::with(Settings::default()).await
    }

    pub async fn with(settings: Settings) -> Served {
        let bound = celer::serve::bind("tcp://127.0.0.1:0").expect("bind");
        let addr = bound.tcp_addr().expect("tcp address");
        let shutdown = Shutdown::new();
        let task = tokio::spawn(example_chat::app(&settings).serve(bound, shutdown.clone()));
        Served {
            addr,
            shutdown,
            task,
        }
    }

    /// Sends one request on a fresh connection and reads the answer.
    pub async fn send(&self, method: &str, target: &str, headers: &str, body: &[u8]) -> Resp {
        let mut req =
            format!("{method} {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{headers}");
        if !body.is_empty() || method == "POST" {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut conn = Raw::connect(self.addr).await;
        conn.send(req.as_bytes()).await;
        conn.send(body).await;
        conn.response_to(method).await
    }

    /// POSTs a JSON body to `target`.
    pub async fn post_json(&self, target: &str, body: &str) -> Resp {
        self.send(
            "POST",
            target,
            "Content-Type: application/json\r\n",
            body.as_bytes(),
        )
        .await
    }

    pub fn ws_url(&self, path: &str) -> String {
        format!("ws://{}{path}", self.addr)
    }

    pub async fn stop(self) {
        self.shutdown.trigger();
        bounded(self.task).await.expect("join").expect("serve");
    }
}

/// The body as JSON; fails the test when it is not.
pub fn json_of(resp: &Resp) -> Value {
    serde_json::from_slice(&resp.body)
        .unwrap_or_else(|err| panic!("not json ({err}): {:?}", resp.text()))
}

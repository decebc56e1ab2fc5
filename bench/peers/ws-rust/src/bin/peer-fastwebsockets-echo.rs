//! Echo server on fastwebsockets (its hyper upgrade path), one thread (a
//! current-thread runtime): every text or binary message sent back as it
//! came. Echo only: no broadcast route.
//!
//! peer-fastwebsockets-echo PORT

use fastwebsockets::{FragmentCollector, OpCode, WebSocketError, upgrade};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

async fn echo(fut: upgrade::UpgradeFut) -> Result<(), WebSocketError> {
    let mut ws = FragmentCollector::new(fut.await?);
    loop {
        let frame = ws.read_frame().await?;
        match frame.opcode {
            OpCode::Close => break,
            OpCode::Text | OpCode::Binary => ws.write_frame(frame).await?,
            _ => {}
        }
    }
    Ok(())
}

async fn upgrade(mut req: Request<Incoming>) -> Result<Response<Empty<Bytes>>, WebSocketError> {
    let (response, fut) = upgrade::upgrade(&mut req)?;
    tokio::spawn(async move {
        let _ = echo(fut).await;
    });
    Ok(response)
}

fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(9005);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        eprintln!("peer-fastwebsockets-echo listening on 127.0.0.1:{port}");
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            tokio::spawn(async move {
                let conn =
                    http1::Builder::new().serve_connection(TokioIo::new(tcp), service_fn(upgrade));
                let _ = conn.with_upgrades().await;
            });
        }
    });
}

//! One body limit: the app's, over the wire. Bodies over the engine's
//! default of 16 MiB reach the app, whose 413 goes through its middleware
//! and status handlers; `take_body` streams stop at the limit too.

use celer::{App, Next, Request, Response};
use celer_test_support::Raw;
use http::HeaderValue;
use http_body_util::BodyExt;

use crate::wire::Served;

const MIB: usize = 1024 * 1024;

async fn request_id(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    res.headers_mut()
        .insert("x-request-id", HeaderValue::from_static("r-7"));
    res
}

fn app() -> App {
    let mut app = App::new();
    app.middleware(request_id);
    app.status(413, |_res: Response| async { "too large for us" });
    app.post("/small", |mut req: Request| async move {
        req.bytes().await.map(|b| b.len().to_string())
    });
    app.post("/upload", |mut req: Request| async move {
        req.bytes().await.map(|b| b.len().to_string())
    })
    .body_limit(20 * MIB);
    app.post("/stream", |mut req: Request| async move {
        let mut body = req.take_body();
        let mut total = 0;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(celer::Error::boxed)?;
            total += frame.data_ref().map_or(0, |d| d.len());
        }
        Ok::<_, celer::Error>(total.to_string())
    })
    .body_limit(1000);
    app
}

#[tokio::test(flavor = "current_thread")]
async fn a_body_over_the_engines_default_should_reach_a_route_that_allows_it() {
    let served = Served::start(app()).await;
    let body = vec![b'x'; 17 * MIB];
    let head = format!(
        "POST /upload HTTP/1.1\nHost: t\nContent-Length: {}\nConnection: close\n\n",
        body.len()
    );
    let res = served.one(&head, &body).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.text(), (17 * MIB).to_string());
    served.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn the_apps_413_should_go_through_its_middleware_and_status_handlers() {
    let served = Served::start(app()).await;
    // Declared larger than the engine's default and than the route's
    // limit: refused from the header, before the body is sent.
    let head = format!(
        "POST /small HTTP/1.1\nHost: t\nContent-Length: {}\nConnection: close\n\n",
        17 * MIB
    );
    let res = served.one(&head, b"").await;
    assert_eq!(res.status, 413);
    assert_eq!(res.text(), "too large for us");
    assert_eq!(res.header("x-request-id"), Some("r-7"));
    served.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_streamed_body_should_stop_at_the_limit_with_413() {
    let served = Served::start(app()).await;
    let mut conn = Raw::connect(served.addr).await;
    let mut req = b"POST /stream HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    for _ in 0..3 {
        req.extend_from_slice(b"200\r\n");
        req.extend_from_slice(&[b'y'; 0x200]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    conn.send(&req).await;
    let res = conn.response().await;
    assert_eq!(res.status, 413);
    assert_eq!(res.text(), "too large for us");
    assert_eq!(res.header("x-request-id"), Some("r-7"));
    drop(conn);
    // Under the limit, the stream is read whole.
    let res = served
        .one(
            "POST /stream HTTP/1.1\nHost: t\nContent-Length: 900\nConnection: close\n\n",
            &[b'z'; 900],
        )
        .await;
    assert_eq!(res.text(), "900");
    served.stop().await;
}

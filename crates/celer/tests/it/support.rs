//! Helpers: send a request through an app with `oneshot` and read the answer.

use celer::{App, Body};
use http::{HeaderMap, Method, StatusCode};
use tower::ServiceExt;

/// A response, collected.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub(crate) async fn send(app: &App, method: &str, uri: &str) -> Reply {
    send_with(
        app,
        http::Request::builder().method(method).uri(uri),
        Body::empty(),
    )
    .await
}

pub(crate) async fn send_with(app: &App, builder: http::request::Builder, body: Body) -> Reply {
    let req = builder.body(body).unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = res.into_body().collect_bytes().await.unwrap();
    Reply {
        status,
        headers,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

pub(crate) async fn get(app: &App, uri: &str) -> Reply {
    send(app, Method::GET.as_str(), uri).await
}

pub(crate) fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(fut)
}

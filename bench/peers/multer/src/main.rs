//! `POST /upload` with axum 0.8's `Multipart` (multer 3): every part's
//! bytes counted as they arrive, the answer `<parts> parts, <bytes> bytes`.
//! One thread (a current-thread runtime), no body limit, jemalloc as in
//! Celer's examples. `peer-multer PORT`.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use axum::extract::{DefaultBodyLimit, Multipart};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;

async fn upload(mut form: Multipart) -> Result<String, (StatusCode, String)> {
    let bad = |e: axum::extract::multipart::MultipartError| (e.status(), e.body_text());
    let (mut parts, mut bytes) = (0u64, 0u64);
    while let Some(mut field) = form.next_field().await.map_err(bad)? {
        parts += 1;
        while let Some(chunk) = field.chunk().await.map_err(bad)? {
            bytes += chunk.len() as u64;
        }
    }
    Ok(format!("{parts} parts, {bytes} bytes\n"))
}

fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("usage: peer-multer PORT");
    let app = Router::new()
        .route("/upload", post(upload))
        .layer(DefaultBodyLimit::disable());
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime")
        .block_on(async move {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .expect("bind");
            axum::serve(listener, app).await.expect("serve");
        });
}

//! `GET /plaintext` and `GET /json` (the TechEmpower pair) on the Celer
//! framework: two routes of an `App`, served by `celer::serve_from_args`.
//! `example-hello-engine` answers the same pair on the bare engine, for
//! comparison.
//!
//! Run with `cargo run --release -p example-hello -- --listen tcp://127.0.0.1:8080`.
//!
//! ```text
//! example-hello [--listen SPEC]... [--workers N] [--threading per-core|work-stealing]
//!               [--listen-tls SPEC]... [--tls-cert PEM --tls-key PEM]
//! ```

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use celer::response::{IntoResponse, Json};
use celer::{App, Body, Request};
use http::HeaderValue;
use http::header::CONTENT_TYPE;

#[derive(serde::Serialize)]
struct Message {
    message: &'static str,
}

async fn plaintext(_req: Request) -> impl IntoResponse {
    // `text/plain` without a charset, byte for byte what the engine twin sends.
    (
        [(CONTENT_TYPE, HeaderValue::from_static("text/plain"))],
        Body::from("Hello, World!"),
    )
}

async fn json(_req: Request) -> Json<Message> {
    // Serialized per request, as the benchmark requires.
    Json(Message {
        message: "Hello, World!",
    })
}

fn app() -> App {
    let mut app = App::new();
    app.get("/plaintext", plaintext);
    app.get("/json", json);
    app
}

fn main() -> std::process::ExitCode {
    celer::serve_from_args(app())
}

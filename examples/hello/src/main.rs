//! `GET /plaintext` and `GET /json` (the TechEmpower pair) on the Celer
//! framework: two routes of an `App`, served by `App::run`.
//! `example-hello-engine` answers the same pair on the bare engine, for
//! comparison.
//!
//! Run with `cargo run --release -p example-hello -- --listen tcp://127.0.0.1:8080`.
//!
//! ```text
//! example-hello --listen tcp://127.0.0.1:8080 [--workers N] [--threading per-core|work-stealing]
//! ```

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use celer::response::{IntoResponse, Json};
use celer::serve::{Listen, Server, Threading};
use celer::{App, Body, Request};
use clap::Parser;
use http::HeaderValue;
use http::header::CONTENT_TYPE;

#[derive(Parser, Debug)]
#[command(about = "TechEmpower plaintext/JSON on the Celer framework")]
struct Args {
    /// Where to listen (repeatable): tcp://HOST:PORT, unix:PATH, fd:N, systemd.
    #[arg(long, default_value = "tcp://127.0.0.1:8080")]
    listen: Vec<Listen>,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
    /// Threading model: per-core or work-stealing.
    #[arg(long, default_value = "per-core", value_parser = ["per-core", "work-stealing"])]
    threading: String,
}

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

fn main() {
    let args = Args::parse();
    let mut builder = Server::builder().threading(match args.threading.as_str() {
        "work-stealing" => Threading::WorkStealing,
        _ => Threading::PerCore,
    });
    if let Some(n) = args.workers {
        builder = builder.workers(n);
    }
    for l in args.listen {
        builder = builder.listen(l);
    }
    let _ = celer::serve::raise_fd_limit();
    let bound = match builder.bind() {
        Ok(b) => b,
        Err(err) => {
            eprintln!("example-hello: {err}");
            std::process::exit(2);
        }
    };
    eprintln!(
        "example-hello listening on {}",
        bound.local_specs().join(", ")
    );
    let signal = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Err(err) = app().run(bound, signal) {
        eprintln!("example-hello: {err}");
        std::process::exit(1);
    }
}

//! A WebSocket echo server: every message on `/echo` (and `/`) is sent back
//! as it came, with permessage-deflate offered unless `--no-compression`.
//! On `/broadcast` every connection joins one registry group and each
//! message received is broadcast to the whole group (the fan-out benchmark).
//! The conformance suite (`scripts/autobahn`) and the benchmarks drive it.
//!
//! ```text
//! example-ws-echo --listen tcp://127.0.0.1:9001 [--no-compression] [--workers N]
//! ```

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use celer::App;
use celer::serve::{Listen, Server, Threading};
use celer::ws::{Accept, Config, Registry, WebSocket, WebSocketRoute};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "WebSocket echo server on the Celer framework")]
struct Args {
    /// Where to listen (repeatable): tcp://HOST:PORT, unix:PATH, fd:N, systemd.
    #[arg(long, default_value = "tcp://127.0.0.1:9001")]
    listen: Vec<Listen>,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
    /// Do not offer permessage-deflate.
    #[arg(long)]
    no_compression: bool,
    /// Messages shorter than this are echoed uncompressed when
    /// permessage-deflate is on (the library's default is 128; 0 compresses
    /// every message, as Autobahn's 12.x/13.x cases expect of an echo).
    #[arg(long, default_value_t = 0)]
    compress_min_bytes: usize,
    /// Largest message echoed, in bytes (the conformance suite sends 16 MiB).
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    max_message_bytes: usize,
}

async fn echo(mut ws: WebSocket) {
    while let Some(msg) = ws.recv().await {
        if ws.send(msg).await.is_err() {
            break;
        }
    }
}

/// The one group every `/broadcast` connection joins.
const GROUP: &str = "all";

async fn rebroadcast(mut ws: WebSocket) {
    while let Some(msg) = ws.recv().await {
        ws.registry().broadcast(GROUP, msg);
    }
}

fn main() {
    let args = Args::parse();
    let config = Config {
        compression: !args.no_compression,
        compress_min_bytes: args.compress_min_bytes,
        max_message_bytes: args.max_message_bytes,
        max_frame_bytes: args.max_message_bytes as u64,
        max_queued_bytes: 2 * args.max_message_bytes,
        ..Config::default()
    };
    let route = WebSocketRoute::new(echo).config(config.clone());
    let mut app = App::new();
    app.websocket("/", route.clone());
    app.websocket("/echo", route);
    app.websocket(
        "/broadcast",
        WebSocketRoute::new(rebroadcast)
            .config(config)
            .registry(Registry::new())
            .validate(|_req: celer::Request| async move {
                Ok::<_, http::StatusCode>(Accept::new().group(GROUP))
            }),
    );
    let mut builder = Server::builder().threading(Threading::PerCore);
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
            eprintln!("example-ws-echo: {err}");
            std::process::exit(2);
        }
    };
    eprintln!(
        "example-ws-echo listening on {}",
        bound.local_specs().join(", ")
    );
    let signal = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Err(err) = app.run(bound, signal) {
        eprintln!("example-ws-echo: {err}");
        std::process::exit(1);
    }
}

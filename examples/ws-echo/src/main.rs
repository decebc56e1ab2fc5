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
use celer::serve::Options;
use celer::ws::{Accept, Config, Registry, WebSocket, WebSocketRoute};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    about = "WebSocket echo server on the Celer framework (default --listen tcp://127.0.0.1:9001)",
    after_help = Options::help()
)]
struct Args {
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
    let (server, rest) = Options::from_env_with_rest();
    let args = Args::parse_from(rest);
    let server = server.or_listen("tcp://127.0.0.1:9001".parse().expect("a valid spec"));
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
    if let Err(err) = server.serve(app) {
        eprintln!("example-ws-echo: {err}");
        std::process::exit(1);
    }
}

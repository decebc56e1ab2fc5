//! Run with cargo run -p example-chat
//!
//! The `example-chat` server: the app of the library half, served by
//! `celer::serve::Options` (the standard `--listen`, `--listen-tls`,
//! `--tls-cert`, `--tls-key`, `--workers`, `--threading` flags) until
//! SIGTERM or SIGINT, then shut down gracefully
//! (WebSockets closed with 1001, event streams ended after their last
//! event).
//!
//! ```text
//! example-chat [--listen tcp://127.0.0.1:8080] [--listen-tls tcp://HOST:PORT
//!              --tls-cert PEM --tls-key PEM] [--workers N] [--max-rooms N]
//!              [--max-sse-per-room N] [--echo-max-message-bytes N]
//!              [--echo-no-compression]
//! ```

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use celer::serve::Options;
use clap::Parser;
use example_chat::Settings;

#[derive(Parser, Debug)]
#[command(
    about = "A chat on the Celer framework: WebSocket rooms, an SSE fallback, an echo WebSocket",
    after_help = Options::help()
)]
struct Args {
    /// Rooms with server-sent-event subscribers at once.
    #[arg(long, default_value_t = example_chat::DEFAULT_MAX_ROOMS)]
    max_rooms: usize,
    /// Server-sent-event subscribers of one room at once.
    #[arg(long, default_value_t = example_chat::DEFAULT_MAX_SSE_PER_ROOM)]
    max_sse_per_room: usize,
    /// Largest message /echo takes, in bytes (the conformance suite sends 16 MiB).
    #[arg(long, default_value_t = example_chat::DEFAULT_ECHO_MAX_MESSAGE_BYTES)]
    echo_max_message_bytes: usize,
    /// Do not offer permessage-deflate on /echo.
    #[arg(long)]
    echo_no_compression: bool,
}

fn main() {
    let (server, rest) = Options::from_env_with_rest();
    let args = Args::parse_from(rest);
    let settings = Settings {
        max_rooms: args.max_rooms,
        max_sse_per_room: args.max_sse_per_room,
        echo_max_message_bytes: args.echo_max_message_bytes,
        echo_compression: !args.echo_no_compression,
    };
    if let Err(err) = server.serve(example_chat::app(&settings)) {
        eprintln!("example-chat: {err}");
        std::process::exit(1);
    }
}

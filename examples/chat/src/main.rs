//! Run with cargo run -p example-chat
//!
//! The `example-chat` server: the app of the library half, served by
//! `App::run` until SIGTERM or SIGINT, then shut down gracefully
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

use celer::serve::{Listen, Server, TlsConfig};
use clap::Parser;
use example_chat::Settings;

#[derive(Parser, Debug)]
#[command(
    about = "A chat on the Celer framework: WebSocket rooms, an SSE fallback, an echo WebSocket"
)]
struct Args {
    /// Where to listen (repeatable): tcp://HOST:PORT, unix:PATH, fd:N,
    /// systemd. Default tcp://127.0.0.1:8080 unless --listen-tls is given.
    #[arg(long)]
    listen: Vec<Listen>,
    /// Where to listen with TLS (repeatable; needs --tls-cert and
    /// --tls-key). HTTP/2 through ALPN, WebSocket over HTTP/2 included.
    #[arg(long)]
    listen_tls: Vec<Listen>,
    /// Certificate chain (PEM) of the TLS listeners.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// Private key (PEM) of the TLS listeners.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
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
    let args = Args::parse();
    let settings = Settings {
        max_rooms: args.max_rooms,
        max_sse_per_room: args.max_sse_per_room,
        echo_max_message_bytes: args.echo_max_message_bytes,
        echo_compression: !args.echo_no_compression,
    };
    let mut builder = Server::builder();
    if let Some(n) = args.workers {
        builder = builder.workers(n);
    }
    let mut listen = args.listen;
    if listen.is_empty() && args.listen_tls.is_empty() {
        listen.push(Listen::parse("tcp://127.0.0.1:8080").expect("a valid spec"));
    }
    for l in listen {
        builder = builder.listen(l);
    }
    for l in args.listen_tls {
        builder = builder.listen_tls(l);
    }
    if let (Some(cert), Some(key)) = (args.tls_cert, args.tls_key) {
        match TlsConfig::builder().cert_files(cert, key).build() {
            Ok(tls) => builder = builder.tls(tls),
            Err(err) => {
                eprintln!("example-chat: {err}");
                std::process::exit(2);
            }
        }
    }
    let _ = celer::serve::raise_fd_limit();
    let bound = match builder.bind() {
        Ok(b) => b,
        Err(err) => {
            eprintln!("example-chat: {err}");
            std::process::exit(2);
        }
    };
    eprintln!(
        "example-chat listening on {}",
        bound.local_specs().join(", ")
    );
    if let Err(err) = example_chat::app(&settings).run(bound, stop_signal()) {
        eprintln!("example-chat: {err}");
        std::process::exit(1);
    }
}

/// Resolves at the first SIGTERM or SIGINT.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("example-chat: cannot listen for signals; stop it with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

//! The established Rust stack's cost for `examples/hello-secure`'s work,
//! for `bench/instructions`: axum 0.8, tower-sessions (its `MemoryStore`),
//! axum-extra's `CookieJar` and a CSRF middleware.
//!
//! - `/plaintext`: `Hello, World!` as `text/plain`, no stack.
//! - `/s/plaintext`: behind the session layer (cookie `sid`, not `Secure`)
//!   and the CSRF middleware (a `GET` passes after its method check); the
//!   handler extracts the `CookieJar` and the `Session`, reads `user` as a
//!   `String` and answers as `/plaintext`. It answers 500 if the session
//!   was not found, so a run that loads no session fails instead of
//!   measuring nothing.
//! - `/s/bare`: the same stack, a handler that reads nothing.
//!
//! The requests carry the `Cookie` field a logged-in browser sends, on
//! all routes alike: `theme=dark; sid=<id>; lang=en`, `<id>` a session
//! made at start with `user = "ada"`, in the form tower-sessions itself
//! puts in its cookie (plain, not signed). `GET /bench/cookie` answers
//! that field's line, which `bench/instructions --header-from
//! /bench/cookie` fetches once and sends with every request after it (as
//! for `examples/hello-secure`).
//!
//! The `/s` routes are merged with their full paths rather than nested,
//! so that no prefix strip is counted as the stack's cost.
//!
//! ```text
//! peer-axum-secure --listen tcp://127.0.0.1:PORT [--workers N]
//! ```
//!
//! One worker runs a current-thread runtime; more, a multi-thread one.
//! SIGTERM ends the process at once with exit status 0.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::net::SocketAddr;
use std::process::ExitCode;

use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use axum_extra::extract::CookieJar;
use tower_sessions::{MemoryStore, Session, SessionManagerLayer};

const USAGE: &str = "\
usage: peer-axum-secure --listen tcp://HOST:PORT [--workers N]

  --listen tcp://HOST:PORT  the address to serve HTTP/1.1 on
  --workers N               runtime threads (1: a current-thread runtime;
                            default: the number of CPUs)
  -h, --help                this text
";

/// The session key the CSRF middleware compares a request's token with.
const CSRF_KEY: &str = "csrf";

/// The request header a state-changing request carries its token in.
const CSRF_HEADER: &str = "x-csrf-token";

fn hello() -> Response {
    (
        [(CONTENT_TYPE, HeaderValue::from_static("text/plain"))],
        "Hello, World!",
    )
        .into_response()
}

async fn plaintext() -> Response {
    hello()
}

/// The jar and the session extracted, the user read.
async fn secure(jar: CookieJar, session: Session) -> Response {
    match session.get::<String>("user").await {
        Ok(Some(user)) if user == "ada" => {
            debug_assert_eq!(jar.get("theme").map(|c| c.value()), Some("dark"));
            hello()
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Lets safe methods through after the method check; any other request
/// must carry the session's token in `x-csrf-token`, else 403.
async fn csrf(req: Request, next: Next) -> Response {
    if matches!(
        *req.method(),
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    ) {
        return next.run(req).await;
    }
    let Some(session) = req.extensions().get::<Session>().cloned() else {
        return StatusCode::FORBIDDEN.into_response();
    };
    let expected = match session.get::<String>(CSRF_KEY).await {
        Ok(Some(token)) => token,
        _ => return StatusCode::FORBIDDEN.into_response(),
    };
    let given = req
        .headers()
        .get(CSRF_HEADER)
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    if !same(given, expected.as_bytes()) {
        return StatusCode::FORBIDDEN.into_response();
    }
    next.run(req).await
}

/// Compares two tokens in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Makes the live session the requests carry and returns the app.
async fn app() -> Router {
    let store = MemoryStore::default();
    let session = Session::new(None, std::sync::Arc::new(store.clone()), None);
    session.insert("user", "ada").await.expect("a session");
    session.save().await.expect("a saved session");
    let id = session.id().expect("a session id");
    let cookie_line = format!("Cookie: theme=dark; sid={id}; lang=en\n");

    let secured = Router::new()
        .route("/s/plaintext", get(secure))
        .route("/s/bare", get(plaintext))
        .layer(middleware::from_fn(csrf))
        .layer(
            SessionManagerLayer::new(store)
                .with_name("sid")
                .with_secure(false),
        );
    Router::new()
        .route("/bench/cookie", get(move || async move { cookie_line }))
        .route("/plaintext", get(plaintext))
        .merge(secured)
}

/// What the command line asks for.
struct Args {
    listen: SocketAddr,
    workers: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut listen = None;
    let mut workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            "--listen" => {
                let spec = args.next().ok_or("--listen needs a value")?;
                let addr = spec
                    .strip_prefix("tcp://")
                    .ok_or_else(|| format!("--listen {spec}: not tcp://HOST:PORT"))?;
                listen = Some(addr.parse().map_err(|e| format!("--listen {spec}: {e}"))?);
            }
            "--workers" => {
                let n = args.next().ok_or("--workers needs a value")?;
                workers = n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("--workers {n}: not a positive number"))?;
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Args {
        listen: listen.ok_or("--listen is required")?,
        workers,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprint!("peer-axum-secure: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = if args.workers == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.workers)
            .enable_io()
            .build()
    }
    .expect("runtime");
    runtime.block_on(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        let listener = match tokio::net::TcpListener::bind(args.listen).await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!("peer-axum-secure: bind {}: {e}", args.listen);
                return ExitCode::FAILURE;
            }
        };
        let app = app().await;
        tokio::select! {
            served = axum::serve(listener, app) => match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("peer-axum-secure: {e}");
                    ExitCode::FAILURE
                }
            },
            _ = term.recv() => ExitCode::SUCCESS,
        }
    })
}

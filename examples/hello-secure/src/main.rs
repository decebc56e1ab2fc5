//! `GET /plaintext` twice in one app, for `bench/instructions`: as
//! `example-hello` answers it, and under `/s/plaintext` behind the
//! security stack a logged-in browser's request meets: the cookie jar
//! extracted, the session (in memory) loaded and read, and the CSRF
//! middleware (which lets a `GET` through after its method check).
//! `/s/bare` is the plain handler behind the same stack: what the stack
//! costs by itself, with no cookie, session or token read by the handler
//! (its cookies are then never read). `/f/plaintext` and `/f/bare` are
//! the same two behind one fused middleware (`Sessions::csrf`: the CSRF
//! check made by the session middleware, one step of the chain fewer).
//! `/m/plaintext` is the floor of those reads: no middleware, no limits,
//! no CSRF, no rotation; the handler finds `sid=` in the `Cookie` field
//! with a substring search set up once, looks the id up in a locked map
//! keyed by its first eight bytes, checks and renews an idle deadline on
//! the coarse clock and clones the user's name, before its future is
//! made: the least a server session read can do (`Floor` below).
//!
//! The requests carry the `Cookie` field a logged-in browser sends (a
//! live session id, two other cookies), on every route alike: a session
//! is made at start, and `GET /bench/cookie` answers that field's line
//! (`Cookie: theme=dark; sid=<id>; lang=en`), which `bench/instructions
//! --header-from /bench/cookie` fetches once and then sends with each
//! request. The field is parsed with the request head, as a browser's is;
//! no middleware puts it in.
//!
//! ```text
//! example-hello-secure [--listen SPEC]... [--workers N] (--help for all)
//! bench/instructions --header-from /bench/cookie --path /plaintext BIN
//! bench/instructions --header-from /bench/cookie --path /s/plaintext BIN
//! (and /s/bare, /f/plaintext, /f/bare, /m/plaintext; add
//! --header-file bench/headers/chrome-navigation for a browser's request)
//! ```

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::future::Future;
use std::time::Duration;

use celer::cookie::CookieJar;
use celer::csrf::Csrf;
use celer::response::IntoResponse;
use celer::session::{MemoryStore, Record, Session, SessionStore, Sessions};
use celer::{App, Body, Error, Request, Response};
use http::header::{CONTENT_TYPE, COOKIE};
use http::{HeaderValue, StatusCode};

fn hello() -> Response {
    (
        [(CONTENT_TYPE, HeaderValue::from_static("text/plain"))],
        Body::from("Hello, World!"),
    )
        .into_response()
}

async fn plaintext(_req: Request) -> Response {
    hello()
}

/// The floor of a session read: ids to records under one lock, hashed
/// by the id's first eight bytes (ids are random), with an idle deadline
/// on the coarse monotonic clock (as Celer's `MemoryStore` reads it).
struct Floor {
    sessions: std::sync::Mutex<
        std::collections::HashMap<
            Box<[u8]>,
            FloorRecord,
            std::hash::BuildHasherDefault<FirstEight>,
        >,
    >,
    /// `sid=`, its search set up once.
    pair: memchr::memmem::Finder<'static>,
}

/// One session of [`Floor`].
struct FloorRecord {
    user: String,
    /// The coarse monotonic clock's millisecond after which it has expired.
    idle_until: u64,
}

/// A hasher that takes the first eight bytes written (a random id's).
#[derive(Default)]
struct FirstEight(u64);

impl std::hash::Hasher for FirstEight {
    fn write(&mut self, bytes: &[u8]) {
        if self.0 == 0 && bytes.len() >= 8 {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[..8]);
            self.0 = u64::from_ne_bytes(word);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Floor {
    /// The user of the request's `sid` session, renewing its idle deadline.
    fn user(&self, req: &Request) -> Option<String> {
        let field = req.headers().get(COOKIE)?.as_bytes();
        let at = self.pair.find(field)? + 4;
        let end = memchr::memchr(b';', &field[at..]).map_or(field.len(), |n| at + n);
        let now = coarse_ms();
        let mut sessions = self.sessions.lock().ok()?;
        let record = sessions.get_mut(&field[at..end])?;
        if record.idle_until < now {
            return None;
        }
        record.idle_until = now + 30 * 60 * 1000;
        Some(record.user.clone())
    }
}

/// `CLOCK_MONOTONIC_COARSE` in milliseconds (read from the vDSO).
#[allow(unsafe_code)]
fn coarse_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the call's
    // duration; `clock_gettime` writes only it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

async fn secure(mut req: Request) -> Result<Response, Error> {
    let jar = req.extract::<CookieJar>().await?;
    let session = req.extract::<Session>().await?;
    let user: Option<String> = session.get("user").await?;
    // A run whose requests load no session fails instead of measuring
    // nothing.
    if user.as_deref() != Some("ada") {
        return Err(Error::internal("the request carries no live session"));
    }
    debug_assert_eq!(jar.get("theme"), Some("dark"));
    Ok(hello())
}

/// Polls a future that is ready at once (the memory store's).
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => unreachable!("the memory store answers at once"),
    }
}

fn app() -> App {
    let store = std::sync::Arc::new(MemoryStore::new());
    let mut record = Record::new();
    record.data.insert("user".into(), "ada".into());
    let id = ready(store.save(None, &record, Duration::from_secs(24 * 3600))).expect("a session");
    let cookie_line = format!("Cookie: theme=dark; sid={id}; lang=en\n");

    let floor = std::sync::Arc::new(Floor {
        sessions: std::sync::Mutex::new(
            [(
                Box::<[u8]>::from(id.as_bytes()),
                FloorRecord {
                    user: "ada".into(),
                    idle_until: u64::MAX,
                },
            )]
            .into_iter()
            .collect(),
        ),
        pair: memchr::memmem::Finder::new(b"sid="),
    });

    let mut app = App::new();
    app.get("/bench/cookie", move |_req: Request| {
        std::future::ready(cookie_line.clone())
    });
    app.get("/plaintext", plaintext);
    let sessions = || {
        Sessions::new(store.clone())
            .cookie_name("sid")
            .secure(false)
    };
    let csrf = Csrf::new();
    app.scope("/s", |s| {
        s.middleware(sessions().layer());
        s.middleware(csrf.layer());
        s.get("/plaintext", secure);
        s.get("/bare", plaintext);
    });
    app.get("/m/plaintext", move |req: Request| {
        // Read before the future is made: the future holds no handle
        // to the floor, so no reference count moves per request.
        let user = floor.user(&req);
        drop(req);
        std::future::ready(if user.as_deref() == Some("ada") {
            hello()
        } else {
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        })
    });
    app.scope("/f", |s| {
        s.middleware(sessions().csrf(&csrf).layer());
        s.get("/plaintext", secure);
        s.get("/bare", plaintext);
    });
    app
}

fn main() -> std::process::ExitCode {
    celer::serve_from_args(app())
}

#[cfg(test)]
mod tests {
    //! What `bench/instructions` relies on, over real sockets: the cookie
    //! line, every route's answer with it, and a 500 without it on the
    //! routes that read the session.
    use celer::serve::Shutdown;
    use celer_test_support::{Raw, Resp, bounded};

    async fn send(addr: std::net::SocketAddr, method: &str, path: &str, cookie: &str) -> Resp {
        let req =
            format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{cookie}\r\n");
        let mut conn = Raw::connect(addr).await;
        conn.send(req.as_bytes()).await;
        conn.response_to(method).await
    }

    #[tokio::test]
    async fn routes_answer_with_the_live_cookie_and_fail_without_it() {
        let bound = celer::serve::bind("tcp://127.0.0.1:0").expect("bind");
        let addr = bound.tcp_addr().expect("tcp address");
        let shutdown = Shutdown::new();
        let task = tokio::spawn(super::app().serve(bound, shutdown.clone()));

        let line = send(addr, "GET", "/bench/cookie", "").await;
        assert_eq!(line.status, 200);
        let line = line.text();
        assert!(
            line.starts_with("Cookie: theme=dark; sid=") && line.ends_with("; lang=en\n"),
            "{line:?}"
        );
        for path in [
            "/plaintext",
            "/s/plaintext",
            "/s/bare",
            "/f/plaintext",
            "/f/bare",
            "/m/plaintext",
        ] {
            let resp = send(addr, "GET", path, &format!("{}\r\n", line.trim_end())).await;
            assert_eq!(
                (resp.status, resp.text().as_str()),
                (200, "Hello, World!"),
                "{path}"
            );
        }
        for path in ["/s/plaintext", "/f/plaintext", "/m/plaintext"] {
            assert_eq!(send(addr, "GET", path, "").await.status, 500, "{path}");
        }
        shutdown.trigger();
        bounded(task).await.expect("join").expect("serve");
    }
}

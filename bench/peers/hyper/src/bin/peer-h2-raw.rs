//! The `h2` crate with nothing around it, for `bench/run h2`: the floor
//! of what any server built on `h2` can reach.
//!
//! HTTP/2 by prior knowledge (h2c) on one current-thread tokio runtime, one
//! task per connection; every stream is answered inline in the accept loop
//! (no task, no future, no service per stream): the head with
//! `send_response`, the body with one `send_data` that ends the stream.
//! Streams are accepted in batches (all that `h2` has read), then answered,
//! so that their answers leave in one write.
//! `GET /plaintext` gets `Hello, World!` (text/plain) and `GET /json`
//! `{"message":"Hello, World!"}`, each with `server` and a `date` formatted
//! once a second, the same head as the other peers.
//!
//! Usage: `peer-h2-raw --listen tcp://127.0.0.1:PORT`

use std::future::poll_fn;
use std::net::SocketAddr;
use std::task::Poll;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use h2::server::SendResponse;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, DATE, SERVER};
use http::{Request, Response, StatusCode};
use tokio::net::{TcpListener, TcpStream};

static PLAINTEXT: &[u8] = b"Hello, World!";
static JSON: &[u8] = b"{\"message\":\"Hello, World!\"}";

/// An IMF-fixdate, reformatted when the second changes.
struct Date {
    second: u64,
    value: HeaderValue,
}

impl Date {
    fn new() -> Date {
        let mut d = Date {
            second: u64::MAX,
            value: HeaderValue::from_static(""),
        };
        d.value();
        d
    }

    fn value(&mut self) -> HeaderValue {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        if now != self.second {
            self.second = now;
            self.value = HeaderValue::from_str(&imf_fixdate(now)).expect("ASCII date");
        }
        self.value.clone()
    }
}

fn imf_fixdate(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        day,
        MONTHS[(month - 1) as usize],
        year,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

async fn serve(stream: TcpStream) {
    let Ok(mut conn) = h2::server::handshake(stream).await else {
        return;
    };
    let mut date = Date::new();
    let mut batch = Vec::new();
    loop {
        // Take every stream h2 has read before answering any, so that the
        // answers leave in one write when the connection is next polled
        // (answering between accepts writes once per response).
        let open = poll_fn(|cx| loop {
            match conn.poll_accept(cx) {
                Poll::Ready(Some(Ok(stream))) => batch.push(stream),
                Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(false),
                Poll::Pending if batch.is_empty() => return Poll::Pending,
                Poll::Pending => return Poll::Ready(true),
            }
        })
        .await;
        for (req, respond) in batch.drain(..) {
            answer(&req, respond, &mut date);
        }
        if !open {
            return;
        }
    }
}

fn answer<T>(req: &Request<T>, mut respond: SendResponse<Bytes>, date: &mut Date) {
    let (status, ctype, body): (StatusCode, &'static str, &'static [u8]) = match req.uri().path() {
        "/plaintext" => (StatusCode::OK, "text/plain", PLAINTEXT),
        "/json" => (StatusCode::OK, "application/json", JSON),
        _ => (StatusCode::NOT_FOUND, "text/plain", b"Not Found"),
    };
    let mut head = Response::new(());
    *head.status_mut() = status;
    let h = head.headers_mut();
    h.insert(SERVER, HeaderValue::from_static("h2"));
    h.insert(DATE, date.value());
    h.insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    h.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    if let Ok(mut send) = respond.send_response(head, false) {
        let _ = send.send_data(Bytes::from_static(body), true);
    }
}

fn parse_args() -> SocketAddr {
    let mut args = std::env::args().skip(1);
    let mut addr = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => addr = args.next(),
            other => {
                eprintln!("peer-h2-raw: unknown argument {other:?}");
                std::process::exit(2);
            }
        }
    }
    let addr = addr.unwrap_or_else(|| "tcp://127.0.0.1:8080".into());
    let hostport = addr.strip_prefix("tcp://").unwrap_or(&addr);
    hostport.parse().unwrap_or_else(|e| {
        eprintln!("peer-h2-raw: bad --listen {addr:?}: {e}");
        std::process::exit(2);
    })
}

fn main() {
    let addr = parse_args();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(addr).await.expect("bind");
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(s) => s,
                // EMFILE and friends: keep serving the connections we have.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(serve(stream));
        }
    });
}

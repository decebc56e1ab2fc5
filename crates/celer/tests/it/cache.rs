//! The micro-cache: coalescing over the wire, shared GET/HEAD entries, TTL
//! and `Age` with paused time, stale-while-revalidate, what is never
//! stored, `Vary`, the LRU byte bound and the entry size limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use celer::middleware::cache::{MAX_VARY_FIELDS, MicroCache};
use celer::{App, Body, Request, Response};
use celer_test_support::{Raw, bounded};
use http::StatusCode;
use http::header::{self, HeaderValue};
use tokio::sync::Semaphore;

use crate::support::{Reply, send_with};
use crate::wire::{Served, curl, python};

/// Counts handler calls and answers `version N` (N counting from 1).
fn counted(
    calls: &Arc<AtomicUsize>,
) -> impl Fn(Request) -> std::future::Ready<String> + Clone + use<> {
    let calls = calls.clone();
    move |_req: Request| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        std::future::ready(format!("version {n}"))
    }
}

async fn get(app: &App, uri: &str, headers: &[(&str, &str)]) -> Reply {
    let mut builder = http::Request::get(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    send_with(app, builder, Body::empty()).await
}

/// Waits (bounded) until `cond` holds on the cache's counters.
async fn until(cache: &MicroCache, cond: impl Fn(&celer::middleware::cache::CacheStats) -> bool) {
    bounded(async {
        while !cond(&cache.stats()) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_hundred_concurrent_misses_make_one_handler_call() {
    let calls = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let cache = MicroCache::new(Duration::from_secs(60));
    let mut app = App::new();
    let (handler_calls, handler_gate) = (calls.clone(), gate.clone());
    app.get("/cold", move |_req: Request| {
        let (calls, gate) = (handler_calls.clone(), handler_gate.clone());
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            // Held until every client has asked.
            let _permit = gate.acquire().await;
            "the one answer"
        }
    })
    .middleware(cache.clone());
    let served = Served::start(app).await;

    let mut clients = Vec::new();
    for _ in 0..100 {
        let addr = served.addr;
        clients.push(tokio::spawn(async move {
            let mut conn = Raw::connect(addr).await;
            conn.send(b"GET /cold HTTP/1.1\r\nHost: x\r\n\r\n").await;
            conn.response_to("GET").await
        }));
    }
    until(&cache, |s| s.misses == 1 && s.coalesced == 99).await;
    gate.add_permits(1);
    for client in clients {
        let res = bounded(client).await.expect("client");
        assert_eq!(res.status, 200);
        assert_eq!(res.text(), "the one answer");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    served.stop().await;
}

#[tokio::test]
async fn get_and_head_share_entries_over_the_wire() {
    let calls = Arc::new(AtomicUsize::new(0));
    let cache = MicroCache::new(Duration::from_secs(60));
    let mut app = App::new();
    app.get("/page", counted(&calls)).middleware(cache.clone());
    let served = Served::start(app).await;
    let url = served.url("/page?x=1");

    // HEAD first: the handler runs as GET, the client gets headers only.
    let head = curl(&["-sI", &url]).await;
    assert!(head.contains("content-length: 9\r\n"), "{head}");
    let body = curl(&[&url]).await;
    assert_eq!(body, "version 1");
    let out = curl(&["-i", &url]).await;
    assert!(out.contains("age: 0\r\n"), "{out}");
    // Another query is another key.
    assert_eq!(curl(&[&served.url("/page?x=2")]).await, "version 2");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(cache.stats().hits, 2);
    served.stop().await;
}

/// A hit carries one `Age` (the cache's, not the handler's) and one
/// `Content-Length`, or none for a status without content; HEAD gets the
/// GET's length.
#[tokio::test]
async fn hits_carry_one_age_and_their_length() {
    let mut app = App::new();
    let cache = MicroCache::new(Duration::from_secs(60));
    app.get("/aged", |_req: Request| async {
        let mut res = Response::new(Body::from("twelve bytes"));
        res.headers_mut()
            .insert(header::AGE, HeaderValue::from_static("99"));
        res
    })
    .middleware(cache.clone());
    app.get("/empty", |_req: Request| async { StatusCode::NO_CONTENT })
        .middleware(cache.clone());
    let count =
        |reply: &Reply, name: header::HeaderName| reply.headers.get_all(name).iter().count();
    for round in 0..3 {
        let reply = get(&app, "/aged", &[]).await;
        assert_eq!(reply.body, "twelve bytes", "round {round}");
        assert_eq!(reply.header("age"), Some("0"), "round {round}");
        assert_eq!(count(&reply, header::AGE), 1, "round {round}");
        assert_eq!(reply.header("content-length"), Some("12"), "round {round}");
        assert_eq!(count(&reply, header::CONTENT_LENGTH), 1, "round {round}");
        let reply = get(&app, "/empty", &[]).await;
        assert_eq!(reply.status, StatusCode::NO_CONTENT, "round {round}");
        assert_eq!(count(&reply, header::CONTENT_LENGTH), 0, "round {round}");
        assert_eq!(count(&reply, header::AGE), 1, "round {round}");
    }
    let head = send_with(&app, http::Request::head("/aged"), Body::empty()).await;
    assert_eq!(
        (head.body.as_str(), head.header("content-length")),
        ("", Some("12"))
    );
    assert_eq!(cache.stats().hits, 5);
}

#[tokio::test(start_paused = true)]
async fn entries_expire_after_the_ttl_and_carry_their_age() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut app = App::new();
    app.get("/t", counted(&calls))
        .middleware(MicroCache::new(Duration::from_secs(5)));
    assert_eq!(get(&app, "/t", &[]).await.body, "version 1");
    tokio::time::advance(Duration::from_secs(3)).await;
    let reply = get(&app, "/t", &[]).await;
    assert_eq!(
        (reply.body.as_str(), reply.header("age")),
        ("version 1", Some("3"))
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    let reply = get(&app, "/t", &[]).await;
    assert_eq!(
        (reply.body.as_str(), reply.header("age")),
        ("version 2", Some("0"))
    );
}

#[tokio::test(start_paused = true)]
async fn stale_entries_are_served_while_one_refresh_runs() {
    let calls = Arc::new(AtomicUsize::new(0));
    let cache =
        MicroCache::new(Duration::from_secs(1)).stale_while_revalidate(Duration::from_secs(10));
    let mut app = App::new();
    app.get("/s", counted(&calls)).middleware(cache.clone());
    assert_eq!(get(&app, "/s", &[]).await.body, "version 1");
    tokio::time::advance(Duration::from_secs(2)).await;
    for _ in 0..3 {
        let reply = get(&app, "/s", &[]).await;
        assert_eq!(
            (reply.body.as_str(), reply.header("age")),
            ("version 1", Some("2"))
        );
    }
    until(&cache, |s| s.entries == 1 && s.refreshes == 1).await;
    // Let the refresh finish.
    bounded(async {
        while get(&app, "/s", &[]).await.body != "version 2" {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(cache.stats().refreshes, 1);
    // Past the stale window an entry is a plain miss.
    tokio::time::advance(Duration::from_secs(20)).await;
    assert_eq!(get(&app, "/s", &[]).await.body, "version 3");
}

#[tokio::test]
async fn private_uncacheable_and_credentialed_responses_are_not_stored() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut app = App::new();
    let cache = MicroCache::new(Duration::from_secs(60));
    let base = counted(&calls);
    let with_header = |name: &'static str, value: &'static str| {
        let base = base.clone();
        move |req: Request| {
            let base = base.clone();
            async move {
                let mut res = celer::response::text(base(req).await);
                res.headers_mut()
                    .append(name, HeaderValue::from_static(value));
                res
            }
        }
    };
    app.get("/cookie", with_header("set-cookie", "a=b"))
        .middleware(cache.clone());
    app.get(
        "/private",
        with_header("cache-control", "max-age=60, Private"),
    )
    .middleware(cache.clone());
    app.get("/no-store", with_header("cache-control", "no-store"))
        .middleware(cache.clone());
    app.get("/star", with_header("vary", "*"))
        .middleware(cache.clone());
    app.get("/plain", counted(&calls)).middleware(cache.clone());
    let failing = calls.clone();
    app.get("/error", move |_req: Request| {
        failing.fetch_add(1, Ordering::SeqCst);
        async { StatusCode::INTERNAL_SERVER_ERROR }
    })
    .middleware(cache.clone());
    for path in ["/cookie", "/private", "/no-store", "/star", "/error"] {
        let before = calls.load(Ordering::SeqCst);
        get(&app, path, &[]).await;
        get(&app, path, &[]).await;
        assert_eq!(calls.load(Ordering::SeqCst), before + 2, "{path}");
    }
    let before = calls.load(Ordering::SeqCst);
    get(&app, "/plain", &[("authorization", "Bearer x")]).await;
    get(&app, "/plain", &[("range", "bytes=0-1")]).await;
    assert_eq!(calls.load(Ordering::SeqCst), before + 2);
    assert_eq!(cache.stats().entries, 0);
}

#[tokio::test]
async fn responses_are_keyed_by_the_fields_they_vary_on() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut app = App::new();
    let counter = calls.clone();
    app.get("/hello", move |req: Request| {
        counter.fetch_add(1, Ordering::SeqCst);
        let lang = req.headers().get("accept-language").cloned();
        async move {
            let text = match lang.as_ref().map(|v| v.as_bytes()) {
                Some(b"fr") => "bonjour",
                _ => "hello",
            };
            let mut res = celer::response::text(text);
            res.headers_mut()
                .insert(header::VARY, HeaderValue::from_static("Accept-Language"));
            res
        }
    })
    .middleware(MicroCache::new(Duration::from_secs(60)));
    let served = Served::start(app).await;
    let script = r#"
import sys, http.client
conn = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=5)
for lang in ["en", "fr", "en", "fr", None]:
    conn.request("GET", "/hello", headers={"Accept-Language": lang} if lang else {})
    r = conn.getresponse()
    print(lang, r.read().decode(), r.getheader("age"))
"#;
    let port = served.addr.port().to_string();
    let out = python(script, &["127.0.0.1", &port]).await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "en hello 0",
            "fr bonjour 0",
            "en hello 0",
            "fr bonjour 0",
            "None hello 0"
        ]
    );
    // en, fr, and no header at all: three variants, two hits.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    served.stop().await;
}

#[tokio::test]
async fn the_byte_bound_evicts_the_least_recently_used() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    // Each entry is charged about 1.4 KiB: two fit in 3,000 bytes, three do not.
    let cache = MicroCache::new(Duration::from_secs(60)).max_bytes(3000);
    let mut app = App::new();
    app.get("/<name>", move |_req: Request| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { "x".repeat(1000) }
    })
    .middleware(cache.clone());
    for path in ["/a", "/b", "/a", "/c"] {
        get(&app, path, &[]).await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let stats = cache.stats();
    assert_eq!((stats.entries, stats.evictions), (2, 1));
    assert!(stats.bytes <= 3000, "{stats:?}");
    // /b was the least recently used: gone; /a stays.
    get(&app, "/a", &[]).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    get(&app, "/b", &[]).await;
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn bodies_over_the_entry_limit_stream_through_uncached() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let cache = MicroCache::new(Duration::from_secs(60)).max_entry_bytes(4096);
    let mut app = App::new();
    app.get("/len/<int:n>", move |req: Request| {
        counter.fetch_add(1, Ordering::SeqCst);
        let n: usize = req.param("n").unwrap_or(0);
        async move {
            // A stream of unknown size: the cache finds out while reading.
            let chunks = (0..n).map(|_| Ok::<_, std::io::Error>("y".repeat(1024)));
            Response::new(Body::from_stream(futures_util::stream::iter(chunks)))
        }
    })
    .middleware(cache.clone());
    let served = Served::start(app).await;
    for _ in 0..2 {
        let body = curl(&[&served.url("/len/64")]).await;
        assert_eq!(body.len(), 64 * 1024);
        let body = curl(&[&served.url("/len/4")]).await;
        assert_eq!(body.len(), 4 * 1024);
    }
    // 64 KiB twice (uncached), 4 KiB (exactly the limit) once.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(cache.stats().entries, 1);
    served.stop().await;
}

#[tokio::test]
async fn a_cancelled_miss_hands_over_to_a_waiting_request() {
    let calls = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let cache = MicroCache::new(Duration::from_secs(60));
    let mut app = App::new();
    let (counter, held) = (calls.clone(), gate.clone());
    app.get("/slow", move |_req: Request| {
        let (counter, held) = (counter.clone(), held.clone());
        async move {
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            let _permit = held.acquire().await;
            format!("call {n}")
        }
    })
    .middleware(cache.clone());
    let first = {
        let app = app.clone();
        tokio::spawn(async move { get(&app, "/slow", &[]).await })
    };
    until(&cache, |s| s.misses == 1).await;
    let second = {
        let app = app.clone();
        tokio::spawn(async move { get(&app, "/slow", &[]).await })
    };
    until(&cache, |s| s.coalesced == 1).await;
    first.abort();
    until(&cache, |s| s.misses == 2).await;
    gate.add_permits(1);
    let reply = bounded(second).await.expect("second request");
    assert_eq!(reply.body, "call 2");
}

#[tokio::test]
async fn responses_varying_on_too_many_fields_are_not_stored() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut app = App::new();
    let counter = calls.clone();
    app.get("/vary/<int:n>", move |req: Request| {
        counter.fetch_add(1, Ordering::SeqCst);
        let n: usize = req.param("n").unwrap_or(0);
        async move {
            let mut res = celer::response::text("varied");
            for i in 0..n {
                let name = format!("x-field-{i}");
                res.headers_mut()
                    .append(header::VARY, HeaderValue::try_from(name).unwrap());
            }
            res
        }
    })
    .middleware(MicroCache::new(Duration::from_secs(60)));
    let at_limit = format!("/vary/{MAX_VARY_FIELDS}");
    let over = format!("/vary/{}", MAX_VARY_FIELDS + 1);
    for path in [&at_limit, &at_limit, &over, &over] {
        assert_eq!(get(&app, path, &[]).await.body, "varied");
    }
    // One call for the limit (then a hit), two for one over it.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn matching_validators_get_304_from_the_entry() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut app = App::new();
    let counter = calls.clone();
    app.get("/tagged", move |req: Request| {
        counter.fetch_add(1, Ordering::SeqCst);
        // The handler never sees a condition: it would answer 304 itself.
        assert!(req.headers().get("if-none-match").is_none());
        async {
            let mut res = celer::response::text("tagged body");
            res.headers_mut()
                .insert(header::ETAG, HeaderValue::from_static("\"v1\""));
            res.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=1"));
            res
        }
    })
    .middleware(MicroCache::new(Duration::from_secs(60)));
    // Cold key with a condition: the entry is filled, the client gets 304.
    let reply = get(&app, "/tagged", &[("if-none-match", "\"v1\"")]).await;
    assert_eq!(reply.status, StatusCode::NOT_MODIFIED);
    assert_eq!(
        (reply.body.as_str(), reply.header("etag")),
        ("", Some("\"v1\""))
    );
    assert_eq!(reply.header("cache-control"), Some("max-age=1"));
    for (condition, status) in [
        ("W/\"v1\"", StatusCode::NOT_MODIFIED),
        ("\"v0\", \"v1\"", StatusCode::NOT_MODIFIED),
        ("*", StatusCode::NOT_MODIFIED),
        ("\"v2\"", StatusCode::OK),
    ] {
        let reply = get(&app, "/tagged", &[("if-none-match", condition)]).await;
        assert_eq!(reply.status, status, "{condition}");
        assert_eq!(reply.header("age"), Some("0"), "{condition}");
    }
    assert_eq!(get(&app, "/tagged", &[]).await.body, "tagged body");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

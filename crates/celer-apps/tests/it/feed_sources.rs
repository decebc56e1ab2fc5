//! The feed sources against real peers: a redis-server started by the
//! test (keyspace notifications, pub/sub, a value over the limit, the
//! server's loss), an upstream celer app over HTTP and HTTPS (304s,
//! failures, a timeout), and a file changed in place.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use celer::feed::Feed;
use celer::serve::{Listen, Server, Shutdown, TlsConfig};
use celer::{App, Request};
use celer_apps::feed::{FileSource, HttpSource, RedisSource, RedisSpec};
use celer_test_support::bounded;
use http::StatusCode;

/// Waits (bounded) until `cond` holds.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(celer_test_support::TEST_TIMEOUT, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "never happened: {what}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// ---- Redis ----

/// A redis-server on a free loopback port, killed when dropped.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    async fn start(keyspace_events: &str) -> Redis {
        let port = free_port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--notify-keyspace-events",
                keyspace_events,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/test installs it)");
        let redis = Redis { child, port };
        bounded(async {
            while tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        redis
    }

    /// Runs `redis-cli -p PORT ARGS...`.
    async fn cli(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("redis-cli");
        cmd.args(["-p", &self.port.to_string()]).args(args);
        let out = tokio::task::spawn_blocking(move || celer_test_support::run_tool(&mut cmd))
            .await
            .unwrap();
        assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    fn spec(&self, key: &str) -> RedisSpec {
        RedisSpec::parse(&format!("redis://127.0.0.1:{}/{key}", self.port)).unwrap()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_keyspace_notifications_refresh_the_feed_at_once() {
    let redis = Redis::start("K$").await;
    // An interval far longer than the test: only notifications refresh.
    let feed = Feed::builder("scores")
        .interval(Duration::from_secs(3600))
        .max_document_bytes(1024)
        .build();
    let task = feed.spawn(RedisSource::new(redis.spec("scores")));
    // The first read finds no key: a failure, nothing served.
    eventually("the missing key reported", || {
        feed.status().source_failures == 1
    })
    .await;
    assert!(
        feed.status()
            .last_error
            .unwrap()
            .contains("no key \"scores\"")
    );
    assert!(feed.current().is_none());

    redis.cli(&["SET", "scores", r#"{"home": 1}"#]).await;
    eventually("version 1", || feed.status().version == 1).await;
    assert_eq!(feed.status().health, "ok");
    redis.cli(&["SET", "scores", r#"{"home": 2}"#]).await;
    eventually("version 2", || feed.status().version == 2).await;
    assert_eq!(&feed.current().unwrap().bytes()[..], br#"{"home": 2}"#);

    // Not JSON: refused, the last good version stays.
    redis.cli(&["SET", "scores", r#"{"home": 3"#]).await;
    eventually("the refusal", || feed.status().rejected_invalid == 1).await;
    assert_eq!(&feed.current().unwrap().bytes()[..], br#"{"home": 2}"#);

    // Over the limit: refused while it is read, the last good version stays.
    let big = format!(r#"{{"pad": "{}"}}"#, "x".repeat(2000));
    redis.cli(&["SET", "scores", &big]).await;
    eventually("the large value reported", || {
        feed.status()
            .last_error
            .is_some_and(|e| e.contains("over the limit of 1024"))
    })
    .await;
    assert_eq!(&feed.current().unwrap().bytes()[..], br#"{"home": 2}"#);
    redis.cli(&["SET", "scores", r#"{"home": 4}"#]).await;
    eventually("version 3", || feed.status().version == 3).await;
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_on_the_key_channel_refreshes_without_keyspace_events() {
    let redis = Redis::start("").await;
    let feed = Feed::builder("scores")
        .interval(Duration::from_secs(3600))
        .build();
    redis.cli(&["SET", "scores", "[1]"]).await;
    let task = feed.spawn(RedisSource::new(redis.spec("scores")));
    eventually("version 1", || feed.status().version == 1).await;
    redis.cli(&["SET", "scores", "[2]"]).await;
    // Subscribed, the source waits for a message; the writer's PUBLISH
    // is one.
    redis.cli(&["PUBLISH", "scores", "changed"]).await;
    eventually("version 2", || feed.status().version == 2).await;
    assert_eq!(&feed.current().unwrap().bytes()[..], b"[2]");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_redis_server_keeps_the_last_good_version() {
    let mut redis = Redis::start("").await;
    redis.cli(&["SET", "k", r#"{"ok": true}"#]).await;
    let feed = Feed::builder("k")
        .interval(Duration::from_millis(50))
        .build();
    let task = feed.spawn(RedisSource::new(redis.spec("k")));
    eventually("version 1", || feed.status().version == 1).await;
    redis.kill();
    eventually("the loss reported", || feed.status().health == "failing").await;
    let status = feed.status();
    assert_eq!(status.source_failures, 1);
    assert_eq!(status.version, 1);
    assert_eq!(&feed.current().unwrap().bytes()[..], br#"{"ok": true}"#);
    // Still failing after more intervals: one outage, counted once.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(feed.status().source_failures, 1);
    task.abort();
}

// ---- HTTP ----

/// What the upstream app answers, changed by the test.
#[derive(Debug, Clone)]
struct Upstream {
    doc: String,
    status: Option<StatusCode>,
    delay: Duration,
    not_modified: u64,
}

fn upstream_app(state: Arc<Mutex<Upstream>>) -> App {
    let mut app = App::new();
    app.get("/doc", move |req: Request| {
        let state = state.clone();
        async move {
            let now = state.lock().unwrap().clone();
            tokio::time::sleep(now.delay).await;
            if let Some(status) = now.status {
                return http::Response::builder()
                    .status(status)
                    .body(celer::Body::from("down"))
                    .unwrap();
            }
            let etag = format!("\"{}\"", celer::feed::content_id(now.doc.as_bytes()));
            let res = http::Response::builder().header("etag", &etag);
            if req
                .headers()
                .get("if-none-match")
                .is_some_and(|v| v == etag.as_str())
            {
                state.lock().unwrap().not_modified += 1;
                return res.status(304).body(celer::Body::empty()).unwrap();
            }
            res.body(celer::Body::from(now.doc)).unwrap()
        }
    });
    app
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_is_polled_with_if_none_match_and_its_failures_reported() {
    let state = Arc::new(Mutex::new(Upstream {
        doc: r#"{"v": 1}"#.to_owned(),
        status: None,
        delay: Duration::ZERO,
        not_modified: 0,
    }));
    let server = celer::test::TestServer::start(upstream_app(state.clone())).await;
    let feed = Feed::builder("up")
        .interval(Duration::from_millis(30))
        .max_document_bytes(1024)
        .build();
    let source = HttpSource::new(&server.url("/doc"))
        .unwrap()
        .timeout(Duration::from_millis(500));
    let task = feed.spawn(source);
    eventually("version 1", || feed.status().version == 1).await;
    // Unchanged: answered 304, nothing new.
    eventually("two 304s", || state.lock().unwrap().not_modified >= 2).await;
    assert_eq!(feed.status().version, 1);

    state.lock().unwrap().doc = r#"{"v": 2}"#.to_owned();
    eventually("version 2", || feed.status().version == 2).await;

    state.lock().unwrap().status = Some(StatusCode::INTERNAL_SERVER_ERROR);
    eventually("the 500 reported", || feed.status().health == "failing").await;
    assert!(feed.status().last_error.unwrap().contains("answered 500"));
    assert_eq!(&feed.current().unwrap().bytes()[..], br#"{"v": 2}"#);

    {
        let mut up = state.lock().unwrap();
        up.status = None;
        up.doc = format!(r#"{{"pad": "{}"}}"#, "x".repeat(2000));
    }
    eventually("the large body reported", || {
        feed.status()
            .last_error
            .is_some_and(|e| e.contains("over the limit of 1024"))
    })
    .await;
    {
        let mut up = state.lock().unwrap();
        up.doc = r#"{"v": 3}"#.to_owned();
        up.delay = Duration::from_secs(3);
    }
    eventually("the timeout reported", || {
        feed.status()
            .last_error
            .is_some_and(|e| e.contains("no answer within 500ms"))
    })
    .await;
    assert_eq!(&feed.current().unwrap().bytes()[..], br#"{"v": 2}"#);
    state.lock().unwrap().delay = Duration::ZERO;
    eventually("version 3", || feed.status().version == 3).await;
    assert_eq!(feed.status().health, "ok");
    task.abort();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_upstream_is_trusted_through_its_ca() {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let tls = TlsConfig::builder()
        .cert_files(&cert, &key)
        .build()
        .unwrap();
    let bound = Server::builder()
        .listen_tls(Listen::parse("tcp://127.0.0.1:0").unwrap())
        .tls(tls)
        .workers(1)
        .bind()
        .unwrap();
    let port = bound.tcp_addr().unwrap().port();
    let shutdown = Shutdown::new();
    let state = Arc::new(Mutex::new(Upstream {
        doc: "[1, 2, 3]".to_owned(),
        status: None,
        delay: Duration::ZERO,
        not_modified: 0,
    }));
    let server = tokio::spawn(upstream_app(state).serve(bound, shutdown.clone()));
    let url = format!("https://localhost:{port}/doc");

    let trusted = Feed::builder("t")
        .interval(Duration::from_millis(30))
        .build();
    let source = HttpSource::new(&url)
        .unwrap()
        .root_certificates_pem(certified.cert.pem().as_bytes())
        .unwrap();
    let task = trusted.spawn(source);
    eventually("version 1 over TLS", || trusted.status().version == 1).await;
    assert_eq!(&trusted.current().unwrap().bytes()[..], b"[1, 2, 3]");
    task.abort();

    // Without the CA the certificate is refused.
    let untrusted = Feed::builder("u")
        .interval(Duration::from_millis(30))
        .build();
    let task = untrusted.spawn(HttpSource::new(&url).unwrap());
    eventually("the refusal", || untrusted.status().health == "failing").await;
    let error = untrusted.status().last_error.unwrap();
    assert!(error.contains("TLS handshake failed"), "{error}");
    assert!(untrusted.current().is_none());
    task.abort();
    shutdown.trigger();
    bounded(server).await.unwrap().unwrap();

    assert!(
        HttpSource::new("https://x/")
            .unwrap()
            .root_certificates_pem(b"nothing")
            .is_err()
    );
    assert!(HttpSource::new("ftp://x/").is_err());
}

// ---- files ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_written_in_place_is_seen_and_a_missing_one_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("doc.json");
    // An interval far longer than the test: inotify alone tells.
    let feed = Feed::builder("f")
        .interval(Duration::from_secs(3600))
        .build();
    let task = feed.spawn(FileSource::new(&path));
    eventually("the missing file reported", || {
        feed.status().health == "failing"
    })
    .await;
    std::fs::write(&path, "[1]").unwrap();
    eventually("version 1", || feed.status().version == 1).await;
    std::fs::write(&path, "[1, 2]").unwrap();
    eventually("version 2", || feed.status().version == 2).await;
    assert_eq!(&feed.current().unwrap().bytes()[..], b"[1, 2]");
    assert_eq!(feed.status().source, format!("file:{}", path.display()));
    task.abort();
}

//! Wire tests: apps served by `App::serve` on loopback, driven with raw TCP
//! and with curl.

use std::net::SocketAddr;
use std::process::Command;

use celer::response::{Json, Redirect};
use celer::serve::Shutdown;
use celer::{App, Next, Request, Response};
use celer_test_support::{Raw, Resp, bounded, parse_all, run_tool};
use http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

/// A running server; dropping it does not stop it, [`Served::stop`] does.
pub(crate) struct Served {
    pub(crate) addr: SocketAddr,
    shutdown: Shutdown,
    task: JoinHandle<std::io::Result<()>>,
}

impl Served {
    pub(crate) async fn start(app: App) -> Served {
        let bound = celer::serve::bind("tcp://127.0.0.1:0").expect("bind");
        let addr = bound.tcp_addr().expect("tcp address");
        let shutdown = Shutdown::new();
        let task = tokio::spawn(app.serve(bound, shutdown.clone()));
        Served {
            addr,
            shutdown,
            task,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// One request on a fresh connection that the request asks to close.
    pub(crate) async fn one(&self, head: &str, body: &[u8]) -> Resp {
        let mut req = head.replace('\n', "\r\n").into_bytes();
        req.extend_from_slice(body);
        let mut conn = Raw::connect(self.addr).await;
        conn.send(&req).await;
        let method = head.split(' ').next().unwrap_or("GET");
        conn.response_to(method).await
    }

    pub(crate) async fn stop(self) {
        self.shutdown.trigger();
        bounded(self.task).await.expect("join").expect("serve");
    }
}

/// Runs `python3 -c script args...` off the runtime's thread and returns
/// its stdout; a failing script fails the test with its stderr.
pub(crate) async fn python(script: &str, args: &[&str]) -> String {
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(script).args(args);
    let out = tokio::task::spawn_blocking(move || run_tool(&mut cmd))
        .await
        .expect("python thread");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 from python")
}

/// Runs curl with `args` off the runtime's thread and returns its stdout.
pub(crate) async fn curl(args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let out = tokio::task::spawn_blocking(move || {
        run_tool(
            Command::new("curl")
                .args(["-sS", "--max-time", "5"])
                .args(&args),
        )
    })
    .await
    .expect("curl thread");
    assert!(
        out.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 from curl")
}

fn app() -> App {
    let mut app = App::new();
    app.get("/hello", |_req: Request| async { "Hello, World!" });
    app.get("/items", |_req: Request| async { "[]" });
    app.post("/items", |_req: Request| async { StatusCode::CREATED });
    app
}

#[tokio::test]
async fn head_should_send_get_headers_and_length_without_body() {
    let served = Served::start(app()).await;
    let mut conn = Raw::connect(served.addr).await;
    // HEAD then GET on one connection: a body leaked by HEAD would be read
    // as the start of the second response.
    conn.send(b"HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
        .await;
    let head = conn.response_to("HEAD").await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("13"));
    assert_eq!(
        head.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let get = conn.response().await;
    assert_eq!(get.status, 200);
    assert_eq!(get.text(), "Hello, World!");
    assert!(conn.buffered().is_empty());
    // The server lingers on a connection the client keeps open; close it so
    // that `stop` does not wait for the linger.
    drop(conn);

    let out = curl(&["-I", &served.url("/hello")]).await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(
        out.to_ascii_lowercase().contains("content-length: 13"),
        "{out}"
    );
    served.stop().await;
}

#[tokio::test]
async fn options_and_405_should_list_allowed_methods() {
    let served = Served::start(app()).await;
    let options = served
        .one(
            "OPTIONS /items HTTP/1.1\nHost: t\nConnection: close\n\n",
            b"",
        )
        .await;
    assert_eq!(options.status, 200);
    assert_eq!(options.header("allow"), Some("GET, HEAD, POST, OPTIONS"));
    assert_eq!(options.header("content-length"), Some("0"));

    let delete = served
        .one(
            "DELETE /items HTTP/1.1\nHost: t\nConnection: close\n\n",
            b"",
        )
        .await;
    assert_eq!(delete.status, 405);
    assert_eq!(delete.header("allow"), Some("GET, HEAD, POST, OPTIONS"));

    let out = curl(&["-i", "-X", "PUT", &served.url("/hello")]).await;
    assert!(out.starts_with("HTTP/1.1 405"), "{out}");
    assert!(
        out.to_ascii_lowercase()
            .contains("allow: get, head, options"),
        "{out}"
    );
    let missing = served
        .one("GET /nowhere HTTP/1.1\nHost: t\nConnection: close\n\n", b"")
        .await;
    assert_eq!(missing.status, 404);
    served.stop().await;
}

#[tokio::test]
async fn options_asterisk_should_describe_the_whole_server() {
    let served = Served::start(app()).await;
    let resp = served
        .one("OPTIONS * HTTP/1.1\nHost: t\nConnection: close\n\n", b"")
        .await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("allow"), Some("GET, HEAD, POST, OPTIONS"));

    let out = curl(&[
        "-i",
        "-X",
        "OPTIONS",
        "--request-target",
        "*",
        &served.url(""),
    ])
    .await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    served.stop().await;
}

#[tokio::test]
async fn next_should_fall_through_to_the_next_matching_route() {
    let mut app = App::new();
    app.get("/files/<int:id>", |req: Request, next: Next| async move {
        if req.param::<i64>("id").unwrap_or(0) > 100 {
            return next.run(req).await;
        }
        Response::new(celer::Body::from("small int"))
    });
    app.get("/files/<name>", |req: Request| async move {
        format!("name {}", req.param_str("name").unwrap_or_default())
    });
    let served = Served::start(app).await;
    let mut conn = Raw::connect(served.addr).await;
    conn.send(
        b"GET /files/7 HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /files/700 HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /files/a%20b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    let replies = parse_all(&conn.read_to_close().await);
    drop(conn);
    let texts: Vec<String> = replies.iter().map(Resp::text).collect();
    assert_eq!(texts, ["small int", "name 700", "name a b"]);
    served.stop().await;
}

#[tokio::test]
async fn scopes_should_prefix_routes_and_run_their_middleware() {
    let mut app = App::new();
    app.scope("/admin", |admin| {
        admin.middleware(|req: Request, next: Next| async move {
            let mut res = next.run(req).await;
            res.headers_mut()
                .insert("x-scope", http::HeaderValue::from_static("admin"));
            res
        });
        admin.scope("/users", |users| {
            users.get("/<int:id>", |req: Request| async move {
                format!("user {}", req.param::<i64>("id").unwrap_or(-1))
            });
        });
    });
    app.get("/users/<int:id>", |_req: Request| async { "public" });
    let served = Served::start(app).await;

    let admin = served
        .one(
            "GET /admin/users/42 HTTP/1.1\nHost: t\nConnection: close\n\n",
            b"",
        )
        .await;
    assert_eq!(admin.text(), "user 42");
    assert_eq!(admin.header("x-scope"), Some("admin"));

    let out = curl(&["-i", &served.url("/users/42")]).await;
    assert!(out.ends_with("public"), "{out}");
    assert!(!out.contains("x-scope"), "{out}");
    served.stop().await;
}

#[tokio::test]
async fn url_for_locations_should_route_back_over_the_wire() {
    let mut app = App::new();
    app.scope("/blog/<int:year>", |blog| {
        blog.get("/<slug>", |req: Request| async move {
            let params: Vec<String> = req.params().map(|(k, v)| format!("{k}={v}")).collect();
            params.join("&")
        })
        .name("post");
    });
    app.post("/publish", |req: Request| async move {
        let url = req.url_for("post", &[("year", &2024), ("slug", &"a b/é?#%")])?;
        Ok::<_, celer::Error>(Redirect::see_other(url))
    });
    let served = Served::start(app).await;

    let publish = served
        .one(
            "POST /publish HTTP/1.1\nHost: t\nContent-Length: 0\nConnection: close\n\n",
            b"",
        )
        .await;
    assert_eq!(publish.status, 303);
    let location = publish.header("location").expect("location").to_owned();
    let back = served
        .one(
            &format!("GET {location} HTTP/1.1\nHost: t\nConnection: close\n\n"),
            b"",
        )
        .await;
    assert_eq!(back.status, 200);
    assert_eq!(back.text(), "year=2024&slug=a b/é?#%");

    // curl follows the 303 with a GET to the same place.
    let out = curl(&["-L", "-d", "", &served.url("/publish")]).await;
    assert_eq!(out, "year=2024&slug=a b/é?#%");
    served.stop().await;
}

fn echo_app() -> App {
    let mut app = App::new();
    app.body_limit(16);
    app.post("/echo", |mut req: Request| async move {
        let bytes = req.bytes().await?;
        Ok::<_, celer::Error>(bytes)
    });
    app
}

#[tokio::test]
async fn body_limit_should_answer_413_for_declared_lengths() {
    let served = Served::start(echo_app()).await;
    let head = "POST /echo HTTP/1.1\nHost: t\nConnection: close\nContent-Length: ";
    let at_limit = served.one(&format!("{head}16\n\n"), &[b'a'; 16]).await;
    assert_eq!(at_limit.status, 200);
    assert_eq!(at_limit.body, [b'a'; 16]);

    let over = served.one(&format!("{head}17\n\n"), &[b'a'; 17]).await;
    assert_eq!(over.status, 413);

    let out = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--data-binary",
        "12345678901234567",
        &served.url("/echo"),
    ])
    .await;
    assert_eq!(out, "413");
    served.stop().await;
}

#[tokio::test]
async fn body_limit_should_answer_413_for_chunked_bodies() {
    let served = Served::start(echo_app()).await;
    let head = "POST /echo HTTP/1.1\nHost: t\nConnection: close\nTransfer-Encoding: chunked\n\n";
    let at_limit = served
        .one(head, b"8\r\naaaaaaaa\r\n8\r\nbbbbbbbb\r\n0\r\n\r\n")
        .await;
    assert_eq!(at_limit.status, 200);
    assert_eq!(at_limit.text(), "aaaaaaaabbbbbbbb");

    let over = served
        .one(head, b"8\r\naaaaaaaa\r\n9\r\nbbbbbbbbb\r\n0\r\n\r\n")
        .await;
    assert_eq!(over.status, 413);

    let out = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        "12345678901234567",
        &served.url("/echo"),
    ])
    .await;
    assert_eq!(out, "413");
    served.stop().await;
}

#[derive(serde::Deserialize, serde::Serialize)]
struct Item {
    name: String,
}

#[tokio::test]
async fn json_of_the_wrong_shape_should_answer_422() {
    let mut app = App::new();
    app.post("/items", |mut req: Request| async move {
        let item: Item = req.json().await?;
        Ok::<_, celer::Error>((StatusCode::CREATED, Json(item)))
    });
    let served = Served::start(app).await;
    let head = "POST /items HTTP/1.1\nHost: t\nConnection: close\nContent-Type: application/json\nContent-Length: ";
    let created = served
        .one(&format!("{head}14\n\n"), br#"{"name":"pen"}"#)
        .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.header("content-type"), Some("application/json"));
    assert_eq!(created.text(), r#"{"name":"pen"}"#);

    let wrong = served.one(&format!("{head}10\n\n"), br#"{"name":5}"#).await;
    assert_eq!(wrong.status, 422);
    let broken = served.one(&format!("{head}9\n\n"), br#"{"name":}"#).await;
    assert_eq!(broken.status, 400);

    let out = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        "Content-Type: application/json",
        "--data",
        r#"{"title":"x"}"#,
        &served.url("/items"),
    ])
    .await;
    assert_eq!(out, "422");
    served.stop().await;
}

#[tokio::test]
async fn handlers_should_see_the_client_and_server_addresses() {
    let mut app = App::new();
    app.get("/whoami", |req: Request| async move {
        format!("{:?} {:?}", req.remote_addr(), req.local_addr())
    });
    let served = Served::start(app).await;

    let mut stream = bounded(tokio::net::TcpStream::connect(served.addr))
        .await
        .expect("connect");
    let client = stream.local_addr().expect("client address");
    bounded(stream.write_all(b"GET /whoami HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"))
        .await
        .expect("write");
    let mut bytes = Vec::new();
    bounded(stream.read_to_end(&mut bytes)).await.expect("read");
    drop(stream);
    let replies = parse_all(&bytes);
    assert_eq!(
        replies[0].text(),
        format!("{:?} {:?}", Some(client), Some(served.addr))
    );

    // A second connection is a second client port.
    let out = curl(&[&served.url("/whoami")]).await;
    assert!(out.starts_with("Some(127.0.0.1:"), "{out}");
    assert!(!out.starts_with(&format!("Some({client})")), "{out}");
    served.stop().await;
}

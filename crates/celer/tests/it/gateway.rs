//! `example-rest` behind real front ends: nginx (`fastcgi_pass` with
//! `fastcgi_keep_conn on`, `scgi_pass`), lighttpd (`mod_fastcgi`,
//! `mod_scgi`) and Apache httpd (`mod_proxy_fcgi`, `mod_proxy_scgi`),
//! over UNIX and TCP sockets, answering the same as when
//! served directly. The front ends are started here and stopped by PID.

use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use celer::serve::{Listen, Server, Shutdown};
use celer::{App, Body, Request};
use celer_test_support::{Raw, Resp, bounded};
use tokio::task::JoinHandle;

#[path = "../../../../examples/rest/src/lib.rs"]
#[allow(dead_code, unreachable_pub)]
mod rest;

const DEADLINE: Duration = Duration::from_secs(10);

/// `example-rest` plus two routes that stream: an upload counted as it
/// arrives and a 1 MiB download of unknown length.
fn app() -> App {
    let mut app = rest::app();
    app.post("/upload", |mut req: Request| async move {
        let body = req
            .take_body()
            .collect_bytes()
            .await
            .map_err(|_| celer::Error::status(http::StatusCode::BAD_REQUEST, "body"))?;
        let sum: u64 = body.iter().map(|b| u64::from(*b)).sum();
        Ok::<_, celer::Error>(format!("len={} sum={sum}", body.len()))
    })
    // Above the app's 16 KiB: this route takes the 2 MB upload.
    .body_limit(8 << 20);
    // Hands the answer to the front end (nginx's X-Accel-Redirect).
    app.get("/offload", |_req: Request| async {
        let mut res = celer::Response::new(Body::empty());
        res.headers_mut().insert(
            "x-accel-redirect",
            http::HeaderValue::from_static("/protected/note.txt"),
        );
        res
    });
    // A body that fails half-way: the failure's line reaches the front
    // end's error log through FCGI_STDERR.
    app.get("/fails", |_req: Request| async {
        let chunks = [
            Ok(b"the first part".to_vec()),
            Err(std::io::Error::other("the disk went away")),
        ];
        Body::from_stream(futures_util::stream::iter(chunks))
    });
    app.get("/download", |_req: Request| async {
        let chunks = (0..64u8).map(|i| Ok::<_, std::io::Error>(vec![b'a' + i % 26; 16 * 1024]));
        Body::from_stream(futures_util::stream::iter(chunks))
    });
    app
}

/// The app served on `listen` until dropped through [`Served::stop`].
struct Served {
    shutdown: Shutdown,
    task: JoinHandle<std::io::Result<()>>,
    tcp: Option<SocketAddr>,
}

async fn serve(listen: &str) -> Served {
    let bound = Server::builder()
        .workers(1)
        .listen(Listen::parse(listen).unwrap())
        .bind()
        .expect("bind");
    let tcp = bound.tcp_addr();
    let shutdown = Shutdown::new();
    let task = tokio::spawn(app().serve(bound, shutdown.clone()));
    Served {
        shutdown,
        task,
        tcp,
    }
}

impl Served {
    async fn stop(self) {
        self.shutdown.trigger();
        bounded(self.task).await.expect("join").expect("serve");
    }
}

/// A front end process, stopped by PID on drop.
struct Front {
    child: Child,
    port: u16,
}

impl Drop for Front {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn binary(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| p.exists())
        })
        .unwrap_or_else(|| PathBuf::from("/usr/sbin").join(name))
}

fn start(mut cmd: Command, port: u16, what: &str) -> Front {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} is installed by scripts/test: {e}"));
    let front = Front { child, port };
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < DEADLINE, "{what} did not start listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    front
}

/// Where nginx passes requests: `fastcgi` or `scgi`, to a UNIX path or a
/// TCP address.
fn nginx(dir: &Path, protocol: &str, upstream: &str) -> Front {
    let port = free_port();
    let d = dir.display();
    let pass = match protocol {
        "fastcgi" => {
            "include /etc/nginx/fastcgi_params;\n fastcgi_pass app;\n fastcgi_keep_conn on;\n fastcgi_request_buffering off;\n fastcgi_buffering off;"
        }
        // Not `scgi_request_buffering off`: nginx then sends as
        // CONTENT_LENGTH the bytes it has read so far, not the body's length.
        _ => "include /etc/nginx/scgi_params;\n scgi_pass app;\n scgi_buffering off;",
    };
    // Under /mount/ the app is mounted at a prefix: SCRIPT_NAME is the
    // prefix, PATH_INFO what the app routes on.
    let mount = match protocol {
        "fastcgi" => {
            "fastcgi_split_path_info ^(/mount)(/.*)$;\n include /etc/nginx/fastcgi_params;\n fastcgi_param SCRIPT_NAME $fastcgi_script_name;\n fastcgi_param PATH_INFO $fastcgi_path_info;\n fastcgi_pass app;\n fastcgi_keep_conn on;"
        }
        _ => {
            "include /etc/nginx/scgi_params;\n scgi_param SCRIPT_NAME /mount;\n scgi_param PATH_INFO $mount_path;\n scgi_pass app;"
        }
    };
    let keepalive = if protocol == "fastcgi" {
        "keepalive 4;"
    } else {
        ""
    };
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/nginx-error.log warn;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n access_log off;\n client_body_temp_path {d}/body;\n fastcgi_temp_path {d}/fastcgi;\n scgi_temp_path {d}/scgi;\n\
         proxy_temp_path {d}/proxy;\n uwsgi_temp_path {d}/uwsgi;\n client_max_body_size 8m;\n\
         upstream app {{ server {upstream}; {keepalive} }}\n\
         server {{\n  listen 127.0.0.1:{port};\n\
           location / {{ {pass} }}\n\
           location ~ ^/mount(?<mount_path>/.*)$ {{ {mount} }}\n\
           location /protected/ {{ internal; alias {d}/protected/; }}\n\
         }}\n}}\n"
    );
    let conf_path = dir.join(format!("nginx-{port}.conf"));
    std::fs::write(&conf_path, conf).unwrap();
    let mut cmd = Command::new(binary("nginx"));
    cmd.arg("-e")
        .arg(dir.join("nginx-error.log"))
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&conf_path);
    start(cmd, port, "nginx")
}

/// lighttpd with `mod_fastcgi` or `mod_scgi` passing everything to the app
/// (streaming request and response bodies).
fn lighttpd(dir: &Path, protocol: &str, upstream: &str) -> Front {
    let port = free_port();
    let d = dir.display();
    let target = match upstream.strip_prefix("unix:") {
        Some(path) => format!("\"socket\" => \"{path}\""),
        None => {
            let (host, p) = upstream.rsplit_once(':').unwrap();
            format!("\"host\" => \"{host}\", \"port\" => {p}")
        }
    };
    let conf = format!(
        "server.document-root = \"{d}\"\nserver.bind = \"127.0.0.1\"\nserver.port = {port}\n\
         server.errorlog = \"{d}/lighttpd-error.log\"\nserver.modules = (\"mod_{protocol}\")\n\
         server.stream-request-body = 2\nserver.stream-response-body = 2\nserver.max-request-size = 8192\n\
         {protocol}.server = (\"/\" => ((\n {target},\n \"check-local\" => \"disable\",\n \"fix-root-scriptname\" => \"enable\"\n)))\n"
    );
    let conf_path = dir.join(format!("lighttpd-{port}.conf"));
    std::fs::write(&conf_path, conf).unwrap();
    let mut cmd = Command::new(binary("lighttpd"));
    cmd.arg("-D").arg("-f").arg(&conf_path);
    start(cmd, port, "lighttpd")
}

/// Apache httpd (one process, `-X`) with `mod_proxy_fcgi` or
/// `mod_proxy_scgi` passing everything to the app at a TCP address or a
/// UNIX socket (`unix:PATH`).
fn apache(dir: &Path, protocol: &str, upstream: &str) -> Front {
    let port = free_port();
    let d = dir.display();
    let m = "/usr/lib/apache2/modules";
    let scheme = if protocol == "fastcgi" {
        "fcgi"
    } else {
        "scgi"
    };
    let module = if protocol == "fastcgi" {
        "proxy_fcgi"
    } else {
        "proxy_scgi"
    };
    let reuse = if protocol == "fastcgi" {
        " enablereuse=on"
    } else {
        ""
    };
    let conf = [
        format!("LoadModule mpm_event_module {m}/mod_mpm_event.so"),
        format!("LoadModule authz_core_module {m}/mod_authz_core.so"),
        format!("LoadModule proxy_module {m}/mod_proxy.so"),
        format!("LoadModule {module}_module {m}/mod_{module}.so"),
        "ServerName localhost".to_owned(),
        format!("Listen 127.0.0.1:{port}"),
        format!("PidFile {d}/apache-{port}.pid"),
        format!("ErrorLog {d}/apache-error.log"),
        format!("DefaultRuntimeDir {d}"),
        "User www-data\nGroup www-data".to_owned(),
        format!("DocumentRoot {d}"),
        // A UNIX socket is named before the scheme, the host after it a
        // placeholder (mod_proxy's `unix:PATH|fcgi://localhost/`).
        match upstream.strip_prefix("unix:") {
            Some(path) => {
                format!("ProxyPass \"/\" \"unix:{path}|{scheme}://localhost/\"{reuse}")
            }
            None => format!("ProxyPass \"/\" \"{scheme}://{upstream}/\"{reuse}"),
        },
    ]
    .join("\n");
    let conf_path = dir.join(format!("apache-{port}.conf"));
    std::fs::write(&conf_path, conf).unwrap();
    let mut cmd = Command::new(binary("apache2"));
    cmd.arg("-X").arg("-f").arg(&conf_path);
    start(cmd, port, "apache2")
}

/// One row: a request and what must match the direct answer.
struct Row {
    method: &'static str,
    path: &'static str,
    headers: &'static str,
    body: Vec<u8>,
    /// Header fields compared with the direct answer.
    fields: &'static [&'static str],
}

fn json(method: &'static str, path: &'static str, body: &str) -> Row {
    Row {
        method,
        path,
        headers: "content-type: application/json\n",
        body: body.as_bytes().to_vec(),
        fields: &["content-type", "location", "content-length"],
    }
}

fn plain(method: &'static str, path: &'static str) -> Row {
    Row {
        method,
        path,
        headers: "",
        body: Vec::new(),
        fields: &["content-type", "allow", "content-length"],
    }
}

fn rows() -> Vec<Row> {
    let upload: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
    vec![
        plain("GET", "/items"),
        json("POST", "/items", r#"{"name":"milk","done":false}"#),
        json("POST", "/items", r#"{"name":"eggs","done":true}"#),
        plain("GET", "/items/1"),
        plain("GET", "/items?done=true"),
        plain("HEAD", "/items/1"),
        json("PATCH", "/items/2", r#"{"done":false}"#),
        plain("DELETE", "/items/1"),
        plain("GET", "/items/1"),
        plain("GET", "/items/x"),
        plain("DELETE", "/items"),
        plain("GET", "/items?done=maybe"),
        json("POST", "/items", "{not json"),
        json(
            "POST",
            "/items",
            &format!(r#"{{"name":"{}","done":false}}"#, "x".repeat(20_000)),
        ),
        Row {
            method: "POST",
            path: "/upload",
            headers: "content-type: application/octet-stream\n",
            body: upload,
            fields: &["content-type", "content-length"],
        },
        Row {
            method: "GET",
            path: "/download",
            headers: "",
            body: Vec::new(),
            fields: &["content-type"],
        },
    ]
}

async fn ask(addr: SocketAddr, row: &Row, prefix: &str) -> Resp {
    let mut head = format!(
        "{} {prefix}{} HTTP/1.1\r\nhost: example.test\r\nconnection: close\r\n",
        row.method, row.path
    );
    head.push_str(&row.headers.replace('\n', "\r\n"));
    if !row.body.is_empty() || row.method == "POST" {
        head.push_str(&format!("content-length: {}\r\n", row.body.len()));
    }
    head.push_str("\r\n");
    let mut conn = Raw::connect(addr).await;
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&row.body);
    conn.send(&bytes).await;
    conn.response_to(row.method).await
}

async fn answers(addr: SocketAddr, prefix: &str) -> Vec<Resp> {
    let mut out = Vec::new();
    for row in &rows() {
        out.push(ask(addr, row, prefix).await);
    }
    out
}

/// Compares answers; Apache's `mod_proxy_fcgi` and `mod_proxy_scgi`
/// re-frame every body (chunked) and drop the app's `Content-Length`, so
/// that field is not compared behind Apache.
fn compare(who: &str, direct: &[Resp], theirs: &[Resp]) {
    for ((row, d), t) in rows().iter().zip(direct).zip(theirs) {
        let what = format!("{who}: {} {}", row.method, row.path);
        assert_eq!(t.status, d.status, "{what}: {}", t.text());
        assert_eq!(t.body, d.body, "{what}");
        for field in row.fields {
            if who.starts_with("apache") && *field == "content-length" {
                continue;
            }
            assert_eq!(t.header(field), d.header(field), "{what}: field {field}");
        }
    }
}

/// The expected shape of a few answers, so the comparison cannot pass on
/// two equally wrong servers.
fn check_direct(direct: &[Resp]) {
    assert_eq!(direct[0].text(), "[]");
    assert_eq!(direct[1].status, 201);
    assert_eq!(direct[1].header("location"), Some("/items/1"));
    assert_eq!(direct[5].status, 200);
    assert!(direct[5].body.is_empty());
    assert_eq!(
        direct[5].header("content-length"),
        direct[3].header("content-length")
    );
    assert_eq!(direct[10].status, 405);
    assert!(
        direct[10]
            .header("allow")
            .is_some_and(|a| a.contains("GET"))
    );
    assert_eq!(direct[13].status, 413);
    assert_eq!(
        direct[14].text(),
        format!(
            "len=2000000 sum={}",
            (0..2_000_000u64).map(|i| i % 251).sum::<u64>()
        )
    );
    assert_eq!(direct[15].body.len(), 1 << 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_rest_answers_alike_behind_nginx_lighttpd_and_apache() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir(dir.path().join("protected")).unwrap();
    std::fs::write(
        dir.path().join("protected/note.txt"),
        "offloaded by nginx\n",
    )
    .unwrap();
    let direct_server = serve("tcp://127.0.0.1:0").await;
    let direct = answers(direct_server.tcp.unwrap(), "").await;
    direct_server.stop().await;
    check_direct(&direct);

    for front in ["nginx", "lighttpd", "apache"] {
        for protocol in ["fastcgi", "scgi"] {
            for transport in ["unix", "tcp"] {
                let (listen, upstream) = match transport {
                    "unix" => {
                        let path = dir.path().join(format!("{front}-{protocol}.sock"));
                        (
                            format!("{protocol}+unix:{}", path.display()),
                            format!("unix:{}", path.display()),
                        )
                    }
                    _ => (format!("{protocol}+tcp://127.0.0.1:0"), String::new()),
                };
                let served = serve(&listen).await;
                if transport == "unix" {
                    // Apache started as root talks to the app as www-data:
                    // the socket is opened to it as an operator would
                    // (`--unix-mode`), as is the directory above.
                    let path = upstream.trim_start_matches("unix:");
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
                }
                let upstream = match served.tcp {
                    Some(addr) => addr.to_string(),
                    None => upstream,
                };
                let process = match front {
                    "nginx" => nginx(dir.path(), protocol, &upstream),
                    "lighttpd" => lighttpd(dir.path(), protocol, &upstream),
                    _ => apache(dir.path(), protocol, &upstream),
                };
                let addr: SocketAddr = ([127, 0, 0, 1], process.port).into();
                let theirs = answers(addr, "").await;
                compare(&format!("{front} {protocol} {transport}"), &direct, &theirs);
                if front == "nginx" {
                    // Mounted under /mount: routing sees PATH_INFO and
                    // url_for links carry SCRIPT_NAME.
                    let row = json("POST", "/items", r#"{"name":"tea","done":false}"#);
                    let created = ask(addr, &row, "/mount").await;
                    assert_eq!(created.status, 201, "{}", created.text());
                    let location = created.header("location").unwrap().to_owned();
                    assert!(location.starts_with("/mount/items/"), "{location}");
                    let got = ask(addr, &plain("GET", "/items"), "/mount").await;
                    assert!(got.text().contains("tea"));
                    if protocol == "fastcgi" {
                        // A body failing half-way: the app closes the
                        // connection after an FCGI_STDERR line, which
                        // nginx's error log shows with its request. (With
                        // `fastcgi_buffering off` and no length, nginx ends
                        // the client's chunked body as if complete: the log
                        // line is what tells the failure.)
                        let mut conn = Raw::connect(addr).await;
                        conn.send(b"GET /fails HTTP/1.1\r\nhost: example.test\r\nconnection: close\r\n\r\n")
                            .await;
                        let cut = conn.read_to_close().await;
                        assert!(cut.starts_with(b"HTTP/1.1 200"), "{cut:?}");
                        let log = std::fs::read_to_string(dir.path().join("nginx-error.log"))
                            .unwrap_or_default();
                        let line = log
                            .lines()
                            .find(|l| l.contains("FastCGI sent in stderr"))
                            .unwrap_or_else(|| panic!("no FastCGI stderr line in:\n{log}"));
                        assert!(
                            line.contains("response body failed")
                                && line.contains("the disk went away")
                                && line.contains("GET /fails"),
                            "{line}"
                        );
                    }
                    // X-Accel-Redirect passes through: nginx serves the file.
                    let offloaded = ask(addr, &plain("GET", "/offload"), "").await;
                    assert_eq!(
                        (offloaded.status, offloaded.text().as_str()),
                        (200, "offloaded by nginx\n")
                    );
                }
                drop(process);
                served.stop().await;
            }
        }
    }
}

//! `celer serve` as a CGI/1.1 script (RFC 3875) under lighttpd's
//! `mod_cgi` and Apache httpd's `mod_cgi`, and as a FastCGI responder
//! chosen by `--listen`: the same answers as served directly.

use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{CELER, Celer, Reply, curl};

const DEADLINE: Duration = Duration::from_secs(10);

/// A front end process, stopped by PID on drop.
struct Front(Child);

impl Drop for Front {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
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
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|p| p.exists())
        })
        .unwrap_or_else(|| PathBuf::from("/usr/sbin").join(name))
}

/// Starts `cmd` and waits until it listens on `port`.
fn start(mut cmd: Command, port: u16, what: &str) -> Front {
    let child = cmd
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} is installed by scripts/test: {e}"));
    let server = Front(child);
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < DEADLINE, "{what} did not start listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

/// lighttpd on a free port with `config` (the modules and their settings).
fn lighttpd(dir: &Path, docroot: &Path, config: &str) -> (Front, u16) {
    let port = free_port();
    let conf = format!(
        "server.document-root = \"{}\"\nserver.bind = \"127.0.0.1\"\nserver.port = {port}\n\
         server.errorlog = \"{}/lighttpd-error.log\"\n{config}\n",
        docroot.display(),
        dir.display()
    );
    let path = dir.join(format!("lighttpd-{port}.conf"));
    std::fs::write(&path, conf).unwrap();
    let mut cmd = Command::new(binary("lighttpd"));
    cmd.arg("-D").arg("-f").arg(&path);
    (start(cmd, port, "lighttpd"), port)
}

/// Apache httpd in one foreground process (`-X`, the prefork MPM that
/// `mod_cgi` wants) on a free port, running `script` for every URL under
/// `/app.cgi/`. Run as root, Apache drops to www-data, so `dir` must be
/// reachable by that user; otherwise it keeps the current user.
fn apache_cgi(dir: &Path, script: &Path) -> (Front, u16) {
    let port = free_port();
    let d = dir.display();
    let m = "/usr/lib/apache2/modules";
    let root = std::fs::metadata(dir).unwrap().uid() == 0;
    let conf = [
        format!("LoadModule mpm_prefork_module {m}/mod_mpm_prefork.so"),
        format!("LoadModule authz_core_module {m}/mod_authz_core.so"),
        format!("LoadModule alias_module {m}/mod_alias.so"),
        format!("LoadModule cgi_module {m}/mod_cgi.so"),
        "ServerName localhost".to_owned(),
        format!("Listen 127.0.0.1:{port}"),
        format!("PidFile {d}/apache-{port}.pid"),
        format!("ErrorLog {d}/apache-error.log"),
        format!("DefaultRuntimeDir {d}"),
        if root {
            "User www-data\nGroup www-data".to_owned()
        } else {
            String::new()
        },
        format!("DocumentRoot {d}"),
        format!("ScriptAlias /app.cgi {}", script.display()),
    ]
    .join("\n");
    let path = dir.join(format!("apache-{port}.conf"));
    std::fs::write(&path, conf).unwrap();
    let mut cmd = Command::new(binary("apache2"));
    cmd.arg("-X").arg("-f").arg(&path);
    (start(cmd, port, "apache2"), port)
}

fn site(dir: &Path) -> PathBuf {
    let root = dir.join("site");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("hello.txt"), "hello from the site\n").unwrap();
    std::fs::write(
        root.join("big.bin"),
        (0..300_000u32)
            .map(|i| (i % 253) as u8)
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    root
}

/// The requests compared: path and curl flags.
const CASES: &[(&str, &[&str])] = &[
    ("/hello.txt", &[]),
    ("/big.bin", &[]),
    ("/hello.txt", &["-I"]),
    ("/missing.txt", &[]),
    ("/hello.txt", &["-X", "POST", "--data-binary", "ignored"]),
    ("/big.bin", &["-r", "1000-1999"]),
];

fn ask(base: &str) -> Vec<Reply> {
    CASES
        .iter()
        .map(|(path, flags)| {
            let url = format!("{base}{path}");
            let mut args: Vec<&str> = flags.to_vec();
            args.push(&url);
            curl(&args)
        })
        .collect()
}

fn same(who: &str, direct: &[Reply], theirs: &[Reply]) {
    for (((path, flags), d), t) in CASES.iter().zip(direct).zip(theirs) {
        let what = format!("{who}: {path} {flags:?}");
        assert_eq!(t.status, d.status, "{what}: {}", t.text());
        assert_eq!(t.body, d.body, "{what}");
        for field in [
            "content-type",
            "content-length",
            "allow",
            "content-range",
            "etag",
            "last-modified",
        ] {
            // Apache re-frames every CGI body it relays (chunked, or closed
            // for HTTP/1.0) and drops the script's Content-Length, as its
            // `mod_proxy_fcgi` does; the body and its range are compared.
            if who.starts_with("apache") && field == "content-length" {
                continue;
            }
            assert_eq!(t.header(field), d.header(field), "{what}: {field}");
        }
    }
}

/// `celer serve` on `root` over HTTP, and its answers to [`CASES`]: what
/// every gateway must reproduce.
fn served_directly(root: &Path) -> (Celer, Vec<Reply>) {
    let direct = Celer::serve(&[
        "--root",
        root.to_str().unwrap(),
        "--listen",
        "tcp://127.0.0.1:0",
    ]);
    let expected = ask(&direct.url());
    assert_eq!(expected[0].text(), "hello from the site\n");
    assert_eq!(expected[3].status, 404);
    assert_eq!(expected[4].status, 405);
    assert_eq!(expected[5].status, 206);
    (direct, expected)
}

#[test]
fn celer_serve_answers_as_a_cgi_script_and_a_fastcgi_responder() {
    let dir = tempfile::tempdir().unwrap();
    let root = site(dir.path());
    let (direct, expected) = served_directly(&root);

    // CGI: lighttpd runs a script that execs `celer serve` for each request.
    let cgi_root = dir.path().join("cgi");
    std::fs::create_dir_all(&cgi_root).unwrap();
    let script = cgi_root.join("app.cgi");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nexec {CELER} serve --root {}\n", root.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (cgi, port) = lighttpd(
        dir.path(),
        &cgi_root,
        "server.modules = (\"mod_cgi\")\ncgi.assign = (\".cgi\" => \"\")",
    );
    same(
        "lighttpd mod_cgi",
        &expected,
        &ask(&format!("http://127.0.0.1:{port}/app.cgi")),
    );
    drop(cgi);

    // FastCGI: `--listen fastcgi+unix:PATH` on the unchanged binary.
    let socket = dir.path().join("celer-fcgi.sock");
    let responder = Celer::serve(&[
        "--root",
        root.to_str().unwrap(),
        "--listen",
        &format!("fastcgi+unix:{}", socket.display()),
    ]);
    assert_eq!(
        responder.specs,
        [format!("fastcgi+unix:{}", socket.display())]
    );
    let config = format!(
        "server.modules = (\"mod_fastcgi\")\nfastcgi.server = (\"/\" => ((\"socket\" => \"{}\", \"check-local\" => \"disable\", \"fix-root-scriptname\" => \"enable\")))",
        socket.display()
    );
    let (fcgi, port) = lighttpd(dir.path(), &root, &config);
    same(
        "lighttpd mod_fastcgi",
        &expected,
        &ask(&format!("http://127.0.0.1:{port}")),
    );
    drop(fcgi);
    drop(responder);
    drop(direct);
}

#[test]
fn celer_serve_answers_as_a_cgi_script_under_apache() {
    // Apache run as root executes scripts as www-data: the directory lives
    // under the system's temporary directory, opened to other users, and
    // holds its own link to (or copy of) the binary, so no part of the
    // build's path needs to be reachable.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = site(dir.path());
    let celer = dir.path().join("celer");
    if std::fs::hard_link(CELER, &celer).is_err() {
        std::fs::copy(CELER, &celer).unwrap();
    }
    std::fs::set_permissions(&celer, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (direct, expected) = served_directly(&root);

    let script = dir.path().join("app.cgi");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} serve --root {}\n",
            celer.display(),
            root.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (apache, port) = apache_cgi(dir.path(), &script);
    let theirs = ask(&format!("http://127.0.0.1:{port}/app.cgi"));
    let log = std::fs::read_to_string(dir.path().join("apache-error.log")).unwrap_or_default();
    assert_eq!(theirs[0].status, 200, "{}\n{log}", theirs[0].text());
    same("apache mod_cgi", &expected, &theirs);
    drop(apache);
    drop(direct);
}

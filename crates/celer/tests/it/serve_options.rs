//! `celer::serve::Options`: the standard server flags from a command line,
//! their usage errors, and a server bound from them over plain HTTP and
//! TLS (curl).

use celer::serve::{Options, Shutdown, Threading};
use celer::{App, Request};

use crate::wire::curl;

fn err(args: &[&str]) -> String {
    Options::parse(args.iter().copied())
        .expect_err("a usage error")
        .to_string()
}

#[test]
fn usage_errors_should_name_the_flag_and_the_problem() {
    assert_eq!(err(&["--listen"]), "--listen needs a value");
    assert!(
        err(&["--listen", "ftp://x"]).starts_with("--listen: "),
        "{}",
        err(&["--listen", "ftp://x"])
    );
    assert_eq!(
        err(&["--workers=x"]),
        "--workers: expected a number of threads (1 or more), got \"x\""
    );
    assert_eq!(
        err(&["--threading", "green"]),
        "--threading: expected per-core or work-stealing, got \"green\""
    );
    assert_eq!(err(&["--tls-cert", "c.pem"]), "--tls-cert needs --tls-key");
    assert_eq!(err(&["--tls-key", "k.pem"]), "--tls-key needs --tls-cert");
    assert_eq!(
        err(&["--listen-tls", "tcp://127.0.0.1:0"]),
        "--listen-tls needs --tls-cert and --tls-key"
    );
    assert_eq!(err(&["--colour"]), "unknown option --colour");
    assert_eq!(err(&["stray"]), "unexpected argument \"stray\"");
    let help = Options::parse(["--workers", "2", "--help"]).unwrap_err();
    assert!(help.is_help());
    assert!(help.to_string().contains("--threading MODEL"), "{help}");
}

#[test]
fn flags_should_parse_in_both_spellings_and_leave_the_rest() {
    let options = Options::parse([
        "--listen",
        "tcp://127.0.0.1:1",
        "--listen=unix:/tmp/x.sock",
        "--workers",
        "3",
        "--threading=work-stealing",
    ])
    .unwrap();
    assert_eq!(options.listen.len(), 2);
    assert_eq!(options.workers, Some(3));
    assert_eq!(options.threading, Threading::WorkStealing);

    let mut args: Vec<String> = [
        "app",
        "--page",
        "p.html",
        "--workers",
        "1",
        "--",
        "--workers",
    ]
    .map(String::from)
    .into();
    let options = Options::extract(&mut args).unwrap();
    assert_eq!(options.workers, Some(1));
    // After `--`, nothing is taken.
    assert_eq!(args, ["app", "--page", "p.html", "--", "--workers"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_bound_from_options_should_serve_plain_and_tls_listeners() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = celer_test_support::localhost_cert(dir.path());
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());

    let mut app = App::new();
    app.get("/", |req: Request| async move {
        format!("tls={}", req.conn().is_tls())
    });
    // Plain --listen beside --listen-tls.
    let options = Options::parse([
        "--listen",
        "tcp://127.0.0.1:0",
        "--listen-tls",
        "tcp://127.0.0.1:0",
        "--tls-cert",
        cert,
        "--tls-key",
        key,
        "--workers",
        "1",
    ])
    .unwrap();
    let bound = options.bind().unwrap();
    let specs = bound.local_specs();
    let port = |i: usize| specs[i].rsplit(':').next().unwrap().to_owned();
    let (plain, secure) = (port(0), port(1));
    let shutdown = Shutdown::new();
    let server = tokio::spawn(app.clone().serve(bound, shutdown.clone()));
    let resolve = format!("localhost:{secure}:127.0.0.1");
    assert_eq!(
        curl(&[&format!("http://127.0.0.1:{plain}/")]).await,
        "tls=false"
    );
    let https = format!("https://localhost:{secure}/");
    assert_eq!(
        curl(&["--cacert", cert, "--resolve", &resolve, &https]).await,
        "tls=true"
    );
    shutdown.trigger();
    celer_test_support::bounded(server).await.unwrap().unwrap();

    // A certificate without --listen-tls: --listen serves TLS (what
    // `bench/instructions --tls` passes).
    let options = Options::parse([
        "--listen",
        "tcp://127.0.0.1:0",
        "--tls-cert",
        cert,
        "--tls-key",
        key,
    ])
    .unwrap();
    let bound = options.bind().unwrap();
    let port = bound.tcp_addr().unwrap().port();
    let shutdown = Shutdown::new();
    let server = tokio::spawn(app.serve(bound, shutdown.clone()));
    let resolve = format!("localhost:{port}:127.0.0.1");
    let https = format!("https://localhost:{port}/");
    assert_eq!(
        curl(&["--cacert", cert, "--resolve", &resolve, &https]).await,
        "tls=true"
    );
    shutdown.trigger();
    celer_test_support::bounded(server).await.unwrap().unwrap();

    // A certificate that does not load is an error naming the file.
    let options = Options::parse(["--tls-cert", "/nonexistent.pem", "--tls-key", key]).unwrap();
    let err = options.bind().unwrap_err().to_string();
    assert!(err.contains("/nonexistent.pem"), "{err}");
}

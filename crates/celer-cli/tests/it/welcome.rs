//! `celer serve` without `--root`: the embedded welcome site.

use crate::support::{Celer, curl};

#[test]
fn welcome_site_is_served() {
    let celer = Celer::serve(&["--listen", "tcp://127.0.0.1:0"]);
    let reply = curl(&[&format!("{}/", celer.url())]);
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(reply.text().contains("<h1>Celer</h1>"));
    let reply = curl(&[&format!("{}/style.css", celer.url())]);
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("text/css; charset=utf-8")
    );
    let reply = curl(&[&format!("{}/nope", celer.url())]);
    assert_eq!(reply.status, 404);
    let reply = curl(&["-X", "POST", &format!("{}/", celer.url())]);
    assert_eq!(
        (reply.status, reply.header("allow")),
        (405, Some("GET, HEAD"))
    );
    let reply = curl(&["-I", &format!("{}/", celer.url())]);
    assert_eq!(reply.status, 200);
    assert!(reply.body.is_empty());
    assert!(reply.header("content-length").is_some());
}

#[test]
fn default_listen_address_is_documented() {
    // Binding 8080 here could clash with other tests or services; the
    // default is checked where it is stated instead.
    let (code, help) = crate::support::run_celer_stdout(&["serve", "--help"]);
    assert_eq!(code, Some(0));
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("[default: tcp://127.0.0.1:8080, or tcp://127.0.0.1:8443 with TLS]"),
        "{help}"
    );
}

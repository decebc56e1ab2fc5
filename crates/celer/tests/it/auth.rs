//! Authentication over real sockets: curl `--basic` and `--digest`,
//! Python `requests` with `HTTPDigestAuth`, Digest replay and stale
//! nonces by hand, and bearer keys.

use std::process::Command;
use std::time::Duration;

use celer::auth::basic::{Basic, Users};
use celer::auth::digest::{Algorithm, Digest, DigestUsers};
use celer::auth::{ApiKeys, User, bearer};
use celer::{App, Request};
use celer_test_support::run_tool;
use futures_util::future::BoxFuture;

use crate::wire::{Served, curl};

/// "lovelace" hashed with low-cost Argon2id parameters (m = 8 KiB, t = 1).
const ADA_HASH: &str =
    "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$AwJjHClrXLDZ+IOrfNSjOLo638v0JC1ANFg3l2Cn/fI";

fn whoami(app: &mut App) {
    app.get("/who", |req: Request| async move {
        format!("user {}", req.extensions().get::<User>().unwrap().0)
    });
}

#[tokio::test]
async fn curl_basic() {
    let mut users = Users::new();
    users.add("ada", ADA_HASH);
    let mut app = App::new();
    app.middleware(Basic::new("admin", users).layer());
    whoami(&mut app);
    let served = Served::start(app).await;
    let url = served.url("/who");
    assert_eq!(
        curl(&["--basic", "-u", "ada:lovelace", &url]).await,
        "user ada"
    );
    for creds in ["ada:wrong", "bob:lovelace", "ada:"] {
        let out = curl(&["--basic", "-u", creds, "-i", &url]).await;
        assert!(out.starts_with("HTTP/1.1 401"), "{out}");
        assert!(
            out.contains("www-authenticate: Basic realm=\"admin\", charset=\"UTF-8\""),
            "{out}"
        );
        assert!(out.ends_with("wrong user or password"), "{out}");
    }
    let out = curl(&["-i", &url]).await;
    assert!(out.ends_with("Basic credentials required"), "{out}");
    served.stop().await;
}

fn digest_app(digest: &Digest) -> App {
    let mut app = App::new();
    app.middleware(digest.layer());
    whoami(&mut app);
    app
}

fn users() -> DigestUsers {
    let mut users = DigestUsers::new("files");
    users.add("ada", "lovelace");
    users
}

#[tokio::test]
async fn curl_digest_sha256_and_md5() {
    // curl answers the first challenge it is given.
    for algorithms in [
        &[Algorithm::Sha256, Algorithm::Md5][..],
        &[Algorithm::Sha256],
        &[Algorithm::Md5],
    ] {
        let served = Served::start(digest_app(
            &Digest::new("files", users()).algorithms(algorithms),
        ))
        .await;
        let url = served.url("/who?x=1");
        let out = curl(&["--digest", "-u", "ada:lovelace", &url]).await;
        assert_eq!(out, "user ada", "{algorithms:?}");
        let out = curl(&[
            "--digest",
            "-u",
            "ada:nope",
            "-w",
            "%{http_code}",
            "-o",
            "/dev/null",
            &url,
        ])
        .await;
        assert_eq!(out, "401");
        served.stop().await;
    }
}

#[tokio::test]
async fn python_requests_http_digest_auth() {
    let script = r#"
import sys, requests
from requests.auth import HTTPDigestAuth
url = sys.argv[1]
s = requests.Session()
s.auth = HTTPDigestAuth("ada", "lovelace")
first = s.get(url, timeout=5)
# The same session goes on with the nonce it has, counting nc up.
second = s.get(url, timeout=5)
bad = requests.get(url, auth=HTTPDigestAuth("ada", "x"), timeout=5)
print(first.status_code, first.text, second.status_code, bad.status_code)
"#;
    for algorithms in [&[Algorithm::Sha256][..], &[Algorithm::Md5]] {
        let served = Served::start(digest_app(
            &Digest::new("files", users()).algorithms(algorithms),
        ))
        .await;
        let url = served.url("/who");
        let out = tokio::task::spawn_blocking(move || {
            run_tool(Command::new("python3").args(["-c", script, &url]))
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "200 user ada 200 401",
            "{algorithms:?}"
        );
        served.stop().await;
    }
}

/// The nonce of a 401's first challenge.
fn nonce_of(res: &celer_test_support::Resp) -> String {
    let challenge = res.header("www-authenticate").unwrap();
    challenge
        .split("nonce=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned()
}

fn credentials(nonce: &str, nc: &str, userhash: bool) -> String {
    let alg = Algorithm::Sha256;
    let ha1 = celer::auth::digest::ha1(alg, "ada", "files", "lovelace");
    let ha2 = alg.hex("GET:/who");
    let response = alg.hex(&format!("{ha1}:{nonce}:{nc}:abc:auth:{ha2}"));
    let username = if userhash {
        alg.hex("ada:files")
    } else {
        "ada".to_owned()
    };
    format!(
        "Digest username=\"{username}\", realm=\"files\", nonce=\"{nonce}\", uri=\"/who\", \
         algorithm=SHA-256, response=\"{response}\", qop=auth, nc={nc}, cnonce=\"abc\", userhash={userhash}"
    )
}

async fn get(served: &Served, auth: Option<&str>) -> celer_test_support::Resp {
    let auth = auth
        .map(|a| format!("Authorization: {a}\n"))
        .unwrap_or_default();
    served
        .one(
            &format!("GET /who HTTP/1.1\nHost: x\n{auth}Connection: close\n\n"),
            b"",
        )
        .await
}

#[tokio::test]
async fn digest_replay_stale_and_forged_nonces() {
    let digest = Digest::new("files", users()).nonce_lifetime(Duration::from_millis(400));
    let served = Served::start(digest_app(&digest)).await;
    let nonce = nonce_of(&get(&served, None).await);
    let first = credentials(&nonce, "00000001", false);
    assert_eq!(get(&served, Some(&first)).await.text(), "user ada");
    // The same nc again: a replay.
    let res = get(&served, Some(&first)).await;
    assert_eq!(
        (res.status, res.text()),
        (401, "Digest nc replayed".to_owned())
    );
    assert!(!res.header("www-authenticate").unwrap().contains("stale"));
    // A higher nc, with userhash this time.
    let res = get(&served, Some(&credentials(&nonce, "00000002", true))).await;
    assert_eq!(res.text(), "user ada");
    // A lower one is refused too.
    let res = get(&served, Some(&credentials(&nonce, "00000002", false))).await;
    assert_eq!(res.status, 401);
    // A nonce we did not make.
    let res = get(
        &served,
        Some(&credentials(
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            "00000001",
            false,
        )),
    )
    .await;
    assert_eq!(
        (res.status, res.text()),
        (401, "unknown Digest nonce".to_owned())
    );
    // Past its lifetime: stale=true on every challenge, and the new nonce works.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let res = get(&served, Some(&credentials(&nonce, "00000003", false))).await;
    assert_eq!(
        (res.status, res.text()),
        (401, "stale Digest nonce".to_owned())
    );
    for challenge in res.headers.iter().filter(|(k, _)| k == "www-authenticate") {
        assert!(challenge.1.ends_with(", stale=true"), "{challenge:?}");
    }
    let fresh = nonce_of(&res);
    let res = get(&served, Some(&credentials(&fresh, "00000001", false))).await;
    assert_eq!(res.text(), "user ada");
    // Malformed credentials are a 401 with the reason, never a panic.
    for bad in [
        "Digest",
        "Digest username=\"ada",
        "Digest a=1, b",
        "Digest nc=zz",
        "Basic x",
    ] {
        let res = get(&served, Some(bad)).await;
        assert_eq!(res.status, 401, "{bad}");
    }
    served.stop().await;
}

#[tokio::test]
async fn bearer_keys_over_a_socket() {
    struct Keys;
    impl ApiKeys for Keys {
        fn user_for_key<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<String>> {
            Box::pin(async move { (key == "k-1").then(|| "bot".to_owned()) })
        }
    }
    let mut app = App::new();
    app.middleware(bearer("tasks", Keys));
    whoami(&mut app);
    let served = Served::start(app).await;
    let url = served.url("/who");
    assert_eq!(
        curl(&["-H", "authorization: Bearer k-1", &url]).await,
        "user bot"
    );
    let out = curl(&["-i", &url]).await;
    assert!(
        out.starts_with("HTTP/1.1 401")
            && out.contains("www-authenticate: Bearer realm=\"tasks\"\r\n"),
        "{out}"
    );
    served.stop().await;
}

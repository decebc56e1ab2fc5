//! CSRF over real sockets: a form fetched and posted back with curl (the
//! token in the form body, which the handler still reads), refusals with
//! their reasons for cross-site, cross-origin, missing and foreign tokens,
//! and Python `requests` sending the token as a header.

use std::process::Command;

use celer::session::{MemoryStore, Sessions};
use celer::{App, Error, Request};
use celer_test_support::run_tool;

use crate::wire::{Served, curl};

/// The app, with CSRF as middleware of its own or checked by the session
/// middleware (`Sessions::csrf`): every test runs on both.
fn app(fused: bool) -> App {
    async fn form(req: Request) -> Result<String, Error> {
        let token = celer::csrf::token(&req).await?;
        Ok(format!("token={token}"))
    }
    async fn post(mut req: Request) -> Result<String, Error> {
        #[derive(serde::Deserialize)]
        struct Msg {
            msg: String,
        }
        let msg: Msg = req.form().await?;
        Ok(format!("got {}", msg.msg))
    }
    let mut app = App::new();
    app.problem_details(true);
    let sessions = Sessions::new(MemoryStore::new())
        .cookie_name("sid")
        .secure(false);
    let csrf = celer::csrf::Csrf::new().allow_origin("https://partner.example");
    if fused {
        app.middleware(sessions.csrf(&csrf).layer());
    } else {
        app.middleware(sessions.layer());
        app.middleware(csrf.layer());
    }
    app.get("/form", form);
    app.post("/form", post);
    app.delete("/thing", |_req: Request| async { "deleted" });
    app
}

fn token_of(page: &str) -> String {
    page.strip_prefix("token=").unwrap().trim().to_owned()
}

#[tokio::test]
async fn curl_posts_the_form_with_its_token() {
    curl_posts_the_form_with_its_token_on(false).await;
    curl_posts_the_form_with_its_token_on(true).await;
}

async fn curl_posts_the_form_with_its_token_on(fused: bool) {
    let served = Served::start(app(fused)).await;
    let dir = tempfile::tempdir().unwrap();
    let jar = dir.path().join("cookies.txt");
    let jar = jar.to_str().unwrap();
    let first = token_of(&curl(&["-b", jar, "-c", jar, &served.url("/form")]).await);
    let second = token_of(&curl(&["-b", jar, "-c", jar, &served.url("/form")]).await);
    assert_ne!(first, second, "masked afresh per response");
    for token in [&first, &second] {
        let out = curl(&[
            "-b",
            jar,
            "--data-urlencode",
            &format!("csrf_token={token}"),
            "--data-urlencode",
            "msg=hi there",
            &served.url("/form"),
        ])
        .await;
        assert_eq!(out, "got hi there");
    }
    // No token, a wrong token, another session's token: 403 with the reason.
    let other = token_of(&curl(&[&served.url("/form")]).await);
    for (data, reason) in [
        ("msg=x".to_owned(), "CSRF token missing"),
        (format!("csrf_token={}&msg=x", "A".repeat(86)), "invalid"),
        (format!("csrf_token={other}&msg=x"), "invalid"),
    ] {
        let out = curl(&[
            "-b",
            jar,
            "-w",
            "\n%{http_code}",
            "-d",
            &data,
            &served.url("/form"),
        ])
        .await;
        assert!(out.ends_with("\n403"), "{out}");
        assert!(out.contains(reason), "{out}");
    }
    // A session that never got a token.
    let out = curl(&[
        "-w",
        "\n%{http_code}",
        "-d",
        "csrf_token=x&msg=x",
        &served.url("/form"),
    ])
    .await;
    assert!(
        out.ends_with("\n403") && out.contains("not issued"),
        "{out}"
    );
    served.stop().await;
}

#[tokio::test]
async fn cross_site_and_cross_origin_are_refused_before_the_token() {
    cross_site_and_cross_origin_are_refused_before_the_token_on(false).await;
    cross_site_and_cross_origin_are_refused_before_the_token_on(true).await;
}

async fn cross_site_and_cross_origin_are_refused_before_the_token_on(fused: bool) {
    let served = Served::start(app(fused)).await;
    let dir = tempfile::tempdir().unwrap();
    let jar = dir.path().join("cookies.txt");
    let jar = jar.to_str().unwrap();
    let token = token_of(&curl(&["-b", jar, "-c", jar, &served.url("/form")]).await);
    let header = format!("x-csrf-token: {token}");
    let host = served.addr.to_string();
    let cases: [(&[&str], &str); 6] = [
        (
            &["-H", "sec-fetch-site: cross-site"],
            "403 Sec-Fetch-Site: cross-site",
        ),
        (
            &["-H", "sec-fetch-site: same-site"],
            "403 Sec-Fetch-Site: same-site",
        ),
        (
            &["-H", "origin: http://evil.example"],
            "403 Origin: http://evil.example",
        ),
        (&["-H", "origin: null"], "403 Origin: null"),
        (&["-H", "sec-fetch-site: same-origin"], "200 deleted"),
        (
            &[
                "-H",
                "sec-fetch-site: cross-site",
                "-H",
                "origin: https://partner.example",
            ],
            "200 deleted",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec![
            "-b",
            jar,
            "-X",
            "DELETE",
            "-H",
            &header,
            "-w",
            "\n%{http_code}",
        ];
        args.extend_from_slice(extra);
        let url = served.url("/thing");
        args.push(&url);
        let out = curl(&args).await;
        let (body, code) = out.rsplit_once('\n').unwrap();
        let (want_code, want_text) = want.split_once(' ').unwrap();
        assert_eq!(code, want_code, "{extra:?}: {body}");
        assert!(body.contains(want_text), "{extra:?}: {body}");
    }
    // The request's own origin passes.
    let origin = format!("origin: http://{host}");
    let out = curl(&[
        "-b",
        jar,
        "-X",
        "DELETE",
        "-H",
        &header,
        "-H",
        &origin,
        &served.url("/thing"),
    ])
    .await;
    assert_eq!(out, "deleted");
    served.stop().await;
}

#[tokio::test]
async fn python_requests_sends_the_token_header() {
    python_requests_sends_the_token_header_on(false).await;
    python_requests_sends_the_token_header_on(true).await;
}

async fn python_requests_sends_the_token_header_on(fused: bool) {
    let served = Served::start(app(fused)).await;
    let script = r#"
import sys, requests
base = sys.argv[1]
s = requests.Session()
token = s.get(base + "/form", timeout=5).text.split("=", 1)[1]
ok = s.post(base + "/form", data={"msg": "py"}, headers={"X-CSRF-Token": token}, timeout=5)
bad = s.post(base + "/form", data={"msg": "py"}, timeout=5)
print(ok.status_code, ok.text, bad.status_code, bad.text)
"#;
    let base = served.url("");
    let out = tokio::task::spawn_blocking(move || {
        run_tool(Command::new("python3").args(["-c", script, &base]))
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
        "200 got py 403 CSRF token missing (X-CSRF-Token header or csrf_token field)"
    );
    served.stop().await;
}

/// The token check of an unsafe method is where the session is first
/// extracted: cookies over the jar's limits are a `431` there, before the
/// handler; a safe method's request that reads no session goes through.
#[tokio::test]
async fn oversized_cookies_are_431_at_the_token_check() {
    for fused in [false, true] {
        let served = Served::start(app(fused)).await;
        let big = format!(
            "Cookie: sid={}",
            "a".repeat(celer::cookie::MAX_COOKIE_HEADER_BYTES)
        );
        let status = |method: &'static str, path: &'static str| {
            let url = served.url(path);
            let big = big.clone();
            async move {
                curl(&[
                    "-X",
                    method,
                    "-H",
                    &big,
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                    &url,
                ])
                .await
            }
        };
        assert_eq!(status("DELETE", "/thing").await, "431", "fused: {fused}");
        assert_eq!(status("GET", "/form").await, "431", "fused: {fused}");
        served.stop().await;
    }
}

//! The guestbook over a real socket: sign-in with a rotated session,
//! markup posted and shown as text, CSRF refusals, the signed theme
//! cookie, the posting rate limit and the security headers.

use std::collections::BTreeMap;

use celer::http::Method;
use celer::test::{TestResponse, TestServer};
use example_guestbook::{Config, DEMO_PASSWORD, DEMO_USER, MAX_POST_CHARS, POSTS_PER_MINUTE, app};

async fn server() -> TestServer {
    TestServer::start(app(Config::random().unwrap()).unwrap()).await
}

/// A client that keeps its cookies, like a browser.
struct Visitor<'a> {
    server: &'a TestServer,
    cookies: BTreeMap<String, String>,
}

impl<'a> Visitor<'a> {
    fn new(server: &'a TestServer) -> Self {
        Visitor {
            server,
            cookies: BTreeMap::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn keep(&mut self, res: &TestResponse) {
        for set in res.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let pair = set.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() || set.to_ascii_lowercase().contains("max-age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
    }

    async fn get(&mut self, path: &str) -> TestResponse {
        let res = self
            .server
            .request(Method::GET, path)
            .header("cookie", self.cookie_header())
            .send()
            .await;
        self.keep(&res);
        res
    }

    /// Posts a form; `fields` are sent urlencoded as given.
    async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> TestResponse {
        let body = fields
            .iter()
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect::<Vec<_>>()
            .join("&");
        let res = self
            .server
            .request(Method::POST, path)
            .header("cookie", self.cookie_header())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await;
        self.keep(&res);
        res
    }

    /// The CSRF token of the page at `/`.
    async fn token(&mut self) -> String {
        let page = self.get("/").await.text();
        let at = page.find("name=\"csrf_token\" value=\"").unwrap();
        let rest = &page[at + "name=\"csrf_token\" value=\"".len()..];
        rest[..rest.find('"').unwrap()].to_owned()
    }

    async fn sign_in(&mut self) {
        let token = self.token().await;
        let res = self
            .post(
                "/login",
                &[
                    ("csrf_token", &token),
                    ("user", DEMO_USER),
                    ("password", DEMO_PASSWORD),
                ],
            )
            .await;
        assert_eq!(res.status(), 303, "{}", res.text());
    }
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn signing_in_rotates_the_session_and_signing_out_ends_it() {
    let server = server().await;
    let mut v = Visitor::new(&server);
    let page = v.get("/").await;
    assert_eq!(page.status(), 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(page.text().contains("id=\"login\""));
    let token = v.token().await;
    let before = v.cookies["guestbook_session"].clone();

    let res = v
        .post(
            "/login",
            &[
                ("csrf_token", &token),
                ("user", DEMO_USER),
                ("password", "wrong"),
            ],
        )
        .await;
    assert_eq!(res.status(), 401);
    assert!(res.text().contains("Wrong name or password."));
    let res = v
        .post(
            "/login",
            &[
                ("csrf_token", &token),
                ("user", "mallory"),
                ("password", DEMO_PASSWORD),
            ],
        )
        .await;
    assert_eq!(res.status(), 401);

    v.sign_in().await;
    let after = v.cookies["guestbook_session"].clone();
    assert_ne!(before, after, "a new session id at sign-in");
    assert!(
        v.get("/")
            .await
            .text()
            .contains("<strong id=\"user\">demo</strong>")
    );
    // The id from before the sign-in is not signed in (no fixation).
    let mut fixated = Visitor::new(&server);
    fixated.cookies.insert("guestbook_session".into(), before);
    assert!(fixated.get("/").await.text().contains("id=\"login\""));

    let token = v.token().await;
    let res = v.post("/logout", &[("csrf_token", &token)]).await;
    assert_eq!(res.status(), 303);
    let mut stale = Visitor::new(&server);
    stale.cookies.insert("guestbook_session".into(), after);
    assert!(stale.get("/").await.text().contains("id=\"login\""));
    server.stop().await;
}

#[tokio::test]
async fn markup_in_a_post_is_shown_as_text() {
    let server = server().await;
    let mut v = Visitor::new(&server);
    v.sign_in().await;
    let token = v.token().await;
    let attack = "<script>alert(1)</script> <img src=x onerror=alert(2)>";
    let res = v
        .post("/posts", &[("csrf_token", &token), ("text", attack)])
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(res.header("location"), Some("/"));
    // Everyone sees it, escaped.
    let page = Visitor::new(&server).get("/").await.text();
    assert!(
        page.contains(
            "<p class=\"text\">&lt;script&gt;alert(1)&lt;&#x2f;script&gt; &lt;img src=x onerror=alert(2)&gt;</p>"
        ),
        "{page}"
    );
    assert!(!page.contains("<script>alert"));
    assert!(page.contains("<span class=\"author\">demo</span>"));
    server.stop().await;
}

#[tokio::test]
async fn posts_need_the_csrf_token_and_a_signed_in_user() {
    let server = server().await;
    let mut v = Visitor::new(&server);
    v.sign_in().await;
    let res = v.post("/posts", &[("text", "no token")]).await;
    assert_eq!(res.status(), 403);
    let mut other = Visitor::new(&server);
    let foreign = other.token().await;
    let res = v
        .post("/posts", &[("csrf_token", &foreign), ("text", "foreign")])
        .await;
    assert_eq!(res.status(), 403);
    // A cross-site form post is refused before the token is looked at.
    let token = v.token().await;
    let res = server
        .request(Method::POST, "/posts")
        .header("cookie", v.cookie_header())
        .header("sec-fetch-site", "cross-site")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf_token={}&text=x", enc(&token)))
        .send()
        .await;
    assert_eq!(res.status(), 403);
    // A visitor who has not signed in has a token but may not post.
    let token = other.token().await;
    let res = other
        .post("/posts", &[("csrf_token", &token), ("text", "anon")])
        .await;
    assert_eq!(res.status(), 401);
    assert!(res.text().contains("Sign in to post."));
    // Too long, or empty.
    let token = v.token().await;
    let long = "x".repeat(MAX_POST_CHARS + 1);
    for text in [long.as_str(), "   "] {
        let res = v
            .post("/posts", &[("csrf_token", &token), ("text", text)])
            .await;
        assert_eq!(res.status(), 422);
    }
    let page = v.get("/").await.text();
    assert!(page.contains("No messages yet."), "{page}");
    server.stop().await;
}

#[tokio::test]
async fn posting_is_rate_limited() {
    let server = server().await;
    let mut v = Visitor::new(&server);
    v.sign_in().await;
    let token = v.token().await;
    for n in 0..POSTS_PER_MINUTE {
        let res = v
            .post(
                "/posts",
                &[("csrf_token", &token), ("text", &format!("post {n}"))],
            )
            .await;
        assert_eq!(res.status(), 303, "post {n}");
        assert!(res.header("ratelimit").unwrap().starts_with("\"posts\""));
    }
    let res = v
        .post(
            "/posts",
            &[("csrf_token", &token), ("text", "one too many")],
        )
        .await;
    assert_eq!(res.status(), 429);
    let retry: u64 = res.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Reading is not limited.
    let page = v.get("/").await;
    assert_eq!(page.status(), 200);
    assert_eq!(
        page.text().matches("class=\"post\"").count(),
        POSTS_PER_MINUTE as usize
    );
    server.stop().await;
}

#[tokio::test]
async fn the_theme_is_kept_in_a_signed_cookie() {
    let server = server().await;
    let mut v = Visitor::new(&server);
    assert!(v.get("/").await.text().contains("class=\"theme-light\""));
    let token = v.token().await;
    let res = v
        .post("/theme", &[("csrf_token", &token), ("theme", "dark")])
        .await;
    assert_eq!(res.status(), 303);
    let set = res.header("set-cookie").unwrap();
    assert!(set.starts_with("theme="), "{set}");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Lax"),
        "{set}"
    );
    assert!(v.get("/").await.text().contains("class=\"theme-dark\""));
    // Anything but light or dark is refused.
    let res = v
        .post(
            "/theme",
            &[("csrf_token", &token), ("theme", "x\" onload=\"")],
        )
        .await;
    assert_eq!(res.status(), 422);
    // A forged (unsigned) or tampered cookie reads as no cookie.
    let mut forged = Visitor::new(&server);
    forged.cookies.insert("theme".into(), "dark".into());
    assert!(
        forged
            .get("/")
            .await
            .text()
            .contains("class=\"theme-light\"")
    );
    let signed = v.cookies["theme"].clone();
    forged
        .cookies
        .insert("theme".into(), signed.replacen("dark", "DARK", 1));
    assert!(
        forged
            .get("/")
            .await
            .text()
            .contains("class=\"theme-light\"")
    );
    // A server with other keys does not trust this one's cookies.
    let other = self::server().await;
    let mut stranger = Visitor::new(&other);
    stranger.cookies.insert("theme".into(), signed);
    assert!(
        stranger
            .get("/")
            .await
            .text()
            .contains("class=\"theme-light\"")
    );
    other.stop().await;
    server.stop().await;
}

#[tokio::test]
async fn pages_carry_the_security_headers() {
    let server = server().await;
    let mut v = Visitor::new(&server);
    let page = v.get("/").await;
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("default-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    let css = v.get("/style.css").await;
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    assert!(css.text().contains(".theme-dark"));
    server.stop().await;
}

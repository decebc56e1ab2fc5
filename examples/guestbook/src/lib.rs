//! A guestbook on the Celer framework: what an app with signed-in users
//! and a form needs, each from the framework.
//!
//! - **Sign-in with a session** ([`celer::session`]): one demo user
//!   ([`DEMO_USER`] / [`DEMO_PASSWORD`]) checked against an Argon2 hash;
//!   the session id is rotated at sign-in (no fixation) and the session
//!   ended at sign-out.
//! - **Forms with CSRF tokens** ([`celer::csrf`]): every `POST` carries the
//!   session's token; a request without it is answered `403`.
//! - **Templates that escape** ([`celer::template`]): posts are shown as
//!   text, markup included.
//! - **A signed cookie for a preference** ([`celer::cookie`]): the theme;
//!   a forged one reads as absent.
//! - **Rate-limited posting** ([`celer::ratelimit`]): [`POSTS_PER_MINUTE`]
//!   per client address, then `429` with `Retry-After`.
//! - **Security headers** ([`celer::security`]): a CSP without inline
//!   scripts, `nosniff`, no framing.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use argon2::{Argon2, PasswordHash, PasswordVerifier};
use celer::cookie::{Algorithm, Cookie, CookieJar, SameSite, SigningKeys};
use celer::form::Form;
use celer::http::StatusCode;
use celer::ratelimit::{Key, Quota, RateLimit};
use celer::response::{IntoResponse, Redirect};
use celer::security::SecurityHeaders;
use celer::session::{MemoryStore, Session, Sessions};
use celer::template::Templates;
use celer::{App, Error, Request, Response};
use serde::{Deserialize, Serialize};

/// The demo user's name.
pub const DEMO_USER: &str = "demo";

/// The demo user's password.
pub const DEMO_PASSWORD: &str = "guestbook";

/// The Argon2id hash of [`DEMO_PASSWORD`] (m = 19 MiB, t = 2, p = 1: RFC
/// 9106's second recommended option).
pub const DEMO_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$1n5D0Xqc3hPxdIWovlzt1A$IAqSJcxdRV3myYGwuGyweTfvGYKLkJvzyt6KeqJhdxA";

/// The longest message, in characters.
pub const MAX_POST_CHARS: usize = 500;

/// Messages kept; the oldest goes when a new one comes.
pub const MAX_POSTS: usize = 200;

/// Messages a client address may post in a minute (in a burst).
pub const POSTS_PER_MINUTE: u32 = 5;

/// The cookie that keeps the theme, signed.
pub const THEME_COOKIE: &str = "theme";

const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("../templates/base.html")),
    ("index.html", include_str!("../templates/index.html")),
];

const STYLE: &str = include_str!("../static/style.css");
const ICON: &str = include_str!("../static/favicon.svg");

/// A message in the guestbook.
#[derive(Clone, Debug, Serialize)]
pub struct Post {
    /// Its number, from 1.
    pub id: u64,
    /// Who signed in to post it.
    pub author: String,
    /// What it says, as typed.
    pub text: String,
}

/// The messages, newest first, at most [`MAX_POSTS`].
#[derive(Default)]
struct Book {
    last_id: AtomicU64,
    posts: Mutex<VecDeque<Post>>,
}

/// What the app needs from its runner.
pub struct Config {
    /// Keys for the theme cookie (the first signs, every one verifies).
    pub cookie_keys: Vec<[u8; 32]>,
    /// Mark the session cookie `Secure` (serve over HTTPS then).
    pub secure_cookies: bool,
}

impl Config {
    /// A fresh random cookie key, cookies not `Secure` (plain HTTP on
    /// loopback).
    pub fn random() -> Result<Config, Box<dyn std::error::Error>> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| format!("no random key: {e}"))?;
        Ok(Config {
            cookie_keys: vec![key],
            secure_cookies: false,
        })
    }
}

#[derive(Deserialize)]
struct Login {
    user: String,
    password: String,
}

#[derive(Deserialize)]
struct NewPost {
    text: String,
}

#[derive(Deserialize)]
struct Theme {
    theme: String,
}

/// The theme the signed cookie names: `light` unless it says `dark`.
fn theme(req: &Request, keys: &SigningKeys) -> &'static str {
    let jar = CookieJar::from_headers(req.headers()).unwrap_or_default();
    match jar.get_signed(keys, THEME_COOKIE).as_deref() {
        Some("dark") => "dark",
        _ => "light",
    }
}

/// The page: the messages, and the sign-in form or the posting form.
async fn page(
    req: Request,
    session: &Session,
    error: Option<&str>,
    status: StatusCode,
) -> Result<Response, Error> {
    let user: Option<String> = session.get("user").await?;
    let token = celer::csrf::token(&req).await?;
    let keys = req.state::<SigningKeys>()?;
    let posts: Vec<Post> = req
        .state::<Book>()?
        .posts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .cloned()
        .collect();
    let rendered = req.state::<Templates>()?.render(
        "index.html",
        serde_json::json!({
            "user": user,
            "csrf_token": token,
            "theme": theme(&req, keys),
            "posts": posts,
            "error": error,
            "max_chars": MAX_POST_CHARS,
        }),
    )?;
    let mut res = rendered.into_response();
    *res.status_mut() = status;
    Ok(res)
}

async fn index(mut req: Request) -> Result<Response, Error> {
    let session = req.extract::<Session>().await?;
    page(req, &session, None, StatusCode::OK).await
}

/// Checks `password` against `hash` off the async threads (Argon2 takes
/// tens of milliseconds and 19 MiB by design).
async fn verify(password: String, hash: &'static str) -> Result<bool, Error> {
    tokio::task::spawn_blocking(move || {
        let hash = PasswordHash::new(hash).map_err(|e| Error::internal(e.to_string()))?;
        Ok(Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok())
    })
    .await
    .map_err(|e| Error::internal(e.to_string()))?
}

async fn login(mut req: Request) -> Result<Response, Error> {
    let Form(login): Form<Login> = req.extract().await?;
    let session = req.extract::<Session>().await?;
    // The hash is checked for any name, so a wrong name takes as long as
    // a wrong password.
    let good = verify(login.password, DEMO_HASH).await?;
    if !(good && login.user == DEMO_USER) {
        return page(
            req,
            &session,
            Some("Wrong name or password."),
            StatusCode::UNAUTHORIZED,
        )
        .await;
    }
    session.rotate().await?; // a new id for the signed-in session
    session.insert("user", &login.user).await?;
    Ok(Redirect::see_other("/").into_response())
}

async fn logout(mut req: Request) -> Result<Redirect, Error> {
    let session = req.extract::<Session>().await?;
    session.destroy().await?;
    Ok(Redirect::see_other("/"))
}

async fn post(mut req: Request) -> Result<Response, Error> {
    let Form(new): Form<NewPost> = req.extract().await?;
    let session = req.extract::<Session>().await?;
    let Some(author) = session.get::<String>("user").await? else {
        return page(
            req,
            &session,
            Some("Sign in to post."),
            StatusCode::UNAUTHORIZED,
        )
        .await;
    };
    let text = new.text.trim();
    if text.is_empty() || text.chars().count() > MAX_POST_CHARS {
        let message = format!("A message has 1 to {MAX_POST_CHARS} characters.");
        return page(
            req,
            &session,
            Some(&message),
            StatusCode::UNPROCESSABLE_ENTITY,
        )
        .await;
    }
    let book = req.state::<Book>()?;
    let id = book.last_id.fetch_add(1, Ordering::Relaxed) + 1;
    let mut posts = book.posts.lock().unwrap_or_else(PoisonError::into_inner);
    posts.push_front(Post {
        id,
        author,
        text: text.to_owned(),
    });
    posts.truncate(MAX_POSTS);
    Ok(Redirect::see_other("/").into_response())
}

async fn set_theme(mut req: Request) -> Result<(CookieJar, Redirect), Error> {
    let Form(Theme { theme }): Form<Theme> = req.extract().await?;
    if theme != "light" && theme != "dark" {
        return Err(Error::status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the theme is light or dark",
        ));
    }
    let keys = req.state::<SigningKeys>()?.clone();
    let mut jar = req.extract::<CookieJar>().await?;
    let cookie = Cookie::new(THEME_COOKIE, theme)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .max_age(Duration::from_secs(365 * 24 * 3600));
    jar.set_signed(&keys, cookie)?;
    Ok((jar, Redirect::see_other("/")))
}

/// An embedded file with its type.
fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut res = body.into_response();
    res.headers_mut().insert(
        celer::http::header::CONTENT_TYPE,
        celer::http::HeaderValue::from_static(content_type),
    );
    res
}

async fn style(_req: Request) -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

async fn icon(_req: Request) -> Response {
    asset(ICON, "image/svg+xml")
}

/// The guestbook app.
pub fn app(config: Config) -> Result<App, Box<dyn std::error::Error>> {
    let mut app = App::new();
    app.state(Templates::embedded(TEMPLATES)?);
    app.state(SigningKeys::new(Algorithm::Sha256, config.cookie_keys)?);
    app.state(Book::default());
    app.middleware(SecurityHeaders::new().into_middleware());
    app.middleware(
        Sessions::new(MemoryStore::new())
            .cookie_name("guestbook_session")
            .secure(config.secure_cookies)
            .same_site(SameSite::Lax)
            .layer(),
    );
    app.middleware(celer::csrf::Csrf::new().layer());
    app.get("/", index);
    app.get("/style.css", style);
    app.get("/favicon.svg", icon);
    app.post("/login", login);
    app.post("/logout", logout);
    let limit = RateLimit::new(
        Quota::new(POSTS_PER_MINUTE, Duration::from_secs(60)),
        Key::client_addr(),
    )
    .policy("posts");
    app.post("/posts", post).middleware(limit.into_middleware());
    app.post("/theme", set_theme);
    Ok(app)
}

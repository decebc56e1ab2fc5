//! Sessions over real sockets: login rotates the id (no fixation), logout
//! forgets it, idle and absolute expiry, the size limit, lazy loading,
//! and the encrypted-cookie store with curl's cookie file.

use std::sync::Arc;
use std::time::Duration;

use celer::cookie::EncryptionKeys;
use celer::session::{CookieStore, MemoryStore, Session, SessionStore, Sessions};
use celer::{App, Error, Request};

use crate::wire::{Served, curl};

fn app(sessions: &Sessions) -> App {
    async fn login(mut req: Request) -> Result<&'static str, Error> {
        let session = req.extract::<Session>().await?;
        session.rotate().await?;
        let user = req.query_param("user").unwrap_or_default().into_owned();
        session.insert("user", user).await?;
        Ok("welcome")
    }
    async fn me(mut req: Request) -> Result<String, Error> {
        let session = req.extract::<Session>().await?;
        Ok(session
            .get::<String>("user")
            .await?
            .unwrap_or_else(|| "nobody".into()))
    }
    async fn note(mut req: Request) -> Result<&'static str, Error> {
        let session = req.extract::<Session>().await?;
        let len: usize = req
            .query_param("len")
            .unwrap_or_default()
            .parse()
            .unwrap_or(0);
        session.insert("note", "n".repeat(len)).await?;
        Ok("noted")
    }
    async fn logout(mut req: Request) -> Result<&'static str, Error> {
        req.extract::<Session>().await?.destroy().await?;
        Ok("bye")
    }
    let mut app = App::new();
    app.middleware(sessions.layer());
    app.get("/login", login);
    app.get("/me", me);
    app.get("/note", note);
    app.get("/logout", logout);
    app.get("/plain", |_req: Request| async { "plain" });
    app
}

async fn get(served: &Served, path: &str, cookie: Option<&str>) -> celer_test_support::Resp {
    let cookie = cookie.map(|c| format!("Cookie: {c}\n")).unwrap_or_default();
    served
        .one(
            &format!("GET {path} HTTP/1.1\nHost: x\n{cookie}Connection: close\n\n"),
            b"",
        )
        .await
}

fn pair(res: &celer_test_support::Resp) -> String {
    let set = res.header("set-cookie").expect("a set-cookie");
    assert!(set.ends_with("; Path=/; HttpOnly; SameSite=Lax"), "{set}");
    set.split(';').next().unwrap().to_owned()
}

#[tokio::test]
async fn login_rotates_the_id_and_logout_forgets_it() {
    let store = Arc::new(MemoryStore::new());
    let served = Served::start(app(&Sessions::new(store.clone())
        .cookie_name("sid")
        .secure(false)))
    .await;

    // An attacker's session, planted in the victim's browser.
    let planted = pair(&get(&served, "/note?len=1", None).await);
    assert_eq!(store.len(), 1);
    // The victim logs in with it: a new id; the planted one is gone.
    let res = get(&served, "/login?user=ada", Some(&planted)).await;
    let fresh = pair(&res);
    assert_ne!(fresh, planted);
    assert_eq!(get(&served, "/me", Some(&fresh)).await.text(), "ada");
    assert_eq!(get(&served, "/me", Some(&planted)).await.text(), "nobody");
    assert_eq!(store.len(), 1);

    // Reads save nothing; a route that never reads loads nothing.
    let res = get(&served, "/me", Some(&fresh)).await;
    assert!(res.header("set-cookie").is_none());
    let res = get(&served, "/plain", Some("sid=made-up")).await;
    assert!(res.header("set-cookie").is_none());
    // An unknown id reads as no session, and writing mints a fresh id.
    assert_eq!(
        get(&served, "/me", Some("sid=made-up")).await.text(),
        "nobody"
    );
    let res = get(&served, "/note?len=1", Some("sid=made-up")).await;
    assert_ne!(pair(&res), "sid=made-up");

    let res = get(&served, "/logout", Some(&fresh)).await;
    assert!(
        res.header("set-cookie")
            .unwrap()
            .starts_with("sid=; Max-Age=0")
    );
    assert_eq!(get(&served, "/me", Some(&fresh)).await.text(), "nobody");
    served.stop().await;
}

#[tokio::test]
async fn size_limit_refuses_the_insert_and_keeps_the_session() {
    let sessions = Sessions::new(MemoryStore::new())
        .cookie_name("sid")
        .secure(false)
        .max_bytes(200);
    let served = Served::start(app(&sessions)).await;
    let sid = pair(&get(&served, "/login?user=bo", None).await);
    let res = get(&served, "/note?len=150", Some(&sid)).await;
    assert_eq!(res.status, 200);
    let res = get(&served, "/note?len=400", Some(&sid)).await;
    assert_eq!(res.status, 500);
    assert!(res.header("set-cookie").is_none());
    assert_eq!(get(&served, "/me", Some(&sid)).await.text(), "bo");
    served.stop().await;
}

#[tokio::test]
async fn idle_and_absolute_expiry_end_the_session() {
    let idle = Sessions::new(MemoryStore::new())
        .cookie_name("sid")
        .secure(false)
        .idle_timeout(Duration::from_millis(300));
    let served = Served::start(app(&idle)).await;
    let sid = pair(&get(&served, "/login?user=cy", None).await);
    assert_eq!(get(&served, "/me", Some(&sid)).await.text(), "cy");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(get(&served, "/me", Some(&sid)).await.text(), "nobody");
    served.stop().await;

    // In use all along, but past the absolute timeout.
    let absolute = Sessions::new(MemoryStore::new())
        .cookie_name("sid")
        .secure(false)
        .absolute_timeout(Duration::from_millis(500));
    let served = Served::start(app(&absolute)).await;
    let sid = pair(&get(&served, "/login?user=di", None).await);
    for _ in 0..3 {
        assert_eq!(get(&served, "/me", Some(&sid)).await.text(), "di");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(get(&served, "/me", Some(&sid)).await.text(), "nobody");
    served.stop().await;
}

#[tokio::test]
async fn cookie_store_with_curl_and_a_tampered_cookie() {
    let keys = EncryptionKeys::new([[8u8; 32]]).unwrap();
    let sessions = Sessions::new(CookieStore::new(keys.clone()))
        .cookie_name("s")
        .secure(false);
    let served = Served::start(app(&sessions)).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cookies.txt");
    let file = file.to_str().unwrap();
    assert_eq!(
        curl(&["-b", file, "-c", file, &served.url("/login?user=eve")]).await,
        "welcome"
    );
    assert_eq!(
        curl(&["-b", file, "-c", file, &served.url("/me")]).await,
        "eve"
    );
    let saved = std::fs::read_to_string(file).unwrap();
    assert!(!saved.contains("eve"), "{saved}");
    let sealed = saved.lines().find_map(|l| l.split("\ts\t").nth(1)).unwrap();
    // What the store wrote opens with its keys only, and not as a cookie of another name.
    assert!(CookieStore::new(keys).load(sealed).await.unwrap().is_some());
    let mut forged = sealed.as_bytes().to_vec();
    forged[30] = if forged[30] == b'x' { b'y' } else { b'x' };
    let forged = format!("s={}", String::from_utf8(forged).unwrap());
    assert_eq!(curl(&["-b", &forged, &served.url("/me")]).await, "nobody");
    served.stop().await;
}

#[tokio::test]
async fn oversized_cookies_are_431_before_the_handler() {
    let served = Served::start(app(&Sessions::new(MemoryStore::new())
        .cookie_name("sid")
        .secure(false)))
    .await;
    let big = format!("sid={}", "a".repeat(celer::cookie::MAX_COOKIE_HEADER_BYTES));
    let res = get(&served, "/me", Some(&big)).await;
    assert_eq!(res.status, 431);
    served.stop().await;
}

//! Sessions over real sockets, against each server store (in memory and
//! SQLite): login rotates the id (no fixation), logout forgets it, idle
//! and absolute expiry, the size limit, lazy loading, the cookies read once
//! a request for the jar and the session; the SQLite store
//! across a restart, its purge and concurrent writers; and the
//! encrypted-cookie store with curl's cookie file.

use std::sync::Arc;
use std::time::Duration;

use celer::cookie::EncryptionKeys;
use celer::session::{
    CookieStore, MemoryStore, Record, Session, SessionStore, Sessions, SqliteStore,
};
use celer::{App, Error, Request};

use crate::wire::{Served, curl};

/// A server store under test; each test runs against every kind.
enum Store {
    Memory(Arc<MemoryStore>),
    /// The store and the directory of its file (removed when the test
    /// ends).
    Sqlite {
        store: SqliteStore,
        _dir: tempfile::TempDir,
    },
}

impl Store {
    fn all() -> Vec<Store> {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteStore::open(dir.path().join("sessions.sqlite3")).unwrap();
        vec![
            Store::Memory(Arc::new(MemoryStore::new())),
            Store::Sqlite {
                store: sqlite,
                _dir: dir,
            },
        ]
    }

    fn name(&self) -> &'static str {
        match self {
            Store::Memory(_) => "memory",
            Store::Sqlite { .. } => "sqlite",
        }
    }

    /// Sessions in this store, cookie `sid`, over plain HTTP.
    fn sessions(&self) -> Sessions {
        match self {
            Store::Memory(store) => Sessions::new(store.clone()),
            Store::Sqlite { store, .. } => Sessions::new(store.clone()),
        }
        .cookie_name("sid")
        .secure(false)
    }

    async fn len(&self) -> usize {
        match self {
            Store::Memory(store) => store.len(),
            Store::Sqlite { store, .. } => store.len().await.unwrap(),
        }
    }

    async fn load(&self, id: &str) -> Option<Arc<Record>> {
        match self {
            Store::Memory(store) => store.load(id).await.unwrap(),
            Store::Sqlite { store, .. } => store.load(id).await.unwrap(),
        }
    }
}

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
    for store in Store::all() {
        let kind = store.name();
        let served = Served::start(app(&store.sessions())).await;

        // An attacker's session, planted in the victim's browser.
        let planted = pair(&get(&served, "/note?len=1", None).await);
        assert_eq!(store.len().await, 1, "{kind}");
        // The victim logs in with it: a new id; the planted one is gone.
        let res = get(&served, "/login?user=ada", Some(&planted)).await;
        let fresh = pair(&res);
        assert_ne!(fresh, planted, "{kind}");
        assert_eq!(
            get(&served, "/me", Some(&fresh)).await.text(),
            "ada",
            "{kind}"
        );
        assert_eq!(
            get(&served, "/me", Some(&planted)).await.text(),
            "nobody",
            "{kind}"
        );
        assert_eq!(store.len().await, 1, "{kind}");

        // Reads save nothing; a route that never reads loads nothing.
        let res = get(&served, "/me", Some(&fresh)).await;
        assert!(res.header("set-cookie").is_none(), "{kind}");
        let res = get(&served, "/plain", Some("sid=made-up")).await;
        assert!(res.header("set-cookie").is_none(), "{kind}");
        // An unknown id reads as no session, and writing mints a fresh id,
        // also when the unknown id has the shape of a real one.
        assert_eq!(
            get(&served, "/me", Some("sid=made-up")).await.text(),
            "nobody",
            "{kind}"
        );
        let res = get(&served, "/note?len=1", Some("sid=made-up")).await;
        assert_ne!(pair(&res), "sid=made-up", "{kind}");
        let shaped = format!("sid={}", "A".repeat(43));
        let res = get(&served, "/note?len=1", Some(&shaped)).await;
        assert_ne!(pair(&res), shaped, "{kind}");

        let res = get(&served, "/logout", Some(&fresh)).await;
        assert!(
            res.header("set-cookie")
                .unwrap()
                .starts_with("sid=; Max-Age=0"),
            "{kind}"
        );
        assert_eq!(
            get(&served, "/me", Some(&fresh)).await.text(),
            "nobody",
            "{kind}"
        );
        let id = fresh.strip_prefix("sid=").unwrap();
        assert!(store.load(id).await.is_none(), "{kind}");
        served.stop().await;
    }
}

#[tokio::test]
async fn size_limit_refuses_the_insert_and_keeps_the_session() {
    for store in Store::all() {
        let kind = store.name();
        let served = Served::start(app(&store.sessions().max_bytes(200))).await;
        let sid = pair(&get(&served, "/login?user=bo", None).await);
        let res = get(&served, "/note?len=150", Some(&sid)).await;
        assert_eq!(res.status, 200, "{kind}");
        let res = get(&served, "/note?len=400", Some(&sid)).await;
        assert_eq!(res.status, 500, "{kind}");
        assert!(res.header("set-cookie").is_none(), "{kind}");
        assert_eq!(get(&served, "/me", Some(&sid)).await.text(), "bo", "{kind}");
        // What the store holds is the session before the refused insert.
        let record = store.load(sid.strip_prefix("sid=").unwrap()).await.unwrap();
        assert_eq!(record.data["note"].as_str().unwrap().len(), 150, "{kind}");
        served.stop().await;
    }
}

#[tokio::test]
async fn idle_and_absolute_expiry_end_the_session() {
    for store in Store::all() {
        let kind = store.name();
        let idle = store.sessions().idle_timeout(Duration::from_millis(300));
        let served = Served::start(app(&idle)).await;
        let sid = pair(&get(&served, "/login?user=cy", None).await);
        assert_eq!(get(&served, "/me", Some(&sid)).await.text(), "cy", "{kind}");
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(
            get(&served, "/me", Some(&sid)).await.text(),
            "nobody",
            "{kind}"
        );
        // Read as absent, and gone from the store.
        assert_eq!(store.len().await, 0, "{kind}");
        served.stop().await;
    }

    for store in Store::all() {
        let kind = store.name();
        // In use all along, but past the absolute timeout.
        let absolute = store
            .sessions()
            .absolute_timeout(Duration::from_millis(500));
        let served = Served::start(app(&absolute)).await;
        let sid = pair(&get(&served, "/login?user=di", None).await);
        for _ in 0..3 {
            assert_eq!(get(&served, "/me", Some(&sid)).await.text(), "di", "{kind}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(
            get(&served, "/me", Some(&sid)).await.text(),
            "nobody",
            "{kind}"
        );
        served.stop().await;
    }
}

#[tokio::test]
async fn sqlite_sessions_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data").join("sessions.sqlite3");
    let sessions = || {
        Sessions::new(SqliteStore::open(&file).unwrap())
            .cookie_name("sid")
            .secure(false)
    };

    let served = Served::start(app(&sessions())).await;
    let sid = pair(&get(&served, "/login?user=ada", None).await);
    let gone = pair(&get(&served, "/login?user=bob", None).await);
    assert_eq!(get(&served, "/logout", Some(&gone)).await.status, 200);
    served.stop().await;

    // A new server on the same file: the session is there, the ended one
    // is not.
    let served = Served::start(app(&sessions())).await;
    assert_eq!(get(&served, "/me", Some(&sid)).await.text(), "ada");
    assert_eq!(get(&served, "/me", Some(&gone)).await.text(), "nobody");
    served.stop().await;
    let store = SqliteStore::open(&file).unwrap();
    assert_eq!(store.len().await.unwrap(), 1);
}

#[tokio::test]
async fn sqlite_expired_sessions_read_as_absent_and_are_purged() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("s.sqlite3")).unwrap();
    let short = Duration::from_millis(200);
    let a = store.save(None, &Record::new(), short).await.unwrap();
    let b = store.save(None, &Record::new(), short).await.unwrap();
    let kept = store
        .save(None, &Record::new(), Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(store.len().await.unwrap(), 3);
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Loading an expired one: absent, and its row deleted.
    assert!(store.load(&a).await.unwrap().is_none());
    assert_eq!(store.len().await.unwrap(), 2);
    // Saving under an expired id does not revive it: a fresh id.
    assert_ne!(
        store.save(Some(&b), &Record::new(), short).await.unwrap(),
        b
    );
    // An explicit purge takes the rest of the expired rows.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(store.purge().await.unwrap(), 2);
    assert_eq!(store.len().await.unwrap(), 1);
    assert!(store.load(&kept).await.unwrap().is_some());

    // The periodic purge: with an interval of zero, every save purges first.
    let store = store.purge_interval(Duration::ZERO);
    for _ in 0..5 {
        store.save(None, &Record::new(), short).await.unwrap();
    }
    assert_eq!(store.len().await.unwrap(), 6);
    tokio::time::sleep(Duration::from_millis(400)).await;
    store
        .save(Some(&kept), &Record::new(), Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(store.len().await.unwrap(), 1);

    // At the limit of rows, the one closest to expiring is evicted.
    let store = store.max_sessions(2);
    let later = store
        .save(None, &Record::new(), Duration::from_secs(900))
        .await
        .unwrap();
    let newest = store
        .save(None, &Record::new(), Duration::from_secs(900))
        .await
        .unwrap();
    assert_eq!(store.len().await.unwrap(), 2);
    assert!(store.load(&kept).await.unwrap().is_none());
    assert!(store.load(&later).await.unwrap().is_some());
    assert!(store.load(&newest).await.unwrap().is_some());
}

#[tokio::test]
async fn concurrent_requests_for_one_session_do_not_corrupt_it() {
    for store in Store::all() {
        let kind = store.name();
        let served = Served::start(app(&store.sessions())).await;
        let sid = pair(&get(&served, "/login?user=ada", None).await);
        // 64 writers at once, each setting the note to its own length.
        let writes = (1..=64).map(|len| {
            let served = &served;
            let sid = sid.as_str();
            async move { get(served, &format!("/note?len={len}"), Some(sid)).await }
        });
        for res in futures_util::future::join_all(writes).await {
            assert_eq!(res.status, 200, "{kind}");
            // Writing to a live session keeps its id.
            assert!(res.header("set-cookie").is_none(), "{kind}");
        }
        // One session, whole: the user from the login and one writer's note.
        assert_eq!(store.len().await, 1, "{kind}");
        assert_eq!(
            get(&served, "/me", Some(&sid)).await.text(),
            "ada",
            "{kind}"
        );
        let record = store.load(sid.strip_prefix("sid=").unwrap()).await.unwrap();
        let note = record.data["note"].as_str().unwrap();
        assert!(
            (1..=64).contains(&note.len()) && note.bytes().all(|b| b == b'n'),
            "{kind}: {note}"
        );
        served.stop().await;
    }
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

/// The jar's limits are checked where the session is extracted: a route
/// that takes the session answers `431` naming the limit, before its
/// handler goes on; one that never takes it does not read the cookies.
#[tokio::test]
async fn oversized_cookies_are_431_where_the_session_is_extracted() {
    for store in Store::all() {
        let served = Served::start(app(&store.sessions())).await;
        let big = format!("sid={}", "a".repeat(celer::cookie::MAX_COOKIE_HEADER_BYTES));
        let res = get(&served, "/me", Some(&big)).await;
        assert_eq!(res.status, 431, "{}", store.name());
        assert!(
            String::from_utf8_lossy(&res.body).contains("8192"),
            "{}: {:?}",
            store.name(),
            String::from_utf8_lossy(&res.body)
        );
        let many = (0..=celer::cookie::MAX_COOKIES)
            .map(|i| format!("c{i}=1"))
            .collect::<Vec<_>>()
            .join("; ");
        let res = get(&served, "/me", Some(&many)).await;
        assert_eq!(res.status, 431, "{}", store.name());
        let res = get(&served, "/plain", Some(&big)).await;
        assert_eq!(res.status, 200, "{}", store.name());
        assert_eq!(res.body, b"plain", "{}", store.name());
        served.stop().await;
    }
}

#[test]
fn a_busy_store_is_a_503_and_a_failed_one_a_500() {
    let busy = celer::session::StoreError::busy("the store's queue is full");
    assert!(busy.is_busy());
    assert_eq!(Error::from(busy).status_code(), 503);
    let failed = celer::session::StoreError::new("disk I/O error");
    assert!(!failed.is_busy());
    assert_eq!(Error::from(failed).status_code(), 500);
}

/// The session middleware in a scope, behind app middleware (which boxes
/// the session's future, holding the handler's in place) and with route
/// middleware after it: the session is saved after the handler on every
/// store, a save that waits (SQLite) included, and the response keeps
/// what the handler and the inner middleware set.
#[tokio::test]
async fn a_scoped_session_behind_other_middleware_is_saved_after_the_handler() {
    for store in Store::all() {
        let kind = store.name();
        let sessions = store.sessions();
        let mut app = App::new();
        app.middleware(|req: Request, next: celer::Next| async move {
            let mut res = next.run(req).await;
            res.headers_mut()
                .insert("x-outer", http::HeaderValue::from_static("1"));
            res
        });
        app.scope("/s", |s| {
            s.middleware(sessions.layer());
            s.get("/count", |mut req: Request| async move {
                let session = req.extract::<Session>().await?;
                let n = session.get::<u32>("n").await?.unwrap_or(0) + 1;
                session.insert("n", n).await?;
                Ok::<_, Error>(n.to_string())
            });
        });
        let served = Served::start(app).await;
        let first = get(&served, "/s/count", None).await;
        assert_eq!(first.body, b"1", "{kind}");
        assert_eq!(first.header("x-outer"), Some("1"), "{kind}");
        let cookie = pair(&first);
        for n in 2..=3 {
            let res = get(&served, "/s/count", Some(&cookie)).await;
            assert_eq!(res.body, n.to_string().as_bytes(), "{kind}");
            assert_eq!(res.header("x-outer"), Some("1"), "{kind}");
            // The same id is kept: only the data changed.
            assert!(res.header("set-cookie").is_none(), "{kind}");
        }
        served.stop().await;
    }
}

/// The jar and the session read the request's `Cookie` field once between
/// them, and only their own request's: a middleware that extracts the jar
/// and then replaces the field has the handler's jar and session read the
/// new one, and nothing one request read is seen by the next on the same
/// connection (curl reuses its connection across `--next`), on every
/// store.
#[tokio::test]
async fn the_jar_and_the_session_read_their_own_requests_cookies() {
    use celer::cookie::CookieJar;
    use celer::response::IntoResponse;

    async fn who(mut req: Request) -> Result<String, Error> {
        let jar = req.extract::<CookieJar>().await?;
        let session = req.extract::<Session>().await?;
        let user = session.get::<String>("user").await?;
        Ok(format!(
            "{} {} {}\n",
            jar.get("theme").unwrap_or("-"),
            jar.get("swap").is_some(),
            user.as_deref().unwrap_or("nobody")
        ))
    }
    for store in Store::all() {
        let mut ids = Vec::new();
        for user in ["ada", "bo"] {
            let mut record = Record::new();
            record.data.insert("user".into(), user.into());
            let ttl = Duration::from_secs(600);
            let id = match &store {
                Store::Memory(memory) => memory.save(None, &record, ttl).await,
                Store::Sqlite { store, .. } => store.save(None, &record, ttl).await,
            };
            ids.push(id.unwrap());
        }
        let (ada, bo) = (&ids[0], &ids[1]);
        let mut app = App::new();
        app.middleware(store.sessions().layer());
        // Reads the jar, then swaps the whole field for `sid=<swap>`.
        app.middleware(|mut req: Request, next: celer::Next| async move {
            let jar = match req.extract::<CookieJar>().await {
                Ok(jar) => jar,
                Err(refused) => return refused.into_response(),
            };
            if let Some(swap) = jar.get("swap") {
                let field = http::HeaderValue::from_str(&format!("sid={swap}")).unwrap();
                req.headers_mut().insert(http::header::COOKIE, field);
            }
            next.run(req).await
        });
        app.get("/who", who);
        let served = Served::start(app).await;
        let url = served.url("/who");
        let cookies = [
            format!("Cookie: theme=dark; sid={ada}"),
            format!("Cookie: theme=light; sid={ada}; swap={bo}"),
            format!("Cookie: theme=blue; sid={ada}"),
            format!("Cookie: sid={bo}"),
            "X-None: 1".to_owned(),
        ];
        let mut args: Vec<&str> = Vec::new();
        for (i, cookie) in cookies.iter().enumerate() {
            if i > 0 {
                args.push("--next");
            }
            args.extend(["-H", cookie.as_str(), url.as_str()]);
        }
        let out = curl(&args).await;
        assert_eq!(
            out,
            "dark false ada\n- false bo\nblue false ada\n- false bo\n- false nobody\n",
            "{}",
            store.name()
        );
        // Over the jar's limits at the first extraction: a `431`.
        let many = (0..=celer::cookie::MAX_COOKIES)
            .map(|i| format!("c{i}=1"))
            .collect::<Vec<_>>()
            .join("; ");
        let res = get(&served, "/who", Some(&many)).await;
        assert_eq!(res.status, 431, "{}", store.name());
        served.stop().await;
    }
}

//! Middleware order, status handlers, state, errors and tower layers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use celer::{App, Next, Request, Response};
use http::StatusCode;
use tower::{Layer, ServiceExt};

use crate::support::{block_on, get};

type Log = Arc<Mutex<Vec<String>>>;

fn tracer(
    log: &Log,
    name: &'static str,
) -> impl Fn(Request, Next) -> futures_util::future::BoxFuture<'static, Response> + Send + Sync + 'static
{
    let log = log.clone();
    move |req: Request, next: Next| {
        let log = log.clone();
        Box::pin(async move {
            log.lock().unwrap().push(format!("{name}>"));
            let res = next.run(req).await;
            log.lock().unwrap().push(format!("<{name}"));
            res
        })
    }
}

#[test]
fn middleware_runs_app_then_scope_then_route_then_handler() {
    block_on(async {
        let log: Log = Arc::default();
        let mut app = App::new();
        app.middleware(tracer(&log, "app1"));
        app.scope("/s", |s| {
            s.scope("/t", |t| {
                t.get("/r", |_req: Request| async { "ok" })
                    .middleware(tracer(&log, "route"));
                t.middleware(tracer(&log, "inner"));
            });
            s.middleware(tracer(&log, "outer"));
        });
        app.middleware(tracer(&log, "app2"));
        assert_eq!(get(&app, "/s/t/r").await.body, "ok");
        assert_eq!(
            *log.lock().unwrap(),
            [
                "app1>", "app2>", "outer>", "inner>", "route>", "<route", "<inner", "<outer",
                "<app2", "<app1"
            ]
        );
        log.lock().unwrap().clear();
        // App-level middleware also wraps routing misses; scope middleware does not.
        assert_eq!(get(&app, "/s/none").await.status, StatusCode::NOT_FOUND);
        assert_eq!(*log.lock().unwrap(), ["app1>", "app2>", "<app2", "<app1"]);
    });
}

#[test]
fn middleware_can_answer_without_next() {
    block_on(async {
        let mut app = App::new();
        app.get("/secret", |_req: Request| async { "secret" })
            .middleware(|req: Request, next: Next| async move {
                if req.headers().contains_key("authorization") {
                    next.run(req).await
                } else {
                    celer::response::status(StatusCode::UNAUTHORIZED)
                }
            });
        assert_eq!(get(&app, "/secret").await.status, StatusCode::UNAUTHORIZED);
    });
}

#[test]
fn status_handlers_render_errors_and_keep_required_headers() {
    block_on(async {
        let mut app = App::new();
        app.get("/only-get", |_req: Request| async { "x" });
        app.get("/boom", |_req: Request| async {
            Err::<&str, _>(celer::Error::internal("db down"))
        });
        app.status(404, |_res: Response| async {
            celer::response::Html("<h1>missing</h1>")
        });
        app.status(400..=499, |res: Response| async move {
            format!("client error {}", res.status().as_u16())
        });
        app.status(500..=599, |_res: Response| async { "sorry" });
        let reply = get(&app, "/nope").await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (StatusCode::NOT_FOUND, "<h1>missing</h1>")
        );
        let reply = crate::support::send(&app, "DELETE", "/only-get").await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(reply.body, "client error 405");
        assert_eq!(reply.header("allow"), Some("GET, HEAD, OPTIONS"));
        let reply = get(&app, "/boom").await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (StatusCode::INTERNAL_SERVER_ERROR, "sorry")
        );
    });
}

#[test]
fn internal_errors_do_not_leak_detail() {
    block_on(async {
        let mut app = App::new();
        app.get("/io", |_req: Request| async {
            let err = std::io::Error::other("secret path /etc/x");
            Err::<String, celer::Error>(err.into())
        });
        let reply = get(&app, "/io").await;
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!reply.body.contains("secret"));
    });
}

#[test]
fn redirects_carry_their_location() {
    block_on(async {
        let mut app = App::new();
        app.get("/old", |_req: Request| async {
            celer::response::Redirect::permanent("/new")
        });
        let reply = get(&app, "/old").await;
        assert_eq!(reply.status, StatusCode::PERMANENT_REDIRECT);
        assert_eq!(reply.header("location"), Some("/new"));
    });
}

#[test]
fn shared_state_and_extensions_reach_handlers() {
    block_on(async {
        #[derive(Clone)]
        struct Db(&'static str);
        let mut app = App::new();
        app.state(Db("main"));
        app.middleware(|mut req: Request, next: Next| async move {
            req.extensions_mut().insert(7u32);
            next.run(req).await
        });
        app.get("/", |req: Request| async move {
            format!(
                "{} {}",
                req.state::<Db>().map_or("none", |db| db.0),
                req.extensions().get::<u32>().unwrap()
            )
        });
        assert_eq!(get(&app, "/").await.body, "main 7");
    });
}

#[test]
fn app_works_under_tower_http_layers() {
    block_on(async {
        let mut app = App::new();
        app.get("/fast", |_req: Request| async { "fast" });
        app.get("/slow", |_req: Request| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            "slow"
        });
        let service = tower_http::trace::TraceLayer::new_for_http().layer(
            tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                Duration::from_secs(1),
            )
            .layer(app),
        );
        let req = http::Request::get("/fast")
            .body(celer::Body::empty())
            .unwrap();
        let res = service.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        tokio::time::pause();
        let req = http::Request::get("/slow")
            .body(celer::Body::empty())
            .unwrap();
        let res = service.oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::REQUEST_TIMEOUT);
    });
}

#[test]
fn app_is_a_cheap_send_sync_service() {
    fn assert_service<S>(_: &S)
    where
        S: tower::Service<
                http::Request<celer::Body>,
                Response = http::Response<celer::Body>,
                Error = std::convert::Infallible,
            > + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send,
    {
    }
    assert_service(&App::new());
}

//! App-level routing: methods, automatic HEAD/OPTIONS, 405, `OPTIONS *`,
//! `next` fallthrough, scopes and mounts.

use celer::{App, MethodSet, Next, Request, Response};
use http::{Method, StatusCode};

use crate::support::{block_on, get, send};

fn echo(name: &'static str) -> impl Fn(Request) -> std::future::Ready<String> + Clone {
    move |req: Request| {
        let params: Vec<String> = req.params().map(|(k, v)| format!("{k}={v}")).collect();
        std::future::ready(format!("{name} {}", params.join(",")).trim_end().to_owned())
    }
}

#[test]
fn methods_route_to_their_handlers() {
    block_on(async {
        let mut app = App::new();
        app.get("/r", echo("get"));
        app.post("/r", echo("post"));
        app.route(
            MethodSet::PUT | MethodSet::PATCH,
            "/r",
            echo("put-or-patch"),
        );
        app.route(Method::from_bytes(b"PURGE").unwrap(), "/r", echo("purge"));
        app.any("/any", echo("any"));
        assert_eq!(get(&app, "/r").await.body, "get");
        assert_eq!(send(&app, "POST", "/r").await.body, "post");
        assert_eq!(send(&app, "PATCH", "/r").await.body, "put-or-patch");
        assert_eq!(send(&app, "PURGE", "/r").await.body, "purge");
        assert_eq!(send(&app, "BREW", "/any").await.body, "any");
        assert_eq!(send(&app, "DELETE", "/any").await.body, "any");
    });
}

#[test]
fn head_is_answered_by_get_without_body() {
    block_on(async {
        let mut app = App::new();
        app.get("/page", |_req: Request| async { "0123456789" });
        app.get("/both", |_req: Request| async { "get" });
        app.head("/both", |_req: Request| async {
            (
                [(http::header::ETAG, http::HeaderValue::from_static("\"h\""))],
                "",
            )
        });
        let reply = send(&app, "HEAD", "/page").await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, "");
        assert_eq!(reply.header("content-length"), Some("10"));
        let reply = send(&app, "HEAD", "/both").await;
        assert_eq!(reply.header("etag"), Some("\"h\""));
    });
}

#[test]
fn wrong_method_is_405_with_allow() {
    block_on(async {
        let mut app = App::new();
        app.get("/r", echo("get"));
        app.post("/r", echo("post"));
        app.delete("/r/<int:id>", echo("del"));
        app.route(
            Method::from_bytes(b"PURGE").unwrap(),
            "/r/<int:id>",
            echo("purge"),
        );
        let reply = send(&app, "PUT", "/r").await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(reply.header("allow"), Some("GET, HEAD, POST, OPTIONS"));
        let reply = send(&app, "GET", "/r/1").await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(reply.header("allow"), Some("DELETE, OPTIONS, PURGE"));
        assert_eq!(get(&app, "/nothing").await.status, StatusCode::NOT_FOUND);
    });
}

#[test]
fn options_is_automatic_unless_a_route_takes_it() {
    block_on(async {
        let mut app = App::new();
        app.get("/r", echo("get"));
        app.put("/r", echo("put"));
        app.get("/own", echo("get"));
        app.options("/own", |_req: Request| async { "custom options" });
        let reply = send(&app, "OPTIONS", "/r").await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.header("allow"), Some("GET, HEAD, PUT, OPTIONS"));
        assert_eq!(reply.body, "");
        assert_eq!(send(&app, "OPTIONS", "/own").await.body, "custom options");
        assert_eq!(
            send(&app, "OPTIONS", "/none").await.status,
            StatusCode::NOT_FOUND
        );
    });
}

#[test]
fn options_asterisk_lists_every_method() {
    block_on(async {
        let mut app = App::new();
        app.get("/a", echo("a"));
        app.post("/b", echo("b"));
        let reply = send(&app, "OPTIONS", "*").await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.header("allow"), Some("GET, HEAD, POST, OPTIONS"));
        assert_eq!(send(&app, "GET", "*").await.status, StatusCode::BAD_REQUEST);
        app.asterisk(|_req: Request| async { StatusCode::NO_CONTENT });
        assert_eq!(
            send(&app, "OPTIONS", "*").await.status,
            StatusCode::NO_CONTENT
        );
    });
}

#[test]
fn next_passes_to_the_next_matching_route() {
    block_on(async {
        let mut app = App::new();
        app.get("/n/<int:id>", |req: Request, next: Next| async move {
            match req.param::<i64>("id") {
                Ok(id) if id % 2 == 0 => celer::response::text("even"),
                _ => next.run(req).await,
            }
        });
        app.post("/n/<int:id>", echo("post is skipped"));
        app.get("/n/<name>", |req: Request, next: Next| async move {
            next.run(req).await
        });
        app.get("/n/<path:rest>", echo("rest"));
        assert_eq!(get(&app, "/n/2").await.body, "even");
        // The catch-all sees its own params after the fallthrough.
        assert_eq!(get(&app, "/n/3").await.body, "rest rest=3");
        assert_eq!(get(&app, "/n/x").await.body, "rest rest=x");
        // HEAD falls through GET routes as well.
        assert_eq!(send(&app, "HEAD", "/n/3").await.status, StatusCode::OK);
    });
}

#[test]
fn next_after_the_last_route_is_404() {
    block_on(async {
        let mut app = App::new();
        app.get("/x", |req: Request, next: Next| async move {
            next.run(req).await
        });
        assert_eq!(get(&app, "/x").await.status, StatusCode::NOT_FOUND);
    });
}

#[test]
fn then_chains_handlers_on_one_route() {
    block_on(async {
        let mut app = App::new();
        app.get("/c", |mut req: Request, next: Next| async move {
            req.extensions_mut().insert("from first");
            next.run(req).await
        })
        .then(|req: Request| async move {
            req.extensions().get::<&str>().copied().unwrap_or("none")
        });
        assert_eq!(get(&app, "/c").await.body, "from first");
    });
}

#[test]
fn scopes_prefix_rules_and_nest() {
    block_on(async {
        let mut app = App::new();
        app.scope("/admin", |admin| {
            admin.get("", echo("admin root"));
            admin.get("/users/<int:id>", echo("admin user"));
            admin.scope("/org/<org>", |org| {
                org.get("/repos/<repo>", echo("repo"));
            });
        });
        assert_eq!(get(&app, "/admin").await.body, "admin root");
        assert_eq!(get(&app, "/admin/users/4").await.body, "admin user id=4");
        assert_eq!(
            get(&app, "/admin/org/acme/repos/web").await.body,
            "repo org=acme,repo=web"
        );
        assert_eq!(get(&app, "/users/4").await.status, StatusCode::NOT_FOUND);
    });
}

#[test]
fn mounted_apps_keep_their_routes_names_and_middleware() {
    block_on(async {
        let mut api = App::new();
        api.get("/items/<int:id>", echo("item"));
        api.middleware(|req: Request, next: Next| async move {
            let mut res: Response = next.run(req).await;
            res.headers_mut()
                .insert("x-api", http::HeaderValue::from_static("1"));
            res
        });
        let mut app = App::new();
        app.get("/", echo("home"));
        let mut named = api.clone();
        named.get("/named", echo("named")).name("named");
        app.mount("/api/v1", named);
        app.mount("/api/v2", {
            let mut v2 = App::new();
            v2.mount("/inner", api);
            v2
        });
        let reply = get(&app, "/api/v1/items/9").await;
        assert_eq!(
            (reply.body.as_str(), reply.header("x-api")),
            ("item id=9", Some("1"))
        );
        assert_eq!(get(&app, "/api/v2/inner/items/9").await.body, "item id=9");
        assert_eq!(get(&app, "/").await.header("x-api"), None);
        assert_eq!(app.url_for("named", &[]).unwrap(), "/api/v1/named");
    });
}

#[test]
fn regex_routes_are_served() {
    block_on(async {
        let mut app = App::new();
        app.scope("/files", |files| {
            files.regex(
                MethodSet::GET,
                r"/(?P<name>[a-z]+)\.(?P<ext>txt|md)",
                echo("file"),
            );
        });
        assert_eq!(
            get(&app, "/files/readme.md").await.body,
            "file name=readme,ext=md"
        );
        assert_eq!(
            get(&app, "/files/readme.rs").await.status,
            StatusCode::NOT_FOUND
        );
    });
}

#[test]
fn int_params_that_overflow_do_not_match() {
    block_on(async {
        let mut app = App::new();
        app.get("/n/<int:id>", echo("n"));
        assert_eq!(
            get(&app, "/n/99999999999999999999").await.status,
            StatusCode::NOT_FOUND
        );
    });
}

#[test]
fn static_routes_keep_priority_and_fall_through_with_next() {
    // Static rules are looked up by exact path before the tree walk; the
    // answers must be those of the walk.
    block_on(async {
        let mut app = App::new();
        app.post("/users/new", echo("static post"));
        app.get("/users/<name>", echo("typed"));
        app.get("/users/me", |req: Request, next: Next| async move {
            next.run(req).await
        });
        app.get("/users/me", echo("static second"));
        app.get("/files/<path:rest>", echo("tail"));
        app.get("/files/a/b", |req: Request, next: Next| async move {
            next.run(req).await
        });
        // A static rule for another method leaves the path to typed rules.
        assert_eq!(get(&app, "/users/new").await.body, "typed name=new");
        assert_eq!(send(&app, "POST", "/users/new").await.body, "static post");
        // `next` goes on to the next static rule, then to the typed one.
        assert_eq!(get(&app, "/users/me").await.body, "static second");
        assert_eq!(get(&app, "/files/a/b").await.body, "tail rest=a/b");
        // HEAD and OPTIONS still see every matching rule.
        let reply = send(&app, "OPTIONS", "/users/new").await;
        assert_eq!(reply.header("allow"), Some("GET, HEAD, POST, OPTIONS"));
        assert_eq!(send(&app, "HEAD", "/users/me").await.status, StatusCode::OK);
        assert_eq!(
            send(&app, "DELETE", "/users/me").await.status,
            StatusCode::METHOD_NOT_ALLOWED
        );
        // Paths that only differ after the eighth byte, past the linear scan.
        for n in 0..20 {
            app.get(&format!("/static/page-{n:02}"), echo("page"));
        }
        assert_eq!(get(&app, "/static/page-07").await.body, "page");
        assert_eq!(
            get(&app, "/static/page-20").await.status,
            StatusCode::NOT_FOUND
        );
    });
}

#[test]
fn static_routes_answer_each_method_from_the_first_route_that_takes_it() {
    // Static rules are routed from a per-method table when the app has no
    // app-level middleware; the answers must not depend on that.
    async fn pass(req: Request, next: Next) -> Response {
        next.run(req).await
    }
    for with_middleware in [false, true] {
        block_on(async {
            let mut app = App::new();
            if with_middleware {
                app.middleware(pass);
            }
            app.any("/m", echo("any"));
            app.get("/m", echo("get"));
            app.post("/n", echo("post"));
            app.any("/n", echo("any"));
            app.route(Method::from_bytes(b"PURGE").unwrap(), "/n", echo("purge"));
            assert_eq!(get(&app, "/m").await.body, "any");
            assert_eq!(send(&app, "DELETE", "/m").await.body, "any");
            assert_eq!(get(&app, "/n").await.body, "any");
            assert_eq!(send(&app, "POST", "/n").await.body, "post");
            assert_eq!(send(&app, "PURGE", "/n").await.body, "any");
            assert_eq!(send(&app, "HEAD", "/n").await.status, StatusCode::OK);
        });
    }
}

#[test]
fn handlers_that_wait_are_polled_until_they_answer() {
    // A small handler future is kept in the app's response future, a large
    // one is boxed; both must be woken and polled again.
    block_on(async {
        let mut app = App::new();
        app.get("/small", |_req: Request| async {
            tokio::task::yield_now().await;
            "small"
        });
        app.get("/large", |_req: Request| async {
            let state = [7u8; 256];
            tokio::task::yield_now().await;
            format!(
                "large {}",
                state.iter().map(|b| usize::from(*b)).sum::<usize>()
            )
        });
        assert_eq!(get(&app, "/small").await.body, "small");
        assert_eq!(get(&app, "/large").await.body, "large 1792");
    });
}

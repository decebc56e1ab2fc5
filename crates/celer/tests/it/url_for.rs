//! Reverse routing: errors, scopes, mounts, and the round-trip property.

use celer::{App, Request};
use http::StatusCode;
use proptest::prelude::*;

use crate::support::{block_on, get};

fn echo(name: &'static str) -> impl Fn(Request) -> std::future::Ready<String> + Clone {
    move |req: Request| {
        let params: Vec<String> = req.params().map(|(k, v)| format!("{k}={v}")).collect();
        std::future::ready(format!("{name}|{}", params.join("|")))
    }
}

fn app() -> App {
    let mut app = App::new();
    app.get("/users/<int:id>", echo("user")).name("user");
    app.get("/users/<int:id>/posts/<slug>", echo("post"))
        .name("post");
    app.get("/static/<path:file>", echo("static"))
        .name("static");
    app.get("/ids/<uuid:u>/<uint:n>", echo("ids")).name("ids");
    app.get("/files/<name>.<ext>", echo("file")).name("file");
    app.scope("/admin", |admin| {
        admin.get("/orgs/<org>", echo("org")).name("org");
    });
    let mut api = App::new();
    api.get("/items/<int:id>", echo("item")).name("item");
    app.mount("/api/<version>", api);
    app
}

#[test]
fn url_for_builds_encoded_urls_through_scopes_and_mounts() {
    let app = app();
    assert_eq!(app.url_for("user", &[("id", &-3)]).unwrap(), "/users/-3");
    assert_eq!(
        app.url_for("post", &[("id", &1), ("slug", &"a b?c")])
            .unwrap(),
        "/users/1/posts/a%20b%3Fc"
    );
    assert_eq!(
        app.url_for("static", &[("file", &"css/a b.css")]).unwrap(),
        "/static/css/a%20b.css"
    );
    assert_eq!(
        app.url_for("org", &[("org", &"acme")]).unwrap(),
        "/admin/orgs/acme"
    );
    assert_eq!(
        app.url_for("item", &[("version", &"v1"), ("id", &2)])
            .unwrap(),
        "/api/v1/items/2"
    );
}

#[test]
fn url_for_rejects_bad_params() {
    let app = app();
    assert!(app.url_for("nope", &[]).unwrap_err().is_unknown_route());
    assert!(app.url_for("user", &[]).unwrap_err().is_missing_param());
    assert!(
        app.url_for("user", &[("id", &"x")])
            .unwrap_err()
            .is_invalid_param()
    );
    assert!(
        app.url_for("user", &[("id", &1), ("extra", &2)])
            .unwrap_err()
            .is_unexpected_param()
    );
    assert!(
        app.url_for("post", &[("id", &1), ("slug", &"")])
            .unwrap_err()
            .is_invalid_param()
    );
    assert!(
        app.url_for("ids", &[("u", &"nope"), ("n", &1)])
            .unwrap_err()
            .is_invalid_param()
    );
    // `a.b` + `c` would parse back as `a.b` + `c`, but `a` + `b.c` would not.
    assert!(
        app.url_for("file", &[("name", &"a"), ("ext", &"b.c")])
            .unwrap_err()
            .is_invalid_param()
    );
}

#[test]
fn url_for_is_available_to_handlers() {
    block_on(async {
        let mut app = App::new();
        app.get("/users/<int:id>", echo("user")).name("user");
        app.post("/users", |req: Request| async move {
            match req.url_for("user", &[("id", &42)]) {
                Ok(url) => Ok(celer::response::Redirect::with_status(
                    StatusCode::CREATED,
                    url,
                )),
                Err(err) => Err(celer::Error::internal(err)),
            }
        });
        let reply = crate::support::send(&app, "POST", "/users").await;
        assert_eq!(reply.status, StatusCode::CREATED);
        assert_eq!(reply.header("location"), Some("/users/42"));
    });
}

fn segment() -> impl Strategy<Value = String> {
    // Any non-empty text, including `/`, `%`, spaces and non-ASCII.
    "[a-zA-Z0-9 /%?#._~é-]{1,12}"
}

fn uuid() -> impl Strategy<Value = String> {
    "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
}

type UrlParam<'a> = (&'a str, &'a dyn std::fmt::Display);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_url_built_routes_back_to_its_route_with_its_params(
        id in any::<i64>(),
        n in any::<u64>(),
        slug in segment(),
        org in segment(),
        version in segment(),
        file in "[a-z0-9 %/é]{1,20}",
        u in uuid(),
    ) {
        let app = app();
        let cases: Vec<(&str, Vec<UrlParam<'_>>)> = vec![
            ("user", vec![("id", &id)]),
            ("post", vec![("id", &id), ("slug", &slug)]),
            ("static", vec![("file", &file)]),
            ("ids", vec![("u", &u), ("n", &n)]),
            ("org", vec![("org", &org)]),
            ("item", vec![("version", &version), ("id", &id)]),
        ];
        for (name, params) in cases {
            let url = app.url_for(name, &params).unwrap();
            let reply = block_on(get(&app, &url));
            let expected: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            prop_assert_eq!(reply.body, format!("{name}|{}", expected.join("|")), "url {}", url);
        }
    }
}

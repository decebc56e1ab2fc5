//! Scopes have their own type: a scope's body limit, state, types and
//! trailing-slash policy stay inside it. The trailing-slash policy.

use celer::app::TrailingSlash;
use celer::test::TestClient;
use celer::{App, Request};
use http::StatusCode;

struct Role(&'static str);

async fn echo(mut req: Request) -> Result<String, celer::Error> {
    Ok(req.text().await?)
}

async fn role(req: Request) -> Result<&'static str, celer::Error> {
    Ok(req.state::<Role>()?.0)
}

fn app() -> App {
    let mut app = App::new();
    app.state(Role("guest"));
    app.scope("/admin", |admin| {
        admin.state(Role("admin")).body_limit(8);
        admin.register_type::<u8>("byte", "[0-9]{1,3}");
        admin.post("/echo", echo);
        admin.get("/role", role);
        admin.get("/b/<byte:b>", |req: Request| async move {
            req.param::<u8>("b").map(|b| b.to_string())
        });
        admin.scope("/deep", |deep| {
            deep.body_limit(4);
            deep.post("/echo", echo);
            deep.get("/role", role);
        });
        // A route's own limit beats its scope's.
        admin.post("/big", echo).body_limit(64);
    });
    app.post("/echo", echo);
    app.get("/role", role);
    app
}

#[tokio::test(flavor = "current_thread")]
async fn a_scopes_limit_should_not_leak() {
    let client = TestClient::new(app());
    let body = "0123456789";
    assert_eq!(
        client.post("/admin/echo").body(body).await.status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(
        client.post("/admin/echo").body("01234567").await.text(),
        "01234567"
    );
    assert_eq!(
        client.post("/admin/deep/echo").body("01234").await.status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(client.post("/admin/big").body(body).await.text(), body);
    // Outside the scope: the app's default limit.
    assert_eq!(client.post("/echo").body(body).await.text(), body);
}

#[tokio::test(flavor = "current_thread")]
async fn a_scopes_state_should_not_leak() {
    let client = TestClient::new(app());
    assert_eq!(client.get("/admin/role").await.text(), "admin");
    assert_eq!(client.get("/admin/deep/role").await.text(), "admin");
    assert_eq!(client.get("/role").await.text(), "guest");
}

#[test]
#[should_panic(expected = "unknown parameter type \"byte\"")]
fn a_scopes_types_should_not_leak() {
    let mut app = app();
    assert!(app.url_for("nothing", &[]).is_err());
    app.get("/b/<byte:b>", |_req: Request| async { "" });
}

#[tokio::test(flavor = "current_thread")]
async fn a_scopes_type_should_serve_its_rules() {
    let client = TestClient::new(app());
    assert_eq!(client.get("/admin/b/200").await.text(), "200");
    assert_eq!(
        client.get("/admin/b/2000").await.status(),
        StatusCode::NOT_FOUND
    );
}

fn slashes(policy: Option<TrailingSlash>) -> App {
    let mut app = App::new();
    if let Some(policy) = policy {
        app.trailing_slash(policy);
    }
    app.get("/notes", |_req: Request| async { "list" });
    app.post("/notes", |mut req: Request| async move { req.text().await });
    app.get("/dir/", |_req: Request| async { "dir" });
    app.scope("/api", |api| {
        api.trailing_slash(TrailingSlash::Ignore);
        api.get("/items", |_req: Request| async { "items" });
    });
    app
}

#[tokio::test(flavor = "current_thread")]
async fn strict_should_be_the_default() {
    let client = TestClient::new(slashes(None));
    assert_eq!(client.get("/notes/").await.status(), StatusCode::NOT_FOUND);
    assert_eq!(client.get("/dir").await.status(), StatusCode::NOT_FOUND);
    // The scope chose for its routes.
    assert_eq!(client.get("/api/items/").await.text(), "items");
    assert_eq!(client.get("/").await.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "current_thread")]
async fn redirect_should_answer_308_to_the_routes_path() {
    let client = TestClient::new(slashes(Some(TrailingSlash::Redirect)));
    let res = client.post("/notes/?draft=1").body("x").await;
    assert_eq!(res.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(res.header("location"), Some("/notes?draft=1"));
    let res = client.get("/dir").await;
    assert_eq!(res.header("location"), Some("/dir/"));
    assert_eq!(client.get("/api/items/").await.text(), "items");
    assert_eq!(
        client.get("/elsewhere/").await.status(),
        StatusCode::NOT_FOUND
    );
}

#[tokio::test(flavor = "current_thread")]
async fn ignore_should_let_the_route_answer() {
    let client = TestClient::new(slashes(Some(TrailingSlash::Ignore)));
    assert_eq!(client.get("/notes/").await.text(), "list");
    assert_eq!(client.post("/notes/").body("body").await.text(), "body");
    assert_eq!(client.get("/dir").await.text(), "dir");
    // A method the route does not take is still a 405 with its `Allow`.
    let res = client.delete("/notes/").await;
    assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
}

//! Status handlers run inside the app middleware, keep the headers that
//! middleware and handlers set, and replace only bodies nobody chose
//! (unless registered with `status_all`); problem+json rendering.

use celer::response::Json;
use celer::{App, Next, Request, Response};
use http::{HeaderValue, StatusCode};

use crate::support::get;

async fn request_id(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    // What the middleware saw of the body: the status handler's page.
    let rendered = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap_or("").to_owned())
        .unwrap_or_default();
    res.headers_mut()
        .insert("x-request-id", HeaderValue::from_static("r-1"));
    res.headers_mut()
        .insert("x-seen-type", HeaderValue::from_str(&rendered).unwrap());
    res
}

fn app() -> App {
    let mut app = App::new();
    app.middleware(request_id);
    app.status(404, |_res: Response| async {
        celer::response::html("<h1>not here</h1>")
    });
    app.get("/own-404", |_req: Request| async {
        (
            StatusCode::NOT_FOUND,
            [(http::header::CACHE_CONTROL, "no-store")],
            Json(serde_json::json!({"error": "no such note"})),
        )
    });
    app.get("/bare-404", |_req: Request| async {
        ([("x-from-handler", "yes")], StatusCode::NOT_FOUND)
    });
    app.post("/only-post", |_req: Request| async { "posted" });
    app
}

#[tokio::test(flavor = "current_thread")]
async fn middleware_headers_should_survive_a_rendered_404() {
    let reply = get(&app(), "/nowhere").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.body, "<h1>not here</h1>");
    assert_eq!(reply.header("x-request-id"), Some("r-1"));
    // The middleware ran after the status handler: it saw the page.
    assert_eq!(
        reply.header("x-seen-type"),
        Some("text/html; charset=utf-8")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_body_the_handler_chose_should_be_kept() {
    let reply = get(&app(), "/own-404").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.body, r#"{"error":"no such note"}"#);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    assert_eq!(reply.header("x-request-id"), Some("r-1"));
}

#[tokio::test(flavor = "current_thread")]
async fn a_bare_status_should_be_rendered_keeping_the_handlers_headers() {
    let reply = get(&app(), "/bare-404").await;
    assert_eq!(reply.body, "<h1>not here</h1>");
    assert_eq!(reply.header("x-from-handler"), Some("yes"));
    assert_eq!(reply.header("x-request-id"), Some("r-1"));
}

#[tokio::test(flavor = "current_thread")]
async fn status_all_should_replace_chosen_bodies_too() {
    let mut app = app();
    app.status_all(404, |_res: Response| async { "replaced" });
    // The first matching handler wins: `status` came first.
    assert_eq!(
        get(&app, "/own-404").await.body,
        r#"{"error":"no such note"}"#
    );
    let mut app = App::new();
    app.status_all(404, |_res: Response| async { "replaced" });
    app.get("/own-404", |_req: Request| async {
        (StatusCode::NOT_FOUND, Json(1))
    });
    let reply = get(&app, "/own-404").await;
    assert_eq!(reply.body, "replaced");
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_rendered_405_should_keep_allow() {
    let mut app = app();
    app.status(405, |res: Response| async move {
        format!("use {}", res.headers()["allow"].to_str().unwrap_or(""))
    });
    let reply = get(&app, "/only-post").await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(reply.body, "use POST, OPTIONS");
    assert_eq!(reply.header("allow"), Some("POST, OPTIONS"));
}

#[tokio::test(flavor = "current_thread")]
async fn problem_details_should_render_rejections_with_their_detail() {
    let mut app = App::new();
    app.problem_details(true);
    app.post("/notes", |mut req: Request| async move {
        #[derive(serde::Deserialize)]
        struct Note {
            #[allow(dead_code)]
            text: String,
        }
        req.json::<Note>().await.map(|_| "ok")
    });
    app.get("/gone", |_req: Request| async {
        Err::<(), _>(celer::Error::status(
            StatusCode::GONE,
            format!("note {} was deleted", 4),
        ))
    });
    app.get("/boom", |_req: Request| async {
        Err::<(), _>(celer::Error::internal("secret database detail"))
    });
    app.get("/mine", |_req: Request| async {
        (StatusCode::CONFLICT, "my own words")
    });

    let builder = http::Request::post("/notes").header("content-type", "application/json");
    let reply = crate::support::send_with(&app, builder, celer::Body::from(r#"{"text": 5}"#)).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        reply.header("content-type"),
        Some("application/problem+json")
    );
    let problem: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(problem["status"], 422);
    assert_eq!(problem["title"], "Unprocessable Entity");
    assert_eq!(problem["type"], "about:blank");
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("json does not match the expected shape: invalid type: integer `5`"),
        "{detail}"
    );

    let problem: serde_json::Value = serde_json::from_str(&get(&app, "/gone").await.body).unwrap();
    assert_eq!(problem["detail"], "note 4 was deleted");
    let reply = get(&app, "/boom").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!reply.body.contains("secret"), "{}", reply.body);
    assert!(reply.body.contains(r#""status":500"#), "{}", reply.body);
    let reply = get(&app, "/mine").await;
    assert_eq!(reply.body, "my own words");
}

#[tokio::test(flavor = "current_thread")]
async fn rejection_detail_should_be_readable_without_display() {
    let req = Request::builder()
        .method("POST")
        .uri("/")
        .header("content-type", "application/json")
        .body("{")
        .unwrap();
    let mut req = req;
    let err = req.json::<serde_json::Value>().await.unwrap_err();
    assert_eq!(err.status(), StatusCode::BAD_REQUEST);
    assert_eq!(err.body_text(), "malformed json");
    assert!(
        err.detail()
            .starts_with("malformed json: EOF while parsing"),
        "{}",
        err.detail()
    );
}

#[tokio::test(flavor = "current_thread")]
async fn header_arrays_should_take_strings_and_refuse_bad_fields_with_500() {
    use celer::response::IntoResponse;
    let mut app = App::new();
    app.get("/notes/<uint:id>", |_req: Request| async { "" })
        .name("note");
    app.post("/notes", |req: Request| async move {
        let location = req.url_for("note", &[("id", &7)])?;
        Ok::<_, celer::Error>((
            StatusCode::CREATED,
            [(http::header::LOCATION, location)],
            "made",
        ))
    });
    let reply = crate::support::send(&app, "POST", "/notes").await;
    assert_eq!(reply.status, StatusCode::CREATED);
    assert_eq!(reply.header("location"), Some("/notes/7"));
    assert_eq!(reply.body, "made");

    let res = (StatusCode::CREATED, [("bad name", "v")], "x").into_response();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let res = ([("x-ok", "line\nbreak")], "x").into_response();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let res = (StatusCode::SEE_OTHER, [("location", "/there")]).into_response();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(res.headers()["location"], "/there");
}

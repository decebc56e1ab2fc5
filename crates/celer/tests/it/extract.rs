//! Extractors and body limits.

use celer::{App, Body, Request};
use http::StatusCode;

use crate::support::{block_on, send_with};

fn post(uri: &str, content_type: &str) -> http::request::Builder {
    http::Request::post(uri).header("content-type", content_type)
}

fn app() -> App {
    let mut app = App::new();
    app.body_limit(16);
    app.post("/bytes", |mut req: Request| async move {
        req.bytes().await.map(|b| b.len().to_string())
    });
    app.post("/big", |mut req: Request| async move {
        req.bytes().await.map(|b| b.len().to_string())
    })
    .body_limit(64);
    app.post("/json", |mut req: Request| async move {
        #[derive(serde::Deserialize)]
        struct Item {
            name: String,
        }
        req.json::<Item>().await.map(|item| item.name)
    });
    app.post("/form", |mut req: Request| async move {
        #[derive(serde::Deserialize)]
        struct Login {
            user: String,
        }
        req.form::<Login>().await.map(|login| login.user)
    });
    app.get("/query", |req: Request| async move {
        #[derive(serde::Deserialize)]
        struct Page {
            n: u32,
        }
        req.query::<Page>().map(|page| page.n.to_string())
    });
    // A `string` parameter read as a non-number type: a value it does
    // not parse is the client's error.
    app.get("/p/<id>", |req: Request| async move {
        req.param::<std::net::Ipv4Addr>("id")
            .map(|ip| ip.to_string())
    });
    app.get("/missing", |req: Request| async move {
        req.param::<u8>("nope").map(|n| n.to_string())
    });
    app
}

fn stream(chunks: &[&'static str]) -> Body {
    let chunks: Vec<Result<&'static str, std::io::Error>> = chunks.iter().map(|c| Ok(*c)).collect();
    Body::from_stream(futures_util::stream::iter(chunks))
}

#[test]
fn body_at_the_limit_is_read_and_one_more_byte_is_413() {
    block_on(async {
        let app = app();
        let at_limit = send_with(
            &app,
            post("/bytes", "text/plain"),
            Body::from("0123456789abcdef"),
        )
        .await;
        assert_eq!(
            (at_limit.status, at_limit.body.as_str()),
            (StatusCode::OK, "16")
        );
        let over = send_with(
            &app,
            post("/bytes", "text/plain"),
            Body::from("0123456789abcdefg"),
        )
        .await;
        assert_eq!(over.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(over.body, "payload too large");
    });
}

#[test]
fn streamed_body_over_the_limit_is_413() {
    block_on(async {
        let app = app();
        let ok = send_with(
            &app,
            post("/bytes", "text/plain"),
            stream(&["01234567", "89abcdef"]),
        )
        .await;
        assert_eq!(ok.body, "16");
        let over = send_with(
            &app,
            post("/bytes", "text/plain"),
            stream(&["01234567", "89abcdef", "!"]),
        )
        .await;
        assert_eq!(over.status, StatusCode::PAYLOAD_TOO_LARGE);
    });
}

#[test]
fn route_limit_overrides_the_app_default() {
    block_on(async {
        let app = app();
        let body = "x".repeat(64);
        let ok = send_with(&app, post("/big", "text/plain"), Body::from(body.clone())).await;
        assert_eq!(ok.body, "64");
        let over = send_with(&app, post("/big", "text/plain"), Body::from(body + "x")).await;
        assert_eq!(over.status, StatusCode::PAYLOAD_TOO_LARGE);
    });
}

#[test]
fn json_rejections_have_fixed_statuses() {
    block_on(async {
        let app = app();
        let ok = send_with(
            &app,
            post("/json", "application/json"),
            Body::from(r#"{"name":"a"}"#),
        )
        .await;
        assert_eq!(ok.body, "a");
        let cases = [
            (
                "text/plain",
                r#"{"name":"a"}"#,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ),
            ("application/json", r#"{"name":"#, StatusCode::BAD_REQUEST),
            (
                "application/json",
                r#"{"nom":"a"}"#,
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (
                "application/problem+json",
                r#"{"name":"b"}"#,
                StatusCode::OK,
            ),
            (
                "application/json",
                r#"{"name":"0123456789abcdef"}"#,
                StatusCode::PAYLOAD_TOO_LARGE,
            ),
        ];
        for (content_type, body, status) in cases {
            let reply = send_with(&app, post("/json", content_type), Body::from(body)).await;
            assert_eq!(reply.status, status, "{content_type} {body}");
        }
    });
}

#[test]
fn form_query_and_params_extract() {
    block_on(async {
        let app = app();
        let form = send_with(
            &app,
            post("/form", "application/x-www-form-urlencoded"),
            Body::from("user=b%20c"),
        )
        .await;
        assert_eq!(form.body, "b c");
        let form = send_with(&app, post("/form", "text/plain"), Body::from("user=b")).await;
        assert_eq!(form.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let query = send_with(&app, http::Request::get("/query?n=5"), Body::empty()).await;
        assert_eq!(query.body, "5");
        let query = send_with(&app, http::Request::get("/query?n=x"), Body::empty()).await;
        assert_eq!(query.status, StatusCode::BAD_REQUEST);
        let param = send_with(&app, http::Request::get("/p/10.0.0.1"), Body::empty()).await;
        assert_eq!(param.body, "10.0.0.1");
        let param = send_with(&app, http::Request::get("/p/10.0.0.300"), Body::empty()).await;
        assert_eq!(param.status, StatusCode::BAD_REQUEST);
        let missing = send_with(&app, http::Request::get("/missing"), Body::empty()).await;
        assert_eq!(missing.status, StatusCode::INTERNAL_SERVER_ERROR);
    });
}

#[test]
fn params_are_percent_decoded_and_cookies_read() {
    block_on(async {
        let mut app = App::new();
        app.get("/s/<name>", |req: Request| async move {
            format!(
                "{}|{}",
                req.param_str("name").unwrap(),
                req.cookie("sid").unwrap_or("-")
            )
        });
        let reply = send_with(
            &app,
            http::Request::get("/s/a%20b%2Fc").header("cookie", "x=1; sid=abc"),
            Body::empty(),
        )
        .await;
        assert_eq!(reply.body, "a b/c|abc");
    });
}

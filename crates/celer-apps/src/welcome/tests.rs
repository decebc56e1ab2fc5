//! The welcome site called directly.

use http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use tower_service::Service;

use super::Welcome;

async fn request(method: Method, path: &str) -> (StatusCode, http::HeaderMap, bytes::Bytes) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .body(())
        .unwrap();
    let (parts, body) = Welcome::new().call(req).await.unwrap().into_parts();
    (
        parts.status,
        parts.headers,
        body.collect().await.unwrap().to_bytes(),
    )
}

#[tokio::test]
async fn index_and_assets() {
    let (status, headers, body) = request(Method::GET, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    assert_eq!(
        headers[header::CONTENT_LENGTH],
        body.len().to_string().as_str()
    );
    assert!(std::str::from_utf8(&body).unwrap().contains("Celer"));
    let (status, headers, _) = request(Method::GET, "/style.css").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/css; charset=utf-8");
    let (status, _, _) = request(Method::GET, "/index.html").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn same_rules_as_the_static_site() {
    let table = [
        (Method::GET, "/nope", StatusCode::NOT_FOUND),
        (Method::GET, "/style.css/", StatusCode::NOT_FOUND),
        (Method::GET, "/../style.css", StatusCode::BAD_REQUEST),
        (Method::GET, "/.env", StatusCode::FORBIDDEN),
        (Method::GET, "/%2e", StatusCode::MOVED_PERMANENTLY),
        (Method::POST, "/", StatusCode::METHOD_NOT_ALLOWED),
    ];
    for (method, path, want) in table {
        assert_eq!(request(method, path).await.0, want, "{path}");
    }
}

#[tokio::test]
async fn head_keeps_the_length() {
    let (_, get_headers, _) = request(Method::GET, "/").await;
    let (status, headers, body) = request(Method::HEAD, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.is_empty());
    assert_eq!(
        headers[header::CONTENT_LENGTH],
        get_headers[header::CONTENT_LENGTH]
    );
}

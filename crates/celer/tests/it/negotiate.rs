//! Content negotiation over the wire: curl and Python clients against
//! routes that offer representations.

use celer::middleware::negotiate::{Negotiate, Negotiated};
use celer::{App, Request, Response};

use crate::support::{block_on, send_with};
use crate::wire::{Served, curl, python};

async fn describe(req: Request) -> Response {
    let chosen = req
        .extensions()
        .get::<Negotiated>()
        .cloned()
        .unwrap_or_default();
    let text = format!(
        "{} {} {}",
        chosen.media_type().unwrap_or("-"),
        chosen.charset().unwrap_or("-"),
        chosen.language().unwrap_or("-")
    );
    let mut res = Response::new(text.into());
    res.headers_mut().remove("content-type");
    res
}

fn app() -> App {
    let mut app = App::new();
    // HTML first; not final, so other requests fall through.
    app.get("/doc", |_req: Request| async {
        celer::response::html("<p>doc</p>")
    })
    .middleware(Negotiate::new().media_types(["text/html"]));
    app.get("/doc", describe).middleware(
        Negotiate::new()
            .media_types(["application/json", "text/plain"])
            .charsets(["utf-8", "iso-8859-1"])
            .languages(["en-US", "fr"])
            .final_route(),
    );
    // Not final and nothing after it: falls through to 404.
    app.get("/only-json", describe)
        .middleware(Negotiate::new().media_types(["application/json"]));
    app
}

#[tokio::test]
async fn curl_gets_the_representation_it_prefers_with_vary() {
    let served = Served::start(app()).await;
    let url = served.url("/doc");
    let out = curl(&["-i", "-H", "Accept: text/html;q=0.9, */*;q=0.1", &url]).await;
    assert!(out.contains("<p>doc</p>"), "{out}");
    assert!(out.contains("vary: Accept\r\n"), "{out}");

    let accept = "Accept: text/html;q=0.2, text/plain;q=0.8, application/json;q=0.5";
    let out = curl(&[
        "-i",
        "-H",
        accept,
        "-H",
        "Accept-Language: fr-CA, fr;q=0.9",
        &url,
    ])
    .await;
    // HTML was acceptable but the first route is chosen only by its own
    // offers: it serves HTML whenever HTML is acceptable at all.
    assert!(out.contains("<p>doc</p>"), "{out}");

    let accept = "Accept: text/html;q=0, text/plain;q=0.8, application/json;q=0.5";
    let out = curl(&[
        "-i",
        "-H",
        accept,
        "-H",
        "Accept-Language: fr-CA, fr;q=0.9",
        &url,
    ])
    .await;
    assert!(out.ends_with("text/plain utf-8 fr"), "{out}");
    assert!(
        out.contains("content-type: text/plain; charset=utf-8\r\n"),
        "{out}"
    );
    assert!(out.contains("content-language: fr\r\n"), "{out}");
    assert!(
        out.contains("vary: Accept\r\nvary: Accept-Charset\r\nvary: Accept-Language\r\n"),
        "{out}"
    );
    served.stop().await;
}

#[tokio::test]
async fn final_route_answers_406_listing_what_is_available() {
    let served = Served::start(app()).await;
    let script = r#"
import sys, http.client
conn = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=5)
conn.request("GET", "/doc", headers={"Accept": "image/png, text/html;q=0"})
r = conn.getresponse()
print(r.status, r.getheader("content-type"), r.getheader("vary"))
print(r.read().decode())
conn.request("GET", "/doc", headers={"Accept": "text/plain", "Accept-Charset": "utf-16, *;q=0"})
r = conn.getresponse()
print(r.status, r.read().decode().splitlines()[2])
"#;
    let port = served.addr.port().to_string();
    let out = python(script, &["127.0.0.1", &port]).await;
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("406 text/plain; charset=utf-8 Accept, Accept-Charset, Accept-Language")
    );
    assert_eq!(lines.next(), Some("not acceptable; available:"));
    assert_eq!(lines.next(), Some("Accept: application/json, text/plain"));
    assert_eq!(lines.next(), Some("Accept-Charset: utf-8, iso-8859-1"));
    assert_eq!(lines.next(), Some("Accept-Language: en-US, fr"));
    assert_eq!(lines.next(), Some(""));
    assert_eq!(lines.next(), Some("406 Accept-Charset: utf-8, iso-8859-1"));
    served.stop().await;
}

#[tokio::test]
async fn not_final_falls_through_to_the_next_route_or_404_with_vary() {
    let served = Served::start(app()).await;
    let out = curl(&["-i", "-H", "Accept: text/html", &served.url("/only-json")]).await;
    assert!(out.starts_with("HTTP/1.1 404"), "{out}");
    assert!(out.contains("vary: Accept\r\n"), "{out}");
    let out = curl(&["-i", "-H", "Accept: */*", &served.url("/only-json")]).await;
    assert!(out.ends_with("application/json - -"), "{out}");
    served.stop().await;
}

#[test]
fn absent_or_malformed_fields_accept_the_first_offer() {
    block_on(async {
        let app = app();
        for accept in [None, Some("garbage, ;;, q=1")] {
            let mut builder = http::Request::get("/doc");
            if let Some(accept) = accept {
                builder = builder.header("accept", accept);
            }
            let reply = send_with(&app, builder, celer::Body::empty()).await;
            assert_eq!(reply.body, "<p>doc</p>", "{accept:?}");
        }
        // A huge header is read only up to its element limit.
        let huge = vec!["x/y"; 10_000].join(",") + ",text/html";
        let builder = http::Request::get("/doc").header("accept", huge);
        let reply = send_with(&app, builder, celer::Body::empty()).await;
        assert_eq!(reply.status, 406);
    });
}

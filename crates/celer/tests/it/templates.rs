//! Templates over real sockets: escaping in each context of the XSS cases
//! (text, quoted and unquoted attributes, URLs, scripts, JSON files), the
//! content type by file type, a render error answered `500` with a log
//! line naming template:line, a syntax error at load, and a directory
//! reloaded on change.

use celer::template::{REFUSED_URL, Templates};
use celer::{App, Error, Request};
use serde_json::json;

use crate::logs::Logs;
use crate::wire::{Served, curl};

const ATTACK: &str = r#"<script>alert('x')</script>" onmouseover="alert(1)"#;

const PAGE: &str = r#"<p id="text">{{ v }}</p>
<p id="quoted" title="{{ v }}">q</p>
<p id="single" title='{{ v }}'>s</p>
<p id="unquoted" title={{ v }}>u</p>
<a id="href" href="{{ link|url }}">l</a>
<a id="raw-href" href="{{ link }}">r</a>
<script>var data = {{ v|tojson }};</script>
"#;

fn app(templates: Templates) -> App {
    async fn page(req: Request) -> Result<celer::template::Rendered, Error> {
        let v = req.query_param("v").unwrap_or_default().into_owned();
        let link = req.query_param("link").unwrap_or_default().into_owned();
        let name = req.param::<String>("name")?;
        req.state::<Templates>()?
            .render(&name, json!({ "v": v, "link": link, "items": [1, 2] }))
    }
    let mut app = App::new();
    app.state(templates);
    app.get("/<path:name>", page);
    app
}

fn embedded() -> Templates {
    Templates::embedded(&[
        ("page.html", PAGE),
        ("feed.xml", "<title>{{ v }}</title>"),
        ("data.json", "{\"v\": {{ v }}, \"items\": {{ items }}}"),
        ("app.js", "const v = {{ v }};"),
        ("note.txt", "{{ v }}"),
        ("broken.html", "line one\n{{ v }}\n{{ missing.attr }}\n"),
    ])
    .unwrap()
}

fn query(v: &str, link: &str) -> String {
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    };
    format!("?v={}&link={}", enc(v), enc(link))
}

#[tokio::test]
async fn html_contexts_escape_what_they_can() {
    let served = Served::start(app(embedded())).await;
    let out = curl(&[
        "-i",
        &served.url(&format!(
            "/page.html{}",
            query(ATTACK, "javascript:alert(1)")
        )),
    ])
    .await;
    assert!(
        out.to_ascii_lowercase()
            .contains("content-type: text/html; charset=utf-8"),
        "{out}"
    );
    let escaped =
        "&lt;script&gt;alert(&#x27;x&#x27;)&lt;&#x2f;script&gt;&quot; onmouseover=&quot;alert(1)";
    // Text and quoted attributes (double and single): nothing gets out.
    assert!(
        out.contains(&format!("<p id=\"text\">{escaped}</p>")),
        "{out}"
    );
    assert!(out.contains(&format!("title=\"{escaped}\">q")), "{out}");
    assert!(out.contains(&format!("title='{escaped}'>s")), "{out}");
    assert!(!out.contains("<script>alert"), "{out}");
    // Unquoted: escaping cannot stop a space from starting a new attribute
    // (the documented limit: quote attributes).
    assert!(out.contains(&format!("title={escaped}>u")), "{out}");
    assert!(escaped.contains(" onmouseover="));
    // URL: autoescape lets `javascript:` through; the url filter does not.
    assert!(
        out.contains("id=\"raw-href\" href=\"javascript:alert(1)\""),
        "{out}"
    );
    assert!(
        out.contains(&format!("id=\"href\" href=\"{REFUSED_URL}\"")),
        "{out}"
    );
    // Script: tojson gives a JSON string with <, >, &, ' escaped, so
    // `</script>` cannot end the element.
    assert!(
        out.contains(
            r#"var data = "\u003cscript\u003ealert(\u0027x\u0027)\u003c/script\u003e\" onmouseover=\"alert(1)";"#
        ),
        "{out}"
    );
    // A safe URL stays as given (escaped for the attribute).
    let out = curl(&[&served.url(&format!(
        "/page.html{}",
        query("x", "https://example.com/?a=1&b=2")
    ))])
    .await;
    assert!(
        out.contains("href=\"https:&#x2f;&#x2f;example.com&#x2f;?a=1&amp;b=2\""),
        "{out}"
    );
    served.stop().await;
}

#[tokio::test]
async fn file_types_choose_escaping_and_content_type() {
    let served = Served::start(app(embedded())).await;
    let v = "</script><b>'&\"";
    let fetch = |name: &'static str| {
        let url = served.url(&format!("/{name}{}", query(v, "")));
        async move { curl(&["-s", "-w", "\n%{content_type}", &url]).await }
    };
    assert_eq!(
        fetch("feed.xml").await,
        "<title>&lt;&#x2f;script&gt;&lt;b&gt;&#x27;&amp;&quot;</title>\napplication/xml; charset=utf-8"
    );
    let out = fetch("data.json").await;
    assert_eq!(
        out,
        "{\"v\": \"\\u003c/script\\u003e\\u003cb\\u003e\\u0027\\u0026\\\"\", \"items\": [1,2]}\napplication/json"
    );
    let body = out.rsplit_once('\n').unwrap().0;
    let parsed: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(parsed["v"], v);
    assert_eq!(
        fetch("app.js").await,
        "const v = \"\\u003c/script\\u003e\\u003cb\\u003e\\u0027\\u0026\\\"\";\ntext/javascript; charset=utf-8"
    );
    assert_eq!(
        fetch("note.txt").await,
        format!("{v}\ntext/plain; charset=utf-8")
    );
    served.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_render_error_is_a_500_logged_with_template_and_line() {
    let (logs, _guard) = Logs::capture();
    let served = Served::start(app(embedded())).await;
    let out = curl(&[
        "-s",
        "-w",
        "\n%{http_code}",
        &served.url("/broken.html?v=x"),
    ])
    .await;
    assert!(out.ends_with("\n500"), "{out}");
    assert!(!out.contains("missing"), "no detail to the client: {out}");
    let out = curl(&["-s", "-w", "\n%{http_code}", &served.url("/nope.html")]).await;
    assert!(out.ends_with("\n500"), "{out}");
    served.stop().await;
    let text = logs.text();
    assert!(text.contains("template broken.html:3:"), "{text}");
    assert!(text.contains("template nope.html:"), "{text}");
}

#[test]
fn a_syntax_error_at_load_names_template_and_line() {
    let err = Templates::embedded(&[
        ("ok.html", "fine"),
        ("bad.html", "one\ntwo\n{% for x in %}\n"),
    ])
    .unwrap_err();
    assert_eq!(err.template(), Some("bad.html"));
    assert_eq!(err.line(), Some(3));
    assert!(
        err.to_string().starts_with("template bad.html:3: "),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("posts")).unwrap();
    std::fs::write(dir.path().join("posts/show.html"), "x\n{{ }}").unwrap();
    let err = Templates::dir(dir.path()).load().unwrap_err();
    assert!(
        err.to_string().starts_with("template posts/show.html:2: "),
        "{err}"
    );
}

#[test]
fn a_file_over_the_limit_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let big = vec![b'a'; celer::template::MAX_TEMPLATE_BYTES as usize + 1];
    std::fs::write(dir.path().join("big.txt"), big).unwrap();
    let err = Templates::dir(dir.path()).load().unwrap_err();
    assert!(err.to_string().contains("MAX_TEMPLATE_BYTES"), "{err}");
}

#[tokio::test]
async fn a_directory_reloads_on_change_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hi.html");
    std::fs::write(&file, "hello {{ v }}").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/inc.html"), "[{% include 'hi.html' %}]").unwrap();
    std::fs::write(dir.path().join(".hidden.swp"), "{% broken").unwrap();
    let reloading = Templates::dir(dir.path()).reload(true).load().unwrap();
    let fixed = Templates::dir(dir.path()).load().unwrap();
    let served = Served::start(app(reloading)).await;
    let fixed_served = Served::start(app(fixed)).await;
    assert_eq!(curl(&[&served.url("/sub/inc.html?v=a")]).await, "[hello a]");

    // A different length is a change even within the same mtime tick.
    std::fs::write(&file, "bonjour {{ v }}").unwrap();
    assert_eq!(
        curl(&[&served.url("/sub/inc.html?v=a")]).await,
        "[bonjour a]"
    );
    assert_eq!(
        curl(&[&fixed_served.url("/sub/inc.html?v=a")]).await,
        "[hello a]"
    );

    // A syntax error while reloading: a 500 until it is fixed.
    std::fs::write(&file, "bonjour {{ v").unwrap();
    let out = curl(&["-s", "-w", "\n%{http_code}", &served.url("/hi.html?v=a")]).await;
    assert!(out.ends_with("\n500"), "{out}");
    std::fs::write(&file, "salut {{ v }}!").unwrap();
    assert_eq!(curl(&[&served.url("/hi.html?v=a")]).await, "salut a!");
    // A new file appears.
    std::fs::write(dir.path().join("new.txt"), "new {{ v }}").unwrap();
    assert_eq!(curl(&[&served.url("/new.txt?v=%3Cb%3E")]).await, "new <b>");
    served.stop().await;
    fixed_served.stop().await;
}

mod body_filter {
    use celer::Body;
    use celer::http::header;
    use celer::response::{Html, IntoResponse};
    use celer::template::filter::BodyFilter;
    use celer::{App, Request};
    use futures_util::stream;

    use crate::wire::{Served, curl};

    fn app(max: usize) -> App {
        let filter = BodyFilter::new(&["text/html"], |body| {
            let page = String::from_utf8_lossy(&body);
            page.replace("world", "filtered world").into()
        })
        .max_bytes(max);
        let mut app = App::new();
        app.middleware(filter.into_middleware());
        app.get("/page", |_req: Request| async {
            let mut res = Html("hello world").into_response();
            res.headers_mut()
                .insert(header::ETAG, "\"v1\"".parse().unwrap());
            res
        });
        app.get("/streamed", |_req: Request| async {
            let chunks = (0..4).map(|i| Ok::<_, std::io::Error>(format!("world {i};")));
            let mut res = Body::from_stream(stream::iter(chunks)).into_response();
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                "TEXT/HTML; charset=utf-8".parse().unwrap(),
            );
            res
        });
        app.get("/big", |_req: Request| async { Html("world ".repeat(100)) });
        app.get("/big-streamed", |_req: Request| async {
            let chunks = (0..100).map(|_| Ok::<_, std::io::Error>("world "));
            let mut res = Body::from_stream(stream::iter(chunks)).into_response();
            res.headers_mut()
                .insert(header::CONTENT_TYPE, "text/html".parse().unwrap());
            res
        });
        app.get("/text", |_req: Request| async { "hello world" });
        app.get("/encoded", |_req: Request| async {
            let mut res = Html("hello world").into_response();
            res.headers_mut()
                .insert(header::CONTENT_ENCODING, "identity".parse().unwrap());
            res
        });
        app
    }

    #[tokio::test]
    async fn html_bodies_are_transformed_others_pass() {
        let served = Served::start(app(256)).await;
        let out = curl(&["-s", "-i", &served.url("/page")]).await;
        assert!(out.ends_with("\r\n\r\nhello filtered world"), "{out}");
        let lower = out.to_ascii_lowercase();
        assert!(lower.contains("content-length: 20\r\n"), "{out}");
        assert!(!lower.contains("etag"), "the old validator goes: {out}");
        assert_eq!(
            curl(&["-s", &served.url("/streamed")]).await,
            "filtered world 0;filtered world 1;filtered world 2;filtered world 3;"
        );
        assert_eq!(curl(&["-s", &served.url("/text")]).await, "hello world");
        assert_eq!(curl(&["-s", &served.url("/encoded")]).await, "hello world");
        // HEAD: no body to filter, the GET's fields as they were.
        let out = curl(&["-s", "-I", &served.url("/page")]).await;
        assert!(out.to_ascii_lowercase().contains("etag: \"v1\""), "{out}");
        served.stop().await;
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_a_500() {
        let served = Served::start(app(256)).await;
        for path in ["/big", "/big-streamed"] {
            let out = curl(&["-s", "-w", "\n%{http_code}", &served.url(path)]).await;
            assert!(out.ends_with("\n500"), "{path}: {out}");
            assert!(!out.contains("world"), "{path}: {out}");
        }
        served.stop().await;
        // At the limit exactly: filtered.
        let served = Served::start(app(600)).await;
        let out = curl(&["-s", &served.url("/big")]).await;
        assert_eq!(out, "filtered world ".repeat(100));
        let out = curl(&["-s", &served.url("/big-streamed")]).await;
        assert_eq!(out, "filtered world ".repeat(100));
        served.stop().await;
    }
}

//! Rate limits over the wire: GCRA per client address on one route, with
//! the `RateLimit-Policy`, `RateLimit` and `Retry-After` fields.

use std::time::Duration;

use celer::ratelimit::{Key, Quota, RateLimit};
use celer::{App, Request};

use crate::wire::{Served, curl};

#[tokio::test]
async fn a_client_past_its_quota_should_get_429_with_retry_after() {
    let mut app = App::new();
    let limit =
        RateLimit::new(Quota::new(3, Duration::from_secs(60)), Key::client_addr()).policy("posts");
    app.post("/posts", |_req: Request| async { "posted" })
        .middleware(limit.into_middleware());
    app.get("/free", |_req: Request| async { "free" });
    let served = Served::start(app).await;
    let url = served.url("/posts");
    let fmt = "%{http_code} %header{ratelimit} %header{retry-after}";
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(curl(&["-o", "/dev/null", "-X", "POST", "-w", fmt, &url]).await);
    }
    assert_eq!(
        seen,
        [
            r#"200 "posts";r=2;t=20 "#,
            r#"200 "posts";r=1;t=40 "#,
            r#"200 "posts";r=0;t=60 "#,
            r#"429 "posts";r=0;t=60 20"#,
        ]
    );
    let policy = curl(&[
        "-o",
        "/dev/null",
        "-X",
        "POST",
        "-w",
        "%header{ratelimit-policy}",
        &url,
    ])
    .await;
    assert_eq!(policy, r#""posts";q=3;w=60"#);
    // Another route is not limited.
    assert_eq!(curl(&[&served.url("/free")]).await, "free");
    served.stop().await;
}

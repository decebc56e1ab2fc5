//! The `/feeds/` page: lists the feeds (from `/feeds/index.json`) and
//! shows the chosen one live through its SSE stream; embedded in the
//! binary.

use celer::files::{Bundle, Files};
use celer::{App, Request};
use tower_service::Service;

/// Where the page is served.
pub const PAGE_PATH: &str = "/feeds/";

/// The page's files.
const FILES: &[(&str, &[u8])] = &[("index.html", include_bytes!("../../feed/index.html"))];

/// Adds `GET /feeds/` (the page, with an ETag from its content hash) and
/// `GET /feeds` (a redirect to it) to `app`.
pub(crate) fn mount(app: &mut App) {
    let files = Files::embedded(Bundle::new(FILES));
    app.get(PAGE_PATH, move |req: Request| {
        let mut files = files.clone();
        async move {
            let mut req = req.into_http();
            *req.uri_mut() = http::Uri::from_static("/");
            match files.call(req).await {
                Ok(res) => res,
                Err(never) => match never {},
            }
        }
    });
    app.get("/feeds", |_req: Request| async {
        celer::response::Redirect::permanent(PAGE_PATH)
    });
}

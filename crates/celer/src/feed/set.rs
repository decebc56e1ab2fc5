//! [`Feeds`]: several feeds by name, mounted under one prefix with an
//! index of them.

use std::fmt;

use http::header::{self, HeaderValue};

use super::state::Feed;
use crate::{App, Body, Request};

/// Longest feed name, in bytes.
pub const MAX_FEED_NAME_BYTES: usize = 64;

/// Several feeds by name, mounted together: each at `PREFIX/NAME` (see
/// [`Feed::mount`]) and a list of them at `PREFIX/index.json`.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use celer::feed::{Feed, Feeds};
/// let mut feeds = Feeds::new();
/// feeds.insert(Feed::new("scores")).unwrap();
/// assert!(feeds.insert(Feed::new("scores")).is_err());
/// assert!(feeds.insert(Feed::new("no/slash")).is_err());
/// let mut app = celer::App::new();
/// feeds.mount(&mut app, "/feeds");
/// let client = celer::test::TestClient::new(app);
/// let list: serde_json::Value = client.get("/feeds/index.json").await.json();
/// assert_eq!(list["feeds"][0]["name"], "scores");
/// assert_eq!(list["feeds"][0]["url"], "/feeds/scores");
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct Feeds {
    feeds: Vec<Feed>,
}

/// Why [`Feeds::insert`] refused a feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidName {
    name: String,
    taken: bool,
}

impl Feeds {
    /// No feeds.
    pub fn new() -> Feeds {
        Feeds::default()
    }

    /// Adds `feed`. Its name must be 1 to [`MAX_FEED_NAME_BYTES`] ASCII
    /// letters, digits, `-` or `_` (a path segment that needs no escaping
    /// and never clashes with `index.json`), and not taken.
    pub fn insert(&mut self, feed: Feed) -> Result<(), InvalidName> {
        let name = feed.name();
        if !is_valid_name(name) || self.get(name).is_some() {
            return Err(InvalidName {
                name: name.to_owned(),
                taken: is_valid_name(name),
            });
        }
        self.feeds.push(feed);
        Ok(())
    }

    /// The feed named `name`.
    pub fn get(&self, name: &str) -> Option<&Feed> {
        self.feeds.iter().find(|feed| feed.name() == name)
    }

    /// The feeds, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = &Feed> {
        self.feeds.iter()
    }

    /// True when there is no feed.
    pub fn is_empty(&self) -> bool {
        self.feeds.is_empty()
    }

    /// Adds every feed's routes under `prefix` (`/feeds`, no trailing
    /// slash) and `GET prefix/index.json`: each feed's name, version,
    /// health and URLs.
    ///
    /// # Panics
    ///
    /// Panics if `prefix` is not a valid rule (see [`App::get`]).
    pub fn mount(&self, app: &mut App, prefix: &str) {
        for feed in &self.feeds {
            feed.mount(app, &format!("{prefix}/{}", feed.name()));
        }
        let feeds = self.clone();
        let prefix = prefix.to_owned();
        app.get(&format!("{prefix}/index.json"), move |_req: Request| {
            std::future::ready(index(&feeds, &prefix))
        });
    }
}

/// The list of feeds as JSON.
fn index(feeds: &Feeds, prefix: &str) -> http::Response<Body> {
    let list: Vec<serde_json::Value> = feeds
        .iter()
        .map(|feed| {
            let status = feed.status();
            let url = format!("{prefix}/{}", feed.name());
            serde_json::json!({
                "name": status.name,
                "version": status.version,
                "id": status.id,
                "updated_at_ms": status.updated_at_ms,
                "health": status.health,
                "source": status.source,
                "events": format!("{url}/events"),
                "ws": format!("{url}/ws"),
                "status": format!("{url}/status"),
                "url": url,
            })
        })
        .collect();
    let body = serde_json::to_vec(&serde_json::json!({ "feeds": list })).unwrap_or_default();
    let mut res = http::Response::new(Body::from(body));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// 1 to [`MAX_FEED_NAME_BYTES`] of `[A-Za-z0-9_-]`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_FEED_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl fmt::Display for InvalidName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.taken {
            write!(f, "a feed named {:?} exists already", self.name)
        } else {
            write!(
                f,
                "{:?} is not a feed name (1 to {MAX_FEED_NAME_BYTES} ASCII letters, digits, '-' or '_')",
                self.name
            )
        }
    }
}

impl std::error::Error for InvalidName {}

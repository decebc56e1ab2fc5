//! Live feeds for `celer serve --feed NAME=SOURCE`: the sources that read
//! files, Redis keys and upstream URLs, the thread they run on, and the
//! page at `/feeds/` that lists the feeds and shows one live.
//!
//! The serving itself (ETags, 304s, compressed variants, SSE and
//! WebSocket push, status) is `celer::feed`'s; this module only feeds it.
//!
//! # Layout
//!
//! - `file`: `file:PATH`, inotify and a metadata poll
//! - `redis`: `redis://HOST/KEY`, GET at the interval and on notifications
//! - `resp`: the RESP2 codec under it (no IO)
//! - `upstream`: `http(s)://URL`, polled with If-None-Match
//! - `page`: the embedded `/feeds/` page
//! - `schema`: JSON Schema checking of new versions

mod file;
mod page;
mod redis;
mod resp;
mod schema;
mod upstream;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use std::convert::Infallible;

use celer::feed::{Feed, FeedBuilder, Feeds, Source};
use celer::{App, Body};
use tower_service::Service;

pub use self::file::FileSource;
pub use self::page::PAGE_PATH;
pub use self::redis::{DEFAULT_REDIS_PORT, REDIS_TIMEOUT, RedisSource, RedisSpec};
pub use self::schema::{MAX_MESSAGE_CHARS, MAX_SCHEMA_BYTES, Schema};
pub use self::upstream::{DEFAULT_HTTP_TIMEOUT, HttpSource};

/// Where the feeds are mounted: `/feeds/NAME`, `/feeds/NAME/events`, ...
pub const FEEDS_PREFIX: &str = "/feeds";

/// A parsed `--feed NAME=SOURCE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedSpec {
    /// The feed's name (checked by [`celer::feed::is_valid_name`]).
    pub name: String,
    /// Where its documents come from.
    pub source: SourceSpec,
}

/// Where a feed's documents come from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceSpec {
    /// `file:PATH`.
    File(PathBuf),
    /// `redis://[[USER]:PASSWORD@]HOST[:PORT]/KEY`.
    Redis(RedisSpec),
    /// `http://URL` or `https://URL`.
    Http(String),
}

impl FeedSpec {
    /// Parses `NAME=SOURCE`, SOURCE being `file:PATH`, `redis://HOST/KEY`
    /// or `http(s)://URL`.
    ///
    /// # Errors
    ///
    /// A message naming what is wrong: no `=`, a bad name, an unknown
    /// source scheme, an empty path.
    pub fn parse(spec: &str) -> Result<FeedSpec, String> {
        let (name, source) = spec
            .split_once('=')
            .ok_or("expected NAME=SOURCE (SOURCE: file:PATH, redis://HOST/KEY or https://URL)")?;
        if !celer::feed::is_valid_name(name) {
            return Err(format!(
                "{name:?} is not a feed name (1 to {} ASCII letters, digits, '-' or '_')",
                celer::feed::MAX_FEED_NAME_BYTES
            ));
        }
        let source = if let Some(path) = source.strip_prefix("file:") {
            if path.is_empty() {
                return Err("file: needs a path (file:/srv/feed.json)".to_owned());
            }
            SourceSpec::File(PathBuf::from(path))
        } else if source.starts_with("redis://") {
            SourceSpec::Redis(RedisSpec::parse(source)?)
        } else if source.starts_with("http://") || source.starts_with("https://") {
            HttpSource::new(source)?;
            SourceSpec::Http(source.to_owned())
        } else {
            return Err(format!(
                "unknown source {source:?}: expected file:PATH, redis://HOST/KEY or http(s)://URL"
            ));
        };
        Ok(FeedSpec {
            name: name.to_owned(),
            source,
        })
    }

    /// The source this spec names; `ca_pem` adds trusted roots for
    /// `https` upstreams.
    ///
    /// # Errors
    ///
    /// A message when `ca_pem` holds no usable certificate.
    pub fn source(&self, ca_pem: Option<&[u8]>) -> Result<Box<dyn Source>, String> {
        Ok(match &self.source {
            SourceSpec::File(path) => Box::new(FileSource::new(path.clone())),
            SourceSpec::Redis(spec) => Box::new(RedisSource::new(spec.clone())),
            SourceSpec::Http(url) => {
                let mut source = HttpSource::new(url)?;
                if let Some(pem) = ca_pem {
                    source = source.root_certificates_pem(pem)?;
                }
                Box::new(source)
            }
        })
    }
}

impl fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceSpec::File(path) => write!(f, "file:{}", path.display()),
            SourceSpec::Redis(spec) => write!(f, "{spec}"),
            SourceSpec::Http(url) => f.write_str(url),
        }
    }
}

/// The thread the sources run on: one current-thread tokio runtime, off
/// the serving workers (a new version is hashed and compressed there).
/// Dropping it, or [`stop`](SourceThread::stop), ends the sources.
#[derive(Debug)]
pub struct SourceThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts every `(feed, source)` pair on a thread of their own.
///
/// # Errors
///
/// When the thread or its runtime cannot be made.
pub fn start(sources: Sources) -> std::io::Result<SourceThread> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("celer-feeds".to_owned())
        .spawn(move || {
            runtime.block_on(async move {
                for (feed, source) in sources {
                    feed.spawn(source);
                }
                let _ = stopped.await;
            });
        })?;
    Ok(SourceThread {
        stop: Some(stop),
        thread: Some(thread),
    })
}

impl SourceThread {
    /// Stops the sources and waits for their thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for SourceThread {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Feeds paired with the sources that feed them, for [`start`].
pub type Sources = Vec<(Feed, Box<dyn Source>)>;

/// How `celer serve` makes its feeds.
#[derive(Debug, Clone)]
pub struct FeedOptions {
    /// The interval of every feed that [`intervals`](Self::intervals) does
    /// not name.
    pub interval: Duration,
    /// Per-feed intervals, by name.
    pub intervals: Vec<(String, Duration)>,
    /// The largest document of every feed.
    pub max_document_bytes: usize,
    /// Extra trusted roots (PEM) for `https` upstreams.
    pub ca_pem: Option<Vec<u8>>,
}

/// Makes the feeds of `specs` and their sources.
///
/// # Errors
///
/// Two specs with one name, an interval for a feed that does not exist, a
/// CA file without certificates.
pub fn build(specs: &[FeedSpec], options: &FeedOptions) -> Result<(Feeds, Sources), String> {
    build_with(specs, options, |_, builder| Ok(builder))
}

/// [`build`], with `each` adjusting every feed's builder after the
/// options are applied (a per-feed limit, a [`Schema`] as validator).
///
/// # Errors
///
/// As [`build`], and the errors of `each`.
pub fn build_with(
    specs: &[FeedSpec],
    options: &FeedOptions,
    mut each: impl FnMut(&FeedSpec, FeedBuilder) -> Result<FeedBuilder, String>,
) -> Result<(Feeds, Sources), String> {
    let (intervals, interval, max_document_bytes) = (
        &options.intervals,
        options.interval,
        options.max_document_bytes,
    );
    let mut feeds = Feeds::new();
    let mut sources = Vec::new();
    for spec in specs {
        let interval = intervals
            .iter()
            .find(|(name, _)| *name == spec.name)
            .map_or(interval, |(_, every)| *every);
        // The sources' thread does nothing else: it waits while the
        // compressing runs below the workers' priority.
        let builder = Feed::builder(spec.name.clone())
            .interval(interval)
            .max_document_bytes(max_document_bytes)
            .compress_in_background(true);
        let feed = each(spec, builder)?.build();
        feeds.insert(feed.clone()).map_err(|err| err.to_string())?;
        sources.push((feed, spec.source(options.ca_pem.as_deref())?));
    }
    for (name, _) in intervals {
        if feeds.get(name).is_none() {
            return Err(format!("no feed named {name:?} to set the interval of"));
        }
    }
    Ok((feeds, sources))
}

/// Adds the feeds to `app` under [`FEEDS_PREFIX`] and the page at
/// [`PAGE_PATH`].
pub fn mount(app: &mut App, feeds: &Feeds) {
    feeds.mount(app, FEEDS_PREFIX);
    page::mount(app);
}

/// An app answering every `GET` (and `HEAD`) with `site`, to which
/// [`mount`] adds the feeds.
pub fn with_site<S>(site: S) -> App
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
{
    let mut app = App::new();
    crate::forward_to_site(&mut app, site);
    app
}

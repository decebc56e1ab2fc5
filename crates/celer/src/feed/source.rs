//! Sources: what feeds a [`Feed`] new documents. A source is a task that
//! calls [`Feed::update`] with each document it gets and
//! [`Feed::source_failed`] when it cannot get one.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use super::state::Feed;

/// A boxed future of a source's run.
pub type SourceFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What feeds a [`Feed`]: started by [`Feed::spawn`], it runs until its
/// task is aborted (or, for a stream, the stream ends).
///
/// ```
/// use celer::feed::{Feed, Source, SourceFuture};
/// /// A source that offers one fixed document.
/// struct Fixed(&'static [u8]);
/// impl Source for Fixed {
///     fn describe(&self) -> String {
///         "fixed".to_owned()
///     }
///     fn run(self: Box<Self>, feed: Feed) -> SourceFuture {
///         Box::pin(async move {
///             let _ = feed.update(self.0);
///         })
///     }
/// }
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let feed = Feed::new("f");
/// feed.spawn(Fixed(b"[1]")).await.unwrap();
/// assert_eq!(feed.status().source, "fixed");
/// assert_eq!(feed.current().unwrap().number(), 1);
/// # });
/// ```
pub trait Source: Send + 'static {
    /// How the status shows the source: `file:/srv/scores.json`.
    fn describe(&self) -> String;

    /// Feeds `feed` until the task is aborted.
    fn run(self: Box<Self>, feed: Feed) -> SourceFuture;
}

/// A source that calls a closure every interval of the feed and offers
/// what it returns; made by [`poll_fn`].
pub struct PollFn<F> {
    description: String,
    poll: F,
}

/// A source that offers every document of a stream; made by
/// [`from_stream`].
pub struct FromStream<S> {
    description: String,
    stream: S,
}

/// A source that calls `poll` at once and then every interval of the feed:
/// `Ok(doc)` is offered to [`Feed::update`], `Err(reason)` goes to
/// [`Feed::source_failed`] (the last good version stays). A call that
/// takes longer than the interval delays the next one: calls never
/// overlap.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use celer::feed::{poll_fn, Feed};
///
/// let feed = Feed::new("clock");
/// let ticks = Arc::new(AtomicU64::new(0));
/// let counter = ticks.clone();
/// let task = feed.spawn(poll_fn("counter", move || {
///     let n = counter.fetch_add(1, Ordering::Relaxed);
///     async move { Ok::<_, std::io::Error>(format!("{{\"tick\": {n}}}")) }
/// }));
/// while feed.current().is_none() {
///     tokio::task::yield_now().await;
/// }
/// assert_eq!(&feed.current().unwrap().bytes()[..], br#"{"tick": 0}"#);
/// task.abort();
/// # });
/// ```
pub fn poll_fn<F, Fut, D, E>(description: impl Into<String>, poll: F) -> PollFn<F>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<D, E>> + Send,
    D: Into<Bytes>,
    E: fmt::Display,
{
    PollFn {
        description: description.into(),
        poll,
    }
}

/// A source that offers each `Ok` document of `stream` as it comes, and
/// reports each `Err` as a source failure; the end of the stream is a
/// failure too ("the source ended"), and the last version stays served.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use celer::feed::{from_stream, Feed};
/// let docs = futures_util::stream::iter([
///     Ok::<_, String>(&b"[1]"[..]),
///     Err("upstream hiccup".to_owned()),
///     Ok(&b"[2]"[..]),
/// ]);
/// let feed = Feed::new("f");
/// feed.spawn(from_stream("a stream", docs)).await.unwrap();
/// assert_eq!(&feed.current().unwrap().bytes()[..], b"[2]");
/// // Two outages: the error, and the end of the stream after a document.
/// assert_eq!(feed.status().source_failures, 2);
/// # });
/// ```
pub fn from_stream<S, D, E>(description: impl Into<String>, stream: S) -> FromStream<S>
where
    S: Stream<Item = Result<D, E>> + Send + 'static,
    D: Into<Bytes>,
    E: fmt::Display,
{
    FromStream {
        description: description.into(),
        stream,
    }
}

impl<F, Fut, D, E> Source for PollFn<F>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<D, E>> + Send,
    D: Into<Bytes>,
    E: fmt::Display,
{
    fn describe(&self) -> String {
        self.description.clone()
    }

    fn run(self: Box<Self>, feed: Feed) -> SourceFuture {
        let mut poll = self.poll;
        Box::pin(async move {
            let mut ticks = tokio::time::interval(feed.interval());
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                offer(&feed, poll().await);
            }
        })
    }
}

impl<S, D, E> Source for FromStream<S>
where
    S: Stream<Item = Result<D, E>> + Send + 'static,
    D: Into<Bytes>,
    E: fmt::Display,
{
    fn describe(&self) -> String {
        self.description.clone()
    }

    fn run(self: Box<Self>, feed: Feed) -> SourceFuture {
        let stream = self.stream;
        Box::pin(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                offer(&feed, item);
            }
            feed.source_failed("the source ended");
        })
    }
}

/// Offers a source's result: a document to [`Feed::update`] (which logs
/// and counts a refusal), a failure to [`Feed::source_failed`].
pub fn offer<D, E>(feed: &Feed, result: Result<D, E>)
where
    D: Into<Bytes>,
    E: fmt::Display,
{
    match result {
        Ok(doc) => {
            let _ = feed.update(doc);
        }
        Err(err) => feed.source_failed(err),
    }
}

impl Source for Box<dyn Source> {
    fn describe(&self) -> String {
        (**self).describe()
    }

    fn run(self: Box<Self>, feed: Feed) -> SourceFuture {
        (*self).run(feed)
    }
}

impl<F> fmt::Debug for PollFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollFn")
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl<S> fmt::Debug for FromStream<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FromStream")
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl Feed {
    /// Starts `source` on the current tokio runtime, feeding this feed;
    /// abort the handle to stop it.
    ///
    /// # Panics
    ///
    /// Panics outside a tokio runtime.
    pub fn spawn(&self, source: impl Source) -> tokio::task::JoinHandle<()> {
        self.set_source(source.describe());
        tokio::spawn(Box::new(source).run(self.clone()))
    }
}

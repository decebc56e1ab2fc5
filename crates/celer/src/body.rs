//! The response and request body type shared by every part of the framework.

use std::any::{Any, TypeId};
use std::fmt;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::TryStream;
use futures_util::stream::TryStreamExt;
use http_body::Body as _;
use http_body::{Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};

use crate::BoxError;

/// A streaming HTTP body with `Bytes` chunks.
///
/// The common cases are allocation-free: an empty body and a body made of one
/// buffer (`&'static str`, `&'static [u8]`, `Bytes`, `String`, `Vec<u8>`) are
/// stored inline and report an exact [`SizeHint`], so a server can send
/// `Content-Length`. Anything else (a stream, another [`http_body::Body`]) is
/// boxed once.
///
/// ```
/// use celer::Body;
/// use http_body::Body as _;
///
/// let body = Body::from("Hello, World!");
/// assert_eq!(body.size_hint().exact(), Some(13));
/// assert!(Body::empty().is_end_stream());
/// ```
pub struct Body {
    kind: Kind,
}

/// Two variants, so the tag hides in a niche of `Bytes` and a `Body` is
/// four words, as big as `Full<Bytes>`; an empty body is an empty `Full`.
enum Kind {
    Full(Bytes),
    Boxed(SyncBody),
}

/// A boxed body behind a mutex, so that `Body` (and so `Request`) is `Sync`.
///
/// Polling goes through `Mutex::get_mut`, which never locks; only the
/// `&self` methods `is_end_stream` and `size_hint` take the uncontended lock.
struct SyncBody(Mutex<UnsyncBoxBody<Bytes, BoxError>>);

impl SyncBody {
    fn kind(body: UnsyncBoxBody<Bytes, BoxError>) -> Kind {
        Kind::Boxed(SyncBody(Mutex::new(body)))
    }

    fn get_mut(&mut self) -> &mut UnsyncBoxBody<Bytes, BoxError> {
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    fn with<R>(&self, f: impl FnOnce(&UnsyncBoxBody<Bytes, BoxError>) -> R) -> R {
        f(&self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    // The three `http_body::Body` methods of the boxed kind, kept out of
    // line so that those of `Body` inline into a server's send loop.

    #[inline(never)]
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(self.get_mut()).poll_frame(cx)
    }

    #[inline(never)]
    fn is_end_stream(&self) -> bool {
        self.with(|body| body.is_end_stream())
    }

    #[inline(never)]
    fn size_hint(&self) -> SizeHint {
        self.with(|body| body.size_hint())
    }
}

// ===== impl Body =====

impl Body {
    /// Creates an empty body.
    ///
    /// ```
    /// use http_body::Body as _;
    /// assert_eq!(celer::Body::empty().size_hint().exact(), Some(0));
    /// ```
    pub const fn empty() -> Self {
        Body {
            kind: Kind::Full(Bytes::new()),
        }
    }

    /// Wraps any [`http_body::Body`] with `Bytes` data.
    ///
    /// A `celer::Body` passed here is returned as is, and a body that is
    /// already at its end becomes [`Body::empty`]; other bodies are boxed.
    ///
    /// ```
    /// use http_body_util::Full;
    /// use http_body::Body as _;
    ///
    /// let body = celer::Body::new(Full::new(bytes::Bytes::from_static(b"hi")));
    /// assert_eq!(body.size_hint().exact(), Some(2));
    /// ```
    pub fn new<B>(body: B) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        // Decided at compile time; other bodies skip the detour through
        // `slot`, which costs a copy of the body.
        if TypeId::of::<B>() == TypeId::of::<Body>() {
            let mut slot = Some(body);
            return match (&mut slot as &mut dyn Any).downcast_mut::<Option<Body>>() {
                Some(own) => own.take().unwrap_or_default(),
                None => Body::empty(),
            };
        }
        if body.is_end_stream() {
            return Body::empty();
        }
        Body {
            kind: SyncBody::kind(body.map_err(Into::into).boxed_unsync()),
        }
    }

    /// Creates a body from a stream of byte chunks.
    ///
    /// ```
    /// use futures_util::stream;
    ///
    /// let chunks = vec![Ok::<_, std::io::Error>("a"), Ok("b")];
    /// let body = celer::Body::from_stream(stream::iter(chunks));
    /// # let _ = body;
    /// ```
    pub fn from_stream<S>(stream: S) -> Self
    where
        S: TryStream + Send + 'static,
        S::Ok: Into<Bytes>,
        S::Error: Into<BoxError>,
    {
        let frames = stream
            .map_ok(|chunk| Frame::data(chunk.into()))
            .map_err(Into::into);
        Body {
            kind: SyncBody::kind(StreamBody::new(frames).boxed_unsync()),
        }
    }

    /// Collects the whole body into one buffer, without any size limit.
    ///
    /// Request bodies should rather be read through
    /// [`Request::bytes`](crate::Request::bytes), which enforces a limit.
    ///
    /// ```
    /// # tokio_test();
    /// # fn tokio_test() { tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let bytes = celer::Body::from("abc").collect_bytes().await.unwrap();
    /// assert_eq!(&bytes[..], b"abc");
    /// # }) }
    /// ```
    pub async fn collect_bytes(self) -> Result<Bytes, BoxError> {
        match self.kind {
            Kind::Full(bytes) => Ok(bytes),
            Kind::Boxed(body) => {
                let body = body.0.into_inner().unwrap_or_else(PoisonError::into_inner);
                Ok(body.collect().await?.to_bytes())
            }
        }
    }
}

impl Default for Body {
    fn default() -> Self {
        Body::empty()
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Full(bytes) if bytes.is_empty() => "empty",
            Kind::Full(_) => "full",
            Kind::Boxed(_) => "streaming",
        };
        f.debug_struct("Body").field("kind", &kind).finish()
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    #[inline(never)]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.get_mut().kind {
            Kind::Full(bytes) if bytes.is_empty() => Poll::Ready(None),
            Kind::Full(bytes) => Poll::Ready(Some(Ok(Frame::data(std::mem::take(bytes))))),
            Kind::Boxed(body) => body.poll_frame(cx),
        }
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(bytes) => bytes.is_empty(),
            Kind::Boxed(body) => body.is_end_stream(),
        }
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(bytes) => SizeHint::with_exact(bytes.len() as u64),
            Kind::Boxed(body) => body.size_hint(),
        }
    }
}

impl From<Bytes> for Body {
    fn from(bytes: Bytes) -> Self {
        Body {
            kind: Kind::Full(bytes),
        }
    }
}

impl From<&'static str> for Body {
    fn from(text: &'static str) -> Self {
        Body::from(Bytes::from_static(text.as_bytes()))
    }
}

impl From<&'static [u8]> for Body {
    fn from(data: &'static [u8]) -> Self {
        Body::from(Bytes::from_static(data))
    }
}

impl From<String> for Body {
    fn from(text: String) -> Self {
        Body::from(Bytes::from(text))
    }
}

impl From<Vec<u8>> for Body {
    fn from(data: Vec<u8>) -> Self {
        Body::from(Bytes::from(data))
    }
}

impl From<()> for Body {
    fn from((): ()) -> Self {
        Body::empty()
    }
}

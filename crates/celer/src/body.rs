//! The response and request body type shared by every part of the framework.

use std::any::Any;
use std::fmt;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::TryStream;
use futures_util::stream::TryStreamExt;
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

enum Kind {
    Empty,
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
        Body { kind: Kind::Empty }
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
        let mut slot = Some(body);
        if let Some(own) = (&mut slot as &mut dyn Any).downcast_mut::<Option<Body>>() {
            return own.take().unwrap_or_default();
        }
        let Some(body) = slot else {
            return Body::empty();
        };
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
            Kind::Empty => Ok(Bytes::new()),
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
            Kind::Empty => "empty",
            Kind::Full(_) => "full",
            Kind::Boxed(_) => "streaming",
        };
        f.debug_struct("Body").field("kind", &kind).finish()
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match &mut this.kind {
            Kind::Empty => Poll::Ready(None),
            Kind::Full(bytes) => {
                let bytes = std::mem::take(bytes);
                this.kind = Kind::Empty;
                if bytes.is_empty() {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Ok(Frame::data(bytes))))
                }
            }
            Kind::Boxed(body) => Pin::new(body.get_mut()).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Empty => true,
            Kind::Full(bytes) => bytes.is_empty(),
            Kind::Boxed(body) => body.with(|body| body.is_end_stream()),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Empty => SizeHint::with_exact(0),
            Kind::Full(bytes) => SizeHint::with_exact(bytes.len() as u64),
            Kind::Boxed(body) => body.with(|body| body.size_hint()),
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

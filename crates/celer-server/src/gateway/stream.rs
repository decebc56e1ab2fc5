//! One request over a plain byte stream, for SCGI and CGI: the body read
//! from the stream as the handler asks for it, the response written in the
//! CGI response format (RFC 3875 §6), then the end of the stream.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use http::{Method, Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::params;
use crate::body::{Demand, Incoming, Sender};
use crate::common::{ConnConfig, Reject};
use crate::error::{BoxError, Error, Kind};
use crate::serve::HttpService;

/// Serves the request of `vars` whose body starts with `rbuf` and goes on
/// in `rd`, answering on `wr`.
pub(crate) async fn serve_one<R, W, S>(
    vars: &[(Bytes, Bytes)],
    mut rbuf: BytesMut,
    mut rd: R,
    mut wr: W,
    service: &mut S,
    config: &ConnConfig,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
    S: HttpService,
{
    let limits = &config.limits;
    let mapped = match params::map(vars, limits) {
        Ok(m) => m,
        Err(reject) => {
            tracing::info!(target: "celer::gateway", reason = reject.reason, "request refused");
            write_response(&mut wr, reject.response(), &Method::GET, config).await;
            return;
        }
    };
    let method = mapped.head.method().clone();
    // Body bytes not yet handed to the handler, in `rbuf` and the stream.
    let mut left = mapped.content_length.unwrap_or(0);
    if limits.max_body_bytes.is_some_and(|max| left > max) {
        let reject = Reject::new(
            http::StatusCode::PAYLOAD_TOO_LARGE,
            "request body too large",
        );
        write_response(&mut wr, reject.response(), &method, config).await;
        drain(&mut rd, &mut rbuf, left, config).await;
        let _ = tokio::time::timeout(limits.write_timeout, wr.shutdown()).await;
        return;
    }
    let (body, feed) = if left == 0 {
        (Incoming::empty(), None)
    } else if rbuf.len() as u64 >= left {
        let whole = rbuf.split_to(left as usize).freeze();
        left = 0;
        (Incoming::full(whole), None)
    } else {
        let (body, tx) = Incoming::channel(SizeHint::with_exact(left));
        (body, Some(tx))
    };
    let (parts, ()) = mapped.head.into_parts();
    let request = Request::from_parts(parts, body);
    let written = {
        let respond = async {
            if let Err(err) = poll_fn(|cx| service.poll_ready(cx)).await {
                let err: BoxError = err.into();
                tracing::error!(target: "celer::gateway", error = %err, "service not ready");
                return write_response(&mut wr, Reject::internal().response(), &method, config)
                    .await;
            }
            match service.call(request).await {
                Ok(response) => write_response(&mut wr, response, &method, config).await,
                Err(err) => {
                    let err: BoxError = err.into();
                    tracing::error!(target: "celer::gateway", error = %err, "service failed");
                    write_response(&mut wr, Reject::internal().response(), &method, config).await
                }
            }
        };
        let mut respond = pin!(respond);
        match feed {
            None => respond.await,
            Some(tx) => {
                let mut feeding = pin!(feed_body(tx, &mut rbuf, &mut rd, &mut left, config));
                let mut fed = false;
                poll_fn(|cx| {
                    if !fed && feeding.as_mut().poll(cx).is_ready() {
                        fed = true;
                    }
                    respond.as_mut().poll(cx)
                })
                .await
            }
        }
    };
    if written {
        // The body the handler left unread is read and dropped (up to
        // `max_drain_bytes`), so the front end, which may still be sending
        // it, is not reset before it reads the answer.
        drain(&mut rd, &mut rbuf, left, config).await;
        let _ = tokio::time::timeout(limits.write_timeout, wr.shutdown()).await;
    }
}

/// Reads and drops `left` body bytes (`rbuf` first), up to
/// `max_drain_bytes`, each read within the body timeout.
async fn drain<R: AsyncRead + Unpin>(
    rd: &mut R,
    rbuf: &mut BytesMut,
    left: u64,
    config: &ConnConfig,
) {
    let limits = &config.limits;
    if left > limits.max_drain_bytes {
        return;
    }
    let mut left = left.saturating_sub(rbuf.len() as u64);
    rbuf.clear();
    while left > 0 {
        rbuf.reserve(16 * 1024);
        match tokio::time::timeout(limits.body_timeout, rd.read_buf(rbuf)).await {
            Ok(Ok(n)) if n > 0 => {
                left = left.saturating_sub(n as u64);
                rbuf.clear();
            }
            _ => return,
        }
    }
}

/// Feeds the body to `tx` as the handler asks for it (the first bytes in
/// `rbuf`), counting down `left`, each wait for the stream bounded by the
/// body timeout.
async fn feed_body<R: AsyncRead + Unpin>(
    tx: Sender,
    rbuf: &mut BytesMut,
    rd: &mut R,
    left: &mut u64,
    config: &ConnConfig,
) {
    while *left > 0 {
        let demand = poll_fn(|cx| match tx.poll_demand(cx) {
            Demand::Idle => Poll::Pending,
            d => Poll::Ready(d),
        })
        .await;
        if demand == Demand::Gone {
            return;
        }
        if rbuf.is_empty() {
            rbuf.reserve(16 * 1024);
            match tokio::time::timeout(config.limits.body_timeout, rd.read_buf(rbuf)).await {
                Ok(Ok(0)) => {
                    tx.fail(Error::new(Kind::IncompleteBody));
                    return;
                }
                Ok(Ok(_)) => {}
                Ok(Err(err)) => {
                    tx.fail(Error::new_io(err));
                    return;
                }
                Err(_) => {
                    tx.fail(Error::new(Kind::BodyTimeout));
                    return;
                }
            }
        }
        let n = rbuf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
        *left -= n as u64;
        tx.send(Ok(Frame::data(rbuf.split_to(n).freeze())));
    }
    tx.finish(None);
}

/// Writes `response` in the CGI response format, each write bounded by the
/// write timeout; false when the stream failed.
pub(crate) async fn write_response<W, B>(
    wr: &mut W,
    response: Response<B>,
    method: &Method,
    config: &ConnConfig,
) -> bool
where
    W: AsyncWrite + Unpin,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let timeout = config.limits.write_timeout;
    let bodiless = params::bodiless(method, response.status());
    let mut out = BytesMut::new();
    params::encode_head(&response, &response.body().size_hint(), method, &mut out);
    let mut body = pin!(response.into_body());
    if !bodiless {
        loop {
            // Gather what the body has ready, so a small response is one write.
            let frame = if out.is_empty() {
                poll_fn(|cx| body.as_mut().poll_frame(cx)).await
            } else {
                match poll_fn(|cx| Poll::Ready(body.as_mut().poll_frame(cx))).await {
                    Poll::Ready(frame) => frame,
                    Poll::Pending => {
                        if !write_all(wr, &out, timeout).await {
                            return false;
                        }
                        out.clear();
                        continue;
                    }
                }
            };
            match frame {
                None => break,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        out.extend_from_slice(&data);
                        if out.len() >= 64 * 1024 {
                            if !write_all(wr, &out, timeout).await {
                                return false;
                            }
                            out.clear();
                        }
                    }
                }
                Some(Err(err)) => {
                    let err: BoxError = err.into();
                    tracing::warn!(target: "celer::gateway", error = %err, "response body failed");
                    let _ = write_all(wr, &out, timeout).await;
                    return false;
                }
            }
        }
    }
    write_all(wr, &out, timeout).await
}

async fn write_all<W: AsyncWrite + Unpin>(
    wr: &mut W,
    bytes: &[u8],
    timeout: std::time::Duration,
) -> bool {
    if bytes.is_empty() {
        return true;
    }
    match tokio::time::timeout(timeout, async {
        wr.write_all(bytes).await?;
        wr.flush().await
    })
    .await
    {
        Ok(Ok(())) => true,
        Ok(Err(err)) => {
            tracing::debug!(target: "celer::gateway", error = %err, "gateway write failed");
            false
        }
        Err(_) => {
            tracing::debug!(target: "celer::gateway", "gateway write timed out");
            false
        }
    }
}

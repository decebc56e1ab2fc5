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
    rd: R,
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
    let length = mapped.content_length.unwrap_or(0);
    if limits.max_body_bytes.is_some_and(|max| length > max) {
        let reject = Reject::new(http::StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
        write_response(&mut wr, reject.response(), &method, config).await;
        return;
    }
    let (body, feed) = if length == 0 {
        (Incoming::empty(), None)
    } else if rbuf.len() as u64 >= length {
        (Incoming::full(rbuf.split_to(length as usize).freeze()), None)
    } else {
        let (body, tx) = Incoming::channel(SizeHint::with_exact(length));
        (body, Some(tx))
    };
    let (parts, ()) = mapped.head.into_parts();
    let request = Request::from_parts(parts, body);
    let respond = async {
        if let Err(err) = poll_fn(|cx| service.poll_ready(cx)).await {
            let err: BoxError = err.into();
            tracing::error!(target: "celer::gateway", error = %err, "service not ready");
            write_response(&mut wr, Reject::internal().response(), &method, config).await;
            return;
        }
        match service.call(request).await {
            Ok(response) => write_response(&mut wr, response, &method, config).await,
            Err(err) => {
                let err: BoxError = err.into();
                tracing::error!(target: "celer::gateway", error = %err, "service failed");
                write_response(&mut wr, Reject::internal().response(), &method, config).await;
            }
        }
    };
    let mut respond = pin!(respond);
    match feed {
        None => respond.await,
        Some(tx) => {
            let mut feeding = pin!(feed_body(tx, rbuf, rd, length, config));
            let mut fed = false;
            poll_fn(|cx| {
                if !fed && feeding.as_mut().poll(cx).is_ready() {
                    fed = true;
                }
                respond.as_mut().poll(cx)
            })
            .await;
        }
    }
}

/// Feeds `length` body bytes (the first in `rbuf`) to `tx` as the handler
/// asks for them, each wait for the stream bounded by the body timeout.
async fn feed_body<R: AsyncRead + Unpin>(tx: Sender, mut rbuf: BytesMut, mut rd: R, length: u64, config: &ConnConfig) {
    let mut left = length;
    while left > 0 {
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
            match tokio::time::timeout(config.limits.body_timeout, rd.read_buf(&mut rbuf)).await {
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
        let n = rbuf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        left -= n as u64;
        tx.send(Ok(Frame::data(rbuf.split_to(n).freeze())));
    }
    tx.finish(None);
}

/// Writes `response` in the CGI response format, then shuts the stream's
/// write side; each write bounded by the write timeout.
pub(crate) async fn write_response<W, B>(wr: &mut W, response: Response<B>, method: &Method, config: &ConnConfig)
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
                            return;
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
                                return;
                            }
                            out.clear();
                        }
                    }
                }
                Some(Err(err)) => {
                    let err: BoxError = err.into();
                    tracing::warn!(target: "celer::gateway", error = %err, "response body failed");
                    let _ = write_all(wr, &out, timeout).await;
                    return;
                }
            }
        }
    }
    if write_all(wr, &out, timeout).await {
        let _ = tokio::time::timeout(timeout, wr.shutdown()).await;
    }
}

async fn write_all<W: AsyncWrite + Unpin>(wr: &mut W, bytes: &[u8], timeout: std::time::Duration) -> bool {
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

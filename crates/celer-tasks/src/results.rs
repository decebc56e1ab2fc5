//! `GET /<id>/result`: a stored result sent in slices of
//! [`RESULT_CHUNK_BYTES`](limits::RESULT_CHUNK_BYTES) read from the store
//! (SQLite incremental BLOB I/O), through a channel of
//! [`RESULT_CHUNKS_BUFFERED`](limits::RESULT_CHUNKS_BUFFERED) slices: a
//! response holds at most that many slices, whatever the result's size and
//! however slowly the client reads.

use bytes::Bytes;
use celer::{Body, IntoResponse, Request, Response};
use http::{HeaderValue, StatusCode, header};
use tokio::sync::mpsc;

use crate::api::ApiError;
use crate::limits;
use crate::model::TaskId;
use crate::tasks::Tasks;

/// The result of task `id`: `200` with `ETag` and `Content-Length`, `304`
/// on a matching `If-None-Match`, `409` before success, `404` for no task.
pub(crate) async fn result(tasks: Tasks, req: Request, id: TaskId) -> Result<Response, ApiError> {
    let chunk = limits::RESULT_CHUNK_BYTES;
    let (task, first) = tasks
        .call(move |store| Ok((store.get(id)?, store.result_chunk(id, 0, chunk)?)))
        .await?;
    let task = task.ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no such task"))?;
    let Some(first) = first else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("task is {}, it has no result", task.state),
        ));
    };
    // A result never changes once stored: the task's id names it.
    let etag = format!("\"task-{id}\"");
    let matches = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let total = first.total;
    let mut res = if matches {
        // RFC 9110 §13.1.2: If-None-Match on GET answers 304.
        StatusCode::NOT_MODIFIED.into_response()
    } else if first.bytes.len() as u64 >= total {
        Body::from(first.bytes).into_response()
    } else {
        Body::from_stream(slices(tasks, id, first.bytes, total)).into_response()
    };
    let headers = res.headers_mut();
    if !matches {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        // Known before the first slice: the client can tell a complete
        // body from one cut short (the task purged while it was sent).
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(total));
    }
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    Ok(res)
}

/// The slices after `first`, read by a task that stays at most
/// [`RESULT_CHUNKS_BUFFERED`](limits::RESULT_CHUNKS_BUFFERED) slices ahead
/// of the client and stops when the client leaves.
fn slices(
    tasks: Tasks,
    id: TaskId,
    first: Vec<u8>,
    total: u64,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(limits::RESULT_CHUNKS_BUFFERED);
    tokio::spawn(async move {
        let mut offset = first.len() as u64;
        if tx.send(Ok(Bytes::from(first))).await.is_err() {
            return;
        }
        while offset < total {
            let read = tasks
                .inner
                .call_wait(move |store| store.result_chunk(id, offset, limits::RESULT_CHUNK_BYTES))
                .await;
            let item = match read {
                Ok(Some(chunk)) if !chunk.bytes.is_empty() && chunk.total == total => {
                    offset += chunk.bytes.len() as u64;
                    Ok(Bytes::from(chunk.bytes))
                }
                Ok(_) => Err(std::io::Error::other(
                    "the result was deleted while it was sent",
                )),
                Err(err) => Err(std::io::Error::other(err.to_string())),
            };
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                return;
            }
        }
    });
    futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}

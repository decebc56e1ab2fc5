//! The notes JSON API on axum 0.8: CRUD with typed ids, a body limit,
//! `Location` built by hand, problem+json errors, static files, a
//! request-id middleware, an HTML page, shared state and compression.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tower_http::compression::CompressionLayer;
use tower_http::services::ServeDir;

/// The largest note body accepted, in bytes.
pub const BODY_LIMIT: usize = 16 * 1024;

/// A note as stored and sent.
#[derive(Clone, Serialize, Deserialize, Debug, PartialEq)]
pub struct Note {
    pub id: u64,
    pub text: String,
}

#[derive(Deserialize)]
struct NewNote {
    text: String,
}

/// The notes, shared by every request.
#[derive(Default)]
pub struct Notes {
    last_id: AtomicU64,
    all: Mutex<BTreeMap<u64, Note>>,
}

type Store = State<Arc<Notes>>;

impl Notes {
    fn all(&self) -> MutexGuard<'_, BTreeMap<u64, Note>> {
        self.all.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An RFC 9457 problem: the error type of every handler.
pub struct Problem {
    status: StatusCode,
    detail: String,
}

impl Problem {
    fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Problem {
            status,
            detail: detail.into(),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "type": "about:blank",
            "title": self.status.canonical_reason().unwrap_or("Error"),
            "status": self.status.as_u16(),
            "detail": self.detail,
        });
        let content_type = [(header::CONTENT_TYPE, "application/problem+json")];
        (self.status, content_type, body.to_string()).into_response()
    }
}

impl From<JsonRejection> for Problem {
    fn from(rejection: JsonRejection) -> Self {
        Problem::new(rejection.status(), rejection.body_text())
    }
}

impl From<PathRejection> for Problem {
    // A non-numeric id is no such note, as a typed route would say.
    fn from(_: PathRejection) -> Self {
        Problem::new(StatusCode::NOT_FOUND, "no such note")
    }
}

fn not_found(id: u64) -> Problem {
    Problem::new(StatusCode::NOT_FOUND, format!("no note {id}"))
}

type Id = Result<Path<u64>, PathRejection>;
type Body = Result<Json<NewNote>, JsonRejection>;

async fn list(State(notes): Store) -> Json<Vec<Note>> {
    Json(notes.all().values().cloned().collect())
}

async fn create(State(notes): Store, body: Body) -> Result<impl IntoResponse, Problem> {
    let Json(NewNote { text }) = body?;
    let id = notes.last_id.fetch_add(1, Ordering::Relaxed) + 1;
    let note = Note { id, text };
    notes.all().insert(id, note.clone());
    let location = format!("/notes/{id}");
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(note),
    ))
}

async fn show(State(notes): Store, id: Id) -> Result<Json<Note>, Problem> {
    let Path(id) = id?;
    let note = notes.all().get(&id).cloned();
    note.map(Json).ok_or_else(|| not_found(id))
}

async fn update(State(notes): Store, id: Id, body: Body) -> Result<Json<Note>, Problem> {
    let Path(id) = id?;
    let Json(NewNote { text }) = body?;
    let mut all = notes.all();
    let note = all.get_mut(&id).ok_or_else(|| not_found(id))?;
    note.text = text;
    Ok(Json(note.clone()))
}

async fn remove(State(notes): Store, id: Id) -> Result<StatusCode, Problem> {
    let Path(id) = id?;
    match notes.all().remove(&id) {
        Some(_) => Ok(StatusCode::NO_CONTENT),
        None => Err(not_found(id)),
    }
}

async fn page(State(notes): Store) -> Html<String> {
    let items: String = notes
        .all()
        .values()
        .map(|n| format!("<li>{}</li>", escape(&n.text)))
        .collect();
    Html(format!(
        "<!doctype html><title>Notes</title><link rel=stylesheet href=/static/style.css><ul>{items}</ul>"
    ))
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

async fn fallback() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "no such resource")
}

/// Gives every response an `x-request-id` (the client's, or a new one) and
/// logs one line per request.
async fn request_id(req: Request, next: Next) -> Response {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let name = HeaderName::from_static("x-request-id");
    let id = match req.headers().get(&name) {
        Some(id) => id.clone(),
        None => HeaderValue::from(LAST.fetch_add(1, Ordering::Relaxed) + 1),
    };
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let mut res = next.run(req).await;
    tracing::info!(request_id = ?id, %method, path, status = res.status().as_u16());
    res.headers_mut().insert(name, id);
    res
}

/// The app, serving static files from `static_dir`.
pub fn app(static_dir: &str) -> Router {
    let notes = Router::new()
        .route("/", get(list).post(create))
        .route("/{id}", get(show).put(update).delete(remove))
        .layer(DefaultBodyLimit::max(BODY_LIMIT));
    Router::new()
        .route("/", get(page))
        .nest("/notes", notes)
        .nest_service("/static", ServeDir::new(static_dir))
        .fallback(fallback)
        .with_state(Arc::new(Notes::default()))
        .layer(CompressionLayer::new())
        .layer(middleware::from_fn(request_id))
}

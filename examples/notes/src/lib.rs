//! The notes JSON API on the Celer framework, the example to copy:
//! CRUD with typed ids, a body limit, `Location` from `url_for`, problem+json
//! errors, static files, a request-id middleware, an HTML page, shared
//! state and compression. `main.rs` serves it with graceful shutdown.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use celer::files::Files;
use celer::http::{HeaderValue, StatusCode, header::LOCATION};
use celer::middleware::compression::Compression;
use celer::response::{Html, IntoResponse, Json};
use celer::{App, Error, Next, Request, Response};
use serde::{Deserialize, Serialize};

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

impl Notes {
    fn all(&self) -> MutexGuard<'_, BTreeMap<u64, Note>> {
        self.all.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn not_found(id: u64) -> Error {
    Error::status(StatusCode::NOT_FOUND, format!("no note {id}"))
}

async fn list(req: Request) -> Result<Json<Vec<Note>>, Error> {
    Ok(Json(
        req.state::<Notes>()?.all().values().cloned().collect(),
    ))
}

async fn create(mut req: Request) -> Result<impl IntoResponse, Error> {
    let NewNote { text } = req.json().await?;
    let notes = req.state::<Notes>()?;
    let id = notes.last_id.fetch_add(1, Ordering::Relaxed) + 1;
    let note = Note { id, text };
    notes.all().insert(id, note.clone());
    let location = req.url_for("note", &[("id", &id)])?;
    Ok((StatusCode::CREATED, [(LOCATION, location)], Json(note)))
}

async fn show(req: Request) -> Result<Json<Note>, Error> {
    let id: u64 = req.param("id")?;
    let note = req.state::<Notes>()?.all().get(&id).cloned();
    note.map(Json).ok_or_else(|| not_found(id))
}

async fn update(mut req: Request) -> Result<Json<Note>, Error> {
    let id: u64 = req.param("id")?;
    let NewNote { text } = req.json().await?;
    let mut all = req.state::<Notes>()?.all();
    let note = all.get_mut(&id).ok_or_else(|| not_found(id))?;
    note.text = text;
    Ok(Json(note.clone()))
}

async fn remove(req: Request) -> Result<StatusCode, Error> {
    let id: u64 = req.param("id")?;
    match req.state::<Notes>()?.all().remove(&id) {
        Some(_) => Ok(StatusCode::NO_CONTENT),
        None => Err(not_found(id)),
    }
}

async fn page(req: Request) -> Result<Html<String>, Error> {
    let items: String = req
        .state::<Notes>()?
        .all()
        .values()
        .map(|n| format!("<li>{}</li>", escape(&n.text)))
        .collect();
    Ok(Html(format!(
        "<!doctype html><title>Notes</title><link rel=stylesheet href=/static/style.css><ul>{items}</ul>"
    )))
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Gives every response an `x-request-id` (the client's, or a new one) and
/// logs one line per request.
async fn request_id(req: Request, next: Next) -> Response {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let id = match req.headers().get("x-request-id") {
        Some(id) => id.clone(),
        None => HeaderValue::from(LAST.fetch_add(1, Ordering::Relaxed) + 1),
    };
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let mut res = next.run(req).await;
    tracing::info!(request_id = ?id, %method, path, status = res.status().as_u16());
    res.headers_mut().insert("x-request-id", id);
    res
}

/// The app, serving static files from `static_dir`.
pub fn app(static_dir: &str) -> std::io::Result<App> {
    let mut app = App::new();
    app.state(Notes::default()).problem_details(true);
    app.middleware(request_id).middleware(Compression::new());
    app.get("/", page);
    app.get(
        "/static/<path:file>",
        Files::new(static_dir)?.handler("file"),
    );
    app.scope("/notes", |notes| {
        notes.body_limit(BODY_LIMIT);
        notes.get("", list);
        notes.post("", create);
        notes.get("/<uint:id>", show).name("note");
        notes.put("/<uint:id>", update);
        notes.delete("/<uint:id>", remove);
    });
    Ok(app)
}

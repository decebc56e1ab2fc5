//! A small CRUD API of to-do items on the Celer framework.
//!
//! | method and path          | answer                                        |
//! |--------------------------|-----------------------------------------------|
//! | `GET /items?done=BOOL`   | `200`, the items (optionally filtered)         |
//! | `POST /items`            | `201`, the item, `Location` from `url_for`     |
//! | `GET /items/<int:id>`    | `200`, the item (route named `item`)           |
//! | `PUT /items/<int:id>`    | `200`, the item replaced                       |
//! | `PATCH /items/<int:id>`  | `200`, the item with the given fields changed  |
//! | `DELETE /items/<int:id>` | `204`                                          |
//!
//! What the framework answers by itself: `404` for unknown paths and ids
//! that are not integers, `405` with `Allow` for other methods, `415` without
//! a JSON content type, `400` for malformed JSON, `422` for JSON of the wrong
//! shape, `413` over the body limit. A status handler renders every `4xx` as
//! an RFC 9457 problem document.
//!
//! Run with `cargo run -p example-rest -- --listen tcp://127.0.0.1:8080`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use celer::response::{IntoResponse, Json};
use celer::{App, Error, Request, Response};
use http::header::{CONTENT_TYPE, LOCATION};
use http::{HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};

/// The body limit of this API, in bytes: items are small.
pub const BODY_LIMIT: usize = 16 * 1024;

/// A to-do item as stored and sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// Assigned by the server, never reused.
    pub id: i64,
    /// What to do.
    pub name: String,
    /// Whether it is done.
    pub done: bool,
}

/// The body of `POST /items` and `PUT /items/<id>`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewItem {
    name: String,
    #[serde(default)]
    done: bool,
}

/// The body of `PATCH /items/<id>`: only the fields to change.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemPatch {
    name: Option<String>,
    done: Option<bool>,
}

/// The query of `GET /items`.
#[derive(Debug, Deserialize)]
struct Filter {
    done: Option<bool>,
}

/// The items, shared by every request (and every worker thread) through
/// the app's state.
#[derive(Debug, Default)]
struct Store {
    /// Items by id; a `BTreeMap` so that listings come in creation order.
    inner: Mutex<Items>,
}

#[derive(Debug, Default)]
struct Items {
    by_id: BTreeMap<i64, Item>,
    last_id: i64,
}

impl Store {
    /// Runs `f` on the items under the lock; never held across an await.
    fn with<R>(&self, f: impl FnOnce(&mut Items) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// An RFC 9457 problem document.
#[derive(Debug, Serialize)]
struct Problem {
    title: &'static str,
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
}

/// Builds the API.
///
/// ```
/// let app = example_rest::app();
/// assert_eq!(app.url_for("item", &[("id", &3)]).unwrap(), "/items/3");
/// ```
pub fn app() -> App {
    let mut app = App::new();
    app.state(Arc::new(Store::default()));
    app.body_limit(BODY_LIMIT);
    app.status(400..=499, problem);
    app.scope("/items", |items| {
        items.get("", list);
        items.post("", create);
        items.get("/<int:id>", show).name("item");
        items.put("/<int:id>", replace);
        items.patch("/<int:id>", update);
        items.delete("/<int:id>", remove);
    });
    app
}

fn store(req: &Request) -> Result<&Store, Error> {
    Ok(&**req.state::<Arc<Store>>()?)
}

fn not_found() -> Error {
    Error::status(StatusCode::NOT_FOUND, "no item with this id")
}

async fn list(req: Request) -> Result<Json<Vec<Item>>, Error> {
    let filter: Filter = req.query()?;
    let items = store(&req)?.with(|items| {
        items
            .by_id
            .values()
            .filter(|item| filter.done.is_none_or(|done| item.done == done))
            .cloned()
            .collect()
    });
    Ok(Json(items))
}

async fn create(mut req: Request) -> Result<impl IntoResponse, Error> {
    let new: NewItem = req.json().await?;
    let item = store(&req)?.with(|items| {
        items.last_id += 1;
        let item = Item {
            id: items.last_id,
            name: new.name,
            done: new.done,
        };
        items.by_id.insert(item.id, item.clone());
        item
    });
    let location = HeaderValue::try_from(req.url_for("item", &[("id", &item.id)])?)?;
    Ok((StatusCode::CREATED, ([(LOCATION, location)], Json(item))))
}

async fn show(req: Request) -> Result<Json<Item>, Error> {
    let id: i64 = req.param("id")?;
    let item = store(&req)?.with(|items| items.by_id.get(&id).cloned());
    item.map(Json).ok_or_else(not_found)
}

async fn replace(mut req: Request) -> Result<Json<Item>, Error> {
    let id: i64 = req.param("id")?;
    let new: NewItem = req.json().await?;
    let item = store(&req)?.with(|items| {
        let item = items.by_id.get_mut(&id)?;
        item.name = new.name;
        item.done = new.done;
        Some(item.clone())
    });
    item.map(Json).ok_or_else(not_found)
}

async fn update(mut req: Request) -> Result<Json<Item>, Error> {
    let id: i64 = req.param("id")?;
    let patch: ItemPatch = req.json().await?;
    let item = store(&req)?.with(|items| {
        let item = items.by_id.get_mut(&id)?;
        if let Some(name) = patch.name {
            item.name = name;
        }
        if let Some(done) = patch.done {
            item.done = done;
        }
        Some(item.clone())
    });
    item.map(Json).ok_or_else(not_found)
}

async fn remove(req: Request) -> Result<StatusCode, Error> {
    let id: i64 = req.param("id")?;
    let removed = store(&req)?.with(|items| items.by_id.remove(&id));
    removed
        .map(|_| StatusCode::NO_CONTENT)
        .ok_or_else(not_found)
}

/// Renders a client error as a problem document; the short text the
/// framework or a handler answered becomes its `detail`.
async fn problem(res: Response) -> impl IntoResponse {
    let status = res.status();
    let detail = res.into_body().collect_bytes().await.ok();
    let problem = Problem {
        title: status.canonical_reason().unwrap_or("Client Error"),
        status: status.as_u16(),
        detail: detail
            .filter(|text| !text.is_empty())
            .map(|text| String::from_utf8_lossy(&text).into_owned()),
    };
    (
        status,
        (
            [(
                CONTENT_TYPE,
                HeaderValue::from_static("application/problem+json"),
            )],
            Json(problem),
        ),
    )
}

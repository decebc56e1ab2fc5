//! OpenAPI 3.1 documents from the route table, and a docs page.
//!
//! An app describes itself: every route with a rule becomes an OpenAPI
//! path (`/tasks/<uint:id>` is `/tasks/{id}`, the parameter typed from the
//! rule: `uint` is an integer from 0), its methods become operations, its
//! name the `operationId`. What the rule cannot say, the route says with
//! [`RouteBuilder::describe`](crate::app::RouteBuilder::describe): query
//! parameters, headers, the request body and the responses, whose schemas
//! [schemars](https://docs.rs/schemars) derives from the handlers' types as
//! JSON Schema 2020-12, the dialect of OpenAPI 3.1.
//!
//! ```
//! use celer::openapi::{JsonSchema, OpenApi};
//! use celer::Request;
//!
//! #[derive(serde::Serialize, JsonSchema)]
//! struct Item { id: u64, name: String }
//!
//! let mut app = celer::App::new();
//! app.get("/items/<uint:id>", |_req: Request| async { "" })
//!     .name("item")
//!     .describe(|op| op.response_json::<Item>(200, "The item").response(404, "No such item"));
//! app.get("/health", |_req: Request| async { "ok" });
//!
//! let doc = OpenApi::new("Items", "1.0").document(&app);
//! assert_eq!(doc["openapi"], "3.1.0");
//! let get = &doc["paths"]["/items/{id}"]["get"];
//! assert_eq!(get["parameters"][0]["schema"]["minimum"], 0);
//! assert_eq!(get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
//!            "#/components/schemas/Item");
//! // Undescribed routes are there too, with a default response.
//! assert!(doc["paths"]["/health"]["get"]["responses"]["default"].is_object());
//! ```
//!
//! [`OpenApi::serve`] adds two routes: the document as JSON and an HTML
//! page listing the operations and schemas, self-contained (no script, no
//! CDN).
//!
//! # What is and is not described
//!
//! - Methods: `GET`, `PUT`, `POST`, `DELETE`, `OPTIONS`, `HEAD`, `PATCH`,
//!   `TRACE` as the route registers them (`any` is all eight). The `HEAD`
//!   every `GET` route answers and the automatic `OPTIONS` answer are not
//!   listed: they follow from HTTP itself (RFC 9110 §9.3.2, §9.3.7).
//!   `CONNECT` and extension methods have no place in OpenAPI 3.1.
//! - Regex routes are left out: a regular expression is not a path
//!   template.
//! - Two rules that give the same template (`/a/<int:x>` and `/a/<x>`) share
//!   one path, named after the first; for a method both have, the first
//!   route is the operation, as the router tries it first.
//! - A route without a description has its path parameters and a
//!   `default` response.

mod build;
mod html;
mod operation;

use std::sync::Arc;

use serde_json::Value;

use crate::app::App;
use crate::response::{Html, Json};
use crate::{IntoResponse, Request, Response};

pub use self::operation::Operation;
pub use schemars::{self, JsonSchema, Schema, json_schema};

use self::build::Built;

/// The document's settings: its `info`. Builds the document of an app
/// ([`document`](OpenApi::document)) or serves it ([`serve`](OpenApi::serve)).
#[derive(Debug, Clone)]
pub struct OpenApi {
    title: String,
    version: String,
    description: Option<String>,
}

impl OpenApi {
    /// A document titled `title`, for the API's `version`.
    pub fn new(title: impl Into<String>, version: impl Into<String>) -> Self {
        OpenApi {
            title: title.into(),
            version: version.into(),
            description: None,
        }
    }

    /// The API's description (CommonMark).
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// The OpenAPI 3.1 document of `app`'s routes, as they are now.
    pub fn document(&self, app: &App) -> Value {
        self.render(&build::build(app.shared()), "")
    }

    /// Adds `GET json_rule`, the document as JSON, and `GET docs_rule`, an
    /// HTML page of it, to `app`. The document describes the app's routes
    /// as they are when `serve` is called: call it after the routes.
    ///
    /// Mounted under a prefix, the app serves the document with the prefix
    /// in its paths (the prefix as the request came: a prefix with
    /// parameters shows their values). Neither route is in the document.
    ///
    /// # Panics
    ///
    /// Panics if a rule is not a static path (no parameters).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use celer::openapi::OpenApi;
    /// use celer::test::TestClient;
    ///
    /// let mut api = celer::App::new();
    /// api.get("/ping", |_req: celer::Request| async { "pong" });
    /// OpenApi::new("Ping", "1").serve(&mut api, "/openapi.json", "/docs");
    /// let mut app = celer::App::new();
    /// app.mount("/api", api);
    ///
    /// let client = TestClient::new(app);
    /// let doc: serde_json::Value = client.get("/api/openapi.json").await.json();
    /// assert!(doc["paths"]["/api/ping"]["get"].is_object());
    /// assert!(client.get("/api/docs").await.text().contains("/api/ping"));
    /// # });
    /// ```
    #[track_caller]
    pub fn serve(&self, app: &mut App, json_rule: &str, docs_rule: &str) -> &Self {
        for rule in [json_rule, docs_rule] {
            if rule.contains('<') || !rule.starts_with('/') {
                panic!("OpenApi::serve: {rule:?} must be a static path starting with '/'");
            }
        }
        let served = Arc::new(Served {
            spec: self.clone(),
            built: build::build(app.shared()),
            json_rule: json_rule.into(),
            docs_rule: docs_rule.into(),
        });
        let s = served.clone();
        app.get(json_rule, move |req: Request| {
            let s = s.clone();
            async move { s.json(&req) }
        })
        .describe(Operation::hidden);
        let s = served;
        app.get(docs_rule, move |req: Request| {
            let s = s.clone();
            async move { s.docs(&req) }
        })
        .describe(Operation::hidden);
        self
    }

    fn render(&self, built: &Built, prefix: &str) -> Value {
        let mut info = serde_json::Map::new();
        info.insert("title".into(), self.title.clone().into());
        info.insert("version".into(), self.version.clone().into());
        if let Some(description) = &self.description {
            info.insert("description".into(), description.clone().into());
        }
        let mut paths = serde_json::Map::new();
        for (template, item) in &built.paths {
            let mut path = format!("{prefix}{template}");
            if path.is_empty() {
                path.push('/');
            }
            paths.insert(path, Value::Object(item.clone()));
        }
        let mut doc = serde_json::Map::new();
        doc.insert("openapi".into(), "3.1.0".into());
        doc.insert("info".into(), Value::Object(info));
        doc.insert("paths".into(), Value::Object(paths));
        if !built.schemas.is_empty() {
            let mut components = serde_json::Map::new();
            components.insert("schemas".into(), Value::Object(built.schemas.clone()));
            doc.insert("components".into(), Value::Object(components));
        }
        Value::Object(doc)
    }
}

/// What the two routes of [`OpenApi::serve`] share.
struct Served {
    spec: OpenApi,
    built: Built,
    json_rule: String,
    docs_rule: String,
}

impl Served {
    /// The mount prefix, from the request's path and the route's own rule
    /// (a trailing slash that the app's policy let through left out).
    fn prefix<'r>(req: &'r Request, rule: &str) -> &'r str {
        let path = req.path();
        let path = match rule.ends_with('/') {
            true => path,
            false => path.strip_suffix('/').unwrap_or(path),
        };
        path.strip_suffix(rule).unwrap_or("")
    }

    fn json(&self, req: &Request) -> Response {
        let prefix = Self::prefix(req, &self.json_rule);
        Json(self.spec.render(&self.built, prefix)).into_response()
    }

    fn docs(&self, req: &Request) -> Response {
        let prefix = Self::prefix(req, &self.docs_rule);
        let doc = self.spec.render(&self.built, prefix);
        let json_url = format!("{prefix}{}", self.json_rule);
        Html(html::page(&doc, &json_url)).into_response()
    }
}

//! The builder returned when a route is added: name, chain, middleware and
//! body limit of that route.

use std::fmt;

use super::App;
use crate::handler::{Handler, boxed};

/// Configures the route just added with [`App::route`] and its shortcuts.
///
/// ```
/// use celer::{Next, Request};
/// let mut app = celer::App::new();
/// app.post("/upload", |mut req: Request| async move {
///     req.bytes().await.map(|b| b.len().to_string())
/// })
/// .name("upload")
/// .body_limit(1024);
/// ```
pub struct RouteBuilder<'a> {
    app: &'a mut App,
    id: usize,
}

impl<'a> RouteBuilder<'a> {
    pub(super) fn new(app: &'a mut App, id: usize) -> Self {
        RouteBuilder { app, id }
    }

    fn route(&mut self) -> &mut super::Route {
        &mut self.app.shared_mut().routes[self.id]
    }

    /// Names the route, for [`App::url_for`].
    ///
    /// # Panics
    ///
    /// Panics if another route has this name.
    #[track_caller]
    pub fn name(self, name: &str) -> Self {
        self.app.shared_mut().set_name(self.id, name);
        self
    }

    /// Appends a handler to the route's chain: it runs when the previous
    /// handler calls `next`.
    ///
    /// ```
    /// use celer::{Next, Request, Response};
    /// let mut app = celer::App::new();
    /// app.get("/", |req: Request, next: Next| async move { next.run(req).await })
    ///     .then(|_req: Request| async { "second" });
    /// ```
    pub fn then<H: Handler<T>, T>(mut self, handler: H) -> Self {
        self.route().chain.push(boxed(handler));
        self
    }

    /// Adds middleware to this route only: it runs after the app's and the
    /// scopes' middleware and before the handler, in registration order.
    ///
    /// ```
    /// use celer::{Next, Request, Response};
    /// async fn deny(_req: Request, _next: Next) -> http::StatusCode {
    ///     http::StatusCode::FORBIDDEN
    /// }
    /// let mut app = celer::App::new();
    /// app.get("/secret", |_req: Request| async { "s" }).middleware(deny);
    /// ```
    pub fn middleware<H: Handler<T>, T>(mut self, middleware: H) -> Self {
        let route = self.route();
        route.chain.insert(route.handler_idx, boxed(middleware));
        route.handler_idx += 1;
        self
    }

    /// Describes the route for the OpenAPI document: `describe` gets the
    /// route's description so far (empty at first) and returns it
    /// completed; see [`openapi::Operation`](crate::openapi::Operation).
    ///
    /// ```
    /// use celer::openapi::{JsonSchema, OpenApi};
    /// #[derive(serde::Serialize, JsonSchema)]
    /// struct Health { ok: bool }
    ///
    /// let mut app = celer::App::new();
    /// app.get("/health", |_req: celer::Request| async { "" })
    ///     .describe(|op| op.summary("Liveness").response_json::<Health>(200, "Alive"));
    /// let doc = OpenApi::new("Service", "1").document(&app);
    /// assert_eq!(doc["paths"]["/health"]["get"]["summary"], "Liveness");
    /// ```
    #[cfg(feature = "openapi")]
    pub fn describe(
        mut self,
        describe: impl FnOnce(crate::openapi::Operation) -> crate::openapi::Operation,
    ) -> Self {
        let route = self.route();
        let current = route.doc.as_deref().cloned().unwrap_or_default();
        route.doc = Some(std::sync::Arc::new(describe(current)));
        self
    }

    /// Sets the body limit, in bytes, for this route; larger bodies are
    /// answered with 413.
    ///
    /// Default is the app's [`body_limit`](App::body_limit).
    pub fn body_limit(mut self, limit: usize) -> Self {
        self.route().body_limit = Some(limit);
        self
    }
}

impl fmt::Debug for RouteBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let route = &self.app.shared.routes[self.id];
        f.debug_struct("RouteBuilder")
            .field("rule", &route.rule)
            .field("methods", &route.methods)
            .finish()
    }
}

macro_rules! method_shortcuts {
    ($($(#[$meta:meta])* $fn:ident => $set:ident),+ $(,)?) => {
        impl App {
            $(
                $(#[$meta])*
                ///
                /// # Panics
                ///
                /// Panics if the rule is invalid.
                #[track_caller]
                pub fn $fn<H: Handler<T>, T>(&mut self, rule: &str, handler: H) -> RouteBuilder<'_> {
                    self.route(crate::MethodSet::$set, rule, handler)
                }
            )+
        }
    };
}

method_shortcuts! {
    /// Adds a `GET` route; it answers `HEAD` too, with the body dropped,
    /// unless a route for `HEAD` itself matches.
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.get("/", |_req: celer::Request| async { "home" });
    /// ```
    get => GET,
    /// Adds a `POST` route.
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.post("/items", |_req: celer::Request| async { http::StatusCode::CREATED });
    /// ```
    post => POST,
    /// Adds a `PUT` route.
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.put("/items/<int:id>", |_req: celer::Request| async { "put" });
    /// ```
    put => PUT,
    /// Adds a `DELETE` route.
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.delete("/items/<int:id>", |_req: celer::Request| async { http::StatusCode::NO_CONTENT });
    /// ```
    delete => DELETE,
    /// Adds a `PATCH` route.
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.patch("/items/<int:id>", |_req: celer::Request| async { "patched" });
    /// ```
    patch => PATCH,
    /// Adds a `HEAD` route.
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.head("/ping", |_req: celer::Request| async { "" });
    /// ```
    head => HEAD,
    /// Adds an `OPTIONS` route, replacing the automatic `OPTIONS` answer.
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.options("/", |_req: celer::Request| async { "" });
    /// ```
    options => OPTIONS,
    /// Adds a route for every method, extension methods included.
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.any("/echo", |req: celer::Request| async move { req.method().to_string() });
    /// ```
    any => ANY,
}

//! The application: routes, scopes, mounts, middleware, status handlers and
//! shared state, served as a `tower::Service`.

mod route;
mod scope;
mod service;
mod shutdown;
mod status;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use http::{Extensions, Method};

use crate::extract::DEFAULT_BODY_LIMIT;
use crate::handler::{BoxHandler, Handler, boxed};
use crate::router::{
    ExactIndex, MethodSet, N_STANDARD, Router, Rule, TypeRegistry, UrlError, UrlParams,
    standard_method,
};
use crate::serve::ConnInfo;

pub use self::route::RouteBuilder;
pub use self::scope::{Scope, TrailingSlash};
pub use self::service::ResponseFuture;
pub(crate) use self::service::note_panicked_route;
pub use self::shutdown::ShutdownNotice;
pub use self::status::{StatusHandler, StatusMatch};

use self::status::BoxStatusHandler;

/// A web application: a router of handlers plus middleware and state.
///
/// `App` is built with `&mut self` methods, then served: it implements
/// `tower::Service<http::Request<B>>` for any `http_body::Body` `B`, and
/// cloning it is one `Arc` clone.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use celer::{App, Request};
/// use tower::ServiceExt;
///
/// let mut app = App::new();
/// app.get("/hello/<name>", |req: Request| async move {
///     format!("Hello, {}!", req.param_str("name").unwrap_or_default())
/// });
///
/// let req = http::Request::get("/hello/world").body(celer::Body::empty()).unwrap();
/// let res = app.oneshot(req).await.unwrap();
/// let body = res.into_body().collect_bytes().await.unwrap();
/// assert_eq!(&body[..], b"Hello, world!");
/// # });
/// ```
#[derive(Clone)]
pub struct App {
    shared: Arc<Shared>,
    /// Open scopes while building (empty outside `scope` closures).
    scopes: Vec<ScopeFrame>,
    /// What requests from `Service::call` hold: built on the first call,
    /// dropped whenever the app changes.
    conn: Option<Arc<AppConn>>,
}

/// The app as one connection serves it: the app and the connection's
/// facts. Every request holds it.
///
/// One per connection under [`serve`](mod@crate::serve), so the reference count
/// a request takes and gives back is the connection's own, written by one
/// thread only, and not the app's, which every worker thread would write
/// for every request.
pub(crate) struct AppConn {
    pub(crate) shared: Arc<Shared>,
    /// The connection's facts, set once and read by every request of the
    /// connection; `None` when the app is called without a server of ours.
    pub(crate) info: Option<ConnInfo>,
}

/// What requests share: everything built by the `App` methods.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) router: Router<usize>,
    /// Route ids of the fully static rules by path, tried before the router.
    pub(crate) exact: ExactIndex<usize>,
    /// For each path of `exact`, by its index there, the route that answers
    /// each standard method.
    pub(crate) statics: Vec<StaticRoutes>,
    pub(crate) routes: Vec<Route>,
    names: HashMap<Box<str>, usize>,
    /// App-level middleware, outermost first; they run before routing.
    pub(crate) middleware: Vec<BoxHandler>,
    /// App-level status handlers, applied to every response.
    pub(crate) status: Vec<status::Entry>,
    pub(crate) state: Extensions,
    /// Error responses rendered as RFC 9457 problem details.
    pub(crate) problem: bool,
    pub(crate) body_limit: usize,
    /// What a path that only differs from a route's by a trailing slash
    /// gets, where its scope does not say.
    pub(crate) trailing_slash: TrailingSlash,
    pub(crate) asterisk: Option<BoxHandler>,
    /// Fired by `App::run` / `App::serve` when shutdown starts; shared by
    /// every clone of the app.
    pub(crate) shutdown: ShutdownNotice,
    /// Some route is a WebSocket route (so HTTP/2 advertises extended
    /// CONNECT, RFC 8441 §3).
    pub(crate) websocket: bool,
}

/// The routes of one fully static path: for each standard method but HEAD
/// (by `standard_index`), the first route that takes it, which is the
/// route the walk would choose; [`StaticRoutes::NONE`] when no route does.
/// HEAD is always `NONE`: it may be answered by a GET route, which only the
/// walk decides.
#[derive(Clone)]
pub(crate) struct StaticRoutes(pub(crate) [u32; N_STANDARD]);

#[derive(Clone)]
pub(crate) struct Route {
    pub(crate) rule: Rule,
    pub(crate) methods: MethodSet,
    /// Scope middleware, route middleware, the handler, `.then` handlers.
    pub(crate) chain: Vec<BoxHandler>,
    /// Index of the main handler in `chain`.
    handler_idx: usize,
    name: Option<Box<str>>,
    pub(crate) body_limit: Option<usize>,
    /// State installed by the route's scopes, looked up before the app's.
    pub(crate) state: Option<Arc<Extensions>>,
    /// The trailing-slash policy of the route's scope, if it set one.
    pub(crate) trailing_slash: Option<TrailingSlash>,
    /// What the route says of itself in the OpenAPI document.
    #[cfg(feature = "openapi")]
    pub(crate) doc: Option<Arc<crate::openapi::Operation>>,
}

#[derive(Clone)]
struct ScopeFrame {
    /// The full prefix: outer scopes included.
    prefix: Rule,
    middleware: Vec<BoxHandler>,
    first_route: usize,
    /// The parameter types of the scope's rules: the enclosing ones' plus
    /// its own.
    types: TypeRegistry,
    body_limit: Option<usize>,
    state: Extensions,
    trailing_slash: Option<TrailingSlash>,
}

// ===== impl App =====

impl App {
    /// Creates an empty app.
    ///
    /// ```
    /// let app = celer::App::new();
    /// # let _ = app;
    /// ```
    pub fn new() -> Self {
        App {
            shared: Arc::new(Shared {
                router: Router::new(),
                exact: ExactIndex::new(),
                statics: Vec::new(),
                routes: Vec::new(),
                names: HashMap::new(),
                middleware: Vec::new(),
                status: Vec::new(),
                state: Extensions::new(),
                problem: false,
                body_limit: DEFAULT_BODY_LIMIT,
                trailing_slash: TrailingSlash::Strict,
                asterisk: None,
                shutdown: ShutdownNotice::new(),
                websocket: false,
            }),
            scopes: Vec::new(),
            conn: None,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    fn shared_mut(&mut self) -> &mut Shared {
        // The cached handle holds a reference; dropped first, it does not
        // make `make_mut` copy the app.
        self.conn = None;
        Arc::make_mut(&mut self.shared)
    }

    /// The handle of requests that come through `Service::call`, without
    /// connection addresses.
    pub(crate) fn conn(&mut self) -> &Arc<AppConn> {
        let shared = &self.shared;
        self.conn
            .get_or_insert_with(|| Arc::new(AppConn::new(shared.clone(), None)))
    }

    /// Adds a route for a set of methods.
    ///
    /// # Panics
    ///
    /// Panics if the rule is invalid.
    ///
    /// ```
    /// use celer::{MethodSet, Request};
    /// let mut app = celer::App::new();
    /// app.route(MethodSet::GET | MethodSet::POST, "/form", |_req: Request| async { "ok" });
    /// ```
    #[track_caller]
    pub fn route<H: Handler<T>, T>(
        &mut self,
        methods: impl Into<MethodSet>,
        rule: &str,
        handler: H,
    ) -> RouteBuilder<'_> {
        let parsed = or_panic(self.parse_rule(rule));
        self.add_route(methods.into(), parsed, boxed(handler))
    }

    /// Parses `rule` with the types of the innermost open scope.
    fn parse_rule(&self, rule: &str) -> Result<Rule, crate::router::RuleError> {
        match self.scopes.last() {
            Some(scope) => Rule::parse(rule, &scope.types),
            None => self.shared.router.parse(rule),
        }
    }

    /// Adds a regex route: the regex matches the rest of the path under the
    /// current scope, and its named groups are the parameters.
    ///
    /// # Panics
    ///
    /// Panics if the regex is invalid.
    ///
    /// ```
    /// use celer::{MethodSet, Request};
    /// let mut app = celer::App::new();
    /// app.regex(MethodSet::GET, r"/v(?P<major>\d+)/.*", |req: Request| async move {
    ///     req.param_str("major").unwrap_or_default().into_owned()
    /// });
    /// ```
    #[track_caller]
    pub fn regex<H: Handler<T>, T>(
        &mut self,
        methods: impl Into<MethodSet>,
        regex: &str,
        handler: H,
    ) -> RouteBuilder<'_> {
        let parsed = or_panic(self.shared.router.parse_regex(regex));
        self.add_route(methods.into(), parsed, boxed(handler))
    }

    #[track_caller]
    fn add_route(
        &mut self,
        methods: MethodSet,
        rule: Rule,
        handler: BoxHandler,
    ) -> RouteBuilder<'_> {
        let rule = match self.scopes.last() {
            Some(scope) => or_panic(rule.prefixed(&scope.prefix)),
            None => rule,
        };
        let route = Route {
            rule,
            methods,
            chain: vec![handler],
            handler_idx: 0,
            name: None,
            body_limit: None,
            state: None,
            trailing_slash: None,
            #[cfg(feature = "openapi")]
            doc: None,
        };
        let id = self.shared_mut().push_route(route);
        RouteBuilder::new(self, id)
    }

    /// Adds a WebSocket route: GET requests to `rule` that ask for an
    /// upgrade (RFC 6455, HTTP/1.1) and extended CONNECT requests with
    /// `:protocol = websocket` (RFC 8441, HTTP/2) are validated and
    /// switched; see [`crate::ws`]. An app with a WebSocket route makes
    /// the engine advertise WebSocket over HTTP/2 when it serves it.
    ///
    /// # Panics
    ///
    /// Panics if the rule is invalid.
    #[track_caller]
    pub fn websocket(&mut self, rule: &str, route: crate::ws::WebSocketRoute) -> RouteBuilder<'_> {
        self.shared_mut().websocket = true;
        self.route(
            MethodSet::GET | MethodSet::CONNECT,
            rule,
            route.into_handler(),
        )
    }

    /// Opens a [`Scope`]: routes added inside `build` live under `prefix`,
    /// and what is set on the scope (middleware, status handlers, state,
    /// body limit, parameter types, trailing-slash policy) applies to the
    /// scope's routes only.
    ///
    /// ```
    /// use celer::Request;
    /// let mut app = celer::App::new();
    /// app.scope("/admin", |admin| {
    ///     admin.body_limit(1024);
    ///     admin.get("", |_req: Request| async { "dashboard" });
    ///     admin.get("/users", |_req: Request| async { "users" }).name("users");
    /// });
    /// assert_eq!(app.url_for("users", &[]).unwrap(), "/admin/users");
    /// ```
    ///
    /// # Panics
    ///
    /// Panics if the prefix is not a valid rule without catch-all.
    #[track_caller]
    pub fn scope(&mut self, prefix: &str, build: impl FnOnce(&mut Scope<'_>)) -> &mut Self {
        let parsed = or_panic(self.parse_rule(prefix));
        let frame = match self.scopes.last() {
            Some(outer) => ScopeFrame {
                prefix: or_panic(parsed.prefixed(&outer.prefix)),
                middleware: Vec::new(),
                first_route: self.shared.routes.len(),
                types: outer.types.clone(),
                body_limit: None,
                state: Extensions::new(),
                trailing_slash: None,
            },
            None => ScopeFrame {
                prefix: parsed,
                middleware: Vec::new(),
                first_route: self.shared.routes.len(),
                types: self.shared.router.types().clone(),
                body_limit: None,
                state: Extensions::new(),
                trailing_slash: None,
            },
        };
        self.scopes.push(frame);
        build(&mut Scope::new(self));
        if let Some(frame) = self.scopes.pop() {
            let shared = self.shared_mut();
            shared.wrap_routes(frame.first_route, &frame.middleware);
            // Inner scopes and routes that chose closed first: theirs stay.
            for route in &mut shared.routes[frame.first_route..] {
                route.body_limit = route.body_limit.or(frame.body_limit);
                route.trailing_slash = route.trailing_slash.or(frame.trailing_slash);
            }
            if !frame.state.is_empty() {
                for route in &mut shared.routes[frame.first_route..] {
                    // Inner scopes closed first: their values win.
                    let mut state = frame.state.clone();
                    if let Some(inner) = &route.state {
                        state.extend((**inner).clone());
                    }
                    route.state = Some(Arc::new(state));
                }
            }
        }
        self
    }

    fn scope_frame(&mut self) -> &mut ScopeFrame {
        self.scopes
            .last_mut()
            .unwrap_or_else(|| unreachable!("a Scope exists only inside App::scope"))
    }

    /// Mounts another app under `prefix`: its routes, names, middleware,
    /// status handlers, types and state join this app.
    ///
    /// The sub-app's middleware and status handlers wrap its own routes only;
    /// its state is merged into this app's (its values win), and its routes
    /// keep its body limit unless they set their own.
    ///
    /// # Panics
    ///
    /// Panics if the prefix is invalid or a route name is already taken.
    ///
    /// ```
    /// use celer::Request;
    /// let mut api = celer::App::new();
    /// api.get("/items/<int:id>", |_req: Request| async { "item" }).name("item");
    ///
    /// let mut app = celer::App::new();
    /// app.mount("/api/v1", api);
    /// assert_eq!(app.url_for("item", &[("id", &3)]).unwrap(), "/api/v1/items/3");
    /// ```
    #[track_caller]
    pub fn mount(&mut self, prefix: &str, mut sub: App) -> &mut Self {
        sub.conn = None;
        let sub = Arc::unwrap_or_clone(sub.shared);
        self.shared_mut().router.merge_types(sub.router.types());
        let parsed = or_panic(self.shared.router.parse(prefix));
        let prefix = match self.scopes.last() {
            Some(outer) => or_panic(parsed.prefixed(&outer.prefix)),
            None => parsed,
        };
        // The sub-app's middleware, then its status handlers, as in an app
        // of its own.
        let mut wrappers: Vec<BoxHandler> = sub.middleware.to_vec();
        if !sub.status.is_empty() || sub.problem {
            wrappers.push(status::middleware(sub.status.clone(), sub.problem));
        }
        let shared = self.shared_mut();
        shared.shutdown.link(sub.shutdown);
        shared.websocket |= sub.websocket;
        shared.state.extend(sub.state);
        let first = shared.routes.len();
        for mut route in sub.routes {
            route.rule = or_panic(route.rule.prefixed(&prefix));
            route.body_limit = route.body_limit.or(Some(sub.body_limit));
            route.trailing_slash = route.trailing_slash.or(Some(sub.trailing_slash));
            let name = route.name.take();
            let id = shared.push_route(route);
            if let Some(name) = name {
                shared.set_name(id, &name);
            }
        }
        shared.wrap_routes(first, &wrappers);
        self
    }

    /// Adds middleware: `(req, next) -> response`.
    ///
    /// At the top level it wraps the whole app, routing included (so it also
    /// sees 404 and 405 answers), in registration order: the first added is
    /// the outermost. Inside a [`scope`](App::scope) it wraps the scope's
    /// routes, after the enclosing scopes' middleware.
    ///
    /// ```
    /// use celer::{Next, Request, Response};
    /// async fn server_header(req: Request, next: Next) -> Response {
    ///     let mut res = next.run(req).await;
    ///     res.headers_mut().insert("server", http::HeaderValue::from_static("celer"));
    ///     res
    /// }
    /// let mut app = celer::App::new();
    /// app.middleware(server_header);
    /// ```
    #[track_caller]
    pub fn middleware<H: Handler<T>, T>(&mut self, middleware: H) -> &mut Self {
        let middleware = boxed(middleware);
        match self.scopes.last_mut() {
            Some(scope) => scope.middleware.push(middleware),
            None => self.shared_mut().middleware.push(middleware),
        }
        self
    }

    /// Installs a status handler: it renders the responses whose status
    /// matches (one status or a range) and whose body nobody chose: the
    /// framework's own (404, 405, rejections, [`Error`](crate::Error)s) and
    /// bodyless ones (a handler returning a bare `StatusCode`). A body a
    /// handler chose, such as `(StatusCode::NOT_FOUND, Json(..))`, is kept;
    /// [`status_all`](App::status_all) replaces those too.
    ///
    /// The handler receives the response; when it answers `200 OK`, the
    /// original status is kept, and every header of the original response
    /// that the rendering does not set itself is kept, except those that
    /// describe the old body (`Content-Type`, `Content-Length`,
    /// `Content-Encoding`, `Content-Range`, `ETag`, `Last-Modified`). The
    /// first matching handler wins.
    ///
    /// # Order
    ///
    /// App-level status handlers run inside the app middleware, right
    /// around routing; so a middleware sees, and adds its headers to, the
    /// rendered page:
    ///
    /// ```text
    ///  request ──▶ app middleware 1 ──▶ app middleware 2 ──▶ status handlers ──▶ routing
    ///  response ◀── (adds x-request-id) ◀────────────────── (renders 404) ◀──── 404 / route chain
    ///
    ///  route chain: scope middleware and scope status handlers (in the order
    ///               they were added) ──▶ route middleware ──▶ handler ──▶ .then(..)
    /// ```
    ///
    /// Inside a scope a status handler is a middleware of the scope's
    /// routes, at the place it was added.
    ///
    /// ```
    /// use celer::response::Html;
    /// let mut app = celer::App::new();
    /// app.status(404, |_res: celer::Response| async { Html("<h1>Not here</h1>") });
    /// app.status(500..=599, |_res: celer::Response| async { "sorry" });
    /// ```
    pub fn status<H: StatusHandler<T>, T>(
        &mut self,
        statuses: impl Into<StatusMatch>,
        handler: H,
    ) -> &mut Self {
        self.add_status(statuses.into(), handler.into_boxed(), false)
    }

    /// A status handler like [`status`](App::status) that also replaces
    /// the bodies handlers chose.
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.status_all(500..=599, |_res: celer::Response| async { "sorry" });
    /// ```
    pub fn status_all<H: StatusHandler<T>, T>(
        &mut self,
        statuses: impl Into<StatusMatch>,
        handler: H,
    ) -> &mut Self {
        self.add_status(statuses.into(), handler.into_boxed(), true)
    }

    fn add_status(
        &mut self,
        statuses: StatusMatch,
        handler: BoxStatusHandler,
        all: bool,
    ) -> &mut Self {
        let entry = status::Entry {
            statuses,
            handler,
            all,
        };
        match self.scopes.last_mut() {
            Some(scope) => scope
                .middleware
                .push(status::middleware(vec![entry], false)),
            None => self.shared_mut().status.push(entry),
        }
        self
    }

    /// Renders error responses as RFC 9457 problem details
    /// (`application/problem+json`): rejections, [`Error`](crate::Error)s
    /// and bodyless 4xx/5xx answers (404, 405, a bare `StatusCode`), with
    /// `type`, `title`, `status` and, for client errors, the rejection's
    /// [`detail`](crate::extract::rejection::JsonRejection::detail). Bodies
    /// that handlers or status handlers chose are kept. Off by default.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use tower::ServiceExt;
    /// let mut app = celer::App::new();
    /// app.problem_details(true);
    /// let req = http::Request::get("/nowhere").body(celer::Body::empty()).unwrap();
    /// let res = app.oneshot(req).await.unwrap();
    /// assert_eq!(res.headers()["content-type"], "application/problem+json");
    /// let body = res.into_body().collect_bytes().await.unwrap();
    /// assert_eq!(&body[..], br#"{"status":404,"title":"Not Found","type":"about:blank"}"#);
    /// # });
    /// ```
    pub fn problem_details(&mut self, on: bool) -> &mut Self {
        self.shared_mut().problem = on;
        self
    }

    /// Installs shared state, read by handlers with
    /// [`Request::state`](crate::Request::state) by the same type; one
    /// value per type. The value is kept in an `Arc`, so it need not be
    /// `Clone`.
    ///
    /// ```
    /// struct Store { notes: std::sync::Mutex<Vec<String>> }
    /// let mut app = celer::App::new();
    /// app.state(Store { notes: Default::default() });
    /// ```
    pub fn state<T: Send + Sync + 'static>(&mut self, value: T) -> &mut Self {
        self.shared_mut().state.insert(Arc::new(value));
        self
    }

    /// Sets the default limit, in bytes, on request bodies read by
    /// extractors; larger bodies are answered with 413. Routes can override
    /// it with [`RouteBuilder::body_limit`].
    ///
    /// Default is [`DEFAULT_BODY_LIMIT`] (2 MiB).
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.body_limit(64 * 1024);
    /// ```
    pub fn body_limit(&mut self, limit: usize) -> &mut Self {
        self.shared_mut().body_limit = limit;
        self
    }

    /// Chooses what a request gets whose path differs from a route's only
    /// by a trailing slash (`/notes/` for `/notes`, or the reverse):
    /// [`TrailingSlash::Strict`] (the default: `404`),
    /// [`Redirect`](TrailingSlash::Redirect) (`308` to the route's path) or
    /// [`Ignore`](TrailingSlash::Ignore) (the route answers). A scope can
    /// choose for its routes with [`Scope::trailing_slash`].
    ///
    /// ```
    /// use celer::app::TrailingSlash;
    /// let mut app = celer::App::new();
    /// app.trailing_slash(TrailingSlash::Redirect);
    /// ```
    pub fn trailing_slash(&mut self, policy: TrailingSlash) -> &mut Self {
        self.shared_mut().trailing_slash = policy;
        self
    }

    /// Registers a parameter type for the rules added after it; see
    /// [`Router::register_type`].
    ///
    /// # Panics
    ///
    /// Panics if the name is taken or the pattern is not a valid regex.
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.register_type::<u8>("byte", "[0-9]{1,3}");
    /// app.get("/b/<byte:b>", |_req: celer::Request| async { "byte" });
    /// ```
    #[track_caller]
    pub fn register_type<T: FromStr + 'static>(&mut self, name: &str, pattern: &str) -> &mut Self {
        let result = self.shared_mut().router.register_type::<T>(name, pattern);
        or_panic(result);
        self
    }

    /// Sets the handler of `OPTIONS *` (RFC 9110 §9.3.7). Without one, the
    /// app answers it with the methods of all its routes in `Allow`.
    ///
    /// ```
    /// let mut app = celer::App::new();
    /// app.asterisk(|_req: celer::Request| async { http::StatusCode::NO_CONTENT });
    /// ```
    pub fn asterisk<H: Handler<T>, T>(&mut self, handler: H) -> &mut Self {
        self.shared_mut().asterisk = Some(boxed(handler));
        self
    }

    /// The app's shutdown notice: fired by [`App::run`] and [`App::serve`]
    /// when a graceful shutdown starts, before connections drain. Handlers
    /// reach the same notice through
    /// [`Request::shutdown_notice`](crate::Request::shutdown_notice); a
    /// mounted app's routes see the notice of the app they are mounted in.
    ///
    /// ```
    /// let app = celer::App::new();
    /// let notice = app.shutdown_notice();
    /// assert!(!notice.is_started());
    /// ```
    pub fn shutdown_notice(&self) -> ShutdownNotice {
        self.shared.shutdown.clone()
    }

    /// Builds the URL of a named route, percent-encoding the values.
    ///
    /// Works through scopes and mounts. A missing, unexpected or ill-typed
    /// parameter is an error, never a wrong URL.
    ///
    /// ```
    /// use celer::Request;
    /// let mut app = celer::App::new();
    /// app.get("/users/<int:id>/posts/<slug>", |_req: Request| async { "" }).name("post");
    /// let url = app.url_for("post", &[("id", &5), ("slug", &"a b/c")]).unwrap();
    /// assert_eq!(url, "/users/5/posts/a%20b%2Fc");
    /// assert!(app.url_for("post", &[("id", &5)]).unwrap_err().is_missing_param());
    /// ```
    pub fn url_for(&self, name: &str, params: &UrlParams<'_>) -> Result<String, UrlError> {
        self.shared.url_for(name, params)
    }
}

/// The value of a registration, or a panic at the caller's line with the
/// rule's error (the location comes from `#[track_caller]` up the chain).
#[track_caller]
fn or_panic<T>(result: Result<T, crate::router::RuleError>) -> T {
    match result {
        Ok(value) => value,
        Err(err) => panic!("{err}"),
    }
}

impl Default for App {
    fn default() -> Self {
        App::new()
    }
}

impl fmt::Debug for App {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("App")
            .field("routes", &self.shared.routes.len())
            .field("middleware", &self.shared.middleware.len())
            .finish_non_exhaustive()
    }
}

// ===== impl StaticRoutes =====

impl StaticRoutes {
    /// No route takes the method.
    pub(crate) const NONE: u32 = u32::MAX;

    /// Records route `id` for the methods of `methods` that have no route
    /// yet.
    fn add(&mut self, id: u32, methods: &MethodSet) {
        for (idx, slot) in self.0.iter_mut().enumerate() {
            let Some(method) = standard_method(idx) else {
                continue;
            };
            if *slot == Self::NONE && *method != Method::HEAD && methods.contains(method) {
                *slot = id;
            }
        }
    }
}

// ===== impl Route =====

impl Route {
    /// The route's name, if it has one.
    #[cfg_attr(not(feature = "openapi"), allow(dead_code))]
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

// ===== impl AppConn =====

impl AppConn {
    pub(crate) fn new(shared: Arc<Shared>, info: Option<ConnInfo>) -> Self {
        AppConn { shared, info }
    }
}

// ===== impl Shared =====

impl Shared {
    fn push_route(&mut self, route: Route) -> usize {
        let id = self.routes.len();
        self.router.insert_rule(&route.rule, id);
        if let Some(idx) = self.exact.insert(&route.rule, id) {
            if idx == self.statics.len() {
                self.statics
                    .push(StaticRoutes([StaticRoutes::NONE; N_STANDARD]));
            }
            if let (Some(statics), Ok(id)) = (self.statics.get_mut(idx), u32::try_from(id)) {
                statics.add(id, &route.methods);
            }
        }
        self.routes.push(route);
        id
    }

    #[track_caller]
    fn set_name(&mut self, id: usize, name: &str) {
        if let Some(old) = self.names.insert(name.into(), id) {
            if old != id {
                panic!("route name {name:?} is already taken");
            }
        }
        self.routes[id].name = Some(name.into());
    }

    /// Puts `wrappers` in front of the chains of routes `first..`.
    fn wrap_routes(&mut self, first: usize, wrappers: &[BoxHandler]) {
        if wrappers.is_empty() {
            return;
        }
        for route in &mut self.routes[first..] {
            route.chain.splice(0..0, wrappers.iter().cloned());
            route.handler_idx += wrappers.len();
        }
    }

    pub(crate) fn url_for(&self, name: &str, params: &UrlParams<'_>) -> Result<String, UrlError> {
        let id = self
            .names
            .get(name)
            .ok_or_else(|| UrlError::new_unknown_route(name))?;
        self.routes[*id].rule.url(params)
    }
}

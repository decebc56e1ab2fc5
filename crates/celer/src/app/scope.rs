//! Scopes: routes under a common prefix with settings of their own, and
//! the trailing-slash policy.

use std::fmt;
use std::str::FromStr;

use super::status::StatusHandler;
use super::{App, RouteBuilder, StatusMatch, or_panic};
use crate::MethodSet;
use crate::handler::Handler;

/// The routes under one prefix, as [`App::scope`] hands them to its
/// closure.
///
/// Everything set on a scope applies to the routes of that scope (and of
/// the scopes inside it) only: middleware and status handlers wrap them,
/// state is seen by their handlers before the app's, the body limit and
/// the trailing-slash policy are theirs unless a route or an inner scope
/// sets its own, and parameter types serve the scope's rules. App-wide
/// settings (`asterisk`, `problem_details`) are not offered here.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use celer::{App, Request};
/// use celer::test::TestClient;
///
/// struct Role(&'static str);
///
/// let mut app = App::new();
/// app.state(Role("guest"));
/// app.scope("/admin", |admin| {
///     admin.state(Role("admin")).body_limit(16);
///     admin.post("/echo", |mut req: Request| async move { req.text().await });
///     admin.get("/role", |req: Request| async move { req.state::<Role>().map(|r| r.0) });
/// });
/// app.get("/role", |req: Request| async move { req.state::<Role>().map(|r| r.0) });
///
/// let client = TestClient::new(app);
/// assert_eq!(client.get("/admin/role").await.text(), "admin");
/// assert_eq!(client.get("/role").await.text(), "guest");
/// let res = client.post("/admin/echo").body("more than sixteen bytes").await;
/// assert_eq!(res.status(), 413);
/// # });
/// ```
pub struct Scope<'a> {
    app: &'a mut App,
}

/// What a request gets whose path differs from a route's only by a
/// trailing slash; see [`App::trailing_slash`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrailingSlash {
    /// `404 Not Found`: `/notes/` and `/notes` are different resources.
    #[default]
    Strict,
    /// `308 Permanent Redirect` to the route's path (query kept; RFC 9110
    /// §15.4.9: the method and body are kept too).
    Redirect,
    /// The route answers as if the path matched it.
    Ignore,
}

macro_rules! scope_shortcuts {
    ($($(#[$meta:meta])* $fn:ident => $set:ident),+ $(,)?) => {
        impl Scope<'_> {
            $(
                $(#[$meta])*
                ///
                /// # Panics
                ///
                /// Panics if the rule is invalid.
                #[track_caller]
                pub fn $fn<H: Handler<T>, T>(&mut self, rule: &str, handler: H) -> RouteBuilder<'_> {
                    self.app.route(MethodSet::$set, rule, handler)
                }
            )+
        }
    };
}

scope_shortcuts! {
    /// Adds a `GET` route (it answers `HEAD` too); see [`App::get`].
    get => GET,
    /// Adds a `POST` route.
    post => POST,
    /// Adds a `PUT` route.
    put => PUT,
    /// Adds a `DELETE` route.
    delete => DELETE,
    /// Adds a `PATCH` route.
    patch => PATCH,
    /// Adds a `HEAD` route.
    head => HEAD,
    /// Adds an `OPTIONS` route.
    options => OPTIONS,
    /// Adds a route for every method.
    any => ANY,
}

impl<'a> Scope<'a> {
    pub(super) fn new(app: &'a mut App) -> Self {
        Scope { app }
    }

    /// Adds a route for a set of methods; see [`App::route`].
    ///
    /// # Panics
    ///
    /// Panics if the rule is invalid.
    #[track_caller]
    pub fn route<H: Handler<T>, T>(
        &mut self,
        methods: impl Into<MethodSet>,
        rule: &str,
        handler: H,
    ) -> RouteBuilder<'_> {
        self.app.route(methods, rule, handler)
    }

    /// Adds a regex route under the scope's prefix; see [`App::regex`].
    ///
    /// # Panics
    ///
    /// Panics if the regex is invalid.
    #[track_caller]
    pub fn regex<H: Handler<T>, T>(
        &mut self,
        methods: impl Into<MethodSet>,
        regex: &str,
        handler: H,
    ) -> RouteBuilder<'_> {
        self.app.regex(methods, regex, handler)
    }

    /// Adds a WebSocket route; see [`App::websocket`].
    ///
    /// # Panics
    ///
    /// Panics if the rule is invalid.
    #[track_caller]
    pub fn websocket(&mut self, rule: &str, route: crate::ws::WebSocketRoute) -> RouteBuilder<'_> {
        self.app.websocket(rule, route)
    }

    /// Opens a scope inside this one.
    ///
    /// # Panics
    ///
    /// Panics if the prefix is not a valid rule without catch-all.
    #[track_caller]
    pub fn scope(&mut self, prefix: &str, build: impl FnOnce(&mut Scope<'_>)) -> &mut Self {
        self.app.scope(prefix, build);
        self
    }

    /// Mounts an app under this scope's prefix and `prefix`; see
    /// [`App::mount`].
    ///
    /// # Panics
    ///
    /// Panics if the prefix is invalid or a route name is already taken.
    #[track_caller]
    pub fn mount(&mut self, prefix: &str, sub: App) -> &mut Self {
        self.app.mount(prefix, sub);
        self
    }

    /// Adds middleware around the scope's routes, after the enclosing
    /// scopes' middleware.
    #[track_caller]
    pub fn middleware<H: Handler<T>, T>(&mut self, middleware: H) -> &mut Self {
        self.app.middleware(middleware);
        self
    }

    /// Adds a status handler for the scope's routes, at this place in its
    /// middleware; see [`App::status`].
    pub fn status<H: StatusHandler<T>, T>(
        &mut self,
        statuses: impl Into<StatusMatch>,
        handler: H,
    ) -> &mut Self {
        self.app.status(statuses, handler);
        self
    }

    /// [`status`](Scope::status) that replaces chosen bodies too; see
    /// [`App::status_all`].
    pub fn status_all<H: StatusHandler<T>, T>(
        &mut self,
        statuses: impl Into<StatusMatch>,
        handler: H,
    ) -> &mut Self {
        self.app.status_all(statuses, handler);
        self
    }

    /// Installs state for the scope's routes: their handlers find it with
    /// [`Request::state`](crate::Request::state) before the app's value of
    /// the same type. Middleware of the app itself runs before routing and
    /// sees the app's state only.
    pub fn state<T: Send + Sync + 'static>(&mut self, value: T) -> &mut Self {
        self.app
            .scope_frame()
            .state
            .insert(std::sync::Arc::new(value));
        self
    }

    /// Sets the body limit, in bytes, of the scope's routes (those that do
    /// not set their own, in this scope or an inner one).
    pub fn body_limit(&mut self, limit: usize) -> &mut Self {
        self.app.scope_frame().body_limit = Some(limit);
        self
    }

    /// Sets the trailing-slash policy of the scope's routes; see
    /// [`App::trailing_slash`].
    pub fn trailing_slash(&mut self, policy: TrailingSlash) -> &mut Self {
        self.app.scope_frame().trailing_slash = Some(policy);
        self
    }

    /// Registers a parameter type for the rules of this scope added after
    /// it; see [`App::register_type`].
    ///
    /// # Panics
    ///
    /// Panics if the name is taken or the pattern is not a valid regex.
    #[track_caller]
    pub fn register_type<T: FromStr + 'static>(&mut self, name: &str, pattern: &str) -> &mut Self {
        or_panic(self.app.scope_frame().types.register::<T>(name, pattern));
        self
    }

    /// Builds the URL of a named route; see [`App::url_for`].
    pub fn url_for(
        &self,
        name: &str,
        params: &crate::router::UrlParams<'_>,
    ) -> Result<String, crate::router::UrlError> {
        self.app.url_for(name, params)
    }
}

impl fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope").finish_non_exhaustive()
    }
}

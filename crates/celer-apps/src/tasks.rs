//! The task API beside a site: `celer serve --tasks` mounts
//! `celer_tasks`' API at `/tasks` and serves the site everywhere else.

use std::convert::Infallible;

use celer::{App, Body};
use celer_tasks::Tasks;
use tower_service::Service;

/// Where `celer serve --tasks` mounts the task API.
pub const TASKS_PREFIX: &str = "/tasks";

/// An app with the task API at [`TASKS_PREFIX`] and `site` answering every
/// other `GET` (and `HEAD`) request.
pub fn with_tasks<S>(tasks: &Tasks, site: S) -> App
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
{
    let mut app = App::new();
    app.mount(TASKS_PREFIX, tasks.app());
    crate::forward_to_site(&mut app, site);
    app
}

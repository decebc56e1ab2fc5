//! Nothing silent: rules in another router's syntax panic at registration
//! with a suggestion and the caller's line; a parameter the rule does not
//! have, or read as a type that disagrees with the rule, is a 500 whose log
//! line names the parameter, the rule and the route; missing state is a
//! `MissingState` naming the type.

use std::panic::{AssertUnwindSafe, catch_unwind};

use celer::{App, Request};
use http::StatusCode;

use crate::logs::Logs;
use crate::support::get;

/// The panic message and line of `register`.
fn registration_panic(register: impl FnOnce(&mut App)) -> String {
    let mut app = App::new();
    let payload = catch_unwind(AssertUnwindSafe(|| register(&mut app))).expect_err("a panic");
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => (*payload.downcast::<&str>().expect("a message")).to_owned(),
    }
}

#[test]
fn axum_braces_should_panic_with_the_celer_spelling() {
    let message = registration_panic(|app| {
        app.get("/notes/{id}", |_req: Request| async { "" });
    });
    assert!(message.contains("\"/notes/{id}\""), "{message}");
    assert!(message.contains("write `<id>`"), "{message}");

    let message = registration_panic(|app| {
        app.get("/files/{*rest}", |_req: Request| async { "" });
    });
    assert!(message.contains("write `<path:rest>`"), "{message}");
}

#[test]
fn colon_and_star_parameters_should_panic_with_the_celer_spelling() {
    let message = registration_panic(|app| {
        app.post("/notes/:id", |_req: Request| async { "" });
    });
    assert!(message.contains("write `<id>`"), "{message}");
    let message = registration_panic(|app| {
        app.get("/static/*rest", |_req: Request| async { "" });
    });
    assert!(message.contains("write `<path:rest>`"), "{message}");
    // A colon inside a segment is a literal, as in `/v1/things:batchGet`.
    let mut app = App::new();
    app.get("/v1/things:batch", |_req: Request| async { "" });
}

#[test]
fn unbalanced_angle_brackets_should_panic_with_how_to_close_them() {
    let message = registration_panic(|app| {
        app.get("/notes/<int:id", |_req: Request| async { "" });
    });
    assert!(message.contains("unclosed '<'"), "{message}");
    assert!(
        message.contains("close the parameter with '>'"),
        "{message}"
    );
    let message = registration_panic(|app| {
        app.get("/notes/id>", |_req: Request| async { "" });
    });
    assert!(message.contains("unexpected '>'"), "{message}");
    let message = registration_panic(|app| {
        app.get("/notes/<integer:id>", |_req: Request| async { "" });
    });
    assert!(message.contains("the types are int, uint"), "{message}");
}

#[test]
fn registration_panics_should_point_at_the_callers_line() {
    // The default hook prints the location; catch it with our own.
    let location = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen = location.clone();
    let this_thread = std::thread::current().id();
    let previous = std::panic::take_hook();
    // Tests of other threads may panic meanwhile: only this thread's panic counts.
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() == this_thread {
            *seen.lock().unwrap() = info.location().map(|l| (l.file().to_owned(), l.line()));
        }
    }));
    let line = line!() + 4;
    let result = catch_unwind(|| {
        let mut app = App::new();
        app.scope("/api", |api| {
            api.get("/notes/{id}", |_req: Request| async { "" });
        });
    });
    std::panic::set_hook(previous);
    assert!(result.is_err());
    let (file, at) = location.lock().unwrap().clone().expect("a location");
    assert!(file.ends_with("silent.rs"), "{file}");
    assert_eq!(at, line);
}

fn notes() -> App {
    let mut app = App::new();
    app.get("/notes/<uint:id>", |req: Request| async move {
        let id: u64 = req.param("idd")?;
        Ok::<_, celer::Error>(id.to_string())
    });
    app.get("/by-name/<name>", |req: Request| async move {
        let id: u64 = req.param("name")?;
        Ok::<_, celer::Error>(id.to_string())
    });
    app.get("/small/<int:n>", |req: Request| async move {
        let n: u8 = req.param("n")?;
        Ok::<_, celer::Error>(n.to_string())
    });
    app.get("/agree/<int:n>", |req: Request| async move {
        let n: i64 = req.param("n")?;
        Ok::<_, celer::Error>(n.to_string())
    });
    app.get("/state", |req: Request| async move {
        let store = req.state::<Vec<String>>()?;
        Ok::<_, celer::Error>(store.len().to_string())
    });
    app
}

#[tokio::test(flavor = "current_thread")]
async fn a_parameter_the_rule_lacks_should_log_parameter_rule_and_route() {
    let (logs, _guard) = Logs::capture();
    let reply = get(&notes(), "/notes/5").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.body, "internal server error");
    let logs = logs.text();
    assert!(logs.contains("parameter \"idd\""), "{logs}");
    assert!(logs.contains("/notes/<uint:id>"), "{logs}");
    assert!(logs.contains("GET /notes/5"), "{logs}");
    assert!(logs.contains("has parameters id"), "{logs}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_number_read_from_a_string_parameter_should_be_a_logged_500() {
    let (logs, _guard) = Logs::capture();
    // Even for a value that would parse: the rule lets "abc" through too.
    let reply = get(&notes(), "/by-name/5").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    let logs = logs.text();
    assert!(
        logs.contains("is a `string` in the rule but is read as `u64`"),
        "{logs}"
    );
    assert!(logs.contains("declare it `<uint:name>`"), "{logs}");
    assert!(logs.contains("/by-name/<name>"), "{logs}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_type_narrower_than_the_rule_should_be_a_logged_500() {
    let (logs, _guard) = Logs::capture();
    let app = notes();
    assert_eq!(get(&app, "/small/7").await.body, "7");
    let reply = get(&app, "/small/300").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    let logs = logs.text();
    assert!(
        logs.contains("the rule's type `int` accepted \"300\" but `u8`"),
        "{logs}"
    );
    // Rule and type agreeing: a non-number is the router's 404.
    assert_eq!(get(&app, "/agree/-3").await.body, "-3");
    assert_eq!(get(&app, "/agree/x").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "current_thread")]
async fn missing_state_should_name_the_type() {
    let (logs, _guard) = Logs::capture();
    let reply = get(&notes(), "/state").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    let logs = logs.text();
    assert!(
        logs.contains("no state of type `alloc::vec::Vec<alloc::string::String>`"),
        "{logs}"
    );
    assert!(logs.contains("GET /state"), "{logs}");

    // Installed, without `Clone`.
    struct Store(Vec<String>);
    let mut app = App::new();
    app.state(Store(vec!["a".into()]));
    app.get("/n", |req: Request| async move {
        Ok::<_, celer::Error>(req.state::<Store>()?.0.len().to_string())
    });
    assert_eq!(get(&app, "/n").await.body, "1");
}

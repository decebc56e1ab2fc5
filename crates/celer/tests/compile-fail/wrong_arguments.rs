// A handler that takes a `String` instead of the `Request`.
//~ expect: is not a celer handler
//~ expect: a handler is an `async fn(Request) -> R` or `async fn(Request, Next) -> R`
//~ expect: wrap it in `celer::debug_handler(..)`
//~ expect: expected function signature `fn(celer::Request) -> _`

async fn show(name: String) -> String {
    name
}

fn main() {
    let mut app = celer::App::new();
    app.get("/notes/<name>", show);
    app.get("/notes/<name>", celer::debug_handler(show));
}

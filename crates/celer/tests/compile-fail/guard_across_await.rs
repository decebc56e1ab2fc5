// A handler holding a `MutexGuard` across an `.await`: its future is not
// `Send`.
//~ expect: is not a celer handler
//~ expect: whose future is `Send` (no `MutexGuard` or `Rc` held across an `.await`)
//~ expect: has type `std::sync::MutexGuard<'_, Vec<

static NOTES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

async fn list(req: celer::Request) -> String {
    let notes = NOTES.lock().unwrap();
    let _ = req.shutdown_notice().is_started();
    std::future::ready(()).await;
    notes.join(",")
}

fn main() {
    let mut app = celer::App::new();
    app.get("/notes", list);
    app.get("/notes", celer::debug_handler(list));
}

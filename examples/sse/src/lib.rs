//! A live page on server-sent events: a clock that ticks every second and
//! a counter that any visitor can bump, pushed to every open page.
//!
//! | method and path | answer                                                   |
//! |-----------------|----------------------------------------------------------|
//! | `GET /`         | the page, which listens with `EventSource("/events")`    |
//! | `GET /events`   | `text/event-stream`: `tick` and `count` events            |
//! | `POST /count`   | `200`, the new count, also published as a `count` event  |
//!
//! The pieces to copy:
//!
//! - one [`Hub`] in the app's state; `GET /events` subscribes, and a
//!   browser that reconnects with `Last-Event-ID` gets what it missed from
//!   the hub's history;
//! - publishing from a handler (`POST /count`) and from a plain thread
//!   (the clock), which stops when the app's shutdown notice fires;
//! - on SIGTERM or Ctrl-C the streams end after their last event and the
//!   server exits; the page's `EventSource` reconnects by itself to the
//!   next instance.
//!
//! Run with `cargo run -p example-sse -- --listen tcp://127.0.0.1:8080`
//! and open the address in a few browser tabs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use celer::response::Html;
use celer::sse::{Event, Hub};
use celer::{App, Request, ShutdownNotice};
use http::StatusCode;

/// The app's shared state: the hub and the counter.
#[derive(Clone, Debug)]
pub struct Live {
    /// Every page's stream reads from it.
    pub hub: Hub,
    count: Arc<AtomicU64>,
}

/// The app; the clock is started separately ([`start_clock`]), so tests can
/// drive the hub alone.
pub fn app(live: &Live) -> App {
    let mut app = App::new();
    app.state(live.clone());
    app.get("/", page);
    app.get("/events", |req: Request| async move {
        let live = req.state::<Live>().expect("state");
        // 503 with Retry-After past the hub's subscriber limit.
        live.hub.subscribe(&req)
    });
    app.post("/count", |req: Request| async move {
        let live = req.state::<Live>().expect("state");
        let count = live.count.fetch_add(1, Ordering::Relaxed) + 1;
        match live
            .hub
            .publish(Event::new().event("count").data(count.to_string()))
        {
            Ok(_) => (StatusCode::OK, count.to_string()),
            Err(err) => (StatusCode::SERVICE_UNAVAILABLE, err.to_string()),
        }
    });
    app
}

impl Live {
    /// A hub that keeps the last 32 events for browsers that reconnect.
    pub fn new() -> Live {
        Live {
            hub: Hub::builder().history(32).build(),
            count: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Default for Live {
    fn default() -> Self {
        Live::new()
    }
}

/// Publishes a `tick` event with the server's time (seconds since 1970)
/// every `period`, from a thread of its own, until `notice` fires.
pub fn start_clock(hub: Hub, notice: ShutdownNotice, period: Duration) {
    std::thread::spawn(move || {
        while !notice.is_started() {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_secs());
            let _ = hub.publish(Event::new().event("tick").data(now.to_string()));
            std::thread::sleep(period);
        }
    });
}

async fn page(req: Request) -> Html<String> {
    let live = req.state::<Live>().expect("state");
    let count = live.count.load(Ordering::Relaxed);
    Html(PAGE.replace("{count}", &count.to_string()))
}

const PAGE: &str = r#"<!doctype html>
<html lang="en">
<meta charset="utf-8">
<title>Live, with server-sent events</title>
<style>
  body { font: 18px/1.4 system-ui, sans-serif; max-width: 30em; margin: 3em auto; }
  output { font-variant-numeric: tabular-nums; font-weight: bold; }
  #state { color: #777; font-size: 80%; }
</style>
<h1>Live</h1>
<p>Server time: <output id="clock">…</output></p>
<p>Clicks, from every open page: <output id="count">{count}</output>
   <button id="bump">+1</button></p>
<p id="state">connecting…</p>
<script>
  const events = new EventSource("/events");
  const state = document.getElementById("state");
  events.onopen = () => { state.textContent = "connected"; };
  // The browser reconnects by itself (sending Last-Event-ID); this only shows it.
  events.onerror = () => { state.textContent = "reconnecting…"; };
  events.addEventListener("tick", (e) => {
    document.getElementById("clock").textContent =
      new Date(Number(e.data) * 1000).toLocaleTimeString();
  });
  events.addEventListener("count", (e) => {
    document.getElementById("count").textContent = e.data;
  });
  document.getElementById("bump").onclick = () => fetch("/count", { method: "POST" });
</script>
</html>
"#;

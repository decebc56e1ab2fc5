//! The SSE fallback: a subscriber of a room gets what WebSocket clients
//! and REST clients say there, rooms are bounded, bad rooms are 404.

use celer_test_support::{Raw, bounded};
use example_chat::Settings;
use serde_json::json;

use crate::{Served, json_of};

/// Opens `GET /rooms/<room>/events` and reads the response head.
async fn subscribe(served: &Served, room: &str) -> (Raw, String) {
    let mut raw = Raw::connect(served.addr).await;
    raw.send(format!("GET /rooms/{room}/events HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .await;
    while !raw.buffered().windows(4).any(|w| w == b"\r\n\r\n") {
        assert!(raw.read_more().await > 0, "closed before the head");
    }
    let text = String::from_utf8_lossy(raw.buffered()).into_owned();
    (raw, text)
}

/// Reads until the stream holds `needle`.
async fn read_until(raw: &mut Raw, needle: &str) -> String {
    loop {
        let text = String::from_utf8_lossy(raw.buffered()).into_owned();
        if text.contains(needle) {
            return text;
        }
        assert!(
            raw.read_more().await > 0,
            "closed before {needle:?}: {text:?}"
        );
    }
}

#[tokio::test]
async fn a_subscriber_gets_what_is_posted_in_its_room() {
    let served = Served::start().await;
    let (mut sub, head) = subscribe(&served, "kitchen").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );

    let res = served
        .post_json(
            "/rooms/kitchen/messages",
            r#"{"from":"cron","text":"<b>lunch</b>\nnow"}"#,
        )
        .await;
    assert_eq!(res.status, 202);
    assert_eq!(
        json_of(&res),
        json!({"room": "kitchen", "delivered": {"websocket": 0, "sse": 1}})
    );
    // One event, its data the message as JSON on one line.
    let data = r#"data: {"from":"cron","text":"<b>lunch</b>\nnow"}"#;
    read_until(&mut sub, data).await;

    // Another room's subscriber is not in this room.
    let res = served
        .post_json("/rooms/garden/messages", r#"{"from":"x","text":"y"}"#)
        .await;
    assert_eq!(
        json_of(&res)["delivered"],
        json!({"websocket": 0, "sse": 0})
    );
    drop(sub);
    served.stop().await;
}

#[tokio::test]
async fn a_bad_room_has_no_events() {
    let served = Served::start().await;
    let res = served.send("GET", "/rooms/No_Such/events", "", b"").await;
    assert_eq!(res.status, 404);
    served.stop().await;
}

#[tokio::test]
async fn rooms_are_bounded_and_empty_ones_make_way() {
    let served = Served::with(Settings {
        max_rooms: 2,
        ..Settings::default()
    })
    .await;
    let (a, head) = subscribe(&served, "a").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (b, head) = subscribe(&served, "b").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // Both rooms have a subscriber: a third room is refused, with a reason.
    let full = served.send("GET", "/rooms/c/events", "", b"").await;
    assert_eq!(full.status, 503);
    assert_eq!(full.header("retry-after"), Some("10"));
    assert_eq!(json_of(&full), json!({"error": "too many rooms"}));
    // A room that was left makes way for a new one.
    drop(a);
    let (c, head) = bounded(async {
        loop {
            // The server notices that the subscriber left when it writes
            // to it: a message into its room makes it write.
            served
                .post_json("/rooms/a/messages", r#"{"from":"x","text":"y"}"#)
                .await;
            let (c, head) = subscribe(&served, "c").await;
            if head.starts_with("HTTP/1.1 200") {
                return (c, head);
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(head.contains("text/event-stream"), "{head}");
    drop((b, c));
    served.stop().await;
}

#[tokio::test]
async fn subscribers_of_a_room_are_bounded() {
    let served = Served::with(Settings {
        max_sse_per_room: 1,
        ..Settings::default()
    })
    .await;
    let (first, head) = subscribe(&served, "a").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let second = served.send("GET", "/rooms/a/events", "", b"").await;
    assert_eq!(second.status, 503);
    assert!(second.header("retry-after").is_some());
    // Another room has room.
    let (other, head) = subscribe(&served, "b").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop((first, other));
    served.stop().await;
}

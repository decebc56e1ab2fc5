//! The pages and `POST /rooms/<room>/messages`: what it accepts, and a
//! clear error for everything else.

use serde_json::json;

use crate::{Served, json_of};

#[tokio::test]
async fn pages_are_served_with_their_types_and_policy() {
    let served = Served::start().await;
    let lobby = served.send("GET", "/", "", b"").await;
    assert_eq!(lobby.status, 200);
    assert_eq!(
        lobby.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(lobby.text().contains("action=\"/rooms\""));
    let room = served.send("GET", "/rooms/tea-break", "", b"").await;
    assert_eq!(room.status, 200);
    assert!(room.text().contains("/static/chat.js"));
    let csp = room.header("content-security-policy").expect("a policy");
    assert!(csp.contains("script-src 'self'"), "{csp}");
    let js = served.send("GET", "/static/chat.js", "", b"").await;
    assert_eq!(
        js.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(js.text().contains("textContent"));
    served.stop().await;
}

#[tokio::test]
async fn the_lobby_form_leads_to_the_room() {
    let served = Served::start().await;
    let res = served.send("GET", "/rooms?name=Tea+Break", "", b"").await;
    assert_eq!(res.status, 303);
    assert_eq!(res.header("location"), Some("/rooms/tea-break"));
    let bad = served
        .send("GET", "/rooms?name=%3Cscript%3E", "", b"")
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(
        json_of(&bad),
        json!({"error": "a room name is 1 to 32 of a-z, 0-9 and -"})
    );
    served.stop().await;
}

#[tokio::test]
async fn a_bad_room_name_is_404_everywhere() {
    let served = Served::start().await;
    let long = format!("/rooms/{}", "a".repeat(33));
    for path in [
        "/rooms/Tea",
        "/rooms/tea_break",
        "/rooms/%C3%A9t%C3%A9",
        &long,
    ] {
        let page = served.send("GET", path, "", b"").await;
        assert_eq!(page.status, 404, "{path}");
        let post = served
            .post_json(&format!("{path}/messages"), r#"{"from":"a","text":"b"}"#)
            .await;
        assert_eq!(post.status, 404, "{path}");
        assert_eq!(
            json_of(&post)["error"],
            "no such room: a room name is 1 to 32 of a-z, 0-9 and -"
        );
    }
    // The longest name is a room.
    let longest = format!("/rooms/{}-9/messages", "a".repeat(30));
    let ok = served
        .post_json(&longest, r#"{"from":"a","text":"b"}"#)
        .await;
    assert_eq!(ok.status, 202, "{}", ok.text());
    served.stop().await;
}

#[tokio::test]
async fn a_post_is_accepted_with_who_got_it() {
    let served = Served::start().await;
    let res = served
        .post_json(
            "/rooms/empty/messages",
            r#"{"from":" ann ","text":"hello"}"#,
        )
        .await;
    assert_eq!(res.status, 202);
    assert_eq!(res.header("content-type"), Some("application/json"));
    assert_eq!(
        json_of(&res),
        json!({"room": "empty", "delivered": {"websocket": 0, "sse": 0}})
    );
    served.stop().await;
}

#[tokio::test]
async fn bad_bodies_get_their_reasons() {
    let served = Served::start().await;
    let target = "/rooms/a/messages";

    let malformed = served.post_json(target, r#"{"from":"ann","#).await;
    assert_eq!(malformed.status, 400);
    let reason = json_of(&malformed)["error"].as_str().unwrap().to_owned();
    assert!(reason.starts_with("malformed json"), "{reason}");

    let untyped = served
        .send("POST", target, "Content-Type: text/plain\r\n", b"hello")
        .await;
    assert_eq!(untyped.status, 415);
    assert_eq!(
        json_of(&untyped)["error"],
        "expected content-type: application/json"
    );

    let shape = served.post_json(target, r#"{"from":"ann"}"#).await;
    assert_eq!(shape.status, 422);
    let extra = served
        .post_json(target, r#"{"from":"ann","text":"x","admin":true}"#)
        .await;
    assert_eq!(extra.status, 422);

    for (body, reason) in [
        (json!({"from": "  ", "text": "x"}), "from is empty"),
        (
            json!({"from": "a".repeat(33), "text": "x"}),
            "from is longer than 32 characters",
        ),
        (
            json!({"from": "a\u{7}", "text": "x"}),
            "from holds control characters",
        ),
        (json!({"from": "ann", "text": " \n "}), "text is empty"),
        (
            json!({"from": "ann", "text": "é".repeat(2001)}),
            "text is longer than 2000 characters",
        ),
        (
            json!({"from": "ann", "text": "a\u{1b}[2J"}),
            "text holds control characters",
        ),
    ] {
        let res = served.post_json(target, &body.to_string()).await;
        assert_eq!(res.status, 422, "{body}");
        assert_eq!(json_of(&res), json!({ "error": reason }));
    }
    // The longest text passes, line breaks and all.
    let longest = json!({"from": "ann", "text": format!("{}\n\t", "é".repeat(1998))});
    assert_eq!(
        served.post_json(target, &longest.to_string()).await.status,
        202
    );
    served.stop().await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let served = Served::start().await;
    let target = "/rooms/a/messages";
    let text = "x".repeat(example_chat::BODY_LIMIT);
    let body = json!({"from": "ann", "text": text}).to_string();
    assert!(body.len() > example_chat::BODY_LIMIT);
    let res = served.post_json(target, &body).await;
    assert_eq!(res.status, 413);
    assert_eq!(json_of(&res), json!({"error": "payload too large"}));
    served.stop().await;
}

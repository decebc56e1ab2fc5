//! The WebSocket routes with a real client: rooms, the registry shared with
//! `POST`, refusals, and the echo.

use celer_test_support::{Raw, bounded};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::{Served, json_of};

type Client = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Opens a connection to `room` and waits until the server has it in the
/// room: the 101 may come before the connection joined the registry, and
/// the answer to a refused message comes from the handler, which runs
/// after. Only this connection sees that answer.
async fn join(served: &Served, room: &str) -> Client {
    let url = served.ws_url(&format!("/rooms/{room}/ws"));
    let (mut client, res) = bounded(tokio_tungstenite::connect_async(url))
        .await
        .expect("handshake");
    assert_eq!(res.status(), 101);
    bounded(client.send(Message::text("{}")))
        .await
        .expect("send");
    let answer = next_json(&mut client).await;
    assert!(answer["error"].is_string(), "{answer}");
    client
}

/// The next data message as JSON.
async fn next_json(client: &mut Client) -> Value {
    loop {
        match bounded(client.next()).await {
            Some(Ok(Message::Text(text))) => {
                return serde_json::from_str(&text).expect("json");
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            other => panic!("expected a text message, got {other:?}"),
        }
    }
}

async fn say(client: &mut Client, from: &str, text: &str) {
    let msg = json!({"from": from, "text": text}).to_string();
    bounded(client.send(Message::text(msg)))
        .await
        .expect("send");
}

/// The close frame the server ends the connection with.
async fn close_of(client: &mut Client) -> (CloseCode, String) {
    loop {
        match bounded(client.next()).await {
            Some(Ok(Message::Close(Some(frame)))) => {
                return (frame.code, frame.reason.to_string());
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            other => panic!("expected a close frame, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_room_gets_its_messages_and_no_other_rooms() {
    let served = Served::start().await;
    let mut ann = join(&served, "kitchen").await;
    let mut bob = join(&served, "kitchen").await;
    let mut eve = join(&served, "garden").await;

    say(&mut ann, "ann", "hi bob").await;
    let expected = json!({"from": "ann", "text": "hi bob"});
    assert_eq!(next_json(&mut bob).await, expected);
    // The sender gets its own message too: the room's order is everyone's.
    assert_eq!(next_json(&mut ann).await, expected);

    say(&mut bob, " bob ", "hi ann").await;
    let expected = json!({"from": "bob", "text": "hi ann"});
    assert_eq!(next_json(&mut ann).await, expected);
    assert_eq!(next_json(&mut bob).await, expected);

    // A REST client posts into the room through the registry.
    let res = served
        .post_json(
            "/rooms/kitchen/messages",
            r#"{"from":"cron","text":"lunch"}"#,
        )
        .await;
    assert_eq!(res.status, 202);
    assert_eq!(json_of(&res)["delivered"]["websocket"], 2);
    let expected = json!({"from": "cron", "text": "lunch"});
    assert_eq!(next_json(&mut ann).await, expected);
    assert_eq!(next_json(&mut bob).await, expected);

    // The other room got none of it: the first message there is its own.
    say(&mut eve, "eve", "anyone?").await;
    assert_eq!(
        next_json(&mut eve).await,
        json!({"from": "eve", "text": "anyone?"})
    );
    // The member list has each socket of the room, with its HTTP version.
    let members = json_of(&served.send("GET", "/rooms/kitchen/members", "", b"").await);
    assert_eq!(members["room"], "kitchen");
    let sockets = members["websocket"].as_array().unwrap();
    assert_eq!(sockets.len(), 2, "{members}");
    assert!(sockets.iter().all(|m| m["http"] == "HTTP/1.1"), "{members}");
    assert_eq!(members["sse"], 0);
    drop((ann, bob, eve));
    served.stop().await;
}

#[tokio::test]
async fn a_wrong_message_is_answered_to_its_sender_alone() {
    let served = Served::start().await;
    let mut ann = join(&served, "r").await;
    let mut bob = join(&served, "r").await;
    for (msg, reason) in [
        (
            "not json",
            "a message is JSON: {\"from\": NAME, \"text\": TEXT}",
        ),
        (
            r#"{"from":"ann"}"#,
            "a message is JSON: {\"from\": NAME, \"text\": TEXT}",
        ),
        (r#"{"from":"ann","text":""}"#, "text is empty"),
        (r#"{"from":"","text":"x"}"#, "from is empty"),
    ] {
        bounded(ann.send(Message::text(msg))).await.expect("send");
        assert_eq!(
            next_json(&mut ann).await,
            json!({ "error": reason }),
            "{msg}"
        );
    }
    // Bob got nothing of it: his next message is the next said.
    say(&mut ann, "ann", "ok").await;
    assert_eq!(
        next_json(&mut bob).await,
        json!({"from": "ann", "text": "ok"})
    );
    drop((ann, bob));
    served.stop().await;
}

#[tokio::test]
async fn a_message_over_the_limit_closes_with_1009() {
    let served = Served::start().await;
    let mut ann = join(&served, "r").await;
    // The largest message passes the frame limits (and is refused for its
    // text, which is over MAX_TEXT_CHARS).
    let pad = example_chat::MAX_WS_MESSAGE_BYTES - r#"{"from":"a","text":""}"#.len();
    say(&mut ann, "a", &"x".repeat(pad)).await;
    assert_eq!(
        next_json(&mut ann).await,
        json!({"error": "text is longer than 2000 characters"})
    );
    say(&mut ann, "a", &"x".repeat(pad + 1)).await;
    let (code, _) = close_of(&mut ann).await;
    assert_eq!(code, CloseCode::Size);
    drop(ann);
    served.stop().await;
}

#[tokio::test]
async fn a_binary_message_closes_with_1003() {
    let served = Served::start().await;
    let mut ann = join(&served, "r").await;
    bounded(ann.send(Message::binary(vec![1, 2, 3])))
        .await
        .expect("send");
    let (code, reason) = close_of(&mut ann).await;
    assert_eq!(code, CloseCode::Unsupported);
    assert_eq!(reason, "text messages only");
    drop(ann);
    served.stop().await;
}

#[tokio::test]
async fn a_bad_room_is_refused_at_the_handshake() {
    let served = Served::start().await;
    let url = served.ws_url("/rooms/No_Such/ws");
    match bounded(tokio_tungstenite::connect_async(url)).await {
        Err(WsError::Http(res)) => assert_eq!(res.status(), 404),
        other => panic!("expected a 404, got {other:?}"),
    }
    served.stop().await;
}

#[tokio::test]
async fn the_echo_sends_back_what_came() {
    let served = Served::start().await;
    let (mut client, _) = bounded(tokio_tungstenite::connect_async(served.ws_url("/echo")))
        .await
        .expect("handshake");
    let big = "é".repeat(100_000);
    for msg in [
        Message::text("hello"),
        Message::binary(vec![0u8, 255, 7]),
        Message::text(big.as_str()),
    ] {
        bounded(client.send(msg.clone())).await.expect("send");
        let back = loop {
            match bounded(client.next()).await {
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                Some(Ok(m)) => break m,
                other => panic!("expected the echo, got {other:?}"),
            }
        };
        assert_eq!(back, msg);
    }
    drop(client);
    served.stop().await;
}

#[tokio::test]
async fn the_echo_offers_permessage_deflate() {
    let served = Served::start().await;
    let mut raw = Raw::connect(served.addr).await;
    raw.send(
        b"GET /echo HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
          Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n",
    )
    .await;
    let res = raw.response().await;
    assert_eq!(res.status, 101);
    assert_eq!(
        res.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    let ext = res
        .header("sec-websocket-extensions")
        .expect("an extension");
    assert!(ext.starts_with("permessage-deflate"), "{ext}");
    drop(raw);
    served.stop().await;
}

#[tokio::test]
async fn shutdown_closes_the_rooms_with_1001() {
    let served = Served::start().await;
    let mut ann = join(&served, "r").await;
    let stopping = tokio::spawn(served.stop());
    let (code, _) = close_of(&mut ann).await;
    assert_eq!(code, CloseCode::Away);
    // The client answers the close; the server then finishes.
    assert!(matches!(bounded(ann.next()).await, None | Some(Err(_))));
    drop(ann);
    bounded(stopping).await.expect("stopped");
}

#[tokio::test]
async fn a_page_of_another_site_cannot_join() {
    let served = Served::start().await;
    let handshake = |origin: &str| {
        format!(
            "GET /rooms/r/ws HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
             Origin: {origin}\r\n\r\n",
            served.addr
        )
    };
    let mut raw = Raw::connect(served.addr).await;
    raw.send(handshake("https://evil.example").as_bytes()).await;
    let res = raw.response().await;
    assert_eq!(res.status, 403);
    assert_eq!(
        json_of(&res),
        json!({"error": "a page of another site cannot join a room"})
    );
    // The server's own pages may.
    let mut raw = Raw::connect(served.addr).await;
    raw.send(handshake(&format!("http://{}", served.addr)).as_bytes())
        .await;
    assert_eq!(raw.response().await.status, 101);
    drop(raw);
    served.stop().await;
}

//! File bodies: regions sent with sendfile(2) (large) or copied (small),
//! alone and pipelined, HEAD, a file shorter than its response, and a client
//! that stops reading a large file.

use std::time::Duration;

use celer_server::Limits;
use celer_test_support::{Raw, bounded};

use crate::support::{TEST_FILE_LEN, start, start_default, test_file_bytes};

fn get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()
}

#[tokio::test]
async fn a_whole_file_arrives_byte_for_byte() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(&get("/file")).await;
    let r = c.response().await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-length"),
        Some(&*TEST_FILE_LEN.to_string())
    );
    assert_eq!(r.body, test_file_bytes());
}

#[tokio::test]
async fn regions_large_and_small_start_at_their_offset() {
    let srv = start_default().await;
    let data = test_file_bytes();
    let mut c = Raw::connect(srv.addr).await;
    // Large (sendfile), small (copied beside the head), one byte, the tail.
    for (offset, len) in [
        (5u64, 100_000u64),
        (1000, 13),
        (77, 1),
        (TEST_FILE_LEN - 20_000, 20_000),
    ] {
        c.send(&get(&format!("/file?{offset},{len}"))).await;
        let r = c.response().await;
        assert_eq!(r.status, 200);
        let (o, l) = (offset as usize, len as usize);
        assert_eq!(r.body, &data[o..o + l], "region {offset},{len}");
    }
}

#[tokio::test]
async fn pipelined_file_answers_stay_in_order() {
    let srv = start_default().await;
    let data = test_file_bytes();
    let mut c = Raw::connect(srv.addr).await;
    let mut batch = get("/file?0,65536");
    batch.extend(get("/hello"));
    batch.extend(get("/file?3,10"));
    batch.extend(get("/file?100,1000000"));
    batch.extend(get("/hello"));
    c.send(&batch).await;
    assert_eq!(c.response().await.body, &data[..65536]);
    assert_eq!(c.response().await.text(), "Hello, World!");
    assert_eq!(c.response().await.body, &data[3..13]);
    assert_eq!(c.response().await.body, &data[100..1_000_100]);
    assert_eq!(c.response().await.text(), "Hello, World!");
}

#[tokio::test]
async fn head_of_a_file_sends_its_length_and_no_body() {
    let srv = start_default().await;
    let mut c = Raw::connect(srv.addr).await;
    let mut batch = b"HEAD /file HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    batch.extend(get("/hello"));
    c.send(&batch).await;
    let head = c.response_to("HEAD").await;
    assert_eq!(
        head.header("content-length"),
        Some(&*TEST_FILE_LEN.to_string())
    );
    assert!(head.body.is_empty());
    assert_eq!(c.response().await.text(), "Hello, World!");
}

#[tokio::test]
async fn a_file_shorter_than_its_response_closes_the_connection() {
    let srv = start_default().await;
    for len in [40_000u64, 10] {
        // The region runs `len` bytes past the end of the file: the response
        // promises more than exists, so it must end short and closed, never
        // followed by a reused connection that would misframe.
        let offset = TEST_FILE_LEN - len;
        let mut c = Raw::connect(srv.addr).await;
        c.send(&get(&format!("/file?{offset},{}", 2 * len))).await;
        let raw = c.read_to_close().await;
        let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&raw[..head_end]);
        assert!(
            head.contains(&format!("content-length: {}", 2 * len)),
            "{head}"
        );
        assert_eq!(raw.len() - head_end, len as usize);
    }
    // The server is unharmed.
    let mut c = Raw::connect(srv.addr).await;
    c.send(&get("/hello")).await;
    assert_eq!(c.response().await.status, 200);
}

#[tokio::test]
async fn a_client_that_stops_reading_a_file_is_cut_off_at_the_write_timeout() {
    let limits = Limits {
        write_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let srv = start(limits).await;
    let mut c = Raw::connect(srv.addr).await;
    c.send(&get("/file")).await;
    // Not reading: the socket buffers (a few MiB on loopback, far less than
    // the file) fill and the server's sendfile waits until the write
    // timeout ends the connection. The stall is ten write timeouts long,
    // so a loaded machine's late timer still fires inside it.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let raw = bounded(c.read_to_close()).await;
    assert!(
        (raw.len() as u64) < TEST_FILE_LEN,
        "the whole file arrived although the client stalled"
    );
    let mut c = Raw::connect(srv.addr).await;
    c.send(&get("/hello")).await;
    assert_eq!(c.response().await.status, 200);
}

#[tokio::test]
async fn curl_downloads_a_file_intact() {
    let srv = start_default().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let url = format!("http://{}/file", srv.addr);
    let target = out.clone();
    let status = tokio::task::spawn_blocking(move || {
        celer_test_support::run_tool(
            std::process::Command::new("curl")
                .args(["-sS", "--max-time", "20", "-o"])
                .arg(&target)
                .arg(&url),
        )
    })
    .await
    .unwrap();
    assert!(status.status.success(), "{status:?}");
    assert_eq!(std::fs::read(&out).unwrap(), test_file_bytes());
}

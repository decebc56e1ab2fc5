//! Graceful shutdown: in-flight requests finish, idle connections close.

use celer_test_support::Raw;

use crate::support::{start_default, start_deferred};

#[tokio::test]
async fn in_flight_requests_finish_and_idle_connections_close() {
    let srv = start_default().await;
    let mut idle = Raw::connect(srv.addr).await;
    idle.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(idle.response().await.status, 200);

    let mut busy = Raw::connect(srv.addr).await;
    busy.send(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n").await;
    // Let the slow request reach the service before shutdown starts.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    srv.shutdown.trigger();

    let r = busy.response().await;
    assert_eq!(r.text(), "slow done");
    assert_eq!(r.header("connection"), Some("close"));
    assert!(busy.is_closed().await);
    assert!(idle.is_closed().await);
    let addr = srv.addr;
    served_until_shutdown(srv).await;
    // Nothing listens any more.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// With TCP_DEFER_ACCEPT the first request is read as the connection
/// starts, around the runtime's readiness; the connection must still serve
/// more requests, wait idle and close when shutdown starts.
#[tokio::test]
async fn a_connection_whose_first_request_came_with_the_accept_closes_on_shutdown() {
    let srv = start_deferred().await;
    let mut conn = Raw::connect(srv.addr).await;
    assert_hello(&mut conn).await;
    assert_hello(&mut conn).await;
    // Idle now; shutdown must reach it at once, not at the keep-alive timeout.
    srv.shutdown.trigger();
    assert!(conn.is_closed().await);
    served_until_shutdown(srv).await;
}

/// The same after a single request: the stale readiness the first read
/// left behind must not keep the idle connection from seeing shutdown.
#[tokio::test]
async fn an_idle_connection_after_its_first_request_closes_on_shutdown() {
    let srv = start_deferred().await;
    let mut conn = Raw::connect(srv.addr).await;
    assert_hello(&mut conn).await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    srv.shutdown.trigger();
    assert!(conn.is_closed().await);
    served_until_shutdown(srv).await;
}

/// Sends `GET /hello` and expects a 200.
async fn assert_hello(conn: &mut Raw) {
    conn.send(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(conn.response().await.status, 200);
}

/// Waits for the server's task, which ends once shutdown has finished.
async fn served_until_shutdown(srv: crate::support::TestServer) {
    celer_test_support::bounded(srv.task)
        .await
        .unwrap()
        .unwrap();
}

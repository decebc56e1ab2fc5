//! Graceful shutdown: in-flight requests finish, idle connections close.

use celer_test_support::Raw;

use crate::support::start_default;

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
    celer_test_support::bounded(srv.task)
        .await
        .unwrap()
        .unwrap();
    // Nothing listens any more.
    assert!(tokio::net::TcpStream::connect(srv.addr).await.is_err());
}

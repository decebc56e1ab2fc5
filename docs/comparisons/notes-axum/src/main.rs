//! Serves the notes API: `notes-axum [--listen 127.0.0.1:8080]`.
//! Ctrl-C or SIGTERM shut it down gracefully.

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt::init();
    let args: Vec<String> = std::env::args().collect();
    let listen = match args.iter().position(|a| a == "--listen") {
        Some(at) => args.get(at + 1).ok_or("--listen needs a value")?.clone(),
        None => "127.0.0.1:8080".to_owned(),
    };
    let app = notes_axum::app(concat!(env!("CARGO_MANIFEST_DIR"), "/static"));
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        tokio::signal::ctrl_c().await.ok();
    };
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

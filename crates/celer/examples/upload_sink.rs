//! An upload endpoint in its own process, so a test can watch its memory
//! while a client sends it a large multipart body: it prints its port,
//! then serves `POST /upload` (body limit 2 GiB), which streams every
//! part to a counter and answers `name=len` for each part, and `POST
//! /form` (an 8 MiB urlencoded form of at most 1,000 fields), until stdin
//! closes.
//!
//! `cargo run -p celer --example upload_sink`

use std::collections::HashMap;

use celer::form::FormLimits;
use celer::multipart::Multipart;
use celer::{App, Error, Request};

async fn upload(mut req: Request) -> Result<String, Error> {
    let mut form: Multipart = req.extract().await?;
    let mut out = Vec::new();
    while let Some(mut part) = form.next_part().await? {
        let name = part.name().to_owned();
        let mut len = 0u64;
        while let Some(chunk) = part.chunk().await? {
            len += chunk.len() as u64;
        }
        out.push(format!("{name}={len}"));
    }
    Ok(out.join("&"))
}

async fn form(mut req: Request) -> Result<String, Error> {
    let limits = FormLimits {
        bytes: 8 << 20,
        fields: 1000,
    };
    let fields: HashMap<String, String> = limits.read(&mut req).await?;
    Ok(fields.len().to_string())
}

fn main() -> std::io::Result<()> {
    let mut app = App::new();
    app.post("/upload", upload).body_limit(2 << 30);
    app.post("/form", form).body_limit(8 << 20);
    let bound = celer::serve::Server::builder()
        .listen("tcp://127.0.0.1:0".parse().expect("listen spec"))
        .workers(1)
        .bind()?;
    println!("{}", bound.tcp_addr().expect("tcp address").port());
    // The parent ends the server by closing stdin.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
        let _ = tx.send(());
    });
    let signal = async move {
        let _ = tokio::task::spawn_blocking(move || rx.recv()).await;
    };
    app.run(bound, signal)
}

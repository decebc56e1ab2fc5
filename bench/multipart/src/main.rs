//! `POST /upload` with `celer::multipart`: every part's bytes counted as
//! they arrive, the answer `<parts> parts, <bytes> bytes` (as
//! bench/peers/multer answers). Body limit 1 GiB; jemalloc as in the
//! examples. `multipart-celer --listen tcp://127.0.0.1:PORT --workers 1`.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use celer::multipart::Multipart;
use celer::{App, Error, Request};

async fn upload(mut req: Request) -> Result<String, Error> {
    let mut form: Multipart = req.extract().await?;
    let (mut parts, mut bytes) = (0u64, 0u64);
    while let Some(mut part) = form.next_part().await? {
        parts += 1;
        while let Some(chunk) = part.chunk().await? {
            bytes += chunk.len() as u64;
        }
    }
    Ok(format!("{parts} parts, {bytes} bytes\n"))
}

fn main() -> std::process::ExitCode {
    let mut app = App::new();
    app.post("/upload", upload).body_limit(1 << 30);
    celer::serve_from_args(app)
}

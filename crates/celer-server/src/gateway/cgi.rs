//! CGI/1.1 (RFC 3875): a process started by the web server with the
//! request in its environment (§4.1) and body on standard input (§4.2),
//! answering on standard output (§6).

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStringExt;

use bytes::{Bytes, BytesMut};

use super::stream;
use crate::common::ConnConfig;
use crate::serve::HttpService;

/// The environment variable whose presence (`CGI/1.1`, RFC 3875 §4.1.4)
/// makes a server answer one CGI request instead of listening.
pub(crate) const GATEWAY_INTERFACE: &str = "GATEWAY_INTERFACE";

/// True when this process was started as a CGI script: `GATEWAY_INTERFACE`
/// names `CGI/1.x`.
pub fn is_cgi() -> bool {
    std::env::var_os(GATEWAY_INTERFACE).is_some_and(|v| v.as_encoded_bytes().starts_with(b"CGI/1."))
}

fn bytes(s: OsString) -> Bytes {
    Bytes::from(s.into_vec())
}

/// Answers the one request of this CGI process with `service`.
pub(crate) fn serve<S: HttpService>(mut service: S, config: &ConnConfig) -> io::Result<()> {
    let vars: Vec<(Bytes, Bytes)> = std::env::vars_os()
        .map(|(n, v)| (bytes(n), bytes(v)))
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let stdin = tokio::io::stdin();
        let stdout = tokio::io::stdout();
        stream::serve_one(&vars, BytesMut::new(), stdin, stdout, &mut service, config).await;
    });
    // Standard input is read on a blocking thread that may still wait.
    rt.shutdown_background();
    Ok(())
}

//! The gateway protocols: Celer as the application server behind a web
//! server that speaks FastCGI, SCGI or CGI to it.
//!
//! - `fastcgi`: the FastCGI 1.0 record codec and the responder's session
//!   state, sans IO; `responder`: a connection's driver on them
//! - `scgi`: the SCGI header parser and connection
//! - `cgi`: CGI/1.1, one request from the environment and standard input
//! - `params`: CGI meta-variables (RFC 3875 §4.1) → `http::Request`, and
//!   the CGI response head (RFC 3875 §6), shared by the three
//! - `stream`: one request over a byte stream (SCGI, CGI)
//!
//! FastCGI and SCGI are chosen by the listener (`fastcgi+unix:PATH`,
//! `scgi+tcp://HOST:PORT`, …, see [`Listen`](crate::Listen)), CGI by the
//! process's environment; `proto` hands connections here.

pub(crate) mod cgi;
pub mod fastcgi;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod fuzz;
mod params;
pub(crate) mod responder;
pub mod scgi;
mod stream;

use std::fmt;

pub use cgi::is_cgi;
pub use params::CgiEnv;

/// The gateway protocol a listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gateway {
    /// FastCGI 1.0, responder role.
    FastCgi,
    /// SCGI.
    Scgi,
}

impl Gateway {
    /// The listen-spec scheme prefix, without the `+`.
    pub fn scheme(self) -> &'static str {
        match self {
            Gateway::FastCgi => "fastcgi",
            Gateway::Scgi => "scgi",
        }
    }
}

impl fmt::Display for Gateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.scheme())
    }
}

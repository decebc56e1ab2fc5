//! The HTTP/2 flags of `celer serve`: on or off, and the limits a client
//! can hold on one HTTP/2 connection.

use celer_server::limits;

use crate::units::Size;

/// HTTP/2 arguments of `celer serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Http2Args {
    /// Serve HTTP/1.1 only: no ALPN `h2` on HTTPS listeners, no HTTP/2 by
    /// prior knowledge on plain ones.
    #[arg(long, help_heading = "HTTP/2")]
    pub(crate) no_http2: bool,

    /// Most streams a client may have open at once on one HTTP/2
    /// connection (SETTINGS_MAX_CONCURRENT_STREAMS); more are refused.
    #[arg(long, value_name = "N", default_value_t = limits::H2_MAX_CONCURRENT_STREAMS,
          value_parser = clap::value_parser!(u32).range(1..), help_heading = "HTTP/2")]
    pub(crate) h2_max_streams: u32,

    /// Request-body bytes a client may send on one stream before the
    /// handler reads them (the stream's flow-control window).
    #[arg(long, value_name = "BYTES", default_value_t = Size(limits::H2_STREAM_WINDOW.into()),
          value_parser = window, help_heading = "HTTP/2")]
    pub(crate) h2_stream_window: Size,

    /// Request-body bytes a client may send on one connection, over all its
    /// streams, before handlers read them.
    #[arg(long, value_name = "BYTES", default_value_t = Size(limits::H2_CONNECTION_WINDOW.into()),
          value_parser = window, help_heading = "HTTP/2")]
    pub(crate) h2_connection_window: Size,

    /// Streams a client may cancel while their handler still runs before
    /// the connection is closed with ENHANCE_YOUR_CALM, once they are also
    /// more than half of the streams it opened (rapid reset). Streams reset
    /// before the server accepted them are counted by the h2 library itself
    /// (20 per connection, then GOAWAY and one rate-limited warning): that
    /// limit acts first against a flood of HEADERS+RST_STREAM pairs; this
    /// one protects the work handlers already started.
    #[arg(long, value_name = "N", default_value_t = limits::H2_MAX_CANCELLED_STREAMS,
          help_heading = "HTTP/2")]
    pub(crate) h2_max_cancelled: u64,
}

/// A flow-control window: at least 65,535 bytes (the protocol's initial
/// window), at most 2^31 - 1 (RFC 9113 §6.9.1).
fn window(s: &str) -> Result<Size, String> {
    check_window(s.parse()?)
}

/// `size` if it is a flow-control window (see [`window`]).
pub(crate) fn check_window(size: Size) -> Result<Size, String> {
    if (65_535..=(1 << 31) - 1).contains(&size.0) {
        Ok(size)
    } else {
        Err(format!(
            "{size} is not a flow-control window: it must be 64KiB-1 to 2GiB-1"
        ))
    }
}

impl Http2Args {
    /// True unless `--no-http2`.
    pub(crate) fn enabled(&self) -> bool {
        !self.no_http2
    }

    /// Copies the HTTP/2 limits into `limits`.
    pub(crate) fn apply_limits(&self, limits: &mut celer_server::Limits) {
        let window = |size: Size| u32::try_from(size.0).unwrap_or(u32::MAX >> 1);
        limits.h2_max_concurrent_streams = self.h2_max_streams;
        limits.h2_stream_window = window(self.h2_stream_window);
        limits.h2_connection_window = window(self.h2_connection_window);
        limits.h2_max_cancelled_streams = self.h2_max_cancelled;
    }
}

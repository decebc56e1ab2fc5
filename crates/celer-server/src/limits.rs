//! Every resource a client can hold, as a named default and a field of [`Limits`].
//!
//! Each constant documents its unit and why the default is what it is; the
//! wire tests in `tests/it/limits.rs` pin the behaviour at each edge.

use std::time::Duration;

/// Default for [`Limits::max_head_bytes`]: 16 KiB, the request line plus all
/// header lines. Node.js uses the same figure; nginx allows up to 4 × 8 KiB.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Default for [`Limits::max_headers`]: 100 header fields per request.
pub const MAX_HEADERS: usize = 100;

/// Default for [`Limits::max_uri_bytes`]: 8 KiB for the request target
/// (nginx's `large_client_header_buffers` line size).
pub const MAX_URI_BYTES: usize = 8 * 1024;

/// Default for [`Limits::max_body_bytes`]: 16 MiB per request body.
pub const MAX_BODY_BYTES: u64 = 16 * 1024 * 1024;

/// Default for [`Limits::max_chunk_ext_bytes`]: 16 KiB of chunk extensions
/// summed over one chunked body.
pub const MAX_CHUNK_EXT_BYTES: usize = 16 * 1024;

/// Default for [`Limits::max_drain_bytes`]: 256 KiB of request body that the
/// server reads and discards when a handler answered without reading it.
pub const MAX_DRAIN_BYTES: u64 = 256 * 1024;

/// Default for [`Limits::max_connections`]: 10,000 open connections per server.
pub const MAX_CONNECTIONS: usize = 10_000;

/// Default for [`Limits::head_timeout`]: 10 s from the first byte of a request
/// head to its last (slowloris).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Default for [`Limits::body_timeout`]: 30 s without progress while a handler
/// waits for request body bytes.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Default for [`Limits::keep_alive_timeout`]: 60 s idle between requests.
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default for [`Limits::write_timeout`]: 30 s without progress while writing
/// a response to a client that does not read.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Default for [`Limits::shutdown_timeout`]: 30 s for in-flight requests to
/// finish after a graceful shutdown starts.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// Default for [`Limits::tls_handshake_timeout`]: 10 s from accepting a TLS
/// connection to the end of its handshake (a client that opens a connection
/// and never finishes the handshake is dropped then).
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Default for [`Limits::max_tls_handshakes`]: 1,024 TLS handshakes in
/// progress at once per server. A full handshake costs the server a
/// signature (hundreds of microseconds) and holds a task and buffers. The
/// listener never pauses for it: at the cap a new connection takes the
/// place of the least advanced pending handshake (the oldest still waiting
/// for its ClientHello, else the oldest), which is closed, so a flood of
/// half-open handshakes can neither hold every slot nor keep real clients
/// in the listen backlog.
pub const MAX_TLS_HANDSHAKES: usize = 1024;

/// Time a TLS connection gets from being accepted to its whole ClientHello
/// (3 s, actix-web's figure for its whole handshake): a client sends it in
/// its first flight, so a connection that has not within 3 s is closed. A
/// connection that opens and stays silent holds a handshake slot this
/// long, not the whole [`TLS_HANDSHAKE_TIMEOUT`].
pub const TLS_CLIENT_HELLO_TIMEOUT: Duration = Duration::from_secs(3);

/// Default for the TLS session cache (`TlsBuilder::session_cache_size`):
/// 4,096 sessions kept for session-ID resumption (about 1 MiB). Sessions
/// resumed by ticket cost the server no memory.
pub const TLS_SESSION_CACHE: usize = 4096;

/// Default for [`Limits::h2_max_concurrent_streams`]: 128 streams open at
/// once on one HTTP/2 connection (nginx's default; h2o uses 100).
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 128;

/// Default for [`Limits::h2_stream_window`]: 256 KiB of request body a
/// client may send on one HTTP/2 stream before the handler reads it.
pub const H2_STREAM_WINDOW: u32 = 256 * 1024;

/// Default for [`Limits::h2_connection_window`]: 1 MiB of request body a
/// client may send on one HTTP/2 connection, summed over its streams, before
/// handlers read it. This bounds the request bytes one connection can make
/// the server buffer, whatever the number of streams.
pub const H2_CONNECTION_WINDOW: u32 = 1024 * 1024;

/// Default for [`Limits::h2_max_frame_size`]: 16 KiB, the smallest frame
/// size HTTP/2 allows a peer to announce (RFC 9113 §6.5.2).
pub const H2_MAX_FRAME_SIZE: u32 = 16 * 1024;

/// Most response bytes queued per HTTP/2 stream beyond what the socket has
/// taken: a stream waits for the client to read before queueing more, so a
/// client that stops reading holds at most this much per open stream. The
/// share each stream actually gets is [`h2_stream_send_buffer`].
pub const H2_STREAM_SEND_BUFFER: usize = 128 * 1024;

/// Response bytes queued per HTTP/2 connection, summed over its streams,
/// beyond what the socket has taken: 2 MiB. Each stream's queue is this
/// divided by the concurrent-stream limit ([`h2_stream_send_buffer`]), so
/// a client that opens every stream, grants large windows and stops
/// reading holds at most this much (plus one last piece of at most 16 KiB
/// per stream that a small response queues at once). Response bodies are
/// read only as the client's window allows, so a client that grants no
/// window makes the server read nothing. nginx holds about 1.2 MiB for a
/// stalled connection of 128 streams (measured, issue 20); the figure for
/// Celer is in docs/decisions/051-h2-stalled-streams.md.
pub const H2_CONNECTION_SEND_BUFFER: usize = 2 * 1024 * 1024;

/// The send queue of one HTTP/2 stream: [`H2_CONNECTION_SEND_BUFFER`]
/// shared by `max_concurrent_streams` streams, at least one 16 KiB frame
/// and at most [`H2_STREAM_SEND_BUFFER`]. With the defaults (128 streams),
/// 16 KiB.
pub fn h2_stream_send_buffer(max_concurrent_streams: u32) -> usize {
    let streams = usize::try_from(max_concurrent_streams.max(1)).unwrap_or(usize::MAX);
    (H2_CONNECTION_SEND_BUFFER / streams).clamp(16 * 1024, H2_STREAM_SEND_BUFFER)
}

/// Default for [`Limits::h2_max_cancelled_streams`]: 100 streams cancelled
/// by the client while their handler still ran.
pub const H2_MAX_CANCELLED_STREAMS: u64 = 100;

/// Default for `ws::Config::max_frame_bytes`: 1 MiB of payload in one
/// WebSocket frame (after the header). A larger frame closes the connection
/// with 1009 as soon as its header arrives.
pub const WS_MAX_FRAME_BYTES: u64 = 1024 * 1024;

/// Default for `ws::Config::max_message_bytes`: 4 MiB in one WebSocket
/// message, summed over its fragments and measured after decompression; a
/// larger message closes the connection with 1009 (RFC 6455 §7.4.1).
pub const WS_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// Default for `ws::Config::max_queued_bytes`: 1 MiB of frames queued for
/// one WebSocket client that has not read them yet. Past it the slow-consumer
/// policy applies (close with 1008 or 1013, or drop the oldest messages).
pub const WS_MAX_QUEUED_BYTES: usize = 1024 * 1024;

/// Default most WebSocket connections open at once on one route: 10,000,
/// the server's own connection limit ([`MAX_CONNECTIONS`]). Past it the
/// handshake is answered `503 Service Unavailable`.
pub const WS_MAX_CONNECTIONS: usize = 10_000;

/// Default for `ws::Config::ping_interval`: 30 s without a frame from the
/// client before the server sends a ping (below the 60 s idle timeouts of
/// common proxies and load balancers).
pub const WS_PING_INTERVAL: Duration = Duration::from_secs(30);

/// Default for `ws::Config::ping_timeout`: 30 s for any frame to arrive
/// after a ping; a peer silent that long is dead and its connection is
/// dropped.
pub const WS_PING_TIMEOUT: Duration = Duration::from_secs(30);

/// Default for `ws::Config::close_timeout`: 5 s for the client's close frame
/// after the server sent its own (RFC 6455 §7.1.1); the TCP connection is
/// dropped then.
pub const WS_CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Default for [`Limits::gateway_max_params_bytes`]: 32 KiB of CGI
/// meta-variables (names and values) in one FastCGI or SCGI request: the
/// HTTP head limit ([`MAX_HEAD_BYTES`]) and room for the variables the
/// front end adds (nginx's `fastcgi_params` send about 1 KiB).
pub const GATEWAY_MAX_PARAMS_BYTES: usize = 32 * 1024;

/// Default for [`Limits::gateway_max_params`]: 200 variables in one
/// FastCGI or SCGI request: the header-field limit ([`MAX_HEADERS`]) and
/// the hundred the front end may add.
pub const GATEWAY_MAX_PARAMS: usize = 200;

/// Default for [`Limits::fastcgi_max_requests`]: 32 requests in flight on
/// one FastCGI connection (answered as `FCGI_MPXS_CONNS` = 1 and
/// `FCGI_MAX_REQS` to `FCGI_GET_VALUES`). A request begun past it is
/// answered `FCGI_END_REQUEST` with `FCGI_OVERLOADED` (`FCGI_CANT_MPX_CONN`
/// when the limit is 1).
pub const FASTCGI_MAX_REQUESTS: usize = 32;

/// Default for [`Limits::fastcgi_max_record_bytes`]: 65,535, the most a
/// FastCGI record's 16-bit length can say; a connection buffers at most
/// one record beyond it. A lower limit closes the connection on a record
/// with more content.
pub const FASTCGI_MAX_RECORD_BYTES: usize = 0xffff;

/// The limits the engine enforces on every connection.
///
/// Build one with [`Limits::default`] and change the fields you need; every
/// field documents its default.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request head (request line and header section) in bytes;
    /// beyond it the answer is 431, or 414 when the request line alone is
    /// too long. Default is [`MAX_HEAD_BYTES`].
    pub max_head_bytes: usize,
    /// Most header fields in one request (and in one trailer section); beyond
    /// it the answer is 431. Default is [`MAX_HEADERS`].
    pub max_headers: usize,
    /// Longest request target in bytes; beyond it the answer is 414. Default
    /// is [`MAX_URI_BYTES`].
    pub max_uri_bytes: usize,
    /// Largest request body in bytes, or `None` for no limit; a larger
    /// Content-Length is answered 413 before the body is read, and a chunked
    /// body that grows past it is cut off with 413. Default is
    /// [`MAX_BODY_BYTES`].
    pub max_body_bytes: Option<u64>,
    /// Most chunk-extension bytes in one chunked body; beyond it the answer
    /// is 400. Default is [`MAX_CHUNK_EXT_BYTES`].
    pub max_chunk_ext_bytes: usize,
    /// Most unread body bytes discarded to keep a connection alive after a
    /// handler answered without reading its body; past it the connection is
    /// closed instead. Default is [`MAX_DRAIN_BYTES`].
    pub max_drain_bytes: u64,
    /// Most connections open at once on one server, exactly, whatever the
    /// threading model and number of workers. At the limit the next client
    /// waits (it is not refused): each accept loop (one per listener and
    /// worker) holds at most one accepted client until a connection ends,
    /// and further clients wait in the listen backlog. Default is
    /// [`MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// Most requests served on one connection before it is closed, or `None`
    /// for no limit. A FastCGI connection counts the requests begun on it:
    /// the last one is answered and ended (`FCGI_END_REQUEST`) and the
    /// connection then closes whatever `FCGI_KEEP_CONN` asked; a request
    /// begun meanwhile on a multiplexed connection is answered
    /// `FCGI_OVERLOADED`. An SCGI connection carries one request anyway.
    /// Default is `None`.
    pub max_requests_per_connection: Option<u64>,
    /// Time allowed from the first byte of a request head to its end; a late
    /// head is answered 408. Default is [`HEAD_TIMEOUT`].
    pub head_timeout: Duration,
    /// Time allowed without progress while a handler waits for body bytes; a
    /// stalled body is answered 408. Default is [`BODY_TIMEOUT`].
    pub body_timeout: Duration,
    /// Time an idle keep-alive connection is kept open. Default is
    /// [`KEEP_ALIVE_TIMEOUT`].
    pub keep_alive_timeout: Duration,
    /// Time allowed without progress while writing to a client that does not
    /// read; the connection is then closed. Default is [`WRITE_TIMEOUT`].
    pub write_timeout: Duration,
    /// Time in-flight requests get to finish once graceful shutdown starts.
    /// Default is [`SHUTDOWN_TIMEOUT`].
    pub shutdown_timeout: Duration,
    /// Time allowed from accepting a TLS connection to the end of its
    /// handshake; past it the connection is closed. Default is
    /// [`TLS_HANDSHAKE_TIMEOUT`].
    pub tls_handshake_timeout: Duration,
    /// Most TLS handshakes in progress at once on one server; at the cap a
    /// new connection sheds the least advanced pending handshake (accepting
    /// never pauses). Default is [`MAX_TLS_HANDSHAKES`].
    pub max_tls_handshakes: usize,
    /// Most streams a client may have open at once on one HTTP/2
    /// connection (`SETTINGS_MAX_CONCURRENT_STREAMS`); a client that opens
    /// more gets those streams refused. Default is
    /// [`H2_MAX_CONCURRENT_STREAMS`].
    ///
    /// HTTP/2 requests also obey the request limits above: the header list
    /// (names, values and 32 bytes per field, RFC 9113 §6.5.2) is capped at
    /// `max_head_bytes`, fields at `max_headers`, the target at
    /// `max_uri_bytes` and the body at `max_body_bytes`; the head timeout
    /// bounds the connection preface and `keep_alive_timeout` a connection
    /// with no open stream.
    pub h2_max_concurrent_streams: u32,
    /// HTTP/2 flow-control window of one stream's request body, in bytes
    /// (`SETTINGS_INITIAL_WINDOW_SIZE`). Default is [`H2_STREAM_WINDOW`].
    pub h2_stream_window: u32,
    /// HTTP/2 flow-control window of a whole connection's request bodies,
    /// in bytes. Default is [`H2_CONNECTION_WINDOW`].
    pub h2_connection_window: u32,
    /// Largest HTTP/2 frame payload the server accepts, in bytes
    /// (`SETTINGS_MAX_FRAME_SIZE`, 16 KiB to 16 MiB). Default is
    /// [`H2_MAX_FRAME_SIZE`].
    pub h2_max_frame_size: u32,
    /// Streams a client may cancel (`RST_STREAM`) while their handler still
    /// runs before the connection is closed with `ENHANCE_YOUR_CALM`, once
    /// they are also more than half of the streams it opened: the defence
    /// against rapid reset (CVE-2023-44487), which makes a server start
    /// work that the client throws away at once. Default is
    /// [`H2_MAX_CANCELLED_STREAMS`].
    ///
    /// The `h2` library keeps its own, earlier limit: streams the client
    /// resets while they still wait to be accepted (20 per connection;
    /// then `GOAWAY` with `ENHANCE_YOUR_CALM`). A flood that sends
    /// `RST_STREAM` right behind each `HEADERS` meets that one, in the
    /// same read, before any handler runs; this limit covers resets that
    /// arrive once handlers have started, i.e. the work actually wasted.
    pub h2_max_cancelled_streams: u64,
    /// Most bytes of CGI meta-variables in one FastCGI or SCGI request;
    /// past it a FastCGI request is answered 431 and an SCGI connection
    /// closed. The request limits above apply to what they map to
    /// (`max_headers`, `max_uri_bytes`, `max_body_bytes`), and the
    /// head, body, idle and write timeouts to the gateway connections.
    /// Default is [`GATEWAY_MAX_PARAMS_BYTES`].
    pub gateway_max_params_bytes: usize,
    /// Most CGI meta-variables in one FastCGI or SCGI request, treated as
    /// `gateway_max_params_bytes`. Default is [`GATEWAY_MAX_PARAMS`].
    pub gateway_max_params: usize,
    /// Most requests in flight on one FastCGI connection. Default is
    /// [`FASTCGI_MAX_REQUESTS`].
    pub fastcgi_max_requests: usize,
    /// Largest FastCGI record content accepted, in bytes. Default is
    /// [`FASTCGI_MAX_RECORD_BYTES`].
    pub fastcgi_max_record_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: MAX_HEAD_BYTES,
            max_headers: MAX_HEADERS,
            max_uri_bytes: MAX_URI_BYTES,
            max_body_bytes: Some(MAX_BODY_BYTES),
            max_chunk_ext_bytes: MAX_CHUNK_EXT_BYTES,
            max_drain_bytes: MAX_DRAIN_BYTES,
            max_connections: MAX_CONNECTIONS,
            max_requests_per_connection: None,
            head_timeout: HEAD_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
            keep_alive_timeout: KEEP_ALIVE_TIMEOUT,
            write_timeout: WRITE_TIMEOUT,
            shutdown_timeout: SHUTDOWN_TIMEOUT,
            tls_handshake_timeout: TLS_HANDSHAKE_TIMEOUT,
            max_tls_handshakes: MAX_TLS_HANDSHAKES,
            h2_max_concurrent_streams: H2_MAX_CONCURRENT_STREAMS,
            h2_stream_window: H2_STREAM_WINDOW,
            h2_connection_window: H2_CONNECTION_WINDOW,
            h2_max_frame_size: H2_MAX_FRAME_SIZE,
            h2_max_cancelled_streams: H2_MAX_CANCELLED_STREAMS,
            gateway_max_params_bytes: GATEWAY_MAX_PARAMS_BYTES,
            gateway_max_params: GATEWAY_MAX_PARAMS,
            fastcgi_max_requests: FASTCGI_MAX_REQUESTS,
            fastcgi_max_record_bytes: FASTCGI_MAX_RECORD_BYTES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_send_buffer_is_shared_by_its_streams() {
        let streams = H2_MAX_CONCURRENT_STREAMS;
        let each = h2_stream_send_buffer(streams);
        assert_eq!(each, 16 * 1024);
        assert!(each * streams as usize <= H2_CONNECTION_SEND_BUFFER);
        assert_eq!(h2_stream_send_buffer(1), H2_STREAM_SEND_BUFFER);
        assert_eq!(h2_stream_send_buffer(0), H2_STREAM_SEND_BUFFER);
        assert_eq!(h2_stream_send_buffer(100_000), 16 * 1024);
    }
}

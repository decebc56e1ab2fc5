//! The floor of `bench/run ws`: a WebSocket server that does as little in
//! user space as the echo and fan-out loads allow, so that what it costs is
//! nearly all the kernel's (docs/decisions/069-websocket-floor.md).
//!
//! One thread, raw edge-triggered epoll, non-blocking sockets indexed by
//! their descriptor. `/echo` (and `/`) sends every complete message back as
//! one unmasked frame, with one `send` per readable batch; on `/broadcast`
//! every message received is framed once and written to every connection of
//! that path (the sender too, as every peer does) with a plain `send` loop.
//!
//! It is a floor, not a server. It skips what the loads do not need:
//! fragmented messages and any extension are refused with a close (1003,
//! 1002); text is not checked to be UTF-8 (gorilla/websocket does not check
//! it either); subprotocols and permessage-deflate offers are ignored (the
//! 101 names none, RFC 6455 section 4.2.2); close reasons are not checked.
//!
//! With `--doc FILE` it is also the floor of `bench/feed/run`'s polling
//! loads: `GET /doc.json` answered from three responses made once at start
//! (`304` when `If-None-Match` names the file's ETag, the `FILE.gz` copy when
//! `Accept-Encoding` offers gzip and the copy exists, else the file), on a
//! keep-alive connection, one `send` per readable batch
//! (docs/decisions/132-polling-floor.md).
//!
//! With `--sse NAME=FILE` (repeatable) it is the floor of the feed's SSE
//! loads: `GET /feeds/NAME/events` answers a chunked `text/event-stream`
//! whose first event is the file's current version; the file's directory
//! is watched with inotify, and each change (a rename over it, or a write
//! closed) makes one event, `id: N` (32 hex digits, as long as celer's
//! content hash), `data:` the file with its line breaks
//! as spaces, built once and then written to every subscriber in a plain
//! loop. A request offering gzip gets the stream gzip-coded: the gzip
//! header once, then each event deflated once by a fresh compressor and
//! sync-flushed, the same bytes for every gzip subscriber (no trailer: the
//! stream never ends cleanly). With `--tls CERT KEY` every connection is
//! TLS 1.3 (rustls; handshakes on aws-lc-rs, records on ring's
//! AES-128-GCM, as celer; no resumption), a
//! `ServerConnection` per socket driven in the same loop; a fan-out event is
//! sealed per subscriber (each has its keys) and sent with one `sendmsg`.
//!
//! With `--own-records` too, once a handshake is over (and AES-128-GCM
//! agreed) the floor takes the keys from rustls and frames the records
//! itself: each opened in place in the read buffer (or with the partial
//! record it completes), each answer or event
//! sealed in place with ring and sent with one `send`, as celer's own
//! record layer does (decision 032); a key update or alert closes the
//! connection (docs/decisions/153-feed-floors-sse-and-tls.md).
//!
//! With `--h2` too, ALPN offers HTTP/2 before HTTP/1.1 and `--doc` is
//! served over HTTP/2 as well: one HPACK decode per request, answers
//! encoded once with no dynamic table (`h2.rs`; decision 172).
//!
//! peer-ws-floor PORT [--doc FILE] [--sse NAME=FILE]... [--tls CERT KEY [--own-records] [--h2]]

mod h2;
mod hpack;

use std::io::{self, Read as _, Write as _};
use std::sync::Arc;

use base64::Engine as _;

/// Connections the listener accepts at once (RFC 6455 leaves it to the server).
const LISTEN_BACKLOG: i32 = 4096;
/// Most open connections (50,000; fewer when the open-file limit is lower):
/// a connection accepted beyond it is closed at once.
const MAX_CONNECTIONS: usize = 50_000;
/// Largest upgrade request head (8 KiB): a longer one gets 431 and a close.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// Largest message payload (64 KiB): a larger frame fails the connection
/// with 1009 (RFC 6455 section 7.4.1).
const MAX_MESSAGE_BYTES: u64 = 64 * 1024;
/// Most bytes queued for a connection that does not read (256 KiB): past
/// it the connection is dropped.
const MAX_QUEUED_BYTES: usize = 256 * 1024;
/// Bytes read by one `recv` (64 KiB, one buffer for every connection).
const READ_BYTES: usize = 64 * 1024;
/// Events taken by one `epoll_wait`.
const EVENTS_AT_ONCE: usize = 1024;
/// The deflate level of gzip-coded events: zlib's default, as celer's.
const GZIP_LEVEL: u32 = 6;
/// The gzip member header (RFC 1952 section 2.3): deflate, no flags, no
/// time, unknown OS.
const GZIP_HEADER: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff";
/// The fan-out list of `/broadcast` (each feed has two more: plain, gzip).
const BROADCAST_LIST: usize = 0;

/// The answer to a head longer than [`MAX_HEAD_BYTES`].
const TOO_LARGE: &[u8] =
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

/// The GUID every Sec-WebSocket-Accept is derived with (RFC 6455 section 1.3).
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Opcodes of RFC 6455 section 5.2.
mod op {
    pub const CONTINUATION: u8 = 0x0;
    pub const TEXT: u8 = 0x1;
    pub const BINARY: u8 = 0x2;
    pub const CLOSE: u8 = 0x8;
    pub const PING: u8 = 0x9;
    pub const PONG: u8 = 0xA;
}

/// Status codes of RFC 6455 section 7.4.1 sent by the floor.
mod status {
    pub const PROTOCOL_ERROR: u16 = 1002;
    pub const UNSUPPORTED: u16 = 1003;
    pub const TOO_BIG: u16 = 1009;
}

/// What a connection serves once upgraded (or, for `/doc.json`, once its
/// first request is answered).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    Echo,
    Broadcast,
    /// Plain HTTP/1.1 requests for the document, one after another.
    Document,
    /// HTTP/2 after the client's preface (`--h2`): `Conn::session`.
    Http2,
    /// An event stream, subscribed to the fan-out list `list` (its bytes
    /// from the client are ignored).
    Events {
        list: usize,
    },
}

/// A feed of `--sse`: its file and its current event, framed as a chunk.
struct Feed {
    name: String,
    path: std::path::PathBuf,
    /// The file's name in its directory, as inotify reports it.
    file_name: Vec<u8>,
    /// The inotify watch of the file's directory.
    watch: i32,
    /// The versions read so far: the events' ids.
    version: u64,
    /// The current event as one chunk, plain and as a gzip segment; and
    /// the first chunk of a gzip stream (the header, then the segment).
    plain: Vec<u8>,
    gzip: Vec<u8>,
    gzip_first: Vec<u8>,
}

/// The document of `--doc`: its three answers, made once.
struct Doc {
    /// Its ETag (quotes included) and its gzip copy's.
    etag: String,
    gz_etag: String,
    /// `304 Not Modified`, for either ETag.
    not_modified: Vec<u8>,
    gz_not_modified: Vec<u8>,
    /// `200` with the file, and with its gzip copy (if there is one).
    full: Vec<u8>,
    gzip: Option<Vec<u8>>,
    /// The same answers for HTTP/2.
    h2: h2::Answers,
}

/// A connection's state.
struct Conn {
    /// `None` until the upgrade request has been answered.
    route: Option<Route>,
    /// Received bytes not yet parsed: an incomplete head or frame.
    pending: Vec<u8>,
    /// Bytes the socket did not take yet, sent when it is writable.
    queued: Vec<u8>,
    /// Close the connection once `queued` is sent.
    closing: bool,
    /// The fan-out list it is in (`Server::lists`) and its index there.
    list: usize,
    sub: usize,
    /// The TLS session of a `--tls` server; it queues what the socket did
    /// not take itself (`queued` stays empty).
    tls: Option<Box<rustls::ServerConnection>>,
    /// With `--own-records`, after the handshake: the session's keys, its
    /// records opened and sealed here (then `tls` is `None` and `queued`
    /// holds sealed bytes).
    records: Option<Box<Records>>,
    /// An HTTP/2 connection's state (`Route::Http2`).
    session: Option<Box<h2::Session>>,
}

/// A TLS 1.3 session's record protection after its handshake (RFC 8446
/// section 5.2), AES-128-GCM on ring, on the keys rustls hands over.
struct Records {
    open: ring::aead::LessSafeKey,
    open_iv: [u8; 12],
    open_seq: u64,
    seal: ring::aead::LessSafeKey,
    seal_iv: [u8; 12],
    seal_seq: u64,
    /// Received bytes short of a whole record.
    partial: Vec<u8>,
}

/// What parsing a connection's bytes asks for.
enum Parsed {
    /// Keep the unparsed tail from this offset.
    More(usize),
    /// Send the reply, then close.
    Close,
}

/// The server: one epoll instance, every connection, and scratch buffers
/// shared by all (one thread).
struct Server {
    epoll: i32,
    listener: i32,
    /// Connections by descriptor.
    conns: Vec<Option<Conn>>,
    open: usize,
    limit: usize,
    /// The fan-out lists' descriptors: `/broadcast`'s, then per feed its
    /// plain and its gzip subscribers.
    lists: Vec<Vec<i32>>,
    read: Vec<u8>,
    /// Plaintext taken from a TLS session.
    plain: Vec<u8>,
    /// Frames for the connection being read (echoes, pongs, closes).
    reply: Vec<u8>,
    /// Frames for every subscriber.
    fanout: Vec<u8>,
    /// Subscribers whose socket failed during a broadcast.
    dead: Vec<i32>,
    /// The document of `--doc`.
    doc: Option<Doc>,
    /// The feeds of `--sse`, and the inotify descriptor watching them (-1
    /// with none).
    feeds: Vec<Feed>,
    inotify: i32,
    /// The configuration of `--tls`.
    tls: Option<Arc<rustls::ServerConfig>>,
    /// `--own-records`: records framed here after the handshake.
    own_records: bool,
    /// `--h2`: HTTP/2 after a client's preface.
    h2: bool,
    /// Sealed records for the connection being written.
    sealed: Vec<u8>,
}

/// What the command line asks for.
#[derive(Default)]
struct Options {
    doc: Option<Doc>,
    feeds: Vec<Feed>,
    tls: Option<Arc<rustls::ServerConfig>>,
    own_records: bool,
    h2: bool,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!(
            "usage: peer-ws-floor PORT [--doc FILE] [--sse NAME=FILE]... [--tls CERT KEY [--own-records] [--h2]]"
        );
        std::process::exit(2);
    };
    let port: u16 = match args.first().map(|p| p.parse()) {
        Some(Ok(port)) => port,
        _ => usage(),
    };
    let fail = |what: &str, e: &dyn std::fmt::Display| -> ! {
        eprintln!("peer-ws-floor: {what}: {e}");
        std::process::exit(1);
    };
    let mut options = Options::default();
    let mut tls = None;
    let mut rest = &args[1..];
    while !rest.is_empty() {
        rest = match rest {
            [flag, file, more @ ..] if flag == "--doc" => {
                let doc = Doc::load(file)
                    .unwrap_or_else(|e| fail(&format!("cannot read --doc {file}"), &e));
                options.doc = Some(doc);
                more
            }
            [flag, spec, more @ ..] if flag == "--sse" => {
                let Some((name, file)) = spec.split_once('=') else {
                    usage()
                };
                let feed = Feed::load(name, file)
                    .unwrap_or_else(|e| fail(&format!("cannot read --sse {spec}"), &e));
                options.feeds.push(feed);
                more
            }
            [flag, cert, key, more @ ..] if flag == "--tls" => {
                tls = Some((cert, key));
                more
            }
            [flag, more @ ..] if flag == "--own-records" => {
                options.own_records = true;
                more
            }
            [flag, more @ ..] if flag == "--h2" => {
                options.h2 = true;
                more
            }
            _ => usage(),
        };
    }
    if let Some((cert, key)) = tls {
        let config = tls_config(cert, key, options.h2)
            .unwrap_or_else(|e| fail(&format!("cannot use --tls {cert} {key}"), &e));
        options.tls = Some(config);
    } else if options.h2 {
        // HTTP/2 is chosen by ALPN only: no h2c.
        usage();
    }
    match Server::new(port, options) {
        Ok(mut server) => {
            eprintln!(
                "peer-ws-floor listening on 127.0.0.1:{port} (at most {} connections)",
                server.limit
            );
            if let Err(e) = server.run() {
                eprintln!("peer-ws-floor: {e}");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("peer-ws-floor: cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    }
}

/// The result of a libc call that returns -1 on failure.
fn check(r: i32) -> io::Result<i32> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// One `recv` into `read`: `Some(n)` with `n > 0` bytes; `None` when the
/// socket has nothing more for now (`EAGAIN`: a new arrival brings a new
/// edge) or when the peer has gone or the socket failed, which also sets
/// `lost`.
fn recv_some(fd: i32, read: &mut [u8], lost: &mut bool) -> Option<usize> {
    loop {
        // SAFETY: `read` is valid for its length.
        let n = unsafe { libc::recv(fd, read.as_mut_ptr().cast(), read.len(), 0) };
        if n > 0 {
            return Some(n as usize);
        }
        if n < 0 {
            match errno() {
                libc::EAGAIN => return None,
                libc::EINTR => continue,
                _ => {}
            }
        }
        *lost = true;
        return None;
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl Server {
    fn new(port: u16, options: Options) -> io::Result<Server> {
        // The open-file limit up to its hard limit; the connection limit
        // stays below it, so that `accept` never fails for want of one.
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid rlimit to fill and then to pass.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                lim.rlim_cur = lim.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
            }
        }
        let files = usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX);
        let limit = MAX_CONNECTIONS.min(files.saturating_sub(16));
        // SAFETY: plain socket calls on a descriptor this function owns;
        // `addr` is a valid sockaddr_in for its length.
        let listener = unsafe {
            let fd = check(libc::socket(
                libc::AF_INET,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            ))?;
            let one: i32 = 1;
            check(libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_REUSEADDR,
                (&raw const one).cast(),
                size_of::<i32>() as u32,
            ))?;
            let addr = libc::sockaddr_in {
                sin_family: libc::AF_INET as u16,
                sin_port: port.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
                },
                sin_zero: [0; 8],
            };
            check(libc::bind(
                fd,
                (&raw const addr).cast(),
                size_of::<libc::sockaddr_in>() as u32,
            ))?;
            check(libc::listen(fd, LISTEN_BACKLOG))?;
            fd
        };
        // SAFETY: creating an epoll instance owned by the server.
        let epoll = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // The listener is level-triggered: whatever one pass of `accept`
        // leaves is reported again.
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: listener as u64,
        };
        // SAFETY: registering descriptors the server owns.
        check(unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, listener, &mut ev) })?;
        let Options {
            doc,
            mut feeds,
            tls,
            own_records,
            h2,
        } = options;
        let mut inotify = -1;
        if !feeds.is_empty() {
            // SAFETY: creating an inotify instance owned by the server.
            inotify = check(unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) })?;
            for feed in &mut feeds {
                feed.watch = watch(inotify, &feed.path)?;
            }
            // Level-triggered, as the listener.
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: inotify as u64,
            };
            // SAFETY: registering a descriptor the server owns.
            check(unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, inotify, &mut ev) })?;
        }
        Ok(Server {
            epoll,
            listener,
            conns: Vec::new(),
            open: 0,
            limit,
            lists: vec![Vec::new(); 1 + 2 * feeds.len()],
            read: vec![0; READ_BYTES],
            plain: vec![0; READ_BYTES],
            reply: Vec::with_capacity(READ_BYTES),
            fanout: Vec::with_capacity(READ_BYTES),
            dead: Vec::new(),
            doc,
            feeds,
            inotify,
            tls,
            own_records,
            h2,
            sealed: Vec::with_capacity(READ_BYTES + READ_BYTES / 256),
        })
    }

    fn run(&mut self) -> io::Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS_AT_ONCE];
        loop {
            // SAFETY: `events` has room for EVENTS_AT_ONCE entries.
            let n = unsafe {
                libc::epoll_wait(self.epoll, events.as_mut_ptr(), EVENTS_AT_ONCE as i32, -1)
            };
            if n < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                return Err(io::Error::last_os_error());
            }
            for ev in &events[..n as usize] {
                let fd = ev.u64 as i32;
                if fd == self.listener {
                    self.accept_all();
                    continue;
                }
                if fd == self.inotify {
                    self.changed();
                    continue;
                }
                // A descriptor closed earlier in this batch may have been
                // reused by `accept`: the stale event then finds a read that
                // would block, which costs one `recv` and nothing else.
                let bits = ev.events;
                if bits
                    & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32
                    != 0
                {
                    self.readable(fd);
                }
                if bits & libc::EPOLLOUT as u32 != 0 {
                    self.writable(fd);
                }
            }
        }
    }

    fn accept_all(&mut self) {
        loop {
            // SAFETY: accept4 with no address out-parameters.
            let fd = unsafe {
                libc::accept4(
                    self.listener,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                match errno() {
                    libc::EINTR | libc::ECONNABORTED => continue,
                    _ => return, // EAGAIN: none left; anything else: the next event retries
                }
            }
            if self.open >= self.limit {
                // SAFETY: closing the descriptor just accepted.
                unsafe { libc::close(fd) };
                continue;
            }
            let one: i32 = 1;
            // Edge-triggered, reading and writing (no epoll_ctl later):
            // an edge comes with each arrival and when a full socket
            // buffer drains.
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
                u64: fd as u64,
            };
            // SAFETY: setting an option and registering the descriptor just
            // accepted; `one` and `ev` are valid for the calls.
            let ok = unsafe {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    (&raw const one).cast(),
                    size_of::<i32>() as u32,
                );
                libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_ADD, fd, &mut ev) == 0
            };
            if !ok {
                // SAFETY: closing the descriptor just accepted.
                unsafe { libc::close(fd) };
                continue;
            }
            let i = fd as usize;
            if self.conns.len() <= i {
                self.conns.resize_with(i + 1, || None);
            }
            let tls = match &self.tls {
                None => None,
                Some(config) => match rustls::ServerConnection::new(config.clone()) {
                    Ok(mut tls) => {
                        // What a subscriber that does not read may hold.
                        tls.set_buffer_limit(Some(MAX_QUEUED_BYTES));
                        Some(Box::new(tls))
                    }
                    Err(_) => {
                        // SAFETY: closing the descriptor just accepted.
                        unsafe { libc::close(fd) };
                        continue;
                    }
                },
            };
            self.conns[i] = Some(Conn {
                route: None,
                pending: Vec::new(),
                queued: Vec::new(),
                closing: false,
                list: usize::MAX,
                sub: usize::MAX,
                tls,
                records: None,
                session: None,
            });
            self.open += 1;
        }
    }

    /// Reads what the socket has (through its TLS session, if any), parses
    /// it, sends the replies with one `send`, and broadcasts what came on
    /// `/broadcast`.
    fn readable(&mut self, fd: i32) {
        let Server {
            conns,
            lists,
            read,
            plain,
            reply,
            fanout,
            doc,
            feeds,
            own_records,
            sealed,
            h2,
            ..
        } = self;
        let ctx = Ctx {
            doc: doc.as_ref(),
            feeds,
            h2: *h2,
        };
        let Some(conn) = conns.get_mut(fd as usize).and_then(Option::as_mut) else {
            return;
        };
        if conn.closing {
            // Closed by the protocol; only its queued bytes are still sent.
            return;
        }
        let (mut lost, mut closing) = (false, false);
        let Conn {
            route,
            pending,
            tls,
            records,
            session,
            ..
        } = conn;
        match tls {
            None if records.is_some() => {
                while let Some(rec) = records.as_mut() {
                    let Some(n) = recv_some(fd, read, &mut lost) else {
                        break;
                    };
                    let opened = rec.open_all(&mut read[..n], |bytes| {
                        take(route, session, pending, bytes, reply, fanout, &ctx)
                    });
                    match opened {
                        Err(()) => {
                            lost = true;
                            break;
                        }
                        Ok(true) => {
                            closing = true;
                            break;
                        }
                        Ok(false) => {}
                    }
                    if n < read.len() {
                        break;
                    }
                }
            }
            None => {
                while let Some(n) = recv_some(fd, read, &mut lost) {
                    if take(route, session, pending, &read[..n], reply, fanout, &ctx) {
                        closing = true;
                        break;
                    }
                    // A short read took all there was; a new arrival brings
                    // a new edge. A full one may have left more.
                    if n < read.len() {
                        break;
                    }
                }
            }
            Some(tls) => 'records: loop {
                match tls.read_tls(&mut Sock(fd)) {
                    Ok(0) => {
                        lost = true;
                        break;
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        lost = true;
                        break;
                    }
                }
                if tls.process_new_packets().is_err() {
                    // The alert rustls queued goes out; then the close.
                    flush_tls(fd, tls);
                    lost = true;
                    break;
                }
                loop {
                    match tls.reader().read(plain) {
                        // The client's close_notify.
                        Ok(0) => {
                            lost = true;
                            break 'records;
                        }
                        Ok(n) => {
                            if take(route, session, pending, &plain[..n], reply, fanout, &ctx) {
                                closing = true;
                                break 'records;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(_) => {
                            lost = true;
                            break 'records;
                        }
                    }
                }
            },
        }
        if !lost {
            // The replies, or (TLS) the handshake's next flight.
            lost = !send_to(fd, conn, reply, sealed);
        }
        reply.clear();
        if *own_records
            && !lost
            && !closing
            && conn.tls.as_ref().is_some_and(|t| {
                !t.is_handshaking()
                    && !t.wants_write()
                    && t.negotiated_cipher_suite().map(|s| s.suite())
                        == Some(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256)
            })
        {
            // The handshake is over and all rustls had to send is sent:
            // from here the records are framed here.
            match conn.tls.take().map(|t| t.dangerous_extract_secrets()) {
                Some(Ok(secrets)) => match Records::new(secrets) {
                    Some(records) => conn.records = Some(Box::new(records)),
                    None => lost = true,
                },
                _ => lost = true,
            }
        }
        let list = match conn.route {
            Some(Route::Broadcast) => Some(BROADCAST_LIST),
            Some(Route::Events { list }) => Some(list),
            _ => None,
        };
        if let Some(list) = list
            && conn.sub == usize::MAX
            && !lost
            && !closing
        {
            conn.list = list;
            conn.sub = lists[list].len();
            lists[list].push(fd);
        }
        if closing && !lost && has_queued(conn) {
            // The close goes after what is queued; `writable` closes.
            conn.closing = true;
            closing = false;
        }
        if !fanout.is_empty() {
            self.broadcast();
        }
        if lost || closing {
            self.close(fd);
        }
    }

    /// Writes the fan-out frames to every subscriber: the frame bytes are
    /// built once, then one `send` per subscriber.
    fn broadcast(&mut self) {
        let Server {
            conns,
            lists,
            fanout,
            dead,
            sealed,
            ..
        } = self;
        for &fd in &lists[BROADCAST_LIST] {
            if let Some(conn) = conns[fd as usize].as_mut().filter(|c| !c.closing)
                && !send_to(fd, conn, fanout, sealed)
            {
                dead.push(fd);
            }
        }
        fanout.clear();
        while let Some(fd) = self.dead.pop() {
            self.close(fd);
        }
    }

    /// Reads the inotify events and publishes every feed whose file
    /// changed: renamed over, or written and closed.
    fn changed(&mut self) {
        let mut changed = vec![false; self.feeds.len()];
        // inotify_event is 4-byte aligned; the buffer is too.
        let mut buf = [0u32; 1024];
        loop {
            // SAFETY: `buf` is valid for its length in bytes.
            let n = unsafe { libc::read(self.inotify, buf.as_mut_ptr().cast(), size_of_val(&buf)) };
            if n <= 0 {
                if n < 0 && errno() == libc::EINTR {
                    continue;
                }
                break;
            }
            // SAFETY: the kernel wrote `n` bytes of whole events.
            let bytes =
                unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) };
            let mut at = 0;
            let head = size_of::<libc::inotify_event>();
            while at + head <= bytes.len() {
                let field = |i: usize| {
                    u32::from_ne_bytes(
                        bytes[at + 4 * i..at + 4 * i + 4]
                            .try_into()
                            .unwrap_or([0; 4]),
                    )
                };
                let (wd, len) = (field(0) as i32, field(3) as usize);
                let name = &bytes[at + head..(at + head + len).min(bytes.len())];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                for (k, feed) in self.feeds.iter().enumerate() {
                    changed[k] |= feed.watch == wd && feed.file_name == name;
                }
                at += head + len;
            }
        }
        for (k, _) in changed.iter().enumerate().filter(|(_, c)| **c) {
            match self.feeds[k].reload() {
                Ok(()) => self.publish(k),
                Err(e) => eprintln!(
                    "peer-ws-floor: cannot read feed {}: {e}",
                    self.feeds[k].name
                ),
            }
        }
    }

    /// Sends feed `k`'s current event to its subscribers: the same bytes to
    /// every plain one, the same segment to every gzip one.
    fn publish(&mut self, k: usize) {
        let Server {
            conns,
            lists,
            feeds,
            dead,
            sealed,
            ..
        } = self;
        let feed = &feeds[k];
        for (list, bytes) in [
            (Feed::list(k, false), &feed.plain),
            (Feed::list(k, true), &feed.gzip),
        ] {
            for &fd in &lists[list] {
                if let Some(conn) = conns[fd as usize].as_mut().filter(|c| !c.closing)
                    && !send_to(fd, conn, bytes, sealed)
                {
                    dead.push(fd);
                }
            }
        }
        while let Some(fd) = self.dead.pop() {
            self.close(fd);
        }
    }

    /// Sends what a connection has queued.
    fn writable(&mut self, fd: i32) {
        let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::as_mut) else {
            return;
        };
        let ok = match &mut conn.tls {
            Some(tls) => flush_tls(fd, tls),
            None if conn.queued.is_empty() => return,
            None => {
                let queued = std::mem::take(&mut conn.queued);
                send_or_queue(fd, conn, &queued)
            }
        };
        if !ok || (conn.closing && !has_queued(conn)) {
            self.close(fd);
        }
    }

    fn close(&mut self, fd: i32) {
        let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::take) else {
            return;
        };
        if conn.sub != usize::MAX {
            let subs = &mut self.lists[conn.list];
            subs.swap_remove(conn.sub);
            if let Some(&moved) = subs.get(conn.sub)
                && let Some(other) = self.conns[moved as usize].as_mut()
            {
                other.sub = conn.sub;
            }
        }
        self.open -= 1;
        // SAFETY: closing a descriptor the server owns (it leaves the epoll set).
        unsafe { libc::close(fd) };
    }
}

/// What parsing a request may answer from.
struct Ctx<'a> {
    doc: Option<&'a Doc>,
    feeds: &'a [Feed],
    /// `--h2`: a client's preface starts HTTP/2.
    h2: bool,
}

/// Parses `bytes`, the next a connection received, after what it kept
/// unparsed; true when the connection is to close after the replies.
fn take(
    route: &mut Option<Route>,
    session: &mut Option<Box<h2::Session>>,
    pending: &mut Vec<u8>,
    bytes: &[u8],
    reply: &mut Vec<u8>,
    fanout: &mut Vec<u8>,
    ctx: &Ctx,
) -> bool {
    let parsed = if pending.is_empty() {
        let parsed = parse(route, session, bytes, reply, fanout, ctx);
        if let Parsed::More(at) = parsed {
            pending.extend_from_slice(&bytes[at..]);
        }
        parsed
    } else {
        pending.extend_from_slice(bytes);
        let parsed = parse(route, session, pending, reply, fanout, ctx);
        if let Parsed::More(at) = parsed {
            pending.drain(..at);
        }
        parsed
    };
    matches!(parsed, Parsed::Close)
}

/// Whether a connection still has bytes the socket did not take.
fn has_queued(conn: &Conn) -> bool {
    match &conn.tls {
        Some(tls) => tls.wants_write(),
        None => !conn.queued.is_empty(),
    }
}

/// Sends `bytes` on a connection: plain, or sealed by its TLS session and
/// sent with what the session has pending (one `sendmsg`), or sealed here
/// into `sealed` (`--own-records`) and sent; false when the connection is
/// lost or would hold more than [`MAX_QUEUED_BYTES`].
fn send_to(fd: i32, conn: &mut Conn, bytes: &[u8], sealed: &mut Vec<u8>) -> bool {
    if let Some(records) = &mut conn.records {
        if bytes.is_empty() {
            return true;
        }
        records.seal_all(bytes, sealed);
        return send_or_queue(fd, conn, sealed);
    }
    let Some(tls) = &mut conn.tls else {
        return send_or_queue(fd, conn, bytes);
    };
    // Before the handshake ends rustls keeps the plaintext; after, it
    // seals it now. Either way its buffer limit is MAX_QUEUED_BYTES.
    if !bytes.is_empty() && !matches!(tls.writer().write(bytes), Ok(n) if n == bytes.len()) {
        return false;
    }
    flush_tls(fd, tls)
}

impl Records {
    /// The record protection of a session's extracted secrets, if its
    /// suite is AES-128-GCM.
    fn new(secrets: rustls::ExtractedSecrets) -> Option<Records> {
        use rustls::ConnectionTrafficSecrets as S;
        let key = |s: &S| match s {
            S::Aes128Gcm { key, iv } => {
                let key =
                    ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, key.as_ref()).ok()?;
                Some((
                    ring::aead::LessSafeKey::new(key),
                    iv.as_ref().try_into().ok()?,
                ))
            }
            _ => None,
        };
        let (open_seq, rx) = secrets.rx;
        let (seal_seq, tx) = secrets.tx;
        let (open, open_iv) = key(&rx)?;
        let (seal, seal_iv) = key(&tx)?;
        Some(Records {
            open,
            open_iv,
            open_seq,
            seal,
            seal_iv,
            seal_seq,
            partial: Vec::new(),
        })
    }

    /// The per-record nonce: the IV XOR the sequence number (RFC 8446
    /// section 5.3).
    fn nonce(iv: &[u8; 12], seq: u64) -> ring::aead::Nonce {
        let mut n = *iv;
        for (b, s) in n[4..].iter_mut().zip(seq.to_be_bytes()) {
            *b ^= s;
        }
        ring::aead::Nonce::assume_unique_for_key(n)
    }

    /// Opens every whole record of what came (after what was kept), in
    /// place, and hands each one's application data to `each`; keeps a
    /// partial record. Ok(true) when `each` asks to close; Err on a bad
    /// record, an alert or a post-handshake message (a floor refuses key
    /// updates).
    fn open_all(
        &mut self,
        data: &mut [u8],
        mut each: impl FnMut(&[u8]) -> bool,
    ) -> Result<bool, ()> {
        let mut kept = std::mem::take(&mut self.partial);
        let buf: &mut [u8] = if kept.is_empty() {
            data
        } else {
            kept.extend_from_slice(data);
            &mut kept
        };
        let mut at = 0;
        let mut closing = false;
        while buf.len() - at >= 5 {
            let header: [u8; 5] = buf[at..at + 5].try_into().map_err(drop)?;
            let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
            if header[0] != 0x17 || len > 16 * 1024 + 256 {
                return Err(());
            }
            if buf.len() - at < 5 + len {
                break;
            }
            let nonce = Records::nonce(&self.open_iv, self.open_seq);
            self.open_seq += 1;
            let plain = self
                .open
                .open_in_place(
                    nonce,
                    ring::aead::Aad::from(header),
                    &mut buf[at + 5..at + 5 + len],
                )
                .map_err(drop)?;
            // The content type is the last non-zero byte (padding after it).
            let end = plain.iter().rposition(|&b| b != 0).ok_or(())?;
            if plain[end] != 0x17 {
                return Err(());
            }
            at += 5 + len;
            if !closing && end > 0 {
                closing = each(&plain[..end]);
            }
        }
        let rest = buf[at..].to_vec();
        self.partial = rest;
        Ok(closing)
    }

    /// Seals `plain` as application-data records of at most 16 KiB into
    /// `out` (cleared first).
    fn seal_all(&mut self, plain: &[u8], out: &mut Vec<u8>) {
        out.clear();
        for part in plain.chunks(16 * 1024) {
            let len = part.len() + 1 + 16;
            let header = [0x17, 0x03, 0x03, (len >> 8) as u8, len as u8];
            out.extend_from_slice(&header);
            let start = out.len();
            out.extend_from_slice(part);
            out.push(0x17);
            let nonce = Records::nonce(&self.seal_iv, self.seal_seq);
            self.seal_seq += 1;
            match self.seal.seal_in_place_separate_tag(
                nonce,
                ring::aead::Aad::from(header),
                &mut out[start..],
            ) {
                Ok(tag) => out.extend_from_slice(tag.as_ref()),
                Err(_) => unreachable!("AES-GCM seals any record of at most 16 KiB"),
            }
        }
    }
}

/// Writes a TLS session's pending records until the socket is full;
/// false when the connection is lost.
fn flush_tls(fd: i32, tls: &mut rustls::ServerConnection) -> bool {
    while tls.wants_write() {
        match tls.write_tls(&mut Sock(fd)) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// A non-blocking socket as rustls reads and writes it: `recv`, and
/// `sendmsg` of all the slices it is given at once.
struct Sock(i32);

impl io::Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for its length.
        let n = unsafe { libc::recv(self.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

impl io::Write for Sock {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        // SAFETY: an IoSlice has the layout of an iovec (std guarantees it
        // on Unix); `msg` refers to `bufs` only for the call.
        let n = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = bufs.as_ptr().cast_mut().cast();
            msg.msg_iovlen = bufs.len();
            libc::sendmsg(self.0, &msg, libc::MSG_NOSIGNAL)
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The `--tls` configuration: TLS 1.3 only, handshakes on aws-lc-rs and
/// records on ring, AES-128-GCM preferred and the server's order winning
/// (as celer: decisions 030, 031), HTTP/1.1 by ALPN (with `--h2`, HTTP/2 first), no session tickets or cache (the loads run
/// celer with `--no-tls-resumption`).
fn tls_config(
    cert: &str,
    key: &str,
    h2: bool,
) -> Result<Arc<rustls::ServerConfig>, Box<dyn std::error::Error>> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    // Key exchange and signatures on aws-lc-rs; the suites (key schedule
    // and record AEAD) on ring, whose AES-GCM celer's record layer calls.
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.cipher_suites = vec![
        rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256,
        rustls::crypto::ring::cipher_suite::TLS13_AES_256_GCM_SHA384,
        rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.ignore_client_order = true;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    if h2 {
        config.alpn_protocols.insert(0, b"h2".to_vec());
    }
    config.send_tls13_tickets = 0;
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    // `--own-records` takes the keys once the handshake is over.
    config.enable_secret_extraction = true;
    Ok(Arc::new(config))
}

/// Watches the directory of `path` for files renamed into it or written
/// and closed; the watch descriptor (one per directory: equal for feeds
/// in one directory).
fn watch(inotify: i32, path: &std::path::Path) -> io::Result<i32> {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let dir = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `dir` is a NUL-terminated path.
    check(unsafe {
        libc::inotify_add_watch(
            inotify,
            dir.as_ptr(),
            libc::IN_CLOSE_WRITE | libc::IN_MOVED_TO,
        )
    })
}

/// Sends `bytes` now, or queues them behind what is queued already or what
/// the socket did not take; false when the connection is lost or queued
/// more than [`MAX_QUEUED_BYTES`].
fn send_or_queue(fd: i32, conn: &mut Conn, bytes: &[u8]) -> bool {
    let mut sent = 0;
    if conn.queued.is_empty() {
        while sent < bytes.len() {
            // SAFETY: the slice is valid for its length.
            let n = unsafe {
                libc::send(
                    fd,
                    bytes[sent..].as_ptr().cast(),
                    bytes.len() - sent,
                    libc::MSG_NOSIGNAL,
                )
            };
            if n >= 0 {
                sent += n as usize;
                continue;
            }
            match errno() {
                libc::EINTR => {}
                libc::EAGAIN => break,
                _ => return false,
            }
        }
    }
    let rest = &bytes[sent..];
    if rest.is_empty() {
        return true;
    }
    if conn.queued.len() + rest.len() > MAX_QUEUED_BYTES {
        return false;
    }
    conn.queued.extend_from_slice(rest);
    true
}

/// Parses the upgrade request (until `route` is set) and then frames,
/// appending echoes and control replies to `reply` and broadcast frames to
/// `fanout`; or, on a document connection, answers every complete request;
/// or answers a subscription with the stream's head and first event.
fn parse(
    route: &mut Option<Route>,
    session: &mut Option<Box<h2::Session>>,
    data: &[u8],
    reply: &mut Vec<u8>,
    fanout: &mut Vec<u8>,
    ctx: &Ctx,
) -> Parsed {
    let mut at = 0;
    if let Some(Route::Events { .. }) = route {
        // A subscriber sends nothing more that the floor reads.
        return Parsed::More(data.len());
    }
    if route.is_none() && ctx.h2 {
        if data.len() < h2::PREFACE.len() && h2::PREFACE.starts_with(data) {
            return Parsed::More(0);
        }
        if data.starts_with(h2::PREFACE) {
            *session = Some(Box::new(h2::Session::start(reply)));
            *route = Some(Route::Http2);
            at = h2::PREFACE.len();
        }
    }
    if let (Some(Route::Http2), Some(session)) = (*route, session) {
        return match session.frames(&data[at..], reply, ctx.doc.map(|d| &d.h2)) {
            Ok(n) => Parsed::More(at + n),
            Err(()) => Parsed::Close,
        };
    }
    while route.is_none() || *route == Some(Route::Document) {
        let d = &data[at..];
        let Some(end) = d.windows(4).position(|w| w == b"\r\n\r\n") else {
            if d.len() > MAX_HEAD_BYTES {
                reply.extend_from_slice(TOO_LARGE);
                return Parsed::Close;
            }
            return Parsed::More(at);
        };
        if end > MAX_HEAD_BYTES {
            reply.extend_from_slice(TOO_LARGE);
            return Parsed::Close;
        }
        let head = &d[..end];
        at += end + 4;
        if route.is_none() && !ctx.feeds.is_empty() && is_events(head) {
            match subscribe(head, ctx.feeds, reply) {
                Some(list) => {
                    *route = Some(Route::Events { list });
                    return Parsed::More(data.len());
                }
                None => return Parsed::Close,
            }
        }
        if let Some(doc) = ctx.doc.filter(|_| route.is_some() || is_document(head)) {
            if !doc.answer(head, reply) {
                return Parsed::Close;
            }
            *route = Some(Route::Document);
            continue;
        }
        match upgrade(head, reply) {
            Some(r) => *route = Some(r),
            None => return Parsed::Close,
        }
    }
    let echo = *route == Some(Route::Echo);
    loop {
        let d = &data[at..];
        let [b0, b1, ..] = *d else {
            return Parsed::More(at);
        };
        // RFC 6455 section 5.2: FIN, RSV1-3, opcode; MASK, payload length.
        let fin = b0 & 0x80 != 0;
        let opcode = b0 & 0x0F;
        if b0 & 0x70 != 0 {
            // Section 5.2: no extension was agreed.
            return fail(reply, status::PROTOCOL_ERROR, "reserved bits set");
        }
        if b1 & 0x80 == 0 {
            // Section 5.1: a client's frames are masked.
            return fail(reply, status::PROTOCOL_ERROR, "unmasked client frame");
        }
        let (head, len) = match b1 & 0x7F {
            126 => match d.get(2..4) {
                Some(b) => (8, u64::from(u16::from_be_bytes([b[0], b[1]]))),
                None => return Parsed::More(at),
            },
            127 => match d.get(2..10) {
                Some(b) => (14, u64::from_be_bytes(b.try_into().unwrap_or([0xFF; 8]))),
                None => return Parsed::More(at),
            },
            n => (6, u64::from(n)),
        };
        match opcode {
            op::TEXT | op::BINARY if !fin => {
                return fail(
                    reply,
                    status::UNSUPPORTED,
                    "fragmented messages are not supported",
                );
            }
            op::TEXT | op::BINARY if len > MAX_MESSAGE_BYTES => {
                // Section 7.4.1: 1009, a message too big to process.
                return fail(reply, status::TOO_BIG, "message too big");
            }
            op::TEXT | op::BINARY => {}
            // Section 5.4: a continuation with no message started.
            op::CONTINUATION => {
                return fail(reply, status::PROTOCOL_ERROR, "unexpected continuation");
            }
            // Section 5.5: control frames are not fragmented, at most 125 bytes.
            op::CLOSE | op::PING | op::PONG if !fin || len > 125 => {
                return fail(reply, status::PROTOCOL_ERROR, "bad control frame");
            }
            op::CLOSE | op::PING | op::PONG => {}
            _ => return fail(reply, status::PROTOCOL_ERROR, "unknown opcode"),
        }
        let len = len as usize;
        if d.len() < head + len {
            return Parsed::More(at);
        }
        let mask = [d[head - 4], d[head - 3], d[head - 2], d[head - 1]];
        let payload = &d[head..head + len];
        match opcode {
            op::TEXT | op::BINARY => {
                let out = if echo { &mut *reply } else { &mut *fanout };
                frame_head(out, opcode, len);
                unmask_into(out, payload, mask);
            }
            op::PING => {
                // Section 5.5.3: the pong carries the ping's payload.
                frame_head(reply, op::PONG, len);
                unmask_into(reply, payload, mask);
            }
            op::PONG => {}
            _ => {
                // Section 5.5.1: answer a close with a close (echoing its
                // code), then close the connection.
                let mut code = [0u8; 2];
                match len {
                    0 => frame_head(reply, op::CLOSE, 0),
                    1 => return fail(reply, status::PROTOCOL_ERROR, "one-byte close payload"),
                    _ => {
                        code[0] = payload[0] ^ mask[0];
                        code[1] = payload[1] ^ mask[1];
                        let n = u16::from_be_bytes(code);
                        // Section 7.4.1/7.4.2: codes an endpoint may send.
                        if !matches!(n, 1000..=1003 | 1007..=1011 | 3000..=4999) {
                            return fail(reply, status::PROTOCOL_ERROR, "invalid close code");
                        }
                        frame_head(reply, op::CLOSE, 2);
                        reply.extend_from_slice(&code);
                    }
                }
                return Parsed::Close;
            }
        }
        at += head + len;
    }
}

/// Whether a first request head asks for `/doc.json` (any method: the
/// document's answers refuse all but GET and HEAD).
fn is_document(head: &[u8]) -> bool {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    parts.next();
    parts
        .next()
        .is_some_and(|target| target.split(|&b| b == b'?').next() == Some(b"/doc.json"))
}

/// Whether a first request head asks for an event stream,
/// `/feeds/NAME/events`.
fn is_events(head: &[u8]) -> bool {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    parts.next();
    parts.next().is_some_and(|target| {
        let path = target.split(|&b| b == b'?').next().unwrap_or_default();
        path.starts_with(b"/feeds/") && path.ends_with(b"/events")
    })
}

/// Answers a subscription request head (without its blank line) with the
/// stream's head and the feed's current event, and returns the fan-out
/// list to join; or appends an error status (then `None`: the connection
/// closes).
fn subscribe(head: &[u8], feeds: &[Feed], reply: &mut Vec<u8>) -> Option<usize> {
    let mut lines = head_lines(head);
    let line = lines.next().unwrap_or_default();
    let Some(target) = line
        .strip_prefix(b"GET ")
        .and_then(|rest| rest.strip_suffix(b" HTTP/1.1"))
    else {
        refuse(reply, "400 Bad Request", "");
        return None;
    };
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let name = path
        .strip_prefix(b"/feeds/")
        .and_then(|p| p.strip_suffix(b"/events"))
        .unwrap_or_default();
    let Some(k) = feeds.iter().position(|f| f.name.as_bytes() == name) else {
        refuse(reply, "404 Not Found", "");
        return None;
    };
    let mut gzip = false;
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            refuse(reply, "400 Bad Request", "");
            return None;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"accept-encoding") {
            gzip |= offers_gzip(value);
        } else if name.eq_ignore_ascii_case(b"content-length") && value != b"0"
            || name.eq_ignore_ascii_case(b"transfer-encoding")
        {
            refuse(reply, "400 Bad Request", "");
            return None;
        }
    }
    let feed = &feeds[k];
    reply.extend_from_slice(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n",
    );
    if gzip {
        reply.extend_from_slice(b"Content-Encoding: gzip\r\nVary: accept-encoding\r\n");
    }
    reply.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
    reply.extend_from_slice(if gzip { &feed.gzip_first } else { &feed.plain });
    Some(Feed::list(k, gzip))
}

/// Whether an Accept-Encoding value offers gzip (RFC 9110 section 12.5.3:
/// `gzip`, unless given q=0).
fn offers_gzip(value: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .any(|t| {
            let mut p = t.split(|&b| b == b';').map(<[u8]>::trim_ascii);
            p.next().is_some_and(|c| c.eq_ignore_ascii_case(b"gzip"))
                && !p.any(|q| q == b"q=0" || q == b"q=0.0" || q == b"q=0.00" || q == b"q=0.000")
        })
}

impl Feed {
    /// Feed `name` of `file`, with its current event.
    fn load(name: &str, file: &str) -> io::Result<Feed> {
        use std::os::unix::ffi::OsStrExt as _;
        let path = std::path::PathBuf::from(file);
        let file_name = path
            .file_name()
            .map(|n| n.as_bytes().to_vec())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
        let mut feed = Feed {
            name: name.to_string(),
            path,
            file_name,
            watch: -1,
            version: 0,
            plain: Vec::new(),
            gzip: Vec::new(),
            gzip_first: Vec::new(),
        };
        feed.reload()?;
        Ok(feed)
    }

    /// The fan-out list of feed `k`'s plain or gzip subscribers.
    fn list(k: usize, gzip: bool) -> usize {
        1 + 2 * k + usize::from(gzip)
    }

    /// Reads the file and makes its event, once: `id: N` (in 32 digits)
    /// and the document
    /// on one `data:` line (its CR and LF as spaces: in JSON they are only
    /// whitespace between tokens), framed as one chunk; and deflated by a
    /// fresh compressor, sync-flushed, as another.
    fn reload(&mut self) -> io::Result<()> {
        let body = std::fs::read(&self.path)?;
        self.version += 1;
        let mut event = Vec::with_capacity(body.len() + 32);
        // The id as long as celer's (32 hexadecimal digits, its content
        // hash), so that the stream's bytes are the same length.
        event.extend_from_slice(format!("id: {:032x}\ndata: ", self.version).as_bytes());
        event.extend(
            body.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        event.extend_from_slice(b"\n\n");
        let segment = deflate(&event);
        self.plain = chunk(&[&event]);
        self.gzip = chunk(&[&segment]);
        self.gzip_first = chunk(&[GZIP_HEADER, &segment]);
        Ok(())
    }
}

/// `parts` as one HTTP/1.1 chunk (RFC 9112 section 7.1).
fn chunk(parts: &[&[u8]]) -> Vec<u8> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let mut out = format!("{len:x}\r\n").into_bytes();
    for p in parts {
        out.extend_from_slice(p);
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// `plain` as raw deflate (RFC 1951) from a fresh compressor at
/// [`GZIP_LEVEL`], ended by a sync flush: byte-aligned, not final, and
/// referring to nothing before it.
fn deflate(plain: &[u8]) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut z = Compress::new(Compression::new(GZIP_LEVEL), false);
    let mut out = Vec::with_capacity(plain.len() + plain.len() / 8 + 64);
    loop {
        let done = z.total_in() as usize;
        if z.compress_vec(&plain[done..], &mut out, FlushCompress::Sync)
            .is_err()
        {
            unreachable!("deflate of a byte slice does not fail");
        }
        if z.total_in() as usize == plain.len() && out.len() < out.capacity() {
            return out;
        }
        out.reserve(out.capacity());
    }
}

impl Doc {
    /// Reads `file` and, if it exists, `file.gz`, and makes the answers.
    fn load(file: &str) -> io::Result<Doc> {
        let body = std::fs::read(file)?;
        let gz = match std::fs::read(format!("{file}.gz")) {
            Ok(gz) => Some(gz),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        // A strong ETag from the content (FNV-1a, 64 bits): equal files
        // get equal tags; the gzip copy's differs (RFC 9110 section 8.8.3).
        let hash = body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let etag = format!("\"{hash:016x}\"");
        let gz_etag = format!("\"{hash:016x}-gz\"");
        let head = |status: &str, etag: &str, extra: &str| {
            format!(
                "HTTP/1.1 {status}\r\nETag: {etag}\r\nCache-Control: max-age=1\r\nVary: Accept-Encoding\r\n{extra}"
            )
            .into_bytes()
        };
        let with_body = |etag: &str, coding: &str, bytes: &[u8]| {
            let mut out = head(
                "200 OK",
                etag,
                &format!(
                    "Content-Type: application/json\r\n{coding}Content-Length: {}\r\n\r\n",
                    bytes.len()
                ),
            );
            out.extend_from_slice(bytes);
            out
        };
        Ok(Doc {
            not_modified: head("304 Not Modified", &etag, "\r\n"),
            gz_not_modified: head("304 Not Modified", &gz_etag, "\r\n"),
            full: with_body(&etag, "", &body),
            gzip: gz
                .as_deref()
                .map(|gz| with_body(&gz_etag, "Content-Encoding: gzip\r\n", gz)),
            h2: h2::Answers::new(&etag, &gz_etag, body, gz),
            etag,
            gz_etag,
        })
    }

    /// Appends the answer to one request head (without its blank line);
    /// false when the connection is to close after it.
    fn answer(&self, head: &[u8], reply: &mut Vec<u8>) -> bool {
        let refuse = |reply: &mut Vec<u8>, status: &str| {
            refuse(reply, status, "");
            false
        };
        let mut lines = head_lines(head);
        let line = lines.next().unwrap_or_default();
        let mut parts = line.split(|&b| b == b' ');
        let (method, target, version) = (parts.next(), parts.next(), parts.next());
        if version != Some(b"HTTP/1.1".as_slice()) || parts.next().is_some() {
            return refuse(reply, "400 Bad Request");
        }
        let target = target.unwrap_or_default();
        if target.split(|&b| b == b'?').next() != Some(b"/doc.json".as_slice()) {
            return refuse(reply, "404 Not Found");
        }
        let head_only = match method {
            Some(b"GET") => false,
            Some(b"HEAD") => true,
            _ => return refuse(reply, "405 Method Not Allowed"),
        };
        let (mut inm, mut gzip, mut keep) = (None, false, true);
        for line in lines {
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                return refuse(reply, "400 Bad Request");
            };
            let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
            let tokens = || value.split(|&b| b == b',').map(<[u8]>::trim_ascii);
            if name.eq_ignore_ascii_case(b"if-none-match") {
                inm = Some(value);
            } else if name.eq_ignore_ascii_case(b"accept-encoding") {
                gzip |= offers_gzip(value);
            } else if name.eq_ignore_ascii_case(b"connection") {
                keep &= !tokens().any(|t| t.eq_ignore_ascii_case(b"close"));
            } else if name.eq_ignore_ascii_case(b"content-length") && value != b"0"
                || name.eq_ignore_ascii_case(b"transfer-encoding")
            {
                // A floor reads no request bodies.
                return refuse(reply, "400 Bad Request");
            }
        }
        // RFC 9110 section 13.1.2: weak comparison, `*` matches.
        let names = |etag: &str| {
            inm.is_some_and(|v| {
                v.split(|&b| b == b',')
                    .map(<[u8]>::trim_ascii)
                    .any(|t| t == b"*" || t.strip_prefix(b"W/").unwrap_or(t) == etag.as_bytes())
            })
        };
        let answer: &[u8] = if names(&self.etag) {
            &self.not_modified
        } else if names(&self.gz_etag) {
            &self.gz_not_modified
        } else {
            match (&self.gzip, gzip) {
                (Some(gz), true) => gz,
                _ => &self.full,
            }
        };
        if head_only {
            let end = answer
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map_or(answer.len(), |e| e + 4);
            reply.extend_from_slice(&answer[..end]);
        } else {
            reply.extend_from_slice(answer);
        }
        keep
    }
}

/// A request head's lines, without their CR.
fn head_lines(head: &[u8]) -> impl Iterator<Item = &[u8]> {
    head.split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
}

/// Appends an empty answer with `status` (and the `extra` fields) that
/// closes the connection.
fn refuse(reply: &mut Vec<u8>, status: &str, extra: &str) {
    reply.extend_from_slice(
        format!("HTTP/1.1 {status}\r\n{extra}Connection: close\r\nContent-Length: 0\r\n\r\n")
            .as_bytes(),
    );
}

/// Answers the upgrade request head (without its blank line) with 101, or
/// with an error status (then `None`: the connection closes).
fn upgrade(head: &[u8], reply: &mut Vec<u8>) -> Option<Route> {
    let refuse = |reply: &mut Vec<u8>, status: &str, extra: &str| {
        refuse(reply, status, extra);
        None
    };
    let mut lines = head_lines(head);
    let line = lines.next().unwrap_or_default();
    // RFC 6455 section 4.2.1 items 1-2: a GET of HTTP/1.1 or later.
    let Some(target) = line
        .strip_prefix(b"GET ")
        .and_then(|rest| rest.strip_suffix(b" HTTP/1.1"))
    else {
        return refuse(reply, "400 Bad Request", "");
    };
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let route = match path {
        b"/" | b"/echo" => Route::Echo,
        b"/broadcast" => Route::Broadcast,
        _ => return refuse(reply, "404 Not Found", ""),
    };
    let (mut key, mut version, mut upgrade, mut connection) = (None, None, false, false);
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return refuse(reply, "400 Bad Request", "");
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        let has = |token: &[u8]| {
            value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
        };
        if name.eq_ignore_ascii_case(b"sec-websocket-key") {
            key = Some(value);
        } else if name.eq_ignore_ascii_case(b"sec-websocket-version") {
            version = Some(value);
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade |= has(b"websocket");
        } else if name.eq_ignore_ascii_case(b"connection") {
            connection |= has(b"upgrade");
        }
    }
    // Section 4.2.1 items 3-6.
    if !upgrade || !connection {
        return refuse(reply, "426 Upgrade Required", "Upgrade: websocket\r\n");
    }
    if version != Some(b"13".as_slice()) {
        return refuse(
            reply,
            "426 Upgrade Required",
            "Sec-WebSocket-Version: 13\r\n",
        );
    }
    let Some(key) = key.filter(|k| {
        base64::engine::general_purpose::STANDARD
            .decode(k)
            .is_ok_and(|nonce| nonce.len() == 16)
    }) else {
        return refuse(reply, "400 Bad Request", "");
    };
    // Section 4.2.2 item 5.4: base64 of the SHA-1 of the key and the GUID.
    let mut sha = sha1_smol::Sha1::new();
    sha.update(key);
    sha.update(GUID);
    let accept = base64::engine::general_purpose::STANDARD.encode(sha.digest().bytes());
    reply.extend_from_slice(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ");
    reply.extend_from_slice(accept.as_bytes());
    reply.extend_from_slice(b"\r\n\r\n");
    Some(route)
}

/// Fails the connection (RFC 6455 section 7.1.7): a close frame with
/// `code` and `reason`, then the close.
fn fail(reply: &mut Vec<u8>, code: u16, reason: &str) -> Parsed {
    frame_head(reply, op::CLOSE, 2 + reason.len());
    reply.extend_from_slice(&code.to_be_bytes());
    reply.extend_from_slice(reason.as_bytes());
    Parsed::Close
}

/// An unmasked frame head with FIN set (RFC 6455 section 5.2).
fn frame_head(out: &mut Vec<u8>, opcode: u8, len: usize) {
    out.push(0x80 | opcode);
    match len {
        0..=125 => out.push(len as u8),
        126..=0xFFFF => {
            out.push(126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
}

/// Appends `payload` unmasked with `mask` (RFC 6455 section 5.3), eight
/// bytes at a time.
fn unmask_into(out: &mut Vec<u8>, payload: &[u8], mask: [u8; 4]) {
    let wide = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    let start = out.len();
    out.extend_from_slice(payload);
    let data = &mut out[start..];
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let word = u64::from_ne_bytes((&*chunk).try_into().unwrap_or([0; 8])) ^ wide;
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= mask[i % 4];
    }
}

//! WebSocket modes over ws:// and wss://: echo round trips, idle sockets,
//! and broadcast fan-out.
//!
//! The client side of RFC 6455 lives here and nowhere else: `frame` (masked
//! frames out, unmasked frames in, no IO), `handshake` (the upgrade request
//! and the checks of the 101), `deflate` (RFC 7692) and `socket` (one
//! connection driven by one task). It shares no code with the server's
//! WebSocket codec, for the reason docs/decisions/035 gives for HTTP: a
//! framing bug shared by both would hide itself. The modes are `echo`
//! (driven by the load threads of `worker`, like HTTP load), `idle` and
//! `fanout`.

pub(crate) mod deflate;
pub(crate) mod echo;
pub(crate) mod fanout;
pub(crate) mod frame;
pub(crate) mod handshake;
pub(crate) mod idle;
pub(crate) mod socket;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::encode::RequestParts;
use crate::target::{self, Origin, Target};
use crate::tls::{self, Tls};
use crate::{BenchArgs, Error};

use self::handshake::Offer;

/// Largest message sent or accepted, in bytes (16 MiB): a larger
/// `--message-size` is refused, and a larger message from the server (after
/// inflating) fails its connection with the error `too_big`.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// Read buffer of an idle socket or a fan-out receiver (4 KiB), so that
/// 10,000 of them cost the load generator 40 MiB; messages of any size still
/// pass, assembled beside it.
pub(crate) const SMALL_BUFFER: usize = 4 * 1024;

/// Most fan-out rounds (10,000).
pub(crate) const MAX_ROUNDS: u32 = 10_000;

/// Largest `--message-file` (64 MiB): its messages are held in memory.
pub(crate) const MAX_MESSAGE_FILE_BYTES: u64 = 64 << 20;

/// Where to connect, and how.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// Resolved address.
    pub(crate) addr: SocketAddr,
    /// TLS client for wss:// and https://.
    pub(crate) tls: Option<Tls>,
    /// Limit on connecting, the TLS handshake and the upgrade.
    pub(crate) timeout: Duration,
}

/// The WebSocket part of a plan.
#[derive(Debug, Clone)]
pub(crate) struct WsPlan {
    /// The URL's server.
    pub(crate) endpoint: Endpoint,
    /// The upgrade request.
    pub(crate) offer: Offer,
    /// Bytes per message (the mean, with `--message-file`).
    pub(crate) message_size: usize,
    /// The messages of `--message-file`, sent in turn; else generated ones.
    pub(crate) messages: Option<Messages>,
    /// Binary messages (else text).
    pub(crate) binary: bool,
    /// Fan-out settings, with `--fanout`.
    pub(crate) fanout: Option<FanoutPlan>,
}

/// Broadcast fan-out settings.
#[derive(Debug, Clone)]
pub(crate) struct FanoutPlan {
    /// Receivers connected to the URL.
    pub(crate) receivers: usize,
    /// Messages sent, one per round.
    pub(crate) rounds: u32,
    /// How each message is sent.
    pub(crate) trigger: Trigger,
}

/// How a fan-out message is sent.
#[derive(Debug, Clone)]
pub(crate) enum Trigger {
    /// As a message on a WebSocket to this URL.
    Publish {
        /// The publisher's URL.
        url: String,
        /// Its server.
        endpoint: Endpoint,
        /// Its upgrade request.
        offer: Offer,
    },
    /// As the body of an HTTP POST.
    Post {
        /// The URL posted to.
        url: String,
        /// Its server.
        endpoint: Endpoint,
        /// Its origin (for the Host header).
        origin: Origin,
        /// Its path.
        target: Target,
        /// Method and headers; the body is filled in per round.
        parts: RequestParts,
        /// The body with `{message}` where the message goes.
        body: String,
    },
}

impl Trigger {
    /// `publish` or `post`, for reports.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Trigger::Publish { .. } => "publish",
            Trigger::Post { .. } => "post",
        }
    }

    /// The URL messages go to.
    pub(crate) fn url(&self) -> &str {
        match self {
            Trigger::Publish { url, .. } | Trigger::Post { url, .. } => url,
        }
    }
}

/// Validates the WebSocket arguments; `None` for an http:// or https:// URL.
pub(crate) fn plan(
    args: &BenchArgs,
    origin: &Origin,
    target: &Target,
    endpoint: &Endpoint,
    parts: &RequestParts,
) -> Result<Option<WsPlan>, Error> {
    if !origin.websocket {
        for (given, flag) in [
            (args.fanout.is_some(), "--fanout"),
            (args.publish.is_some(), "--publish"),
            (args.post.is_some(), "--post"),
            (args.binary, "--binary"),
            (args.deflate, "--deflate"),
            (args.subprotocol.is_some(), "--subprotocol"),
            (args.message_file.is_some(), "--message-file"),
        ] {
            if given {
                return Err(Error::usage(format!("{flag} needs a ws:// or wss:// URL")));
            }
        }
        return Ok(None);
    }
    check_ws_args(args)?;
    let offer = Offer {
        path: target.path.clone(),
        authority: origin.authority.clone(),
        headers: parts.headers.clone(),
        subprotocol: args.subprotocol.clone(),
        deflate: args.deflate,
    };
    let messages = match &args.message_file {
        Some(path) => Some(read_messages(path, args.binary)?),
        None => None,
    };
    let fanout = match args.fanout {
        None => None,
        Some(receivers) => Some(FanoutPlan {
            receivers,
            rounds: args.rounds,
            trigger: trigger(args, &offer, endpoint)?,
        }),
    };
    Ok(Some(WsPlan {
        endpoint: endpoint.clone(),
        offer,
        message_size: messages
            .as_ref()
            .map_or(args.message_size, Messages::mean_len),
        messages,
        binary: args.binary,
        fanout,
    }))
}

fn check_ws_args(args: &BenchArgs) -> Result<(), Error> {
    let unsupported = [
        (
            args.urls.is_some(),
            "--urls takes http:// URLs; give one ws:// URL",
        ),
        (
            args.rate.is_some(),
            "--rate is not supported with ws:// URLs (echo is closed loop)",
        ),
        (
            args.no_keepalive,
            "--no-keepalive does not apply to ws:// URLs",
        ),
        (
            !args.method.eq_ignore_ascii_case("GET"),
            "--method does not apply to ws:// URLs",
        ),
        (
            args.body.is_some() && args.post.is_none(),
            "--body needs --fanout with --post",
        ),
        (
            args.body_file.is_some(),
            "--body-file does not apply to ws:// URLs",
        ),
        (
            args.fanout.is_none() && (args.publish.is_some() || args.post.is_some()),
            "--publish and --post need --fanout",
        ),
    ];
    if let Some((_, message)) = unsupported.iter().find(|(bad, _)| *bad) {
        return Err(Error::usage(*message));
    }
    let paced = args.duration.is_some()
        || args.requests.is_some()
        || !args.warmup.is_zero()
        || args.pipeline > 1;
    if args.fanout.is_some() && paced {
        return Err(Error::usage(
            "--fanout sends --rounds messages; drop -d, -n, --warmup and --pipeline",
        ));
    }
    if args.message_size == 0 {
        return Err(Error::usage("--message-size must be at least 1 byte"));
    }
    if args.message_size > MAX_MESSAGE_BYTES {
        return Err(Error::usage(format!(
            "--message-size must be at most {MAX_MESSAGE_BYTES} bytes"
        )));
    }
    if args.fanout == Some(0) {
        return Err(Error::usage("--fanout must be at least 1"));
    }
    if args.fanout.is_some() && !(1..=MAX_ROUNDS).contains(&args.rounds) {
        return Err(Error::usage(format!(
            "--rounds must be between 1 and {MAX_ROUNDS}"
        )));
    }
    if args.fanout.is_some() && args.message_size < fanout::MIN_MESSAGE_SIZE {
        return Err(Error::usage(format!(
            "--message-size must be at least {} bytes with --fanout (the message carries its round)",
            fanout::MIN_MESSAGE_SIZE
        )));
    }
    if let Some(protocol) = &args.subprotocol {
        if protocol.is_empty() || !protocol.bytes().all(|b| b.is_ascii_graphic() && b != b',') {
            return Err(Error::usage(format!("invalid subprotocol '{protocol}'")));
        }
    }
    Ok(())
}

fn trigger(args: &BenchArgs, offer: &Offer, endpoint: &Endpoint) -> Result<Trigger, Error> {
    let resolve = |origin: &Origin| -> Result<Endpoint, Error> {
        Ok(Endpoint {
            addr: target::lookup(origin)?,
            tls: if origin.https {
                Some(tls::client(&origin.host, args.insecure)?)
            } else {
                None
            },
            timeout: args.timeout,
        })
    };
    if let Some(url) = &args.post {
        let (origin, target) = target::parse_url(url, 1)?;
        if origin.websocket {
            return Err(Error::usage(format!(
                "--post '{url}' must be an http:// or https:// URL"
            )));
        }
        let post = RequestParts::new("POST", &args.headers, Vec::new(), false)?;
        return Ok(Trigger::Post {
            url: url.clone(),
            endpoint: resolve(&origin)?,
            origin,
            target,
            parts: post,
            body: args.body.clone().unwrap_or_else(|| "{message}".to_string()),
        });
    }
    let Some(url) = &args.publish else {
        return Ok(Trigger::Publish {
            url: args.url.clone().unwrap_or_default(),
            endpoint: endpoint.clone(),
            offer: offer.clone(),
        });
    };
    let (origin, target) = target::parse_url(url, 1)?;
    if !origin.websocket {
        return Err(Error::usage(format!(
            "--publish '{url}' must be a ws:// or wss:// URL"
        )));
    }
    Ok(Trigger::Publish {
        url: url.clone(),
        endpoint: resolve(&origin)?,
        offer: Offer {
            path: target.path,
            authority: origin.authority,
            ..offer.clone()
        },
    })
}

/// The messages of a `--message-file`.
#[derive(Debug, Clone)]
pub(crate) struct Messages {
    /// The file, for reports.
    pub(crate) path: String,
    /// One message per non-empty line.
    pub(crate) lines: Arc<[Vec<u8>]>,
}

impl Messages {
    /// The message with sequence number `seq`: the lines in turn.
    pub(crate) fn get(&self, seq: u64) -> &[u8] {
        &self.lines[(seq % self.lines.len() as u64) as usize]
    }

    /// Mean bytes per message, rounded.
    pub(crate) fn mean_len(&self) -> usize {
        let total: usize = self.lines.iter().map(Vec::len).sum();
        (total + self.lines.len() / 2) / self.lines.len()
    }
}

/// Reads `--message-file`: every non-empty line (without its `\r\n` or
/// `\n`) is a message; text messages must be UTF-8.
fn read_messages(path: &Path, binary: bool) -> Result<Messages, Error> {
    let shown = path.display();
    let fail = |what: String| Error::usage(format!("--message-file '{shown}': {what}"));
    let len = std::fs::metadata(path)
        .map_err(|err| fail(err.to_string()))?
        .len();
    if len > MAX_MESSAGE_FILE_BYTES {
        return Err(fail(format!(
            "{len} bytes; at most {MAX_MESSAGE_FILE_BYTES} are read"
        )));
    }
    let data = std::fs::read(path).map_err(|err| fail(err.to_string()))?;
    let mut lines = Vec::new();
    for (n, line) in data.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        if line.len() > MAX_MESSAGE_BYTES {
            return Err(fail(format!(
                "line {} has {} bytes; a message is at most {MAX_MESSAGE_BYTES}",
                n + 1,
                line.len()
            )));
        }
        if !binary && std::str::from_utf8(line).is_err() {
            return Err(fail(format!(
                "line {} is not UTF-8 (text messages must be; send it with --binary)",
                n + 1
            )));
        }
        lines.push(line.to_vec());
    }
    if lines.is_empty() {
        return Err(fail("no message in it (every line is empty)".into()));
    }
    Ok(Messages {
        path: shown.to_string(),
        lines: lines.into(),
    })
}

/// A message body of `size` bytes: printable ASCII, valid as text.
pub(crate) fn template(size: usize) -> Vec<u8> {
    const FILL: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    FILL.iter().copied().cycle().take(size).collect()
}

/// The message with sequence number `seq`: `template` with the low digits
/// of `seq` in hexadecimal over its first (up to 16) bytes.
pub(crate) fn stamp(template: &[u8], seq: u64, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.clear();
    out.extend_from_slice(template);
    let digits = out.len().min(16);
    for (idx, byte) in out[..digits].iter_mut().rev().enumerate() {
        *byte = HEX[((seq >> (4 * idx)) & 0xF) as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_their_sequence_number() {
        let template = template(40);
        let mut out = Vec::new();
        stamp(&template, 0x1234, &mut out);
        assert_eq!(&out[..16], b"0000000000001234");
        assert_eq!(&out[16..], &template[16..]);
        stamp(&template[..3], 0x1234, &mut out);
        assert_eq!(out, b"234");
    }
}

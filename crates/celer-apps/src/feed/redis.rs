//! The `redis://HOST[:PORT]/KEY` source: `GET KEY` at every interval and at
//! once on a notification, over two connections of our own RESP client
//! (one for commands, one subscribed).
//!
//! The subscribed connection listens to the key's keyspace channel
//! (`__keyspace@0__:KEY`, sent by a server whose
//! `notify-keyspace-events` includes `K` and `$` or `A`) and to the channel
//! named like the key (`PUBLISH KEY anything` from the writer). Either
//! makes the source read the key at once; without them it reads at the
//! interval.

use std::fmt;
use std::time::Duration;

use bytes::BytesMut;
use celer::feed::{Feed, Source, SourceFuture};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::resp::{self, Reply};

/// The Redis port when the URL names none.
pub const DEFAULT_REDIS_PORT: u16 = 6379;

/// Time allowed for connecting, and for each command's reply.
pub const REDIS_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a `redis:` source reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisSpec {
    /// `HOST:PORT`.
    pub addr: String,
    /// The key read with GET.
    pub key: String,
    /// A password for `AUTH` (the URL's `:password@` or `user:password@`).
    pub password: Option<String>,
    /// A user name for `AUTH user password` (Redis 6 ACLs).
    pub user: Option<String>,
}

impl RedisSpec {
    /// Parses `redis://[[USER]:PASSWORD@]HOST[:PORT]/KEY`.
    ///
    /// # Errors
    ///
    /// A message naming the missing part.
    pub fn parse(url: &str) -> Result<RedisSpec, String> {
        let rest = url
            .strip_prefix("redis://")
            .ok_or("a redis source starts with redis://")?;
        let (authority, key) = rest
            .split_once('/')
            .ok_or("redis://HOST/KEY needs a key after the host")?;
        if key.is_empty() {
            return Err("redis://HOST/KEY needs a key after the host".to_owned());
        }
        let (userinfo, host) = match authority.rsplit_once('@') {
            Some((userinfo, host)) => (Some(userinfo), host),
            None => (None, authority),
        };
        if host.is_empty() {
            return Err("redis://HOST/KEY needs a host".to_owned());
        }
        let addr = if host
            .rsplit_once(':')
            .is_some_and(|(_, port)| port.parse::<u16>().is_ok())
            && !host.ends_with(']')
        {
            host.to_owned()
        } else {
            format!("{host}:{DEFAULT_REDIS_PORT}")
        };
        let (user, password) = match userinfo.map(|u| u.split_once(':')) {
            None => (None, None),
            Some(None) => (None, userinfo.map(str::to_owned)),
            Some(Some((user, password))) => (
                (!user.is_empty()).then(|| user.to_owned()),
                Some(password.to_owned()),
            ),
        };
        Ok(RedisSpec {
            addr,
            key: key.to_owned(),
            password,
            user,
        })
    }
}

impl fmt::Display for RedisSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The password stays out of logs and the status.
        write!(f, "redis://{}/{}", self.addr, self.key)
    }
}

/// Reads a Redis key into a feed; see the module documentation.
#[derive(Debug)]
pub struct RedisSource {
    spec: RedisSpec,
}

impl RedisSource {
    /// A source reading `spec`.
    pub fn new(spec: RedisSpec) -> RedisSource {
        RedisSource { spec }
    }
}

impl Source for RedisSource {
    fn describe(&self) -> String {
        self.spec.to_string()
    }

    fn run(self: Box<Self>, feed: Feed) -> SourceFuture {
        Box::pin(run(self.spec, feed))
    }
}

/// One connection: a socket and what was read but not parsed.
struct Conn {
    io: TcpStream,
    buf: BytesMut,
    max_bulk: usize,
}

/// Why a command or a connection failed.
type Failure = String;

async fn run(spec: RedisSpec, feed: Feed) {
    let mut ticks = tokio::time::interval(feed.interval());
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A value over the feed's limit is refused while it is read, and the
    // connection dropped: it is never buffered whole.
    let max_bulk = feed.max_document_bytes();
    let mut commands: Option<Conn> = None;
    let mut notices: Option<Conn> = None;
    loop {
        let notified = async {
            match notices.as_mut() {
                Some(conn) => conn.reply_within(None).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = ticks.tick() => {}
            message = notified => {
                if let Err(err) = message {
                    tracing::debug!(target: "celer::feed", feed = feed.name(), error = %err,
                        "the subscription ended; subscribing again at the next interval");
                    notices = None;
                    continue;
                }
            }
        }
        if notices.is_none() {
            notices = subscribe(&spec).await.ok();
        }
        match get(&spec, &mut commands, max_bulk).await {
            Ok(doc) => {
                let _ = feed.update(doc);
            }
            Err(err) => {
                commands = None;
                feed.source_failed(format!("{spec}: {err}"));
            }
        }
    }
}

/// `GET key` on the command connection, made first if needed.
async fn get(
    spec: &RedisSpec,
    conn: &mut Option<Conn>,
    max_bulk: usize,
) -> Result<bytes::Bytes, Failure> {
    if conn.is_none() {
        *conn = Some(Conn::open(spec, max_bulk).await?);
    }
    let conn = conn.as_mut().expect("just made");
    match conn.call(&[b"GET", spec.key.as_bytes()]).await? {
        Reply::Bulk(Some(doc)) => Ok(doc),
        Reply::Bulk(None) => Err(format!("no key {:?}", spec.key)),
        Reply::Error(err) => Err(format!("GET failed: {err}")),
        other => Err(format!("GET answered {other:?}")),
    }
}

/// A connection subscribed to the key's keyspace channel and to the
/// channel named like the key.
async fn subscribe(spec: &RedisSpec) -> Result<Conn, Failure> {
    // Messages carry channel names and event names only.
    let mut conn = Conn::open(spec, resp::MAX_LINE_BYTES).await?;
    let keyspace = format!("__keyspace@0__:{}", spec.key);
    conn.send(&[b"SUBSCRIBE", keyspace.as_bytes(), spec.key.as_bytes()])
        .await?;
    for _ in 0..2 {
        match conn.reply_within(Some(REDIS_TIMEOUT)).await? {
            Reply::Array(Some(items)) if items.first() == Some(&bulk("subscribe")) => {}
            other => return Err(format!("SUBSCRIBE answered {other:?}")),
        }
    }
    Ok(conn)
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(bytes::Bytes::copy_from_slice(s.as_bytes())))
}

impl Conn {
    async fn open(spec: &RedisSpec, max_bulk: usize) -> Result<Conn, Failure> {
        let io = tokio::time::timeout(REDIS_TIMEOUT, TcpStream::connect(&spec.addr))
            .await
            .map_err(|_| format!("no connection within {REDIS_TIMEOUT:?}"))?
            .map_err(|err| format!("cannot connect: {err}"))?;
        let _ = io.set_nodelay(true);
        let mut conn = Conn {
            io,
            buf: BytesMut::with_capacity(4096),
            max_bulk,
        };
        if let Some(password) = &spec.password {
            let reply = match &spec.user {
                Some(user) => {
                    conn.call(&[b"AUTH", user.as_bytes(), password.as_bytes()])
                        .await?
                }
                None => conn.call(&[b"AUTH", password.as_bytes()]).await?,
            };
            if let Reply::Error(err) = reply {
                return Err(format!("AUTH failed: {err}"));
            }
        }
        Ok(conn)
    }

    async fn send(&mut self, args: &[&[u8]]) -> Result<(), Failure> {
        let mut out = BytesMut::new();
        resp::encode(&mut out, args);
        tokio::time::timeout(REDIS_TIMEOUT, self.io.write_all(&out))
            .await
            .map_err(|_| "the server does not read".to_owned())?
            .map_err(|err| format!("write failed: {err}"))
    }

    async fn call(&mut self, args: &[&[u8]]) -> Result<Reply, Failure> {
        self.send(args).await?;
        self.reply_within(Some(REDIS_TIMEOUT)).await
    }

    /// The next reply, waiting at most `timeout` (forever with `None`).
    async fn reply_within(&mut self, timeout: Option<Duration>) -> Result<Reply, Failure> {
        let read = async {
            loop {
                if let Some(reply) =
                    resp::parse(&mut self.buf, self.max_bulk).map_err(|err| err.to_string())?
                {
                    return Ok(reply);
                }
                self.buf.reserve(16 * 1024);
                let n = self
                    .io
                    .read_buf(&mut self.buf)
                    .await
                    .map_err(|err| format!("read failed: {err}"))?;
                if n == 0 {
                    return Err("the server closed the connection".to_owned());
                }
            }
        };
        match timeout {
            Some(limit) => tokio::time::timeout(limit, read)
                .await
                .map_err(|_| format!("no reply within {limit:?}"))?,
            None => read.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let spec = RedisSpec::parse("redis://127.0.0.1/scores").unwrap();
        assert_eq!(spec.addr, "127.0.0.1:6379");
        assert_eq!(spec.key, "scores");
        assert_eq!(spec.password, None);
        let spec = RedisSpec::parse("redis://:s3cret@cache:6380/feed:main").unwrap();
        assert_eq!(spec.addr, "cache:6380");
        assert_eq!(spec.key, "feed:main");
        assert_eq!(spec.password.as_deref(), Some("s3cret"));
        assert_eq!(spec.to_string(), "redis://cache:6380/feed:main");
        let spec = RedisSpec::parse("redis://ada:pw@[::1]:7000/k").unwrap();
        assert_eq!(
            (spec.user.as_deref(), spec.addr.as_str()),
            (Some("ada"), "[::1]:7000")
        );
        assert_eq!(
            RedisSpec::parse("redis://[::1]/k").unwrap().addr,
            "[::1]:6379"
        );
        assert!(RedisSpec::parse("redis://host").is_err());
        assert!(RedisSpec::parse("redis://host/").is_err());
        assert!(RedisSpec::parse("redis:///k").is_err());
    }
}

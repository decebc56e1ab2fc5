//! Targets: URLs, their weights, and the one origin they share.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

use crate::Error;

/// The scheme, host and port every request goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    /// Whether connections use TLS (https:// or wss://).
    pub(crate) https: bool,
    /// Whether this is a WebSocket URL (ws:// or wss://).
    pub(crate) websocket: bool,
    /// Host as written in the URL, without brackets for IPv6.
    pub(crate) host: String,
    /// TCP port (default 80 or 443).
    pub(crate) port: u16,
    /// The `Host` header value: the URL's authority.
    pub(crate) authority: String,
}

/// One URL and how often it is picked relative to the others.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The URL as given.
    pub(crate) url: String,
    /// Path and query, `/` when empty.
    pub(crate) path: String,
    /// Relative weight, at least 1.
    pub(crate) weight: u32,
}

/// Parses one URL into its origin and target.
pub(crate) fn parse_url(url: &str, weight: u32) -> Result<(Origin, Target), Error> {
    let bad = |why: &str| Error::usage(format!("invalid URL '{url}': {why}"));
    let uri: http::Uri = url.parse().map_err(|_| bad("not a URL"))?;
    let (https, websocket) = match uri.scheme_str() {
        Some("http") => (false, false),
        Some("https") => (true, false),
        Some("ws") => (false, true),
        Some("wss") => (true, true),
        Some(_) => return Err(bad("the scheme must be http, https, ws or wss")),
        None => return Err(bad("missing http:// or https://")),
    };
    let authority = uri.authority().ok_or_else(|| bad("missing host"))?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return Err(bad("missing host"));
    }
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let path = if path.is_empty() {
        "/".to_string()
    } else {
        path
    };
    let origin = Origin {
        https,
        websocket,
        host: host.to_string(),
        port,
        authority: authority.as_str().to_string(),
    };
    let target = Target {
        url: url.to_string(),
        path,
        weight,
    };
    Ok((origin, target))
}

/// Reads a URL file: one `[WEIGHT] URL` per line, `#` comments, blank lines ignored.
pub(crate) fn read_url_file(path: &Path) -> Result<Vec<(String, u32)>, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
    let mut urls = Vec::new();
    for (line_idx, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let bad = || {
            Error::usage(format!(
                "{}:{}: expected '[WEIGHT] URL'",
                path.display(),
                line_idx + 1
            ))
        };
        let mut words = line.split_whitespace();
        let (weight, url) = match (words.next(), words.next(), words.next()) {
            (Some(url), None, None) => (1, url),
            (Some(weight), Some(url), None) => (weight.parse().map_err(|_| bad())?, url),
            _ => return Err(bad()),
        };
        if weight == 0 {
            return Err(bad());
        }
        urls.push((url.to_string(), weight));
    }
    if urls.is_empty() {
        return Err(Error::usage(format!("{} lists no URL", path.display())));
    }
    Ok(urls)
}

/// Parses every URL and checks that they share one origin.
pub(crate) fn resolve_targets(urls: &[(String, u32)]) -> Result<(Origin, Vec<Target>), Error> {
    let mut origin: Option<Origin> = None;
    let mut targets = Vec::with_capacity(urls.len());
    for (url, weight) in urls {
        let (this, target) = parse_url(url, *weight)?;
        match &origin {
            Some(first) if *first != this => {
                return Err(Error::usage(format!(
                    "'{url}' has another scheme, host or port than the first URL; \
                     connections are shared, so all URLs need one origin"
                )));
            }
            Some(_) => {}
            None => origin = Some(this),
        }
        targets.push(target);
    }
    let origin = origin.ok_or_else(|| Error::usage("no URL given"))?;
    Ok((origin, targets))
}

/// Resolves the origin's host to the first socket address.
pub(crate) fn lookup(origin: &Origin) -> Result<SocketAddr, Error> {
    let what = format!("cannot resolve {}", origin.host);
    (origin.host.as_str(), origin.port)
        .to_socket_addrs()
        .map_err(|e| Error::connect(what.clone(), e))?
        .next()
        .ok_or_else(|| Error::connect(what, "no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_split_into_origin_and_path() {
        let (origin, target) = parse_url("http://127.0.0.1:8080/a?b=1", 1).unwrap();
        assert_eq!(origin.port, 8080);
        assert_eq!(origin.authority, "127.0.0.1:8080");
        assert_eq!(target.path, "/a?b=1");
        let (origin, target) = parse_url("https://[::1]", 1).unwrap();
        assert_eq!((origin.host.as_str(), origin.port), ("::1", 443));
        assert_eq!(target.path, "/");
        assert!(parse_url("ftp://x/", 1).is_err());
        let (origin, target) = parse_url("wss://h/room?x=1", 1).unwrap();
        assert!(origin.https && origin.websocket);
        assert_eq!((origin.port, target.path.as_str()), (443, "/room?x=1"));
        assert!(parse_url("localhost:80", 1).is_err());
    }

    #[test]
    fn mixed_origins_are_rejected() {
        let urls = [("http://a/".to_string(), 1), ("http://b/".to_string(), 1)];
        assert!(resolve_targets(&urls).unwrap_err().is_usage());
    }
}

//! CGI meta-variables (RFC 3875 §4.1) → an `http::Request`, shared by
//! FastCGI, SCGI and CGI, and the CGI response head (RFC 3875 §6).

use std::net::{IpAddr, SocketAddr};

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body::SizeHint;

use crate::common::Reject;
use crate::limits::Limits;

/// What a gateway front end said about a request beyond its head, as a
/// request extension: the mount point, the client's and the server's
/// addresses, and whether the client came over TLS.
///
/// Trusted as the operator's front end sent it: a gateway listener must be
/// reachable by that front end alone (a UNIX socket's mode, a loopback
/// address).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgiEnv {
    /// `SCRIPT_NAME` when the request was routed on `PATH_INFO` (the
    /// application's mount point, e.g. `/app`), else empty. Links the
    /// application builds must start with it.
    pub script_name: String,
    /// `REMOTE_ADDR` and `REMOTE_PORT`: the client of the front end.
    pub remote: Option<SocketAddr>,
    /// `SERVER_ADDR` and `SERVER_PORT`: where the front end received it.
    pub local: Option<SocketAddr>,
    /// `HTTPS` is `on` (or `1`), or `REQUEST_SCHEME` is `https`.
    pub https: bool,
}

/// A request mapped from meta-variables: the head (its body still to
/// attach), the announced body length, and whether it is `HEAD`.
#[derive(Debug)]
pub(crate) struct Mapped {
    pub(crate) head: Request<()>,
    pub(crate) content_length: Option<u64>,
}

fn bad(reason: &'static str) -> Reject {
    Reject::new(StatusCode::BAD_REQUEST, reason)
}

fn var<'a>(params: &'a [(Bytes, Bytes)], name: &str) -> Option<&'a [u8]> {
    params
        .iter()
        .find(|(n, _)| &n[..] == name.as_bytes())
        .map(|(_, v)| &v[..])
}

fn digits(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

fn addr(ip: Option<&[u8]>, port: Option<&[u8]>) -> Option<SocketAddr> {
    let ip: IpAddr = std::str::from_utf8(ip?).ok()?.parse().ok()?;
    let port = u16::try_from(digits(port.unwrap_or(b"0"))?).ok()?;
    Some(SocketAddr::new(ip, port))
}

/// Appends `path` (decoded, as `PATH_INFO` is) percent-encoding what may not
/// stand in a URI path (RFC 3986 §3.3), `%` included.
fn encode_path(out: &mut Vec<u8>, path: &[u8]) {
    for &b in path {
        let keep = b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b);
        if keep {
            out.push(b);
        } else {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        }
    }
}

/// Maps the meta-variables of one request (RFC 3875 §4.1) to a request head.
///
/// - The method is `REQUEST_METHOD` (§4.1.12).
/// - The path: when `PATH_INFO` (§4.1.5) is present and not empty, routing
///   sees it and `SCRIPT_NAME` (§4.1.13) is the mount point
///   ([`CgiEnv::script_name`]); the raw `REQUEST_URI` past `SCRIPT_NAME`
///   is used when it matches, so the client's percent-encoding is kept.
///   Otherwise the whole path is the one of `REQUEST_URI` (nginx, lighttpd
///   and Apache send it), else `SCRIPT_NAME`, and the mount point is empty.
/// - The query is `QUERY_STRING` (§4.1.7), else the query of `REQUEST_URI`.
/// - `CONTENT_TYPE` and `CONTENT_LENGTH` (§4.1.2, §4.1.3) become those
///   fields; `HTTP_*` variables (§4.1.18) become fields, `_` read as `-`
///   (`HTTP_CONTENT_*` is ignored, as the RFC says servers drop it).
/// - `Host` is `HTTP_HOST`, else `SERVER_NAME` with `SERVER_PORT` (§4.1.14,
///   §4.1.15) when not the scheme's default.
pub(crate) fn map(params: &[(Bytes, Bytes)], limits: &Limits) -> Result<Mapped, Reject> {
    let method = var(params, "REQUEST_METHOD").ok_or(bad("no REQUEST_METHOD"))?;
    let method = Method::from_bytes(method).map_err(|_| bad("invalid REQUEST_METHOD"))?;
    let https = var(params, "HTTPS").is_some_and(|v| v.eq_ignore_ascii_case(b"on") || v == b"1")
        || var(params, "REQUEST_SCHEME").is_some_and(|v| v.eq_ignore_ascii_case(b"https"));

    let script = var(params, "SCRIPT_NAME").unwrap_or(b"");
    let request_uri = var(params, "REQUEST_URI");
    let (raw_path, raw_query) = match request_uri {
        Some(u) => match u.iter().position(|&b| b == b'?') {
            Some(q) => (Some(&u[..q]), Some(&u[q + 1..])),
            None => (Some(u), None),
        },
        None => (None, None),
    };
    let mut target = Vec::with_capacity(64);
    let mut script_name = String::new();
    match var(params, "PATH_INFO") {
        Some(info) if !info.is_empty() => {
            if !script.is_empty() {
                script_name = String::from_utf8_lossy(script).into_owned();
            }
            // The client's encoding of the part past the mount point, when
            // REQUEST_URI starts with SCRIPT_NAME as sent.
            match raw_path.and_then(|p| p.strip_prefix(script)) {
                Some(rest) if rest.starts_with(b"/") => target.extend_from_slice(rest),
                _ => encode_path(&mut target, info),
            }
        }
        _ => match raw_path {
            Some(p) if p.starts_with(b"/") => target.extend_from_slice(p),
            _ => encode_path(&mut target, script),
        },
    }
    if target.first() != Some(&b'/') {
        target.insert(0, b'/');
    }
    let query = var(params, "QUERY_STRING").or(raw_query);
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        target.push(b'?');
        target.extend_from_slice(q);
    }
    if target.len() > limits.max_uri_bytes {
        return Err(Reject::new(
            StatusCode::URI_TOO_LONG,
            "request target too long",
        ));
    }
    let uri =
        Uri::from_maybe_shared(Bytes::from(target)).map_err(|_| bad("invalid request target"))?;

    let version = match var(params, "SERVER_PROTOCOL") {
        Some(b"HTTP/1.0") => Version::HTTP_10,
        Some(b"HTTP/2" | b"HTTP/2.0") => Version::HTTP_2,
        Some(b"HTTP/3" | b"HTTP/3.0") => Version::HTTP_3,
        _ => Version::HTTP_11,
    };

    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    let headers = request.headers_mut();
    let too_many = || {
        Reject::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "too many header fields",
        )
    };
    let mut content_length = None;
    for (name, value) in params {
        let field = if let Some(rest) = name.strip_prefix(b"HTTP_") {
            if rest.starts_with(b"CONTENT_TYPE") || rest.starts_with(b"CONTENT_LENGTH") {
                continue;
            }
            let lower: Vec<u8> = rest
                .iter()
                .map(|&b| {
                    if b == b'_' {
                        b'-'
                    } else {
                        b.to_ascii_lowercase()
                    }
                })
                .collect();
            HeaderName::from_bytes(&lower).map_err(|_| bad("invalid header name"))?
        } else if &name[..] == b"CONTENT_TYPE" {
            if value.is_empty() {
                continue;
            }
            header::CONTENT_TYPE
        } else if &name[..] == b"CONTENT_LENGTH" {
            if value.is_empty() {
                continue;
            }
            content_length = Some(digits(value).ok_or(bad("invalid CONTENT_LENGTH"))?);
            header::CONTENT_LENGTH
        } else {
            continue;
        };
        let value = HeaderValue::from_maybe_shared(value.clone())
            .map_err(|_| bad("invalid header value"))?;
        if headers.len() >= limits.max_headers {
            return Err(too_many());
        }
        headers.append(field, value);
    }
    if !headers.contains_key(header::HOST)
        && let Some(name) = var(params, "SERVER_NAME").filter(|n| !n.is_empty())
    {
        let mut host = name.to_vec();
        let default = if https { &b"443"[..] } else { b"80" };
        if let Some(port) = var(params, "SERVER_PORT").filter(|p| !p.is_empty() && *p != default) {
            host.push(b':');
            host.extend_from_slice(port);
        }
        let value = HeaderValue::from_maybe_shared(Bytes::from(host))
            .map_err(|_| bad("invalid SERVER_NAME"))?;
        headers.insert(header::HOST, value);
    }
    request.extensions_mut().insert(CgiEnv {
        script_name,
        remote: addr(var(params, "REMOTE_ADDR"), var(params, "REMOTE_PORT")),
        local: addr(var(params, "SERVER_ADDR"), var(params, "SERVER_PORT")),
        https,
    });
    Ok(Mapped {
        head: request,
        content_length,
    })
}

/// True when a response with `status` to `method` carries no body (RFC 9110
/// §6.4.1).
pub(crate) fn bodiless(method: &Method, status: StatusCode) -> bool {
    method == Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
}

/// Writes a response head in the CGI response format (RFC 3875 §6.2):
/// `Status: CODE REASON`, the fields, an empty line. `Content-Length` is
/// added when the body's size is known and the service set none;
/// `Transfer-Encoding` and `Connection` are the front end's to decide and
/// are dropped.
pub(crate) fn encode_head<B>(
    response: &Response<B>,
    hint: &SizeHint,
    method: &Method,
    out: &mut BytesMut,
) {
    let status = response.status();
    out.put_slice(b"Status: ");
    out.put_slice(status.as_str().as_bytes());
    out.put_u8(b' ');
    out.put_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
    out.put_slice(b"\r\n");
    for (name, value) in response.headers() {
        if name == header::TRANSFER_ENCODING || name == header::CONNECTION {
            continue;
        }
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    let no_body_status = status.is_informational() || status == StatusCode::NO_CONTENT;
    if !response.headers().contains_key(header::CONTENT_LENGTH)
        && !no_body_status
        && status != StatusCode::NOT_MODIFIED
        && (method != Method::HEAD || hint.exact() != Some(0))
        && let Some(n) = hint.exact()
    {
        out.put_slice(b"content-length: ");
        out.put_slice(itoa::Buffer::new().format(n).as_bytes());
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(vars: &[(&str, &str)]) -> Vec<(Bytes, Bytes)> {
        vars.iter()
            .map(|(n, v)| {
                (
                    Bytes::copy_from_slice(n.as_bytes()),
                    Bytes::copy_from_slice(v.as_bytes()),
                )
            })
            .collect()
    }

    #[test]
    fn meta_variables_become_the_request() {
        let p = params(&[
            ("REQUEST_METHOD", "POST"),
            ("SCRIPT_NAME", "/app"),
            ("PATH_INFO", "/items/a b"),
            ("REQUEST_URI", "/app/items/a%20b?x=1"),
            ("QUERY_STRING", "x=1"),
            ("CONTENT_TYPE", "application/json"),
            ("CONTENT_LENGTH", "12"),
            ("HTTP_X_FORWARDED_FOR", "192.0.2.9"),
            ("HTTP_CONTENT_LENGTH", "999"),
            ("HTTPS", "on"),
            ("REMOTE_ADDR", "192.0.2.1"),
            ("REMOTE_PORT", "4000"),
            ("SERVER_NAME", "example.com"),
            ("SERVER_PORT", "8443"),
            ("SERVER_PROTOCOL", "HTTP/1.0"),
        ]);
        let m = map(&p, &Limits::default()).unwrap();
        let r = &m.head;
        assert_eq!(r.method(), Method::POST);
        assert_eq!(r.uri(), "/items/a%20b?x=1");
        assert_eq!(r.version(), Version::HTTP_10);
        assert_eq!(m.content_length, Some(12));
        assert_eq!(r.headers()["content-length"], "12");
        assert_eq!(r.headers()["content-type"], "application/json");
        assert_eq!(r.headers()["x-forwarded-for"], "192.0.2.9");
        assert_eq!(r.headers()["host"], "example.com:8443");
        let env = r.extensions().get::<CgiEnv>().unwrap();
        assert_eq!(env.script_name, "/app");
        assert_eq!(env.remote, Some("192.0.2.1:4000".parse().unwrap()));
        assert!(env.https);
    }

    #[test]
    fn without_path_info_the_whole_path_routes() {
        let p = params(&[
            ("REQUEST_METHOD", "GET"),
            ("SCRIPT_NAME", "/items/1"),
            ("REQUEST_URI", "/items/%31?q"),
            ("HTTP_HOST", "h"),
        ]);
        let m = map(&p, &Limits::default()).unwrap();
        assert_eq!(m.head.uri(), "/items/%31?q");
        assert_eq!(m.head.extensions().get::<CgiEnv>().unwrap().script_name, "");
        let p = params(&[
            ("REQUEST_METHOD", "GET"),
            ("SCRIPT_NAME", "/s"),
            ("PATH_INFO", "/100%"),
        ]);
        assert_eq!(map(&p, &Limits::default()).unwrap().head.uri(), "/100%25");
    }

    #[test]
    fn bad_variables_are_refused_with_a_status() {
        let status =
            |vars: &[(&str, &str)]| map(&params(vars), &Limits::default()).unwrap_err().status;
        assert_eq!(status(&[]), StatusCode::BAD_REQUEST);
        assert_eq!(
            status(&[("REQUEST_METHOD", "G T")]),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status(&[("REQUEST_METHOD", "GET"), ("CONTENT_LENGTH", "-1")]),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status(&[("REQUEST_METHOD", "GET"), ("HTTP_X", "a\nb")]),
            StatusCode::BAD_REQUEST
        );
        let long = "/a".repeat(5000);
        assert_eq!(
            status(&[("REQUEST_METHOD", "GET"), ("REQUEST_URI", &long)]),
            StatusCode::URI_TOO_LONG
        );
        let many: Vec<(String, String)> = (0..101)
            .map(|i| (format!("HTTP_X_{i}"), "v".into()))
            .collect();
        let mut vars: Vec<(&str, &str)> =
            many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        vars.push(("REQUEST_METHOD", "GET"));
        assert_eq!(status(&vars), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }

    #[test]
    fn the_head_is_a_cgi_status_and_fields_with_a_known_length() {
        let mut response = Response::new(());
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        response
            .headers_mut()
            .insert("allow", HeaderValue::from_static("GET, HEAD"));
        response
            .headers_mut()
            .insert("transfer-encoding", HeaderValue::from_static("chunked"));
        let mut out = BytesMut::new();
        encode_head(&response, &SizeHint::with_exact(5), &Method::GET, &mut out);
        assert_eq!(
            &out[..],
            b"Status: 405 Method Not Allowed\r\nallow: GET, HEAD\r\ncontent-length: 5\r\n\r\n"
        );
    }
}

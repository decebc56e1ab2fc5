//! One server-sent event and its encoding (HTML Living Standard,
//! "Server-sent events", §9.2.5 and §9.2.6); no IO.

use std::fmt;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;

/// One event of an event stream: data, an event type, an id, a reconnection
/// time and comments, encoded once into the bytes that go on the wire.
///
/// Multi-line data becomes several `data:` lines, which the browser joins
/// back with `\n` (a CR LF or lone CR in the data arrives as `\n`: the
/// format has no other line break). An id or event type with a CR, LF or
/// NUL (which would start a new field, or make the browser ignore the id)
/// is refused: [`encode`](Event::encode) fails with [`InvalidEvent`], a
/// hub's [`publish`](crate::sse::Hub::publish) returns the error, and an
/// [`EventStream`](crate::sse::EventStream) skips the event with a warning.
/// Nothing a value holds can inject a field.
///
/// ```
/// use std::time::Duration;
/// use celer::sse::Event;
///
/// let event = Event::new()
///     .event("score")
///     .id("42")
///     .data("home 2\naway 1")
///     .retry(Duration::from_secs(5));
/// assert_eq!(
///     &event.encode().unwrap()[..],
///     b"event: score\nid: 42\nretry: 5000\ndata: home 2\ndata: away 1\n\n"
/// );
/// assert!(Event::new().id("4\n2").encode().unwrap_err().is_invalid_id());
/// ```
///
/// A browser dispatches an event only when it has a data field: an event
/// type or id alone updates the client's state but fires no listener; give
/// it `data("")` to fire one with empty data.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Event {
    id: Option<String>,
    event: Option<String>,
    data: Option<String>,
    retry: Option<Duration>,
    comment: Option<String>,
}

/// Why an [`Event`] cannot be encoded.
///
/// ```
/// let err = celer::sse::Event::new().id("1\r\nid: 2").encode().unwrap_err();
/// assert!(err.is_invalid_id());
/// assert_eq!(err.to_string(), "event id holds a line break or NUL");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidEvent {
    kind: InvalidKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InvalidKind {
    /// The id holds a CR, LF or NUL.
    Id,
    /// The event type holds a CR or LF.
    EventType,
}

// ===== impl Event =====

impl Event {
    /// An empty event; it encodes to nothing until a field is set.
    ///
    /// ```
    /// assert!(celer::sse::Event::new().encode().unwrap().is_empty());
    /// ```
    pub fn new() -> Event {
        Event::default()
    }

    /// Sets the data. Each line (split at CR LF, LF or CR) becomes a `data:`
    /// line of its own.
    ///
    /// ```
    /// let event = celer::sse::Event::new().data("a\r\nb");
    /// assert_eq!(&event.encode().unwrap()[..], b"data: a\ndata: b\n\n");
    /// ```
    pub fn data(mut self, data: impl Into<String>) -> Event {
        self.data = Some(data.into());
        self
    }

    /// Sets the data to `value` serialised as JSON (one line).
    ///
    /// ```
    /// let event = celer::sse::Event::new().json(&serde_json::json!({"n": 1})).unwrap();
    /// assert_eq!(&event.encode().unwrap()[..], b"data: {\"n\":1}\n\n");
    /// ```
    pub fn json<T: Serialize + ?Sized>(self, value: &T) -> Result<Event, serde_json::Error> {
        Ok(self.data(serde_json::to_string(value)?))
    }

    /// Sets the event type, which the browser dispatches to
    /// `addEventListener(type, …)` instead of `onmessage`. A CR or LF in it
    /// makes the event invalid.
    ///
    /// ```
    /// let event = celer::sse::Event::new().event("tick").data("1");
    /// assert_eq!(&event.encode().unwrap()[..], b"event: tick\ndata: 1\n\n");
    /// ```
    pub fn event(mut self, event: impl Into<String>) -> Event {
        self.event = Some(event.into());
        self
    }

    /// Sets the id, which the browser sends back in `Last-Event-ID` when it
    /// reconnects. A CR, LF or NUL in it makes the event invalid.
    ///
    /// ```
    /// let event = celer::sse::Event::new().id("7").data("x");
    /// assert_eq!(&event.encode().unwrap()[..], b"id: 7\ndata: x\n\n");
    /// ```
    pub fn id(mut self, id: impl Into<String>) -> Event {
        self.id = Some(id.into());
        self
    }

    /// Sets the reconnection time the browser waits before reconnecting
    /// after the stream ends, in whole milliseconds.
    ///
    /// ```
    /// use std::time::Duration;
    /// let event = celer::sse::Event::new().retry(Duration::from_millis(1500));
    /// assert_eq!(&event.encode().unwrap()[..], b"retry: 1500\n\n");
    /// ```
    pub fn retry(mut self, retry: Duration) -> Event {
        self.retry = Some(retry);
        self
    }

    /// Sets a comment, which browsers ignore; each line of it becomes a
    /// comment line of its own.
    ///
    /// ```
    /// let event = celer::sse::Event::new().comment("hello\nthere");
    /// assert_eq!(&event.encode().unwrap()[..], b": hello\n: there\n\n");
    /// ```
    pub fn comment(mut self, comment: impl Into<String>) -> Event {
        self.comment = Some(comment.into());
        self
    }

    /// The id, if set.
    ///
    /// ```
    /// assert_eq!(celer::sse::Event::new().id("7").id_str(), Some("7"));
    /// ```
    pub fn id_str(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The id, taken out of the event.
    pub(crate) fn into_id(self) -> Option<String> {
        self.id
    }

    /// Encodes the event: its fields, then the blank line that ends it.
    /// An event without any field encodes to nothing.
    ///
    /// ```
    /// let bytes = celer::sse::Event::new().data("hi").encode().unwrap();
    /// assert_eq!(&bytes[..], b"data: hi\n\n");
    /// ```
    pub fn encode(&self) -> Result<Bytes, InvalidEvent> {
        let mut buf = BytesMut::with_capacity(self.encoded_len_hint());
        self.encode_into(&mut buf, None)?;
        Ok(buf.freeze())
    }

    /// Encodes the event into `buf`, with `id` as its id when it has none.
    pub(crate) fn encode_into(
        &self,
        buf: &mut BytesMut,
        default_id: Option<&str>,
    ) -> Result<(), InvalidEvent> {
        self.check()?;
        let start = buf.len();
        if let Some(comment) = &self.comment {
            for line in lines(comment) {
                field(buf, "", line);
            }
        }
        if let Some(event) = &self.event {
            field(buf, "event", event);
        }
        if let Some(id) = self.id.as_deref().or(default_id) {
            if id.contains(['\r', '\n', '\0']) {
                return Err(InvalidEvent::new(InvalidKind::Id));
            }
            field(buf, "id", id);
        }
        if let Some(retry) = self.retry {
            let millis = u64::try_from(retry.as_millis()).unwrap_or(u64::MAX);
            field(buf, "retry", &millis.to_string());
        }
        if let Some(data) = &self.data {
            for line in lines(data) {
                field(buf, "data", line);
            }
        }
        if buf.len() > start {
            // The blank line that dispatches the event (§9.2.6).
            buf.put_u8(b'\n');
        }
        Ok(())
    }

    fn check(&self) -> Result<(), InvalidEvent> {
        // §9.2.6: a line ends at CR LF, LF or CR, so either would start a
        // new field; an id with NUL is ignored by the browser.
        if self
            .id
            .as_deref()
            .is_some_and(|id| id.contains(['\r', '\n', '\0']))
        {
            return Err(InvalidEvent::new(InvalidKind::Id));
        }
        if self
            .event
            .as_deref()
            .is_some_and(|e| e.contains(['\r', '\n']))
        {
            return Err(InvalidEvent::new(InvalidKind::EventType));
        }
        Ok(())
    }

    fn encoded_len_hint(&self) -> usize {
        let text = |s: &Option<String>| s.as_ref().map_or(0, |s| s.len() + 8);
        text(&self.id) + text(&self.event) + text(&self.data) + text(&self.comment) + 24
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("Event");
        if let Some(event) = &self.event {
            out.field("event", event);
        }
        if let Some(id) = &self.id {
            out.field("id", id);
        }
        if let Some(retry) = &self.retry {
            out.field("retry", retry);
        }
        if let Some(data) = &self.data {
            out.field("data", data);
        }
        if let Some(comment) = &self.comment {
            out.field("comment", comment);
        }
        out.finish()
    }
}

/// Writes one field line. The space after the colon is always written:
/// the parser drops exactly one, so a value that starts with a space keeps
/// it (§9.2.6).
fn field(buf: &mut BytesMut, name: &str, value: &str) {
    buf.reserve(name.len() + value.len() + 3);
    buf.put_slice(name.as_bytes());
    buf.put_slice(b": ");
    buf.put_slice(value.as_bytes());
    buf.put_u8(b'\n');
}

/// The lines of `text`, split at CR LF, LF or CR as the parser splits them
/// (§9.2.5). An empty text is one empty line; a trailing break gives a
/// trailing empty line, so the browser rebuilds the text exactly.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let text = rest?;
        match text.find(['\r', '\n']) {
            Some(at) => {
                let skip = if text[at..].starts_with("\r\n") { 2 } else { 1 };
                rest = Some(&text[at + skip..]);
                Some(&text[..at])
            }
            None => {
                rest = None;
                Some(text)
            }
        }
    })
}

// ===== impl InvalidEvent =====

impl InvalidEvent {
    fn new(kind: InvalidKind) -> InvalidEvent {
        InvalidEvent { kind }
    }

    /// The id holds a CR, LF or NUL.
    ///
    /// ```
    /// let err = celer::sse::Event::new().id("a\0").encode().unwrap_err();
    /// assert!(err.is_invalid_id());
    /// ```
    pub fn is_invalid_id(&self) -> bool {
        self.kind == InvalidKind::Id
    }

    /// The event type holds a CR or LF.
    ///
    /// ```
    /// let err = celer::sse::Event::new().event("a\rb").encode().unwrap_err();
    /// assert!(err.is_invalid_event_type());
    /// ```
    pub fn is_invalid_event_type(&self) -> bool {
        self.kind == InvalidKind::EventType
    }
}

impl fmt::Display for InvalidEvent {
    /// The wording is not part of the API.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            InvalidKind::Id => "event id holds a line break or NUL",
            InvalidKind::EventType => "event type holds a line break",
        })
    }
}

impl std::error::Error for InvalidEvent {}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a browser's parser (§9.2.6) makes of `stream`: the dispatched
    /// events as (type, data, last event id).
    fn parse(stream: &str) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        let (mut event, mut data, mut last_id) = (String::new(), String::new(), String::new());
        let normalized = stream.replace("\r\n", "\n").replace('\r', "\n");
        let mut all: Vec<&str> = normalized.split('\n').collect();
        // The text after the last line break is not a line yet.
        all.pop();
        for line in all {
            if line.is_empty() {
                if !data.is_empty() {
                    data.pop();
                    out.push((
                        std::mem::take(&mut event),
                        std::mem::take(&mut data),
                        last_id.clone(),
                    ));
                }
                event.clear();
                data.clear();
                continue;
            }
            let (name, value) = match line.split_once(':') {
                Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
                None => (line, ""),
            };
            match name {
                "event" => event = value.to_owned(),
                "data" => {
                    data.push_str(value);
                    data.push('\n');
                }
                "id" if !value.contains('\0') => last_id = value.to_owned(),
                _ => {}
            }
        }
        out
    }

    fn wire(event: &Event) -> String {
        String::from_utf8(event.encode().unwrap().to_vec()).unwrap()
    }

    #[test]
    fn data_round_trips_through_a_browser_parser() {
        let table = [
            ("", ""),
            ("one", "one"),
            ("a\nb", "a\nb"),
            ("a\r\nb", "a\nb"),
            ("a\rb", "a\nb"),
            ("trailing\n", "trailing\n"),
            ("\n\n", "\n\n"),
            (" leading space", " leading space"),
            ("data: fake\n\nid: 9", "data: fake\n\nid: 9"),
        ];
        for (data, expected) in table {
            let event = Event::new().data(data).id("1");
            let parsed = parse(&wire(&event));
            assert_eq!(parsed.len(), 1, "{data:?} -> {:?}", wire(&event));
            assert_eq!(parsed[0].1, expected, "{data:?}");
            assert_eq!(parsed[0].2, "1", "{data:?}: injected id");
        }
    }

    #[test]
    fn ids_and_types_with_line_breaks_are_refused() {
        for bad in ["a\nb", "a\rb", "a\r\nid: 2", "\n"] {
            assert!(
                Event::new()
                    .id(bad)
                    .data("x")
                    .encode()
                    .unwrap_err()
                    .is_invalid_id()
            );
            assert!(
                Event::new()
                    .event(bad)
                    .data("x")
                    .encode()
                    .unwrap_err()
                    .is_invalid_event_type()
            );
        }
        assert!(Event::new().id("a\0").encode().unwrap_err().is_invalid_id());
        // A default id goes through the same check.
        let mut buf = BytesMut::new();
        assert!(
            Event::new()
                .data("x")
                .encode_into(&mut buf, Some("1\n"))
                .is_err()
        );
    }

    #[test]
    fn comments_cannot_inject_fields() {
        let event = Event::new().comment("x\ndata: injected\r\nid: 5");
        assert_eq!(wire(&event), ": x\n: data: injected\n: id: 5\n\n");
        assert!(parse(&wire(&event)).is_empty());
    }

    #[test]
    fn a_default_id_is_used_only_without_an_id() {
        let mut buf = BytesMut::new();
        Event::new()
            .data("x")
            .encode_into(&mut buf, Some("h.1"))
            .unwrap();
        Event::new()
            .id("mine")
            .data("y")
            .encode_into(&mut buf, Some("h.2"))
            .unwrap();
        assert_eq!(&buf[..], b"id: h.1\ndata: x\n\nid: mine\ndata: y\n\n");
    }
}

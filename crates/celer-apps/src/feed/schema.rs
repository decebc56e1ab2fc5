//! JSON Schema checking of feed documents (`celer serve --feed-schema
//! NAME=PATH`): the schema is read and compiled once, at start, and each
//! new version of the feed is checked against it through the feed's
//! validator hook ([`celer::feed::FeedBuilder::validator`]).
//!
//! A document that fails is refused by the feed, which keeps serving the
//! last good version, logs the refusal (with the first failing location
//! and its message, from [`Schema::check`]) and counts it in the status
//! (`rejected_validator`).
//!
//! Drafts 4, 6, 7, 2019-09 and 2020-12 are understood, chosen by the
//! schema's `$schema` (2020-12 without one). `$ref`s resolve within the
//! schema document; references to other files or URLs are refused when
//! the schema is loaded (nothing is fetched while serving).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest schema file read, in bytes; a larger one is refused at start.
pub const MAX_SCHEMA_BYTES: u64 = 4 << 20;

/// Longest failure message kept, in characters (a message may quote the
/// failing value, which may be most of the document); longer ones are cut
/// with `…`.
pub const MAX_MESSAGE_CHARS: usize = 300;

/// A compiled JSON Schema, cheap to clone.
#[derive(Clone)]
pub struct Schema {
    path: PathBuf,
    validator: Arc<jsonschema::Validator>,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Schema {
    /// Reads and compiles the schema in `path`.
    ///
    /// # Errors
    ///
    /// A message naming the file and what is wrong: unreadable, too large,
    /// not JSON, or not a valid schema (checked against its draft's
    /// meta-schema; the message names the first failing location).
    pub fn load(path: &Path) -> Result<Schema, String> {
        let shown = path.display();
        let len = std::fs::metadata(path)
            .map_err(|err| format!("{shown}: {err}"))?
            .len();
        if len > MAX_SCHEMA_BYTES {
            return Err(format!(
                "{shown}: {len} bytes, more than the {MAX_SCHEMA_BYTES} a schema may have"
            ));
        }
        let text = std::fs::read(path).map_err(|err| format!("{shown}: {err}"))?;
        let value: serde_json::Value =
            serde_json::from_slice(&text).map_err(|err| format!("{shown}: not JSON: {err}"))?;
        Schema::from_value(path, &value).map_err(|err| format!("{shown}: {err}"))
    }

    /// Compiles `schema`; `path` only names it in messages.
    ///
    /// # Errors
    ///
    /// A message saying why `schema` is not a valid JSON Schema.
    pub fn from_value(path: &Path, schema: &serde_json::Value) -> Result<Schema, String> {
        let validator = jsonschema::validator_for(schema).map_err(|err| {
            let at = err.instance_path().as_str();
            let message = shorten(&err.to_string());
            if at.is_empty() {
                format!("not a valid JSON Schema: {message}")
            } else {
                format!("not a valid JSON Schema: at {at}: {message}")
            }
        })?;
        Ok(Schema {
            path: path.to_owned(),
            validator: Arc::new(validator),
        })
    }

    /// The file the schema was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks `doc`.
    ///
    /// # Errors
    ///
    /// The first failure as `at PATH: MESSAGE`, PATH a JSON Pointer into
    /// the document (`/` for the whole document).
    pub fn check(&self, doc: &serde_json::Value) -> Result<(), String> {
        match self.validator.validate(doc) {
            Ok(()) => Ok(()),
            Err(err) => {
                let at = err.instance_path().as_str();
                let at = if at.is_empty() { "/" } else { at };
                Err(format!(
                    "does not match the schema {}: at {at}: {}",
                    self.path.display(),
                    shorten(&err.to_string())
                ))
            }
        }
    }

    /// The check as a feed validator, for
    /// [`FeedBuilder::validator`](celer::feed::FeedBuilder::validator).
    pub fn into_validator(
        self,
    ) -> impl Fn(&serde_json::Value) -> Result<(), String> + Send + Sync + 'static {
        move |doc| self.check(doc)
    }
}

/// `message` cut to [`MAX_MESSAGE_CHARS`].
fn shorten(message: &str) -> String {
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((end, _)) => format!("{}…", &message[..end]),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::{MAX_MESSAGE_CHARS, Schema};

    fn schema() -> Schema {
        Schema::from_value(
            Path::new("s.json"),
            &json!({
                "type": "object",
                "required": ["scores"],
                "properties": {"scores": {"type": "array", "items": {"type": "integer"}}}
            }),
        )
        .unwrap()
    }

    #[test]
    fn a_matching_document_passes() {
        assert_eq!(schema().check(&json!({"scores": [1, 2]})), Ok(()));
    }

    #[test]
    fn the_first_failure_names_its_location() {
        let err = schema().check(&json!({"scores": [1, "two"]})).unwrap_err();
        assert!(err.contains("s.json"), "{err}");
        assert!(err.contains("at /scores/1:"), "{err}");
        assert!(err.contains("not of type \"integer\""), "{err}");
        let err = schema().check(&json!([])).unwrap_err();
        assert!(err.contains("at /:"), "{err}");
    }

    #[test]
    fn an_invalid_schema_is_refused() {
        let err = Schema::from_value(Path::new("s.json"), &json!({"type": "nothing"})).unwrap_err();
        assert!(err.starts_with("not a valid JSON Schema"), "{err}");
        let err = Schema::from_value(
            Path::new("s.json"),
            &json!({"$ref": "https://example.com/other.json"}),
        )
        .unwrap_err();
        assert!(err.contains("example.com"), "{err}");
    }

    #[test]
    fn long_messages_are_cut() {
        let big: Vec<String> = (0..1000).map(|n| format!("item{n}")).collect();
        let err = schema().check(&json!(big)).unwrap_err();
        assert!(err.ends_with('…'), "{err}");
        assert!(err.chars().count() < MAX_MESSAGE_CHARS + 100, "{err}");
    }
}

//! Templates that escape by default: [minijinja](https://docs.rs/minijinja)
//! with the escaping chosen by the template's file type, embedded in the
//! binary or loaded from a directory (reloaded on change in development),
//! and errors that name the template and the line.
//!
//! | file type | autoescape | `Content-Type` of [`Rendered`] |
//! |---|---|---|
//! | `.html`, `.htm` | HTML (`<`, `>`, `&`, `"`, `'`, `/`) | `text/html; charset=utf-8` |
//! | `.xml`, `.svg` | HTML (the same entities are XML's) | `application/xml` / `image/svg+xml` |
//! | `.js`, `.json` | JSON: a value prints as a JSON literal with `<`, `>`, `&`, `'` as `\u00XX` | `text/javascript` / `application/json` |
//! | anything else | none | `text/plain; charset=utf-8` (`.css`: `text/css`) |
//!
//! A trailing `.j2` or `.jinja` is ignored when choosing (`page.html.j2`
//! is HTML).
//!
//! # What autoescape protects, and what it does not
//!
//! HTML escaping makes a value safe **as text** and **inside a quoted
//! attribute** (`title="{{ v }}"`): it cannot close the element, the
//! attribute or open a tag. It does not make these safe:
//!
//! - **Unquoted attributes** (`title={{ v }}`): a space in the value starts
//!   a new attribute (`x onmouseover=alert(1)`). Always quote attributes.
//! - **URLs** (`href="{{ v }}"`): `javascript:alert(1)` contains nothing to
//!   escape and runs when clicked. Pass user-given URLs through the
//!   [`url`](fn@url) filter (`href="{{ v|url }}"`), which lets through only
//!   relative URLs and `http`, `https` and `mailto` ones.
//! - **Script and style contexts** (`<script>var x = "{{ v }}"</script>`):
//!   entities are not decoded inside `<script>`, and JavaScript's own
//!   quoting is not HTML's. Put data into scripts with `tojson`
//!   (`var x = {{ v|tojson }};`), which writes a JSON literal with `<`, `>`,
//!   `&` and `'` escaped, so `</script>` cannot end the element; or better,
//!   in a `data-` attribute read by a script file, which a strict
//!   Content-Security-Policy allows.
//! - `|safe` and `{% autoescape false %}` turn escaping off: never on
//!   anything a user gave.
//!
//! # Example
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use celer::template::Templates;
//! use celer::{App, Error, Request};
//!
//! async fn post(req: Request) -> Result<celer::template::Rendered, Error> {
//!     let text = req.query_param("text").unwrap_or_default();
//!     req.state::<Templates>()?.render("post.html", serde_json::json!({ "text": text }))
//! }
//!
//! let templates = Templates::embedded(&[
//!     ("post.html", "<p title=\"{{ text }}\">{{ text }}</p>"),
//! ]).unwrap();
//! let mut app = App::new();
//! app.state(templates);
//! app.get("/post", post);
//! let res = celer::test::TestClient::new(app).get("/post?text=%3Cb%3E%22hi").await;
//! assert_eq!(res.header("content-type"), Some("text/html; charset=utf-8"));
//! assert_eq!(res.text(), "<p title=\"&lt;b&gt;&quot;hi\">&lt;b&gt;&quot;hi</p>");
//! # });
//! ```
//!
//! # Limits
//!
//! | limit | default | at the limit |
//! |---|---|---|
//! | [`MAX_TEMPLATES`] | 10,000 files in a directory | [`TemplateError`] when loading |
//! | [`MAX_TEMPLATE_BYTES`] | 4 MiB per file | [`TemplateError`] when loading |
//! | [`MAX_DEPTH`] | 16 levels of subdirectories | deeper ones are not read; [`TemplateError`] |
//!
//! [`filter`] has middleware that transforms whole response bodies.
//!
//! Why minijinja: `docs/decisions/127-templates.md`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use http::HeaderValue;
use http::header::CONTENT_TYPE;
use minijinja::{AutoEscape, Environment, Output, State, Value};

use crate::response::{IntoResponse, Response};
use crate::{Body, Error};

pub use minijinja;

pub mod filter;

/// Most template files read from a directory.
pub const MAX_TEMPLATES: usize = 10_000;

/// Largest template file read from a directory, bytes.
pub const MAX_TEMPLATE_BYTES: u64 = 4 * 1024 * 1024;

/// Deepest subdirectory read from a template directory.
pub const MAX_DEPTH: usize = 16;

/// What [`url`](fn@url) puts in place of a URL it refuses: a URL that
/// goes nowhere when followed.
pub const REFUSED_URL: &str = "about:invalid#refused";

/// A template failed to load (a syntax error, an unreadable file, a limit)
/// or to render. Its `Display` names the template and the line:
/// `post.html:3: undefined value (in post.html:3)`.
#[derive(Debug)]
pub struct TemplateError {
    template: Option<String>,
    line: Option<usize>,
    message: String,
}

impl TemplateError {
    fn other(template: Option<&str>, message: impl Into<String>) -> Self {
        TemplateError {
            template: template.map(str::to_owned),
            line: None,
            message: message.into(),
        }
    }

    fn from_minijinja(err: &minijinja::Error, fallback: &str) -> Self {
        let mut message = err.to_string();
        let mut source = std::error::Error::source(err);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        TemplateError {
            template: Some(err.name().unwrap_or(fallback).to_owned()),
            line: err.line(),
            message,
        }
    }

    /// The template the error is in, when known.
    pub fn template(&self) -> Option<&str> {
        self.template.as_deref()
    }

    /// The 1-based line in [`TemplateError::template`], when known.
    pub fn line(&self) -> Option<usize> {
        self.line
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.template, self.line) {
            (Some(t), Some(l)) => write!(f, "template {t}:{l}: {}", self.message),
            (Some(t), None) => write!(f, "template {t}: {}", self.message),
            _ => write!(f, "template: {}", self.message),
        }
    }
}

impl std::error::Error for TemplateError {}

/// What a template's name says about its content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Html,
    Xml,
    Svg,
    Js,
    Json,
    Css,
    Text,
}

fn kind(name: &str) -> Kind {
    let name = name
        .strip_suffix(".j2")
        .or_else(|| name.strip_suffix(".jinja"))
        .unwrap_or(name);
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("html" | "htm") => Kind::Html,
        Some("xml") => Kind::Xml,
        Some("svg") => Kind::Svg,
        Some("js" | "mjs") => Kind::Js,
        Some("json") => Kind::Json,
        Some("css") => Kind::Css,
        _ => Kind::Text,
    }
}

impl Kind {
    fn escape(self) -> AutoEscape {
        match self {
            Kind::Html | Kind::Xml | Kind::Svg => AutoEscape::Html,
            Kind::Js | Kind::Json => AutoEscape::Json,
            Kind::Css | Kind::Text => AutoEscape::None,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Kind::Html => "text/html; charset=utf-8",
            Kind::Xml => "application/xml; charset=utf-8",
            Kind::Svg => "image/svg+xml; charset=utf-8",
            Kind::Js => "text/javascript; charset=utf-8",
            Kind::Json => "application/json",
            Kind::Css => "text/css; charset=utf-8",
            Kind::Text => "text/plain; charset=utf-8",
        }
    }
}

/// Writes `s` as a JSON string (or any JSON text) with `<`, `>`, `&` and
/// `'` as `\u00XX` escapes: safe inside `<script>`, an HTML attribute in
/// single or double quotes, and JavaScript.
fn push_json_safe(out: &mut String, json: &str) {
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\'' => out.push_str("\\u0027"),
            // Line and paragraph separators end a JavaScript string literal
            // in engines before ES2019.
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
}

fn to_json_safe(value: &Value) -> Result<String, minijinja::Error> {
    let json = serde_json::to_string(value).map_err(|e| {
        minijinja::Error::new(
            minijinja::ErrorKind::BadSerialization,
            "value cannot be written as JSON",
        )
        .with_source(e)
    })?;
    let mut out = String::with_capacity(json.len());
    push_json_safe(&mut out, &json);
    Ok(out)
}

/// The formatter: JSON contexts get the HTML-safe JSON; the others
/// minijinja's own escaping.
fn formatter(
    out: &mut Output<'_>,
    state: &State<'_, '_>,
    value: &Value,
) -> Result<(), minijinja::Error> {
    if state.auto_escape() == AutoEscape::Json && !value.is_safe() {
        let json = to_json_safe(value)?;
        return out.write_str(&json).map_err(minijinja::Error::from);
    }
    minijinja::escape_formatter(out, state, value)
}

/// The `tojson` filter: a JSON literal with `<`, `>`, `&`, `'`, U+2028
/// and U+2029 escaped, marked safe (it is, in HTML text, quoted attributes
/// and scripts).
fn tojson(value: &Value) -> Result<Value, minijinja::Error> {
    Ok(Value::from_safe_string(to_json_safe(value)?))
}

/// The `url` filter: `value` when it is a relative URL or an `http`,
/// `https` or `mailto` one, else [`REFUSED_URL`]. The result is still
/// escaped by the template's autoescape.
///
/// Schemes are found as a browser finds them: leading spaces and control
/// characters are skipped, and tabs and newlines anywhere removed (WHATWG
/// URL §4.4), so `" java\tscript:alert(1)"` is refused too.
///
/// ```
/// use celer::template::{url, REFUSED_URL};
/// assert_eq!(url("https://example.com/a?b"), "https://example.com/a?b");
/// assert_eq!(url("/posts/7"), "/posts/7");
/// assert_eq!(url("JavaScript:alert(1)"), REFUSED_URL);
/// assert_eq!(url(" java\tscript:alert(1)"), REFUSED_URL);
/// assert_eq!(url("data:text/html,<script>alert(1)</script>"), REFUSED_URL);
/// ```
pub fn url(value: &str) -> String {
    let cleaned: String = value
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    // A scheme is what comes before the first ':' when no '/', '?' or '#'
    // comes before it (RFC 3986 §4.2: else it is a relative reference).
    let scheme_end = cleaned.find([':', '/', '?', '#']);
    match scheme_end {
        Some(i) if cleaned.as_bytes()[i] == b':' => {
            let scheme = cleaned[..i].to_ascii_lowercase();
            if matches!(scheme.as_str(), "http" | "https" | "mailto") {
                value.to_owned()
            } else {
                REFUSED_URL.to_owned()
            }
        }
        _ => value.to_owned(),
    }
}

type Configure = Arc<dyn Fn(&mut Environment<'static>) + Send + Sync>;

/// Where the templates come from.
enum Source {
    Embedded,
    Dir { dir: PathBuf, reload: bool },
}

/// A snapshot of a template directory: names, sizes and modification
/// times; a different one means something changed.
type Stamp = Vec<(String, u64, Option<SystemTime>)>;

struct Inner {
    source: Source,
    configure: Option<Configure>,
    env: RwLock<Arc<Environment<'static>>>,
    stamp: Mutex<Stamp>,
}

/// A set of templates, shared (cloning is cheap): put it in the app's
/// state and render from handlers. See the [module](self) docs.
#[derive(Clone)]
pub struct Templates {
    inner: Arc<Inner>,
}

impl fmt::Debug for Templates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env = self.env();
        let names: Vec<&str> = env.templates().map(|(n, _)| n).collect();
        f.debug_struct("Templates").field("names", &names).finish()
    }
}

fn new_env(configure: Option<&Configure>) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|name| kind(name).escape());
    env.set_formatter(formatter);
    env.add_filter("tojson", tojson);
    env.add_filter("url", |v: &str| url(v));
    if let Some(configure) = configure {
        configure(&mut env);
    }
    env
}

fn compile(
    templates: &[(String, String)],
    configure: Option<&Configure>,
) -> Result<Environment<'static>, TemplateError> {
    let mut env = new_env(configure);
    for (name, src) in templates {
        env.add_template_owned(name.clone(), src.clone())
            .map_err(|e| TemplateError::from_minijinja(&e, name))?;
    }
    Ok(env)
}

/// Reads the template directory: `(name, source)` pairs with names
/// relative to `dir`, `/`-separated; hidden files and directories skipped.
fn read_dir(dir: &Path) -> Result<(Vec<(String, String)>, Stamp), TemplateError> {
    let mut files = Vec::new();
    let mut stamp = Vec::new();
    walk(dir, "", 0, &mut files, &mut stamp)?;
    stamp.sort();
    Ok((files, stamp))
}

fn walk(
    dir: &Path,
    prefix: &str,
    depth: usize,
    files: &mut Vec<(String, String)>,
    stamp: &mut Stamp,
) -> Result<(), TemplateError> {
    if depth > MAX_DEPTH {
        return Err(TemplateError::other(
            None,
            format!(
                "{} is deeper than {MAX_DEPTH} directories (MAX_DEPTH)",
                dir.display()
            ),
        ));
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|e| TemplateError::other(None, format!("cannot read {}: {e}", dir.display())))?;
    for entry in entries {
        let entry = entry.map_err(|e| {
            TemplateError::other(None, format!("cannot read {}: {e}", dir.display()))
        })?;
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue; // not UTF-8: no template name can reach it
        };
        if file_name.starts_with('.') {
            continue;
        }
        let name = format!("{prefix}{file_name}");
        let path = entry.path();
        let meta = std::fs::metadata(&path).map_err(|e| {
            TemplateError::other(Some(&name), format!("cannot read {}: {e}", path.display()))
        })?;
        if meta.is_dir() {
            walk(&path, &format!("{name}/"), depth + 1, files, stamp)?;
            continue;
        }
        if !meta.is_file() {
            continue;
        }
        if files.len() >= MAX_TEMPLATES {
            return Err(TemplateError::other(
                None,
                format!(
                    "more than {MAX_TEMPLATES} templates (MAX_TEMPLATES) in {}",
                    dir.display()
                ),
            ));
        }
        if meta.len() > MAX_TEMPLATE_BYTES {
            return Err(TemplateError::other(
                Some(&name),
                format!(
                    "{} bytes, over MAX_TEMPLATE_BYTES ({MAX_TEMPLATE_BYTES})",
                    meta.len()
                ),
            ));
        }
        let src = std::fs::read_to_string(&path).map_err(|e| {
            TemplateError::other(Some(&name), format!("cannot read {}: {e}", path.display()))
        })?;
        stamp.push((name.clone(), meta.len(), meta.modified().ok()));
        files.push((name, src));
    }
    Ok(())
}

fn stamp_of(dir: &Path) -> Result<Stamp, TemplateError> {
    // A cheap pass: metadata only. Reading sources happens on a change.
    fn go(dir: &Path, prefix: &str, depth: usize, out: &mut Stamp) -> std::io::Result<()> {
        if depth > MAX_DEPTH || out.len() > MAX_TEMPLATES {
            return Ok(()); // the full read reports the limit
        }
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let file_name = entry.file_name();
            let Some(file_name) = file_name.to_str() else {
                continue;
            };
            if file_name.starts_with('.') {
                continue;
            }
            let name = format!("{prefix}{file_name}");
            let meta = std::fs::metadata(entry.path())?;
            if meta.is_dir() {
                go(&entry.path(), &format!("{name}/"), depth + 1, out)?;
            } else if meta.is_file() {
                out.push((name, meta.len(), meta.modified().ok()));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    go(dir, "", 0, &mut out)
        .map_err(|e| TemplateError::other(None, format!("cannot read {}: {e}", dir.display())))?;
    out.sort();
    Ok(out)
}

/// Builds [`Templates`] from a directory: [`Templates::dir`].
pub struct DirBuilder {
    dir: PathBuf,
    reload: bool,
    configure: Option<Configure>,
}

impl fmt::Debug for DirBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirBuilder")
            .field("dir", &self.dir)
            .field("reload", &self.reload)
            .finish()
    }
}

impl DirBuilder {
    /// With `true`, every render first checks the directory (names, sizes,
    /// modification times) and reloads all templates when something
    /// changed: for development (`reload(cfg!(debug_assertions))`). A
    /// reload that fails (a syntax error) makes renders fail with that
    /// error, naming the template and the line, until it is fixed.
    pub fn reload(mut self, on: bool) -> Self {
        self.reload = on;
        self
    }

    /// Runs `f` on the environment after each (re)load: add filters,
    /// functions, globals.
    pub fn configure(
        mut self,
        f: impl Fn(&mut Environment<'static>) + Send + Sync + 'static,
    ) -> Self {
        self.configure = Some(Arc::new(f));
        self
    }

    /// Reads and compiles every template: a syntax error is a
    /// [`TemplateError`] naming the template and the line.
    pub fn load(self) -> Result<Templates, TemplateError> {
        let (files, stamp) = read_dir(&self.dir)?;
        let env = compile(&files, self.configure.as_ref())?;
        Ok(Templates {
            inner: Arc::new(Inner {
                source: Source::Dir {
                    dir: self.dir,
                    reload: self.reload,
                },
                configure: self.configure,
                env: RwLock::new(Arc::new(env)),
                stamp: Mutex::new(stamp),
            }),
        })
    }
}

impl Templates {
    /// Templates compiled into the binary, as `(name, source)` pairs
    /// (`include_str!` them). A syntax error is a [`TemplateError`] naming
    /// the template and the line.
    ///
    /// ```
    /// let t = celer::template::Templates::embedded(&[("a.txt", "{% if %}")]);
    /// assert!(t.unwrap_err().to_string().starts_with("template a.txt:1:"));
    /// ```
    pub fn embedded(templates: &[(&str, &str)]) -> Result<Self, TemplateError> {
        Self::embedded_with(templates, None)
    }

    /// [`Templates::embedded`], running `f` on the environment first (to
    /// add filters, functions, globals).
    pub fn embedded_configured(
        templates: &[(&str, &str)],
        f: impl Fn(&mut Environment<'static>) + Send + Sync + 'static,
    ) -> Result<Self, TemplateError> {
        Self::embedded_with(templates, Some(Arc::new(f)))
    }

    fn embedded_with(
        templates: &[(&str, &str)],
        configure: Option<Configure>,
    ) -> Result<Self, TemplateError> {
        let owned: Vec<(String, String)> = templates
            .iter()
            .map(|(n, s)| ((*n).to_owned(), (*s).to_owned()))
            .collect();
        let env = compile(&owned, configure.as_ref())?;
        Ok(Templates {
            inner: Arc::new(Inner {
                source: Source::Embedded,
                configure,
                env: RwLock::new(Arc::new(env)),
                stamp: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Templates read from `dir` (names are paths relative to it, with
    /// `/`); finish with [`DirBuilder::load`].
    pub fn dir(dir: impl Into<PathBuf>) -> DirBuilder {
        DirBuilder {
            dir: dir.into(),
            reload: false,
            configure: None,
        }
    }

    fn env(&self) -> Arc<Environment<'static>> {
        self.inner
            .env
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reloads a directory's templates when they changed (with
    /// [`DirBuilder::reload`] on); nothing otherwise.
    fn refresh(&self) -> Result<(), TemplateError> {
        let Source::Dir { dir, reload: true } = &self.inner.source else {
            return Ok(());
        };
        let mut stamp = self.inner.stamp.lock().unwrap_or_else(|e| e.into_inner());
        let now = stamp_of(dir)?;
        if now == *stamp {
            return Ok(());
        }
        let (files, read_stamp) = read_dir(dir)?;
        let env = compile(&files, self.inner.configure.as_ref())?;
        *self.inner.env.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(env);
        *stamp = read_stamp;
        tracing::info!(dir = %dir.display(), "templates reloaded");
        Ok(())
    }

    /// Renders `name` with `ctx` (anything `serde::Serialize`) to a string.
    pub fn render_string(
        &self,
        name: &str,
        ctx: impl serde::Serialize,
    ) -> Result<String, TemplateError> {
        self.refresh()?;
        let env = self.env();
        let template = env
            .get_template(name)
            .map_err(|e| TemplateError::from_minijinja(&e, name))?;
        template
            .render(Value::from_serialize(&ctx))
            .map_err(|e| TemplateError::from_minijinja(&e, name))
    }

    /// Renders `name` with `ctx` into a response whose `Content-Type`
    /// follows the name (see the [module](self) docs). A failure is a
    /// `500` whose log line names the template and the line (the client
    /// sees only `Internal Server Error`).
    pub fn render(&self, name: &str, ctx: impl serde::Serialize) -> Result<Rendered, Error> {
        match self.render_string(name, ctx) {
            Ok(body) => Ok(Rendered {
                body,
                content_type: kind(name).content_type(),
            }),
            Err(e) => Err(Error::internal(e)),
        }
    }
}

/// A rendered template: the body and the `Content-Type` its name gives.
#[derive(Debug)]
pub struct Rendered {
    body: String,
    content_type: &'static str,
}

impl Rendered {
    /// The rendered text.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// The `Content-Type` it is sent with.
    pub fn content_type(&self) -> &'static str {
        self.content_type
    }
}

impl IntoResponse for Rendered {
    fn into_response(self) -> Response {
        let mut res = Response::new(Body::from(self.body));
        res.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_name() {
        assert_eq!(kind("a.html"), Kind::Html);
        assert_eq!(kind("dir/a.HTM"), Kind::Html);
        assert_eq!(kind("a.html.j2"), Kind::Html);
        assert_eq!(kind("feed.xml"), Kind::Xml);
        assert_eq!(kind("app.js"), Kind::Js);
        assert_eq!(kind("data.json.jinja"), Kind::Json);
        assert_eq!(kind("notes.txt"), Kind::Text);
        assert_eq!(kind("Makefile"), Kind::Text);
    }

    #[test]
    fn url_filter_schemes() {
        for ok in [
            "http://a/",
            "HTTPS://a/",
            "mailto:a@b",
            "/x:y",
            "x/y:z",
            "?q=a:b",
            "#a:b",
            "",
            "rel",
        ] {
            assert_eq!(url(ok), ok, "{ok:?}");
        }
        for bad in [
            "javascript:alert(1)",
            "\u{1}javascript:alert(1)",
            "jav\nascript:alert(1)",
            "vbscript:x",
            "data:text/html,x",
            "file:///etc/passwd",
        ] {
            assert_eq!(url(bad), REFUSED_URL, "{bad:?}");
        }
    }
}

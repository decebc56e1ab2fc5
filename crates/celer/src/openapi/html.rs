//! The docs page: the document's operations and schemas as one HTML page,
//! with no script and nothing fetched from elsewhere.

use std::fmt::Write;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::files::listing::escape;

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:60rem;\
padding:1rem 1.5rem;color:#1d1f21}h1{margin-bottom:.2rem}code,pre{font:13px/1.4 ui-monospace,\
monospace}pre{background:#f5f5f5;padding:.6rem;overflow-x:auto;border-radius:4px}\
section.op{border:1px solid #ddd;border-radius:6px;margin:1rem 0;padding:.2rem 1rem}\
.method{display:inline-block;min-width:4.5rem;font-weight:700;text-transform:uppercase}\
.get{color:#0a6}.post{color:#06c}.put,.patch{color:#b60}.delete{color:#c22}\
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;text-align:left;\
padding:.25rem .5rem;vertical-align:top;overflow-wrap:anywhere}.deprecated{text-decoration:line-through}";

/// The page of `doc`, linking to the JSON at `json_url`.
pub(crate) fn page(doc: &Value, json_url: &str) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let title = doc["info"]["title"].as_str().unwrap_or("API");
    let version = doc["info"]["version"].as_str().unwrap_or("");
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{t}</title><style>{STYLE}</style></head><body>\
         <h1>{t} <small>{v}</small></h1>",
        t = escape(title),
        v = escape(version),
    );
    if let Some(description) = doc["info"]["description"].as_str() {
        let _ = write!(out, "<p>{}</p>", escape(description));
    }
    let _ = write!(
        out,
        "<p>OpenAPI {} document: <a href=\"{u}\">{u}</a></p><h2>Operations</h2>",
        escape(doc["openapi"].as_str().unwrap_or("")),
        u = escape(json_url),
    );
    if let Some(paths) = doc["paths"].as_object() {
        for (path, item) in paths {
            let Some(item) = item.as_object() else {
                continue;
            };
            for (method, op) in item {
                operation(&mut out, path, method, op);
            }
        }
    }
    if let Some(schemas) = doc["components"]["schemas"].as_object() {
        out.push_str("<h2>Schemas</h2>");
        for (name, schema) in schemas {
            let _ = write!(
                out,
                "<h3 id=\"schema-{n}\"><code>{n}</code></h3>{}",
                schema_html(schema),
                n = escape(name),
            );
        }
    }
    out.push_str("</body></html>\n");
    out
}

fn operation(out: &mut String, path: &str, method: &str, op: &Value) {
    let class = match op["deprecated"].as_bool() {
        Some(true) => " class=\"deprecated\"",
        _ => "",
    };
    let _ = write!(
        out,
        "<section class=\"op\"><h3{class}><span class=\"method {m}\">{m}</span> \
         <code>{p}</code></h3>",
        m = escape(method),
        p = escape(path),
    );
    if let Some(summary) = op["summary"].as_str() {
        let _ = write!(out, "<p><strong>{}</strong></p>", escape(summary));
    }
    if let Some(description) = op["description"].as_str() {
        let _ = write!(out, "<p>{}</p>", escape(description));
    }
    if let Some(id) = op["operationId"].as_str() {
        let _ = write!(out, "<p>operationId: <code>{}</code></p>", escape(id));
    }
    if let Some(params) = op["parameters"].as_array() {
        out.push_str(
            "<h4>Parameters</h4><table><tr><th>name</th><th>in</th><th>required</th>\
             <th>schema</th><th>description</th></tr>",
        );
        for p in params {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(p["name"].as_str().unwrap_or("")),
                escape(p["in"].as_str().unwrap_or("")),
                if p["required"].as_bool() == Some(true) {
                    "yes"
                } else {
                    "no"
                },
                inline_schema(&p["schema"]),
                escape(p["description"].as_str().unwrap_or("")),
            );
        }
        out.push_str("</table>");
    }
    if let Some(body) = op["requestBody"].as_object() {
        let required = body.get("required").and_then(Value::as_bool) == Some(true);
        let _ = write!(
            out,
            "<h4>Request body{}</h4>",
            if required { "" } else { " (optional)" }
        );
        if let Some(content) = body.get("content").and_then(Value::as_object) {
            for (media, m) in content {
                let _ = write!(out, "<p><code>{}</code></p>", escape(media));
                if let Some(schema) = m.get("schema") {
                    out.push_str(&schema_html(schema));
                }
            }
        }
    }
    if let Some(responses) = op["responses"].as_object() {
        out.push_str(
            "<h4>Responses</h4><table><tr><th>status</th><th>description</th>\
             <th>body</th><th>headers</th></tr>",
        );
        for (status, r) in responses {
            let mut body = String::new();
            if let Some(content) = r["content"].as_object() {
                for (media, m) in content {
                    let _ = write!(body, "<code>{}</code> ", escape(media));
                    if let Some(schema) = m.get("schema") {
                        body.push_str(&inline_schema(schema));
                    }
                    body.push_str("<br>");
                }
            }
            let headers = r["headers"]
                .as_object()
                .map(|h| {
                    h.keys()
                        .map(|k| format!("<code>{}</code>", escape(k)))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td>{body}</td><td>{headers}</td></tr>",
                escape(status),
                escape(r["description"].as_str().unwrap_or("")),
            );
        }
        out.push_str("</table>");
    }
    out.push_str("</section>");
}

/// A schema on one line: a link for a reference, compact JSON otherwise.
fn inline_schema(schema: &Value) -> String {
    link_refs(&escape(&serde_json::to_string(schema).unwrap_or_default()))
}

/// A schema as indented JSON, references linked.
fn schema_html(schema: &Value) -> String {
    let text = serde_json::to_string_pretty(schema).unwrap_or_default();
    format!("<pre>{}</pre>", link_refs(&escape(&text)))
}

/// Links `"#/components/schemas/Name"` (escaped) to the schema's heading.
fn link_refs(escaped: &str) -> String {
    static REF: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"&quot;#/components/schemas/([A-Za-z0-9._-]+)&quot;")
            .unwrap_or_else(|_| unreachable!("the pattern is valid"))
    });
    REF.replace_all(
        escaped,
        "&quot;<a href=\"#schema-$1\">#/components/schemas/$1</a>&quot;",
    )
    .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_links() {
        let doc = serde_json::json!({
            "openapi": "3.1.0",
            "info": { "title": "<T>", "version": "1" },
            "paths": { "/a": { "get": {
                "deprecated": true,
                "responses": { "200": { "description": "ok", "content": {
                    "application/json": { "schema": { "$ref": "#/components/schemas/A" } }
                } } }
            } } },
            "components": { "schemas": { "A": { "type": "object" } } }
        });
        let html = page(&doc, "/openapi.json");
        assert!(html.contains("<title>&lt;T&gt;</title>"));
        assert!(html.contains("<a href=\"#schema-A\">#/components/schemas/A</a>"));
        assert!(html.contains("id=\"schema-A\""));
        assert!(html.contains("<h3 class=\"deprecated\"><span class=\"method get\">get</span>"));
        assert!(!html.contains("<script"));
    }
}

//! Walks the route table into OpenAPI paths, operations and schemas.

use std::collections::{HashMap, HashSet};

use http::Method;
use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::operation::{Content, Location, Operation, SchemaSource};
use crate::app::{Route, Shared};
use crate::router::{ParamKind, Piece, Rule, Segment, Tail};

/// Where the schemas of request types go, and where their references
/// point.
const SCHEMAS: &str = "/components/schemas";
/// Where the schemas of response types go while the document is built;
/// moved to [`SCHEMAS`] at the end (see [`merge_schemas`]).
const SERIALIZE: &str = "/components/x-serialize";

/// The operations OpenAPI 3.1 has a field for (§4.8.9), in its order.
const METHODS: [(Method, &str); 8] = [
    (Method::GET, "get"),
    (Method::PUT, "put"),
    (Method::POST, "post"),
    (Method::DELETE, "delete"),
    (Method::OPTIONS, "options"),
    (Method::HEAD, "head"),
    (Method::PATCH, "patch"),
    (Method::TRACE, "trace"),
];

/// A document without its `info`: paths relative to where the app is
/// mounted, and the schemas.
#[derive(Clone)]
pub(crate) struct Built {
    pub(crate) paths: Vec<(String, Map<String, Value>)>,
    pub(crate) schemas: Map<String, Value>,
}

/// A rule as a path template with its parameters' schemas.
struct Template {
    path: String,
    params: Vec<(String, Value)>,
}

struct Generators {
    de: SchemaGenerator,
    ser: SchemaGenerator,
}

pub(crate) fn build(shared: &Shared) -> Built {
    let settings = |path: &'static str| {
        SchemaSettings::draft2020_12().with(|s| {
            s.definitions_path = path.into();
            s.meta_schema = None;
        })
    };
    let mut gens = Generators {
        de: settings(SCHEMAS).for_deserialize().into_generator(),
        ser: settings(SERIALIZE).for_serialize().into_generator(),
    };
    let mut paths: Vec<(String, Map<String, Value>)> = Vec::new();
    // Template with the parameter names left out -> index in `paths`.
    let mut by_shape: HashMap<String, usize> = HashMap::new();
    let mut ids = HashSet::new();
    let undescribed = Operation::default();
    for route in &shared.routes {
        let op = route.doc.as_deref().unwrap_or(&undescribed);
        if op.hidden {
            continue;
        }
        let Some(mut template) = template(&route.rule) else {
            continue;
        };
        let idx = *by_shape.entry(shape(&template.path)).or_insert_with(|| {
            paths.push((template.path.clone(), Map::new()));
            paths.len() - 1
        });
        // Same shape, other names: the path's names, in order.
        let names = param_names(&paths[idx].0);
        for ((name, _), first) in template.params.iter_mut().zip(names) {
            *name = first;
        }
        let methods: Vec<&str> = METHODS
            .iter()
            .filter(|(method, _)| route.methods.contains(method))
            .map(|(_, field)| *field)
            .collect();
        for field in &methods {
            let item = &mut paths[idx].1;
            if item.contains_key(*field) {
                continue;
            }
            let id = operation_id(route, op, field, methods.len(), &mut ids);
            let operation = operation(op, id, &template.params, &mut gens);
            item.insert((*field).into(), Value::Object(operation));
        }
    }
    paths.retain(|(_, item)| !item.is_empty());
    let schemas = merge_schemas(&mut gens, &mut paths);
    Built { paths, schemas }
}

/// `/a/{x}/b/{y}.{z}` -> `/a/{}/b/{}.{}`.
fn shape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut inside = false;
    for c in path.chars() {
        match c {
            '{' => {
                inside = true;
                out.push_str("{}");
            }
            '}' => inside = false,
            c if !inside => out.push(c),
            _ => {}
        }
    }
    out
}

fn param_names(path: &str) -> Vec<String> {
    path.split('{')
        .skip(1)
        .filter_map(|part| part.split_once('}').map(|(name, _)| name.to_owned()))
        .collect()
}

/// The template of a rule, `None` for a regex route.
fn template(rule: &Rule) -> Option<Template> {
    let mut path = String::new();
    let mut params = Vec::new();
    for segment in &rule.segments {
        path.push('/');
        match segment {
            Segment::Static(text) => path.push_str(text),
            Segment::Param { name, kind } => {
                path.push_str(&format!("{{{name}}}"));
                params.push((name.to_string(), kind_schema(kind)));
            }
            Segment::Mixed(mixed) => {
                for piece in &mixed.pieces {
                    match piece {
                        Piece::Literal(text) => path.push_str(text),
                        Piece::Param { name, kind } => {
                            path.push_str(&format!("{{{name}}}"));
                            params.push((name.to_string(), kind_schema(kind)));
                        }
                    }
                }
            }
        }
    }
    match &rule.tail {
        None => {}
        Some(Tail::Path { name }) => {
            path.push_str(&format!("/{{{name}}}"));
            params.push((name.to_string(), kind_schema(&ParamKind::Path)));
        }
        Some(Tail::Regex(_)) => return None,
    }
    Some(Template { path, params })
}

/// The schema of a rule parameter's type: what the router matches.
fn kind_schema(kind: &ParamKind) -> Value {
    match kind {
        ParamKind::Int => json!({
            "type": "integer", "format": "int64", "minimum": i64::MIN, "maximum": i64::MAX,
        }),
        ParamKind::Uint => json!({ "type": "integer", "minimum": 0, "maximum": u64::MAX }),
        ParamKind::Str => json!({ "type": "string", "minLength": 1 }),
        ParamKind::Uuid => json!({
            "type": "string", "format": "uuid", "pattern": format!("^{}$", kind.pattern()),
        }),
        ParamKind::Path => json!({
            "type": "string",
            "description": "The rest of the path; a `/` in it is sent as is or as `%2F`.",
        }),
        ParamKind::Custom(_) => json!({
            "type": "string",
            "pattern": format!("^(?:{})$", kind.pattern()),
            "x-celer-type": kind.name(),
        }),
    }
}

fn operation_id(
    route: &Route,
    op: &Operation,
    field: &str,
    n_methods: usize,
    taken: &mut HashSet<String>,
) -> Option<String> {
    let base = match (&op.operation_id, route.name()) {
        (Some(id), _) if n_methods == 1 => id.clone(),
        (Some(id), _) => format!("{id}_{field}"),
        (None, Some(name)) if n_methods == 1 => name.to_owned(),
        (None, Some(name)) => format!("{name}_{field}"),
        (None, None) => return None,
    };
    let mut id = base.clone();
    let mut n = 2;
    while !taken.insert(id.clone()) {
        id = format!("{base}_{n}");
        n += 1;
    }
    Some(id)
}

fn operation(
    op: &Operation,
    id: Option<String>,
    path_params: &[(String, Value)],
    gens: &mut Generators,
) -> Map<String, Value> {
    let mut out = Map::new();
    if !op.tags.is_empty() {
        out.insert("tags".into(), json!(op.tags));
    }
    if let Some(summary) = &op.summary {
        out.insert("summary".into(), summary.clone().into());
    }
    if let Some(description) = &op.description {
        out.insert("description".into(), description.clone().into());
    }
    if let Some(id) = id {
        out.insert("operationId".into(), id.into());
    }
    let mut params: Vec<Value> = path_params
        .iter()
        .map(|(name, schema)| json!({ "name": name, "in": "path", "required": true, "schema": schema }))
        .collect();
    for param in &op.params {
        let mut p = json!({
            "name": param.name,
            "in": match param.location {
                Location::Query => "query",
                Location::Header => "header",
                Location::Cookie => "cookie",
            },
            "required": param.required,
            "schema": scalar(resolve(&mut gens.de, &param.schema)),
        });
        if let Some(description) = &param.description {
            p["description"] = description.clone().into();
        }
        params.push(p);
    }
    for query in &op.query_types {
        params.extend(query_params(&mut gens.de, *query));
    }
    if !params.is_empty() {
        out.insert("parameters".into(), Value::Array(params));
    }
    if let Some(body) = &op.request {
        let mut request = Map::new();
        if let Some(description) = &body.description {
            request.insert("description".into(), description.clone().into());
        }
        request.insert("required".into(), body.required.into());
        request.insert("content".into(), content(&mut gens.de, &body.content));
        out.insert("requestBody".into(), Value::Object(request));
    }
    let mut responses = Map::new();
    for response in &op.responses {
        let key = response
            .status
            .map_or_else(|| "default".to_owned(), |s| s.to_string());
        let mut r = Map::new();
        let description = match response.description.is_empty() {
            true => http::StatusCode::from_u16(response.status.unwrap_or(0))
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("Response"),
            false => &response.description,
        };
        r.insert("description".into(), description.into());
        if !response.headers.is_empty() {
            let mut headers = Map::new();
            for header in &response.headers {
                headers.insert(
                    header.name.clone(),
                    json!({
                        "description": header.description,
                        "schema": resolve(&mut gens.ser, &header.schema),
                    }),
                );
            }
            r.insert("headers".into(), Value::Object(headers));
        }
        if !response.content.is_empty() {
            r.insert("content".into(), content(&mut gens.ser, &response.content));
        }
        responses.insert(key, Value::Object(r));
    }
    if responses.is_empty() {
        responses.insert(
            "default".into(),
            json!({ "description": "Any response: this route does not describe its responses." }),
        );
    }
    out.insert("responses".into(), Value::Object(responses));
    if op.deprecated {
        out.insert("deprecated".into(), true.into());
    }
    out
}

fn resolve(generator: &mut SchemaGenerator, source: &SchemaSource) -> Value {
    match source {
        SchemaSource::Type(make) => make(generator).to_value(),
        SchemaSource::Given(schema) => schema.as_value().clone(),
    }
}

fn content(generator: &mut SchemaGenerator, content: &[Content]) -> Value {
    let mut out = Map::new();
    for c in content {
        let media = match &c.schema {
            Some(schema) => json!({ "schema": resolve(generator, schema) }),
            None => json!({}),
        };
        out.insert(c.media_type.clone(), media);
    }
    Value::Object(out)
}

/// The query parameters of a type: its schema's properties.
fn query_params(generator: &mut SchemaGenerator, make: super::operation::SchemaFn) -> Vec<Value> {
    let schema = make(generator);
    let object = match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let name = reference.rsplit('/').next().unwrap_or_default();
            // The type's own definition stays out of the components: only
            // its properties are parameters.
            generator
                .definitions_mut()
                .remove(name)
                .unwrap_or(Value::Null)
        }
        None => schema.to_value(),
    };
    let required: HashSet<&str> = object["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = object["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, schema)| {
            let mut schema = schema.clone();
            let description = schema.as_object_mut().and_then(|s| s.remove("description"));
            let mut param = json!({
                "name": name,
                "in": "query",
                "required": required.contains(name.as_str()),
                "schema": scalar(schema),
            });
            if let Some(description) = description {
                param["description"] = description;
            }
            param
        })
        .collect()
}

/// A parameter's schema without `null`: a query string or a header has no
/// null, only an absent parameter (an `Option` field).
fn scalar(mut schema: Value) -> Value {
    let Some(object) = schema.as_object_mut() else {
        return schema;
    };
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let single = types.remove(0);
            object.insert("type".into(), single);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(choices)) = object.get_mut(key) {
            choices.retain(|c| c.get("type").and_then(Value::as_str) != Some("null"));
            if choices.len() == 1 {
                let only = choices.remove(0);
                object.remove(key);
                if let Value::Object(only) = only {
                    for (k, v) in only {
                        object.entry(k).or_insert(v);
                    }
                }
            }
        }
    }
    schema
}

/// Moves the response types' schemas to the components: a type whose
/// schema is the same both ways is one schema; one that serializes
/// otherwise than it deserializes keeps its name for requests and is
/// `<name>.Response` for responses. Rewrites the references to match.
fn merge_schemas(
    gens: &mut Generators,
    paths: &mut [(String, Map<String, Value>)],
) -> Map<String, Value> {
    let mut schemas = gens.de.take_definitions(true);
    let ser = gens.ser.take_definitions(true);
    let mut renames = HashMap::new();
    for (name, schema) in &ser {
        let mut same_names = schema.clone();
        rewrite_refs(&mut same_names, &HashMap::new());
        let target = match schemas.get(name) {
            Some(existing) if *existing != same_names => format!("{name}.Response"),
            _ => name.clone(),
        };
        renames.insert(name.clone(), target);
    }
    for (name, mut schema) in ser {
        rewrite_refs(&mut schema, &renames);
        let target = renames.get(&name).cloned().unwrap_or(name);
        schemas.entry(target).or_insert(schema);
    }
    for (_, item) in paths.iter_mut() {
        for operation in item.values_mut() {
            rewrite_refs(operation, &renames);
        }
    }
    for schema in schemas.values_mut() {
        rewrite_refs(schema, &renames);
    }
    schemas
}

/// Points the references to [`SERIALIZE`] at [`SCHEMAS`], renamed by
/// `renames` (unchanged when missing).
fn rewrite_refs(value: &mut Value, renames: &HashMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "$ref"
                    && let Value::String(reference) = v
                    && let Some(name) = reference
                        .strip_prefix('#')
                        .and_then(|r| r.strip_prefix(SERIALIZE))
                        .and_then(|r| r.strip_prefix('/'))
                {
                    let name = renames.get(name).map_or(name, String::as_str);
                    *reference = format!("#{SCHEMAS}/{name}");
                } else {
                    rewrite_refs(v, renames);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite_refs(v, renames)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_ignore_names() {
        assert_eq!(shape("/a/{x}/b/{y}.{z}"), "/a/{}/b/{}.{}");
        assert_eq!(param_names("/a/{x}/b/{y}.{z}"), ["x", "y", "z"]);
    }

    #[test]
    fn scalar_drops_null() {
        assert_eq!(
            scalar(json!({"type": ["integer", "null"], "minimum": 0})),
            json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(
            scalar(json!({"anyOf": [{"$ref": "#/x"}, {"type": "null"}]})),
            json!({"$ref": "#/x"})
        );
    }
}

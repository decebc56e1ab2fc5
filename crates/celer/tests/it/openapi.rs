//! The OpenAPI document from the route table: paths and parameter types
//! from the rules, methods, names, schemas from the handlers' types, the
//! served document and page; checked by `openapi-spec-validator` (PyPI).

use std::collections::BTreeMap;
use std::process::Command;

use celer::openapi::{JsonSchema, OpenApi, json_schema};
use celer::test::TestClient;
use celer::{App, MethodSet, Request};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::support::block_on;

async fn ok(_req: Request) -> &'static str {
    "ok"
}

/// A request body: `deny_unknown_fields`, an optional field, a nested type.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct NewPet {
    /// The pet's name.
    name: String,
    tag: Option<String>,
    owner: Owner,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Owner {
    id: u64,
}

/// Serializes otherwise than it deserializes (`default`): two schemas.
#[derive(Serialize, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Pet {
    id: u64,
    name: String,
    #[serde(default)]
    tag: Option<String>,
    owner: Owner,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Filter {
    /// At most this many.
    limit: Option<u32>,
    /// Required.
    species: String,
}

#[derive(Serialize, JsonSchema)]
#[allow(dead_code)]
struct Problem {
    error: String,
}

/// A type the router matches with a pattern of its own.
struct Slug;

impl std::str::FromStr for Slug {
    type Err = ();
    fn from_str(_: &str) -> Result<Self, ()> {
        Ok(Slug)
    }
}

fn app() -> App {
    let mut app = App::new();
    app.register_type::<Slug>("slug", "[a-z0-9-]+");
    app.get("/pets", ok).name("list_pets").describe(|op| {
        op.summary("Lists pets")
            .tag("pets")
            .query::<Filter>()
            .response_json::<Vec<Pet>>(200, "The pets")
    });
    app.post("/pets", ok).name("add_pet").describe(|op| {
        op.request_json::<NewPet>()
            .header_schema(
                "Idempotency-Key",
                false,
                "Once only",
                json_schema!({ "type": "string", "maxLength": 64 }),
            )
            .response_json::<Pet>(201, "The new pet")
            .response_header::<String>(201, "Location", "Its URL")
            .response_json::<Problem>(422, "Invalid")
            .default_response_json::<Problem>("Any other error")
    });
    app.get("/pets/<uint:id>", ok).name("pet");
    app.route(MethodSet::PUT | MethodSet::DELETE, "/pets/<uint:id>", ok)
        .name("edit_pet")
        .describe(|op| op.request_json::<Pet>().request_optional());
    app.get("/signed/<int:n>", ok);
    app.get("/by-uuid/<uuid:u>", ok);
    app.get("/tags/<slug:tag>", ok);
    app.get("/files/<path:rest>", ok);
    app.get("/img/<name>.<uint:w>x<uint:h>", ok);
    app.regex(MethodSet::GET, r"/v(?P<major>\d+)", ok);
    app.any("/echo", ok);
    app.head("/ping", ok);
    app.get("/secret", ok).describe(|op| op.hidden());
    app.get("/old", ok)
        .describe(|op| op.deprecated().response(410, "Gone"));
    // The same shape as `/pets/<uint:id>` with another name and type.
    app.patch("/pets/<pet_name>", ok);
    app.scope("/admin", |admin| {
        admin.get("/users/<int:uid>", ok).name("admin_user");
    });
    let mut sub = App::new();
    sub.get("/items/<int:item>", ok).name("item");
    app.mount("/api/<version>", sub);
    app
}

fn doc() -> Value {
    OpenApi::new("Pets", "1.2.3")
        .description("A test API")
        .document(&app())
}

fn param<'a>(op: &'a Value, name: &str) -> &'a Value {
    op["parameters"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("no parameter {name} in {op}"))
}

#[test]
fn the_document_has_the_header_and_every_route_with_a_rule() {
    let doc = doc();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(
        doc["info"],
        json!({"title": "Pets", "version": "1.2.3", "description": "A test API"})
    );
    let mut paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        [
            "/admin/users/{uid}",
            "/api/{version}/items/{item}",
            "/by-uuid/{u}",
            "/echo",
            "/files/{rest}",
            "/img/{name}.{w}x{h}",
            "/old",
            "/pets",
            "/pets/{id}",
            "/ping",
            "/signed/{n}",
            "/tags/{tag}",
        ],
        "regex and hidden routes are left out"
    );
}

#[test]
fn path_parameters_are_typed_from_the_rules() {
    let doc = doc();
    let p = &doc["paths"];
    let schema = |path: &str, name: &str| param(&p[path]["get"], name)["schema"].clone();
    assert_eq!(
        schema("/pets/{id}", "id"),
        json!({"type": "integer", "minimum": 0, "maximum": u64::MAX})
    );
    assert_eq!(
        schema("/signed/{n}", "n"),
        json!({"type": "integer", "format": "int64", "minimum": i64::MIN, "maximum": i64::MAX})
    );
    assert_eq!(schema("/by-uuid/{u}", "u")["format"], "uuid");
    // A user type is a string with the type's pattern.
    assert_eq!(
        schema("/tags/{tag}", "tag"),
        json!({"type": "string", "pattern": "^(?:[a-z0-9-]+)$", "x-celer-type": "slug"})
    );
    assert_eq!(schema("/files/{rest}", "rest")["type"], "string");
    let img = &p["/img/{name}.{w}x{h}"]["get"];
    assert_eq!(
        param(img, "name")["schema"],
        json!({"type": "string", "minLength": 1})
    );
    assert_eq!(param(img, "w")["schema"]["minimum"], 0);
    assert_eq!(param(img, "h")["in"], "path");
    assert_eq!(param(img, "h")["required"], true);
    // Scope and mount prefixes bring their parameters.
    let item = &p["/api/{version}/items/{item}"]["get"];
    assert_eq!(param(item, "version")["schema"]["type"], "string");
    assert_eq!(param(item, "item")["schema"]["format"], "int64");
    assert_eq!(item["operationId"], "item");
}

#[test]
fn methods_are_the_registered_ones_without_implied_head_and_options() {
    let doc = doc();
    let methods = |path: &str| -> Vec<String> {
        let mut methods: Vec<String> = doc["paths"][path]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        methods.sort_unstable();
        methods
    };
    assert_eq!(methods("/pets"), ["get", "post"]);
    assert_eq!(
        methods("/echo"),
        [
            "delete", "get", "head", "options", "patch", "post", "put", "trace"
        ]
    );
    assert_eq!(methods("/ping"), ["head"]);
    // Two rules of one shape share the path, under the first one's names.
    assert_eq!(methods("/pets/{id}"), ["delete", "get", "patch", "put"]);
    let patch = &doc["paths"]["/pets/{id}"]["patch"];
    assert_eq!(
        param(patch, "id")["schema"],
        json!({"type": "string", "minLength": 1})
    );
    // Names are operation ids; a route with several methods suffixes them.
    assert_eq!(doc["paths"]["/pets/{id}"]["get"]["operationId"], "pet");
    assert_eq!(
        doc["paths"]["/pets/{id}"]["put"]["operationId"],
        "edit_pet_put"
    );
    assert_eq!(
        doc["paths"]["/pets/{id}"]["delete"]["operationId"],
        "edit_pet_delete"
    );
    assert!(doc["paths"]["/echo"]["get"].get("operationId").is_none());
    assert_eq!(doc["paths"]["/old"]["get"]["deprecated"], true);
}

#[test]
fn undescribed_routes_have_a_default_response() {
    let doc = doc();
    let responses = doc["paths"]["/signed/{n}"]["get"]["responses"]
        .as_object()
        .unwrap();
    assert_eq!(responses.keys().collect::<Vec<_>>(), ["default"]);
    assert!(
        responses["default"]["description"]
            .as_str()
            .unwrap()
            .contains("not describe")
    );
}

#[test]
fn bodies_and_query_parameters_come_from_the_types() {
    let doc = doc();
    let schemas = &doc["components"]["schemas"];
    let post = &doc["paths"]["/pets"]["post"];
    assert_eq!(post["requestBody"]["required"], true);
    assert_eq!(
        post["requestBody"]["content"]["application/json"]["schema"],
        json!({"$ref": "#/components/schemas/NewPet"})
    );
    let new_pet = &schemas["NewPet"];
    assert_eq!(new_pet["additionalProperties"], false);
    assert_eq!(new_pet["required"], json!(["name", "owner"]));
    assert_eq!(
        new_pet["properties"]["name"]["description"],
        "The pet's name."
    );
    assert_eq!(
        new_pet["properties"]["owner"]["$ref"],
        "#/components/schemas/Owner"
    );
    // Pet deserializes with `tag` optional and serializes it always: the
    // response's schema is another one, and says so.
    assert_eq!(
        post["responses"]["201"]["content"]["application/json"]["schema"],
        json!({"$ref": "#/components/schemas/Pet.Response"})
    );
    assert_eq!(
        schemas["Pet.Response"]["required"],
        json!(["id", "name", "tag", "owner"])
    );
    // Owner is the same both ways: one schema.
    assert_eq!(
        schemas["Pet.Response"]["properties"]["owner"]["$ref"],
        "#/components/schemas/Owner"
    );
    assert!(schemas.get("Owner.Response").is_none());
    assert_eq!(
        post["responses"]["201"]["headers"]["Location"]["schema"]["type"],
        "string"
    );
    assert_eq!(
        post["responses"]["default"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Problem"
    );
    let key = param(post, "Idempotency-Key");
    assert_eq!(
        (&key["in"], &key["required"]),
        (&json!("header"), &json!(false))
    );
    assert_eq!(key["schema"]["maxLength"], 64);
    // The query type's properties are parameters, without null.
    let get = &doc["paths"]["/pets"]["get"];
    let limit = param(get, "limit");
    assert_eq!(
        (&limit["in"], &limit["required"]),
        (&json!("query"), &json!(false))
    );
    assert_eq!(limit["schema"]["type"], "integer");
    assert_eq!(limit["description"], "At most this many.");
    assert_eq!(param(get, "species")["required"], true);
    assert!(
        schemas.get("Filter").is_none(),
        "a query type is not a schema of its own"
    );
    assert_eq!(get["tags"], json!(["pets"]));
    assert_eq!(
        get["responses"]["200"]["content"]["application/json"]["schema"]["items"]["$ref"],
        "#/components/schemas/Pet.Response"
    );
    // Every reference points at a schema that is there.
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(refs.len() > 5);
    for r in refs {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{r}"));
        assert!(schemas.get(name).is_some(), "dangling {r}");
    }
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => collect_refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[test]
fn served_under_a_mount_the_paths_carry_the_prefix() {
    block_on(async {
        let mut api = App::new();
        api.get("", ok).name("root");
        api.get("/things/<uint:id>", ok);
        OpenApi::new("Things", "1").serve(&mut api, "/openapi.json", "/docs");
        api.trailing_slash(celer::app::TrailingSlash::Ignore);
        let mut app = App::new();
        app.mount("/v1", api);
        let client = TestClient::new(app);
        let res = client.get("/v1/openapi.json").await;
        assert_eq!(res.status(), 200);
        assert_eq!(res.header("content-type"), Some("application/json"));
        let doc: Value = res.json();
        let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
        // The document's own routes are not in it.
        assert_eq!(paths, ["/v1", "/v1/things/{id}"]);
        // A trailing slash the app lets through does not change the prefix.
        let again: Value = client.get("/v1/openapi.json/").await.json();
        assert_eq!(again, doc);
        let page = client.get("/v1/docs").await;
        assert_eq!(
            page.header("content-type"),
            Some("text/html; charset=utf-8")
        );
        let html = page.text();
        assert!(html.contains("<a href=\"/v1/openapi.json\">"), "{html}");
        assert!(html.contains("<code>/v1/things/{id}</code>"));
        assert!(!html.contains("<script"));
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "nothing from elsewhere"
        );
    });
}

#[test]
#[should_panic(expected = "must be a static path")]
fn serving_at_a_rule_with_parameters_panics_at_registration() {
    let mut app = App::new();
    OpenApi::new("x", "1").serve(&mut app, "/<x>.json", "/docs");
}

/// The document passes `openapi-spec-validator` (OpenAPI 3.1 schema and
/// semantics: unique operation ids, path parameters declared, ...).
#[test]
fn openapi_spec_validator_accepts_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let mut docs = BTreeMap::new();
    docs.insert("full", doc());
    docs.insert("empty", OpenApi::new("Empty", "0").document(&App::new()));
    for (name, doc) in docs {
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
        let out = Command::new("python3")
            .args([
                "-c",
                "import json, sys\n\
                 from openapi_spec_validator import validate\n\
                 from openapi_spec_validator.validation.validators import OpenAPIV31SpecValidator\n\
                 validate(json.load(open(sys.argv[1])), cls=OpenAPIV31SpecValidator)\n\
                 print('valid')",
            ])
            .arg(&file)
            .output()
            .expect("python3 runs (scripts/test installs openapi-spec-validator)");
        assert!(
            out.status.success(),
            "{name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "valid");
    }
}

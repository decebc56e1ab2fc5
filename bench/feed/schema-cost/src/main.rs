//! `feed-schema-cost MODE N`: N updates of a feed with N different 50 KiB
//! documents (the shape of bench/feed's), MODE `plain` (the JSON syntax
//! check only) or `schema` (parsed and checked against SCHEMA below), or
//! `parse` and `check` (the value parse and the schema check alone, no
//! feed). Prints the wall time per update; under callgrind, the
//! instruction counts are the figure.

use std::path::Path;
use std::time::Instant;

const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["election", "updated", "rows"],
  "additionalProperties": false,
  "properties": {
    "election": {"type": "string", "minLength": 1},
    "updated": {"type": "string"},
    "rows": {
      "type": "array",
      "maxItems": 10000,
      "items": {
        "type": "object",
        "required": ["district", "candidate", "votes", "reported"],
        "additionalProperties": false,
        "properties": {
          "district": {"type": "string"},
          "candidate": {"type": "string"},
          "votes": {"type": "integer", "minimum": 0},
          "reported": {"type": "boolean"}
        }
      }
    }
  }
}"#;

/// bench/feed/feed.py's document, `serial` making each one different.
fn document(serial: usize) -> Vec<u8> {
    let rows: Vec<serde_json::Value> = (0..560)
        .map(|i| {
            serde_json::json!({
                "district": format!("district {i}"),
                "candidate": format!("candidate {}", i % 7),
                "votes": (i * 7919 + serial) % 100_000,
                "reported": i % 3 != 0,
            })
        })
        .collect();
    let doc = serde_json::json!({"election": "bench", "updated": format!("{serial}"), "rows": rows});
    serde_json::to_vec_pretty(&doc).unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("plain", String::as_str);
    let n: usize = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(20);
    let docs: Vec<Vec<u8>> = (0..n).map(document).collect();
    let schema = celer_apps::feed::Schema::from_value(
        Path::new("bench.schema.json"),
        &serde_json::from_str(SCHEMA).unwrap(),
    )
    .unwrap();
    let mut builder = celer::feed::Feed::builder("doc");
    if mode == "schema" {
        builder = builder.validator(schema.clone().into_validator());
    }
    let feed = builder.build();
    let start = Instant::now();
    for doc in docs {
        match mode {
            "parse" => {
                let value: serde_json::Value = serde_json::from_slice(&doc).unwrap();
                std::hint::black_box(value);
            }
            "check" | "parse+check" => {
                let value: serde_json::Value = serde_json::from_slice(&doc).unwrap();
                schema.check(&value).unwrap();
            }
            _ => {
                feed.update(doc).unwrap();
            }
        }
    }
    let per = start.elapsed() / u32::try_from(n).unwrap();
    println!("{mode} {n} updates: {per:?} per update, bytes {}", feed.status().bytes.unwrap_or(0));
}

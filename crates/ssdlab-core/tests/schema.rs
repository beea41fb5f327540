//! The JSON Schema of result.json, generated from the types, is the one committed in docs/result.schema.json:
//! a change to the schema types shows up as a diff there (rewrite it with UPDATE_SNAPSHOTS=1 and review).

// A test reads as one story; the 80-line rule is for production code.
#![allow(clippy::too_many_lines)]

use ssdlab_core::schema::RunResult;

#[test]
fn the_committed_schema_is_generated_from_the_types() {
    let schema = schemars::schema_for!(RunResult);
    let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/result.schema.json");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(path, &text).unwrap();
    }
    let committed =
        std::fs::read_to_string(path).expect("docs/result.schema.json exists (UPDATE_SNAPSHOTS=1 writes it)");
    assert!(
        committed == text,
        "docs/result.schema.json is not what the types generate; if the change is intended, rerun with UPDATE_SNAPSHOTS=1 and review the diff"
    );
}

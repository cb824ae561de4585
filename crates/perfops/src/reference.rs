//! `perfops schema` and `perfops schema --markdown`: the JSON Schema of
//! scenario files, and the scenario reference (`docs/scenario-reference.md`)
//! generated from it, so the page cannot drift from what the parser accepts.
//!
//! The schema is written by hand and kept field for field in sync with the
//! parser by a test in perfops-core (`json_schema_is_in_sync_with_the_parser`).
//! Each of its fields carries a `description`, `examples` (values that pass
//! the field's own schema: a test here checks them) and either a `default`
//! (the value perfops uses when the field is absent) or, where no single
//! value says it, an `x-default` sentence ("the file's name"). A required
//! field needs neither. The page is one section per object of the schema,
//! one entry per field with its type, default and an example as YAML; a
//! field missing any of these is an error here, not a gap on the page.
//! `crates/perfops/tests/docs.rs` checks that the committed page is what this
//! prints (`UPDATE_GOLDEN=1` rewrites it).

use anyhow::{Result, anyhow};
use clap::Args;
use serde_json::{Map, Value};

use crate::exit::Exit;

/// The JSON Schema of scenario files, also committed as `schema/scenario.schema.json`.
const SCENARIO_SCHEMA: &str = include_str!("../../../schema/scenario.schema.json");

/// `perfops schema [--markdown]`.
#[derive(Debug, Args)]
pub(crate) struct SchemaArgs {
    /// Print the scenario reference (Markdown, every field with its type,
    /// default and an example) instead of the JSON Schema.
    #[arg(long)]
    markdown: bool,
}

pub(crate) fn run(args: SchemaArgs) -> Result<Exit> {
    if args.markdown {
        let page = markdown(SCENARIO_SCHEMA)
            .map_err(|missing| anyhow!("the scenario schema is incomplete:\n  {}", missing.join("\n  ")))?;
        perfops_run::say::out(&page);
    } else {
        perfops_run::say::out(SCENARIO_SCHEMA);
    }
    Ok(Exit::Passed)
}

/// An object of the schema that gets a section: its definition and the
/// paths (in YAML terms) where scenarios write it.
struct Section<'a> {
    def: Option<&'a str>,
    node: &'a Value,
    paths: Vec<String>,
}

/// Leaf definitions described once, in the page's head, not as sections.
const UNITS: [&str; 3] = ["duration", "rate", "headers"];

/// The reference page for `schema` (JSON text), or every field that lacks
/// a description, an example or a default.
pub(crate) fn markdown(schema: &str) -> Result<String, Vec<String>> {
    let root: Value = serde_json::from_str(schema).map_err(|e| vec![format!("not JSON: {e}")])?;
    let sections = sections(&root);
    let mut missing = Vec::new();
    let mut o = String::new();
    o.push_str(HEAD);
    for unit in UNITS {
        let d = &root["$defs"][unit];
        let text = description(&root, d).unwrap_or_default();
        let example = d.get("examples").and_then(Value::as_array).and_then(|e| e.first());
        if text.is_empty() || example.is_none() {
            missing.push(format!("$defs.{unit}: description and examples"));
        }
        o.push_str(&format!(
            "- **{unit}**: {text}{}\n",
            example.map_or(String::new(), |e| format!(" Example: `{}`.", yaml(e)))
        ));
    }
    o.push_str("\n## Contents\n\n");
    for s in &sections {
        o.push_str(&format!("- [`{}`](#{})\n", title(s), anchor(&title(s))));
    }
    for s in &sections {
        o.push_str(&format!("\n## `{}`\n\n", title(s)));
        if s.paths.len() > 1 {
            let also: Vec<String> = s.paths[1..].iter().map(|p| format!("`{p}`")).collect();
            o.push_str(&format!("Also at {}.\n\n", also.join(", ")));
        }
        if let Some(d) = description(&root, s.node) {
            o.push_str(&d);
            o.push_str("\n\n");
        }
        if let Some(rule) = one_of_required(s.node) {
            o.push_str(&format!("Exactly one of {rule} is required.\n\n"));
        }
        let required: Vec<&str> =
            s.node["required"].as_array().map_or(Vec::new(), |r| r.iter().filter_map(Value::as_str).collect());
        let Some(props) = s.node["properties"].as_object() else { continue };
        for (key, p) in props {
            let path = join(&s.paths[0], key);
            o.push_str(&format!("### `{path}`\n\n"));
            match description(&root, p) {
                Some(d) => o.push_str(&format!("{d}\n\n")),
                None => missing.push(format!("{path}: description")),
            }
            o.push_str(&format!("- **Type**: {}\n", type_of(p, &sections)));
            let default = match (p.get("default"), p.get("x-default").and_then(Value::as_str)) {
                (Some(v), _) => Some(format!("`{}`", yaml(v))),
                (None, Some(text)) => Some(text.to_string()),
                (None, None) if required.contains(&key.as_str()) => Some("none: required".into()),
                (None, None) => None,
            };
            match default {
                Some(d) => o.push_str(&format!("- **Default**: {d}\n")),
                None => missing.push(format!("{path}: default (or x-default)")),
            }
            match p.get("examples").and_then(Value::as_array).filter(|e| !e.is_empty()) {
                Some(examples) => {
                    o.push_str("- **Example**:\n\n  ```yaml\n");
                    for e in examples {
                        o.push_str(&format!("  {key}: {}\n", yaml(e)));
                    }
                    o.push_str("  ```\n");
                }
                None => missing.push(format!("{path}: examples")),
            }
            o.push('\n');
        }
    }
    if missing.is_empty() { Ok(o.trim_end().to_string() + "\n") } else { Err(missing) }
}

const HEAD: &str = "\
# Scenario reference

Every field of a scenario file, with its type, default and an example. This page is generated
from the JSON Schema that `perfops schema` prints (`schema/scenario.schema.json`, the one editors
use for completion) by `perfops schema --markdown`; a test fails when it differs from what that
command prints, and another when a field lacks a description, a default or an example, or an
example does not pass the field's schema. To change it, edit the schema and run
`UPDATE_GOLDEN=1 cargo test -p perfops --test docs`.

A scenario is YAML. `perfops check FILE` validates one and names every error with its
`file:line:column`; `--set PATH=VALUE` on `run`, `limit` and `sweep` overrides a field before
validation (`--set load.max_in_flight=100`, `--set 'load.stages[0].hold=5s'`). The guide
explains the concepts: [load models](guide/load-models.md), [flows](guide/flows.md),
[SLO and abort rules](guide/slo.md), [watching the target](guide/watching.md),
[scripts](guide/scripting.md).

Values used throughout:

";

/// Every object with properties, in the order a reader meets them: the
/// top level, then depth first through its fields (each object right after
/// the field that leads to it), each once, titled by the first path that
/// reaches it.
fn sections(root: &Value) -> Vec<Section<'_>> {
    let mut out = vec![Section { def: None, node: root, paths: vec![String::new()] }];
    visit(root, root, "", &mut out);
    out
}

fn visit<'a>(root: &'a Value, node: &'a Value, path: &str, out: &mut Vec<Section<'a>>) {
    let Some(props) = node["properties"].as_object() else { return };
    for (key, p) in props {
        let mut found = Vec::new();
        collect(p, &join(path, key), &mut found);
        for (def, at) in found {
            if let Some(s) = out.iter_mut().find(|s| s.def == Some(def)) {
                if !s.paths.contains(&at) {
                    s.paths.push(at);
                }
                continue;
            }
            let node = &root["$defs"][def];
            if node.get("properties").is_some() {
                out.push(Section { def: Some(def), node, paths: vec![at.clone()] });
                visit(root, node, &at, out);
            }
        }
    }
}

/// The object definitions `p` (at `path`) leads to: through `$ref`, list
/// items (`path[]`), map values (`path.NAME`) and `oneOf` branches.
fn collect<'a>(p: &'a Value, path: &str, out: &mut Vec<(&'a str, String)>) {
    if let Some(def) = p.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/"))
        && !UNITS.contains(&def)
    {
        out.push((def, path.to_string()));
    }
    if let Some(items) = p.get("items") {
        collect(items, &format!("{path}[]"), out);
    }
    if let Some(values) = p.get("additionalProperties").filter(|v| v.is_object()) {
        collect(values, &format!("{path}.NAME"), out);
    }
    if let Some(branches) = p.get("oneOf").and_then(Value::as_array) {
        for b in branches {
            collect(b, path, out);
        }
    }
}

fn title(s: &Section<'_>) -> String {
    if s.paths[0].is_empty() { "(top level)".into() } else { s.paths[0].clone() }
}

/// GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

/// A field's description, else the one of the definition it refers to.
fn description(root: &Value, p: &Value) -> Option<String> {
    let own = p.get("description").and_then(Value::as_str);
    let referred = || def_of(root, p).and_then(|d| d.get("description")).and_then(Value::as_str);
    own.or_else(referred).map(str::to_string)
}

fn def_of<'a>(root: &'a Value, p: &Value) -> Option<&'a Value> {
    let name = p.get("$ref")?.as_str()?.strip_prefix("#/$defs/")?;
    root["$defs"].get(name)
}

/// `oneOf: [{required: [a]}, {required: [b]}]` as "`a` or `b`".
fn one_of_required(node: &Value) -> Option<String> {
    let branches = node.get("oneOf")?.as_array()?;
    let names: Option<Vec<String>> = branches
        .iter()
        .map(|b| {
            let r = b.get("required")?.as_array()?;
            (r.len() == 1).then(|| format!("`{}`", r[0].as_str().unwrap_or_default()))
        })
        .collect();
    names.map(|n| n.join(", "))
}

/// A field's type in words, linking to the section of an object.
fn type_of(p: &Value, sections: &[Section<'_>]) -> String {
    if let Some(def) = p.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
        return match def {
            "duration" | "rate" => format!("{def} (see above)"),
            "headers" => "map of name to string".into(),
            _ => match sections.iter().find(|s| s.def == Some(def)) {
                Some(s) => format!("object, see [`{}`](#{})", title(s), anchor(&title(s))),
                None => "object".into(),
            },
        };
    }
    if let Some(values) = p.get("enum").and_then(Value::as_array) {
        let v: Vec<String> = values.iter().map(|v| format!("`{}`", yaml(v))).collect();
        return format!("one of {}", v.join(", "));
    }
    if let Some(branches) = p.get("oneOf").and_then(Value::as_array) {
        let t: Vec<String> = branches.iter().map(|b| type_of(b, sections)).collect();
        return t.join(", or ");
    }
    let mut t = match &p["type"] {
        Value::String(s) => word(s).to_string(),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).map(word).collect::<Vec<_>>().join(" or "),
        _ => "any YAML value (a mapping, a list or a scalar)".into(),
    };
    if let Some(items) = p.get("items") {
        t = format!("list of {}", type_of(items, sections));
    } else if let Some(values) = p.get("additionalProperties").filter(|v| v.is_object()) {
        t = format!("map of name to {}", type_of(values, sections));
    }
    match (p.get("minimum").and_then(Value::as_i64), p.get("maximum").and_then(Value::as_i64)) {
        (Some(lo), Some(hi)) => t.push_str(&format!(", from {lo} to {hi}")),
        (Some(lo), None) => t.push_str(&format!(", at least {lo}")),
        (None, Some(hi)) => t.push_str(&format!(", at most {hi}")),
        (None, None) => {}
    }
    if let Some(n) = p.get("minItems").and_then(Value::as_i64) {
        t.push_str(&format!(", at least {n} item{}", if n == 1 { "" } else { "s" }));
    }
    if let Some(n) = p.get("minProperties").and_then(Value::as_i64) {
        t.push_str(&format!(", at least {n} entr{}", if n == 1 { "y" } else { "ies" }));
    }
    t
}

fn word(t: &str) -> &str {
    match t {
        "object" => "mapping",
        "array" => "list",
        other => other,
    }
}

/// A JSON value as one line of YAML (flow style; plain where that is safe).
fn yaml(v: &Value) -> String {
    match v {
        Value::String(s) if plain(s) => s.clone(),
        Value::Array(items) => format!("[ {} ]", items.iter().map(yaml).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => flow_map(m),
        other => other.to_string(),
    }
}

fn flow_map(m: &Map<String, Value>) -> String {
    let kv: Vec<String> = m.iter().map(|(k, v)| format!("{}: {}", yaml(&Value::String(k.clone())), yaml(v))).collect();
    format!("{{ {} }}", kv.join(", "))
}

/// A string YAML reads back as itself, unquoted, in flow context.
fn plain(s: &str) -> bool {
    let first = s.chars().next();
    !s.is_empty()
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':')
        && !s.chars().any(|c| matches!(c, ',' | '[' | ']' | '{' | '}' | '"' | '\'' | '\n'))
        && !matches!(first, Some('-' | '?' | ':' | '&' | '*' | '!' | '|' | '>' | '%' | '@' | '`' | ' ' | '#'))
        && !s.ends_with(' ')
        && serde_json::from_str::<Value>(s).is_err()
        && !matches!(s, "true" | "false" | "null" | "~" | "yes" | "no" | "on" | "off")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed schema makes a complete page.
    #[test]
    fn every_field_is_documented() {
        if let Err(missing) = markdown(SCENARIO_SCHEMA) {
            panic!("fields without a description, default or example:\n  {}", missing.join("\n  "));
        }
    }

    /// A schema with a gap is refused, naming the gap.
    #[test]
    fn a_gap_is_named() {
        let mut schema: Value = serde_json::from_str(SCENARIO_SCHEMA).expect("JSON");
        schema["$defs"]["load"]["properties"]["max_in_flight"].as_object_mut().expect("object").remove("examples");
        schema["$defs"]["probe_spec"]["properties"]["period"].as_object_mut().expect("object").remove("default");
        let missing = markdown(&schema.to_string()).expect_err("gaps");
        assert_eq!(
            missing,
            ["load.max_in_flight: examples", "probe.liveness.period: default (or x-default)"],
            "each gap by its path"
        );
    }

    /// Every example passes the schema of its field: the page shows what the parser accepts.
    #[test]
    fn examples_pass_their_field_schema() {
        let root: Value = serde_json::from_str(SCENARIO_SCHEMA).expect("JSON");
        let mut bad = Vec::new();
        let mut n = 0;
        for s in sections(&root) {
            for (key, p) in s.node["properties"].as_object().into_iter().flatten() {
                let mut field = p.clone();
                field["$defs"] = root["$defs"].clone();
                for e in p["examples"].as_array().into_iter().flatten() {
                    n += 1;
                    for err in perfops_testkit::schema::errors(&field, e) {
                        bad.push(format!("{}: {e}: {err}", join(&s.paths[0], key)));
                    }
                }
            }
        }
        assert!(bad.is_empty(), "examples the schema refuses:\n{}", bad.join("\n"));
        assert!(n > 60, "only {n} examples checked");
    }

    /// Values print as YAML that reads back as the same value.
    #[test]
    fn yaml_values() {
        let cases: [(Value, &str); 7] = [
            // A plain string stays plain.
            (Value::from("5s"), "5s"),
            // A string that YAML would read as a number is quoted.
            (Value::from("200"), "\"200\""),
            // `: ` would start a mapping.
            (Value::from("p95 < 500ms"), "p95 < 500ms"),
            (Value::from("Bearer: x"), "\"Bearer: x\""),
            // `$.token` is plain; `${token}` has braces, quoted.
            (Value::from("${token}"), "\"${token}\""),
            // Lists and maps in flow style.
            (serde_json::json!(["a", 1]), "[ a, 1 ]"),
            (serde_json::json!({"status": 200}), "{ status: 200 }"),
        ];
        for (v, want) in cases {
            assert_eq!(yaml(&v), want, "{v}");
        }
    }
}

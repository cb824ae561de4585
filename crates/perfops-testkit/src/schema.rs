//! A JSON Schema (draft 2020-12) validator for the subset of keywords that
//! perfops' own schemas use, so that tests can check real `summary.json`
//! files against `schema/summary.schema.json`, and scenarios against
//! `schema/scenario.schema.json`.
//!
//! Why not a general validator crate: the one we used pulled about fifty
//! crates (big-number and regex engines among them) into every test build, a
//! few minutes of CI on two cores, for the dozen keywords below. A keyword
//! outside this subset is a panic, never ignored: a schema that starts using
//! one fails its tests until this learns it, instead of passing unchecked.
//!
//! Supported: `type` (one or a list), `enum`, `const`, `minimum`, `maximum`,
//! `exclusiveMinimum`, `exclusiveMaximum`,
//! `required`, `properties`, `additionalProperties`, `unevaluatedProperties`
//! (`false`, seeing through `$ref` and the `oneOf` branch that matched),
//! `items`, `minItems`, `minProperties`, `propertyNames`, `pattern` (the
//! `regex` crate, which perfops-core builds anyway), `oneOf`, local `$ref`
//! (`#/$defs/NAME`); `format`,
//! `description`, `title`, `$schema`, `$id`, `$defs`, `default`, `examples` and `x-default`
//! (the scenario reference's default in words) are annotations.

use std::collections::BTreeSet;

use serde_json::Value;

/// Every way `instance` fails `schema`, each as `path: what` (empty: valid).
pub fn errors(schema: &Value, instance: &Value) -> Vec<String> {
    let mut out = Vec::new();
    check(schema, schema, instance, "", &mut out);
    out
}

/// Validate `instance` at `path` against `s` (part of `root`); returns the
/// object properties `s` evaluated, for `unevaluatedProperties`.
fn check(root: &Value, s: &Value, instance: &Value, path: &str, out: &mut Vec<String>) -> BTreeSet<String> {
    let mut evaluated = BTreeSet::new();
    let Some(s) = s.as_object() else {
        // `true` accepts anything; `false` nothing.
        if s == &Value::Bool(false) {
            out.push(format!("{path}: no value is allowed here"));
        }
        return evaluated;
    };
    let fail =
        |out: &mut Vec<String>, what: String| out.push(format!("{}: {what}", if path.is_empty() { "/" } else { path }));
    for (keyword, arg) in s {
        match keyword.as_str() {
            "description" | "title" | "$schema" | "$id" | "$defs" | "format" | "default" | "examples" | "x-default" => {
            }
            "$ref" => {
                let target = resolve(root, arg);
                evaluated.extend(check(root, target, instance, path, out));
            }
            "type" => {
                let types: Vec<&str> = match arg {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("`type` must be a string or a list of strings"),
                };
                if !types.iter().any(|t| is_type(instance, t)) {
                    fail(out, format!("{instance} is not of type {}", types.join(" or ")));
                }
            }
            "enum" => {
                let options = arg.as_array().expect("`enum` is a list");
                if !options.contains(instance) {
                    fail(out, format!("{instance} is not one of {arg}"));
                }
            }
            "const" if arg != instance => fail(out, format!("{instance} is not {arg}")),
            "const" => {}
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                let bound = arg.as_f64().expect("a numeric bound");
                if let Some(v) = instance.as_f64() {
                    let ok = match keyword.as_str() {
                        "minimum" => v >= bound,
                        "maximum" => v <= bound,
                        "exclusiveMinimum" => v > bound,
                        _ => v < bound,
                    };
                    if !ok {
                        fail(out, format!("{v} is outside its {keyword} {bound}"));
                    }
                }
            }
            "required" => {
                if let Some(obj) = instance.as_object() {
                    for name in arg.as_array().expect("`required` is a list").iter().filter_map(Value::as_str) {
                        if !obj.contains_key(name) {
                            fail(out, format!("`{name}` is required"));
                        }
                    }
                }
            }
            "properties" => {
                if let Some(obj) = instance.as_object() {
                    for (name, sub) in arg.as_object().expect("`properties` is an object") {
                        if let Some(v) = obj.get(name) {
                            check(root, sub, v, &format!("{path}/{name}"), out);
                            evaluated.insert(name.clone());
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(obj) = instance.as_object() {
                    let declared = s.get("properties").and_then(Value::as_object);
                    for (name, v) in obj {
                        if declared.is_some_and(|d| d.contains_key(name)) {
                            continue;
                        }
                        check(root, arg, v, &format!("{path}/{name}"), out);
                        evaluated.insert(name.clone());
                    }
                }
            }
            // Checked once the others have said what they evaluated (below).
            "unevaluatedProperties" => assert_eq!(arg, &Value::Bool(false), "only `unevaluatedProperties: false`"),
            "items" => {
                if let Some(items) = instance.as_array() {
                    for (i, v) in items.iter().enumerate() {
                        check(root, arg, v, &format!("{path}/{i}"), out);
                    }
                }
            }
            "propertyNames" => {
                if let Some(obj) = instance.as_object() {
                    for name in obj.keys() {
                        check(root, arg, &Value::String(name.clone()), &format!("{path} (key `{name}`)"), out);
                    }
                }
            }
            "pattern" => {
                let re = regex::Regex::new(arg.as_str().expect("`pattern` is a string")).expect("a valid `pattern`");
                if let Some(text) = instance.as_str()
                    && !re.is_match(text)
                {
                    fail(out, format!("{instance} does not match {arg}"));
                }
            }
            "minLength" => {
                // JSON Schema counts characters (code points), not bytes.
                let least = arg.as_u64().expect("a count");
                if let Some(text) = instance.as_str()
                    && (text.chars().count() as u64) < least
                {
                    fail(out, format!("{instance} is shorter than {least} characters"));
                }
            }
            "minItems" | "minProperties" => {
                let least = arg.as_u64().expect("a count");
                let n = match instance {
                    Value::Array(a) if keyword == "minItems" => Some(a.len()),
                    Value::Object(o) if keyword == "minProperties" => Some(o.len()),
                    _ => None,
                };
                if n.is_some_and(|n| (n as u64) < least) {
                    fail(out, format!("{instance} has fewer than {least} {}", &keyword[3..].to_lowercase()));
                }
            }
            "oneOf" => {
                let mut passing = Vec::new();
                for branch in arg.as_array().expect("`oneOf` is a list") {
                    let mut branch_errors = Vec::new();
                    let props = check(root, branch, instance, path, &mut branch_errors);
                    if branch_errors.is_empty() {
                        passing.push(props);
                    }
                }
                match passing.len() {
                    1 => evaluated.extend(passing.remove(0)),
                    n => fail(out, format!("{instance} matches {n} of the `oneOf` branches, not exactly one")),
                }
            }
            other => panic!("schema keyword `{other}` is not supported by perfops_testkit::schema"),
        }
    }
    if s.contains_key("unevaluatedProperties")
        && let Some(obj) = instance.as_object()
    {
        for name in obj.keys().filter(|k| !evaluated.contains(*k)) {
            fail(out, format!("`{name}` is not declared"));
        }
        evaluated.extend(obj.keys().cloned());
    }
    evaluated
}

/// The schema a local `$ref` (`#/$defs/NAME`, or any `#/a/b` pointer) names.
fn resolve<'a>(root: &'a Value, reference: &Value) -> &'a Value {
    let r = reference.as_str().expect("`$ref` is a string");
    let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("only local references: {r}"));
    root.pointer(pointer).unwrap_or_else(|| panic!("`$ref` {r} points nowhere"))
}

fn is_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        // 2020-12: a number with no fraction is an integer, whatever its spelling.
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        other => panic!("unknown type `{other}`"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::errors;

    /// One case per keyword: a schema, a value, and whether it is valid.
    #[test]
    fn each_keyword_accepts_and_rejects() {
        let defs = json!({ "$defs": { "n": { "type": "integer", "minimum": 0 } } });
        let cases = [
            // a list of types
            (json!({ "type": ["number", "null"] }), json!(null), true),
            (json!({ "type": ["number", "null"] }), json!("x"), false),
            // 1.0 is an integer in 2020-12; 1.5 is not
            (json!({ "type": "integer" }), json!(1.0), true),
            (json!({ "type": "integer" }), json!(1.5), false),
            (json!({ "enum": ["a", "b"] }), json!("c"), false),
            (json!({ "const": "x" }), json!("x"), true),
            (json!({ "minimum": 0, "maximum": 1 }), json!(1.01), false),
            // exclusive bounds refuse the bound itself (a replay's speed > 0)
            (json!({ "exclusiveMinimum": 0 }), json!(0), false),
            (json!({ "exclusiveMinimum": 0 }), json!(0.5), true),
            (json!({ "exclusiveMaximum": 1 }), json!(1), false),
            (json!({ "required": ["a"] }), json!({ "b": 1 }), false),
            // additionalProperties: false lets only the declared ones through
            (json!({ "properties": { "a": {} }, "additionalProperties": false }), json!({ "a": 1 }), true),
            (json!({ "properties": { "a": {} }, "additionalProperties": false }), json!({ "a": 1, "b": 2 }), false),
            // a schema for additional properties
            (json!({ "additionalProperties": { "type": "string" } }), json!({ "k": 3 }), false),
            (json!({ "items": { "type": "string" } }), json!(["a", 2]), false),
            (json!({ "propertyNames": { "enum": ["ok"] } }), json!({ "bad": 1 }), false),
            // a pattern is searched, not anchored; non-strings pass it
            (json!({ "pattern": "^[0-9]+(ms|s)$" }), json!("30s"), true),
            (json!({ "pattern": "^[0-9]+(ms|s)$" }), json!("soon"), false),
            (json!({ "pattern": "s$" }), json!(3), true),
            // at least this many characters (not bytes); non-strings pass it
            (json!({ "minLength": 1 }), json!(""), false),
            (json!({ "minLength": 2 }), json!("é"), false),
            (json!({ "minLength": 1 }), json!("é"), true),
            (json!({ "minLength": 1 }), json!(3), true),
            // at least this many items, or properties
            (json!({ "minItems": 1 }), json!([]), false),
            (json!({ "minProperties": 1 }), json!({ "a": 1 }), true),
            // exactly one oneOf branch
            (json!({ "oneOf": [{ "type": "number" }, { "type": "integer" }] }), json!(3), false),
            (json!({ "oneOf": [{ "type": "string" }, { "type": "null" }] }), json!(null), true),
            // $ref into $defs
            (json!({ "$defs": defs["$defs"], "$ref": "#/$defs/n" }), json!(-1), false),
            // unevaluatedProperties sees the properties of what $ref evaluated ...
            (
                json!({ "$defs": { "base": { "properties": { "a": {} } } }, "$ref": "#/$defs/base",
                        "properties": { "b": {} }, "unevaluatedProperties": false }),
                json!({ "a": 1, "b": 2 }),
                true,
            ),
            // ... and nothing else
            (
                json!({ "$defs": { "base": { "properties": { "a": {} } } }, "$ref": "#/$defs/base",
                        "unevaluatedProperties": false }),
                json!({ "a": 1, "c": 3 }),
                false,
            ),
            // an error deep inside is found and located
            (json!({ "properties": { "x": { "items": { "type": "integer" } } } }), json!({ "x": [1, "2"] }), false),
        ];
        for (i, (schema, value, valid)) in cases.into_iter().enumerate() {
            let e = errors(&schema, &value);
            assert_eq!(e.is_empty(), valid, "case {i}: {schema} with {value}: {e:?}");
        }
        let e =
            errors(&json!({ "properties": { "x": { "items": { "type": "integer" } } } }), &json!({ "x": [1, "2"] }));
        assert!(e[0].starts_with("/x/1:"), "{e:?}");
    }

    #[test]
    #[should_panic(expected = "not supported")]
    fn an_unknown_keyword_is_never_ignored() {
        let _ = errors(&json!({ "patternProperties": {} }), &json!({}));
    }
}

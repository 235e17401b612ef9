//! Whether an MCP tool's input schema can go to the model APIs. A schema the provider
//! refuses fails the whole request, so one bad tool would fail every turn of its agent for
//! as long as the server lists it (found in review). This checks the shape of the keywords
//! the providers read; what it does not know it leaves to them.

use serde_json::{Map, Value};

/// Nesting deeper than this is refused (the size cap bounds it too).
const MAX_DEPTH: usize = 32;

/// The JSON Schema type names.
const TYPES: [&str; 7] = [
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Why `schema` (a tool's `inputSchema`, an object) cannot be offered, if it cannot.
pub fn check(schema: &Map<String, Value>) -> Result<(), String> {
    object(schema, 0)
}

fn subschema(v: &Value, depth: usize) -> Result<(), String> {
    match v {
        // `true` and `false` are schemas too.
        Value::Bool(_) => Ok(()),
        Value::Object(o) => object(o, depth + 1),
        other => Err(format!("a schema that is {}", kind(other))),
    }
}

fn object(o: &Map<String, Value>, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH}"));
    }
    if let Some(t) = o.get("type") {
        let known = |v: &Value| v.as_str().is_some_and(|s| TYPES.contains(&s));
        let ok = match t {
            Value::Array(list) => !list.is_empty() && list.iter().all(known),
            one => known(one),
        };
        if !ok {
            return Err(format!("`type` {t} is not a JSON Schema type"));
        }
    }
    if let Some(r) = o.get("required") {
        if !r.as_array().is_some_and(|l| l.iter().all(Value::is_string)) {
            return Err("`required` is not a list of names".into());
        }
    }
    if let Some(e) = o.get("enum") {
        if !e.is_array() {
            return Err("`enum` is not a list".into());
        }
    }
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(p) = o.get(key) {
            let Some(map) = p.as_object() else {
                return Err(format!("`{key}` is not an object"));
            };
            for v in map.values() {
                subschema(v, depth)?;
            }
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(l) = o.get(key) {
            let Some(list) = l.as_array().filter(|l| !l.is_empty()) else {
                return Err(format!("`{key}` is not a list of schemas"));
            };
            for v in list {
                subschema(v, depth)?;
            }
        }
    }
    for key in ["items", "additionalProperties", "not", "contains"] {
        if let Some(v) = o.get(key) {
            subschema(v, depth)?;
        }
    }
    Ok(())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::check;

    fn checked(v: serde_json::Value) -> Result<(), String> {
        check(v.as_object().expect("an object"))
    }

    #[test]
    fn usual_schemas_pass_and_misshapen_ones_say_why() {
        let good = json!({"type": "object", "properties": {
            "q": {"type": "string", "description": "query"},
            "n": {"type": ["integer", "null"], "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "any": true,
            "either": {"anyOf": [{"type": "string"}, {"type": "number"}]}
        }, "required": ["q"], "additionalProperties": false,
           "$defs": {"x": {"type": "object"}}});
        assert_eq!(checked(good), Ok(()));
        assert_eq!(checked(json!({})), Ok(()));
        let bad = [
            (
                json!({"properties": {"a": {"type": "nope"}}}),
                "`type` \"nope\"",
            ),
            (json!({"required": "a"}), "`required`"),
            (json!({"properties": []}), "`properties`"),
            (json!({"properties": {"a": 3}}), "a schema that is a number"),
            (json!({"items": "string"}), "a schema that is a string"),
            (json!({"anyOf": []}), "`anyOf`"),
            (json!({"enum": "a"}), "`enum`"),
            (json!({"type": []}), "`type`"),
        ];
        for (schema, why) in bad {
            let err = checked(schema.clone()).expect_err(&schema.to_string());
            assert!(err.contains(why), "{schema}: {err}");
        }
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut v = json!({"type": "string"});
        for _ in 0..40 {
            v = json!({"type": "array", "items": v});
        }
        assert!(checked(v).unwrap_err().contains("nested deeper"));
    }
}

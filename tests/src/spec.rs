//! The Bot API spec checker: method exists, required fields present, no unknown fields, value
//! types, and the 4096 / 1024 text limits.

use std::sync::OnceLock;

use serde_json::Value;

const SPEC: &str = include_str!("../fixtures/telegram-bot-api.json");

pub struct BotApiSpec {
    doc: Value,
}

/// The spec, parsed once per test binary.
pub fn spec() -> &'static BotApiSpec {
    static SPEC_DOC: OnceLock<BotApiSpec> = OnceLock::new();
    SPEC_DOC.get_or_init(|| BotApiSpec {
        doc: serde_json::from_str(SPEC).unwrap_or(Value::Null),
    })
}

/// Limits in characters (UTF-16 code units, as Telegram counts) per `(method, field)`.
const LIMITS: &[(&str, &str, usize)] = &[
    ("sendMessage", "text", 4096),
    ("editMessageText", "text", 4096),
    ("sendPhoto", "caption", 1024),
    ("sendDocument", "caption", 1024),
];

impl BotApiSpec {
    pub fn version(&self) -> &str {
        self.doc
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("?")
    }

    /// Checks one outbound call.
    pub fn check_call(&self, method: &str, body: &Value) -> Result<(), String> {
        let m = self
            .doc
            .pointer(&format!("/methods/{method}"))
            .ok_or_else(|| format!("unknown Bot API method {method}"))?;
        let fields = m
            .get("fields")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        self.check_fields(method, &fields, body)?;
        for (lm, field, max) in LIMITS {
            if *lm == method {
                if let Some(s) = body.get(*field).and_then(Value::as_str) {
                    let n = s.encode_utf16().count();
                    if n == 0 || n > *max {
                        return Err(format!(
                            "{method}.{field} is {n} characters; allowed 1..={max}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks a value against a type of the spec (e.g. an `Update` fixture).
    pub fn check_type(&self, type_name: &str, value: &Value) -> Result<(), String> {
        let t = self
            .doc
            .pointer(&format!("/types/{type_name}"))
            .ok_or_else(|| format!("unknown type {type_name}"))?;
        match t.get("fields").and_then(Value::as_array) {
            Some(fields) => self.check_fields(type_name, fields, value),
            // Union types (MessageOrigin …) list subtypes: accept any object.
            None => value
                .is_object()
                .then_some(())
                .ok_or_else(|| format!("{type_name} must be an object")),
        }
    }

    fn check_fields(&self, ctx: &str, fields: &[Value], body: &Value) -> Result<(), String> {
        let obj = body
            .as_object()
            .ok_or_else(|| format!("{ctx}: body must be an object"))?;
        for f in fields {
            let name = f.get("name").and_then(Value::as_str).unwrap_or("");
            if f.get("required").and_then(Value::as_bool).unwrap_or(false)
                && !obj.contains_key(name)
            {
                return Err(format!("{ctx}: required field {name} missing"));
            }
        }
        for (k, v) in obj {
            let f = fields
                .iter()
                .find(|f| f.get("name").and_then(Value::as_str) == Some(k))
                .ok_or_else(|| format!("{ctx}: unknown field {k}"))?;
            let types: Vec<&str> = f
                .get("types")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if !types.iter().any(|t| self.matches_type(t, v)) {
                return Err(format!("{ctx}.{k}: {v} is not {}", types.join(" or ")));
            }
        }
        Ok(())
    }

    fn matches_type(&self, t: &str, v: &Value) -> bool {
        if let Some(inner) = t.strip_prefix("Array of ") {
            return v
                .as_array()
                .is_some_and(|a| a.iter().all(|x| self.matches_type(inner, x)));
        }
        match t {
            "Integer" => v.is_i64() || v.is_u64(),
            "Float" => v.is_number(),
            "String" => v.is_string(),
            "Boolean" | "True" => v.is_boolean(),
            "InputFile" => v.is_string(),
            other => self.check_type(other, v).is_ok(),
        }
    }
}

/// The fields of a Bot API call body as JSON, whether it was sent as JSON or as
/// `multipart/form-data` (text fields that read as JSON become that value, as Telegram reads
/// them; a file field becomes the string `attach:<filename>:<size>`). Unreadable → `Null`.
pub fn call_body(content_type: Option<&str>, body: &[u8]) -> Value {
    let Some(parts) = multipart_parts(content_type, body) else {
        return serde_json::from_slice(body).unwrap_or(Value::Null);
    };
    let mut out = serde_json::Map::new();
    for part in parts {
        let v = match &part.file_name {
            Some(f) => Value::String(format!("attach:{f}:{}", part.bytes.len())),
            None => {
                let text = String::from_utf8_lossy(&part.bytes);
                serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.into()))
            }
        };
        if !part.name.is_empty() {
            out.insert(part.name, v);
        }
    }
    Value::Object(out)
}

/// One part of a `multipart/form-data` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormPart {
    pub name: String,
    pub file_name: Option<String>,
    pub bytes: Vec<u8>,
}

/// The parts of a `multipart/form-data` body, read byte by byte (a file may be any bytes);
/// `None` when the content type is not multipart.
pub fn multipart_parts(content_type: Option<&str>, body: &[u8]) -> Option<Vec<FormPart>> {
    let boundary = content_type
        .filter(|c| c.starts_with("multipart/form-data"))?
        .split("boundary=")
        .nth(1)?;
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    let mut starts = Vec::new();
    let mut at = 0;
    while let Some(found) = find(&body[at..], delimiter) {
        starts.push(at + found);
        at += found + delimiter.len();
    }
    let mut parts = Vec::new();
    for pair in starts.windows(2) {
        let part = &body[pair[0] + delimiter.len()..pair[1]];
        let Some(head_end) = find(part, b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&part[..head_end]);
        let value = &part[head_end + 4..];
        let value = value.strip_suffix(b"\r\n").unwrap_or(value);
        let quoted = |key: &str| {
            head.split(&format!("{key}=\""))
                .nth(1)
                .and_then(|r| r.split('"').next())
                .map(str::to_owned)
        };
        parts.push(FormPart {
            name: quoted(" name").unwrap_or_default(),
            file_name: quoted("filename"),
            bytes: value.to_vec(),
        });
    }
    Some(parts)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The file of a `multipart/form-data` body: `(filename, content)`.
pub fn multipart_file(content_type: Option<&str>, body: &[u8]) -> Option<(String, String)> {
    multipart_file_bytes(content_type, body)
        .map(|(name, bytes)| (name, String::from_utf8_lossy(&bytes).into_owned()))
}

/// The file of a `multipart/form-data` body, as bytes: `(filename, bytes)`.
pub fn multipart_file_bytes(content_type: Option<&str>, body: &[u8]) -> Option<(String, Vec<u8>)> {
    multipart_parts(content_type, body)?
        .into_iter()
        .find_map(|p| Some((p.file_name?, p.bytes)))
}

/// Splits a Bot API URL `…/bot<token>/<method>` into its method.
pub fn method_of(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("/bot")?;
    rest.rsplit('/').next()
}

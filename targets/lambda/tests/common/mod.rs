//! Helpers shared by the Lambda tests: Function URL events from the fixture.

#![allow(dead_code)]

use serde_json::Value;

pub const FUNCTION_URL: &str = include_str!("../events/function_url.json");
pub const SCHEDULED: &str = include_str!("../events/scheduled.json");

/// A Function URL event for `POST path` with `body` and, if given, the secret header.
pub fn url_event(path: &str, body: &Value, secret: Option<&str>) -> Value {
    let mut ev: Value = serde_json::from_str(FUNCTION_URL).unwrap();
    ev["rawPath"] = Value::from(path);
    ev["requestContext"]["http"]["path"] = Value::from(path);
    ev["body"] = Value::from(body.to_string());
    match secret {
        Some(s) => ev["headers"]["x-telegram-bot-api-secret-token"] = Value::from(s),
        None => {
            ev["headers"].as_object_mut().unwrap().remove("x-telegram-bot-api-secret-token");
        }
    }
    ev
}

//! Helpers shared by the Lambda tests: Function URL events from the fixture.

#![allow(dead_code)]

pub mod emulator;

use base64::Engine as _;
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
            ev["headers"]
                .as_object_mut()
                .unwrap()
                .remove("x-telegram-bot-api-secret-token");
        }
    }
    ev
}

/// A Function URL event of a panel request (cookies apart from the headers, as AWS sends).
pub fn panel_event(c: clawless_testkit::scenarios::PanelCall) -> Value {
    let (path, query) = c.path.split_once('?').unwrap_or((&c.path, ""));
    let mut event = url_event(path, &Value::Null, None);
    event["requestContext"]["http"]["method"] = Value::from(c.method);
    event["rawQueryString"] = Value::from(query);
    event["body"] = Value::from(c.body);
    for (name, value) in c.headers {
        if name == "cookie" {
            event["cookies"] = serde_json::json!([value]);
        } else {
            event["headers"][name] = Value::from(value);
        }
    }
    event
}

/// A Function URL response as a panel answer (`cookies` become `set-cookie` headers).
pub fn panel_answer(r: &Value) -> clawless_testkit::scenarios::PanelAnswer {
    let mut headers: Vec<(String, String)> = r["headers"]
        .as_object()
        .map(|h| {
            h.iter()
                .map(|(k, v)| (k.to_lowercase(), v.as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default();
    for c in r["cookies"].as_array().into_iter().flatten() {
        headers.push(("set-cookie".into(), c.as_str().unwrap_or("").to_owned()));
    }
    clawless_testkit::scenarios::PanelAnswer {
        status: r["statusCode"].as_u64().unwrap_or(0) as u16,
        headers,
        body: r["body"].as_str().unwrap_or_default().to_owned(),
    }
}

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{
    AttributeDefinition, KeySchemaElement, KeyType, ScalarAttributeType, TimeToLiveSpecification,
};

/// A moto server on a free port, killed on drop.
pub struct Moto {
    child: Child,
    pub url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `moto_server` (from `CLAWLESS_MOTO_SERVER`, else on PATH); fails loudly without it.
pub fn moto() -> Moto {
    let bin = std::env::var("CLAWLESS_MOTO_SERVER").unwrap_or_else(|_| "moto_server".into());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(&bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start {bin} ({e}): install moto[server] or run .ci/run")
        });
    let moto = Moto {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "moto did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    moto
}

/// Fake credentials and the region for talking to moto.
pub fn aws_env() -> [(&'static str, &'static str); 3] {
    [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
    ]
}

pub async fn dynamo_client(moto: &Moto) -> aws_sdk_dynamodb::Client {
    let creds = aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "tests");
    let conf = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(creds)
        .endpoint_url(&moto.url)
        .http_client(clawless_lambda::setup::https_client())
        .build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

/// Creates table `name` from `template.yaml`'s own definition, so tests and deploys share
/// one schema.
pub async fn create_table(client: &aws_sdk_dynamodb::Client, name: &str) {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../template.yaml"))
        .unwrap();
    let template: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let props = &template["Resources"]["Table"]["Properties"];
    let mut req = client
        .create_table()
        .table_name(name)
        .billing_mode(aws_sdk_dynamodb::types::BillingMode::PayPerRequest);
    for a in props["AttributeDefinitions"].as_sequence().unwrap() {
        let ty = match a["AttributeType"].as_str().unwrap() {
            "S" => ScalarAttributeType::S,
            "N" => ScalarAttributeType::N,
            _ => ScalarAttributeType::B,
        };
        req = req.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(a["AttributeName"].as_str().unwrap())
                .attribute_type(ty)
                .build()
                .unwrap(),
        );
    }
    for k in props["KeySchema"].as_sequence().unwrap() {
        let ty = if k["KeyType"].as_str() == Some("HASH") {
            KeyType::Hash
        } else {
            KeyType::Range
        };
        req = req.key_schema(
            KeySchemaElement::builder()
                .attribute_name(k["AttributeName"].as_str().unwrap())
                .key_type(ty)
                .build()
                .unwrap(),
        );
    }
    req.send().await.unwrap();
    let ttl = &props["TimeToLiveSpecification"];
    client
        .update_time_to_live()
        .table_name(name)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .attribute_name(ttl["AttributeName"].as_str().unwrap())
                .enabled(ttl["Enabled"].as_bool().unwrap())
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
}

/// A Function URL event of an admin request with the bearer `token`: `GET /admin/export`, or
/// `POST /admin/import` with `body` (base64, as a Function URL carries binary).
pub fn admin_event(method: &str, name: &str, token: &str, body: Option<&[u8]>) -> Value {
    let (name, query) = name.split_once('?').unwrap_or((name, ""));
    let mut event = url_event(&format!("/admin/{name}"), &Value::Null, None);
    event["rawQueryString"] = Value::from(query);
    event["requestContext"]["http"]["method"] = Value::from(method);
    event["headers"]["authorization"] = Value::from(format!("Bearer {token}"));
    match body {
        Some(bytes) => {
            event["body"] = Value::from(base64::engine::general_purpose::STANDARD.encode(bytes));
            event["isBase64Encoded"] = Value::from(true);
        }
        None => event["body"] = Value::Null,
    }
    event
}

/// Imports `archive` into the function through its admin endpoint (the token `token`) in
/// parts, as `clawless import --remote` sends it, twice, the second changing nothing; refuses
/// a cut-off part and a wrong token; and exports it back part by part: the joined archive.
pub async fn archive_round_trip(emu: &emulator::Emulator, token: &str, archive: &[u8]) -> Vec<u8> {
    use clawless_core::archive::{reindex_parts, split, unpack, Limits};
    let (manifest, contents) = unpack(archive, &Limits::default()).unwrap();
    let (parts, notes) = split(&manifest, &contents).unwrap();
    let parts: Vec<Vec<u8>> = (parts.into_iter())
        .chain(reindex_parts(&manifest, &notes).unwrap())
        .collect();
    assert!(parts.len() > 1, "the sample goes in more than one part");
    let import = |bytes: &[u8]| emu.invoke(admin_event("POST", "import", token, Some(bytes)));
    let import_all = || async {
        let mut sum = std::collections::BTreeMap::<String, u64>::new();
        for part in &parts {
            let r = import(part).await;
            assert_eq!(r["statusCode"], 200, "{r}");
            let report: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
            for (k, v) in report.as_object().unwrap() {
                *sum.entry(k.clone()).or_default() += v.as_u64().unwrap_or(0);
            }
        }
        sum
    };
    let first = import_all().await;
    assert_eq!((first["kept"], first["files_added"]), (0, 4), "{first:?}");
    let second = import_all().await;
    assert_eq!(
        (second["added"], second["kept"], second["files_same"]),
        (0, 0, 4),
        "the second changes nothing: {second:?}"
    );
    let r = import(&parts[0][..parts[0].len() / 2]).await;
    assert_eq!(r["statusCode"], 400, "{r}");
    assert!(r["body"].as_str().unwrap().contains("damaged"), "{r}");
    let r = emu
        .invoke(admin_event("GET", "export", "wrong-token-0123456789", None))
        .await;
    assert_eq!(r["statusCode"], 401, "{r}");
    let r = emu.invoke(admin_event("GET", "export", token, None)).await;
    assert_eq!(r["statusCode"], 400, "parts only when asked: {r}");
    archive_export(emu, token).await
}

/// The function's whole store exported part by part through the admin API, joined.
pub async fn archive_export(emu: &emulator::Emulator, token: &str) -> Vec<u8> {
    use clawless_core::archive::{unpack, Joined, Limits};
    let mut joined = Joined::default();
    let mut name = "export?cursor=".to_owned();
    loop {
        let r = emu.invoke(admin_event("GET", &name, token, None)).await;
        assert_eq!(r["statusCode"], 200, "{r}");
        assert_eq!(r["isBase64Encoded"], true);
        assert_eq!(r["headers"]["content-type"], "application/gzip");
        let part = base64::engine::general_purpose::STANDARD
            .decode(r["body"].as_str().unwrap())
            .unwrap();
        let (m, c) = unpack(&part, &Limits::export_part()).unwrap();
        match joined.add(m, c).unwrap() {
            Some(next) => name = format!("export?{}", clawless_core::archive::cursor_query(&next)),
            None => break,
        }
    }
    joined.archive(&Limits::default()).unwrap()
}

/// Another bot's archive ([`clawless_core::archive::sample::other_bot`]) merged into the
/// function's store, which holds the sample: the import's report (its reminders both
/// renumbered), and the reminders the store then holds.
pub async fn merge_other_bot(emu: &emulator::Emulator, token: &str) -> Vec<(u64, String)> {
    use clawless_core::archive::{sample, split, unpack, Limits};
    let other = sample::other_bot(clawless_testkit::servers::now_ms()).unwrap();
    let (manifest, contents) = unpack(&other, &Limits::default()).unwrap();
    let (parts, _) = split(&manifest, &contents).unwrap();
    let mut renumbered = 0;
    for part in &parts {
        let r = emu
            .invoke(admin_event("POST", "import", token, Some(part)))
            .await;
        assert_eq!(r["statusCode"], 200, "{r}");
        let report: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
        renumbered += report["reminders"]["renumbered"].as_u64().unwrap_or(0);
    }
    assert_eq!(renumbered, 2, "both of the other bot's reminders collide");
    let (_, held) = unpack(&archive_export(emu, token).await, &Limits::default()).unwrap();
    sample::reminders_in(&held)
}

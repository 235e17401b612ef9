//! Export and import on the real `bootstrap` under the Runtime API emulator with moto, through
//! Function URL events as AWS sends them: an archive exported by the native binary goes in
//! (base64, as a Function URL carries binary), a second import changes nothing, a cut copy and
//! a wrong token are refused, and the archive comes out holding the same, then back into a
//! native data directory, its memory byte-identical and recalled.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use base64::Engine as _;
use clawless_core::archive::{sample, unpack, Limits};
use clawless_testkit::remote::local;
use clawless_testkit::servers::{fakes, now_ms};
use common::emulator::{start_emulator, start_function_with};
use serde_json::Value;

const ADMIN: &str = "lambda-archive-token-0123456789";

fn admin_event(method: &str, name: &str, token: &str, body: Option<&[u8]>) -> Value {
    let mut event = common::url_event(&format!("/admin/{name}"), &Value::Null, None);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_moves_through_the_admin_endpoint() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    common::create_table(&client, "clawless-archive").await;
    let (_f, tg, llm) = fakes().await;
    let (emu, runtime) = start_emulator().await;
    let _function = start_function_with(
        &runtime,
        &moto.url,
        "clawless-archive",
        &tg,
        &llm,
        &[("CLAWLESS_ADMIN_TOKEN", ADMIN)],
    );
    // From native: the sample imported into a data directory and exported by the binary.
    let bin = std::env::var("CLAWLESS_NATIVE_BIN")
        .expect("CLAWLESS_NATIVE_BIN: the native `clawless` binary (set by .ci/run)");
    let dir = std::env::temp_dir().join(format!("clawless-lambda-archive-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let now = now_ms();
    let first = dir.join("sample.tar.gz");
    std::fs::write(&first, sample::archive(now).unwrap()).unwrap();
    let (from, to) = (dir.join("from-native"), dir.join("to-native"));
    let (ok, said) = local(&bin, &from, &["import", first.to_str().unwrap()]);
    assert!(ok, "{said}");
    let exported = dir.join("native.tar.gz");
    let (ok, said) = local(&bin, &from, &["export", exported.to_str().unwrap()]);
    assert!(ok, "{said}");
    let archive = std::fs::read(&exported).unwrap();
    let import = |bytes: &[u8]| emu.invoke(admin_event("POST", "import", ADMIN, Some(bytes)));

    let r = import(&archive).await;
    assert_eq!(r["statusCode"], 200, "{r}");
    let report: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        (report["kept"].as_u64(), report["files_added"].as_u64()),
        (Some(0), Some(4)),
        "{report}"
    );
    let r = import(&archive).await;
    let report: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        (
            report["added"].as_u64(),
            report["kept"].as_u64(),
            report["files_same"].as_u64()
        ),
        (Some(0), Some(0), Some(4)),
        "the second changes nothing: {report}"
    );
    let r = import(&archive[..archive.len() / 2]).await;
    assert_eq!(r["statusCode"], 400, "{r}");
    assert!(r["body"].as_str().unwrap().contains("damaged"), "{r}");
    let r = emu
        .invoke(admin_event("GET", "export", "wrong-token-0123456789", None))
        .await;
    assert_eq!(r["statusCode"], 401, "{r}");

    let r = emu.invoke(admin_event("GET", "export", ADMIN, None)).await;
    assert_eq!(r["statusCode"], 200);
    assert_eq!(r["isBase64Encoded"], true);
    assert_eq!(r["headers"]["content-type"], "application/gzip");
    let back = base64::engine::general_purpose::STANDARD
        .decode(r["body"].as_str().unwrap())
        .unwrap();
    let (manifest, held) = unpack(&back, &Limits::default()).unwrap();
    assert_eq!(manifest.source, "lambda");
    let sent = sample::contents(now);
    sample::same(&sent, &held, 60_000).unwrap();

    // Back to native: the memory byte-identical and recalled.
    let last = dir.join("lambda.tar.gz");
    std::fs::write(&last, &back).unwrap();
    let (ok, said) = local(&bin, &to, &["import", last.to_str().unwrap()]);
    assert!(ok && said.contains("files: 4 added"), "{said}");
    for (path, bytes) in &sent.files {
        assert_eq!(
            &std::fs::read(to.join("files").join(path)).unwrap(),
            bytes,
            "{path}"
        );
    }
    let (ok, said) = local(&bin, &to, &["memory", "search", "door code"]);
    assert!(
        ok && said.contains("2468"),
        "recalled after the moves: {said}"
    );
}

//! The port conformance suites on the DynamoDB adapters, against moto, with the table created
//! from `template.yaml`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use clawless_lambda::dynamo::{DynamoFiles, DynamoKv, DynamoText, DynamoVectors, Table, MAX_FILE};
use clawless_platform::native_io::SystemClock;
use clawless_platform::{files, kv, text, vectors, ErrorKind, Files};

async fn table(moto: &common::Moto, name: &str) -> Table {
    let client = common::dynamo_client(moto).await;
    common::create_table(&client, name).await;
    Table {
        client,
        name: name.into(),
        clock: Arc::new(SystemClock),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamo_adapters_conform() {
    let moto = common::moto();
    let t = table(&moto, "conformance").await;
    let kv = DynamoKv(t.clone());
    // The suite lists prefixes with a '/' (a Query of one partition) and one without (a Scan).
    kv::conformance::run(&kv, &SystemClock, "suite").await;
    vectors::conformance::run(&DynamoVectors(t.clone())).await;
    text::conformance::run(&DynamoText(t.clone())).await;
    let files = DynamoFiles(t.clone());
    files::conformance::run(&files).await;
    let err = files
        .write("big.md", &vec![b'x'; MAX_FILE + 1])
        .await
        .unwrap_err();
    assert_eq!(
        err.kind,
        ErrorKind::Invalid,
        "oversized files are refused, not truncated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_table_is_unavailable() {
    let moto = common::moto();
    let client = common::dynamo_client(&moto).await;
    let kv = DynamoKv(Table {
        client,
        name: "nope".into(),
        clock: Arc::new(SystemClock),
    });
    use clawless_platform::Kv;
    assert_eq!(
        kv.get("a/b").await.unwrap_err().kind,
        ErrorKind::Unavailable
    );
}

//! The port conformance suites on the DynamoDB adapters, against moto, with the table created
//! from `template.yaml`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use clawless_lambda::dynamo::{
    DynamoFiles, DynamoKv, DynamoText, DynamoVectors, Table, MAX_FILE, PART,
};
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

/// The items of the table's `filepart` partition (the parts of files past their first).
async fn parts(t: &Table) -> usize {
    let out = t
        .client
        .query()
        .table_name(&t.name)
        .consistent_read(true)
        .key_condition_expression("p = :p")
        .expression_attribute_values(":p", AttributeValue::S("filepart".into()))
        .send()
        .await
        .unwrap();
    out.items.unwrap_or_default().len()
}

/// A file past one item's 400 KB (a picture, a voice answer) is kept in parts and read back
/// whole; a smaller write, an append across a part's end and a delete leave no part behind
/// that the file does not use; the biggest file fits and one byte more is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_files_are_kept_in_parts() {
    let moto = common::moto();
    let t = table(&moto, "parts").await;
    let files = DynamoFiles(t.clone());
    // 1 MB of bytes that are not all alike, so a part out of order would show.
    let picture: Vec<u8> = (0..1_048_576u32).map(|i| (i % 251) as u8).collect();
    files.write("pictures/a.jpg", &picture).await.unwrap();
    assert_eq!(files.read("pictures/a.jpg").await.unwrap(), picture);
    assert_eq!(parts(&t).await, picture.len().div_ceil(PART) - 1);
    assert_eq!(files.list("pictures").await.unwrap(), ["pictures/a.jpg"]);

    // Overwritten smaller: one item, the old parts gone.
    files.write("pictures/a.jpg", b"small").await.unwrap();
    assert_eq!(files.read("pictures/a.jpg").await.unwrap(), b"small");
    assert_eq!(parts(&t).await, 0, "the old parts are deleted");

    // Appended across the first part's end.
    let tail = vec![7u8; PART];
    files.append("pictures/a.jpg", &tail).await.unwrap();
    let mut whole = b"small".to_vec();
    whole.extend_from_slice(&tail);
    assert_eq!(files.read("pictures/a.jpg").await.unwrap(), whole);
    assert_eq!(parts(&t).await, 1);

    files.delete("pictures/a.jpg").await.unwrap();
    assert_eq!(
        files.read("pictures/a.jpg").await.unwrap_err().kind,
        ErrorKind::NotFound
    );
    assert_eq!(parts(&t).await, 0, "a delete takes the parts too");

    let biggest = vec![b'y'; MAX_FILE];
    files.write("biggest.bin", &biggest).await.unwrap();
    assert_eq!(files.read("biggest.bin").await.unwrap().len(), MAX_FILE);
    files.delete("biggest.bin").await.unwrap();
    assert_eq!(parts(&t).await, 0);
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

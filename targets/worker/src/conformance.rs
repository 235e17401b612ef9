//! Test-only route (feature `test-routes`): `GET /__conformance/<suite>` runs one port
//! conformance suite on the real bindings in workerd and answers `pass`. A failed check
//! panics, which workerd turns into an error response: the test script treats anything but
//! `200 pass` as a failure.

use std::sync::Arc;

use clawless_platform::{clock, files, http, kv, text, vectors};
use js_sys::Reflect;
use wasm_bindgen::JsValue;
use worker::{Env, Request, Response, Result};

use crate::d1::{D1Files, D1Kv, D1Text, D1Vectors, D1};
use crate::io::{FetchHttp, WorkerClock};
use crate::vectorize::Vectorize;

/// A D1 database of its own, so suites that need an empty store get one.
const DB: &str = "CONFORMANCE_DB";
/// A mock Vectorize index of 3 dimensions (the suite's vectors).
const INDEX: &str = "VECTORIZE_TEST";

pub async fn run(suite: &str, req: &Request, env: &Env) -> Result<Response> {
    let d1 = D1::new(env.d1(DB)?);
    d1.ensure_schema()
        .await
        .map_err(|e| worker::Error::RustError(e.to_string()))?;
    match suite {
        "kv" => {
            let kv = D1Kv {
                d1,
                clock: Arc::new(WorkerClock),
            };
            kv::conformance::run(&kv, &WorkerClock, "conformance").await;
        }
        "files" => files::conformance::run(&D1Files(d1)).await,
        "text" => text::conformance::run(&D1Text(d1)).await,
        "vectors-d1" => vectors::conformance::run(&D1Vectors(d1)).await,
        "vectorize" => {
            let index =
                Reflect::get(env.as_ref(), &JsValue::from_str(INDEX)).unwrap_or(JsValue::UNDEFINED);
            vectors::conformance::run(&Vectorize::new(index)).await;
        }
        "http" => {
            let url = req.url()?;
            let base = url
                .query_pairs()
                .find(|(k, _)| k == "base")
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default();
            http::conformance::run(&FetchHttp, &base).await;
        }
        "clock" => clock::conformance::run(&WorkerClock).await,
        _ => return Response::error("no such suite", 404),
    }
    Response::ok("pass")
}

//! What the Lambda's ack costs, counted: one webhook update through `Shell::handle` on the
//! DynamoDB adapters (moto) makes exactly two DynamoDB requests (the dedupe read, the
//! conditional inbox write) and one Invoke (the drain, run in another invocation). The
//! requests are counted by an SDK interceptor, each HTTP attempt once, so a retry counts too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use clawless_core::{App, Config, Env};
use clawless_lambda::dynamo::{DynamoFiles, DynamoKv, DynamoText, DynamoVectors, Table};
use clawless_lambda::events::Shell;
use clawless_lambda::invoke::Invoker;
use clawless_platform::native_io::SystemClock;
use clawless_platform::{FakeHttp, Platform};
use clawless_testkit::fixtures::{self, OWNER_ID};

/// The DynamoDB operations sent (`x-amz-target`, e.g. `DynamoDB_20120810.GetItem`), in order.
#[derive(Debug, Default)]
struct Sent(Mutex<Vec<String>>);

impl Sent {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

#[derive(Debug)]
struct Count(Arc<Sent>);

impl Intercept for Count {
    fn name(&self) -> &'static str {
        "count DynamoDB requests"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let target = context.request().headers().get("x-amz-target");
        let operation = target.unwrap_or("?").rsplit('.').next().unwrap_or("?");
        self.0 .0.lock().unwrap().push(operation.to_owned());
        Ok(())
    }
}

/// The drains asked for, instead of Lambda's Invoke.
#[derive(Default)]
struct Invokes(Mutex<Vec<String>>);

#[async_trait]
impl Invoker for Invokes {
    async fn drain_later(&self, lane: &str) -> Result<(), String> {
        self.0.lock().unwrap().push(lane.to_owned());
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_webhook_update_is_two_dynamodb_requests_and_one_invoke() {
    let moto = common::moto();
    common::create_table(&common::dynamo_client(&moto).await, "acks").await;
    let sent = Arc::new(Sent::default());
    let creds = aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "tests");
    let conf = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(creds)
        .endpoint_url(&moto.url)
        .http_client(clawless_lambda::setup::https_client())
        .interceptor(Count(sent.clone()))
        .build();
    let table = Table {
        client: aws_sdk_dynamodb::Client::from_conf(conf),
        name: "acks".into(),
        clock: Arc::new(SystemClock),
    };
    // The shell `setup::build` makes, with a fake for the Bot API and the model (never
    // called on the ack path) and a recording invoker.
    let platform = Platform {
        kv: Arc::new(DynamoKv(table.clone())),
        files: Arc::new(DynamoFiles(table.clone())),
        http: Arc::new(FakeHttp::default()),
        vectors: Arc::new(DynamoVectors(table.clone())),
        text: Arc::new(DynamoText(table)),
        clock: Arc::new(SystemClock),
        exec: None,
    };
    let env = Env::from_pairs([
        ("TELEGRAM_BOT_TOKEN", "9:LAMBDA"),
        ("TELEGRAM_WEBHOOK_SECRET", "lambda-secret"),
        ("TELEGRAM_ALLOWED_USERS", &OWNER_ID.to_string()),
        ("ANTHROPIC_API_KEY", "sk"),
    ]);
    let config = Config::load(&clawless_core::config::embedded()).unwrap();
    let invokes = Arc::new(Invokes::default());
    let shell = Shell {
        app: Arc::new(App::new(platform, config, &env, "t").unwrap()),
        invoker: invokes.clone(),
    };
    assert!(sent.take().is_empty(), "building the app sends nothing");

    for id in [5, 6] {
        let update = fixtures::update("private_text", id);
        let event = common::url_event("/telegram/main", &update, Some("lambda-secret"));
        let resp = shell.handle(event).await;
        assert_eq!(resp["statusCode"], 200, "{resp}");
        assert_eq!(
            sent.take(),
            ["PutItem", "GetItem"],
            "update {id}: the conditional inbox write and the dedupe read after it, nothing more"
        );
        assert_eq!(
            std::mem::take(&mut *invokes.0.lock().unwrap()),
            [format!("main:{OWNER_ID}")],
            "update {id}: one Invoke for its lane"
        );
    }
}

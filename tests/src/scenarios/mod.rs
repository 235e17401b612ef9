//! One scenario suite for every shell (feature `servers`): each scenario is a name, the updates
//! it posts and what the fake Bot API and model must have seen afterwards. A shell's harness
//! implements [`Shell`] (post a body to its webhook) around one running shell and calls
//! [`run_all`]; every scenario uses its own users, chats and update ids, so one shell serves
//! them all.
//!
//! A scenario talks to the shell only through [`Ctx`]: updates built from the fixtures with the
//! scenario's ids ([`Ctx::text`], [`Ctx::fixture`]), [`Ctx::post`], and waits on the fakes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod hooks;
mod kill_points;
mod list;
mod long_turn;
mod metrics;
mod panel;
mod watches;

pub use hooks::hooks_over_http;
pub use kill_points::{KillPoint, KILL_POINTS, LISTING};
pub use long_turn::{a_long_streamed_answer_is_answered_once, a_long_turn_is_answered_once};
pub use metrics::{assert_turn_kept, metrics_count_a_scenario};
pub use panel::{
    launch_data, launch_data_named, panel_http, panel_link, panel_over_http, PanelAnswer,
    PanelCall, PANEL_USER,
};
pub use watches::{a_watch_acts_once_on_a_change, WATCH_USER};

use std::cell::Cell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures::future::LocalBoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};

use crate::fixtures::{self, GROUP_ID, OWNER_ID, STRANGER_ID};
use crate::servers::{within, Fakes};

/// The status of a webhook request, as a shell answers it.
pub type Status<'a> = Pin<Box<dyn Future<Output = u16> + 'a>>;

/// One running shell, as the scenarios see it.
pub trait Shell {
    /// `native`, `lambda`, `worker`: for the report.
    fn name(&self) -> &str;
    /// The fakes the shell was started against.
    fn fakes(&self) -> &Fakes;
    /// The webhook secret the shell was started with.
    fn secret(&self) -> &str;
    /// POSTs `body` to the shell's `/telegram/main` (with `secret` as the secret header, none
    /// without one) and returns the HTTP status.
    fn post<'a>(&'a self, body: String, secret: Option<&'a str>) -> Status<'a>;
    /// Every line the shell has logged so far (its process's output, the Worker's console).
    fn logs(&self) -> Vec<String>;
    /// Runs the shell's scheduled work once (the Lambda's schedule, the Worker's cron); the
    /// native runner wakes for due work itself, so there it does nothing.
    fn scheduled(&self) -> Pin<Box<dyn Future<Output = ()> + '_>> {
        Box::pin(async {})
    }
    /// Why this shell cannot run `scenario`, if it cannot (printed; should be rare).
    fn skip(&self, _scenario: &str) -> Option<&'static str> {
        None
    }
}

/// Declares scenarios as plain async fns with doc comments and collects them in `ALL`.
macro_rules! scenarios {
    ($($(#[doc = $doc:literal])* fn $name:ident($c:ident) $body:block)*) => {
        $(
            $(#[doc = $doc])*
            fn $name<'a>($c: &'a Ctx<'a>) -> futures::future::LocalBoxFuture<'a, ()> {
                Box::pin(async move $body)
            }
        )*
        pub(super) const ALL: &[Scenario] =
            &[$(Scenario { name: stringify!($name), run: $name }),*];
    };
}
pub(crate) use scenarios;

/// A named scenario: posts updates through [`Ctx`] and asserts on the fakes.
pub struct Scenario {
    pub name: &'static str,
    pub run: for<'a> fn(&'a Ctx<'a>) -> LocalBoxFuture<'a, ()>,
}

/// Every scenario, in the order [`run_all`] runs them.
pub fn all() -> &'static [Scenario] {
    list::ALL
}

/// The approval scenarios, for a shell started on
/// [`asking_config`](crate::fixtures::asking_config), in the order [`run_approvals`] runs them.
pub fn approvals() -> &'static [Scenario] {
    approvals::ALL
}

/// Scenario indexes of the approval list start here (their users and ids differ from the
/// main list's).
const APPROVALS_FROM: usize = 101;

/// An allowed user who is in no scenario: taps what is not theirs, and is whom the injected
/// pages want messaged.
const BYSTANDER: i64 = crate::injection::OTHER_PERSON;

/// The users a shell running the scenarios must allow (`TELEGRAM_ALLOWED_USERS`): the
/// fixtures' owner, one user per scenario of either list, and a bystander.
pub fn allowed_users() -> String {
    let mut users = vec![OWNER_ID, BYSTANDER, PANEL_USER, WATCH_USER];
    users.extend((1..=all().len()).map(user_of));
    users.extend((APPROVALS_FROM..APPROVALS_FROM + approvals().len()).map(user_of));
    users
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn user_of(index: usize) -> i64 {
    OWNER_ID + index as i64
}

/// What a scenario works with: the shell, the fakes and its own ids. Scenario `i` (from 1)
/// speaks as user `OWNER_ID + i` in its private chat and in group `GROUP_ID - i`, is refused
/// as stranger `STRANGER_ID - i`, and numbers its updates from `i * 1000`.
pub struct Ctx<'a> {
    pub shell: &'a dyn Shell,
    pub f: &'a Fakes,
    /// The scenario's allowed user; their private chat has the same id.
    pub user: i64,
    pub group: i64,
    pub stranger: i64,
    next_id: Cell<i64>,
}

impl<'a> Ctx<'a> {
    fn new(shell: &'a dyn Shell, index: usize) -> Ctx<'a> {
        Ctx {
            shell,
            f: shell.fakes(),
            user: user_of(index),
            group: GROUP_ID - index as i64,
            stranger: STRANGER_ID - index as i64,
            next_id: Cell::new(index as i64 * 1000),
        }
    }

    /// A fresh update id.
    pub fn id(&self) -> i64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    /// A private text from the scenario's user, with a fresh update id.
    pub fn text(&self, text: &str) -> Value {
        crate::servers::text_update_from(self.user, self.id(), text)
    }

    /// A private message from the scenario's user with `fields` (a photo, a voice note, a
    /// document, a caption …) and no text, with a fresh update id.
    pub fn media(&self, fields: Value) -> Value {
        let mut u = self.text("");
        if let (Some(m), Some(fields)) = (u["message"].as_object_mut(), fields.as_object()) {
            m.remove("text");
            m.extend(fields.clone());
        }
        u
    }

    /// Serves `bytes` as the file `file_id` from the fake Bot API.
    pub fn file(&self, file_id: &str, bytes: impl Into<Vec<u8>>) {
        self.f
            .files
            .lock()
            .unwrap()
            .insert(file_id.to_owned(), bytes.into());
    }

    /// The fixture `name` with a fresh update id and the scenario's ids in place of the
    /// fixtures' owner, group and stranger.
    pub fn fixture(&self, name: &str) -> Value {
        let mut u = fixtures::update(name, self.id());
        for at in ["/from/id", "/chat/id"]
            .into_iter()
            .flat_map(|at| ["/message", "/edited_message"].map(move |m| format!("{m}{at}")))
        {
            if let Some(v) = u.pointer_mut(&at) {
                *v = json!(match v.as_i64() {
                    Some(OWNER_ID) => self.user,
                    Some(GROUP_ID) => self.group,
                    Some(STRANGER_ID) => self.stranger,
                    _ => panic!("{name}: unexpected id at {at}: {v}"),
                });
            }
        }
        u
    }

    /// POSTs `update` with the shell's secret; asserts the 200.
    pub async fn post(&self, update: &Value) {
        let status = self
            .shell
            .post(update.to_string(), Some(self.shell.secret()))
            .await;
        assert_eq!(status, 200, "posting {update}");
    }

    /// POSTs `body` as it is with `secret`; returns the status.
    pub async fn post_raw(&self, body: String, secret: Option<&str>) -> u16 {
        self.shell.post(body, secret).await
    }

    /// The texts sent to `chat` so far.
    pub fn sent_to(&self, chat: i64) -> Vec<String> {
        self.f.sent_to(chat)
    }

    /// The sendMessage bodies delivered to `chat`.
    pub fn bodies_to(&self, chat: i64) -> Vec<Value> {
        self.f
            .sent()
            .into_iter()
            .filter(|b| b["chat_id"] == chat)
            .collect()
    }

    /// The bodies of the Bot API `method` calls answered for `chat`.
    pub fn calls_to(&self, method: &str, chat: i64) -> Vec<Value> {
        let calls = self.f.calls.lock().unwrap();
        calls
            .iter()
            .filter(|(m, b)| m == method && b["chat_id"] == chat)
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// Waits (at most `limit`) until `chat` has had `n` messages, then a little longer, and
    /// returns what it got: a late duplicate shows up as one message too many.
    pub async fn answers(&self, chat: i64, n: usize, limit: Duration) -> Vec<String> {
        within(&format!("{n} message(s) to chat {chat}"), limit, || {
            self.sent_to(chat).len() >= n
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.sent_to(chat)
    }

    /// The model requests whose question (last message) contains `needle`.
    pub fn asked(&self, needle: &str) -> Vec<Value> {
        let reqs = self.f.llm_requests.lock().unwrap();
        reqs.iter()
            .filter(|r| {
                r["messages"]
                    .as_array()
                    .and_then(|m| m.last())
                    .is_some_and(|m| m.to_string().contains(needle))
            })
            .cloned()
            .collect()
    }
}

/// Runs every scenario of [`all`] on `shell`, one after the other, and reports each by name;
/// panics at the end naming every scenario that failed, or when a Bot API call broke the spec
/// or a message was over 4096 UTF-16 units.
pub async fn run_all(shell: &dyn Shell) {
    run(shell, all(), 1).await
}

/// [`run_all`] for the [`approvals`] list; `shell` runs on the asking config.
pub async fn run_approvals(shell: &dyn Shell) {
    run(shell, approvals(), APPROVALS_FROM).await
}

async fn run(shell: &dyn Shell, list: &[Scenario], first: usize) {
    let mut failed = Vec::new();
    for (i, scenario) in list.iter().enumerate() {
        let name = scenario.name;
        if let Some(why) = shell.skip(name) {
            println!("scenario {name} skipped on {}: {why}", shell.name());
            continue;
        }
        let ctx = Ctx::new(shell, first + i);
        let started = Instant::now();
        let outcome = AssertUnwindSafe((scenario.run)(&ctx)).catch_unwind().await;
        let took = started.elapsed().as_secs_f64();
        match outcome {
            Ok(()) => println!("scenario {name} on {}: ok ({took:.1} s)", shell.name()),
            Err(panic) => {
                let why = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                println!(
                    "scenario {name} on {}: FAILED ({took:.1} s): {why}",
                    shell.name()
                );
                failed.push(name);
            }
        }
    }
    let mut violations = shell.fakes().violations.lock().unwrap().clone();
    for body in shell.fakes().sent() {
        let text = body["text"].as_str().unwrap_or("");
        if text.encode_utf16().count() > 4096 {
            violations.push(format!(
                "a message over 4096 UTF-16 units to {}",
                body["chat_id"]
            ));
        }
    }
    assert!(
        failed.is_empty() && violations.is_empty(),
        "on {}: failed scenarios {failed:?}; Bot API spec violations {violations:?}",
        shell.name()
    );
}

//! Every Kv key the core writes, built in one place: what each prefix holds and who owns it.
//! A key never appears as a string literal elsewhere (a tidy test checks this).
//!
//! | prefix | value | written by |
//! |---|---|---|
//! | `inbox/<lane>/<update_id:020>` | a pending job (JSON); lexical order is update order | ingress, turn |
//! | `seen/<connector>/<update_id>` | a finished update, kept `dedupe_hours` | inbox |
//! | `lease/<lane>` | the drainer holding the lane, with a TTL | inbox |
//! | `stranger/<connector>/<user>` | what a stranger was told (their pairing code) and when, until the code expires | pairing |
//! | `pairing/<connector>/<code>` | a pending pairing code: whose it is, TTL 1 h | pairing |
//! | `paired/<connector>/<user>` | a person the owner paired: who paired them, when | pairing |
//! | `botinfo/<connector>` | the bot's `getMe` identity, a day | turn |
//! | `session/<session key>` | a conversation's history | session |
//! | `summarized/<session key>/<update>` | a session's summary was written | memory lifecycle |
//! | `compacted/<session key>/<update>` | the facts of a compaction up to that update were saved | memory lifecycle |
//! | `consolidation/<scope>` | the day a scope was last consolidated | memory lifecycle |
//! | `consolidating/<scope>/<note>`, `consolidated/<scope>/<note>` | a daily note's claim and its done mark | memory lifecycle |
//! | `memscope/<agent>/<connector>` | the connector's memory moved to per-person scopes | memory lifecycle |
//! | `memidx/<scope>/<path>` | a memory file's index manifest | memory store |
//! | `poll/<connector>/offset` | the long-polling offset | admin |
//! | `menu/<connector>` | a hash of the command menu Telegram last got (`setMyCommands`) | menu |
//! | `doctor/<instance>` | `doctor`'s storage probe, deleted at once (TTL 60 s) | doctor |
//! | `usage/<connector>/<d2026-11-23 or m2026-11>/<u<user> or c<chat> or all>` | tokens and cost of a period (TTL) | usage |
//! | `usage/<connector>/d<date>/m<agent>\|<model>` | an agent's tokens and cost on a model that day (TTL) | usage |
//! | `audit/<connector>/<at ms:015>/<trace>.<seq:05>` | one step of the audit trail (TTL: retention) | audit |
//! | `grant/<connector>/<chat>/<tool>` | "allow for a while": a tool runs without asking in a chat, with a TTL | turn (approvals) |
//! | `sched/<connector>/<chat>/<id:010>` | a reminder or scheduled task, with its next time | schedule |
//! | `sched-due/<at ms:015>/<connector>/<chat>/<id>` | the due index: one entry per reminder's next time, in time order | schedule |
//! | `sched-seq/<connector>` | the last reminder id given out on a connector | schedule |
//! | `sched-fired/<connector>/<chat>/<fingerprint>` | a fired one-off's tombstone: its id here and when it fired, a year | schedule (fire) |
//! | `tz/<connector>/<chat>` | a chat's time zone (`/timezone`) | schedule |
//! | `model/<connector>/<chat>` | the model a chat chose with `/model` (`provider/model`) | turn |
//! | `voice/<connector>/<chat>` | when a chat's answers are spoken (`/voice`: on, off, auto) | turn |
//! | `agent/<session key>` | the agent a conversation chose with `/agent` | turn |
//! | `preview/<connector>/<chat>/<message>` | the placeholder a group's streamed reply to a message edits, a day | turn |
//! | `events/<at ms:015>/<instance>/<n:06>` | a batch of an instance's events (JSON), a day | observe (journal) |
//! | `metrics/<instance>` | an instance's counts (`metrics::Snapshot`), kept three days since its last write | observe |
//! | `panel-link/<token digest>` | a panel sign-in link: whose, whether used (TTL 10 min) | panel |
//! | `panel-out/<connector>/<user>` | a person's panel sign-outs: the sessions ended one by one, the time of "sign out everywhere" (TTL: a session's life) | panel |
//! | `schema/store` | the store's layout version and the release that wrote it | upgrade |
//! | `watch/<connector>/<chat>/<id:010>` | what a watch knows of its page: validators, hash, text, failures (TTL 90 d) | watch |
//! | `watch-gate/<connector>/<chat>/<task id:010>` | the changes of its watch a gated task last ran on, and the firing that took them (TTL 400 d) | watch |
//! | `hookrate/<hook>/<minute>` | how many deliveries a hook took in a minute (TTL 2 min) | hooks |
//! | `call/<turn>:<round>:<call id>` | what a tool call that must happen once did (a reminder's id, then "done"), two days | schedule |

use crate::ids::{ConnectorId, Lane, Scope, SessionKey};

/// The prefixes an export carries ([`crate::archive`]): what people built with the assistant,
/// and the tombstones of fired one-offs (`sched-fired/`, last: a cursor of an export in
/// parts names a prefix by its place here), so no import brings one back. Left out: what the
/// target rebuilds (`memidx/`, `botinfo/`, `menu/`), what is in flight or short-lived
/// (`inbox/`, `lease/`, `seen/`, `call/`, `hookrate/`, `watch/`, `watch-gate/`, `pairing/`, `stranger/`, `preview/`, `panel-link/`,
/// `doctor/`, `consolidating/`), an instance's own (`events/`, `metrics/`, `poll/`) and the
/// store's version. An archive holding any other key is refused.
pub const EXPORTED: &[&str] = &[
    "session/",
    "summarized/",
    "compacted/",
    "consolidation/",
    "consolidated/",
    "memscope/",
    "paired/",
    "usage/",
    "audit/",
    "grant/",
    "sched/",
    "sched-due/",
    "sched-seq/",
    "tz/",
    "model/",
    "voice/",
    "agent/",
    "panel-out/",
    "sched-fired/",
];

/// Prefix of every pending job.
pub const INBOX: &str = "inbox/";
/// Prefix of every lease.
pub const LEASES: &str = "lease/";

pub fn job(lane: &Lane, update_id: i64) -> String {
    format!("{INBOX}{lane}/{update_id:020}")
}

/// The prefix of a lane's jobs.
pub fn lane_jobs(lane: &Lane) -> String {
    format!("{INBOX}{lane}/")
}

pub fn seen(connector: &ConnectorId, update_id: i64) -> String {
    format!("seen/{connector}/{update_id}")
}

/// What watch `id` of `chat` knows of its page (see [`crate::watch`]).
pub fn watch_state(connector: &ConnectorId, chat: i64, id: u64) -> String {
    format!("watch/{connector}/{chat}/{id:010}")
}

/// The watch changes gated task `task` of `chat` last ran on (see [`crate::watch`]).
pub fn watch_gate(connector: &ConnectorId, chat: i64, task: u64) -> String {
    format!("watch-gate/{connector}/{chat}/{task:010}")
}

/// A hook's delivery count in minute `minute` (since the epoch).
pub fn hook_rate(hook: &str, minute: u64) -> String {
    format!("hookrate/{hook}/{minute}")
}

pub fn lease(lane: &Lane) -> String {
    format!("{LEASES}{lane}")
}

/// What a stranger was told: their pairing code and when.
pub fn stranger(connector: &ConnectorId, user: i64) -> String {
    format!("stranger/{connector}/{user}")
}

/// The prefix of a connector's pending pairing codes.
pub fn pairing_codes(connector: &ConnectorId) -> String {
    format!("pairing/{connector}/")
}

/// A pending pairing code.
pub fn pairing_code(connector: &ConnectorId, code: &str) -> String {
    format!("{}{code}", pairing_codes(connector))
}

/// The prefix of a connector's paired people.
pub fn paired_users(connector: &ConnectorId) -> String {
    format!("paired/{connector}/")
}

/// A person the owner paired.
pub fn paired(connector: &ConnectorId, user: i64) -> String {
    format!("{}{user}", paired_users(connector))
}

pub fn bot_identity(connector: &ConnectorId) -> String {
    format!("botinfo/{connector}")
}

/// Prefix of every session.
pub const SESSIONS: &str = "session/";

pub fn session(session_key: &SessionKey) -> String {
    format!("{SESSIONS}{session_key}")
}

pub fn summarized(session_key: &SessionKey, last_update_id: i64) -> String {
    format!("summarized/{session_key}/{last_update_id}")
}

/// The facts of a session's turns up to `last_update_id` were saved when it was compacted.
pub fn compacted(session_key: &SessionKey, last_update_id: i64) -> String {
    format!("compacted/{session_key}/{last_update_id}")
}

pub fn consolidation_ran(scope: &Scope) -> String {
    format!("consolidation/{scope}")
}

pub fn consolidation_claim(scope: &Scope, note: &str) -> String {
    format!("consolidating/{scope}/{note}")
}

pub fn consolidation_done(scope: &Scope, note: &str) -> String {
    format!("consolidated/{scope}/{note}")
}

/// The store's layout version (see [`crate::upgrade`]).
pub fn store_version() -> String {
    "schema/store".to_owned()
}

/// Prefix of the markers of memory moved to per-person scopes.
pub const MEMORY_SCOPES_MOVED: &str = "memscope/";

pub fn memory_scopes_moved(legacy_scope: &Scope) -> String {
    format!("{MEMORY_SCOPES_MOVED}{legacy_scope}")
}

/// Prefix of every memory index manifest.
pub const MEMORY_MANIFESTS: &str = "memidx/";

/// The prefix of the index manifests under `scope` (every deeper scope included).
pub fn memory_manifests(scope: &Scope) -> String {
    format!("{MEMORY_MANIFESTS}{scope}/")
}

pub fn memory_manifest(scope: &Scope, path: &str) -> String {
    format!("{MEMORY_MANIFESTS}{scope}/{path}")
}

/// The prefix of every usage counter of `period` (`d<date>`) on a connector.
pub fn usage_period(connector: &ConnectorId, period: &str) -> String {
    format!("usage/{connector}/{period}/")
}

/// A usage counter: `period` is `d<date>` or `m<month>`, `who` `u<user>`, `c<chat>`, `all`
/// or (days only) `m<agent>|<model>`.
pub fn usage(connector: &ConnectorId, period: &str, who: &str) -> String {
    format!("usage/{connector}/{period}/{who}")
}

/// An audit entry: time-ordered within a connector.
pub fn audit(connector: &ConnectorId, at_ms: u64, trace: i64, seq: u32) -> String {
    format!("audit/{connector}/{at_ms:015}/{trace}.{seq:05}")
}

/// The prefix of a connector's audit entries.
pub fn audit_prefix(connector: &ConnectorId) -> String {
    format!("audit/{connector}/")
}

/// The key just before every audit entry of `connector` at or after `at_ms`.
pub fn audit_from(connector: &ConnectorId, at_ms: u64) -> String {
    format!("audit/{connector}/{at_ms:015}")
}

/// The prefix of a chat's grants.
pub fn grants(connector: &ConnectorId, chat: i64) -> String {
    format!("grant/{connector}/{chat}/")
}

pub fn grant(connector: &ConnectorId, chat: i64, tool: &str) -> String {
    format!("{}{tool}", grants(connector, chat))
}

pub fn poll_offset(connector: &ConnectorId) -> String {
    format!("poll/{connector}/offset")
}

/// The storage probe `doctor` writes, reads back and deletes.
pub fn doctor_probe(instance: &str) -> String {
    format!("doctor/{instance}")
}

/// The hash of the command menu Telegram last got for a connector.
pub fn command_menu(connector: &ConnectorId) -> String {
    format!("menu/{connector}")
}

/// A reminder of a chat.
pub fn reminder(connector: &ConnectorId, chat: i64, id: u64) -> String {
    format!("{}{id:010}", reminders(connector, chat))
}

/// Prefix of every reminder.
pub const REMINDERS: &str = "sched/";

/// The prefix of a chat's reminders (in id order).
pub fn reminders(connector: &ConnectorId, chat: i64) -> String {
    format!("{REMINDERS}{connector}/{chat}/")
}

/// Prefix of the due index.
pub const DUE: &str = "sched-due/";

/// The due index entry of a reminder's next time: lexical order is time order.
pub fn due(at_ms: u64, connector: &ConnectorId, chat: i64, id: u64) -> String {
    format!("{DUE}{at_ms:015}/{connector}/{chat}/{id}")
}

/// Reads a due index entry back: `(at ms, connector, chat, id)`.
pub fn parse_due(key: &str) -> Option<(u64, ConnectorId, i64, u64)> {
    let rest = key.strip_prefix(DUE)?;
    let (at, rest) = rest.split_once('/')?;
    let mut back = rest.rsplitn(3, '/');
    let id = back.next()?.parse().ok()?;
    let chat = back.next()?.parse().ok()?;
    let connector = back.next()?;
    Some((at.parse().ok()?, ConnectorId::new(connector), chat, id))
}

/// Prefix of every kept batch of events.
pub const EVENTS: &str = "events/";

/// A batch of `instance`'s events written at `at_ms`: lexical order is time order.
pub fn events(at_ms: u64, instance: &str, n: u64) -> String {
    format!("{EVENTS}{at_ms:015}/{instance}/{n:06}")
}

/// Prefix of every instance's kept counts.
pub const METRICS: &str = "metrics/";

/// An instance's kept counts (see [`crate::observe`]).
pub fn metrics(instance: &str) -> String {
    format!("{METRICS}{instance}")
}

/// A tool call's claim, by its durable name ([`crate::tools::ToolContext::call`]).
pub fn tool_call(call: &str) -> String {
    format!("call/{call}")
}

/// Prefix of the tombstones of fired one-off reminders.
pub const FIRED: &str = "sched-fired/";

/// The prefix of a chat's tombstones.
pub fn fired_in(connector: &ConnectorId, chat: i64) -> String {
    format!("{FIRED}{connector}/{chat}/")
}

/// The tombstone of the one-off reminder of a chat with `fingerprint`
/// ([`crate::schedule::Reminder::fingerprint`]), once it fired.
pub fn fired(connector: &ConnectorId, chat: i64, fingerprint: &str) -> String {
    format!("{}{fingerprint}", fired_in(connector, chat))
}

/// Reads a tombstone's key back: `(connector, chat, fingerprint)`.
pub fn parse_fired(key: &str) -> Option<(ConnectorId, i64, &str)> {
    let rest = key.strip_prefix(FIRED)?;
    let mut back = rest.rsplitn(3, '/');
    let fingerprint = back.next()?;
    let chat = back.next()?.parse().ok()?;
    let connector = back.next()?;
    Some((ConnectorId::new(connector), chat, fingerprint))
}

/// Prefix of the reminder id counters.
pub const REMINDER_IDS: &str = "sched-seq/";

pub fn reminder_ids(connector: &ConnectorId) -> String {
    format!("{REMINDER_IDS}{connector}")
}

pub fn chat_zone(connector: &ConnectorId, chat: i64) -> String {
    format!("tz/{connector}/{chat}")
}

/// The model a chat chose with `/model`.
pub fn chat_model(connector: &ConnectorId, chat: i64) -> String {
    format!("model/{connector}/{chat}")
}

/// When a chat's answers are spoken, as it chose with `/voice`.
pub fn chat_voice(connector: &ConnectorId, chat: i64) -> String {
    format!("voice/{connector}/{chat}")
}

/// The agent a conversation chose with `/agent` (its session key: in a group, each person's).
pub fn chat_agent(session_key: &SessionKey) -> String {
    format!("agent/{session_key}")
}

/// The placeholder message a group's streamed reply to `message` is shown in (edited as the
/// model writes, then to the answer's first part).
pub fn preview(connector: &ConnectorId, chat: i64, message: i64) -> String {
    format!("preview/{connector}/{chat}/{message}")
}

/// A panel sign-in link, under its token's digest.
pub fn panel_link(digest: &str) -> String {
    format!("panel-link/{digest}")
}

/// When `user` last signed out of the panel everywhere.
pub fn panel_signed_out(connector: &ConnectorId, user: i64) -> String {
    format!("panel-out/{connector}/{user}")
}

//! `clawless tui`: the terminal cockpit, two screens (Tab switches).
//!
//! - **Chat**: a conversation with the connector's default agent, as `clawless chat` has it,
//!   the answer streamed as it is written and each tool call shown in line with its result; a
//!   call that needs an approval is asked here (`y` allows, `n` denies); `/new` starts over,
//!   `/quit` (or Ctrl-C) leaves.
//! - **Panels**: what this process does, live from its event bus ([`clawless_core::events`]),
//!   and what the stores hold ([`Admin::overview`], read every second): sessions; the inbox
//!   per lane (backlog, the head's retries, a turn waiting for an approval); runs (each job's
//!   trace id with its state, duration, model and tool calls, retries); reminders due; the
//!   counters; the event log, filtered by a trace id (`/` to type one, Esc to clear).
//!
//! With `--serve ADDR` the same process also serves Telegram's webhooks (as `clawless
//! serve`), so the panels show the bot at work. With `--remote URL` it attaches, read-only,
//! to a deployment (a Worker, a Lambda, a `clawless serve`): each second it reads the events
//! its instances kept (`GET /admin/events`, from a cursor) and its stores (`GET
//! /admin/overview`) with the token in `CLAWLESS_ADMIN_TOKEN`; the counters are counted from
//! those events. Locally it reads this process's own bus.

mod view;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clawless_core::events::{Event, Stamped, SLOTS};
use clawless_core::observe::Overview;
use clawless_core::{App, ConnectorId, SessionKey};
use crossterm::event::{Event as Term, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use futures::StreamExt;
use tokio::sync::mpsc;

/// Events kept for the log panel.
const KEPT_EVENTS: usize = 500;
/// Runs kept for the runs panel.
const KEPT_RUNS: usize = 50;
/// Lines kept in the chat transcript.
const KEPT_LINES: usize = 2_000;

/// Which screen shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    Chat,
    Panels,
}

/// A line of the chat transcript.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    You(String),
    Bot(String),
    /// A tool call and how it ended.
    Tool(String),
    Note(String),
}

/// One job as the runs panel shows it, built from its events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    pub trace: String,
    pub started_ms: u64,
    pub last_ms: u64,
    pub state: String,
    pub models: u32,
    pub tools: u32,
    pub retries: u32,
}

/// What the chat task reports back.
enum Progress {
    /// The answer so far.
    Text(String),
    /// A tool's result: `(tool, result, is_error)`.
    Result(String, String, bool),
    /// A call needs an approval: what it is, and where the answer goes.
    Ask(String, tokio::sync::oneshot::Sender<bool>),
    Done(std::result::Result<String, String>),
}

/// Asks the cockpit about a call (see [`Progress::Ask`]); no answer counts as Deny.
struct AskCockpit(mpsc::UnboundedSender<Progress>);

#[async_trait::async_trait]
impl clawless_core::local::Approve for AskCockpit {
    async fn approve(&self, call: &clawless_core::agent::PendingCall) -> bool {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let text = clawless_core::turn::approval::approval_text(call, 0);
        let shown = text
            .lines()
            .filter(|l| !l.starts_with("Not answered"))
            .collect::<Vec<_>>()
            .join(" ");
        if self.0.send(Progress::Ask(shown, tx)).is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }
}

/// Everything the screens show.
pub struct Cockpit {
    pub screen: Screen,
    pub input: String,
    pub transcript: Vec<Said>,
    /// The answer being written, while a turn runs.
    pub streaming: Option<String>,
    pub events: VecDeque<Stamped>,
    pub runs: BTreeMap<String, Run>,
    /// Only this trace id's events in the log; `editing`: being typed.
    pub filter: String,
    pub editing: bool,
    pub overview: Overview,
    pub counts: clawless_core::events::metrics::Snapshot,
    pub now_ms: u64,
    pub status: String,
    /// Where the answer to the approval asked now goes.
    asking: Option<tokio::sync::oneshot::Sender<bool>>,
    turns: u64,
    quit: bool,
}

impl Cockpit {
    fn new(status: String) -> Cockpit {
        Cockpit {
            screen: Screen::Chat,
            input: String::new(),
            transcript: vec![Said::Note(
                "Tab: panels · /new starts over · /quit or Ctrl-C leaves".into(),
            )],
            streaming: None,
            events: VecDeque::new(),
            runs: BTreeMap::new(),
            filter: String::new(),
            editing: false,
            overview: Overview::default(),
            counts: Default::default(),
            now_ms: 0,
            status,
            asking: None,
            turns: 0,
            quit: false,
        }
    }

    /// Takes in an event: the log, the runs, and the chat's tool lines.
    fn take(&mut self, e: Stamped) {
        if !e.trace.is_empty() {
            let run = self.runs.entry(e.trace.to_string()).or_insert_with(|| Run {
                trace: e.trace.to_string(),
                started_ms: e.at_ms,
                state: "running".into(),
                ..Default::default()
            });
            run.last_ms = e.at_ms;
            match &e.event {
                Event::Accepted { .. } => run.state = "queued".into(),
                Event::Model { outcome, .. } => {
                    run.models += 1;
                    run.state = match outcome.as_str() {
                        "ok" => "running".into(),
                        other => format!("model {other}"),
                    };
                }
                Event::Tool { .. } => run.tools += 1,
                Event::ApprovalAsked { tool } => run.state = format!("waits: {tool}"),
                Event::RetryScheduled { .. } => {
                    run.retries += 1;
                    run.state = "retry".into();
                }
                Event::TurnEnded { outcome, .. } => run.state = outcome.clone(),
                _ => {}
            }
            if self.runs.len() > KEPT_RUNS {
                if let Some(oldest) = self
                    .runs
                    .values()
                    .min_by_key(|r| r.last_ms)
                    .map(|r| r.trace.clone())
                {
                    self.runs.remove(&oldest);
                }
            }
        }
        if e.trace.starts_with("local/") && self.streaming.is_some() {
            if let Event::Tool {
                tool,
                decision,
                latency_ms,
                error,
                ..
            } = &e.event
            {
                let how = if *error { "failed" } else { "ok" };
                self.transcript.push(Said::Tool(format!(
                    "[tool: {tool} ({decision}) → {how}, {latency_ms} ms]"
                )));
            }
        }
        self.events.push_back(e);
        while self.events.len() > KEPT_EVENTS {
            self.events.pop_front();
        }
    }

    fn note(&mut self, said: Said) {
        self.transcript.push(said);
        if self.transcript.len() > KEPT_LINES {
            let extra = self.transcript.len() - KEPT_LINES;
            self.transcript.drain(..extra);
        }
    }
}

/// What the cockpit watches.
pub enum Source {
    /// This process's app: its bus, its stores, and the chat.
    Local {
        app: Arc<App>,
        connector: ConnectorId,
    },
    /// A deployment's admin endpoint, read-only.
    Remote {
        base: String,
        env: clawless_core::Env,
    },
}

/// Where a remote cockpit is in the deployment's events, and the counts made from them.
#[derive(Default)]
struct Follow {
    cursor: Option<String>,
    counts: clawless_core::events::metrics::Metrics,
}

/// Runs the cockpit on the terminal until the user leaves.
pub async fn run(source: Source, status: String) -> Result<()> {
    let mut terminal = ratatui::init();
    let result = cockpit(&mut terminal, source, status).await;
    ratatui::restore();
    result
}

async fn cockpit(
    terminal: &mut ratatui::DefaultTerminal,
    source: Source,
    status: String,
) -> Result<()> {
    let sub = match &source {
        Source::Local { app, .. } => Some(app.events().subscribe("tui", SLOTS)),
        Source::Remote { .. } => None,
    };
    let mut follow = Follow::default();
    let mut keys = EventStream::new();
    let (tx, mut rx) = mpsc::unbounded_channel::<Progress>();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let session = SessionKey::new("local:terminal");
    let mut c = Cockpit::new(status);
    if let Source::Remote { base, .. } = &source {
        c.note(Said::Note(format!(
            "Attached to {base}, read-only: the chat talks only to a local bot."
        )));
    }
    let next_event = || async {
        match &sub {
            Some(s) => s.next().await,
            None => std::future::pending().await,
        }
    };
    let result = loop {
        terminal.draw(|f| view::draw(f, &c))?;
        tokio::select! {
            key = keys.next() => match key {
                Some(Ok(Term::Key(k))) if k.kind != KeyEventKind::Release => {
                    if let Some(text) = on_key(&mut c, k) {
                        match &source {
                            Source::Local { app, connector } => {
                                start_turn(&mut c, app, connector, &session, text, &tx).await
                            }
                            Source::Remote { .. } => {
                                c.note(Said::Note("(read-only: attached to a deployment)".into()))
                            }
                        }
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => break Err(e.into()),
                None => break Ok(()),
            },
            e = next_event() => {
                c.take(e);
                if let Some(sub) = &sub {
                    for e in sub.drain() {
                        c.take(e);
                    }
                }
            }
            Some(p) = rx.recv() => match p {
                Progress::Text(t) => c.streaming = Some(t),
                Progress::Result(tool, result, error) => {
                    let first: String = result.lines().next().unwrap_or("").chars().take(200).collect();
                    let mark = if error { "failed" } else { "result" };
                    c.note(Said::Tool(format!("[{tool} {mark}: {first}]")));
                }
                Progress::Ask(what, answer) => {
                    c.note(Said::Note(format!("{what} — y allows, n denies")));
                    c.asking = Some(answer);
                }
                Progress::Done(done) => {
                    c.streaming = None;
                    match done {
                        Ok(reply) => c.note(Said::Bot(reply)),
                        Err(e) => c.note(Said::Note(format!("(error: {e})"))),
                    }
                }
            },
            _ = tick.tick() => match &source {
                Source::Local { app, .. } => {
                    c.now_ms = app.admin().now_ms();
                    c.counts = app.admin().counts();
                    match app.admin().overview().await {
                        Ok(o) => c.overview = o,
                        Err(e) => c.status = format!("stores unreadable: {e}"),
                    }
                }
                Source::Remote { base, env } => {
                    c.now_ms = wall_ms();
                    if let Err(e) = poll_remote(&mut c, &mut follow, base, env).await {
                        c.status = format!("{e:#}");
                    }
                }
            },
        }
        if c.quit {
            break Ok(());
        }
    };
    if let (Source::Local { app, .. }, Some(sub)) = (&source, &sub) {
        app.events().unsubscribe(sub);
    }
    result
}

/// One second of a remote cockpit: the events kept since the cursor, and the stores.
async fn poll_remote(
    c: &mut Cockpit,
    follow: &mut Follow,
    base: &str,
    env: &clawless_core::Env,
) -> Result<()> {
    let path = match &follow.cursor {
        Some(cursor) => format!("events?after={cursor}"),
        None => "events".to_owned(),
    };
    let (_, page) = crate::remote::admin(env, base, reqwest::Method::GET, &path).await?;
    let page: clawless_core::observe::EventPage = serde_json::from_value(page)?;
    for e in page.events {
        follow.counts.observe(&e.event);
        c.take(e);
    }
    follow.cursor = Some(page.cursor);
    c.counts = follow.counts.snapshot();
    let (_, overview) = crate::remote::admin(env, base, reqwest::Method::GET, "overview").await?;
    c.overview = serde_json::from_value(overview)?;
    c.status = format!("attached to {base}");
    Ok(())
}

/// Now, by this machine's clock (ms).
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A key on the cockpit; the text to send when it sends one.
fn on_key(c: &mut Cockpit, k: KeyEvent) -> Option<String> {
    if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
        c.quit = true;
        return None;
    }
    if k.code == KeyCode::Tab {
        c.screen = match c.screen {
            Screen::Chat => Screen::Panels,
            Screen::Panels => Screen::Chat,
        };
        return None;
    }
    if c.screen == Screen::Panels {
        match (c.editing, k.code) {
            (false, KeyCode::Char('/')) => {
                c.editing = true;
                c.filter.clear();
            }
            (false, KeyCode::Esc) => c.filter.clear(),
            (false, KeyCode::Char('q')) => c.quit = true,
            (true, KeyCode::Enter) => c.editing = false,
            (true, KeyCode::Esc) => {
                c.editing = false;
                c.filter.clear();
            }
            (true, KeyCode::Backspace) => {
                c.filter.pop();
            }
            (true, KeyCode::Char(ch)) if c.filter.len() < 100 => c.filter.push(ch),
            _ => {}
        }
        return None;
    }
    if c.input.is_empty() {
        if let (Some(_), KeyCode::Char(ch @ ('y' | 'n'))) = (&c.asking, k.code) {
            if let Some(answer) = c.asking.take() {
                let _ = answer.send(ch == 'y');
                let said = if ch == 'y' { "(allowed)" } else { "(denied)" };
                c.note(Said::Note(said.into()));
            }
            return None;
        }
    }
    match k.code {
        KeyCode::Enter => {
            let text = c.input.trim().to_owned();
            c.input.clear();
            (!text.is_empty()).then_some(text)
        }
        KeyCode::Backspace => {
            c.input.pop();
            None
        }
        KeyCode::Char(ch) if c.input.len() < 4_000 => {
            c.input.push(ch);
            None
        }
        _ => None,
    }
}

/// What the user typed: a command, or a turn started beside the cockpit (the screen keeps
/// drawing while it runs).
async fn start_turn(
    c: &mut Cockpit,
    app: &Arc<App>,
    connector: &ConnectorId,
    session: &SessionKey,
    text: String,
    tx: &mpsc::UnboundedSender<Progress>,
) {
    match text.as_str() {
        "/quit" | "/exit" => {
            c.quit = true;
            return;
        }
        "/new" => {
            let said = match app.admin().reset_session(session).await {
                Ok(()) => "(fresh conversation)".to_owned(),
                Err(e) => format!("(error: {e})"),
            };
            c.note(Said::Note(said));
            return;
        }
        _ => {}
    }
    if c.streaming.is_some() {
        c.note(Said::Note("(wait for the answer first)".into()));
        c.input = text;
        return;
    }
    c.note(Said::You(text.clone()));
    c.streaming = Some(String::new());
    c.turns += 1;
    let trace = format!("local/{}", c.turns);
    let (app, connector, session, tx) =
        (app.clone(), connector.clone(), session.clone(), tx.clone());
    tokio::spawn(async move {
        let streamed = tx.clone();
        let on_text = move |t: &str| {
            let _ = streamed.send(Progress::Text(t.to_owned()));
        };
        let results = tx.clone();
        let on_result = move |tool: &str, result: &str, error: bool| {
            let _ = results.send(Progress::Result(tool.to_owned(), result.to_owned(), error));
        };
        let ask = AskCockpit(tx.clone());
        let watch = clawless_core::local::Watch {
            on_text: Some(&on_text),
            on_result: Some(&on_result),
            approve: Some(&ask),
            trace: &trace,
        };
        let done = app
            .chat_local_watched(&connector, &session, &text, watch)
            .await
            .map_err(|e| e.to_string());
        let _ = tx.send(Progress::Done(done));
    });
}

#[cfg(test)]
mod tests;

//! `clawless tui`: the terminal cockpit, two screens (Tab switches).
//!
//! - **Chat**: a conversation with the connector's default agent, as `clawless chat` has it,
//!   the answer streamed as it is written and each tool call shown in line with how it ended;
//!   `/new` starts over, `/quit` (or Ctrl-C) leaves.
//! - **Panels**: what this process does, live from its event bus ([`clawless_core::events`]),
//!   and what the stores hold ([`App::overview`], read every second): sessions; the inbox
//!   per lane (backlog, the head's retries, a turn waiting for an approval); runs (each job's
//!   trace id with its state, duration, model and tool calls, retries); reminders due; the
//!   counters; the event log, filtered by a trace id (`/` to type one, Esc to clear).
//!
//! With `--serve ADDR` the same process also serves Telegram's webhooks (as `clawless
//! serve`), so the panels show the bot at work. The cockpit reads this process's own bus: it
//! does not attach to another process (one process per data directory).

mod view;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clawless_core::events::{Event, Stamped};
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
    Done(std::result::Result<String, String>),
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
            turns: 0,
            quit: false,
        }
    }

    /// Takes in an event: the log, the runs, and the chat's tool lines.
    fn take(&mut self, e: Stamped) {
        if !e.trace.is_empty() {
            let run = self.runs.entry(e.trace.clone()).or_insert_with(|| Run {
                trace: e.trace.clone(),
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

/// Runs the cockpit on the terminal until the user leaves.
pub async fn run(app: Arc<App>, connector: ConnectorId, status: String) -> Result<()> {
    let mut terminal = ratatui::init();
    let result = cockpit(&mut terminal, app, connector, status).await;
    ratatui::restore();
    result
}

async fn cockpit(
    terminal: &mut ratatui::DefaultTerminal,
    app: Arc<App>,
    connector: ConnectorId,
    status: String,
) -> Result<()> {
    let sub = app.events().subscribe("tui", 10_000);
    let mut keys = EventStream::new();
    let (tx, mut rx) = mpsc::unbounded_channel::<Progress>();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let session = SessionKey::new("local:terminal");
    let mut c = Cockpit::new(status);
    let result = loop {
        terminal.draw(|f| view::draw(f, &c))?;
        tokio::select! {
            key = keys.next() => match key {
                Some(Ok(Term::Key(k))) if k.kind != KeyEventKind::Release => {
                    if let Some(text) = on_key(&mut c, k) {
                        start_turn(&mut c, &app, &connector, &session, text, &tx).await;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => break Err(e.into()),
                None => break Ok(()),
            },
            e = sub.next() => {
                c.take(e);
                for e in sub.drain() {
                    c.take(e);
                }
            }
            Some(p) = rx.recv() => match p {
                Progress::Text(t) => c.streaming = Some(t),
                Progress::Done(done) => {
                    c.streaming = None;
                    match done {
                        Ok(reply) => c.note(Said::Bot(reply)),
                        Err(e) => c.note(Said::Note(format!("(error: {e})"))),
                    }
                }
            },
            _ = tick.tick() => {
                c.now_ms = app.now_ms();
                c.counts = app.counts();
                match app.overview().await {
                    Ok(o) => c.overview = o,
                    Err(e) => c.status = format!("stores unreadable: {e}"),
                }
            }
        }
        if c.quit {
            break Ok(());
        }
    };
    app.events().unsubscribe(&sub);
    result
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
            let said = match app.reset_session(session).await {
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
        let done = app
            .chat_local_watched(&connector, &session, &text, Some(&on_text), &trace)
            .await
            .map_err(|e| e.to_string());
        let _ = tx.send(Progress::Done(done));
    });
}

#[cfg(test)]
mod tests;

//! Drawing the cockpit's two screens (see the module above).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use super::{Cockpit, Said, Screen};

pub fn draw(f: &mut Frame, c: &Cockpit) {
    let [top, body, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(3),
    ])
    .areas(f.area());
    let tab = |name: &str, on: bool| {
        let style = match on {
            true => Style::new().add_modifier(Modifier::REVERSED),
            false => Style::new(),
        };
        Span::styled(format!(" {name} "), style)
    };
    let header = Line::from(vec![
        Span::styled("clawless ", Style::new().add_modifier(Modifier::BOLD)),
        tab("Chat", c.screen == Screen::Chat),
        tab("Panels", c.screen == Screen::Panels),
        Span::raw(format!("  {}", c.status)),
    ]);
    f.render_widget(Paragraph::new(header), top);
    match c.screen {
        Screen::Chat => chat(f, c, body, bottom),
        Screen::Panels => panels(f, c, body, bottom),
    }
}

fn chat(f: &mut Frame, c: &Cockpit, body: Rect, bottom: Rect) {
    let mut lines: Vec<Line> = Vec::new();
    for said in &c.transcript {
        match said {
            Said::You(t) => lines.push(Line::styled(
                format!("You: {t}"),
                Style::new().fg(Color::Cyan),
            )),
            Said::Bot(t) => {
                for (i, l) in t.lines().enumerate() {
                    let head = if i == 0 { "Assistant: " } else { "" };
                    lines.push(Line::raw(format!("{head}{l}")));
                }
            }
            Said::Tool(t) => lines.push(Line::styled(t.clone(), Style::new().fg(Color::Yellow))),
            Said::Note(t) => lines.push(Line::styled(t.clone(), Style::new().fg(Color::DarkGray))),
        }
    }
    if let Some(t) = &c.streaming {
        for (i, l) in format!("{t}▌").lines().enumerate() {
            let head = if i == 0 { "Assistant: " } else { "" };
            lines.push(Line::raw(format!("{head}{l}")));
        }
    }
    // The newest lines at the bottom: scroll past what does not fit (wrapped lines count).
    let width = body.width.saturating_sub(2).max(1) as usize;
    let height: usize = lines.iter().map(|l| l.width().max(1).div_ceil(width)).sum();
    let visible = body.height.saturating_sub(2) as usize;
    let scroll = height.saturating_sub(visible).min(u16::MAX as usize) as u16;
    let transcript = Paragraph::new(lines)
        .block(Block::new().borders(Borders::ALL).title(" Chat "))
        .wrap(Wrap { trim: false })
        .scroll((scroll, 0));
    f.render_widget(transcript, body);
    let input = Paragraph::new(format!("> {}", c.input))
        .block(Block::new().borders(Borders::ALL).title(" Enter sends "));
    f.render_widget(input, bottom);
}

fn panels(f: &mut Frame, c: &Cockpit, body: Rect, bottom: Rect) {
    let [upper, lower] =
        Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(body);
    let [left, middle, right] = Layout::horizontal([
        Constraint::Percentage(25),
        Constraint::Percentage(45),
        Constraint::Percentage(30),
    ])
    .areas(upper);
    let ago = |ms: u64| human(c.now_ms.saturating_sub(ms));
    // Sessions and reminders due.
    let mut lines: Vec<Line> = c
        .overview
        .sessions
        .iter()
        .map(|(key, n, at)| Line::raw(format!("{key}  {n} msgs  {} ago", ago(*at))))
        .collect();
    if lines.is_empty() {
        lines.push(Line::raw("(none)"));
    }
    lines.push(Line::styled(
        "Reminders due",
        Style::new().add_modifier(Modifier::BOLD),
    ));
    for (at, connector, chat, id) in &c.overview.due {
        let when = human(at.saturating_sub(c.now_ms));
        lines.push(Line::raw(format!("#{id} {connector}:{chat} in {when}")));
    }
    f.render_widget(boxed(" Sessions ", lines), left);
    // Runs: each job by trace id, newest first.
    let mut runs: Vec<_> = c.runs.values().collect();
    runs.sort_by_key(|r| std::cmp::Reverse(r.last_ms));
    let lines: Vec<Line> = runs
        .iter()
        .map(|r| {
            let style = match r.state.as_str() {
                "failed" => Style::new().fg(Color::Red),
                "answered" => Style::new().fg(Color::Green),
                s if s.starts_with("waits") || s == "retry" => Style::new().fg(Color::Yellow),
                _ => Style::new(),
            };
            Line::styled(
                format!(
                    "{:<14} {:<9} {:>7} model {} tool {} retry {}",
                    r.trace,
                    r.state,
                    human(r.last_ms.saturating_sub(r.started_ms)),
                    r.models,
                    r.tools,
                    r.retries
                ),
                style,
            )
        })
        .collect();
    f.render_widget(boxed(" Runs ", lines), middle);
    // The inbox per lane, and the counters.
    let mut lines: Vec<Line> = Vec::new();
    let backlog: usize = c.overview.lanes.iter().map(|l| l.jobs).sum();
    lines.push(Line::raw(format!("backlog: {backlog} job(s)")));
    for l in &c.overview.lanes {
        let mut what = format!("{}: {} ({})", l.lane, l.jobs, l.head);
        if let Some(tool) = &l.waiting_for {
            what.push_str(&format!(" waits approval: {tool}"));
        }
        if l.attempts > 0 {
            let when = human(l.not_before_ms.saturating_sub(c.now_ms));
            what.push_str(&format!(" retry {} in {when}", l.attempts));
        }
        if l.resuming {
            what.push_str(" resuming");
        }
        lines.push(Line::raw(what));
    }
    let n = |m: &str| c.counts.total(m) as u64;
    lines.push(Line::styled(
        "Counters",
        Style::new().add_modifier(Modifier::BOLD),
    ));
    lines.push(Line::raw(format!(
        "updates {} dropped {} turns {}",
        n("clawless_updates_accepted_total"),
        n("clawless_updates_dropped_total"),
        n("clawless_turns_total")
    )));
    lines.push(Line::raw(format!(
        "model calls {} tool calls {} retries {}",
        n("clawless_model_calls_total"),
        n("clawless_tool_calls_total"),
        n("clawless_retries_total")
    )));
    f.render_widget(boxed(" Inbox ", lines), right);
    // The event log, newest last, filtered by a trace id.
    let shown: Vec<Line> = c
        .events
        .iter()
        .filter(|e| c.filter.is_empty() || e.trace.contains(&c.filter))
        .map(|e| {
            let detail = serde_json::to_value(&e.event)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .map(|o| {
                    o.iter()
                        .filter(|(k, _)| *k != "type")
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            Line::raw(format!("{:<12} {:<18} {detail}", e.trace, e.event.kind()))
        })
        .collect();
    let visible = lower.height.saturating_sub(2) as usize;
    let skip = shown.len().saturating_sub(visible);
    let title = match c.filter.is_empty() {
        true => " Events (/ filters by trace id) ".to_owned(),
        false => format!(" Events of {} (Esc clears) ", c.filter),
    };
    f.render_widget(boxed(&title, shown.into_iter().skip(skip).collect()), lower);
    let prompt = match c.editing {
        true => format!("trace id: {}", c.filter),
        false => "Tab: chat · /: filter by trace id · q: quit".to_owned(),
    };
    f.render_widget(
        Paragraph::new(prompt).block(Block::new().borders(Borders::ALL)),
        bottom,
    );
}

fn boxed<'a>(title: &str, lines: Vec<Line<'a>>) -> Paragraph<'a> {
    Paragraph::new(lines)
        .block(Block::new().borders(Borders::ALL).title(title.to_owned()))
        .wrap(Wrap { trim: true })
}

/// `850 ms`, `12 s`, `4 min`, `3 h`.
pub fn human(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..120_000 => format!("{} s", ms / 1_000),
        120_000..7_200_000 => format!("{} min", ms / 60_000),
        _ => format!("{} h", ms / 3_600_000),
    }
}

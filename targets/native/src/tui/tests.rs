#![allow(clippy::unwrap_used)]

use ratatui::backend::TestBackend;
use ratatui::Terminal;

use super::*;

fn stamped(seq: u64, at_ms: u64, trace: &str, event: Event) -> Stamped {
    Stamped {
        seq,
        at_ms,
        trace: trace.into(),
        event,
    }
}

/// The screen as text, one line per row.
fn screen(c: &Cockpit) -> String {
    let mut t = Terminal::new(TestBackend::new(120, 30)).unwrap();
    t.draw(|f| view::draw(f, c)).unwrap();
    let buf = t.backend().buffer().clone();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_owned())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_chat_shows_the_answer_as_it_is_written_with_tool_calls_in_line() {
    let mut c = Cockpit::new("test".into());
    c.note(Said::You("what time is it".into()));
    c.streaming = Some("It is".into());
    c.take(stamped(
        1,
        5,
        "local/1",
        Event::Tool {
            tool: "current_time".into(),
            level: "safe".into(),
            decision: "allowed".into(),
            latency_ms: 3,
            error: false,
        },
    ));
    let s = screen(&c);
    assert!(s.contains("You: what time is it"), "{s}");
    assert!(
        s.contains("[tool: current_time (allowed) → ok, 3 ms]"),
        "{s}"
    );
    assert!(s.contains("Assistant: It is▌"), "{s}");
}

#[test]
fn the_panels_show_runs_by_trace_and_filter_the_log() {
    let mut c = Cockpit::new("test".into());
    c.screen = Screen::Panels;
    let accepted = |lane: &str| Event::Accepted {
        connector: "main".into(),
        lane: lane.into(),
        ack_ms: 2,
    };
    c.take(stamped(1, 1_000, "main/7", accepted("main:1")));
    c.take(stamped(2, 1_100, "main/8", accepted("main:2")));
    let retry = Event::RetryScheduled {
        attempt: 1,
        retry_at_ms: 4_000,
        reason: "model: down".into(),
    };
    c.take(stamped(3, 1_200, "main/7", retry));
    let failed = Event::TurnEnded {
        outcome: "failed".into(),
        latency_ms: 9_000,
    };
    c.take(stamped(4, 10_000, "main/7", failed));
    assert_eq!(c.runs["main/7"].state, "failed");
    assert_eq!(c.runs["main/7"].retries, 1);
    assert_eq!(c.runs["main/8"].state, "queued");
    let s = screen(&c);
    assert!(s.contains("main/7"), "{s}");
    assert!(s.contains("failed"), "{s}");
    // `/` then a trace id: only its events.
    for k in ['/', 'm', 'a', 'i', 'n', '/', '8'] {
        on_key(&mut c, KeyEvent::from(KeyCode::Char(k)));
    }
    on_key(&mut c, KeyEvent::from(KeyCode::Enter));
    let s = screen(&c);
    assert!(s.contains("Events of main/8"), "{s}");
    assert!(!s.contains("retry_scheduled"), "{s}");
    on_key(&mut c, KeyEvent::from(KeyCode::Esc));
    assert!(screen(&c).contains("retry_scheduled"));
}

#[test]
fn typing_and_enter_give_the_text_to_send() {
    let mut c = Cockpit::new("test".into());
    for k in "hi".chars() {
        assert_eq!(on_key(&mut c, KeyEvent::from(KeyCode::Char(k))), None);
    }
    assert_eq!(
        on_key(&mut c, KeyEvent::from(KeyCode::Enter)),
        Some("hi".into())
    );
    on_key(&mut c, KeyEvent::from(KeyCode::Tab));
    assert_eq!(c.screen, Screen::Panels);
    on_key(
        &mut c,
        KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
    );
    assert!(c.quit);
}

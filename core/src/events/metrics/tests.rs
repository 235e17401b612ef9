#![allow(clippy::unwrap_used)]

use super::*;

fn tool(name: &str, error: bool) -> Event {
    Event::Tool {
        tool: name.into(),
        level: "safe".into(),
        decision: "allowed".into(),
        latency_ms: 3,
        error,
    }
}

#[test]
fn counts_render_as_prometheus_text_and_parse_back() {
    let m = Metrics::default();
    m.observe(&Event::Accepted {
        connector: "main".into(),
        lane: "main:1".into(),
        ack_ms: 4,
    });
    m.observe(&Event::Accepted {
        connector: "main".into(),
        lane: "main:1".into(),
        ack_ms: 700,
    });
    m.observe(&tool("current_time", false));
    m.observe(&tool("with \"quotes\"\nand a newline", true));
    let text = m
        .snapshot()
        .render(&[("clawless_backlog_jobs", "Jobs waiting.", vec![], 3.0)]);
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let value = |name: &str, label: Option<(&str, &str)>| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
            .map(|s| s.value.clone())
    };
    assert_eq!(
        value(
            "clawless_updates_accepted_total",
            Some(("connector", "main"))
        ),
        Some(prometheus_parse::Value::Counter(2.0))
    );
    assert_eq!(
        value("clawless_tool_calls_total", Some(("outcome", "error"))),
        Some(prometheus_parse::Value::Counter(1.0))
    );
    assert_eq!(
        value("clawless_backlog_jobs", None),
        Some(prometheus_parse::Value::Gauge(3.0))
    );
    let Some(prometheus_parse::Value::Histogram(buckets)) = value("clawless_ack_seconds", None)
    else {
        panic!("a histogram: {text}")
    };
    let at = |le: f64| buckets.iter().find(|b| b.less_than == le).unwrap().count;
    assert_eq!(
        (at(0.005), at(0.5), at(1.0), at(f64::INFINITY)),
        (1.0, 1.0, 2.0, 2.0)
    );
}

#[test]
fn instances_sum_and_label_sets_are_bounded() {
    let a = Metrics::default();
    for i in 0..(MAX_SERIES + 50) {
        a.observe(&tool(&format!("made_up_{i}"), true));
    }
    let mut sum = a.snapshot();
    assert_eq!(
        sum.counters["clawless_tool_calls_total"].len(),
        MAX_SERIES + 1
    );
    assert_eq!(
        sum.counter(
            "clawless_tool_calls_total",
            &[
                ("tool", "other"),
                ("decision", "other"),
                ("outcome", "other")
            ]
        ),
        50.0
    );
    let b = Metrics::default();
    b.observe(&tool("made_up_0", true));
    sum.merge(&b.snapshot());
    assert_eq!(
        sum.total("clawless_tool_calls_total"),
        (MAX_SERIES + 51) as f64
    );
    let long = "x".repeat(500);
    let c = Metrics::default();
    c.observe(&tool(&long, false));
    assert!(c.snapshot().render(&[]).lines().all(|l| l.len() < 300));
}

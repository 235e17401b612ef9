//! The ledger's counters and the split of a turn's spend by agent and model.
use super::*;
use crate::llm::Usage;
use clawless_platform::kv::tap::{Tapped, Verdict};
use clawless_platform::{FakeClock, MemoryKv};
use futures::executor::block_on;
use std::sync::Arc;

#[test]
fn spend_adds_up_per_person_chat_and_everyone_and_caps_say_what_is_left() {
    let clock = Arc::new(FakeClock::new(1_700_000_000_000));
    let kv = MemoryKv::new(clock.clone());
    let ledger = Ledger {
        kv: &kv,
        clock: &*clock,
        written: &Default::default(),
    };
    let main = ConnectorId::new("main");
    let mut t = Tally::default();
    t.add_call(
        Usage {
            input: 1000,
            output: 200,
            cached_input: 0,
            cache_write: 0,
        },
        600_000,
    );
    block_on(async {
        ledger.add(&main, 1, -5, t, &[]).await.unwrap();
        ledger.add(&main, 2, -5, t, &[]).await.unwrap();
        assert_eq!(
            ledger
                .get(&main, Period::Day, Who::User(1))
                .await
                .unwrap()
                .cost_micros,
            600_000
        );
        assert_eq!(
            ledger
                .get(&main, Period::Day, Who::Chat(-5))
                .await
                .unwrap()
                .calls,
            2
        );
        assert_eq!(
            ledger
                .get(&main, Period::Month, Who::Everyone)
                .await
                .unwrap()
                .tokens(),
            2400
        );
        let caps = Caps {
            daily_usd_per_user: Some(1.0),
            daily_usd_total: Some(1.0),
            monthly_usd_total: None,
        };
        let left = ledger.left(&main, 1, &caps).await.unwrap().unwrap();
        assert_eq!((left.micros, left.cap), (0, "today's total"));
        // Tomorrow the daily counters start again.
        clock.advance(std::time::Duration::from_secs(86_400));
        let left = ledger.left(&main, 1, &caps).await.unwrap().unwrap();
        assert_eq!(left.micros, 1_000_000);
    });
    assert_eq!(dollars(12_300), "$0.0123");
    assert_eq!(dollars(2_500_000), "$2.50");
}

fn model_step(
    model: &str,
    agent: Option<&str>,
    cost: u64,
    outcome: &str,
) -> (u64, crate::audit::Step) {
    let step = crate::audit::Step::Model {
        model: model.to_owned(),
        input: 10,
        output: 5,
        cached_input: 0,
        cost_micros: cost,
        latency_ms: 1,
        outcome: outcome.to_owned(),
        agent: agent.map(str::to_owned),
    };
    (0, step)
}

#[test]
fn a_turns_spend_splits_by_agent_and_model_and_adds_up() {
    let steps = vec![
        model_step("openai/gpt-x", None, 100, "ok"),
        model_step("openai/gpt-x", None, 50, "ok"),
        model_step("anthropic/c|laude\n", Some("researcher"), 7, "ok"),
        model_step("openai/gpt-x", None, 0, "timeout"),
    ];
    let mut spend = Tally::default();
    for (_, s) in &steps[..3] {
        if let crate::audit::Step::Model { cost_micros, .. } = s {
            spend.add_call(
                crate::llm::Usage {
                    input: 10,
                    output: 5,
                    cached_input: 0,
                    cache_write: 0,
                },
                *cost_micros,
            );
        }
    }
    // One call more than the steps show (a turn past the audit's step limit).
    spend.add_call(
        crate::llm::Usage {
            input: 1,
            output: 1,
            cached_input: 0,
            cache_write: 0,
        },
        3,
    );
    let split = split_by_model("assistant", spend, &steps);
    let pairs: Vec<(&str, &str, u64, u64)> = split
        .iter()
        .map(|m| {
            (
                m.agent.as_str(),
                m.model.as_str(),
                m.spend.calls,
                m.spend.cost_micros,
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("assistant", "openai/gpt-x", 2, 150),
            ("researcher", "anthropic/claude", 1, 7),
            ("assistant", UNNAMED, 1, 3),
        ]
    );
    let mut total = Tally::default();
    split.iter().for_each(|m| total.add(m.spend));
    assert_eq!(total, spend);
    // A day's counters list them back, apart from the people's.
    let clock = Arc::new(FakeClock::new(1_700_000_000_000));
    let kv = MemoryKv::new(clock.clone());
    let ledger = Ledger {
        kv: &kv,
        clock: &*clock,
        written: &Default::default(),
    };
    let main = ConnectorId::new("main");
    block_on(async {
        ledger.add(&main, 1, 1, spend, &split).await.unwrap();
        ledger.add(&main, 2, 2, spend, &split).await.unwrap();
        let mut models = ledger.models_on_day(&main, ledger.today()).await.unwrap();
        models.sort_by(|a, b| a.1.cmp(&b.1));
        assert_eq!(models.len(), 3);
        assert_eq!(models[0].0, "assistant");
        assert_eq!(models[0].1, UNNAMED);
        assert_eq!(
            (models[1].0.as_str(), models[1].2.cost_micros),
            ("researcher", 14)
        );
        assert_eq!(
            (models[2].1.as_str(), models[2].2.cost_micros),
            ("openai/gpt-x", 300)
        );
        let people = ledger.people_on_day(&main, ledger.today()).await.unwrap();
        assert_eq!(people.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 2]);
    });
}

#[test]
fn prices_turn_tokens_into_cost() {
    let price = crate::config::Price {
        input: 3.0,
        output: 15.0,
        cache_read: Some(0.3),
        cache_write: None,
    };
    let usage = Usage {
        input: 1_000_000,
        output: 100_000,
        cached_input: 1_000_000,
        cache_write: 0,
    };
    assert_eq!(usage.cost_micros(&price), 3_000_000 + 1_500_000 + 300_000);
}

/// Two processes add to the same counters, each remembering what it wrote: a process that
/// alone wrote a counter adds to it without reading it, and one whose value went stale
/// reads it again; no addition is lost either way.
#[test]
fn an_addition_skips_the_read_of_a_counter_only_this_process_wrote() {
    let clock = Arc::new(FakeClock::new(1_700_000_000_000));
    let inner: Arc<dyn Kv> = Arc::new(MemoryKv::new(clock.clone()));
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = reads.clone();
    let kv = Tapped::new(inner.clone(), move |call| {
        if call.kind() == "get" {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Verdict::Run
    });
    let gets = || reads.swap(0, std::sync::atomic::Ordering::SeqCst);
    let (one, two) = (Written::default(), Written::default());
    let ledger = |written| Ledger {
        kv: &kv,
        clock: &*clock,
        written,
    };
    let main = ConnectorId::new("main");
    let mut t = Tally::default();
    t.add_call(
        Usage {
            input: 10,
            output: 1,
            cached_input: 0,
            cache_write: 0,
        },
        7,
    );
    let everyone = |l: &Ledger| block_on(l.get(&main, Period::Day, Who::Everyone)).unwrap();
    block_on(async {
        // Six counters (today and this month: the person, the chat, everyone).
        ledger(&one).add(&main, 1, 1, t, &[]).await.unwrap();
        assert_eq!(gets(), 6, "the first addition reads each counter");
        ledger(&one).add(&main, 1, 1, t, &[]).await.unwrap();
        assert_eq!(gets(), 0, "the next one swaps against what it wrote");
        // Another process adds to the same person's counters: its values are not these.
        ledger(&two).add(&main, 1, 1, t, &[]).await.unwrap();
        assert_eq!(gets(), 6);
        ledger(&one).add(&main, 1, 1, t, &[]).await.unwrap();
        assert_eq!(gets(), 6, "each stale swap fails, then the counter is read");
        // A counter changed behind both (an import, say) is read again too.
        inner
            .put(
                &keys::usage(
                    &main,
                    &ledger(&one).period(Period::Day),
                    &Who::Everyone.segment(),
                ),
                b"{}",
                None,
            )
            .await
            .unwrap();
        ledger(&one).add(&main, 1, 1, t, &[]).await.unwrap();
        assert_eq!(gets(), 1);
    });
    assert_eq!(everyone(&ledger(&one)).calls, 1, "counted from the reset");
    let person = block_on(ledger(&two).get(&main, Period::Month, Who::User(1))).unwrap();
    assert_eq!(person.calls, 5, "every addition counted once");
}

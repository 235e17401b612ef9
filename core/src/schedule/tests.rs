//! The reminder store on the in-memory Kv: create, list and cancel per chat, the due index,
//! advancing by compare-and-swap, and firing ids.

use std::sync::Arc;

use clawless_platform::{FakeClock, MemoryKv};
use futures::executor::block_on;
use serde_json::json;

use super::*;

const NOW: u64 = 1_785_000_000_000;

fn origin(chat: i64) -> Origin {
    Origin {
        connector: "main".into(),
        chat,
        chat_type: "private".into(),
        thread: None,
        user: chat,
        user_name: "Ada".into(),
    }
}

#[test]
fn create_list_cancel_and_the_due_index() {
    let clock = Arc::new(FakeClock::new(NOW));
    let kv = MemoryKv::new(clock.clone());
    let wake = Wake::default();
    let s = Schedules {
        kv: &kv,
        clock: &*clock,
        wake: Some(&wake),
    };
    let utc = Zone::utc();
    block_on(async {
        assert_eq!(wake.take(), None);
        let in10 = when::first(&json!({"in_minutes": 10}), NOW, &utc).unwrap();
        let a = s
            .create(origin(1), What::Text("tea".into()), in10, &utc)
            .await
            .unwrap()
            .unwrap();
        let daily = when::first(&json!({"cron": "0 9 * * *"}), NOW, &utc).unwrap();
        let b = s
            .create(origin(1), What::Prompt("news".into()), daily, &utc)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((a.id, b.id), (1, 2));
        // The runner learns the earliest due time written, once.
        assert_eq!(wake.take(), Some(NOW + 600_000));
        assert_eq!(wake.take(), None);
        assert_eq!(
            s.list(&"main".into(), 1).await.unwrap(),
            vec![a.clone(), b.clone()]
        );
        assert!(s.list(&"main".into(), 2).await.unwrap().is_empty());
        assert_eq!(s.next_due().await.unwrap(), Some(NOW + 600_000));
        assert!(s.due(NOW, 10).await.unwrap().is_empty());
        let due = s.due(NOW + 600_000, 10).await.unwrap();
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].1, due[0].4), (NOW + 600_000, 1));

        // Another chat cannot cancel it; its own can, once.
        assert_eq!(s.cancel(&"main".into(), 2, a.id).await.unwrap(), None);
        assert_eq!(s.cancel(&"main".into(), 1, a.id).await.unwrap(), Some(a));
        assert_eq!(s.cancel(&"main".into(), 1, 1).await.unwrap(), None);
        assert_eq!(s.next_due().await.unwrap(), Some(b.next_ms));
    });
}

#[test]
fn advancing_is_a_compare_and_swap_and_recurring_ones_move_past_now() {
    let clock = Arc::new(FakeClock::new(NOW));
    let kv = MemoryKv::new(clock.clone());
    let s = Schedules {
        kv: &kv,
        clock: &*clock,
        wake: None,
    };
    let utc = Zone::utc();
    block_on(async {
        let hourly = when::first(&json!({"cron": "0 * * * *"}), NOW, &utc).unwrap();
        let r = s
            .create(origin(1), What::Text("stretch".into()), hourly, &utc)
            .await
            .unwrap()
            .unwrap();
        let key = keys::reminder(&"main".into(), 1, r.id);
        let (bytes, read) = s.load(&key).await.unwrap().unwrap();
        // Five hours of downtime: the next time is the first after now, not the missed ones.
        let later = r.next_ms + 5 * 3_600_000 + 60_000;
        assert!(s.advance(&read, &bytes, later).await.unwrap());
        assert!(
            !s.advance(&read, &bytes, later).await.unwrap(),
            "the second swap loses"
        );
        let (_, moved) = s.load(&key).await.unwrap().unwrap();
        assert_eq!(moved.next_ms, r.next_ms + 6 * 3_600_000);
        // A one-off is deleted.
        let once = when::first(&json!({"in_minutes": 1}), NOW, &utc).unwrap();
        let o = s
            .create(origin(1), What::Text("go".into()), once, &utc)
            .await
            .unwrap()
            .unwrap();
        let okey = keys::reminder(&"main".into(), 1, o.id);
        let (bytes, read) = s.load(&okey).await.unwrap().unwrap();
        assert!(s.advance(&read, &bytes, o.next_ms).await.unwrap());
        assert!(s.load(&okey).await.unwrap().is_none());
    });
}

#[test]
fn a_chat_holds_at_most_fifty() {
    let clock = Arc::new(FakeClock::new(NOW));
    let kv = MemoryKv::new(clock.clone());
    let s = Schedules {
        kv: &kv,
        clock: &*clock,
        wake: None,
    };
    let utc = Zone::utc();
    block_on(async {
        for _ in 0..MAX_PER_CHAT {
            let f = when::first(&json!({"in_minutes": 5}), NOW, &utc).unwrap();
            s.create(origin(7), What::Text("x".into()), f, &utc)
                .await
                .unwrap()
                .unwrap();
        }
        let f = when::first(&json!({"in_minutes": 5}), NOW, &utc).unwrap();
        let refused = s
            .create(origin(7), What::Text("x".into()), f, &utc)
            .await
            .unwrap();
        assert!(refused.unwrap_err().contains("already has 50"));
    });
}

#[test]
fn firing_ids_are_negative_unique_and_in_time_order_as_keys() {
    let a = fire_update_id(1, NOW);
    let b = fire_update_id(2, NOW);
    let c = fire_update_id(1, NOW + 1000);
    assert!(a < 0 && b < 0 && c < 0);
    assert!(a != b && a != c && b != c);
    let lane = crate::ids::Lane::new("main:1");
    let (ka, kc) = (keys::job(&lane, a), keys::job(&lane, c));
    assert!(ka < kc, "earlier firing first: {ka} {kc}");
    assert!(kc < keys::job(&lane, 1), "before every Telegram update");
    assert_eq!(ka.len(), kc.len());
    assert!(fire_update_id((1 << 30) - 1, u64::MAX) > i64::MIN);
    // A background task's record goes before any firing, even one from before it started
    // (a scheduled task waiting for an approval), and is never a firing's id.
    let done = done_update_id((1 << 30) - 1);
    assert!(keys::job(&lane, done) < keys::job(&lane, fire_update_id(1, 1000)));
    assert!(done < 0 && done > fire_update_id(1, 1000));
    assert_ne!(done_update_id(1), done_update_id(2));
}

#[test]
fn due_keys_read_back() {
    let k = keys::due(NOW, &"my-bot".into(), -100123, 42);
    assert_eq!(
        keys::parse_due(&k),
        Some((NOW, "my-bot".into(), -100123, 42))
    );
    assert_eq!(until(0, 90_000), "in 2 min");
    assert_eq!(until(0, 3 * 3_600_000 + 300_000), "in 3 h 5 min");
}

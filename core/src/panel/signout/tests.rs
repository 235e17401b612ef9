use std::sync::Arc;
use std::time::Duration;

use clawless_platform::{Clock, FakeClock, Kv, MemoryKv};
use futures::executor::block_on;

use super::*;

const START: u64 = 1_800_000_000_000;

fn store() -> (Arc<FakeClock>, MemoryKv) {
    let clock = Arc::new(FakeClock::new(START));
    let kv = MemoryKv::new(clock.clone());
    (clock, kv)
}

fn conn() -> ConnectorId {
    ConnectorId::new("main")
}

#[test]
fn signing_out_refuses_that_cookie_only() {
    block_on(async {
        let (clock, kv) = store();
        let now = clock.now_ms();
        end_session(&kv, &conn(), 7, "s1.main.7.100.sig-a", now - 1_000, now)
            .await
            .unwrap();
        let r = SignedOut::read(&kv, &conn(), 7).await.unwrap();
        assert!(r.refuses(now - 1_000, Some("s1.main.7.100.sig-a")));
        assert!(!r.refuses(now - 1_000, Some("s1.main.7.200.sig-b")));
        assert!(
            !r.refuses(now - 1_000, None),
            "launch data is not a session"
        );
        // Another person's record is untouched.
        let other = SignedOut::read(&kv, &conn(), 8).await.unwrap();
        assert_eq!(other, SignedOut::default());
        // No cookie in the store, only its digest.
        let raw = kv.get(&keys::panel_signed_out(&conn(), 7)).await.unwrap();
        assert!(!String::from_utf8(raw.unwrap()).unwrap().contains("sig-a"));
    });
}

#[test]
fn everywhere_refuses_all_issued_before_and_nothing_after() {
    block_on(async {
        let (clock, kv) = store();
        end_session(&kv, &conn(), 7, "cookie-a", START, START)
            .await
            .unwrap();
        clock.advance(Duration::from_secs(60));
        everywhere(&kv, &conn(), 7, clock.now_ms()).await.unwrap();
        let r = SignedOut::read(&kv, &conn(), 7).await.unwrap();
        assert!(r.refuses(clock.now_ms(), None));
        assert!(r.refuses(START, Some("cookie-b")));
        assert!(!r.refuses(clock.now_ms() + 1, Some("cookie-c")));
    });
}

#[test]
fn the_record_stays_bounded_and_expires_with_the_sessions() {
    block_on(async {
        let (clock, kv) = store();
        for n in 0..MAX_ENDED {
            let now = clock.now_ms();
            end_session(&kv, &conn(), 7, &format!("cookie-{n}"), now, now)
                .await
                .unwrap();
        }
        let r = SignedOut::read(&kv, &conn(), 7).await.unwrap();
        assert_eq!(r.ended.len(), MAX_ENDED);
        assert_eq!(r.everywhere_ms, None);
        // One more: every session up to now is refused instead of the list growing.
        clock.advance(Duration::from_secs(1));
        let now = clock.now_ms();
        end_session(&kv, &conn(), 7, "cookie-last", now, now)
            .await
            .unwrap();
        let r = SignedOut::read(&kv, &conn(), 7).await.unwrap();
        assert!(r.ended.is_empty());
        assert!(r.refuses(now, Some("cookie-anything")));
        assert!(!r.refuses(now + 1, None));

        // Ended sessions past their cookie's life are dropped at the next write.
        let (clock, kv) = store();
        end_session(&kv, &conn(), 7, "old", START, START)
            .await
            .unwrap();
        clock.advance(Duration::from_millis(auth::SESSION_TTL_MS + 1));
        let now = clock.now_ms();
        end_session(&kv, &conn(), 7, "new", now, now).await.unwrap();
        let r = SignedOut::read(&kv, &conn(), 7).await.unwrap();
        assert_eq!(r.ended.len(), 1);
        // And the record itself is gone once no session it names could be taken.
        clock.advance(Duration::from_millis(KEPT_MS + 1));
        let r = SignedOut::read(&kv, &conn(), 7).await.unwrap();
        assert_eq!(r, SignedOut::default());
    });
}

#[test]
fn an_earlier_releases_bare_time_reads_as_everywhere() {
    block_on(async {
        let (_clock, kv) = store();
        let key = keys::panel_signed_out(&conn(), 7);
        kv.put(&key, START.to_string().as_bytes(), None)
            .await
            .unwrap();
        let r = SignedOut::read(&kv, &conn(), 7).await.unwrap();
        assert!(r.refuses(START, None));
        assert!(!r.refuses(START + 1, None));
        // A sign-out on top of it keeps the time.
        end_session(&kv, &conn(), 7, "c", START + 5, START + 10)
            .await
            .unwrap();
        let r = SignedOut::read(&kv, &conn(), 7).await.unwrap();
        assert!(r.refuses(START, None) && r.refuses(START + 5, Some("c")));
        kv.put(&key, b"not a record", None).await.unwrap();
        assert!(SignedOut::read(&kv, &conn(), 7).await.is_err());
    });
}

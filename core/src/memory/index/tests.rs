#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::memory::chunk::chunk;
use std::future::Future;
use std::task::Context;

fn keys_of(markdown: &str) -> Vec<Keyed> {
    keyed(chunk(markdown, 400, 80))
}

#[test]
fn keys_are_unique_and_stable() {
    let md = "# A\nsame text\n\n# A\nsame text\n";
    let a = keys_of(md);
    assert_eq!(a.len(), 2);
    assert_ne!(a[0].key, a[1].key, "same text, other lines: other key");
    let b = keys_of(md);
    assert_eq!(
        a.iter().map(|k| &k.key).collect::<Vec<_>>(),
        b.iter().map(|k| &k.key).collect::<Vec<_>>()
    );
    let twice = keyed(vec![a[0].chunk.clone(), a[0].chunk.clone()]);
    assert_eq!(
        twice[1].key,
        format!("{}-2", twice[0].key),
        "a repeat is suffixed"
    );
}

#[test]
fn a_plan_adds_new_chunks_and_removes_vanished_and_pending_ones() {
    let before = keys_of("# One\nfirst\n\n# Two\nsecond\n");
    let old = Manifest {
        hash: 7,
        embedder: "e".into(),
        chunks: before.iter().map(|k| k.key.clone()).collect(),
        pending: vec!["stray".into()],
        ids: vec!["s#p#0".into()],
    };
    let after = keys_of("# One\nfirst\n\n# Two\nsecond, edited\n");
    let p = plan(&old, &after, "e", &"s".into(), "p");
    assert_eq!(p.add, [1], "only the edited chunk is added");
    let mut removed = p.remove.clone();
    removed.sort();
    let mut expected = vec![
        chunk_id(&"s".into(), "p", &before[1].key),
        chunk_id(&"s".into(), "p", "stray"),
        "s#p#0".to_owned(),
    ];
    expected.sort();
    assert_eq!(removed, expected, "vanished, pending and legacy ids go");
    assert_eq!(p.intent.hash, 0, "a run under way counts as changed");
    assert_eq!(p.intent.chunks, [before[0].key.clone()], "kept chunks");
    let mut pending = p.intent.pending.clone();
    pending.sort();
    let mut expected = vec![after[1].key.clone(), before[1].key.clone(), "stray".into()];
    expected.sort();
    assert_eq!(pending, expected, "added and removed keys are pending");
    assert_eq!(p.intent.ids, old.ids, "legacy ids stay until deleted");

    let p = plan(&old, &after, "other", &"s".into(), "p");
    assert_eq!(p.add, [0, 1], "another embedder adds every chunk");
    assert!(p.intent.chunks.is_empty());
}

#[test]
fn manifests_of_the_first_format_still_read() {
    let old: Manifest = serde_json::from_str(
        r#"{"hash": 42, "embedder": "local-hash-v1-384", "ids": ["s#p#0", "s#p#1"]}"#,
    )
    .unwrap();
    assert_eq!(old.ids.len(), 2);
    assert!(old.chunks.is_empty());
    assert!(old.is_current(42, "local-hash-v1-384"));
    assert_eq!(old.all_ids(&"s".into(), "p"), ["s#p#0", "s#p#1"]);
}

#[test]
fn the_cap_cuts_at_a_line_break_or_a_char_boundary() {
    assert_eq!(within_cap("short\n", 100), "short\n");
    assert_eq!(within_cap("one\ntwo\nthree\n", 9), "one\ntwo\n");
    assert_eq!(within_cap("ééé", 3), "é", "never inside a character");
}

#[test]
fn yield_now_is_pending_once_and_wakes_itself() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let count = Arc::new(Count(AtomicUsize::new(0)));
    let waker = std::task::Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let mut y = std::pin::pin!(yield_now());
    assert!(y.as_mut().poll(&mut cx).is_pending());
    assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken at once");
    assert!(y.as_mut().poll(&mut cx).is_ready());
}

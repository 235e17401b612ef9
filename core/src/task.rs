//! Cooperative scheduling without a runtime: core cannot spawn or sleep on its own, so long
//! work (indexing a big file) and work raced beside another future (the lease kept beside a
//! turn) give the executor a turn with [`yield_now`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Pending once (waking itself at once), then ready: lets the executor run other tasks
/// between two batches of a long indexing run. Works on any executor: a multi-threaded
/// runtime, the Worker's JS microtasks and `block_on` all honour a self-wake.
pub(crate) struct YieldNow(bool);

pub(crate) fn yield_now() -> YieldNow {
    YieldNow(false)
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

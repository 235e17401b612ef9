//! The two passes of a query over the mirror: the 2-bit first pass over every slot, and the
//! int8 re-rank of the best few hundred it keeps.

use super::nibbles::{Dot, WithDot};
use super::{keep_best, twobit, Mirror};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs of slots a scanning thread takes at a time.
const RUN: usize = 4_096;

/// How many vectors ahead a scan asks for the next codes.
const AHEAD: usize = 32;

/// The `keep` best 2-bit estimates `(score, slot)` among the runs of slots this thread takes
/// from `next`, of those that pass the filter: a code `c` stands for `(c - 1.5) · step`.
pub struct FirstPass<'a> {
    pub mirror: &'a Mirror,
    pub next: &'a AtomicUsize,
    pub want: u64,
    pub keep: usize,
    pub q_sum: i32,
}

impl twobit::WithDot for FirstPass<'_> {
    type Output = Vec<(f32, usize)>;

    #[inline(always)]
    fn with<D: twobit::Dot>(self, dot: &D) -> Self::Output {
        let m = self.mirror;
        let h = m.padded / 4;
        let centre = -1.5 * self.q_sum as f32;
        let mut kept = Vec::with_capacity(self.keep * 2);
        // The score a slot must beat: each thread's slots come in ascending order, so a tie
        // loses to the slot already kept (the order [`keep_best`] sorts by).
        let mut floor = f32::NEG_INFINITY;
        // Scores a batch at a time, then keeps what beats the floor: the scoring loop has no
        // data-dependent branch.
        let mut scores = [0f32; 256];
        loop {
            let run = self.next.fetch_add(RUN, Ordering::Relaxed);
            if run >= m.len() {
                break;
            }
            let mut start = run;
            let run_end = (run + RUN).min(m.len());
            while start < run_end {
                let end = (start + scores.len()).min(run_end);
                let vector = |s: usize| &m.codes[s * h..(s + 1) * h];
                let mut s = start;
                while s < end {
                    // The codes 32 vectors ahead (3 KB at 384 dimensions): measured best
                    // between 16 and 64 on this VM (the first pass at 100k, 2 threads, from
                    // memory: 0.83 ms with, 1.17 without).
                    let ahead = ((s + AHEAD) * h).min(m.codes.len());
                    let until = ((s + AHEAD + 4) * h).min(m.codes.len());
                    dot.prefetch(&m.codes[ahead..until]);
                    let dots = if s + 4 <= end {
                        dot.dot4([vector(s), vector(s + 1), vector(s + 2), vector(s + 3)])
                    } else {
                        [dot.dot(vector(s)), 0, 0, 0]
                    };
                    for (d, slot) in dots.into_iter().zip(s..end.min(s + 4)) {
                        scores[slot - start] = if m.blooms[slot] & self.want == self.want {
                            (d as f32 + centre) * m.steps[slot]
                        } else {
                            f32::NEG_INFINITY
                        };
                    }
                    s += if s + 4 <= end { 4 } else { 1 };
                }
                for (&score, s) in scores.iter().zip(start..end) {
                    if score <= floor {
                        continue;
                    }
                    kept.push((score, s));
                    if kept.len() == self.keep * 2 {
                        keep_best(&mut kept, self.keep);
                        floor = kept.iter().map(|k| k.0).fold(f32::INFINITY, f32::min);
                    }
                }
                start = end;
            }
        }
        keep_best(&mut kept, self.keep);
        kept
    }
}

/// The int8 estimate of each slot: `Σ q · code = 16 · Σ q · high + Σ q · low - 128 · Σ q`.
pub struct Rerank<'a> {
    pub mirror: &'a Mirror,
    pub slots: Vec<(f32, usize)>,
    pub q_sum: i32,
}

impl WithDot for Rerank<'_> {
    type Output = Vec<(f32, usize)>;

    #[inline(always)]
    fn with<D: Dot>(self, dot: &D) -> Self::Output {
        let m = self.mirror;
        let h = m.half();
        // A plain loop: a closure here would be compiled apart from the kernel's instruction
        // set (see [`Kernel::run`]).
        let mut scored = Vec::with_capacity(self.slots.len());
        let row = |s: usize| s * h..(s + 1) * h;
        // The rows are read at random: each is asked for a few candidates before it is used.
        for &(_, s) in self.slots.iter().take(8) {
            dot.prefetch(&m.high[row(s)]);
            dot.prefetch(&m.low[row(s)]);
        }
        for (i, &(_, s)) in self.slots.iter().enumerate() {
            if let Some(&(_, next)) = self.slots.get(i + 8) {
                dot.prefetch(&m.high[row(next)]);
                dot.prefetch(&m.low[row(next)]);
            }
            let high = dot.dot(&m.high[s * h..(s + 1) * h]);
            let low = dot.dot(&m.low[s * h..(s + 1) * h]);
            let exact = 16 * high + low - 128 * self.q_sum;
            scored.push((exact as f32 * m.scales[s], s));
        }
        scored
    }
}

//! The two passes of a query over the mirror: the 2-bit first pass over every slot (by the
//! look-ups of [`super::fastscan`]), and the int8 re-rank of the best few hundred it keeps.

use super::fastscan::{self, Sums, Tables, WithSums, GROUP};
use super::nibbles::{Dot, WithDot};
use super::{keep_best, Mirror};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs of slots a scanning thread takes at a time (whole blocks).
const RUN: usize = 128 * GROUP;

/// The `keep` best 2-bit estimates `(score, slot)` among the runs of slots this thread takes
/// from `next`, of those that pass the filter: a code `c` stands for `(c - 1.5) · step`.
pub struct FirstPass<'a> {
    pub mirror: &'a Mirror,
    pub tables: &'a Tables,
    pub next: &'a AtomicUsize,
    pub want: u64,
    pub keep: usize,
}

impl WithSums for FirstPass<'_> {
    type Output = Vec<(f32, usize)>;

    #[inline(always)]
    fn with<S: Sums>(self, sums: &S) -> Self::Output {
        let m = self.mirror;
        let codes = m.codes.bytes();
        let block = fastscan::block_bytes(m.padded);
        let mut kept = Vec::with_capacity(self.keep * 2);
        // The score a slot must beat: each thread's slots come in ascending order, so a tie
        // loses to the slot already kept (the order [`keep_best`] sorts by).
        let mut floor = f32::NEG_INFINITY;
        loop {
            let run = self.next.fetch_add(RUN, Ordering::Relaxed);
            if run >= m.len() {
                break;
            }
            for first in (run..(run + RUN).min(m.len())).step_by(GROUP) {
                let at = first / GROUP * block;
                let Some(bytes) = codes.get(at..at + block) else {
                    break;
                };
                let found = sums.block(bytes);
                let end = (first + GROUP).min(m.len());
                let n = end - first;
                let mut steps = [0f32; GROUP];
                steps[..n].copy_from_slice(&m.steps[first..end]);
                let (scores, mut above) = sums.scores(&found, self.tables, &steps, floor);
                above &= u32::MAX >> (GROUP - n);
                // Filtered, the blooms of the whole block in one go: read one by one, only
                // where a score is above the floor, each was a miss in the cache.
                if self.want != 0 {
                    let mut blooms = [0u64; GROUP];
                    blooms[..n].copy_from_slice(&m.blooms[first..end]);
                    above &= sums.having(&blooms, self.want);
                }
                // Only slots above the floor are looked at, in order (after the first few
                // blocks, a handful a block).
                while above != 0 {
                    let j = above.trailing_zeros() as usize;
                    above &= above - 1;
                    let (score, s) = (scores[j], first + j);
                    if score <= floor {
                        continue;
                    }
                    kept.push((score, s));
                    if kept.len() == self.keep * 2 {
                        keep_best(&mut kept, self.keep);
                        floor = kept.iter().map(|k| k.0).fold(f32::INFINITY, f32::min);
                    }
                }
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

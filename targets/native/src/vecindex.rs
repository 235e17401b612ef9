//! The in-memory search side of [`crate::store::SqlVectors`]: every stored vector normalised,
//! turned by a fixed rotation ([`twobit::Rotation`]: dot products unchanged, sparse vectors
//! spread over every dimension), then held twice: as 2-bit codes ([`twobit`]) and as int8
//! (one scale per vector) in two 4-bit planes, the high and the low nibble of each value. A
//! query scores the 2-bit codes of every vector by table look-ups ([`fastscan`]), re-ranks
//! the best few hundred by their whole int8 value (both planes), and the caller re-ranks the
//! best [`candidates`] exactly from their rows in libsql.
//!
//! Why: libsql's DiskANN index measured badly at 384 dimensions (see ../shared/TOOLCHAIN.md)
//! and a SQL scan reads every 1.5 KB row per query. The mirror is 0.31 of the f32 data
//! (100k × 384 dims ≈ 48 MB); the first pass reads a sixteenth of it (9.6 MB at 100k, in
//! huge pages: [`pages`]), and with AVX2 looks up 32 slots' codes per instruction. The int8
//! estimate's best 15 held the exact best 10 in the same simulation as the 2-bit pass's (see
//! [`twobit`]).

mod fastscan;
mod nibbles;
mod pages;
mod scan;
mod twobit;

use nibbles::Kernel;
use scan::{FirstPass, Rerank};
use twobit::Rotation;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;

/// How many approximate candidates an exact re-rank looks at for `top_k` results.
pub fn candidates(top_k: usize) -> usize {
    (top_k * 3 / 2).max(15)
}

/// How many 2-bit estimates the first pass keeps for `n` int8 candidates.
fn first_pass(n: usize) -> usize {
    (n * 25).max(500)
}

/// A 64-bit FNV-1a hash of one metadata pair.
pub fn pair_hash(key: &str, value: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes().chain([0xff]).chain(value.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The 64-bit Bloom filter of a set of metadata pairs (three bits per pair).
pub fn bloom(pairs: &BTreeMap<String, String>) -> u64 {
    pairs.iter().fold(0, |acc, (k, v)| {
        let h = pair_hash(k, v);
        acc | 1 << (h & 63) | 1 << ((h >> 6) & 63) | 1 << ((h >> 12) & 63)
    })
}

/// `v` normalised, then scaled into int8; the scale maps the int8 values back.
pub fn quantize(v: &[f32]) -> (Vec<i8>, f32) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 {
        return (vec![0; v.len()], 0.0);
    }
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs())) / norm;
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    // Rounded half away from zero by hand: `round` is a call into libm on baseline x86-64
    // (loading the mirror spent a fifth of its time there).
    let k = 1.0 / (norm * scale);
    let q = v
        .iter()
        .map(|&x| {
            let y = (x * k).clamp(-127.0, 127.0);
            (y + 0.5f32.copysign(y)) as i8
        })
        .collect();
    (q, scale)
}

/// One row to load: its id, rowid, vector and metadata.
pub type Row = (String, i64, Vec<f32>, BTreeMap<String, String>);

/// Rows from which [`Mirror::load`] codes on two threads.
const LOAD_SLICE: usize = 256;

/// One vector's codes: its slot's share of every plane of the mirror.
struct Coded {
    two: Vec<u8>,
    step: f32,
    high: Vec<u8>,
    low: Vec<u8>,
    scale: f32,
    bloom: u64,
}

/// The quantized vectors of one store, in insertion order; ids map to slots.
#[derive(Default)]
pub struct Mirror {
    pub dim: usize,
    /// `dim` padded to whole packed blocks ([`twobit::padded`], also whole nibble blocks).
    padded: usize,
    /// Turns every vector and query before it is coded (set with `dim`).
    rotation: Option<Rotation>,
    ids: Vec<String>,
    /// Per slot, the row's rowid in the vectors table: the exact re-rank reads rows by it.
    rowids: Vec<i64>,
    /// Per slot `padded / 2` bytes: the high nibbles of the int8 codes offset by 128.
    high: Vec<u8>,
    /// The same for the low nibbles: `code + 128 = 16 · high + low`.
    low: Vec<u8>,
    scales: Vec<f32>,
    /// The 2-bit codes of the first pass ([`twobit`]), in blocks of [`fastscan::GROUP`]
    /// slots ([`fastscan`]'s layout; `padded / 4` bytes a slot).
    codes: pages::Pages,
    /// Per slot, the step of its 2-bit codes.
    steps: Vec<f32>,
    /// Per slot, a 64-bit Bloom filter of its metadata pairs: the scan's filter test is one
    /// AND on contiguous memory (a false positive only costs a candidate slot; callers check
    /// the survivors' metadata exactly).
    blooms: Vec<u64>,
    slot: std::collections::HashMap<String, usize>,
}

impl Mirror {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn half(&self) -> usize {
        self.padded / 2
    }

    /// `v` normalised and turned by the rotation (`padded` values; empty before any vector).
    fn turn(&self, v: &[f32]) -> Vec<f32> {
        let Some(r) = &self.rotation else {
            return Vec::new();
        };
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        r.apply_scaled(v, if norm > 0.0 { 1.0 / norm } else { 1.0 })
    }

    /// The rowid of `id`'s row, if it is stored.
    pub fn rowid(&self, id: &str) -> Option<i64> {
        self.slot.get(id).map(|&s| self.rowids[s])
    }

    /// Inserts or replaces `id`, stored in the table's row `rowid`.
    pub fn upsert(
        &mut self,
        id: &str,
        rowid: i64,
        vector: &[f32],
        metadata: &BTreeMap<String, String>,
    ) {
        self.prepare(vector.len());
        let coded = self.code(vector, metadata);
        self.put(id, rowid, coded);
    }

    /// [`Mirror::upsert`] of each of `rows` in order, coded on two threads when there are
    /// many: a row whose vector is not the mirror's length (the first non-empty row's if it
    /// has none) is skipped.
    pub fn load(&mut self, rows: &[Row]) {
        let Some(first) = rows.iter().find(|r| !r.2.is_empty()) else {
            return;
        };
        self.prepare(first.2.len());
        let this = &*self;
        let code = |rows: &[Row]| -> Vec<Option<Coded>> {
            let fits = |v: &[f32]| v.len() == this.dim;
            rows.iter()
                .map(|(_, _, v, meta)| fits(v).then(|| this.code(v, meta)))
                .collect()
        };
        let coded = if cores() > 1 && rows.len() >= 2 * LOAD_SLICE {
            let (a, b) = rows.split_at(rows.len() / 2);
            std::thread::scope(|s| {
                let other = s.spawn(|| code(b));
                let mut all = code(a);
                match other.join() {
                    Ok(rest) => all.extend(rest),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
                all
            })
        } else {
            code(rows)
        };
        for ((id, rowid, _, _), c) in rows.iter().zip(coded) {
            if let Some(c) = c {
                self.put(id, *rowid, c);
            }
        }
    }

    /// Takes `dim` as the mirror's length if it has none yet.
    fn prepare(&mut self, dim: usize) {
        if self.dim == 0 {
            self.dim = dim;
            self.padded = twobit::padded(dim);
            self.rotation = Some(Rotation::new(self.padded));
        }
    }

    /// The codes of `vector` (of the mirror's length), apart from the mirror.
    fn code(&self, vector: &[f32], metadata: &BTreeMap<String, String>) -> Coded {
        let turned = self.turn(vector);
        let mut two = Vec::with_capacity(self.padded / 2);
        let step = twobit::encode(&turned, &mut two);
        let (code, scale) = quantize(&turned);
        let (mut high, mut low) = (Vec::new(), Vec::new());
        nibbles::pack_planes(&code, self.padded, &mut high, &mut low);
        Coded {
            two,
            step,
            high,
            low,
            scale,
            bloom: bloom(metadata),
        }
    }

    /// Stores `c` as `id`'s, in the table's row `rowid`.
    fn put(&mut self, id: &str, rowid: i64, c: Coded) {
        let h = self.half();
        match self.slot.get(id) {
            Some(&s) => {
                self.high[s * h..(s + 1) * h].copy_from_slice(&c.high);
                self.low[s * h..(s + 1) * h].copy_from_slice(&c.low);
                self.scales[s] = c.scale;
                self.blooms[s] = c.bloom;
                self.rowids[s] = rowid;
                fastscan::write(self.codes.bytes_mut(), self.padded, s, &c.two);
                self.steps[s] = c.step;
            }
            None => {
                let s = self.ids.len();
                if s.is_multiple_of(fastscan::GROUP) {
                    let block = fastscan::block_bytes(self.padded);
                    self.codes.resize(self.codes.len() + block);
                }
                fastscan::write(self.codes.bytes_mut(), self.padded, s, &c.two);
                self.slot.insert(id.to_owned(), s);
                self.ids.push(id.to_owned());
                self.rowids.push(rowid);
                self.high.extend_from_slice(&c.high);
                self.low.extend_from_slice(&c.low);
                self.scales.push(c.scale);
                self.blooms.push(c.bloom);
                self.steps.push(c.step);
            }
        }
    }

    /// Removes `id` (the last slot moves into its place).
    pub fn remove(&mut self, id: &str) {
        let Some(s) = self.slot.remove(id) else {
            return;
        };
        let last = self.ids.len() - 1;
        let h = self.half();
        if s != last {
            let moved = self.ids[last].clone();
            self.slot.insert(moved, s);
            self.ids.swap(s, last);
            self.rowids.swap(s, last);
            self.high.copy_within(last * h..(last + 1) * h, s * h);
            self.low.copy_within(last * h..(last + 1) * h, s * h);
            self.scales.swap(s, last);
            self.blooms.swap(s, last);
            let moved = fastscan::read(self.codes.bytes(), self.padded, last);
            fastscan::write(self.codes.bytes_mut(), self.padded, s, &moved);
            self.steps.swap(s, last);
        }
        fastscan::write(self.codes.bytes_mut(), self.padded, last, &[]);
        self.ids.pop();
        self.rowids.pop();
        self.high.truncate(last * h);
        self.low.truncate(last * h);
        self.scales.pop();
        self.blooms.pop();
        let blocks = last.div_ceil(fastscan::GROUP);
        self.codes
            .resize(blocks * fastscan::block_bytes(self.padded));
        self.steps.pop();
        if self.ids.is_empty() {
            self.dim = 0;
            self.padded = 0;
            self.rotation = None;
        }
    }

    /// The ids of the `n` best approximate matches for `query` among vectors whose metadata
    /// may have every pair of `filter` (by Bloom filter: callers check the survivors exactly).
    /// Large stores are scanned on all cores, one slice each.
    pub fn scan(&self, query: &[f32], n: usize, filter: &BTreeMap<String, String>) -> Vec<String> {
        self.slots(query, n, filter)
            .into_iter()
            .map(|s| self.ids[s].clone())
            .collect()
    }

    /// [`Mirror::scan`] as the rowids of the matches' rows.
    pub fn scan_rowids(
        &self,
        query: &[f32],
        n: usize,
        filter: &BTreeMap<String, String>,
    ) -> Vec<i64> {
        self.slots(query, n, filter)
            .into_iter()
            .map(|s| self.rowids[s])
            .collect()
    }

    fn slots(&self, query: &[f32], n: usize, filter: &BTreeMap<String, String>) -> Vec<usize> {
        if self.is_empty() || query.len() != self.dim || n == 0 {
            return Vec::new();
        }
        let threads = if self.len() >= PARALLEL_FROM {
            cores()
        } else {
            1
        };
        self.scan_with(Kernel::detect(), query, n, filter, threads)
    }

    /// [`Mirror::scan`] on `threads` threads, one slice of the slots each.
    #[cfg(test)]
    fn scan_on(
        &self,
        query: &[f32],
        n: usize,
        filter: &BTreeMap<String, String>,
        threads: usize,
    ) -> Vec<String> {
        self.scan_with(Kernel::detect(), query, n, filter, threads)
            .into_iter()
            .map(|s| self.ids[s].clone())
            .collect()
    }

    fn scan_with(
        &self,
        kernel: Kernel,
        query: &[f32],
        n: usize,
        filter: &BTreeMap<String, String>,
        threads: usize,
    ) -> Vec<usize> {
        if self.is_empty() || query.len() != self.dim || n == 0 {
            return Vec::new();
        }
        let turned = self.turn(query);
        let tables = fastscan::Tables::new(&turned);
        let mut q = quantize(&turned).0;
        q.resize(self.padded, 0);
        let q_sum: i32 = q.iter().map(|&x| i32::from(x)).sum();
        let want = bloom(filter);
        let keep = first_pass(n);
        let threads = threads.clamp(1, self.len());
        // Slots are handed out in runs from a shared counter, so a thread that starts late
        // (an idle virtual CPU can take a millisecond to wake) takes what is left rather than
        // a fixed half the caller then waits for.
        let next = AtomicUsize::new(0);
        let pass = || {
            kernel.scan(
                &tables.bytes,
                FirstPass {
                    mirror: self,
                    tables: &tables,
                    next: &next,
                    want,
                    keep,
                },
            )
        };
        let mut rough: Vec<(f32, usize)> = if threads == 1 {
            pass()
        } else {
            std::thread::scope(|s| {
                let others: Vec<_> = (1..threads).map(|_| s.spawn(pass)).collect();
                let mut all = pass();
                for p in others {
                    all.extend(p.join().unwrap_or_default());
                }
                all
            })
        };
        keep_best(&mut rough, keep);
        let mut scored = kernel.run(
            &q,
            Rerank {
                mirror: self,
                slots: rough,
                q_sum,
            },
        );
        keep_best(&mut scored, n);
        scored.into_iter().map(|(_, s)| s).collect()
    }
}

/// The cores to scan on (at most 8), found once: `available_parallelism` reads the cgroup's
/// CPU quota from files each time, about 0.1 ms.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |p| p.get().min(8)))
}

/// Stores from this size are scanned on several threads. With the look-up kernel a pass over
/// 100k vectors is about half a millisecond on one thread, bound by memory, and a second
/// thread (started per query: 0.15 – 0.2 ms on a cloud VM) made it no faster (0.58 – 0.64 ms
/// against 0.49 – 0.58 in the vectors bench).
pub const PARALLEL_FROM: usize = 250_000;

/// Keeps the `n` best `(score, slot)`: the highest scores, ties to the lower slot (so any
/// split of the slots keeps the same ones).
fn keep_best(scored: &mut Vec<(f32, usize)>, n: usize) {
    if scored.len() > n {
        scored.select_nth_unstable_by(n, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.truncate(n);
    }
}

#[cfg(test)]
mod tests;

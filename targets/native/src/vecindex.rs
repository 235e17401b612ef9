//! The in-memory search side of [`crate::store::SqlVectors`]: every stored vector quantized to
//! int8 (one scale per vector, after normalising), scanned in full for each query, and the best
//! candidates re-ranked exactly from their f32 rows in libsql.
//!
//! Why: libsql's DiskANN index measured badly at 384 dimensions (see ../shared/TOOLCHAIN.md)
//! and a SQL scan reads every 1.5 KB row per query. The int8 mirror is a quarter of the f32
//! data (100k × 384 dims ≈ 38 MB), which is what a scan is bound by, and the exact re-rank of
//! [`candidates`] rows keeps the order of an exact search.

use std::collections::BTreeMap;

/// How many approximate candidates an exact re-rank looks at for `top_k` results.
pub fn candidates(top_k: usize) -> usize {
    (top_k * 2).max(20)
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
    let q = v
        .iter()
        .map(|x| ((x / norm) / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (q, scale)
}

/// `query` (already widened to i16) · `code`, where `code` holds int8 values offset by 128 as
/// u8 (zero-extending u8 is one SIMD step on baseline x86-64, sign-extending i8 two); the
/// offset is taken back out with `query_sum`, the sum of the query's values.
fn dot_i8(query: &[i16], query_sum: i32, code: &[u8]) -> i32 {
    dot_raw(query, code) - 128 * query_sum
}

/// The widening multiply-add `Σ query[i] · code[i]`, 16 lanes at a time with SSE2's
/// `pmaddwd` (written out, so it needs no loop vectoriser: the binary is built for size).
/// Products fit in i16 × u8 and the sums in i32 for any dimension below 2^16.
#[cfg(target_arch = "x86_64")]
fn dot_raw(query: &[i16], code: &[u8]) -> i32 {
    use safe_arch::{
        add_i32_m128i, m128i, mul_i16_horizontal_add_m128i, unpack_high_i8_m128i,
        unpack_low_i8_m128i,
    };
    let zero = m128i::default();
    let mut acc = m128i::default();
    let whole = query.len().min(code.len()) / 16 * 16;
    for (q, c) in query[..whole]
        .chunks_exact(16)
        .zip(code[..whole].chunks_exact(16))
    {
        let (Ok(c), Ok(lo), Ok(hi)) = (
            <[u8; 16]>::try_from(c),
            <[i16; 8]>::try_from(&q[..8]),
            <[i16; 8]>::try_from(&q[8..]),
        ) else {
            continue;
        };
        let c = m128i::from(c);
        let low = mul_i16_horizontal_add_m128i(unpack_low_i8_m128i(c, zero), m128i::from(lo));
        let high = mul_i16_horizontal_add_m128i(unpack_high_i8_m128i(c, zero), m128i::from(hi));
        acc = add_i32_m128i(acc, add_i32_m128i(low, high));
    }
    let lanes: [i32; 4] = acc.into();
    let tail: i32 = query[whole..]
        .iter()
        .zip(&code[whole..])
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum();
    lanes.iter().sum::<i32>() + tail
}

#[cfg(not(target_arch = "x86_64"))]
fn dot_raw(query: &[i16], code: &[u8]) -> i32 {
    query
        .iter()
        .zip(code)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

/// An int8 code stored offset by 128.
fn offset(code: &[i8]) -> Vec<u8> {
    code.iter().map(|&x| (i16::from(x) + 128) as u8).collect()
}

/// The quantized vectors of one store, in insertion order; ids map to slots.
#[derive(Default)]
pub struct Mirror {
    pub dim: usize,
    ids: Vec<String>,
    /// int8 codes offset by 128 (see [`dot_i8`]), `dim` per slot.
    codes: Vec<u8>,
    scales: Vec<f32>,
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

    /// Inserts or replaces `id`.
    pub fn upsert(&mut self, id: &str, vector: &[f32], metadata: &BTreeMap<String, String>) {
        if self.dim == 0 {
            self.dim = vector.len();
        }
        let (code, scale) = quantize(vector);
        let code = offset(&code);
        let pairs = bloom(metadata);
        match self.slot.get(id) {
            Some(&s) => {
                self.codes[s * self.dim..(s + 1) * self.dim].copy_from_slice(&code);
                self.scales[s] = scale;
                self.blooms[s] = pairs;
            }
            None => {
                self.slot.insert(id.to_owned(), self.ids.len());
                self.ids.push(id.to_owned());
                self.codes.extend_from_slice(&code);
                self.scales.push(scale);
                self.blooms.push(pairs);
            }
        }
    }

    /// Removes `id` (the last slot moves into its place).
    pub fn remove(&mut self, id: &str) {
        let Some(s) = self.slot.remove(id) else {
            return;
        };
        let last = self.ids.len() - 1;
        if s != last {
            let moved = self.ids[last].clone();
            self.slot.insert(moved, s);
            self.ids.swap(s, last);
            let d = self.dim;
            self.codes.copy_within(last * d..(last + 1) * d, s * d);
            self.scales.swap(s, last);
            self.blooms.swap(s, last);
        }
        self.ids.pop();
        self.codes.truncate(last * self.dim);
        self.scales.pop();
        self.blooms.pop();
        if self.ids.is_empty() {
            self.dim = 0;
        }
    }

    /// The ids of the `n` best approximate matches for `query` among vectors whose metadata
    /// may have every pair of `filter` (by Bloom filter: callers check the survivors exactly). Large stores
    /// are scanned on all cores, one slice each.
    pub fn scan(&self, query: &[f32], n: usize, filter: &BTreeMap<String, String>) -> Vec<String> {
        if self.is_empty() || query.len() != self.dim || n == 0 {
            return Vec::new();
        }
        let threads = if self.len() >= PARALLEL_FROM {
            std::thread::available_parallelism().map_or(1, |p| p.get().min(8))
        } else {
            1
        };
        self.scan_on(query, n, filter, threads)
    }

    /// [`Mirror::scan`] on `threads` threads, one slice of the slots each.
    fn scan_on(
        &self,
        query: &[f32],
        n: usize,
        filter: &BTreeMap<String, String>,
        threads: usize,
    ) -> Vec<String> {
        if self.is_empty() || query.len() != self.dim || n == 0 {
            return Vec::new();
        }
        let q: Vec<i16> = quantize(query).0.into_iter().map(i16::from).collect();
        let q_sum: i32 = q.iter().map(|&x| i32::from(x)).sum();
        let want = bloom(filter);
        let threads = threads.clamp(1, self.len());
        let per = self.len().div_ceil(threads);
        let mut scored: Vec<(f32, usize)> = if threads == 1 {
            self.best(&q, q_sum, want, 0..self.len(), n)
        } else {
            std::thread::scope(|s| {
                let parts: Vec<_> = (0..threads)
                    .map(|t| {
                        let range = t * per..((t + 1) * per).min(self.len());
                        let q = &q;
                        s.spawn(move || self.best(q, q_sum, want, range, n))
                    })
                    .collect();
                parts
                    .into_iter()
                    .flat_map(|p| p.join().unwrap_or_default())
                    .collect()
            })
        };
        keep_best(&mut scored, n);
        scored
            .into_iter()
            .map(|(_, s)| self.ids[s].clone())
            .collect()
    }

    /// The `n` best `(approximate score, slot)` among `slots`.
    fn best(
        &self,
        q: &[i16],
        q_sum: i32,
        want: u64,
        slots: std::ops::Range<usize>,
        n: usize,
    ) -> Vec<(f32, usize)> {
        let mut scored = Vec::with_capacity(slots.len());
        for s in slots {
            if self.blooms[s] & want != want {
                continue;
            }
            let code = &self.codes[s * self.dim..(s + 1) * self.dim];
            scored.push((dot_i8(q, q_sum, code) as f32 * self.scales[s], s));
        }
        keep_best(&mut scored, n);
        scored
    }
}

/// Stores from this size are scanned on several threads.
pub const PARALLEL_FROM: usize = 20_000;

fn keep_best(scored: &mut Vec<(f32, usize)>, n: usize) {
    if scored.len() > n {
        scored.select_nth_unstable_by(n, |a, b| b.0.total_cmp(&a.0));
        scored.truncate(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simd_dot_is_the_plain_sum_at_every_length() {
        for n in [0, 1, 15, 16, 17, 31, 384, 385] {
            let q: Vec<i16> = (0..n).map(|i| (i as i16 * 37 % 255) - 127).collect();
            let c: Vec<u8> = (0..n).map(|i| (i * 91 % 256) as u8).collect();
            let plain: i32 = q
                .iter()
                .zip(&c)
                .map(|(&x, &y)| i32::from(x) * i32::from(y))
                .sum();
            assert_eq!(dot_raw(&q, &c), plain, "length {n}");
        }
    }

    #[test]
    fn quantized_dot_tracks_cosine() {
        let a = [0.3f32, -0.2, 0.9, 0.1];
        let b = [0.25f32, -0.1, 0.8, 0.3];
        let (qa, sa) = quantize(&a);
        let (qb, sb) = quantize(&b);
        let qa: Vec<i16> = qa.into_iter().map(i16::from).collect();
        let sum = qa.iter().map(|&x| i32::from(x)).sum();
        let approx = dot_i8(&qa, sum, &offset(&qb)) as f32 * sa * sb;
        let exact = clawless_platform::vectors::cosine(&a, &b);
        assert!((approx - exact).abs() < 0.02, "{approx} vs {exact}");
    }

    #[test]
    fn upsert_remove_and_filter() {
        let mut m = Mirror::default();
        let meta = |s: &str| BTreeMap::from([("scope".to_owned(), s.to_owned())]);
        m.upsert("a", &[1.0, 0.0, 0.0], &meta("x"));
        m.upsert("b", &[0.0, 1.0, 0.0], &meta("y"));
        m.upsert("c", &[0.9, 0.1, 0.0], &meta("x"));
        assert_eq!(m.scan(&[1.0, 0.0, 0.0], 1, &BTreeMap::new()), ["a"]);
        assert_eq!(m.scan(&[0.0, 1.0, 0.0], 5, &meta("x")).len(), 2, "filter");
        m.upsert("a", &[0.0, 0.0, 1.0], &meta("x"));
        assert_eq!(
            m.scan(&[0.0, 0.0, 1.0], 1, &BTreeMap::new()),
            ["a"],
            "replaced"
        );
        m.remove("a");
        m.remove("missing");
        assert_eq!(m.len(), 2);
        assert_eq!(m.scan(&[1.0, 0.0, 0.0], 1, &BTreeMap::new()), ["c"]);
        m.remove("b");
        m.remove("c");
        assert!(m.is_empty());
        assert_eq!(m.dim, 0, "an empty store takes any dimension again");
    }

    /// Vectors with a deterministic pseudo-random generator (xorshift).
    fn random_vectors(n: usize, dim: usize) -> Vec<Vec<f32>> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|_| {
                (0..dim)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                    })
                    .collect()
            })
            .collect()
    }

    fn sorted(mut ids: Vec<String>) -> Vec<String> {
        ids.sort();
        ids
    }

    #[test]
    fn the_parallel_scan_finds_what_the_single_threaded_one_finds() {
        let (n, dim) = (PARALLEL_FROM + 4_001, 96);
        let data = random_vectors(n, dim);
        let mut m = Mirror::default();
        let scope = |i: usize| {
            let s = if i.is_multiple_of(3) { "other" } else { "main" };
            BTreeMap::from([("scope".to_owned(), s.to_owned())])
        };
        for (i, v) in data.iter().enumerate() {
            m.upsert(&format!("v{i}"), v, &scope(i));
        }
        let (all, main) = (BTreeMap::new(), scope(1));
        // Random queries: the same best 50, whatever the split.
        for q in random_vectors(8, dim).iter().skip(3) {
            for filter in [&all, &main] {
                let single = sorted(m.scan_on(q, 50, filter, 1));
                assert_eq!(single.len(), 50);
                for threads in [2, 3, 7] {
                    assert_eq!(
                        sorted(m.scan_on(q, 50, filter, threads)),
                        single,
                        "{threads}"
                    );
                }
                assert_eq!(sorted(m.scan(q, 50, filter)), single, "as scan picks it");
            }
        }
        // A stored vector is its own best match, wherever the slices start and end.
        for threads in [1, 2, 3, 7] {
            let per = n.div_ceil(threads);
            let edges = (0..threads).flat_map(|t| [t * per, ((t + 1) * per).min(n) - 1]);
            for slot in edges {
                let hits = m.scan_on(&data[slot], 1, &all, threads);
                assert_eq!(hits, [format!("v{slot}")], "{threads} threads, slot {slot}");
            }
        }
    }
}

//! The mirror's first pass: every slot's 2-bit codes ([`super::twobit`]) scored by table
//! look-ups, 32 slots at a time (FAISS's "fast scan" layout, with 2-bit codes).
//!
//! The query becomes one table a position (two dimensions, a nibble of their two codes): 16
//! bytes, entry `n` the query's sum over that nibble's two levels. A slot's score is the sum
//! of its positions' entries: with AVX2 one `vpshufb` looks up 32 slots' nibbles at once, and
//! two look-ups and three adds do what four multiplies, shifts and masks did per slot.
//!
//! Why: at 100k × 384 the pass streams 9.6 MB a query, from memory (a query comes after
//! other work), and on the multiply kernel it took about 1 ms on two threads; the look-ups
//! keep up with memory (about 0.45 ms on one thread with huge pages, measured in a
//! stand-alone test of both kernels; see docs/src/performance.md).
//!
//! Layout: a block of [`GROUP`] slots is `padded / 4` rows of 32 bytes; row `r`'s byte `j`
//! holds slot `j`'s position `2r` in its low nibble and `2r + 1` in its high one.
//!
//! Precision: entries are whole numbers up to [`MAX_ENTRY`] (one scale for all tables), so
//! a slot's sum is off by at most half a unit a position; the int8 re-rank that follows
//! sees the best few hundred anyway.

/// Slots per block.
pub const GROUP: usize = 32;

/// The largest table entry: two of them sum to a byte.
const MAX_ENTRY: f32 = 127.0;

/// Rows summed in 16 bits before they are widened (a sum of 256 rows of at most 254 fits).
const ROWS_PER_SUM: usize = 256;

/// Bytes of one block for `padded` dimensions.
pub fn block_bytes(padded: usize) -> usize {
    padded * 8
}

/// Writes `positions` (one nibble a byte, [`super::twobit::encode`]'s) as slot `slot`'s in
/// `blocks`, which holds its block; positions past the slice are zero.
pub fn write(blocks: &mut [u8], padded: usize, slot: usize, positions: &[u8]) {
    let base = slot / GROUP * block_bytes(padded) + slot % GROUP;
    let at = |p: usize| positions.get(p).copied().unwrap_or(0) & 0x0f;
    for r in 0..padded / 4 {
        if let Some(b) = blocks.get_mut(base + 32 * r) {
            *b = at(2 * r) | at(2 * r + 1) << 4;
        }
    }
}

/// Slot `slot`'s positions in `blocks` (the inverse of [`write`]).
pub fn read(blocks: &[u8], padded: usize, slot: usize) -> Vec<u8> {
    let base = slot / GROUP * block_bytes(padded) + slot % GROUP;
    (0..padded / 4)
        .flat_map(|r| {
            let b = blocks.get(base + 32 * r).copied().unwrap_or(0);
            [b & 0x0f, b >> 4]
        })
        .collect()
}

/// The query's tables, and how a slot's sum maps back to `Σ q · (c - 1.5)` over its codes.
pub struct Tables {
    /// 16 bytes a position.
    pub bytes: Vec<u8>,
    unit: f32,
    offset: f32,
}

impl Tables {
    /// The tables of `turned`, the query turned as the codes were (`padded` values).
    pub fn new(turned: &[f32]) -> Self {
        let pair = |p: &[f32]| (p[0], p.get(1).copied().unwrap_or(0.0));
        let widest = turned
            .chunks(2)
            .map(|p| {
                let (a, b) = pair(p);
                3.0 * (a.abs() + b.abs())
            })
            .fold(0f32, f32::max);
        let scale = if widest > 0.0 {
            MAX_ENTRY / widest
        } else {
            0.0
        };
        let mut bytes = Vec::with_capacity(turned.len() * 8);
        let mut offset = -1.5 * turned.iter().sum::<f32>();
        for p in turned.chunks(2) {
            let (a, b) = pair(p);
            let low = 3.0 * a.min(0.0) + 3.0 * b.min(0.0);
            offset += low;
            bytes.extend((0..16u8).map(|n| {
                let value = a * f32::from(n & 3) + b * f32::from(n >> 2) - low;
                // Rounded by hand (non-negative): `round` is a libm call on baseline x86-64.
                (value * scale + 0.5).clamp(0.0, MAX_ENTRY) as u8
            }));
        }
        let unit = if scale > 0.0 { 1.0 / scale } else { 0.0 };
        Tables {
            bytes,
            unit,
            offset,
        }
    }

    /// A slot's `Σ q · (c - 1.5)` from the sum of its entries.
    #[inline(always)]
    pub fn estimate(&self, sum: u32) -> f32 {
        sum as f32 * self.unit + self.offset
    }
}

/// The sums of a block's slots' table entries.
pub trait Sums {
    fn block(&self, block: &[u8]) -> [u32; GROUP];

    /// Each slot's score, [`Tables::estimate`] of its sum times its step, and a bit set
    /// (bit `j` for slot `j`) for each score above `floor`.
    fn scores(
        &self,
        sums: &[u32; GROUP],
        tables: &Tables,
        steps: &[f32; GROUP],
        floor: f32,
    ) -> ([f32; GROUP], u32) {
        let mut out = [0f32; GROUP];
        let mut above = 0;
        for (j, ((o, &sum), &step)) in out.iter_mut().zip(sums).zip(steps).enumerate() {
            *o = tables.estimate(sum) * step;
            above |= u32::from(*o > floor) << j;
        }
        (out, above)
    }

    /// A bit set for each of `blooms` that has every bit of `want`.
    fn having(&self, blooms: &[u64; GROUP], want: u64) -> u32 {
        blooms
            .iter()
            .enumerate()
            .fold(0, |bits, (j, &b)| bits | u32::from(b & want == want) << j)
    }
}

/// Work that runs with a [`Sums`] (see [`super::nibbles::Kernel::scan`]); implementations
/// mark `with` `#[inline(always)]`.
pub trait WithSums {
    type Output;
    fn with<S: Sums>(self, sums: &S) -> Self::Output;
}

/// Without SIMD: a look-up a nibble.
pub struct Portable<'a>(pub &'a [u8]);

impl Sums for Portable<'_> {
    fn block(&self, block: &[u8]) -> [u32; GROUP] {
        let mut out = [0u32; GROUP];
        for (tables, row) in self.0.chunks_exact(32).zip(block.chunks_exact(32)) {
            let (low, high) = tables.split_at(16);
            for (o, &b) in out.iter_mut().zip(row) {
                *o += u32::from(low[usize::from(b & 0x0f)]) + u32::from(high[usize::from(b >> 4)]);
            }
        }
        out
    }
}

#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use core::arch::x86_64::__m256i;
    use pulp::x86::V3;

    /// Each row's two tables, each in both 128-bit halves of a register (`vpshufb` looks up
    /// within each half).
    pub struct Sums {
        simd: V3,
        tables: Vec<[__m256i; 2]>,
    }

    impl Sums {
        pub fn new(simd: V3, tables: &[u8]) -> Self {
            let twice = |t: &[u8]| {
                let mut a = [0u8; 32];
                a[..16].copy_from_slice(t);
                a[16..].copy_from_slice(t);
                pulp::cast::<[u8; 32], __m256i>(a)
            };
            let (rows, _) = tables.as_chunks::<32>();
            Sums {
                simd,
                tables: rows
                    .iter()
                    .map(|r| [twice(&r[..16]), twice(&r[16..])])
                    .collect(),
            }
        }
    }

    impl super::Sums for Sums {
        /// Per row: both nibbles looked up and added as bytes (at most 254), then added to
        /// two u16 accumulators, as they are and shifted right by 8 (the odd slots' sums; the
        /// even slots' are the first less 256 times the second, exact modulo 2^16 while a sum
        /// fits: [`super::ROWS_PER_SUM`] rows at a time).
        #[inline(always)]
        fn block(&self, block: &[u8]) -> [u32; super::GROUP] {
            let (avx, avx2) = (self.simd.avx, self.simd.avx2);
            let mask = avx._mm256_set1_epi8(0x0f);
            let (rows, _) = block.as_chunks::<32>();
            let mut out = [0u32; super::GROUP];
            for (tables, rows) in self
                .tables
                .chunks(super::ROWS_PER_SUM)
                .zip(rows.chunks(super::ROWS_PER_SUM))
            {
                let (mut all, mut odd) = (avx._mm256_setzero_si256(), avx._mm256_setzero_si256());
                for (t, &row) in tables.iter().zip(rows) {
                    let v = pulp::cast::<[u8; 32], __m256i>(row);
                    let low = avx2._mm256_and_si256(v, mask);
                    let high = avx2._mm256_and_si256(avx2._mm256_srli_epi16::<4>(v), mask);
                    let s = avx2._mm256_add_epi8(
                        avx2._mm256_shuffle_epi8(t[0], low),
                        avx2._mm256_shuffle_epi8(t[1], high),
                    );
                    all = avx2._mm256_add_epi16(all, s);
                    odd = avx2._mm256_add_epi16(odd, avx2._mm256_srli_epi16::<8>(s));
                }
                let all = pulp::cast::<__m256i, [u16; 16]>(all);
                let odd = pulp::cast::<__m256i, [u16; 16]>(odd);
                for (i, (&a, &o)) in all.iter().zip(&odd).enumerate() {
                    out[2 * i] += u32::from(a.wrapping_sub(o << 8));
                    out[2 * i + 1] += u32::from(o);
                }
            }
            out
        }

        /// Eight slots at a time: converted, multiplied, added, multiplied, compared.
        #[inline(always)]
        fn scores(
            &self,
            sums: &[u32; super::GROUP],
            tables: &super::Tables,
            steps: &[f32; super::GROUP],
            floor: f32,
        ) -> ([f32; super::GROUP], u32) {
            use core::arch::x86_64::{__m256, _CMP_GT_OQ};
            let avx = self.simd.avx;
            let (unit, offset) = (
                avx._mm256_set1_ps(tables.unit),
                avx._mm256_set1_ps(tables.offset),
            );
            let floor = avx._mm256_set1_ps(floor);
            let sums = pulp::cast::<[u32; super::GROUP], [__m256i; 4]>(*sums);
            let steps = pulp::cast::<[f32; super::GROUP], [__m256; 4]>(*steps);
            let mut out = [avx._mm256_setzero_ps(); 4];
            let mut above = 0u32;
            for (i, o) in out.iter_mut().enumerate() {
                // A multiply and an add, not one fused: the same roundings as the plain loop.
                let estimate = avx._mm256_add_ps(
                    avx._mm256_mul_ps(avx._mm256_cvtepi32_ps(sums[i]), unit),
                    offset,
                );
                *o = avx._mm256_mul_ps(estimate, steps[i]);
                let bits = avx._mm256_movemask_ps(avx._mm256_cmp_ps::<_CMP_GT_OQ>(*o, floor));
                above |= (bits as u32) << (8 * i);
            }
            (pulp::cast::<[__m256; 4], [f32; super::GROUP]>(out), above)
        }

        /// Four slots at a time: one AND, one compare.
        #[inline(always)]
        fn having(&self, blooms: &[u64; super::GROUP], want: u64) -> u32 {
            use core::arch::x86_64::__m256d;
            let (avx, avx2) = (self.simd.avx, self.simd.avx2);
            let want = avx._mm256_set1_epi64x(want as i64);
            let blooms = pulp::cast::<[u64; super::GROUP], [__m256i; 8]>(*blooms);
            let mut bits = 0u32;
            for (i, &b) in blooms.iter().enumerate() {
                let all = avx2._mm256_cmpeq_epi64(avx2._mm256_and_si256(b, want), want);
                let four = avx._mm256_movemask_pd(pulp::cast::<__m256i, __m256d>(all));
                bits |= (four as u32) << (4 * i);
            }
            bits
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic byte stream (xorshift).
    fn bytes(n: usize, mut x: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect()
    }

    struct Block<'a>(&'a [u8]);

    impl WithSums for Block<'_> {
        type Output = [u32; GROUP];
        fn with<S: Sums>(self, sums: &S) -> [u32; GROUP] {
            sums.block(self.0)
        }
    }

    /// Each kernel's sums are the plain sums of each slot's entries, at every size, the
    /// largest entries included (past [`ROWS_PER_SUM`] rows too).
    #[test]
    fn every_kernel_sums_each_slot_s_entries() {
        for padded in [128, 384, 1024, 1536, 4096] {
            let positions = padded / 2;
            let block = bytes(block_bytes(padded), padded as u64);
            let random: Vec<u8> = bytes(positions * 16, 7).iter().map(|b| b & 127).collect();
            for t in [random, vec![127u8; positions * 16]] {
                let want: Vec<u32> = (0..GROUP)
                    .map(|slot| {
                        read(&block, padded, slot)
                            .iter()
                            .enumerate()
                            .map(|(p, &n)| u32::from(t[16 * p + usize::from(n)]))
                            .sum()
                    })
                    .collect();
                let kernel = super::super::nibbles::Kernel::detect();
                assert_eq!(kernel.scan(&t, Block(&block)).to_vec(), want, "{padded}");
                assert_eq!(Portable(&t).block(&block).to_vec(), want, "{padded}");
            }
        }
    }

    /// The scores, the bits above a floor and the Bloom test of the detected kernel are the
    /// plain loops'.
    #[test]
    fn every_kernel_scores_and_filters_as_the_plain_loops() {
        struct Scored<'a>(
            &'a [u32; GROUP],
            &'a Tables,
            &'a [f32; GROUP],
            f32,
            &'a [u64; GROUP],
        );
        impl WithSums for Scored<'_> {
            type Output = ([f32; GROUP], u32, u32);
            fn with<S: Sums>(self, sums: &S) -> Self::Output {
                let (scores, above) = sums.scores(self.0, self.1, self.2, self.3);
                (scores, above, sums.having(self.4, 0b1011 << 20))
            }
        }
        let turned: Vec<f32> = bytes(128, 5)
            .iter()
            .map(|&b| f32::from(b) - 100.0)
            .collect();
        let tables = Tables::new(&turned);
        let raw = bytes(GROUP * 16, 21);
        let word =
            |i: usize, k: usize| u64::from_le_bytes(raw[8 * i..8 * i + 8].try_into().unwrap()) >> k;
        let sums: [u32; GROUP] = std::array::from_fn(|i| (word(i, 0) % 20_000) as u32);
        let steps: [f32; GROUP] = std::array::from_fn(|i| (word(i, 8) % 100) as f32 / 50.0);
        let mut blooms: [u64; GROUP] = std::array::from_fn(|i| word(GROUP + i, 0));
        blooms[3] = 0b1011 << 20;
        blooms[4] = 0b0011 << 20;
        let kernel = super::super::nibbles::Kernel::detect();
        for floor in [f32::NEG_INFINITY, -50.0, 0.0, 40.0] {
            let args = || Scored(&sums, &tables, &steps, floor, &blooms);
            let got = kernel.scan(&tables.bytes, args());
            let plain = Portable(&tables.bytes);
            assert_eq!(got, args().with(&plain), "floor {floor}");
            assert_eq!(got.2 >> 3 & 3, 1, "all of the bits wanted, not some");
            for (j, &score) in got.0.iter().enumerate() {
                assert_eq!(score, tables.estimate(sums[j]) * steps[j]);
                assert_eq!(
                    got.1 >> j & 1 == 1,
                    score > floor,
                    "slot {j}, floor {floor}"
                );
            }
        }
    }

    /// A slot's sum, through the tables' scale and offset, is `Σ q · (c - 1.5)` within half
    /// a unit a position.
    #[test]
    fn the_tables_estimate_the_query_times_the_levels() {
        let padded = 128;
        let turned: Vec<f32> = bytes(padded, 11)
            .iter()
            .map(|&b| (f32::from(b) - 127.5) / 300.0)
            .collect();
        let t = Tables::new(&turned);
        assert_eq!(t.bytes.len(), padded * 8);
        assert!(t.bytes.iter().all(|&b| b <= 127) && t.bytes.contains(&127));
        let mut blocks = vec![0; block_bytes(padded)];
        let codes: Vec<Vec<u8>> = (0..GROUP)
            .map(|s| {
                bytes(padded / 2, s as u64 + 3)
                    .iter()
                    .map(|b| b & 15)
                    .collect()
            })
            .collect();
        for (s, c) in codes.iter().enumerate() {
            write(&mut blocks, padded, s, c);
        }
        let sums = Portable(&t.bytes).block(&blocks);
        for (s, c) in codes.iter().enumerate() {
            let level = |d: usize| f32::from((c[d / 2] >> (2 * (d % 2))) & 3) - 1.5;
            let exact: f32 = turned.iter().enumerate().map(|(d, q)| q * level(d)).sum();
            let bound = (padded / 2) as f32 * 0.5 * t.unit + 1e-4;
            let got = t.estimate(sums[s]);
            assert!((got - exact).abs() <= bound, "slot {s}: {got} vs {exact}");
        }
        // A zero query scores every slot zero.
        let zero = Tables::new(&vec![0.0; padded]);
        assert_eq!(zero.estimate(Portable(&zero.bytes).block(&blocks)[5]), 0.0);
    }

    /// Writing a slot's positions leaves every other slot's as it was.
    #[test]
    fn write_and_read_are_inverse_and_touch_one_slot() {
        let padded = 128;
        let mut blocks = bytes(2 * block_bytes(padded), 3);
        let before: Vec<Vec<u8>> = (0..2 * GROUP).map(|s| read(&blocks, padded, s)).collect();
        for slot in [0, 15, 16, 31, 32, 47, 63] {
            let mine: Vec<u8> = bytes(padded / 2, slot as u64 + 9)
                .iter()
                .map(|b| b & 15)
                .collect();
            let mut all = before.clone();
            all[slot] = mine.clone();
            let mut b = blocks.clone();
            write(&mut b, padded, slot, &mine);
            for (other, want) in all.iter().enumerate() {
                assert_eq!(&read(&b, padded, other), want, "slot {slot}, read {other}");
            }
        }
        write(&mut blocks, padded, 0, &[]);
        assert_eq!(read(&blocks, padded, 0), vec![0; padded / 2]);
    }
}

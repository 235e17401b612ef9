//! The mirror's first pass: every vector, turned by a fixed rotation, as 2-bit codes (four
//! levels `(c - 1.5) · Δ`, `Δ` the vector's RMS), and the dot products of an int8 query with
//! them.
//!
//! Why a rotation: it keeps every dot product (it is orthogonal) and spreads a sparse vector
//! (the local embedder sets about 40 of 384 dimensions) over all of them, so that two bits a
//! dimension describe it as well as a dense one. In a simulation over 100k vectors of 384
//! dimensions, the best 500 by these codes held 99.9 % of the exact best 10 on random vectors
//! and 100 % on sparse ones; unrotated, sparse vectors needed 4,000.
//!
//! Layout: dimensions padded to a multiple of [`BLOCK`]; each block of 128 is 32 bytes, byte
//! `j` holding dimensions `j`, `32 + j`, `64 + j` and `96 + j` in its bits 0–1, 2–3, 4–5 and
//! 6–7, so a 32-byte load splits into four runs of 32 consecutive dimensions with shifts and
//! one mask.

/// Dimensions per packed block.
pub const BLOCK: usize = 128;

/// `dim` rounded up to whole blocks.
pub fn padded(dim: usize) -> usize {
    dim.div_ceil(BLOCK) * BLOCK
}

/// A fixed orthogonal map of `padded` dimensions: random signs, a 64-point Walsh–Hadamard
/// transform on each run of 64, a permutation of all, random signs, Walsh–Hadamard again.
/// The same for every process (a fixed seed), so stored codes and queries agree.
pub struct Rotation {
    signs: Vec<f32>,
    perm: Vec<usize>,
}

impl Rotation {
    pub fn new(padded: usize) -> Self {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let signs = (0..2 * padded)
            .map(|_| if next() & 1 == 0 { 1.0 } else { -1.0 })
            .collect();
        let mut perm: Vec<usize> = (0..padded).collect();
        for i in (1..padded).rev() {
            perm.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        Rotation { signs, perm }
    }

    /// `v` (at most `padded` values, the rest zero) turned.
    pub fn apply(&self, v: &[f32]) -> Vec<f32> {
        let p = self.perm.len();
        let mut a = vec![0f32; p];
        let n = v.len().min(p);
        a[..n].copy_from_slice(&v[..n]);
        for (x, s) in a.iter_mut().zip(&self.signs) {
            *x *= s;
        }
        a.chunks_exact_mut(64).for_each(walsh_hadamard);
        let mut b: Vec<f32> = self.perm.iter().map(|&i| a[i]).collect();
        for (x, s) in b.iter_mut().zip(&self.signs[p..]) {
            *x *= s;
        }
        b.chunks_exact_mut(64).for_each(walsh_hadamard);
        b
    }
}

/// The normalised Walsh–Hadamard transform of `a` (a power of two long), in place.
fn walsh_hadamard(a: &mut [f32]) {
    let mut h = 1;
    while h < a.len() {
        for i in (0..a.len()).step_by(2 * h) {
            for j in i..i + h {
                let (x, y) = (a[j], a[j + h]);
                a[j] = x + y;
                a[j + h] = x - y;
            }
        }
        h *= 2;
    }
    let k = 1.0 / (a.len() as f32).sqrt();
    a.iter_mut().for_each(|x| *x *= k);
}

/// Appends the codes of `v` (`padded(v.len())` dimensions: `padded / 4` bytes) to `out`;
/// returns `Δ`, the step that maps a code `c` back to `(c - 1.5) · Δ`.
pub fn encode(v: &[f32], out: &mut Vec<u8>) -> f32 {
    let p = padded(v.len());
    let rms = (v.iter().map(|x| x * x).sum::<f32>() / v.len().max(1) as f32).sqrt();
    let step = if rms > 0.0 { rms } else { 1.0 };
    let start = out.len();
    out.resize(start + p / 4, 0);
    for (i, &x) in v.iter().enumerate() {
        let c = (x / step + 2.0).floor().clamp(0.0, 3.0) as u8;
        let (block, within) = (i / BLOCK, i % BLOCK);
        out[start + block * 32 + within % 32] |= c << (2 * (within / 32));
    }
    step
}

/// The code of dimension `d` in `packed` (the inverse of [`encode`]'s packing).
#[cfg(test)]
pub fn code_at(packed: &[u8], d: usize) -> u8 {
    let (block, within) = (d / BLOCK, d % BLOCK);
    (packed[block * 32 + within % 32] >> (2 * (within / 32))) & 3
}

/// `Σ query[i] · code[i]` over packed codes, the query fixed.
pub trait Dot {
    fn dot(&self, packed: &[u8]) -> i32;

    /// [`Dot::dot`] of four vectors at once.
    fn dot4(&self, packed: [&[u8]; 4]) -> [i32; 4] {
        packed.map(|p| self.dot(p))
    }

    /// Asks for `bytes` to be brought into the cache (where the kernel can).
    fn prefetch(&self, _bytes: &[u8]) {}
}

/// Work that runs with a [`Dot`] (see [`super::nibbles::Kernel::run2`]); implementations
/// mark `with` `#[inline(always)]`.
pub trait WithDot {
    type Output;
    fn with<D: Dot>(self, dot: &D) -> Self::Output;
}

/// Without SIMD: the query widened to i32.
pub struct Portable(pub Vec<i32>);

impl Dot for Portable {
    fn dot(&self, packed: &[u8]) -> i32 {
        let mut total = 0;
        for (q, bytes) in self.0.chunks_exact(BLOCK).zip(packed.chunks_exact(32)) {
            for (j, &b) in bytes.iter().enumerate() {
                for k in 0..4 {
                    total += q[32 * k + j] * i32::from((b >> (2 * k)) & 3);
                }
            }
        }
        total
    }
}

#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use core::arch::x86_64::__m256i;
    use pulp::x86::V3;

    /// The query as 256-bit registers, four per block (its runs of 32).
    pub struct Dot {
        simd: V3,
        query: Vec<[__m256i; 4]>,
    }

    impl Dot {
        pub fn new(simd: V3, query: &[i8]) -> Self {
            let run = |b: &[i8], k: usize| {
                super::super::nibbles::avx2::register(b.get(32 * k..).unwrap_or(&[]))
            };
            Dot {
                simd,
                query: query
                    .chunks(super::BLOCK)
                    .map(|b| [run(b, 0), run(b, 1), run(b, 2), run(b, 3)])
                    .collect(),
            }
        }

        /// Eight i32 lanes summing to the dot product: per block one load, four runs split
        /// by shifts and a mask, `vpmaddubsw` (code × query byte, pairs summed to i16: at
        /// most 2 · 3 · 127 each, four runs 3,048), widened to i32 with `vpmaddwd`.
        #[inline(always)]
        fn lanes(&self, packed: &[u8]) -> __m256i {
            let (avx, avx2) = (self.simd.avx, self.simd.avx2);
            let mask = avx._mm256_set1_epi8(3);
            let ones = avx._mm256_set1_epi16(1);
            let mut wide = avx._mm256_setzero_si256();
            let (blocks, _) = packed.as_chunks::<32>();
            for (q, &b) in self.query.iter().zip(blocks) {
                let v = pulp::cast::<[u8; 32], __m256i>(b);
                let c0 = avx2._mm256_and_si256(v, mask);
                let c1 = avx2._mm256_and_si256(avx2._mm256_srli_epi16::<2>(v), mask);
                let c2 = avx2._mm256_and_si256(avx2._mm256_srli_epi16::<4>(v), mask);
                let c3 = avx2._mm256_and_si256(avx2._mm256_srli_epi16::<6>(v), mask);
                let sum = avx2._mm256_add_epi16(
                    avx2._mm256_add_epi16(
                        avx2._mm256_maddubs_epi16(c0, q[0]),
                        avx2._mm256_maddubs_epi16(c1, q[1]),
                    ),
                    avx2._mm256_add_epi16(
                        avx2._mm256_maddubs_epi16(c2, q[2]),
                        avx2._mm256_maddubs_epi16(c3, q[3]),
                    ),
                );
                wide = avx2._mm256_add_epi32(wide, avx2._mm256_madd_epi16(sum, ones));
            }
            wide
        }
    }

    impl super::Dot for Dot {
        #[inline(always)]
        fn dot(&self, packed: &[u8]) -> i32 {
            self.dot4([packed; 4])[0]
        }

        /// Four vectors' lanes summed by three horizontal adds and one add. (No closures:
        /// a closure is compiled without the kernel's instruction set.)
        #[inline(always)]
        fn dot4(&self, packed: [&[u8]; 4]) -> [i32; 4] {
            let (a, b) = (self.lanes(packed[0]), self.lanes(packed[1]));
            let (c, d) = (self.lanes(packed[2]), self.lanes(packed[3]));
            let (avx, avx2) = (self.simd.avx, self.simd.avx2);
            let ab = avx2._mm256_hadd_epi32(a, b);
            let cd = avx2._mm256_hadd_epi32(c, d);
            let all = avx2._mm256_hadd_epi32(ab, cd);
            let sums = self.simd.sse2._mm_add_epi32(
                avx._mm256_castsi256_si128(all),
                avx2._mm256_extracti128_si256::<1>(all),
            );
            pulp::cast::<_, [i32; 4]>(sums)
        }

        #[inline(always)]
        fn prefetch(&self, bytes: &[u8]) {
            super::super::nibbles::prefetch(self.simd, bytes);
        }
    }
}

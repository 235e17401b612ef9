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
    #[cfg(test)]
    pub fn apply(&self, v: &[f32]) -> Vec<f32> {
        self.apply_scaled(v, 1.0)
    }

    /// [`Rotation::apply`] of `v` times `k`.
    pub fn apply_scaled(&self, v: &[f32], k: f32) -> Vec<f32> {
        let p = self.perm.len();
        let (first, second) = self.signs.split_at(p);
        let mut a = vec![0f32; p];
        for ((x, &y), s) in a.iter_mut().zip(v).zip(first) {
            *x = y * k * s;
        }
        hadamard_runs(&mut a);
        let mut b: Vec<f32> = self
            .perm
            .iter()
            .map(|&i| a.get(i).copied().unwrap_or(0.0))
            .collect();
        for (x, s) in b.iter_mut().zip(second) {
            *x *= s;
        }
        hadamard_runs(&mut b);
        b
    }
}

/// [`walsh_hadamard`] of each run of 64 values of `a`, with AVX2 where the machine has it: the
/// same sums, each rounded once, so the results are equal bit for bit (in the size-optimised
/// release build the plain loops took 2.4 µs of the 3 a vector took to turn; AVX2 about 0.2).
pub fn hadamard_runs(a: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V3::try_new() {
        return simd.vectorize(avx2::Hadamard(simd, a));
    }
    a.chunks_exact_mut(64).for_each(walsh_hadamard);
}

/// The normalised Walsh–Hadamard transform of `a` (a power of two long), in place.
pub fn walsh_hadamard(a: &mut [f32]) {
    let mut h = 1;
    while h < a.len() {
        for pair in a.chunks_exact_mut(2 * h) {
            let (x, y) = pair.split_at_mut(h);
            for (x, y) in x.iter_mut().zip(y.iter_mut()) {
                (*x, *y) = (*x + *y, *x - *y);
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
    // `as u8` truncates, which is `floor` on values clamped to 0..=3 (and, unlike `floor`,
    // is no call into libm on baseline x86-64: a fifth of loading the mirror was those).
    let code = |i: usize| {
        v.get(i)
            .map_or(0, |&x| (x / step + 2.0).clamp(0.0, 3.0) as u8)
    };
    out.reserve(p / 4);
    for block in 0..p / BLOCK {
        let d = block * BLOCK;
        out.extend(
            (d..d + 32)
                .map(|j| code(j) | code(j + 32) << 2 | code(j + 64) << 4 | code(j + 96) << 6),
        );
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
    use core::arch::x86_64::{__m256, __m256i};
    use pulp::x86::V3;

    /// The Walsh–Hadamard transform of each run of 64 values, as eight registers of eight:
    /// the steps between lanes of one register by a permute and a multiply-add with ±1
    /// (`x · ±1 + y` is `x ± y` exactly), the steps between registers by adds.
    pub struct Hadamard<'a>(pub V3, pub &'a mut [f32]);

    impl pulp::NullaryFnOnce for Hadamard<'_> {
        type Output = ();

        #[inline(always)]
        fn call(self) {
            let Hadamard(simd, values) = self;
            let (avx, fma) = (simd.avx, simd.fma);
            let sign = |s: [f32; 8]| pulp::cast::<[f32; 8], __m256>(s);
            let s1 = sign([1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0]);
            let s2 = sign([1.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0, -1.0]);
            let s4 = sign([1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0]);
            let eighth = avx._mm256_set1_ps(0.125);
            let (runs, _) = values.as_chunks_mut::<64>();
            for run in runs {
                let mut r = pulp::cast::<[f32; 64], [__m256; 8]>(*run);
                for x in r.iter_mut() {
                    *x = fma._mm256_fmadd_ps(*x, s1, avx._mm256_permute_ps::<0b1011_0001>(*x));
                    *x = fma._mm256_fmadd_ps(*x, s2, avx._mm256_permute_ps::<0b0100_1110>(*x));
                    *x = fma._mm256_fmadd_ps(*x, s4, avx._mm256_permute2f128_ps::<1>(*x, *x));
                }
                for h in [1, 2, 4] {
                    for i in (0..8).filter(|i| i & h == 0) {
                        let (x, y) = (r[i], r[i + h]);
                        r[i] = avx._mm256_add_ps(x, y);
                        r[i + h] = avx._mm256_sub_ps(x, y);
                    }
                }
                for x in r.iter_mut() {
                    *x = avx._mm256_mul_ps(*x, eighth);
                }
                *run = pulp::cast::<[__m256; 8], [f32; 64]>(r);
            }
        }
    }

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

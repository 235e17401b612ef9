//! The codes of the mirror's first pass: every vector, turned by a fixed rotation, as 2-bit
//! codes (four levels `(c - 1.5) · Δ`, `Δ` the vector's RMS); [`super::fastscan`] lays them
//! out and scores them.
//!
//! Why a rotation: it keeps every dot product (it is orthogonal) and spreads a sparse vector
//! (the local embedder sets about 40 of 384 dimensions) over all of them, so that two bits a
//! dimension describe it as well as a dense one. In a simulation over 100k vectors of 384
//! dimensions, the best 500 by these codes held 99.9 % of the exact best 10 on random vectors
//! and 100 % on sparse ones; unrotated, sparse vectors needed 4,000.

/// Dimensions are padded to a multiple of this (also of the nibble planes' block).
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

/// Appends the codes of `v` to `out` as `padded(v.len()) / 2` positions, one a byte: position
/// `p` holds dimension `2p`'s code in bits 0–1 and `2p + 1`'s in bits 2–3 (the nibbles that
/// [`super::fastscan`] lays out and looks up); returns `Δ`, the step that maps a code `c` back
/// to `(c - 1.5) · Δ`.
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
    out.reserve(p / 2);
    out.extend((0..p / 2).map(|k| code(2 * k) | code(2 * k + 1) << 2));
    step
}

/// The code of dimension `d` in `positions` (the inverse of [`encode`]'s packing).
#[cfg(test)]
pub fn code_at(positions: &[u8], d: usize) -> u8 {
    (positions[d / 2] >> (2 * (d % 2))) & 3
}

#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use core::arch::x86_64::__m256;
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
}

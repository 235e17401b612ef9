//! Dot products of an int8 query with 4-bit codes packed two to a byte: the kernel of the
//! mirror's re-rank (the high and low nibbles of the best few hundred of its first pass), and
//! the choice of kernel for both passes ([`Kernel`]; the first pass's look-ups are
//! [`super::fastscan`]'s).
//!
//! Layout: dimensions are padded to a multiple of [`BLOCK`]; each block of 64 dimensions is 32
//! bytes, byte `j` holding dimension `j` in its low nibble and dimension `32 + j` in its high
//! nibble, so a 32-byte load splits into two runs of 32 consecutive dimensions with one shift
//! and two masks.
//!
//! Speed: with AVX2 (x86-64-v3, chosen at run time through `pulp`, which wraps the intrinsics
//! safely: the workspace forbids unsafe code), one `vpmaddubsw` multiplies 32 nibbles by 32
//! query bytes; otherwise SSE2 (`safe_arch`, baseline x86-64) or plain Rust.

/// Dimensions per packed block.
pub const BLOCK: usize = 64;

/// `dim` rounded up to whole blocks.
#[cfg(test)]
pub fn padded(dim: usize) -> usize {
    dim.div_ceil(BLOCK) * BLOCK
}

/// Packs the int8 `code` (at most `padded_dim` values, the rest zero) offset by 128 as two
/// planes of `padded_dim / 2` bytes each: its high nibbles onto `high`, its low onto `low`.
pub fn pack_planes(code: &[i8], padded_dim: usize, high: &mut Vec<u8>, low: &mut Vec<u8>) {
    let mut whole;
    let code = if code.len() == padded_dim {
        code
    } else {
        whole = code.get(..padded_dim).unwrap_or(code).to_vec();
        whole.resize(padded_dim, 0);
        &whole
    };
    high.reserve(padded_dim / 2);
    low.reserve(padded_dim / 2);
    let offset = |x: i8| (x as u8) ^ 0x80;
    for block in code.chunks_exact(BLOCK) {
        let (a, b) = block.split_at(32);
        let pairs = || a.iter().zip(b).map(|(&x, &y)| (offset(x), offset(y)));
        high.extend(pairs().map(|(x, y)| x >> 4 | (y >> 4) << 4));
        low.extend(pairs().map(|(x, y)| x & 15 | (y & 15) << 4));
    }
}

/// The nibble of dimension `d` in `packed` (the inverse of [`pack`]).
#[cfg(test)]
pub fn unpack(packed: &[u8], d: usize) -> u8 {
    let (block, within) = (d / BLOCK, d % BLOCK);
    let b = packed.get(block * 32 + within % 32).copied().unwrap_or(0);
    if within < 32 {
        b & 15
    } else {
        b >> 4
    }
}

/// How the dot products run on this machine, found once.
#[derive(Clone, Copy)]
pub enum Kernel {
    #[cfg(target_arch = "x86_64")]
    Avx2(pulp::x86::V3),
    Portable,
}

impl Kernel {
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = pulp::x86::V3::try_new() {
            return Kernel::Avx2(simd);
        }
        Kernel::Portable
    }

    /// Runs `op` with this kernel's instruction set enabled, handing it the dot product
    /// with `query` (`padded` int8 values). `op.with` and the dot product are inlined into
    /// the function compiled for that set, so the whole loop is.
    pub fn run<W: WithDot>(self, query: &[i8], op: W) -> W::Output {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2(simd) => simd.vectorize(Inlined(avx2::Dot::new(simd, query), op)),
            Kernel::Portable => op.with(&Portable(query.iter().map(|&x| i16::from(x)).collect())),
        }
    }

    /// Runs `op` with this kernel's instruction set enabled, handing it the first pass's
    /// look-ups in `tables` ([`super::fastscan`]), inlined as in [`Kernel::run`].
    pub fn scan<W: super::fastscan::WithSums>(self, tables: &[u8], op: W) -> W::Output {
        use super::fastscan;
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2(simd) => {
                simd.vectorize(Inlined(fastscan::avx2::Sums::new(simd, tables), op))
            }
            Kernel::Portable => op.with(&fastscan::Portable(tables)),
        }
    }
}

/// A kernel and the work that runs with it, as one call marked `#[inline(always)]`: pulp
/// compiles it into a function with the kernel's instruction set. (A closure here was left
/// out of line at `opt-level = "s"` once the first pass grew, and every intrinsic in it became
/// a call: ten times slower.)
#[cfg(target_arch = "x86_64")]
struct Inlined<K, W>(K, W);

#[cfg(target_arch = "x86_64")]
impl<W: WithDot> pulp::NullaryFnOnce for Inlined<avx2::Dot, W> {
    type Output = W::Output;

    #[inline(always)]
    fn call(self) -> W::Output {
        self.1.with(&self.0)
    }
}

#[cfg(target_arch = "x86_64")]
impl<W: super::fastscan::WithSums> pulp::NullaryFnOnce for Inlined<super::fastscan::avx2::Sums, W> {
    type Output = W::Output;

    #[inline(always)]
    fn call(self) -> W::Output {
        self.1.with(&self.0)
    }
}

/// `Σ query[i] · nibble[i]` over one packed vector, the query fixed.
pub trait Dot {
    fn dot(&self, packed: &[u8]) -> i32;

    /// Asks for `bytes` to be brought into the cache (where the kernel can).
    fn prefetch(&self, _bytes: &[u8]) {}
}

/// Asks for every cache line of `bytes` to be brought into the cache (`prefetcht0`): a scan
/// that computes as it reads leaves the hardware prefetcher behind, and a re-rank reads rows
/// at random.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn prefetch(simd: pulp::x86::V3, bytes: &[u8]) {
    use core::arch::x86_64::_MM_HINT_T0;
    for line in bytes.chunks(64) {
        simd.sse._mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast());
    }
}

/// Work that runs with a [`Dot`] (see [`Kernel::run`]); implementations mark `with`
/// `#[inline(always)]`.
pub trait WithDot {
    type Output;
    fn with<D: Dot>(self, dot: &D) -> Self::Output;
}

/// The portable kernel: the query widened to i16.
struct Portable(Vec<i16>);

impl Dot for Portable {
    fn dot(&self, packed: &[u8]) -> i32 {
        portable_dot(&self.0, packed)
    }
}

/// `Σ query[i] · nibble[i]` without SIMD beyond the baseline.
pub fn portable_dot(query: &[i16], packed: &[u8]) -> i32 {
    let mut total = 0;
    for (q, p) in query.chunks_exact(BLOCK).zip(packed.chunks_exact(32)) {
        total += half_block(&q[..32], p, false) + half_block(&q[32..], p, true);
    }
    total
}

/// One run of 32 dimensions: the low (`high == false`) or high nibbles of `bytes`.
#[cfg(target_arch = "x86_64")]
fn half_block(query: &[i16], bytes: &[u8], high: bool) -> i32 {
    use safe_arch::{
        add_i32_m128i, bitand_m128i, m128i, mul_i16_horizontal_add_m128i, set_splat_i8_m128i,
        shr_imm_u16_m128i, unpack_high_i8_m128i, unpack_low_i8_m128i,
    };
    let (zero, mask) = (m128i::default(), set_splat_i8_m128i(15));
    let mut acc = m128i::default();
    for (q, c) in query.chunks_exact(16).zip(bytes.chunks_exact(16)) {
        let (Ok(c), Ok(lo), Ok(hi)) = (
            <[u8; 16]>::try_from(c),
            <[i16; 8]>::try_from(&q[..8]),
            <[i16; 8]>::try_from(&q[8..]),
        ) else {
            continue;
        };
        let mut c = m128i::from(c);
        if high {
            c = shr_imm_u16_m128i::<4>(c);
        }
        let c = bitand_m128i(c, mask);
        let low = mul_i16_horizontal_add_m128i(unpack_low_i8_m128i(c, zero), m128i::from(lo));
        let high = mul_i16_horizontal_add_m128i(unpack_high_i8_m128i(c, zero), m128i::from(hi));
        acc = add_i32_m128i(acc, add_i32_m128i(low, high));
    }
    let lanes: [i32; 4] = acc.into();
    lanes.iter().sum()
}

#[cfg(not(target_arch = "x86_64"))]
fn half_block(query: &[i16], bytes: &[u8], high: bool) -> i32 {
    query
        .iter()
        .zip(bytes)
        .map(|(&q, &b)| i32::from(q) * i32::from(if high { b >> 4 } else { b & 15 }))
        .sum()
}

#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use core::arch::x86_64::__m256i;
    use pulp::x86::V3;

    /// The query as 256-bit registers, two per block (its low and high runs).
    pub struct Dot {
        simd: V3,
        query: Vec<[__m256i; 2]>,
    }

    /// Up to 32 query bytes as one register, zero-padded.
    fn register(s: &[i8]) -> __m256i {
        let mut a = [0i8; 32];
        a.iter_mut().zip(s).for_each(|(d, &x)| *d = x);
        pulp::cast::<[i8; 32], __m256i>(a)
    }

    impl Dot {
        pub fn new(simd: V3, query: &[i8]) -> Self {
            let reg = register;
            Dot {
                simd,
                query: query
                    .chunks(super::BLOCK)
                    .map(|b| [reg(&b[..b.len().min(32)]), reg(b.get(32..).unwrap_or(&[]))])
                    .collect(),
            }
        }
    }

    impl super::Dot for Dot {
        #[inline(always)]
        fn dot(&self, packed: &[u8]) -> i32 {
            let simd = self.simd;
            let wide = lanes(simd, &self.query, packed);
            let four = simd.sse2._mm_add_epi32(
                simd.avx._mm256_castsi256_si128(wide),
                simd.avx2._mm256_extracti128_si256::<1>(wide),
            );
            let sse2 = simd.sse2;
            let two = sse2._mm_add_epi32(four, sse2._mm_shuffle_epi32::<0b01_00_11_10>(four));
            let one = sse2._mm_add_epi32(two, sse2._mm_shuffle_epi32::<0b10_11_00_01>(two));
            sse2._mm_cvtsi128_si32(one)
        }

        #[inline(always)]
        fn prefetch(&self, bytes: &[u8]) {
            super::prefetch(self.simd, bytes);
        }
    }

    /// `Σ query[i] · nibble[i]` in eight i32 lanes: per block one load, the two runs split by
    /// a shift and masks, `vpmaddubsw` (nibble × query byte, pairs summed to i16: at most
    /// 2 · 15 · 127 each), each block's sums widened to i32 with `vpmaddwd`.
    #[inline(always)]
    fn lanes(simd: V3, query: &[[__m256i; 2]], packed: &[u8]) -> __m256i {
        let (avx, avx2) = (simd.avx, simd.avx2);
        let mask = avx._mm256_set1_epi8(15);
        let ones = avx._mm256_set1_epi16(1);
        let mut wide = avx._mm256_setzero_si256();
        let (blocks, _) = packed.as_chunks::<32>();
        for (q, &b) in query.iter().zip(blocks) {
            let v = pulp::cast::<[u8; 32], __m256i>(b);
            let low = avx2._mm256_and_si256(v, mask);
            let high = avx2._mm256_and_si256(avx2._mm256_srli_epi16::<4>(v), mask);
            let sum = avx2._mm256_add_epi16(
                avx2._mm256_maddubs_epi16(low, q[0]),
                avx2._mm256_maddubs_epi16(high, q[1]),
            );
            wide = avx2._mm256_add_epi32(wide, avx2._mm256_madd_epi16(sum, ones));
        }
        wide
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(query: &[i8], packed: &[u8]) -> i32 {
        query
            .iter()
            .enumerate()
            .map(|(d, &q)| i32::from(q) * i32::from(unpack(packed, d)))
            .sum()
    }

    /// The dot product with one packed vector.
    struct One<'a>(&'a [u8]);

    impl WithDot for One<'_> {
        type Output = i32;
        fn with<D: Dot>(self, dot: &D) -> i32 {
            dot.dot(self.0)
        }
    }

    #[test]
    fn every_kernel_is_the_plain_sum_at_every_length() {
        for dim in [1, 31, 32, 63, 64, 65, 128, 384, 385, 1024] {
            let p = padded(dim);
            // Extremes included: -127..=127 against 0..=15, every nibble position.
            let mut query: Vec<i8> = (0..dim)
                .map(|i| ((i * 37 % 255) as i16 - 127) as i8)
                .collect();
            query.resize(p, 0);
            query[0] = -127;
            // Offset by 128, every high and every low nibble.
            let code: Vec<i8> = (0..dim)
                .map(|i| ((i * 7 % 256) as i16 - 128) as i8)
                .collect();
            let (mut high, mut low) = (Vec::new(), Vec::new());
            pack_planes(&code, p, &mut high, &mut low);
            assert_eq!((high.len(), low.len()), (p / 2, p / 2));
            for d in 0..p {
                let offset = if d < dim { (d * 7 % 256) as u8 } else { 128 };
                assert_eq!(unpack(&high, d), offset >> 4, "high {d} of {dim}");
                assert_eq!(unpack(&low, d), offset & 15, "low {d} of {dim}");
            }
            for packed in [&high, &low] {
                let want = plain(&query, packed);
                let wide: Vec<i16> = query.iter().map(|&x| i16::from(x)).collect();
                assert_eq!(portable_dot(&wide, packed), want, "portable, {dim}");
                let got = Kernel::detect().run(&query, One(packed));
                assert_eq!(got, want, "detected kernel, {dim}");
            }
            // The largest sums: every nibble 15 against every query byte at ±127.
            let full = vec![0xffu8; p / 2];
            for sign in [127i8, -127] {
                let q = vec![sign; p];
                let want = i32::from(sign) * 15 * p as i32;
                assert_eq!(Kernel::detect().run(&q, One(&full)), want);
                let wide: Vec<i16> = q.iter().map(|&x| i16::from(x)).collect();
                assert_eq!(portable_dot(&wide, &full), want);
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn this_machine_runs_the_avx2_kernel_when_it_has_avx2() {
        let detected = matches!(Kernel::detect(), Kernel::Avx2(_));
        assert_eq!(detected, std::is_x86_feature_detected!("avx2"));
    }
}

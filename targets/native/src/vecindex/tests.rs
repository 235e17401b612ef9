//! The mirror: its two planes, the first pass against a full int8 scan, the split across
//! threads and kernels.

use super::*;

/// Each slot's int8 estimate as the re-rank computes it, against the plain sum over the
/// int8 codes: the two nibble planes rebuild every code exactly.
#[test]
fn the_two_planes_are_the_int8_code() {
    let mut m = Mirror::default();
    let data = random_vectors(50, 130);
    for (i, v) in data.iter().enumerate() {
        m.upsert(&format!("v{i}"), i as i64, v, &BTreeMap::new());
    }
    let query = &random_vectors(51, 130)[50];
    let mut q = quantize(&m.turn(query)).0;
    let plain: Vec<i32> = data
        .iter()
        .map(|v| {
            let code = quantize(&m.turn(v)).0;
            q.iter()
                .zip(&code)
                .map(|(&a, &b)| i32::from(a) * i32::from(b))
                .sum()
        })
        .collect();
    q.resize(m.padded, 0);
    let q_sum = q.iter().map(|&x| i32::from(x)).sum();
    let slots = (0..data.len()).map(|s| (0.0, s)).collect();
    let scored = Kernel::detect().run(
        &q,
        Rerank {
            mirror: &m,
            slots,
            q_sum,
        },
    );
    for (score, s) in scored {
        assert_eq!(score, plain[s] as f32 * m.scales[s], "slot {s}");
    }
}

#[test]
fn quantized_dot_tracks_cosine() {
    let a = [0.3f32, -0.2, 0.9, 0.1];
    let b = [0.25f32, -0.1, 0.8, 0.3];
    let (qa, sa) = quantize(&a);
    let (qb, sb) = quantize(&b);
    let dot: i32 = qa
        .iter()
        .zip(&qb)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum();
    let approx = dot as f32 * sa * sb;
    let exact = clawless_platform::vectors::cosine(&a, &b);
    assert!((approx - exact).abs() < 0.02, "{approx} vs {exact}");
}

/// The first pass (2-bit estimates) keeps what a full int8 scan would rank best: on random
/// vectors, the hard case, and on sparse ones, the scan's 20 hold the int8 best 10 for every
/// query (what the exact re-rank needs).
#[test]
fn the_first_pass_keeps_the_int8_best() {
    for sparse in [false, true] {
        the_first_pass_keeps_the_int8_best_of(sparse);
    }
}

fn the_first_pass_keeps_the_int8_best_of(sparse: bool) {
    let (n, dim) = (20_000, 384);
    let data = if sparse {
        sparse_vectors(n + 10, dim)
    } else {
        random_vectors(n + 10, dim)
    };
    let (data, queries) = data.split_at(n);
    let mut m = Mirror::default();
    for (i, v) in data.iter().enumerate() {
        m.upsert(&format!("v{i}"), i as i64, v, &BTreeMap::new());
    }
    let codes: Vec<(Vec<i8>, f32)> = data.iter().map(|v| quantize(&m.turn(v))).collect();
    let (mut found, mut asked) = (0, 0);
    for query in queries {
        let q = quantize(&m.turn(query)).0;
        let mut full: Vec<(f32, usize)> = codes
            .iter()
            .enumerate()
            .map(|(s, (c, scale))| {
                let d: i32 = q
                    .iter()
                    .zip(c)
                    .map(|(&a, &b)| i32::from(a) * i32::from(b))
                    .sum();
                (d as f32 * scale, s)
            })
            .collect();
        keep_best(&mut full, 10);
        let got = m.scan_on(query, 20, &BTreeMap::new(), 1);
        asked += 10;
        found += full
            .iter()
            .filter(|(_, s)| got.contains(&format!("v{s}")))
            .count();
    }
    assert_eq!(
        found, asked,
        "the int8 best 10 the scan lost (sparse: {sparse})"
    );
}

/// Vectors as the local embedder makes them: about 40 of `dim` dimensions set, positive.
fn sparse_vectors(n: usize, dim: usize) -> Vec<Vec<f32>> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|_| {
            let mut v = vec![0f32; dim];
            for _ in 0..40 {
                let i = (next() % dim as u64) as usize;
                v[i] += (next() >> 40) as f32 / (1u64 << 24) as f32 + 0.1;
            }
            v
        })
        .collect()
}

/// The rotation keeps dot products, and a vector's codes, laid out in a block and looked up
/// by the detected kernel, score `Σ q · (c - 1.5)` within the tables' rounding, at every
/// length.
#[test]
fn the_rotation_keeps_dot_products_and_the_looked_up_codes_score_right() {
    for dim in [1, 3, 64, 96, 127, 128, 130, 384, 1024, 1536] {
        let p = twobit::padded(dim);
        let r = Rotation::new(p);
        let vs = random_vectors(2, dim);
        let (a, b) = (r.apply(&vs[0]), r.apply(&vs[1]));
        let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f32>();
        let (before, after) = (dot(&vs[0], &vs[1]), dot(&a, &b));
        assert!((before - after).abs() < 1e-4, "{dim}: {before} vs {after}");
        let mut positions = Vec::new();
        let step = twobit::encode(&a, &mut positions);
        assert!(step > 0.0);
        assert_eq!(positions.len(), p / 2);
        let codes: Vec<u8> = (0..p).map(|d| twobit::code_at(&positions, d)).collect();
        assert!(
            dim < 64 || codes.contains(&0) && codes.contains(&3),
            "{dim}: every level"
        );
        let plain: f32 = b
            .iter()
            .zip(&codes)
            .map(|(q, &c)| q * (f32::from(c) - 1.5))
            .sum();
        let mut blocks = vec![0; fastscan::block_bytes(p)];
        fastscan::write(&mut blocks, p, 7, &positions);
        let tables = fastscan::Tables::new(&b);
        let sums = Kernel::detect().scan(&tables.bytes, Block(&blocks));
        let widest = b.chunks(2).map(|x| 3.0 * (x[0].abs() + x[1].abs()));
        let unit = widest.fold(0f32, f32::max) / 127.0;
        let got = tables.estimate(sums[7]);
        let bound = (p / 2) as f32 * 0.5 * unit + 1e-4;
        assert!((got - plain).abs() <= bound, "{dim}: {got} vs {plain}");
    }
}

/// The Walsh–Hadamard runs of the detected kernel are the plain loops' bit for bit, and a
/// second transform gives the input back (it is its own inverse).
#[test]
fn the_hadamard_kernel_is_the_plain_transform() {
    let input: Vec<f32> = random_vectors(1, 384 * 3).concat();
    let mut fast = input.clone();
    twobit::hadamard_runs(&mut fast);
    let mut plain = input.clone();
    plain.chunks_exact_mut(64).for_each(twobit::walsh_hadamard);
    assert_eq!(fast, plain);
    assert_ne!(fast, input);
    twobit::hadamard_runs(&mut fast);
    for (a, b) in fast.iter().zip(&input) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
}

/// The sums of one block's slots.
struct Block<'a>(&'a [u8]);

impl fastscan::WithSums for Block<'_> {
    type Output = [u32; fastscan::GROUP];
    fn with<S: fastscan::Sums>(self, sums: &S) -> Self::Output {
        sums.block(self.0)
    }
}

#[test]
fn upsert_remove_and_filter() {
    let mut m = Mirror::default();
    let meta = |s: &str| BTreeMap::from([("scope".to_owned(), s.to_owned())]);
    m.upsert("a", 1, &[1.0, 0.0, 0.0], &meta("x"));
    m.upsert("b", 2, &[0.0, 1.0, 0.0], &meta("y"));
    m.upsert("c", 3, &[0.9, 0.1, 0.0], &meta("x"));
    assert_eq!(m.scan(&[1.0, 0.0, 0.0], 1, &BTreeMap::new()), ["a"]);
    assert_eq!(m.scan(&[0.0, 1.0, 0.0], 5, &meta("x")).len(), 2, "filter");
    m.upsert("a", 1, &[0.0, 0.0, 1.0], &meta("x"));
    assert_eq!(
        m.scan(&[0.0, 0.0, 1.0], 1, &BTreeMap::new()),
        ["a"],
        "replaced"
    );
    m.remove("a");
    m.remove("missing");
    assert_eq!(m.len(), 2);
    assert_eq!(m.scan(&[1.0, 0.0, 0.0], 1, &BTreeMap::new()), ["c"]);
    // Rows are read back by rowid: each id keeps its own as slots move.
    assert_eq!(m.scan_rowids(&[1.0, 0.0, 0.0], 1, &BTreeMap::new()), [3]);
    assert_eq!(m.scan_rowids(&[0.0, 1.0, 0.0], 1, &BTreeMap::new()), [2]);
    m.remove("b");
    m.remove("c");
    assert!(m.is_empty());
    assert_eq!(m.dim, 0, "an empty store takes any dimension again");
}

/// Removals move the last slot's codes into the gap, in its block of 32, and give back a
/// block once it is empty: every remaining slot's codes are its vector's.
#[test]
fn removals_keep_every_slot_s_codes_in_its_block() {
    let data = random_vectors(100, 130);
    let mut m = Mirror::default();
    for (i, v) in data.iter().enumerate() {
        m.upsert(&format!("v{i}"), i as i64, v, &BTreeMap::new());
    }
    let block = fastscan::block_bytes(m.padded);
    assert_eq!(m.codes.len(), 4 * block);
    for i in (0..100).filter(|i| i % 3 == 0 || *i > 90) {
        m.remove(&format!("v{i}"));
    }
    assert_eq!(m.len(), 60);
    assert_eq!(m.codes.len(), 2 * block, "two blocks given back");
    for (i, v) in data.iter().enumerate() {
        let Some(&s) = m.slot.get(&format!("v{i}")) else {
            continue;
        };
        let mut want = Vec::new();
        let step = twobit::encode(&m.turn(v), &mut want);
        assert_eq!(
            fastscan::read(m.codes.bytes(), m.padded, s),
            want,
            "v{i} in slot {s}"
        );
        assert_eq!(m.steps[s], step);
    }
    for s in m.len()..64 {
        assert!(fastscan::read(m.codes.bytes(), m.padded, s)
            .iter()
            .all(|&n| n == 0));
    }
    for i in 0..100 {
        m.remove(&format!("v{i}"));
    }
    assert_eq!((m.len(), m.codes.len()), (0, 0));
}

/// Loading rows on two threads fills the mirror as upserting them one by one does: the same
/// slots, rowids and codes, a repeated id's last row kept, a row of another length skipped.
#[test]
fn a_load_on_two_threads_is_upserts_in_order() {
    let data = random_vectors(1_200, 96);
    let meta = |i: usize| BTreeMap::from([("n".to_owned(), (i % 7).to_string())]);
    let mut rows: Vec<Row> = data
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("v{}", i % 1_000), i as i64, v.clone(), meta(i)))
        .collect();
    rows.insert(600, ("odd".to_owned(), -1, vec![1.0; 5], meta(0)));
    rows.insert(0, ("empty".to_owned(), -2, Vec::new(), meta(0)));
    let mut one = Mirror::default();
    for (id, rowid, v, m) in &rows {
        if !v.is_empty() && (one.dim == 0 || v.len() == one.dim) {
            one.upsert(id, *rowid, v, m);
        }
    }
    let mut loaded = Mirror::default();
    loaded.load(&rows[..700]);
    loaded.load(&rows[700..]);
    assert_eq!(loaded.len(), 1_000);
    assert_eq!(loaded.rowid("v5"), Some(1_005), "the later row of v5");
    assert_eq!((loaded.rowid("odd"), loaded.rowid("empty")), (None, None));
    assert_eq!(loaded.ids, one.ids);
    assert_eq!(loaded.rowids, one.rowids);
    assert_eq!(loaded.codes.bytes(), one.codes.bytes());
    assert_eq!(loaded.steps, one.steps);
    assert_eq!((&loaded.high, &loaded.low), (&one.high, &one.low));
    assert_eq!((&loaded.scales, &loaded.blooms), (&one.scales, &one.blooms));
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
    let (n, dim) = (24_001, 96);
    let data = random_vectors(n, dim);
    let mut m = Mirror::default();
    let scope = |i: usize| {
        let s = if i.is_multiple_of(3) { "other" } else { "main" };
        BTreeMap::from([("scope".to_owned(), s.to_owned())])
    };
    for (i, v) in data.iter().enumerate() {
        m.upsert(&format!("v{i}"), i as i64, v, &scope(i));
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
            let portable: Vec<String> = m
                .scan_with(Kernel::Portable, q, 50, filter, 2)
                .into_iter()
                .map(|s| m.ids[s].clone())
                .collect();
            assert_eq!(sorted(portable), single, "the portable kernel");
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

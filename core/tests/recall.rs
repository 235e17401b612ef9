//! Retrieval quality of memory search on a fixed corpus: 300 one-line notes (birthdays,
//! allergies, wifi passwords, warranties, project deadlines, favourites), spread over 30 daily
//! notes under headings, and one question per note. Half the questions reuse the note's words
//! ("when is Maya's birthday"), half paraphrase it ("when was Maya born") so the keyword path
//! cannot match on everything; each question says which it is. Every question whose subject
//! changes when two of its letters are swapped is asked again with it misspelt. Reports
//! recall@1/3/6 of hybrid search with the default settings (0.7/0.3, `min_score` 0.35), of
//! hybrid, vector-only and keyword-only search with no score floor, all with the local
//! embedder, and checks floors a regression would break.
//!
//! `cargo test -p clawless-core --test recall -- --nocapture` prints the table.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use clawless_core::memory::embed::LocalEmbedder;
use clawless_core::memory::store::{MemoryStore, SearchConfig};
use clawless_platform::Platform;
use futures::executor::block_on;

const NAMES: [&str; 50] = [
    "Maya", "Liam", "Sofia", "Noah", "Elena", "Omar", "Chloe", "Ravi", "Ingrid", "Tomas", "Aiko",
    "Pedro", "Fatima", "Jonas", "Lucia", "Mateo", "Hannah", "Kwame", "Yara", "Felix", "Nadia",
    "Oscar", "Priya", "Bruno", "Greta", "Hugo", "Leila", "Marco", "Nora", "Pavel", "Rosa", "Samir",
    "Tara", "Victor", "Wanda", "Xavier", "Zoe", "Anton", "Bianca", "Caleb", "Dalia", "Emil",
    "Frida", "Gideon", "Helga", "Ivan", "Julia", "Kofi", "Lena", "Milo",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const ALLERGENS: [&str; 10] = [
    "peanuts",
    "shellfish",
    "penicillin",
    "cat hair",
    "pollen",
    "gluten",
    "bee stings",
    "latex",
    "sesame",
    "dust mites",
];
const PLACES: [&str; 50] = [
    "office",
    "cabin",
    "parents' house",
    "gym",
    "studio",
    "library",
    "coworking space",
    "beach house",
    "workshop",
    "guest room",
    "boat",
    "garage",
    "clinic",
    "school",
    "bakery",
    "warehouse",
    "hotel in Rome",
    "airport lounge",
    "barn",
    "chalet",
    "lab",
    "dojo",
    "theatre",
    "gallery",
    "greenhouse",
    "church hall",
    "community centre",
    "climbing gym",
    "yoga studio",
    "book club",
    "dentist",
    "vet",
    "pharmacy",
    "bike shop",
    "music school",
    "museum",
    "stadium",
    "tea house",
    "bistro",
    "pizzeria",
    "laundromat",
    "hostel",
    "campsite",
    "marina",
    "ski lodge",
    "pool",
    "brewery",
    "winery",
    "farm",
    "cottage",
];
const THINGS: [&str; 50] = [
    "dishwasher",
    "fridge",
    "laptop",
    "washing machine",
    "television",
    "vacuum cleaner",
    "espresso machine",
    "bicycle",
    "drill",
    "microwave",
    "printer",
    "router",
    "camera",
    "headphones",
    "oven",
    "dryer",
    "freezer",
    "blender",
    "kettle",
    "toaster",
    "phone",
    "tablet",
    "monitor",
    "keyboard",
    "speaker",
    "projector",
    "sewing machine",
    "lawn mower",
    "air purifier",
    "heater",
    "fan",
    "boiler",
    "scooter",
    "watch",
    "e-reader",
    "console",
    "treadmill",
    "rowing machine",
    "guitar amplifier",
    "piano",
    "mattress",
    "sofa",
    "desk chair",
    "stroller",
    "car seat",
    "tent",
    "kayak",
    "snowboard",
    "grill",
    "water filter",
];
const CODENAMES: [&str; 50] = [
    "Aurora", "Basilisk", "Cobalt", "Dynamo", "Ember", "Falcon", "Glacier", "Harbor", "Iris",
    "Juniper", "Kestrel", "Lumen", "Meridian", "Nimbus", "Obsidian", "Pioneer", "Quasar", "Rook",
    "Sable", "Tundra", "Umbra", "Vortex", "Willow", "Xenon", "Yarrow", "Zephyr", "Atlas", "Beacon",
    "Cinder", "Delta", "Echo", "Fjord", "Granite", "Helix", "Indigo", "Jasper", "Keystone",
    "Lantern", "Monsoon", "Nova", "Orchid", "Prism", "Quill", "Raven", "Summit", "Tempest",
    "Unity", "Vesper", "Wren", "Zenith",
];
const FOODS: [&str; 10] = [
    "ramen",
    "tiramisu",
    "paella",
    "dumplings",
    "falafel",
    "lasagne",
    "pho",
    "tacos",
    "curry",
    "pancakes",
];

/// One question and the one note that answers it.
struct Question {
    note: String,
    question: String,
    /// The word in the question that names the note's subject.
    subject: String,
    /// Whether the question paraphrases the note rather than reusing its words.
    paraphrased: bool,
}

/// The question of `note`: `literal` (the note's own words) when `i` is even, else `paraphrase`.
fn ask(i: usize, note: String, literal: String, paraphrase: String, subject: &str) -> Question {
    let paraphrased = i % 2 == 1;
    Question {
        note,
        question: if paraphrased { paraphrase } else { literal },
        subject: subject.to_owned(),
        paraphrased,
    }
}

fn corpus() -> Vec<Question> {
    let mut out = Vec::new();
    for (i, name) in NAMES.iter().enumerate() {
        let (month, day) = (MONTHS[i % 12], 1 + (i * 7) % 28);
        out.push(ask(
            i,
            format!("{name}'s birthday is on {month} {day}."),
            format!("When is {name}'s birthday?"),
            format!("When was {name} born?"),
            name,
        ));
        let allergen = ALLERGENS[i % ALLERGENS.len()];
        out.push(ask(
            i,
            format!("{name} is allergic to {allergen}."),
            format!("What is {name} allergic to?"),
            format!("Which foods or things must {name} avoid?"),
            name,
        ));
    }
    for (i, place) in PLACES.iter().enumerate() {
        out.push(ask(
            i,
            format!(
                "The wifi password at the {place} is tulip{:03}.",
                i * 37 % 1000
            ),
            format!("What's the wifi password at the {place}?"),
            format!("How do I get online at the {place}?"),
            place.split(' ').next_back().unwrap_or(place),
        ));
    }
    for (i, thing) in THINGS.iter().enumerate() {
        out.push(ask(
            i,
            format!(
                "The {thing} was bought in {} with a {}-year warranty.",
                2015 + i % 10,
                1 + i % 5
            ),
            format!("How long is the warranty on the {thing}?"),
            format!("Is the {thing} still covered if it breaks?"),
            thing.split(' ').next_back().unwrap_or(thing),
        ));
    }
    for (i, code) in CODENAMES.iter().enumerate() {
        out.push(ask(
            i,
            format!(
                "Project {code} is due on {} {}; {} leads it.",
                MONTHS[(i + 3) % 12],
                1 + (i * 5) % 28,
                NAMES[(i * 3) % NAMES.len()]
            ),
            format!("When is project {code} due?"),
            format!("What's the deadline for {code}?"),
            code,
        ));
    }
    for (i, name) in NAMES.iter().enumerate() {
        let food = FOODS[i % FOODS.len()];
        out.push(ask(
            i,
            format!("{name}'s favourite dish is {food}."),
            format!("What is {name}'s favourite dish?"),
            format!("What should I cook when {name} comes over?"),
            name,
        ));
    }
    out
}

fn store(config: SearchConfig, platform: &Platform) -> MemoryStore {
    MemoryStore {
        files: platform.files.clone(),
        kv: platform.kv.clone(),
        vectors: platform.vectors.clone(),
        text: platform.text.clone(),
        embedder: Arc::new(LocalEmbedder::default()),
        config,
    }
}

const SCOPE: &str = "assistant/main";

/// `word` with its second and third letters swapped: a common typo. Words under four letters
/// are left alone, and so are words whose two letters are the same.
fn typo(word: &str) -> String {
    let mut c: Vec<char> = word.chars().collect();
    if c.len() >= 4 {
        c.swap(1, 2);
    }
    c.into_iter().collect()
}

/// The question with its subject misspelt, if that changes it.
fn misspelt(q: &Question) -> Option<String> {
    let wrong = q.question.replace(q.subject.as_str(), &typo(&q.subject));
    (wrong != q.question).then_some(wrong)
}

/// Recall of one search configuration: recall@1, @3, @6 over all questions, recall@6 over
/// the paraphrased ones, and recall@6 over the misspelt ones.
fn measure(platform: &Platform, config: SearchConfig, questions: &[Question]) -> [f64; 5] {
    let memory = store(config, platform);
    let found = |question: &str, note: &str| {
        let hits = block_on(memory.search(&SCOPE.into(), question)).unwrap();
        hits.iter().position(|h| h.text.contains(note))
    };
    let (mut at, mut para6, mut typo6) = ([0usize; 3], 0usize, 0usize);
    for q in questions {
        let rank = found(&q.question, &q.note);
        for (j, k) in [1, 3, 6].iter().enumerate() {
            if rank.is_some_and(|r| r < *k) {
                at[j] += 1;
            }
        }
        if q.paraphrased && rank.is_some() {
            para6 += 1;
        }
        if misspelt(q).is_some_and(|wrong| found(&wrong, &q.note).is_some()) {
            typo6 += 1;
        }
    }
    let n = questions.len() as f64;
    let paraphrased = questions.iter().filter(|q| q.paraphrased).count() as f64;
    let misspellable = questions.iter().filter(|q| misspelt(q).is_some()).count() as f64;
    [
        at[0] as f64 / n,
        at[1] as f64 / n,
        at[2] as f64 / n,
        para6 as f64 / paraphrased,
        typo6 as f64 / misspellable,
    ]
}

/// Hybrid weights with no score floor.
fn unfloored(vector_weight: f32, text_weight: f32) -> SearchConfig {
    SearchConfig {
        min_score: 0.0,
        vector_weight,
        text_weight,
        ..SearchConfig::default()
    }
}

#[test]
fn the_question_sets_are_what_they_say() {
    let questions = corpus();
    let para: Vec<&str> = questions
        .iter()
        .filter(|q| q.paraphrased)
        .map(|q| q.question.as_str())
        .collect();
    assert_eq!(para.len(), 150);
    assert!(para.contains(&"When was Liam born?"));
    assert!(!para.contains(&"What is Maya allergic to?"));
    assert!(para.iter().all(|q| !q.contains("birthday")));
    let wrong: Vec<String> = questions.iter().filter_map(misspelt).collect();
    assert!(wrong.contains(&"When is Myaa's birthday?".to_owned()));
    // "Zoe" is too short to misspell this way, "Rook" and "pool" swap two equal letters.
    for same in ["Zoe", "Rook", "pool"] {
        assert!(
            questions.iter().any(|q| q.subject == same) && wrong.iter().all(|w| !w.contains(same)),
            "{same}"
        );
    }
    assert!(questions
        .iter()
        .filter_map(|q| misspelt(q).map(|w| (w, q)))
        .all(|(w, q)| w != q.question));
}

#[test]
fn recall_on_the_fixed_corpus() {
    let questions = corpus();
    assert_eq!(questions.len(), 300);
    let (platform, _clock, _http) = Platform::in_memory();
    // 30 daily notes of 10 facts, each under its own heading (a chunk each).
    for (day, group) in questions.chunks(10).enumerate() {
        let mut text = String::new();
        for q in group {
            text.push_str(&format!("## Note\n{}\n\n", q.note));
        }
        let path = format!("memory/{SCOPE}/memory/2026-10-{:02}.md", day + 1);
        block_on(platform.files.write(&path, text.as_bytes())).unwrap();
    }
    let indexed =
        block_on(store(SearchConfig::default(), &platform).reindex(&SCOPE.into())).unwrap();
    assert_eq!(indexed, 30);

    let defaults = SearchConfig::default();
    assert_eq!(
        (
            defaults.vector_weight,
            defaults.text_weight,
            defaults.min_score,
            defaults.max_results
        ),
        (0.7, 0.3, 0.35, 6),
        "the table's first row names these defaults"
    );
    let hybrid = measure(&platform, defaults, &questions);
    let unfloored_hybrid = measure(&platform, unfloored(0.7, 0.3), &questions);
    let vector = measure(&platform, unfloored(1.0, 0.0), &questions);
    let keyword = measure(&platform, unfloored(0.0, 1.0), &questions);
    let misspellable = questions.iter().filter(|q| misspelt(q).is_some()).count();
    println!(
        "memory recall, local embedder, {} notes / {} questions ({} paraphrased, {misspellable} misspelt):",
        questions.len(),
        questions.len(),
        questions.iter().filter(|q| q.paraphrased).count()
    );
    println!("| search, local embedder | recall@1 | recall@3 | recall@6 | recall@6, paraphrased | recall@6, misspelt subject |");
    println!("|---|---|---|---|---|---|");
    for (name, r) in [
        ("hybrid 0.7 / 0.3, min_score 0.35 (the defaults)", hybrid),
        ("hybrid 0.7 / 0.3, no min_score", unfloored_hybrid),
        ("vector only, no min_score", vector),
        ("keyword only, no min_score", keyword),
    ] {
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            r[0], r[1], r[2], r[3], r[4]
        );
    }
    // Floors a few points under what was measured (see README): a regression trips them.
    assert!(hybrid[2] >= 0.85, "hybrid recall@6 {:.2}", hybrid[2]);
    assert!(hybrid[0] >= 0.55, "hybrid recall@1 {:.2}", hybrid[0]);
    assert!(
        hybrid[2] + 1e-9 >= vector[2].max(keyword[2]) - 0.02,
        "hybrid is not worse than either path alone"
    );
    assert!(
        hybrid[4] > keyword[4],
        "the vector path (character trigrams) rescues some misspellings keywords miss"
    );
}

//! Retrieval quality of memory search on a fixed corpus: 300 one-line notes (birthdays,
//! allergies, wifi passwords, warranties, project deadlines, favourites), spread over 30 daily
//! notes under headings, and one question per note. Half the questions reuse the note's words
//! ("when is Maya's birthday"), half paraphrase it ("when was Maya born") so the keyword path
//! cannot match on everything, and every question is asked again with its subject misspelt
//! (two letters swapped). Reports recall@1/3/6 of hybrid (the default 0.7/0.3), vector-only
//! and keyword-only search with the local embedder, and checks floors a regression would break.
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

/// `(note, question, subject)`: each question has exactly one relevant note; `subject` is the
/// word in the question that names it.
fn corpus() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (i, name) in NAMES.iter().enumerate() {
        let (month, day) = (MONTHS[i % 12], 1 + (i * 7) % 28);
        out.push((
            format!("{name}'s birthday is on {month} {day}."),
            if i % 2 == 0 {
                format!("When is {name}'s birthday?")
            } else {
                format!("When was {name} born?")
            },
            name.to_string(),
        ));
        let allergen = ALLERGENS[i % ALLERGENS.len()];
        out.push((
            format!("{name} is allergic to {allergen}."),
            if i % 2 == 0 {
                format!("What is {name} allergic to?")
            } else {
                format!("Which foods or things must {name} avoid?")
            },
            name.to_string(),
        ));
    }
    for (i, place) in PLACES.iter().enumerate() {
        out.push((
            format!(
                "The wifi password at the {place} is tulip{:03}.",
                i * 37 % 1000
            ),
            if i % 2 == 0 {
                format!("What's the wifi password at the {place}?")
            } else {
                format!("How do I get online at the {place}?")
            },
            place.split(' ').next_back().unwrap_or(place).to_string(),
        ));
    }
    for (i, thing) in THINGS.iter().enumerate() {
        out.push((
            format!(
                "The {thing} was bought in {} with a {}-year warranty.",
                2015 + i % 10,
                1 + i % 5
            ),
            if i % 2 == 0 {
                format!("How long is the warranty on the {thing}?")
            } else {
                format!("Is the {thing} still covered if it breaks?")
            },
            thing.split(' ').next_back().unwrap_or(thing).to_string(),
        ));
    }
    for (i, code) in CODENAMES.iter().enumerate() {
        out.push((
            format!(
                "Project {code} is due on {} {}; {} leads it.",
                MONTHS[(i + 3) % 12],
                1 + (i * 5) % 28,
                NAMES[(i * 3) % NAMES.len()]
            ),
            if i % 2 == 0 {
                format!("When is project {code} due?")
            } else {
                format!("What's the deadline for {code}?")
            },
            code.to_string(),
        ));
    }
    for (i, name) in NAMES.iter().enumerate() {
        let food = FOODS[i % FOODS.len()];
        out.push((
            format!("{name}'s favourite dish is {food}."),
            if i % 2 == 0 {
                format!("What is {name}'s favourite dish?")
            } else {
                format!("What should I cook when {name} comes over?")
            },
            name.to_string(),
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

/// `word` with its second and third letters swapped: a common typo.
fn typo(word: &str) -> String {
    let mut c: Vec<char> = word.chars().collect();
    if c.len() >= 4 {
        c.swap(1, 2);
    }
    c.into_iter().collect()
}

/// recall@1, @3, @6 over all questions, recall@6 over the paraphrased half, and recall@6
/// when the question misspells its subject.
fn measure(
    platform: &Platform,
    vector: f32,
    text: f32,
    pairs: &[(String, String, String)],
) -> [f64; 5] {
    let config = SearchConfig {
        max_results: 6,
        min_score: 0.0,
        vector_weight: vector,
        text_weight: text,
        ..SearchConfig::default()
    };
    let memory = store(config, platform);
    let (mut at, mut para6, mut para_n, mut typo6) = ([0usize; 3], 0usize, 0usize, 0usize);
    for (i, (note, question, subject)) in pairs.iter().enumerate() {
        let hits = block_on(memory.search(&SCOPE.into(), question)).unwrap();
        let rank = hits.iter().position(|h| h.text.contains(note.as_str()));
        let misspelt = question.replace(subject.as_str(), &typo(subject));
        let hits = block_on(memory.search(&SCOPE.into(), &misspelt)).unwrap();
        if hits.iter().any(|h| h.text.contains(note.as_str())) {
            typo6 += 1;
        }
        for (j, k) in [1, 3, 6].iter().enumerate() {
            if rank.is_some_and(|r| r < *k) {
                at[j] += 1;
            }
        }
        if i % 2 == 1 {
            para_n += 1;
            if rank.is_some() {
                para6 += 1;
            }
        }
    }
    let n = pairs.len() as f64;
    [
        at[0] as f64 / n,
        at[1] as f64 / n,
        at[2] as f64 / n,
        para6 as f64 / para_n as f64,
        typo6 as f64 / n,
    ]
}

#[test]
fn recall_on_the_fixed_corpus() {
    let pairs = corpus();
    assert_eq!(pairs.len(), 300);
    let (platform, _clock, _http) = Platform::in_memory();
    // 30 daily notes of 10 facts, each under its own heading (a chunk each).
    for (day, group) in pairs.chunks(10).enumerate() {
        let mut text = String::new();
        for (note, _, _) in group {
            text.push_str(&format!("## Note\n{note}\n\n"));
        }
        let path = format!("memory/{SCOPE}/memory/2026-10-{:02}.md", day + 1);
        block_on(platform.files.write(&path, text.as_bytes())).unwrap();
    }
    let indexed =
        block_on(store(SearchConfig::default(), &platform).reindex(&SCOPE.into())).unwrap();
    assert_eq!(indexed, 30);

    let hybrid = measure(&platform, 0.7, 0.3, &pairs);
    let vector = measure(&platform, 1.0, 0.0, &pairs);
    let keyword = measure(&platform, 0.0, 1.0, &pairs);
    println!("memory recall, local embedder, 300 notes / 300 questions (150 paraphrased):");
    println!("| search | recall@1 | recall@3 | recall@6 | recall@6, paraphrases | recall@6, misspelt subject |");
    println!("|---|---|---|---|---|---|");
    for (name, r) in [
        ("hybrid 0.7/0.3", hybrid),
        ("vector only", vector),
        ("keyword only", keyword),
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

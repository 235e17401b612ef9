//! `cargo bench -p cf-worker --bench size`: where the Worker's wasm bytes are.
//!
//! Reads the wasm of the Worker's release build as cargo leaves it, before wasm-bindgen and
//! wasm-opt, built with its function names (which the deployed build strips):
//!
//! ```text
//! WASM_BINDGEN_USE_JS_SYS=1 cargo build -p cf-worker --lib --target wasm32-unknown-unknown \
//!     --profile worker --config 'profile.worker.package.cf-worker.strip="debuginfo"'
//! cargo bench -p cf-worker --bench size
//! ```
//!
//! (`wasm32-unknown-unknown/worker/cf_worker.wasm` in `CARGO_TARGET_DIR` or `target/`, or the
//! file `CLAWLESS_WORKER_WASM` names.) Prints its code and data, the 30 crates and the 30
//! functions with the most code, and wasm-bindgen's describe functions apart (its CLI removes
//! them). Sizes are before wasm-opt, which takes about a fifth off the code: they say where the
//! bytes are, not what ships. What ships, gzip: `wrangler deploy --dry-run` (`.ci/run` holds it
//! under a ceiling).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;

use wasmparser::{KnownCustom, Name, Parser, Payload, TypeRef};

const TOP: usize = 30;

/// The crate a demangled symbol's code belongs to: the first path segment, looking through
/// `<…as…>`, references and `dyn` (for an impl of a foreign trait, the type's crate).
fn crate_of(symbol: &str) -> String {
    let s = symbol.trim_start_matches(['<', '&', '*', '(', '[']);
    let s = s
        .trim_start_matches("mut ")
        .trim_start_matches("const ")
        .trim_start_matches("dyn ");
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    match &s[..end] {
        "" => "(other)".to_owned(),
        // A generic parameter (`<T as Trait>::f`): its crate is not in the name.
        name if name.chars().next().is_some_and(char::is_uppercase) => "(generic)".to_owned(),
        name => name.to_owned(),
    }
}

fn kb(bytes: usize) -> String {
    format!("{:.1} KB", bytes as f64 / 1000.0)
}

fn main() {
    let path = std::env::var_os("CLAWLESS_WORKER_WASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"))
                .join("wasm32-unknown-unknown/worker/cf_worker.wasm")
        });
    let Ok(wasm) = std::fs::read(&path) else {
        eprintln!(
            "no wasm at {}: build the Worker first (`wrangler deploy --dry-run`, or \
             `cargo build -p cf-worker --target wasm32-unknown-unknown --profile worker`), \
             or name it with CLAWLESS_WORKER_WASM",
            path.display()
        );
        std::process::exit(2);
    };

    let mut imported = 0u32;
    let mut bodies: Vec<usize> = Vec::new();
    let mut names: HashMap<u32, String> = HashMap::new();
    let mut data = 0usize;
    let mut custom: Vec<(String, usize)> = Vec::new();
    for payload in Parser::new(0).parse_all(&wasm) {
        match payload.expect("a wasm module") {
            Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    if matches!(import.expect("an import").ty, TypeRef::Func(_)) {
                        imported += 1;
                    }
                }
            }
            Payload::CodeSectionEntry(body) => bodies.push(body.range().len()),
            Payload::DataSection(segments) => {
                for segment in segments {
                    data += segment.expect("a data segment").data.len();
                }
            }
            Payload::CustomSection(section) => {
                custom.push((section.name().to_owned(), section.data().len()));
                if let KnownCustom::Name(subsections) = section.as_known() {
                    for subsection in subsections {
                        if let Ok(Name::Function(map)) = subsection {
                            for naming in map.into_iter().flatten() {
                                names.insert(naming.index, naming.name.to_owned());
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if names.is_empty() {
        eprintln!(
            "{} has no function names: build it with \
             --config 'profile.worker.package.cf-worker.strip=\"debuginfo\"'",
            path.display()
        );
        std::process::exit(2);
    }

    let code: usize = bodies.iter().sum();
    let (mut by_crate, mut functions, mut describe) = (
        HashMap::<String, usize>::new(),
        Vec::new(),
        (0usize, 0usize),
    );
    for (i, &size) in bodies.iter().enumerate() {
        let name = names
            .get(&(imported + i as u32))
            .map(|n| format!("{:#}", rustc_demangle::demangle(n)))
            .unwrap_or_else(|| format!("(function {})", imported + i as u32));
        if name.starts_with("__wbindgen_describe") {
            describe.0 += 1;
            describe.1 += size;
            continue;
        }
        *by_crate.entry(crate_of(&name)).or_default() += size;
        functions.push((size, name));
    }
    println!(
        "{}: {} of code in {} functions, {} of data; total file {}",
        path.display(),
        kb(code),
        bodies.len(),
        kb(data),
        kb(wasm.len())
    );
    println!(
        "wasm-bindgen's describe functions (removed by its CLI): {} in {}",
        kb(describe.1),
        describe.0
    );
    for (name, size) in custom {
        println!("custom section {name}: {}", kb(size));
    }

    let mut crates: Vec<_> = by_crate.into_iter().collect();
    crates.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    println!("\ncode by crate (top {TOP} of {}):", crates.len());
    for (name, size) in crates.iter().take(TOP) {
        println!(
            "{:>10}  {:>5.1} %  {name}",
            kb(*size),
            *size as f64 * 100.0 / code as f64
        );
    }

    functions.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    println!("\ncode by function (top {TOP} of {}):", functions.len());
    for (size, name) in functions.iter().take(TOP) {
        let shown: String = name.chars().take(110).collect();
        println!("{:>10}  {shown}", kb(*size));
    }
}

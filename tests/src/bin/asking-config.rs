//! `asking-config DIR`: writes the config the approval scenarios run on (the repository's
//! `config/` with `memory_write` asking first) into DIR. `.ci/run` builds the Worker's test
//! build on it.

fn main() {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: asking-config DIR");
        std::process::exit(2);
    };
    clawless_testkit::fixtures::asking_config(std::path::Path::new(&dir));
}

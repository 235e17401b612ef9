//! Validates the embedded config (see `clawless_core::config::embedded`) at build time: a
//! broken config fails the build.

fn main() {
    // The config is embedded by clawless-core (its build script follows the files and
    // `CLAWLESS_EMBED_CONFIG`); this script reruns whenever that crate is rebuilt.
    println!("cargo:rerun-if-changed=build.rs");
    if let Err(e) = clawless_core::Config::load(&clawless_core::config::embedded()) {
        println!("cargo:warning=config is invalid: {e}");
        std::process::exit(1);
    }
}

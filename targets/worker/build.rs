//! Validates the embedded config (see `clawless_core::config::embedded`) at build time (a
//! broken config fails the build) and writes it as JSON for the Worker to embed: no YAML parser
//! in the wasm, no YAML parsing per isolate.

fn main() {
    // The config is embedded by clawless-core (its build script follows the files and
    // `CLAWLESS_EMBED_CONFIG`); this script reruns whenever that crate is rebuilt.
    println!("cargo:rerun-if-changed=build.rs");
    let config = match clawless_core::Config::load(&clawless_core::config::embedded()) {
        Ok(config) => config,
        Err(e) => {
            println!("cargo:warning=config is invalid: {e}");
            std::process::exit(1);
        }
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    if let Err(e) = std::fs::write(out.join("config.json"), config.to_json()) {
        println!("cargo:warning=cannot write config.json: {e}");
        std::process::exit(1);
    }
}

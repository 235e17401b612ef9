//! Validates the embedded `config/` at build time: a broken config fails the build.

fn main() {
    for dir in [
        "main.yaml",
        "routing.yaml",
        "agents.d",
        "providers.d",
        "prompts",
    ] {
        println!("cargo:rerun-if-changed=../../config/{dir}");
    }
    if let Err(e) = clawless_core::Config::load(&clawless_core::config::embedded()) {
        println!("cargo:warning=config is invalid: {e}");
        std::process::exit(1);
    }
}

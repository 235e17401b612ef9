//! Which OpenAI-compatible media service the settings name: `<KIND>_BASE_URL` (with
//! `<KIND>_API_KEY`; `off` turns the kind off), else `OPENAI_API_KEY` at `OPENAI_BASE_URL` or
//! OpenAI. Speech and pictures choose theirs so.

use crate::env::Env;
use crate::secret::Secret;

/// An OpenAI-compatible service: its name as the user is told it (`openai`, or the base
/// URL's host), the base URL and the key.
pub struct Service {
    pub name: String,
    pub base_url: String,
    pub api_key: Secret,
}

/// What the outcome of looking one up is.
pub enum Found {
    Service(Service),
    /// `<KIND>_BASE_URL` is `off`.
    Off,
    None,
}

/// The service of `kind` (`SPEECH`, `IMAGE`), first match wins.
pub fn openai_compatible(env: &Env, kind: &str) -> Found {
    match env.get(&format!("{kind}_BASE_URL")).map(str::trim) {
        Some("off") => Found::Off,
        Some(base) if !base.is_empty() => Found::Service(Service {
            name: super::transcribe::host_of(base),
            base_url: base.to_owned(),
            api_key: env.secret(&format!("{kind}_API_KEY")),
        }),
        _ if !env.secret("OPENAI_API_KEY").is_empty() => Found::Service(Service {
            name: "openai".to_owned(),
            base_url: setting(env, "OPENAI_BASE_URL", "https://api.openai.com/v1"),
            api_key: env.secret("OPENAI_API_KEY"),
        }),
        _ => Found::None,
    }
}

/// The setting `name`, trimmed, or `default` when unset or blank.
pub fn setting(env: &Env, name: &str, default: &str) -> String {
    env.get(name)
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .unwrap_or(default)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(pairs: &[(&str, &str)]) -> Option<(String, String, String)> {
        let env = Env::from_pairs(pairs.iter().copied());
        match openai_compatible(&env, "SPEECH") {
            Found::Service(s) => Some((s.name, s.base_url, s.api_key.expose().to_owned())),
            Found::Off => Some(("off".into(), String::new(), String::new())),
            Found::None => None,
        }
    }

    #[test]
    fn the_kinds_own_url_wins_then_openai_and_off_is_off() {
        let own = [
            ("SPEECH_BASE_URL", " https://tts.example/v1 "),
            ("SPEECH_API_KEY", "k1"),
            ("OPENAI_API_KEY", "k2"),
        ];
        assert_eq!(
            found(&own),
            Some((
                "tts.example".into(),
                "https://tts.example/v1".into(),
                "k1".into()
            ))
        );
        let openai = [("OPENAI_API_KEY", "k2"), ("OPENAI_BASE_URL", "  ")];
        assert_eq!(
            found(&openai),
            Some((
                "openai".into(),
                "https://api.openai.com/v1".into(),
                "k2".into()
            ))
        );
        let off = [("SPEECH_BASE_URL", "off"), ("OPENAI_API_KEY", "k2")];
        assert_eq!(found(&off).map(|f| f.0), Some("off".into()));
        assert_eq!(found(&[("GROQ_API_KEY", "g")]), None);
    }
}

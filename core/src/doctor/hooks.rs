//! `doctor`'s check of each incoming webhook (`hooks:`): a secret not set fails (every
//! delivery would be refused with 401), a short one is a warning (it can be guessed), and a
//! good one says the hook's path and where its deliveries land.

use super::{Check, Status};
use crate::admin::HookInfo;
use crate::app::Admin;
use crate::config::HookMode;

/// A hook secret shorter than this (characters) is a warning: it can be guessed.
pub const MIN_HOOK_SECRET_CHARS: usize = 16;

impl Admin<'_> {
    /// One check per hook, in the order of their names.
    pub(super) fn hook_checks(self) -> Vec<Check> {
        self.hooks()
            .iter()
            .map(|info| {
                let chars = self
                    .app
                    .hooks
                    .get(&info.name)
                    .map_or(0, |h| h.secret.expose().chars().count());
                hook_check(info, chars)
            })
            .collect()
    }
}

/// The check of hook `info` whose secret has `secret_chars` characters (0: not set).
pub(super) fn hook_check(info: &HookInfo, secret_chars: usize) -> Check {
    let name = format!("hook {}", info.name);
    let path = format!("/hooks/{}", info.name);
    let env = &info.secret_env;
    if !info.secret_set || secret_chars == 0 {
        return Check::new(
            name,
            Status::Fail,
            format!("set {env} (a long random string, e.g. openssl rand -hex 32) or every delivery to {path} is refused with 401"),
        );
    }
    if secret_chars < MIN_HOOK_SECRET_CHARS {
        return Check::new(
            name,
            Status::Warn,
            format!("{env} is shorter than {MIN_HOOK_SECRET_CHARS} characters: anyone who guesses it can post to {path}; set a long random one"),
        );
    }
    Check::new(name, Status::Ok, format!("POST {path} {}", lands(info)))
}

/// Where a hook's deliveries land, as the end of a sentence.
fn lands(info: &HookInfo) -> String {
    let chat = match info.chat {
        c if c > 0 => format!("the private chat of {c}"),
        c => format!("group {c}"),
    };
    let what = match (info.mode, &info.agent) {
        (HookMode::Message, _) => "sends its message to".to_owned(),
        (HookMode::Turn, Some(agent)) => format!("runs a turn of agent {agent:?} in"),
        (HookMode::Turn, None) => "runs a turn in".to_owned(),
    };
    format!(
        "{what} {chat} (bot {}), at most {} a minute",
        info.connector, info.per_minute
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(mode: HookMode, chat: i64, agent: Option<&str>, set: bool) -> HookInfo {
        HookInfo {
            name: "ci".into(),
            connector: "main".into(),
            chat,
            mode,
            per_minute: 30,
            agent: agent.map(str::to_owned),
            secret_env: "HOOK_CI".into(),
            secret_set: set,
        }
    }

    #[test]
    fn a_hook_fails_without_its_secret_and_warns_with_a_short_one() {
        let unset = hook_check(&info(HookMode::Message, 7, None, false), 0);
        assert_eq!(unset.status, Status::Fail);
        assert!(
            unset.detail.starts_with("set HOOK_CI ")
                && unset
                    .detail
                    .ends_with("every delivery to /hooks/ci is refused with 401"),
            "{}",
            unset.detail
        );
        let short = hook_check(&info(HookMode::Message, 7, None, true), 15);
        assert_eq!(short.status, Status::Warn);
        assert!(
            short.detail.contains("HOOK_CI is shorter than 16"),
            "{}",
            short.detail
        );
        let ok = hook_check(&info(HookMode::Message, 7, None, true), 16);
        assert_eq!(
            (ok.name.as_str(), ok.status, ok.detail.as_str()),
            (
                "hook ci",
                Status::Ok,
                "POST /hooks/ci sends its message to the private chat of 7 (bot main), at most 30 a minute"
            )
        );
        let turn = hook_check(&info(HookMode::Turn, -100, Some("helper"), true), 40);
        assert_eq!(
            turn.detail,
            "POST /hooks/ci runs a turn of agent \"helper\" in group -100 (bot main), at most 30 a minute"
        );
    }
}

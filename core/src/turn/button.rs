//! Every inline button's callback data in one place: what a button means, and how that is
//! written in the 1–64 bytes Telegram carries back with a tap. Data that decodes to none of
//! these is refused ("That button is no longer valid."), never taken for an approval.

use crate::inbox::Outcome;

/// Telegram's limit on `callback_data`, in bytes.
pub const MAX_DATA: usize = 64;

/// What a tapped button asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Button {
    /// `ap:<approval id>:<o|g|d>`: an answer to a waiting approval.
    Approval { id: String, answer: Choice },
    /// `md:<index>:<tag>`: the model at `index` of the agent's chain; `tag` (of the model's
    /// label) tells a button of another chain apart. Buttons from before tags have none.
    Model { index: usize, tag: Option<String> },
    /// `md:-`: back to the agent's default model.
    DefaultModel,
    /// `ag:<index>`: the agent at `index` of those offered where the button is.
    Agent(usize),
    /// `rm:<id>`: cancel that reminder.
    CancelReminder(u64),
    /// `pu:<user id>`: end that person's pairing (the owner's `/users`).
    Unpair(i64),
}

/// An approval's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Once,
    /// For `approvals.grant_minutes` in this chat.
    ForAWhile,
    Deny,
}

impl From<Choice> for Outcome {
    fn from(a: Choice) -> Outcome {
        match a {
            Choice::Once => Outcome::AllowOnce,
            Choice::ForAWhile => Outcome::AllowForAWhile,
            Choice::Deny => Outcome::Deny,
        }
    }
}

impl Button {
    /// The callback data of this button.
    pub fn encode(&self) -> String {
        match self {
            Button::Approval { id, answer } => {
                let code = match answer {
                    Choice::Once => 'o',
                    Choice::ForAWhile => 'g',
                    Choice::Deny => 'd',
                };
                format!("ap:{id}:{code}")
            }
            Button::Model {
                index,
                tag: Some(tag),
            } => format!("md:{index}:{tag}"),
            Button::Model { index, tag: None } => format!("md:{index}"),
            Button::DefaultModel => "md:-".to_owned(),
            Button::Agent(i) => format!("ag:{i}"),
            Button::CancelReminder(id) => format!("rm:{id}"),
            Button::Unpair(user) => format!("pu:{user}"),
        }
    }

    /// The button `data` encodes; `None` for data no button of this bot writes (unknown,
    /// malformed, over Telegram's 64 bytes).
    pub fn decode(data: &str) -> Option<Button> {
        if data.len() > MAX_DATA {
            return None;
        }
        let (kind, rest) = data.split_once(':')?;
        match kind {
            "ap" => {
                let (id, code) = rest.rsplit_once(':')?;
                let answer = match code {
                    "o" => Choice::Once,
                    "g" => Choice::ForAWhile,
                    "d" => Choice::Deny,
                    _ => return None,
                };
                let well_formed =
                    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.');
                well_formed.then(|| Button::Approval {
                    id: id.to_owned(),
                    answer,
                })
            }
            "md" if rest == "-" => Some(Button::DefaultModel),
            "md" => {
                let (index, tag) = match rest.split_once(':') {
                    Some((i, t)) => (i, Some(t)),
                    None => (rest, None),
                };
                let tag = match tag {
                    Some(t) if t.len() == 8 && t.bytes().all(|b| b.is_ascii_hexdigit()) => {
                        Some(t.to_owned())
                    }
                    Some(_) => return None,
                    None => None,
                };
                Some(Button::Model {
                    index: number(index)?,
                    tag,
                })
            }
            "ag" => Some(Button::Agent(number(rest)?)),
            "rm" => Some(Button::CancelReminder(number(rest)?)),
            "pu" => Some(Button::Unpair(number(rest)?)),
            _ => None,
        }
    }
}

/// A decimal number written by [`Button::encode`] (digits only, an optional leading `-`).
fn number<T: std::str::FromStr>(s: &str) -> Option<T> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_button_decodes_to_itself_within_telegrams_limit() {
        let all = [
            Button::Approval {
                id: "1732612345678.3".into(),
                answer: Choice::Once,
            },
            Button::Approval {
                id: "12.1".into(),
                answer: Choice::ForAWhile,
            },
            Button::Approval {
                id: "12.1".into(),
                answer: Choice::Deny,
            },
            Button::Model {
                index: 2,
                tag: Some("0badf00d".into()),
            },
            Button::Model {
                index: 0,
                tag: None,
            },
            Button::DefaultModel,
            Button::Agent(3),
            Button::CancelReminder(u64::MAX),
            Button::Unpair(-1_001_234_567_890),
            Button::Unpair(i64::MIN),
        ];
        for b in all {
            let data = b.encode();
            assert!(data.len() <= MAX_DATA, "{data}");
            assert_eq!(Button::decode(&data), Some(b), "{data}");
        }
        assert_eq!(
            Button::decode("ap:12.1:o"),
            Some(Button::Approval {
                id: "12.1".into(),
                answer: Choice::Once
            })
        );
    }

    #[test]
    fn unknown_and_malformed_data_is_no_button() {
        for data in [
            "",
            "ap",
            "ap:",
            "ap:12.1",
            "ap:12.1:x",
            "ap::o",
            "ap:1 2:o",
            "ap:12.1:o:o",
            "xx:1",
            "anything at all",
            "md:",
            "md:x",
            "md:1:nothex!!",
            "md:1:abc",
            "md:+1",
            "ag:",
            "ag:-",
            "ag:1.5",
            "rm:1e3",
            "rm:-1",
            "rm:99999999999999999999999",
            "pu:abc",
            "pu: 5",
            "AP:12.1:o",
        ] {
            assert_eq!(Button::decode(data), None, "{data:?}");
        }
        let long = format!("ap:{}:o", "1".repeat(70));
        assert_eq!(Button::decode(&long), None);
    }
}

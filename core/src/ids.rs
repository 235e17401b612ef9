//! The names the core keys its state by, each its own type so one is never passed for another:
//! a [`ConnectorId`] (a bot, from config), a [`Lane`] (one chat's queue of updates), a
//! [`SessionKey`] (one conversation's history) and a [`Scope`] (one owner's memory). All are
//! strings on the wire and in storage (`serde(transparent)`), so stored jobs and sessions read
//! the same as before they had types.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps a name that is already of this kind (read back from storage, or from a
            /// caller that knows what it holds).
            pub fn new(name: impl Into<String>) -> Self {
                Self(name.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $name {
            fn from(name: &str) -> Self {
                Self(name.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(name: String) -> Self {
                Self(name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

string_id! {
    /// A connector (one Telegram bot) by its name in config: `main`, `work`.
    ConnectorId
}

string_id! {
    /// One chat's queue in the inbox, `<connector>:<chat id>`: updates of a lane are answered
    /// one at a time, in order.
    Lane
}

string_id! {
    /// One conversation's history: `<connector>:<chat>[:t<topic>][:u<user>]`.
    SessionKey
}

string_id! {
    /// One owner's memory: `<agent>/<connector>/u<user>|g<chat>|shared` (see
    /// [`crate::memory::scope`]).
    Scope
}

impl Lane {
    /// The lane of a chat on a connector.
    pub fn of_chat(connector: &ConnectorId, chat: i64) -> Lane {
        Lane(format!("{connector}:{chat}"))
    }

    /// The lane of the background tasks started in `chat` (see [`crate::spawn`]): a queue
    /// beside the chat's, so its updates are not held up while a task runs. A chat's tasks
    /// run one at a time, each reading the spend caps after the one before was counted.
    pub fn of_tasks(connector: &ConnectorId, chat: i64) -> Lane {
        Lane(format!("{connector}:{chat}:tasks"))
    }

    /// The chat's lane of a chat's background tasks' lane; `None` for any other lane.
    pub fn task_chat(&self) -> Option<Lane> {
        self.0
            .strip_suffix(":tasks")
            .map(|chat| Lane(chat.to_owned()))
    }

    /// The connector whose updates the lane holds (a connector id has no `:`).
    pub fn connector(&self) -> Option<ConnectorId> {
        self.0
            .split_once(':')
            .map(|(connector, _)| ConnectorId::new(connector))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_plain_strings_in_storage() {
        let lane = Lane::of_chat(&ConnectorId::new("main"), -100123);
        assert_eq!(lane.as_str(), "main:-100123");
        assert_eq!(
            serde_json::to_string(&lane).unwrap(),
            "\"main:-100123\"",
            "a job stored before lanes had a type reads the same"
        );
        assert_eq!(lane.connector(), Some(ConnectorId::new("main")));
        let task = Lane::of_tasks(&ConnectorId::new("main"), -100123);
        assert_eq!(task.as_str(), "main:-100123:tasks");
        assert_eq!(task.connector(), Some(ConnectorId::new("main")));
        assert_eq!(task.task_chat(), Some(lane.clone()));
        assert_eq!(lane.task_chat(), None);
        let back: Scope = serde_json::from_str("\"assistant/main/u1\"").unwrap();
        assert_eq!(back, "assistant/main/u1");
    }
}

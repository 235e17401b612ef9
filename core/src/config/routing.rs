//! `routing.yaml`: which agent answers where. Ordered `rules:` match a message by connector,
//! chat id, forum topic and chat kind; the first that matches names the agent, else the
//! connector's entry under `connectors:`, else `default_agent`. A rule or an entry may list
//! `agents:`, the agents a matching chat may switch to with `/agent` (default: only its own).
//!
//! ```yaml
//! default_agent: assistant
//! connectors:
//!   main: assistant                  # or {agent: assistant, agents: [assistant, coder]}
//! rules:
//!   - chat: -1001234567890           # a group
//!     topic: 5                       # one forum topic of it (needs `chat`)
//!     agent: coder
//!   - kind: private                  # private | group
//!     agent: assistant
//!     agents: [assistant, coder]
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a message was written, as far as routing reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub chat: i64,
    /// The forum topic (`message_thread_id` of a topic message).
    pub topic: Option<i64>,
    pub private: bool,
}

/// `kind:` of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatKindRule {
    /// A private chat with the bot.
    Private,
    /// A group or supergroup (forums included).
    Group,
}

/// An agent and the agents a chat routed to it may switch to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub agent: String,
    /// The agents `/agent` offers, `agent` first, each once (validated: never empty).
    #[serde(default)]
    pub agents: Vec<String>,
}

impl Route {
    /// The agents a chat on this route may use: `agent` first.
    pub fn allowed(&self) -> &[String] {
        &self.agents
    }

    /// Puts `agent` first in `agents` and drops repeats.
    #[cfg(feature = "yaml")]
    fn normalized(mut self) -> Route {
        let mut agents = vec![self.agent.clone()];
        for a in self.agents.drain(..) {
            if !agents.contains(&a) {
                agents.push(a);
            }
        }
        self.agents = agents;
        self
    }
}

/// One of `rules:`: every matcher given must hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ChatKindRule>,
    pub route: Route,
}

impl RouteRule {
    /// Whether the rule holds for a message on `connector` at `place`.
    pub fn matches(&self, connector: &str, place: &Place) -> bool {
        self.connector.as_deref().is_none_or(|c| c == connector)
            && self.chat.is_none_or(|c| c == place.chat)
            && self.topic.is_none_or(|t| Some(t) == place.topic)
            && self
                .kind
                .is_none_or(|k| (k == ChatKindRule::Private) == place.private)
    }

    /// Whether the rule names no chat, topic or kind.
    fn matches_every_chat(&self) -> bool {
        self.chat.is_none() && self.topic.is_none() && self.kind.is_none()
    }

    /// Whether a message on `connector` may ever match (no connector named, or this one).
    pub fn may_match(&self, connector: &str) -> bool {
        self.connector.as_deref().is_none_or(|c| c == connector)
    }
}

/// The validated `routing.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routing {
    pub default_agent: String,
    /// Connector id → its entry; every connector of `main.yaml` is present (`default_agent`
    /// where the file names none).
    pub connectors: BTreeMap<String, Route>,
    /// In order: the first that matches wins.
    #[serde(default)]
    pub rules: Vec<RouteRule>,
}

impl Routing {
    /// The route of a message on `connector` at `place`: the first rule that matches, else
    /// the connector's entry; `None` for a connector the config does not have.
    pub fn route(&self, connector: &str, place: &Place) -> Option<&Route> {
        self.rules
            .iter()
            .find(|r| r.matches(connector, place))
            .map(|r| &r.route)
            .or_else(|| self.connectors.get(connector))
    }

    /// The route where no message says otherwise (the terminal chat, the command line): the
    /// first rule that matches every message of `connector` (no matcher but the connector),
    /// else its entry.
    pub fn connector_route(&self, connector: &str) -> Option<&Route> {
        self.rules
            .iter()
            .find(|r| r.may_match(connector) && r.matches_every_chat())
            .map(|r| &r.route)
            .or_else(|| self.connectors.get(connector))
    }

    /// Every agent a message on `connector` may be answered by (routed to, or switched to),
    /// each once, the connector's own first.
    pub fn agents_of(&self, connector: &str) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        let routes = self.connectors.get(connector).into_iter().chain(
            self.rules
                .iter()
                .filter(|r| r.may_match(connector))
                .map(|r| &r.route),
        );
        for a in routes.flat_map(|r| r.allowed()) {
            if !out.contains(&a.as_str()) {
                out.push(a);
            }
        }
        out
    }
}

#[cfg(feature = "yaml")]
pub(super) use load::load;

#[cfg(feature = "yaml")]
mod load {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::{ChatKindRule, Route, RouteRule, Routing};
    use crate::config::{err, parse, AgentConfig, ConfigError, ConnectorConfig};

    const FILE: &str = "routing.yaml";

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RoutingFile {
        default_agent: String,
        /// `id: agent` or `id: {agent, agents}`: read one by one, so an error names the entry.
        #[serde(default)]
        connectors: BTreeMap<String, serde_yaml::Value>,
        #[serde(default)]
        rules: Vec<serde_yaml::Value>,
    }

    /// One of `rules:` as written: the matchers and the route side by side.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct RuleFile {
        connector: Option<String>,
        chat: Option<i64>,
        topic: Option<i64>,
        kind: Option<ChatKindRule>,
        agent: String,
        #[serde(default)]
        agents: Vec<String>,
    }

    /// Parses and checks `routing.yaml` against the agents and connectors defined.
    pub(in crate::config) fn load(
        text: &str,
        agents: &BTreeMap<String, AgentConfig>,
        connectors: &BTreeMap<String, ConnectorConfig>,
    ) -> Result<Routing, ConfigError> {
        let file: RoutingFile = parse(FILE, text)?;
        let known = |field: &str, agent: &str| match agents.contains_key(agent) {
            true => Ok(()),
            false => Err(err(FILE, field, format!("unknown agent {agent:?}"))),
        };
        known("default_agent", &file.default_agent)?;
        let mut entries = BTreeMap::new();
        for (conn, value) in file.connectors {
            let field = format!("connectors.{conn}");
            if !connectors.contains_key(&conn) {
                return Err(err(
                    FILE,
                    field,
                    "unknown connector (define it in main.yaml)",
                ));
            }
            let route = match value {
                serde_yaml::Value::String(agent) => Route {
                    agent,
                    agents: Vec::new(),
                },
                other => from_value::<Route>(&field, other)?,
            };
            check_route(&field, &route, &known)?;
            entries.insert(conn, route.normalized());
        }
        for conn in connectors.keys() {
            entries.entry(conn.clone()).or_insert_with(|| {
                Route {
                    agent: file.default_agent.clone(),
                    agents: Vec::new(),
                }
                .normalized()
            });
        }
        let mut rules = Vec::new();
        for (i, value) in file.rules.into_iter().enumerate() {
            let field = format!("rules[{i}]");
            let r: RuleFile = from_value(&field, value)?;
            let rule = RouteRule {
                connector: r.connector,
                chat: r.chat,
                topic: r.topic,
                kind: r.kind,
                route: Route {
                    agent: r.agent,
                    agents: r.agents,
                },
            };
            check_rule(&field, &rule, connectors)?;
            check_route(&field, &rule.route, &known)?;
            rules.push(RouteRule {
                route: rule.route.normalized(),
                ..rule
            });
        }
        Ok(Routing {
            default_agent: file.default_agent,
            connectors: entries,
            rules,
        })
    }

    fn from_value<T: serde::de::DeserializeOwned>(
        field: &str,
        value: serde_yaml::Value,
    ) -> Result<T, ConfigError> {
        serde_yaml::from_value(value).map_err(|e| err(FILE, field, e.to_string()))
    }

    /// The matchers of a rule: at least one, a known connector, a topic only within a chat.
    fn check_rule(
        field: &str,
        rule: &RouteRule,
        connectors: &BTreeMap<String, ConnectorConfig>,
    ) -> Result<(), ConfigError> {
        if rule.connector.is_none()
            && rule.chat.is_none()
            && rule.topic.is_none()
            && rule.kind.is_none()
        {
            return Err(err(
                FILE,
                field,
                "a rule matches nothing: give at least one of connector, chat, topic, kind",
            ));
        }
        if let Some(c) = &rule.connector {
            if !connectors.contains_key(c) {
                return Err(err(
                    FILE,
                    format!("{field}.connector"),
                    format!("unknown connector {c:?} (define it in main.yaml)"),
                ));
            }
        }
        if rule.topic.is_some() && rule.chat.is_none() {
            return Err(err(
                FILE,
                format!("{field}.topic"),
                "a topic id is only unique within its chat: give chat too",
            ));
        }
        Ok(())
    }

    fn check_route(
        field: &str,
        route: &Route,
        known: &impl Fn(&str, &str) -> Result<(), ConfigError>,
    ) -> Result<(), ConfigError> {
        known(&format!("{field}.agent"), &route.agent)?;
        for (j, a) in route.agents.iter().enumerate() {
            known(&format!("{field}.agents[{j}]"), a)?;
        }
        Ok(())
    }
}

#[cfg(feature = "yaml")]
#[cfg(test)]
mod tests;

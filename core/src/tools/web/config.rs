//! `web:` in `main.yaml`: what `web_fetch` may reach and how much it reads, and how many
//! results `web_search` returns.

use serde::{Deserialize, Serialize};

/// `web:` in `main.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    /// Each request (each redirect hop of a fetch, each search) gets this long.
    pub timeout_secs: u64,
    /// A page is downloaded up to this size; the rest is not read.
    pub max_download_kb: u64,
    /// The text given to the model is cut at this size (with a note saying so); at most 64,
    /// the size of any tool result.
    pub max_text_kb: u64,
    /// Ports allowed besides 80 and 443.
    pub extra_ports: Vec<u16>,
    /// When not empty, only these hosts (`example.com`, or `.example.com` for the domain and
    /// its subdomains) may be fetched.
    pub allow_hosts: Vec<String>,
    /// These hosts are never fetched (same form).
    pub deny_hosts: Vec<String>,
    /// Lets `web_fetch` reach loopback, private and link-local addresses (a home server on
    /// your network). Off by default: a fetched URL comes from the model, which a page or a
    /// message can talk into anything.
    pub allow_private: bool,
    /// Results `web_search` returns when the model does not say (at most 10).
    pub search_results: usize,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            timeout_secs: 20,
            max_download_kb: 2048,
            max_text_kb: 64,
            extra_ports: Vec::new(),
            allow_hosts: Vec::new(),
            deny_hosts: Vec::new(),
            allow_private: false,
            search_results: 5,
        }
    }
}

impl WebConfig {
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout_secs)
    }
    pub fn max_download(&self) -> usize {
        usize::try_from(self.max_download_kb.saturating_mul(1024)).unwrap_or(usize::MAX)
    }
    pub fn max_text(&self) -> usize {
        usize::try_from(self.max_text_kb.saturating_mul(1024)).unwrap_or(usize::MAX)
    }

    /// What is wrong with it, as (field, message).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if !(1..=120).contains(&self.timeout_secs) {
            return Some(("web.timeout_secs", "must be 1 to 120".into()));
        }
        if !(1..=20_480).contains(&self.max_download_kb) {
            return Some(("web.max_download_kb", "must be 1 to 20480".into()));
        }
        if !(1..=64).contains(&self.max_text_kb) {
            return Some(("web.max_text_kb", "must be 1 to 64".into()));
        }
        if !(1..=10).contains(&self.search_results) {
            return Some(("web.search_results", "must be 1 to 10".into()));
        }
        if self.extra_ports.contains(&0) {
            return Some(("web.extra_ports", "0 is not a port".into()));
        }
        for (field, hosts) in [
            ("web.allow_hosts", &self.allow_hosts),
            ("web.deny_hosts", &self.deny_hosts),
        ] {
            let bad = hosts.iter().find(|h| {
                let name = h.strip_prefix('.').unwrap_or(h);
                name.is_empty()
                    || name.len() > 253
                    || !name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':'))
            });
            if let Some(bad) = bad {
                return Some((
                    field,
                    format!(
                        "{bad:?} is not a host name (example.com, or .example.com for a domain)"
                    ),
                ));
            }
        }
        None
    }
}

//! Whether a URL from outside (a model's tool call, a redirect) may be fetched: its scheme,
//! credentials, host and port, with every spelling of a private address refused.
//!
//! [`check`] reads a URL the way browsers and the HTTP clients of every shell do (the WHATWG
//! URL standard), refuses what could reach the machine, its network or a cloud metadata
//! service, and hands back [`Checked`]: the parts, and the URL rebuilt from them. The caller
//! fetches [`Checked::url`] and nothing else, so no second parser ever reads the raw input.
//!
//! What is refused, each with one sentence the model sees ([`Refusal`]):
//! - schemes other than `http` and `https`, and anything but exactly `//` after the scheme;
//! - credentials (`user@`, `user:pass@`, a percent-encoded `@` in the host);
//! - control characters anywhere, spaces and backslashes before the path (browsers read `\`
//!   as `/`), URLs over [`MAX_URL_BYTES`];
//! - hosts that are not public: addresses in any spelling ([`is_public`]), and names that never
//!   mean a public host (`localhost`, `.local`, `.internal` …, single labels; see `host`);
//! - ports other than 80 and 443 unless the operator lists them, port 0, and bad ports;
//! - hosts on [`Policy::deny_hosts`], or off a non-empty [`Policy::allow_hosts`]. The lists
//!   narrow what passes and never widen it: a listed private address or `localhost` is still
//!   refused.
//!
//! Names are checked as names: a public name that resolves to a private address (DNS
//! rebinding, `127.0.0.1.nip.io`) passes here. A shell that resolves names itself must check
//! every resolved address with [`is_public`] before connecting, and redirects are followed
//! by hand through [`redirect`], never by the HTTP client.

mod host;
mod location;

use std::fmt;
use std::net::IpAddr;

pub use clawless_platform::net::is_public;
pub use location::redirect;

/// Longest URL accepted, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// Most characters of the input a refusal echoes in one place.
const ECHO_CHARS: usize = 100;

/// What the operator allows beyond the defaults (`web:` in `main.yaml`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    /// Ports allowed besides 80 and 443.
    pub extra_ports: Vec<u16>,
    /// When non-empty, only these hosts pass. An entry is a host (`example.com`, an IP
    /// address) or `.example.com` / `*.example.com` for that domain and its subdomains.
    pub allow_hosts: Vec<String>,
    /// Hosts that never pass, written as in `allow_hosts`.
    pub deny_hosts: Vec<String>,
    /// Private, loopback and link-local addresses pass, and so do the names of private
    /// networks (`localhost`, `.local`, `.lan`, single labels …): for a bot that should read
    /// pages on its owner's network. Off by default.
    pub allow_private: bool,
}

/// A URL that passed: scheme, host, port, and the URL rebuilt from those parts (what is
/// fetched). Only [`check`] and [`redirect`] make one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// `https` rather than `http`.
    pub https: bool,
    pub host: Host,
    /// The port connected to (the scheme's default when the URL names none).
    pub port: u16,
    /// `scheme://host[:port]/path[?query]`: the scheme and host lower-case, IPv4 dotted,
    /// IPv6 compressed in brackets, the port only when not the scheme's default, no
    /// fragment; the path and query as given, with spaces and non-ASCII percent-encoded.
    pub url: String,
    /// Where the path starts in `url`.
    path_start: usize,
}

impl Checked {
    /// `scheme://host[:port]`.
    pub fn origin(&self) -> &str {
        self.url.get(..self.path_start).unwrap_or(&self.url)
    }

    /// `/path[?query]`.
    pub fn path_and_query(&self) -> &str {
        self.url.get(self.path_start..).unwrap_or("/")
    }
}

/// A host that passed: a DNS name or an IP address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// Lower-case ASCII letters, digits, `-`, `_` and dots; no trailing dot.
    Name(String),
    /// A public address.
    Ip(IpAddr),
}

impl fmt::Display for Host {
    /// The name, or the address without brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// Why a URL is refused, as one sentence the model sees (e.g. "refused: 127.0.0.1 is a
/// loopback address"). It shows at most 100 characters of the input in any one place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

fn refused(reason: impl fmt::Display) -> Refusal {
    Refusal(format!("refused: {reason}"))
}

/// `text` quoted and escaped as Rust does, cut to [`ECHO_CHARS`] characters.
fn quoted(text: &str) -> String {
    clipped(&format!("{text:?}"))
}

/// `text` cut to [`ECHO_CHARS`] characters.
fn clipped(text: &str) -> String {
    match text.char_indices().nth(ECHO_CHARS) {
        Some((end, _)) => format!("{}…", text.get(..end).unwrap_or_default()),
        None => text.to_owned(),
    }
}

/// Whether `url` may be fetched, and what to fetch.
pub fn check(url: &str, policy: &Policy) -> Result<Checked, Refusal> {
    if url.len() > MAX_URL_BYTES {
        return Err(refused(format_args!(
            "the URL is {} bytes long (at most {MAX_URL_BYTES})",
            url.len()
        )));
    }
    // Browsers drop leading and trailing control characters and spaces; any left inside is
    // refused rather than dropped, as they would drop tabs and newlines mid-URL.
    let url = url.trim_matches(|c: char| c <= ' ');
    if let Some(c) = url.chars().find(|c| c.is_control()) {
        return Err(refused(format_args!(
            "the URL contains the control character {c:?}"
        )));
    }
    let (https, rest) = scheme(url)?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (host_text, port_text) = split_authority(authority)?;
    let host = host::parse(host_text, policy.allow_private)?;
    let port = port(port_text, https)?;
    screen(&host, port, policy)?;
    Ok(rebuild(https, host, port, tail))
}

/// Whether the URL is `http://` or `https://` (any case), and what follows the `//`.
fn scheme(url: &str) -> Result<(bool, &str), Refusal> {
    let Some((scheme, rest)) = split_scheme(url) else {
        return Err(refused(
            "the URL has no scheme: only http:// and https:// URLs can be fetched",
        ));
    };
    let https = if scheme.eq_ignore_ascii_case("https") {
        true
    } else if scheme.eq_ignore_ascii_case("http") {
        false
    } else {
        return Err(refused(format_args!(
            "the scheme {} is not allowed: only http:// and https:// URLs can be fetched",
            quoted(scheme)
        )));
    };
    let slashes = rest.len() - rest.trim_start_matches(['/', '\\']).len();
    let (lead, after) = rest.split_at(slashes);
    if lead.contains('\\') {
        return Err(refused(
            "the URL has a backslash before the host (browsers read it as `/`)",
        ));
    }
    if lead != "//" {
        return Err(refused(format_args!(
            "after `{scheme}:` come exactly two slashes and the host"
        )));
    }
    Ok((https, after))
}

/// `(scheme, rest)` when `url` starts with a syntactic scheme and `:` (RFC 3986), before any
/// `/`, `?` or `#`.
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once(':')?;
    let mut chars = scheme.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (first_ok && rest_ok).then_some((scheme, rest))
}

/// The host (brackets kept) and the port text (`None` without a `:`) of an authority.
fn split_authority(authority: &str) -> Result<(&str, Option<&str>), Refusal> {
    if authority.contains('\\') {
        return Err(refused(
            "the URL has a backslash before the path (browsers read it as `/`)",
        ));
    }
    if authority.contains('@') {
        return Err(refused(
            "the URL holds credentials (`user@` or `user:pass@`), which are not allowed",
        ));
    }
    if authority.contains(' ') {
        return Err(refused(format_args!(
            "the host {} contains a space",
            quoted(authority)
        )));
    }
    if authority.starts_with('[') {
        let Some(close) = authority.find(']') else {
            return Err(refused("the IPv6 address has no closing `]`"));
        };
        let (host, after) = authority.split_at(close + 1);
        return match after.strip_prefix(':') {
            Some(port) => Ok((host, Some(port))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(refused(format_args!(
                "{} follows the IPv6 address where only `:port` may",
                quoted(after)
            ))),
        };
    }
    Ok(match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

/// The port: the scheme's default when absent or empty, else decimal 1..=65535.
fn port(text: Option<&str>, https: bool) -> Result<u16, Refusal> {
    let text = match text {
        None | Some("") => return Ok(if https { 443 } else { 80 }),
        Some(text) => text,
    };
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refused(format_args!(
            "the port {} is not a number",
            quoted(text)
        )));
    }
    let value = text.bytes().fold(0u32, |n, d| {
        n.saturating_mul(10).saturating_add(u32::from(d - b'0'))
    });
    match u16::try_from(value) {
        Ok(0) => Err(refused("port 0 is not a port one can connect to")),
        Ok(port) => Ok(port),
        Err(_) => Err(refused(format_args!(
            "the port {} is out of range (1 to 65535)",
            quoted(text)
        ))),
    }
}

/// The operator's lists and ports.
fn screen(host: &Host, port: u16, policy: &Policy) -> Result<(), Refusal> {
    if policy.deny_hosts.iter().any(|e| matches(e, host)) {
        return Err(refused(format_args!(
            "{} is on the operator's deny list",
            clipped(&host.to_string())
        )));
    }
    if !policy.allow_hosts.is_empty() && !policy.allow_hosts.iter().any(|e| matches(e, host)) {
        let listed = policy.allow_hosts.iter().take(8).map(|e| quoted(e));
        return Err(refused(format_args!(
            "{} is not on the operator's allow list ({})",
            clipped(&host.to_string()),
            listed.collect::<Vec<_>>().join(", ")
        )));
    }
    if !(port == 80 || port == 443 || policy.extra_ports.contains(&port)) {
        let extra = policy.extra_ports.iter().map(|p| format!(", {p}"));
        return Err(refused(format_args!(
            "port {port} is not allowed (allowed: 80, 443{})",
            extra.collect::<String>()
        )));
    }
    Ok(())
}

/// Whether a list entry (`host`, `.domain`, `*.domain`, an IP address) names `host`.
fn matches(entry: &str, host: &Host) -> bool {
    let entry = entry.trim().trim_end_matches('.').to_ascii_lowercase();
    match host {
        Host::Ip(ip) => {
            let bare = entry.trim_start_matches('[').trim_end_matches(']');
            bare.parse::<IpAddr>().is_ok_and(|e| e == *ip)
        }
        Host::Name(name) => match entry.strip_prefix("*.").or(entry.strip_prefix('.')) {
            Some(domain) => host::has_suffix(name, domain),
            None => *name == entry,
        },
    }
}

/// The URL from its checked parts and `tail` (what follows the authority).
fn rebuild(https: bool, host: Host, port: u16, tail: &str) -> Checked {
    let scheme = if https { "https" } else { "http" };
    let mut url = match &host {
        Host::Ip(IpAddr::V6(ip)) => format!("{scheme}://[{ip}]"),
        host => format!("{scheme}://{host}"),
    };
    if port != if https { 443 } else { 80 } {
        url.push_str(&format!(":{port}"));
    }
    let path_start = url.len();
    let tail = tail.split('#').next().unwrap_or_default();
    if !tail.starts_with('/') {
        url.push('/');
    }
    for c in tail.chars() {
        if c == ' ' || !c.is_ascii() {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                url.push_str(&format!("%{b:02X}"));
            }
        } else {
            url.push(c);
        }
    }
    Checked {
        https,
        host,
        port,
        url,
        path_start,
    }
}

#[cfg(test)]
mod tests;

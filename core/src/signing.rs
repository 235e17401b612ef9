//! What the control panel signs and checks with, derived once per bot from its token and
//! webhook secret (see `crate::panel::auth`): HMAC-SHA-256 keys, and the helpers over them.

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA-256 of `parts`, each followed by a newline, under `key`.
pub(crate) fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let Ok(mut m) = <HmacSha256 as KeyInit>::new_from_slice(key) else {
        // HMAC takes keys of every length, so this is not reached; were it, a keyed hash
        // would still be no one else's to compute.
        let mut h = Sha256::new();
        h.update(key);
        parts.iter().for_each(|p| h.update(p));
        return h.finalize().into();
    };
    for p in parts {
        m.update(p);
        m.update(b"\n");
    }
    m.finalize().into_bytes().into()
}

/// HMAC-SHA-256 of `data` alone (Telegram's construction), hex.
pub(crate) fn mac_hex(key: &[u8], data: &[u8]) -> String {
    match <HmacSha256 as KeyInit>::new_from_slice(key) {
        Ok(mut m) => {
            m.update(data);
            hex(&m.finalize().into_bytes())
        }
        // Not reached (see `mac`); nothing can match an empty hash.
        Err(_) => String::new(),
    }
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The keys one bot's panel works with, derived once from its token and webhook secret.
#[derive(Clone)]
pub struct PanelKeys {
    /// HMAC-SHA-256(`WebAppData`, bot token): what Telegram signs launch data with.
    pub(crate) webapp: [u8; 32],
    /// What links, cookies and CSRF tokens are signed with.
    pub(crate) own: [u8; 32],
}

impl std::fmt::Debug for PanelKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PanelKeys(redacted)")
    }
}

impl PanelKeys {
    pub fn new(bot_token: &str, webhook_secret: &str) -> PanelKeys {
        let webapp = match <HmacSha256 as KeyInit>::new_from_slice(b"WebAppData") {
            Ok(mut m) => {
                m.update(bot_token.as_bytes());
                m.finalize().into_bytes().into()
            }
            Err(_) => mac(b"WebAppData", &[bot_token.as_bytes()]),
        };
        PanelKeys {
            webapp,
            own: mac(
                b"clawless panel",
                &[bot_token.as_bytes(), webhook_secret.as_bytes()],
            ),
        }
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

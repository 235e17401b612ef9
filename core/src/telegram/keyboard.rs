//! Inline keyboard buttons as the Bot API takes them, and the taps the panel makes.

/// The start of the callback query id of a tap the control panel makes for an answer given
/// there (`crate::panel::approvals`): never a Telegram id, never answered to Telegram.
pub const PANEL_TAP: &str = "panel:";

/// One inline keyboard button: `(label, callback data)`, `(label, URL)` or a Mini App
/// `(label, HTTPS URL)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key<'a> {
    Callback(&'a str, &'a str),
    Url(&'a str, &'a str),
    WebApp(&'a str, &'a str),
}

//! The error every port returns: a kind the core can branch on, and the backend's message.

/// What went wrong, in terms the core can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The key, file or record does not exist.
    NotFound,
    /// The input was refused (bad path, bad key, wrong dimension …); retrying will not help.
    Invalid,
    /// A compare-and-swap style conflict.
    Conflict,
    /// The backend asked us to slow down.
    RateLimited,
    /// The call did not finish in time.
    Timeout,
    /// The backend could not be reached or failed; retrying later may help.
    Unavailable,
}

/// A port error. `message` is the backend's text: no backend types leak into the core.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct PortError {
    pub kind: ErrorKind,
    pub message: String,
}

impl PortError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, message)
    }
    /// Whether trying the same call again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::RateLimited | ErrorKind::Timeout | ErrorKind::Unavailable
        )
    }
}

pub type Result<T, E = PortError> = std::result::Result<T, E>;

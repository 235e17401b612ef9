//! clawless core.

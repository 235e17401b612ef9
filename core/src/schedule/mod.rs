//! Reminders and scheduled tasks (placeholder).

pub mod cron;
pub mod zone;

//! `current_time`: the current date and time in a time zone or at a UTC offset.

use std::sync::Arc;

use async_trait::async_trait;
use clawless_platform::Clock;
use serde_json::{json, Value};

use super::{Level, Tool, ToolContext, ToolError};
use crate::llm::ToolSpec;
use crate::schedule::zone::Zone;

pub struct CurrentTime {
    pub clock: Arc<dyn Clock>,
}

#[async_trait]
impl Tool for CurrentTime {
    fn stays_inside(&self) -> bool {
        true
    }

    fn level(&self) -> Level {
        Level::Safe
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "current_time".into(),
            description: "The current date, time and weekday. Give `zone`, an IANA time zone like \"Europe/Berlin\" or \"America/New_York\", or `utc_offset` like \"+02:00\", \"-05:30\" or \"UTC\", for local time there (default UTC).".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "zone": {"type": "string", "description": "IANA time zone, e.g. Europe/Berlin"},
                    "utc_offset": {"type": "string", "description": "UTC offset, e.g. +02:00"}
                },
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, _ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
        let mut zone = Zone::utc();
        for field in ["utc_offset", "zone"] {
            match input.get(field) {
                None | Some(Value::Null) => {}
                // Either field takes either form.
                Some(Value::String(s)) => {
                    zone = Zone::find(s).ok_or_else(|| {
                        ToolError(format!(
                            "{field} {s:?} is neither a time zone like Europe/Berlin nor an offset like +02:00 or UTC"
                        ))
                    })?
                }
                Some(other) => {
                    return Err(ToolError(format!("{field} must be a string, got {other}")))
                }
            }
        }
        Ok(zone.format((self.clock.now_ms() / 1000) as i64, true))
    }
}

/// Parses "UTC", "Z", "+02:00", "-0530", "+3", "UTC+3" into minutes east of UTC.
pub fn parse_offset(s: &str) -> Option<i64> {
    crate::schedule::zone::parse_offset(s)
}

/// Formats `ms` since the epoch at `offset_min` as `2026-11-22 14:05:09 (Sunday), UTC+02:00`.
pub fn format_time(ms: u64, offset_min: i64) -> String {
    let zone =
        Zone::find(&crate::schedule::zone::offset_text(offset_min * 60)).unwrap_or_else(Zone::utc);
    zone.format((ms / 1000) as i64, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawless_platform::FakeClock;
    use futures::executor::block_on;

    #[test]
    fn formats_known_instants() {
        assert_eq!(
            format_time(0, 0),
            "1970-01-01 00:00:00 (Thursday), UTC+00:00"
        );
        // 2024-02-29 23:30:00 UTC is 2024-03-01 05:00 at +05:30.
        assert_eq!(
            format_time(1_709_249_400_000, 330),
            "2024-03-01 05:00:00 (Friday), UTC+05:30"
        );
        assert_eq!(
            format_time(1_709_249_400_000, -480),
            "2024-02-29 15:30:00 (Thursday), UTC-08:00"
        );
    }

    #[test]
    fn a_registry_builds_its_specs_once_and_again_when_a_tool_joins() {
        let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(0));
        let mut reg = crate::tools::ToolRegistry::default();
        reg.register(Arc::new(CurrentTime {
            clock: clock.clone(),
        }));
        let first = reg.specs();
        assert!(
            Arc::ptr_eq(&first, &reg.specs()),
            "built once, shared after"
        );
        assert!(
            Arc::ptr_eq(&first, &reg.clone().specs()),
            "a clone carries them"
        );
        assert_eq!(first.len(), 1);
        /// The same tool under another name.
        struct Renamed(CurrentTime);
        #[async_trait]
        impl Tool for Renamed {
            fn level(&self) -> Level {
                Level::Safe
            }
            fn spec(&self) -> ToolSpec {
                ToolSpec {
                    name: "current_time_again".into(),
                    ..self.0.spec()
                }
            }
            async fn call(&self, ctx: &ToolContext, input: Value) -> Result<String, ToolError> {
                self.0.call(ctx, input).await
            }
        }
        let mut more = reg.clone();
        more.register(Arc::new(Renamed(CurrentTime { clock })));
        assert_eq!(more.specs().len(), 2, "a tool that joins is in the specs");
        assert_eq!(reg.specs().len(), 1, "the original keeps its own");
    }

    #[test]
    fn zone_names_and_offsets_both_work() {
        let tool = CurrentTime {
            clock: Arc::new(FakeClock::new(1_785_000_000_000)),
        };
        let ctx = crate::tools::tests_ctx();
        let call = |input: Value| block_on(tool.call(&ctx, input));
        assert_eq!(
            call(json!({"zone": "Europe/Berlin"})).unwrap(),
            "2026-07-25 19:20:00 (Saturday), Europe/Berlin (UTC+02:00)"
        );
        assert_eq!(
            call(json!({"zone": "america/new_york"})).unwrap(),
            "2026-07-25 13:20:00 (Saturday), America/New_York (UTC-04:00)"
        );
        assert_eq!(
            call(json!({"utc_offset": "+02:00"})).unwrap(),
            "2026-07-25 19:20:00 (Saturday), UTC+02:00"
        );
        assert_eq!(
            call(json!({"utc_offset": "Asia/Tokyo"})).unwrap(),
            "2026-07-26 02:20:00 (Sunday), Asia/Tokyo (UTC+09:00)"
        );
        assert_eq!(
            call(json!({})).unwrap(),
            "2026-07-25 17:20:00 (Saturday), UTC+00:00"
        );
        assert!(call(json!({"zone": "Mars/Base"}))
            .unwrap_err()
            .0
            .contains("neither a time zone"));
    }
}

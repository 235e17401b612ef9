//! The policy pass of a round: before any call of the round runs, each gets its rule (allow,
//! ask, deny) from the agent's policy, a grant, a crash's unknown outcome or the untrusted
//! text the turn read; a call that would carry a secret out is marked refused; the first call
//! that must ask and has no verdict yet stops the round.

use serde_json::Value;

use super::{Agent, PendingCall, RunState};
use crate::config::Rule;
use crate::tools::{Level, ToolContext, ToolRegistry};

impl Agent {
    /// The rule of each of `calls` (id, tool, input), in order, with the refusal of one that
    /// would carry a secret out; `Err` with the first call that must ask (and has no verdict
    /// in `state` yet). A turn that is closing answers such a call with its closing verdict.
    pub(super) fn rules_of_round(
        &self,
        registry: &ToolRegistry,
        ctx: &ToolContext,
        state: &mut RunState,
        calls: &[(String, String, Value)],
    ) -> Result<Vec<(Rule, Option<String>)>, PendingCall> {
        let mut rules = Vec::with_capacity(calls.len());
        for (id, name, input) in calls {
            if state.result_of(id).is_some() || state.running.as_deref() == Some(id) {
                // Done (or begun) before a crash: neither asked about nor run again.
                rules.push((Rule::Allow, None));
                continue;
            }
            // A tool this agent does not have is not asked about, whatever the turn read: the
            // call gets the "unknown tool" error (found by fuzzing: a made-up 4,000-character
            // name reached the approval message; and by the injection corpus on the Worker:
            // `exec`, which only native offers, was asked about after a page ordered it).
            let Some(tool) = registry.get(name) else {
                rules.push((Rule::Allow, None));
                continue;
            };
            let level = tool.level_for(ctx, input);
            // A call that would carry a secret out is refused below, never asked about.
            let leak = self.leak(tool.as_ref(), name, input);
            if leak.is_some() {
                rules.push((Rule::Allow, leak));
                continue;
            }
            let mut rule = self.config.policy.rule(name, level);
            // A crash left an earlier call of this tool with an unknown outcome: an
            // unsafe one is the user's to decide again, whatever the policy or grant.
            let unsure = level == Level::Unsafe && state.unsure.contains(name);
            // After untrusted text, what acts outside or later is the user's to allow.
            let risky = level == Level::Unsafe || tool.acts_beyond(input);
            let tainted = match self.config.policy.ask_after_untrusted && risky {
                true => state.why_tainted(),
                false => None,
            };
            if (unsure || tainted.is_some()) && rule != Rule::Deny {
                rule = Rule::Ask;
            }
            if rule == Rule::Ask
                && (unsure || tainted.is_some() || !ctx.granted.contains(name))
                && !state.verdicts.contains_key(id)
            {
                if let Some(closing) = state.closing {
                    state.verdicts.insert(id.clone(), closing);
                } else {
                    let call = PendingCall {
                        id: id.clone(),
                        name: name.clone(),
                        input: input.clone(),
                        level,
                        why: tainted,
                    };
                    return Err(call);
                }
            }
            rules.push((rule, None));
        }
        Ok(rules)
    }
}

//! `clawless chat`: a conversation with the agent in this terminal, through the core's local
//! chat (no Telegram).

use std::io::{BufRead, Write};

use anyhow::Result;
use clawless_core::SessionKey;

use super::{build, ConfigProblem};

/// Reads lines from stdin and prints the agent's answers; `/new` starts over, Ctrl-D quits.
pub(super) async fn chat(connector: Option<&str>) -> Result<()> {
    let n = build().await?;
    if !n.app.admin().has_model() {
        return Err(ConfigProblem("set ANTHROPIC_API_KEY or OPENAI_API_KEY first".into()).into());
    }
    let connector = n.app.admin().connector_id(connector)?;
    let session = &SessionKey::new("local:terminal");
    println!("clawless chat — /new starts over, Ctrl-D quits");
    let stdin = std::io::stdin();
    loop {
        print!("> ");
        std::io::stdout().flush()?;
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == "/new" {
            n.app.admin().reset_session(session).await?;
            println!("(fresh conversation)");
            continue;
        }
        match n.app.chat_local(&connector, session, line).await {
            Ok(reply) => println!("{reply}\n"),
            Err(e) => println!("(error: {e})\n"),
        }
    }
}

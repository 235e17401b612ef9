//! The command line against a deployed Worker or Lambda: its `/admin/<name>` endpoint
//! (`clawless audit --remote`, `doctor --remote`, `webhook set --remote`), with the token in
//! `CLAWLESS_ADMIN_TOKEN`. One call: the token read, the request bounded in time, each refusal
//! said in one sentence.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clawless_core::doctor::{Check, Status};
use serde_json::Value;

/// The longest answer read from a deployment.
const MAX_ANSWER: usize = 8 << 20;
/// Parts of one export taken, at most (each moves the cursor on; one archive holds fewer).
const MAX_PARTS: usize = 100_000;

/// Why a remote call could not be made: a missing token is the caller's configuration.
#[derive(Debug, thiserror::Error)]
#[error("CLAWLESS_ADMIN_TOKEN is not set (the token the deployment has)")]
pub struct NoToken;

/// `method` `<base>/admin/<path_and_query>` with the admin token: the JSON answered, and the
/// HTTP status (`/admin/setup` answers 502 with its report when a step failed).
pub async fn admin(
    env: &clawless_core::Env,
    base: &str,
    method: reqwest::Method,
    path_and_query: &str,
) -> Result<(u16, Value)> {
    let (status, bytes) = call(env, base, method, path_and_query, None, MAX_ANSWER).await?;
    let text = String::from_utf8_lossy(&bytes);
    let base = base.trim_end_matches('/');
    let answer = serde_json::from_str(&text).with_context(|| format!("{base} answered no JSON"))?;
    Ok((status, answer))
}

/// One admin call: the status (200, or 502 with a report) and the body, at most `cap` bytes;
/// every other answer is an error that says what to do.
async fn call(
    env: &clawless_core::Env,
    base: &str,
    method: reqwest::Method,
    path_and_query: &str,
    body: Option<Vec<u8>>,
    cap: usize,
) -> Result<(u16, Vec<u8>)> {
    let token = env
        .get("CLAWLESS_ADMIN_TOKEN")
        .filter(|t| !t.is_empty())
        .ok_or(NoToken)?;
    let base = base.trim_end_matches('/');
    let name = path_and_query.split('?').next().unwrap_or(path_and_query);
    let url = format!("{base}/admin/{path_and_query}");
    let mut request = reqwest::Client::builder()
        .timeout(Duration::from_secs(90))
        .build()?
        .request(method, &url)
        .bearer_auth(token);
    if let Some(body) = body {
        request = request
            .header(reqwest::header::CONTENT_TYPE, "application/gzip")
            .body(body);
    }
    let mut response = request
        .send()
        .await
        .with_context(|| format!("asking {base}"))?;
    let status = response.status().as_u16();
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap_or_default() {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > cap {
            bail!("{base} answered more than {} MB", cap >> 20);
        }
    }
    match status {
        200 | 502 => Ok((status, bytes)),
        401 => bail!("{base} refused the token in CLAWLESS_ADMIN_TOKEN"),
        404 => bail!(
            "{base} has no /admin/{name}: set CLAWLESS_ADMIN_TOKEN on the deployment (a secret), and deploy this version"
        ),
        _ => bail!(
            "{base} answered {status}: {}",
            String::from_utf8_lossy(&bytes)
                .chars()
                .take(300)
                .collect::<String>()
        ),
    }
}

/// `GET /admin/export?<query>`, part after part until the last: the whole archive, put back
/// together here.
pub async fn export(env: &clawless_core::Env, base: &str, query: &str) -> Result<Vec<u8>> {
    use clawless_core::archive::{cursor_query, unpack, Joined, Limits};
    let mut joined = Joined::default();
    let mut cursor = String::new();
    for n in 1..=MAX_PARTS {
        let mut q = Vec::new();
        if !query.is_empty() {
            q.push(query.to_owned());
        }
        // Empty the first time: asks for parts.
        q.push(cursor_query(&cursor));
        let path = format!("export?{}", q.join("&"));
        let cap = clawless_core::admin_http::MAX_ADMIN_BODY;
        let (_, bytes) = call(env, base, reqwest::Method::GET, &path, None, cap)
            .await
            .with_context(|| format!("part {n} of the export"))?;
        let (manifest, part) = unpack(&bytes, &Limits::export_part())
            .with_context(|| format!("{base} answered a part {n} that does not read"))?;
        match joined.add(manifest, part)? {
            Some(next) if next == cursor => bail!("{base} answered part {n} without moving on"),
            Some(next) => cursor = next,
            None => return Ok(joined.archive(&Limits::default())?),
        }
    }
    bail!("{base} answered more than {MAX_PARTS} parts")
}

/// `POST /admin/import[?overwrite=1]` of `archive` (checked here first) in parts, then one
/// request per memory scope to index: what the deployment did, added up. A part refused stops
/// it; importing again finishes it (parts already in are found the same).
pub async fn import(
    env: &clawless_core::Env,
    base: &str,
    archive: &[u8],
    overwrite: bool,
) -> Result<clawless_core::archive::ImportReport> {
    use clawless_core::archive::{reindex_parts, split, unpack, ImportReport, Limits};
    let (manifest, contents) = unpack(archive, &Limits::default())?;
    // Refused here, before the first part is sent, as a whole archive's import refuses it.
    clawless_core::archive::admissible(&manifest, &contents)?;
    let (parts, notes) = split(&manifest, &contents)?;
    let parts: Vec<Vec<u8>> = parts
        .into_iter()
        .chain(reindex_parts(&manifest, &notes)?)
        .collect();
    let path = match overwrite {
        true => "import?overwrite=1",
        false => "import",
    };
    let mut report = ImportReport::default();
    let count = parts.len();
    for (i, part) in parts.into_iter().enumerate() {
        let (_, bytes) = call(
            env,
            base,
            reqwest::Method::POST,
            path,
            Some(part),
            MAX_ANSWER,
        )
        .await
        .with_context(|| format!("part {} of {count}", i + 1))?;
        report.add(serde_json::from_slice(&bytes).context("the deployment's report")?);
    }
    Ok(report)
}

/// What `clawless audit --remote` asks for.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub chat: Option<i64>,
    /// How far back, ms.
    pub since: u64,
    pub connector: Option<String>,
}

/// `clawless audit --remote URL`: the deployment's `GET /admin/audit`, printed as the local
/// trail is (or one JSON object per line).
pub async fn audit(
    env: &clawless_core::Env,
    base: &str,
    filter: &AuditFilter,
    json: bool,
) -> Result<()> {
    let mut query = format!("audit?since={}s", filter.since / 1000);
    if let Some(chat) = filter.chat {
        query.push_str(&format!("&chat={chat}"));
    }
    if let Some(c) = &filter.connector {
        query.push_str(&format!("&connector={c}"));
    }
    let (_, answer) = admin(env, base, reqwest::Method::GET, &query).await?;
    let entries = answer["entries"].as_array().cloned().unwrap_or_default();
    for v in entries {
        if json {
            println!("{v}");
            continue;
        }
        let id = v["connector"].as_str().unwrap_or("?").to_owned();
        match serde_json::from_value::<clawless_core::audit::Entry>(v) {
            Ok(e) => println!("{id} chat {} {}", e.chat, clawless_core::audit::line(&e)),
            Err(e) => println!("{id} (an entry this version cannot read: {e})"),
        }
    }
    Ok(())
}

/// `clawless doctor --remote URL`: the deployment's `GET /admin/doctor`.
pub async fn doctor(env: &clawless_core::Env, base: &str) -> Result<Vec<Check>> {
    let (_, answer) = admin(env, base, reqwest::Method::GET, "doctor").await?;
    doctor_checks(&answer)
}

/// `clawless webhook set --remote URL`: the deployment sets itself up (`POST /admin/setup`),
/// each step printed.
pub async fn setup(env: &clawless_core::Env, base: &str) -> Result<()> {
    let (status, answer) = admin(env, base, reqwest::Method::POST, "setup").await?;
    let report: clawless_core::admin::SetupReport = serde_json::from_value(answer)
        .context("the deployment's set-up report is not in a form this version reads")?;
    for step in &report.steps {
        println!("{step}");
    }
    if status != 200 || !report.ok {
        bail!("the set-up did not finish: see above");
    }
    Ok(())
}

/// `doctor`'s checks as lines: `ok`, `warn` or `FAIL`, the check's name, what was found.
pub fn doctor_lines(checks: &[Check]) -> Vec<String> {
    checks
        .iter()
        .map(|c| {
            let mark = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            format!("{mark} {}: {}", c.name, c.detail)
        })
        .collect()
}

/// The checks of a `/admin/doctor` answer.
pub fn doctor_checks(answer: &Value) -> Result<Vec<Check>> {
    serde_json::from_value(answer.get("checks").cloned().unwrap_or(Value::Null))
        .context("the deployment's checks are not in a form this version reads")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_check_is_one_line_marked_by_its_status() {
        let checks = doctor_checks(&serde_json::json!({"ok": false, "checks": [
            {"name": "telegram main", "status": "ok", "detail": "the token is @x's"},
            {"name": "backlog", "status": "fail", "detail": "stuck"},
        ]}))
        .unwrap_or_default();
        assert_eq!(
            doctor_lines(&checks),
            [
                "ok   telegram main: the token is @x's",
                "FAIL backlog: stuck"
            ]
        );
        assert!(doctor_checks(&serde_json::json!({"checks": [{"name": 1}]})).is_err());
    }
}

//! `clawless health`: asks a running `clawless serve` for `GET /healthz`, for the container
//! image's HEALTHCHECK (the image has no curl).

use std::time::Duration;

use anyhow::{Context, Result};

/// Ok when `http://ADDR/healthz` answers with a 2xx within 5 s.
pub async fn check(addr: &str) -> Result<()> {
    let url = format!("http://{addr}/healthz");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .context("building the HTTP client")?;
    let status = client
        .get(&url)
        .send()
        .await
        .with_context(|| format!("{url} did not answer"))?
        .status();
    anyhow::ensure!(status.is_success(), "{url} answered {status}");
    Ok(())
}

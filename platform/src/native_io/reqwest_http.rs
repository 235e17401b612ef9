//! The Http port over reqwest with rustls.

use crate::{async_trait, Http, HttpRequest, HttpResponse, Method, PortError};

#[derive(Clone)]
pub struct ReqwestHttp {
    client: reqwest::Client,
}

impl ReqwestHttp {
    pub fn new() -> Result<Self, PortError> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("clawless/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| PortError::unavailable(format!("http client: {e}")))?;
        Ok(Self { client })
    }
}

fn map_err(e: reqwest::Error) -> PortError {
    // The error text can hold the URL, and Bot API URLs hold the token: never keep it.
    let e = e.without_url();
    if e.is_timeout() {
        PortError::timeout(e.to_string())
    } else if e.is_builder() {
        PortError::invalid(e.to_string())
    } else {
        PortError::unavailable(e.to_string())
    }
}

#[async_trait]
impl Http for ReqwestHttp {
    async fn send(&self, req: HttpRequest) -> Result<HttpResponse, PortError> {
        let method = match req.method {
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            Method::Delete => reqwest::Method::DELETE,
        };
        let mut builder = self
            .client
            .request(method, &req.url)
            .timeout(req.timeout)
            .body(req.body);
        for (k, v) in &req.headers {
            builder = builder.header(k, v);
        }
        let resp = builder.send().await.map_err(map_err)?;
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .filter_map(|(k, v)| {
                Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.to_owned()))
            })
            .collect();
        let body = resp.bytes().await.map_err(map_err)?.to_vec();
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }
}

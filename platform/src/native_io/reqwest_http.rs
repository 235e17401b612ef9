//! The Http port over reqwest with rustls. Requests to URLs from outside go through a second
//! client that follows no redirect and resolves names itself, refusing non-public addresses
//! (see [`crate::Http::send`]): the address checked is the address connected to, so a name
//! cannot pass the check and then re-resolve somewhere private. A streamed body is read with
//! `Response::chunk`; reqwest's timeout already covers the body, the idle bound is a tokio
//! timeout around each piece.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::http::{BodyStream, Capped, HttpStreamResponse};
use crate::net::is_public;
use crate::{async_trait, Http, HttpRequest, HttpResponse, Method, PortError};

#[derive(Clone)]
pub struct ReqwestHttp {
    client: reqwest::Client,
    /// For URLs from outside: no redirects, public addresses only.
    outside: reqwest::Client,
    /// For URLs from outside when the operator allows the private network: no redirects.
    outside_private: reqwest::Client,
}

impl ReqwestHttp {
    pub fn new() -> Result<Self, PortError> {
        let builder = || {
            reqwest::Client::builder().user_agent(concat!("clawless/", env!("CARGO_PKG_VERSION")))
        };
        let build = |b: reqwest::ClientBuilder| {
            b.build()
                .map_err(|e| PortError::unavailable(format!("http client: {e}")))
        };
        let none = reqwest::redirect::Policy::none;
        // No proxy for URLs from outside: through a proxy (HTTP_PROXY and the like, which
        // reqwest reads by default) the proxy would resolve the name, past `PublicOnly`.
        Ok(Self {
            client: build(builder())?,
            outside: build(
                builder()
                    .redirect(none())
                    .no_proxy()
                    .dns_resolver(Arc::new(PublicOnly)),
            )?,
            outside_private: build(builder().redirect(none()).no_proxy())?,
        })
    }
}

/// Resolves with the system resolver and refuses a name with any non-public address.
struct PublicOnly;

/// A name that resolved to a non-public address.
#[derive(Debug)]
struct PrivateAddress(String);

impl std::fmt::Display for PrivateAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PrivateAddress {}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some(bad) = addrs.iter().find(|a| !is_public(a.ip())) {
                let msg = format!(
                    "{host} resolves to {}, which is not a public address",
                    bad.ip()
                );
                return Err(
                    Box::new(PrivateAddress(msg)) as Box<dyn std::error::Error + Send + Sync>
                );
            }
            if addrs.is_empty() {
                return Err(format!("{host} has no address").into());
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

fn map_err(e: reqwest::Error) -> PortError {
    // The error text can hold the URL, and Bot API URLs hold the token: never keep it.
    let e = e.without_url();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        if let Some(private) = s.downcast_ref::<PrivateAddress>() {
            return PortError::invalid(private.to_string());
        }
        source = s.source();
    }
    if e.is_timeout() {
        PortError::timeout(e.to_string())
    } else if e.is_builder() {
        PortError::invalid(e.to_string())
    } else {
        PortError::unavailable(e.to_string())
    }
}

impl ReqwestHttp {
    /// Sends `req` (its body moved out) and returns the response once its head has arrived.
    async fn start(&self, req: &mut HttpRequest) -> Result<reqwest::Response, PortError> {
        let method = match req.method {
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            Method::Delete => reqwest::Method::DELETE,
        };
        let client = match req.outside {
            None => &self.client,
            Some(o) if o.allow_private => &self.outside_private,
            Some(_) => &self.outside,
        };
        let mut builder = client
            .request(method, &req.url)
            .timeout(req.timeout)
            .body(std::mem::take(&mut req.body));
        for (k, v) in &req.headers {
            builder = builder.header(k, v);
        }
        builder.send().await.map_err(map_err)
    }
}

/// Response header names in lower case; values that are not text are left out.
fn headers(resp: &reqwest::Response) -> Vec<(String, String)> {
    resp.headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.to_owned())))
        .collect()
}

/// A body read piece by piece, each wait bounded by `idle`.
struct Pieces {
    resp: reqwest::Response,
    idle: Option<Duration>,
}

#[async_trait]
impl BodyStream for Pieces {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, PortError> {
        let piece = match self.idle {
            None => self.resp.chunk().await,
            Some(idle) => tokio::time::timeout(idle, self.resp.chunk())
                .await
                .map_err(|_| PortError::timeout(format!("no data for {idle:?}")))?,
        };
        Ok(piece.map_err(map_err)?.map(|b| b.to_vec()))
    }
}

#[async_trait]
impl Http for ReqwestHttp {
    async fn send(&self, mut req: HttpRequest) -> Result<HttpResponse, PortError> {
        let mut resp = self.start(&mut req).await?;
        let status = resp.status().as_u16();
        let headers = headers(&resp);
        let (body, truncated) = match req.outside {
            None => (resp.bytes().await.map_err(map_err)?.to_vec(), false),
            Some(o) => {
                let mut body = Vec::new();
                let mut truncated = false;
                while let Some(chunk) = resp.chunk().await.map_err(map_err)? {
                    let room = o.max_body - body.len();
                    if chunk.len() > room {
                        body.extend_from_slice(&chunk[..room]);
                        truncated = true;
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                (body, truncated)
            }
        };
        Ok(HttpResponse {
            status,
            headers,
            body,
            truncated,
        })
    }

    async fn send_streaming(&self, mut req: HttpRequest) -> Result<HttpStreamResponse, PortError> {
        let resp = self.start(&mut req).await?;
        let status = resp.status().as_u16();
        let headers = headers(&resp);
        let pieces = Pieces {
            resp,
            idle: req.idle,
        };
        Ok(HttpStreamResponse {
            status,
            headers,
            body: Box::new(Capped::new(Box::new(pieces), req.stream_cap())),
        })
    }
}

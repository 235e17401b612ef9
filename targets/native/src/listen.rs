//! The webhook listener: an accept loop serving each connection with hyper's HTTP/1, with the
//! limits a port open to the internet needs. A request head must arrive within
//! [`Limits::header_timeout`] (which also closes idle keep-alive connections), a webhook body
//! within [`Limits::body_timeout`] (see [`crate::server`]), at most
//! [`Limits::max_connections`] are open (idle ones give way, see [`crate::conns`]), and on
//! stop every connection is gone within [`Limits::shutdown_deadline`].

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::conns::{Conn, Conns};
use crate::server::{Reply, Webhook};

/// The listener's limits. Defaults suit Telegram, whose requests are small and whole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Time for a whole request head to arrive, counted from the connection's start or the
    /// end of the previous response: slow heads and idle connections are closed after it.
    pub header_timeout: Duration,
    /// Time for a webhook body to arrive once its head has been checked.
    pub body_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
    /// After the stop signal, how long requests in handlers may take to finish before every
    /// connection left is dropped.
    pub shutdown_deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_connections: 256,
            shutdown_deadline: Duration::from_secs(5),
        }
    }
}

/// The largest read buffer of a connection. A request head must fit in it (Telegram's are
/// well under 1 KB); bodies stream through it.
const MAX_READ_BUFFER: usize = 16 * 1024;

/// How long to wait before accepting again after a failed accept (out of descriptors, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Binds `addr` and serves `webhook` there on a task of its own until `stop` resolves: what
/// `clawless run --listen` adds beside long polling (hooks, the panel, /healthz, /metrics).
pub async fn beside(
    addr: &str,
    webhook: Webhook,
    limits: Limits,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!(local = %listener.local_addr()?, "answering hooks, the panel and /metrics");
    Ok(tokio::spawn(serve(listener, webhook, limits, stop)))
}

/// Serves `webhook` on `listener` until `stop` resolves, then shuts down within
/// `limits.shutdown_deadline`.
pub async fn serve(
    listener: TcpListener,
    webhook: Webhook,
    limits: Limits,
    stop: impl Future<Output = ()>,
) {
    let conns = Conns::new(limits.max_connections);
    let (closing_tx, closing) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let Some(conn) = conns.admit() else {
                        tracing::debug!("connection refused: every connection is in a handler");
                        continue;
                    };
                    let connection = serve_connection(stream, conn, webhook.clone(), limits, closing.clone());
                    tasks.spawn(connection);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    drop(listener);
    shut_down(tasks, &closing_tx, limits.shutdown_deadline).await;
}

/// Serves one connection until the client or the server closes it, it is evicted, or the
/// listener closes (then a request in its handler may finish).
async fn serve_connection(
    stream: TcpStream,
    conn: Conn,
    webhook: Webhook,
    limits: Limits,
    mut closing: watch::Receiver<bool>,
) {
    let conn = Arc::new(conn);
    let service = {
        let conn = conn.clone();
        service_fn(move |req| {
            let entered = conn.enter();
            let webhook = webhook.clone();
            async move { Ok::<Reply, Infallible>(answer(entered, &webhook, req).await) }
        })
    };
    let http = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_READ_BUFFER)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(http);
    tokio::select! {
        _ = http.as_mut() => return,
        _ = conn.evicted() => return,
        _ = closing.wait_for(|closing| *closing) => {}
    }
    // Closing. Nothing runs on this connection while it is not polled, so the check holds:
    // an idle or half-sent one is dropped now, one in a handler closes after its response.
    if conn.in_handler() {
        http.as_mut().graceful_shutdown();
        let _ = http.await;
    }
}

/// Answers a request on a connection that is still registered; an evicted one gets a 503
/// (it is being dropped anyway).
async fn answer(
    entered: Option<crate::conns::InHandler>,
    webhook: &Webhook,
    req: hyper::Request<hyper::body::Incoming>,
) -> Reply {
    match entered {
        Some(_in_handler) => webhook.handle(req).await,
        None => crate::server::respond(503, "closing"),
    }
}

/// Tells every connection the listener is closing, waits up to `deadline` for them to finish,
/// then drops whatever is left. Turns cut off here stay in the durable inbox.
async fn shut_down(mut tasks: JoinSet<()>, closing: &watch::Sender<bool>, deadline: Duration) {
    closing.send_replace(true);
    let all_done = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(deadline, all_done).await.is_err() {
        tracing::warn!(
            connections = tasks.len(),
            "shutdown deadline passed; dropping the connections left"
        );
        tasks.shutdown().await;
    }
}

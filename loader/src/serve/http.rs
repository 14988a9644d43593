//! The daemon's HTTP endpoint (hyper, HTTP/1.1, one request per connection):
//! `GET /metrics` (Prometheus text), `GET /healthz` (readiness: controllers
//! attached, cgroups bound) and `GET /livez` (liveness: controllers attached).
//!
//! What a hostile or broken neighbour on the metrics port can do, and what
//! bounds it:
//! - open connections and say nothing, or trickle a header a byte at a
//!   time: every connection has one deadline for the whole exchange
//!   ([`Limits::deadline`]), read and write included, which no amount of
//!   trickling extends;
//! - never read the response: the same deadline ends the write;
//! - open thousands of connections: at most [`Limits::max_conns`] are
//!   served at once, the rest are accepted and closed at once (counted);
//! - exhaust the daemon's fds: `accept` fails (EMFILE); the loop backs off
//!   and retries, and never ends the daemon.

use std::cell::Cell;
use std::convert::Infallible;
use std::rc::Rc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::State;

/// Bounds on the metrics endpoint (`[serve]` `request_timeout_ms`,
/// `max_connections`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Whole exchange: accept to last byte written.
    pub deadline: Duration,
    /// Connections served at once.
    pub max_conns: usize,
}

/// Decrements the open-connection count when a connection's task ends,
/// however it ends.
struct ConnSlot(Rc<Cell<usize>>);

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Accept metrics connections until the daemon stops.
pub(super) async fn accept_loop(listener: tokio::net::TcpListener, st: Rc<State>, lim: Limits) {
    let open = Rc::new(Cell::new(0usize));
    let mut backoff = Duration::from_millis(10);
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => {
                backoff = Duration::from_millis(10);
                s
            }
            Err(e) => {
                // EMFILE, ENFILE, ENOBUFS, ECONNABORTED...: transient for a
                // daemon. Log the first of a burst, back off, go on.
                let errs = {
                    let mut m = st.metrics.borrow_mut();
                    m.accept_errors += 1;
                    m.accept_errors
                };
                if backoff == Duration::from_millis(10) {
                    tracing::warn!(
                        error = %e,
                        errors = errs,
                        "metrics accept failed ({e}); backing off (error {errs})"
                    );
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        if open.get() >= lim.max_conns {
            st.metrics.borrow_mut().http_refused += 1;
            drop(stream);
            continue;
        }
        open.set(open.get() + 1);
        let slot = ConnSlot(open.clone());
        let st = st.clone();
        tokio::task::spawn_local(async move {
            let _slot = slot;
            if serve_conn(stream, st.clone(), lim.deadline).await == ConnEnd::Deadline {
                st.metrics.borrow_mut().http_timeouts += 1;
            }
        });
    }
}

/// How a connection ended.
#[derive(Debug, PartialEq)]
pub(super) enum ConnEnd {
    Answered,
    /// Hung up, or sent something that is not HTTP/1.1.
    Dropped,
    /// Cut at the deadline.
    Deadline,
}

/// Serve one connection (any byte stream: the fuzz tests use in-memory
/// pipes) within `deadline`.
pub(super) async fn serve_conn<I>(io: I, st: Rc<State>, deadline: Duration) -> ConnEnd
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let svc = hyper::service::service_fn(move |req| {
        let st = st.clone();
        async move { Ok::<_, Infallible>(handle(req, &st).await) }
    });
    // No hyper timers: the one deadline below covers the header, the body
    // and the write, and is what gets counted.
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .max_buf_size(16 * 1024)
        .serve_connection(TokioIo::new(io), svc);
    match tokio::time::timeout(deadline, conn).await {
        Ok(Ok(())) => ConnEnd::Answered,
        Ok(Err(_)) => ConnEnd::Dropped,
        Err(_) => ConnEnd::Deadline,
    }
}

fn text(code: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = code;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

/// A probe's answer: 200 with the body, or 503 with the reason.
fn probe(verdict: std::result::Result<String, String>) -> Response<Full<Bytes>> {
    match verdict {
        Ok(body) => text(StatusCode::OK, body),
        Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}

async fn handle(req: Request<Incoming>, st: &State) -> Response<Full<Bytes>> {
    st.metrics.borrow_mut().http_requests += 1;
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
    }
    match req.uri().path() {
        "/metrics" => text(StatusCode::OK, st.scrape().await),
        "/healthz" => probe(st.health()),
        "/livez" => probe(st.alive()),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /healthz or /livez\n",
        ),
    }
}

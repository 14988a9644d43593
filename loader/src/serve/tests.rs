//! The daemon's HTTP request path, fuzzed through in-memory pipes: any
//! bytes a client sends end in an answer or a closed connection within the
//! deadline, never a panic or a hang. Cases: `PROPTEST_CASES` (scripts/test.sh
//! runs a bounded number; docs/testing.md has the long run).

use std::rc::Rc;
use std::time::Duration;

use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::http::{serve_conn, ConnEnd};
use super::State;

/// An HTTP/1.x status line (hyper answers a 1.0 request in 1.0).
fn is_response(out: &[u8]) -> bool {
    out.starts_with(b"HTTP/1.1 ") || out.starts_with(b"HTTP/1.0 ")
}

/// Send `req` (then half-close when `close`), read the whole answer.
fn exchange(req: &[u8], close: bool) -> (ConnEnd, Vec<u8>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let d = crate::bind::config::parse(std::path::Path::new("<t>"), "").unwrap();
        let st = Rc::new(State::new(d));
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let srv = tokio::task::spawn_local(serve_conn(server, st, Duration::from_millis(500)));
        let _ = client.write_all(req).await;
        if close {
            let _ = client.shutdown().await;
        }
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), client.read_to_end(&mut out)).await;
        (srv.await.unwrap(), out)
    })
}

#[test]
fn metrics_healthz_and_errors_answer() {
    let (end, out) = exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", false);
    let out = String::from_utf8(out).unwrap();
    assert_eq!(end, ConnEnd::Answered);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("\r\n\r\n# HELP ccload_up"), "{out}");
    for path in ["/healthz", "/livez"] {
        let (_, out) = exchange(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes(), false);
        let out = String::from_utf8_lossy(&out);
        assert!(
            out.starts_with("HTTP/1.1 200") && out.ends_with("\r\n\r\nok\n"),
            "{path}: {out}"
        );
    }
    let (_, out) = exchange(
        b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        false,
    );
    assert!(out.starts_with(b"HTTP/1.1 405"));
    let (_, out) = exchange(b"GET /x HTTP/1.1\r\n\r\n", false);
    assert!(out.starts_with(b"HTTP/1.1 404"));
}

#[test]
fn a_silent_client_is_cut_at_the_deadline() {
    assert_eq!(
        exchange(b"GET /metrics HTTP/1.1\r\n", false).0,
        ConnEnd::Deadline
    );
    // An endless header is refused long before memory runs out.
    let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
    big.resize(60 * 1024, b'a');
    let (end, out) = exchange(&big, false);
    assert_ne!(end, ConnEnd::Answered);
    assert!(
        out.is_empty() || out.starts_with(b"HTTP/1.1 431"),
        "{out:?}"
    );
}

/// A request line and headers assembled from plausible and hostile parts.
fn request() -> impl Strategy<Value = Vec<u8>> {
    let method = prop_oneof!["GET", "HEAD", "POST", "PUT", "G\0T", "[A-Z]{0,12}"];
    let path = prop_oneof![
        "/metrics",
        "/healthz",
        "/livez",
        "/metrics?x=1",
        "/[ -~]{0,40}",
        "\\PC{0,40}",
        "http://h/metrics",
        "\\*"
    ];
    let version = prop_oneof!["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/1.1 x", ""];
    let header = ("[A-Za-z-]{0,20}", "[ -~\t]{0,60}");
    let eol = prop_oneof!["\r\n", "\n", "\r", ""];
    (
        method,
        path,
        version,
        proptest::collection::vec(header, 0..8),
        eol,
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(m, p, v, hs, eol, tail)| {
            let mut r = format!("{m} {p} {v}{eol}").into_bytes();
            for (k, val) in hs {
                r.extend_from_slice(format!("{k}: {val}{eol}").as_bytes());
            }
            r.extend_from_slice(eol.as_bytes());
            r.extend_from_slice(&tail);
            r
        })
}

proptest! {
    #[test]
    fn any_bytes_end_in_an_answer_or_a_close(req in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let (_, out) = exchange(&req, true);
        prop_assert!(out.is_empty() || is_response(&out), "{:?}", String::from_utf8_lossy(&out));
    }

    #[test]
    fn structured_requests_end_in_an_answer_or_a_close(req in request()) {
        let (end, out) = exchange(&req, true);
        prop_assert!(out.is_empty() || is_response(&out), "{:?}", String::from_utf8_lossy(&out));
        if end == ConnEnd::Answered {
            // Whatever came in, only the two paths answer 200.
            let ok = out.get(8..13) == Some(b" 200 ");
            let text = String::from_utf8_lossy(&req);
            prop_assert!(!ok || text.contains("/metrics") || text.contains("/healthz") || text.contains("/livez"));
        }
    }
}

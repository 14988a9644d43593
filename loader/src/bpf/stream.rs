//! The telemetry stream: who may consume a controller's ring buffer, and
//! the wire format `ccload serve` uses to fan records out to `ccload watch`.
//!
//! A BPF ring buffer gives each record to one reader, so one process per
//! algorithm holds an exclusive consumer lock (`/run/ccload/watch-<algo>.lock`).
//! When the daemon holds it, `watch` reads the daemon's Unix socket instead:
//! each record is framed as a little-endian u32 length and the raw
//! `struct ccl_event` bytes ([`frame`], [`Deframer`]).

use std::os::fd::AsRawFd;

use anyhow::{bail, Result};

use crate::bpf::algos::Algo;

/// Exclusive consumer lock, released when the process exits.
pub type ConsumerLock = crate::host::lock::PidLock;

/// Take `algo`'s consumer lock, or say who holds it.
pub fn lock_consumer(algo: Algo) -> Result<ConsumerLock> {
    let path = crate::bpf::watch_lock_path(algo.name());
    match crate::host::lock::pid_lock(&path.to_string_lossy(), std::time::Duration::ZERO)? {
        Ok(l) => Ok(l),
        Err(holder) => bail!(
            "{algo} telemetry is already being consumed (pid {holder}); a BPF ring buffer gives \
             each record to one reader only, so a second `watch` would silently split the stream"
        ),
    }
}

/// A borrowed raw fd for tokio's AsyncFd (the owner outlives the wrapper).
pub(crate) struct FdWrap(pub(crate) i32);

impl AsRawFd for FdWrap {
    fn as_raw_fd(&self) -> i32 {
        self.0
    }
}

/// Connect to a running daemon's telemetry socket at `path`, if one listens.
pub fn daemon_socket(path: &std::path::Path) -> Option<std::os::unix::net::UnixStream> {
    std::os::unix::net::UnixStream::connect(path).ok()
}

/// What `ccload watch` sends first on the daemon's socket to get framed
/// raw records; a client that does not gets JSON lines.
pub const HELLO_FRAMES: &[u8; 7] = b"frames\n";

/// The length prefix of one record on the daemon's socket.
pub fn frame(rec: &[u8]) -> [u8; 4] {
    (rec.len() as u32).to_le_bytes()
}

/// The largest record the wire carries: a `struct ccl_event` is a few
/// hundred bytes; a larger length means a corrupt or hostile stream.
pub const MAX_RECORD: usize = 64 * 1024;

/// Reassembles framed records from a byte stream read in arbitrary chunks.
/// A length above [`MAX_RECORD`] is skipped with its data rather than
/// buffered (it can only come from a corrupt stream).
#[derive(Default)]
pub struct Deframer {
    buf: Vec<u8>,
    /// A length above MAX_RECORD was seen.
    pub corrupt: bool,
}

impl Deframer {
    /// Add bytes read from the socket; call [`Deframer::next_record`] after.
    pub fn push(&mut self, bytes: &[u8]) {
        if !self.corrupt {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The next complete record, if one has arrived.
    pub fn next_record(&mut self) -> Option<Vec<u8>> {
        let len = u32::from_le_bytes(self.buf.get(..4)?.try_into().ok()?) as usize;
        if len > MAX_RECORD {
            // Resynchronisation is impossible in a length-prefixed stream:
            // drop what we have; the reader reports the stream as corrupt.
            self.buf.clear();
            self.corrupt = true;
            return None;
        }
        if self.buf.len() - 4 < len {
            return None;
        }
        let rec = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Some(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_any_chunking() {
        let recs: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; i as usize * 7]).collect();
        let mut wire = Vec::new();
        for r in &recs {
            wire.extend_from_slice(&frame(r));
            wire.extend_from_slice(r);
        }
        for chunk in [1, 3, 4, 5, 64] {
            let mut d = Deframer::default();
            let mut got = Vec::new();
            for c in wire.chunks(chunk) {
                d.push(c);
                while let Some(r) = d.next_record() {
                    got.push(r);
                }
            }
            assert_eq!(got, recs, "chunk {chunk}");
        }
    }

    #[test]
    fn an_oversized_length_marks_the_stream_corrupt_without_buffering() {
        let mut d = Deframer::default();
        d.push(&u32::MAX.to_le_bytes());
        d.push(&[0; 100]);
        assert!(d.next_record().is_none());
        assert!(d.corrupt);
        d.push(&frame(b"abc"));
        d.push(b"abc");
        assert!(d.next_record().is_none(), "nothing after corruption");
        assert!(d.buf.is_empty());
    }
}

//! Synthetic telemetry for `cargo xtask bench`: run bpf/bench.bpf.c's
//! producer against an attached controller's pinned ring buffer at a
//! chosen rate, so the consumer (`ccload watch`) is measured on exactly the
//! path real records take.

use std::mem::MaybeUninit;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::ProgramInput;

/// What one producer run did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Produced {
    pub written: u64,
    /// Reservations that found the ring full.
    pub dropped: u64,
    pub secs: f64,
}

/// Write ccpd records into the ring pinned at `ring_pin` at `rate`
/// records/s for `dur`, rotating over `flows` cookies.
pub fn produce(ring_pin: &Path, rate: u64, dur: Duration, flows: u32) -> Result<Produced> {
    let mut storage = MaybeUninit::uninit();
    let mut open = crate::skel::bench::BenchSkelBuilder::default()
        .open(&mut storage)
        .context("failed to open the bench BPF object")?;
    open.maps
        .events
        .reuse_pinned_map(ring_pin)
        .with_context(|| format!("failed to reuse {}", ring_pin.display()))?;
    let skel = open.load().context("failed to load the bench producer")?;
    let start = Instant::now();
    let mut seq = 0u64;
    while start.elapsed() < dur {
        let due = (rate as f64 * start.elapsed().as_secs_f64()) as u64;
        let n = due.saturating_sub(seq).min(1 << 16) as u32;
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        // struct ccl_bench_args { u64 n; u64 flows; u64 seq; }
        let mut ctx = [0u8; 24];
        ctx[..8].copy_from_slice(&(n as u64).to_ne_bytes());
        ctx[8..16].copy_from_slice(&(flows as u64).to_ne_bytes());
        ctx[16..].copy_from_slice(&seq.to_ne_bytes());
        let input = ProgramInput {
            context_in: Some(&mut ctx),
            ..Default::default()
        };
        let out = skel
            .progs
            .ccl_bench_produce
            .test_run(input)
            .context("running the bench producer")?;
        if out.return_value != 0 {
            bail!("the bench producer's bpf_loop failed");
        }
        seq += n as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    let bss = skel.maps.bss_data.as_ref().context("bench .bss")?;
    Ok(Produced {
        written: bss.written,
        dropped: bss.dropped,
        secs,
    })
}

//! `cargo xtask disturb`: run a command on a host that behaves like a busy
//! VM's.  On every CPU a SCHED_FIFO 99 thread takes the CPU for `burst` at
//! random intervals of about `period` (0.5-1.5x), the way a hypervisor
//! takes a vCPU for other guests: everything of lower priority (the delay
//! line's SCHED_FIFO 40 threads, the flows, softirqs run on return from
//! the interrupt) waits.  With 2 ms every 20 ms the delay line's p99
//! release lateness is 0.3-2 ms, what CI's host showed; the timing tests
//! are meant to pass under it.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

pub fn run(burst_ms: f64, period_ms: f64, cmd: &[String]) -> Result<()> {
    if !(burst_ms > 0.0 && period_ms > burst_ms && period_ms <= 10_000.0) {
        bail!("--burst-ms {burst_ms} --period-ms {period_ms}: need 0 < burst < period <= 10000");
    }
    let Some((prog, args)) = cmd.split_first() else {
        bail!("give the command to run after --");
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let hogs: Vec<_> = (0..cpus)
        .map(|cpu| {
            let (stop, tx) = (stop.clone(), tx.clone());
            std::thread::spawn(move || {
                let _ = tx.send(pin_realtime(cpu));
                // A small xorshift: the bursts of the CPUs are independent.
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (cpu as u64 + 1);
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let f = 0.5 + (x % 1000) as f64 / 1000.0;
                    std::thread::sleep(Duration::from_secs_f64(period_ms * f / 1e3));
                    let end = Instant::now() + Duration::from_secs_f64(burst_ms / 1e3);
                    while Instant::now() < end {
                        std::hint::spin_loop();
                    }
                }
            })
        })
        .collect();
    drop(tx);
    for r in rx.iter().take(cpus) {
        r.context("SCHED_FIFO 99 on every CPU (needs root)")?;
    }
    eprintln!(
        "disturb: {cpus} CPU(s) taken {burst_ms} ms about every {period_ms} ms ({:.0} %)",
        100.0 * burst_ms / period_ms
    );
    let status = Command::new(prog).args(args).status();
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        let _ = h.join();
    }
    let status = status.with_context(|| format!("running {prog}"))?;
    if !status.success() {
        bail!("{prog} exited with {status}");
    }
    Ok(())
}

/// Pin the calling thread to `cpu` and make it SCHED_FIFO 99.
fn pin_realtime(cpu: usize) -> Result<()> {
    // SAFETY: plain syscalls on the calling thread with valid arguments.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let p = libc::sched_param { sched_priority: 99 };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
    }
    Ok(())
}

//! Idle CPUs kept out of their idle state while an emulated link runs.
//!
//! On this kind of VM an idle vCPU halts, and the host wakes it 1-3 ms
//! after the timer or packet that should have woken it.  Everything the
//! link's timing rests on then inherits that delay: the delay line's
//! release times (p99 release lateness 2,000-2,700 us on a 20 Mbit/s link),
//! the TBF watchdog that paces the bottleneck (a 500 Mbit/s TBF carried
//! 418 Mbit/s), and the endpoints' own wake-ups (a 40-ms echo read
//! 41.0-41.5 ms); reno at 50 Mbit/s, 40 ms, BDP/8 carried 17.7-20.0
//! Mbit/s.  One spinning thread per CPU at `SCHED_IDLE` keeps each CPU busy
//! whenever nothing else wants it; any other thread preempts it at once, so
//! it takes no CPU time from the link, the flows or the kernel (measured on
//! the same links: p99 lateness 36-87 us, 452 Mbit/s through the TBF,
//! echoes at 40.55-40.72 ms, reno 35.0-38.2 Mbit/s).  One spinner for two
//! CPUs is not enough (p99 0.5-3.3 ms).  This is the `idle=poll` of
//! latency-sensitive hosts, for the life of an experiment only; docs/lab.md
//! ("Timing") has what it leaves (the host's own stalls).
//!
//! [`Awake::hold`] is reference counted across the process: the spinners
//! run while any hold is alive.  `CCLOAD_LAB_IDLE=1` turns them off, to
//! measure a link as an idle host runs it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

struct Spinners {
    holds: usize,
    stop: Option<Arc<AtomicBool>>,
    threads: Vec<JoinHandle<()>>,
}

static SPINNERS: Mutex<Spinners> = Mutex::new(Spinners {
    holds: 0,
    stop: None,
    threads: Vec::new(),
});

/// While alive, every CPU spins at `SCHED_IDLE` when it would be idle.
#[must_use = "the CPUs stay awake only while the hold is alive"]
pub struct Awake(bool);

impl Awake {
    /// Keep the CPUs awake until the returned hold (and every other) drops.
    pub fn hold() -> Awake {
        if std::env::var_os("CCLOAD_LAB_IDLE").is_some_and(|v| v == "1") {
            return Awake(false);
        }
        let mut s = SPINNERS.lock().unwrap_or_else(|p| p.into_inner());
        s.holds += 1;
        if s.holds == 1 {
            let stop = Arc::new(AtomicBool::new(false));
            let (tx, rx) = std::sync::mpsc::channel();
            s.threads = cpus()
                .into_iter()
                .map(|cpu| spin(cpu, stop.clone(), tx.clone()))
                .collect();
            drop(tx);
            // Each spinner reports once it runs at SCHED_IDLE on its CPU.
            while rx.recv().is_ok() {}
            s.stop = Some(stop);
        }
        Awake(true)
    }

    /// How many spinner threads run now (one per CPU while held).
    pub fn spinners() -> usize {
        SPINNERS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .threads
            .len()
    }
}

impl Drop for Awake {
    fn drop(&mut self) {
        if !self.0 {
            return;
        }
        let mut s = SPINNERS.lock().unwrap_or_else(|p| p.into_inner());
        s.holds -= 1;
        if s.holds == 0 {
            if let Some(stop) = s.stop.take() {
                stop.store(true, Ordering::Relaxed);
            }
            for t in s.threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

/// The CPUs this process may run on.
fn cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // fills it for this thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } == 0;
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if !ok {
        return (0..n).collect();
    }
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

fn spin(cpu: usize, stop: Arc<AtomicBool>, ready: std::sync::mpsc::Sender<()>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("awake-{cpu}"))
        .spawn(move || {
            // SAFETY: plain syscalls on this thread (pid 0 = the caller).
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
                let p = libc::sched_param { sched_priority: 0 };
                if libc::sched_setscheduler(0, libc::SCHED_IDLE, &p) != 0 {
                    // Never spin at normal priority: that would take CPU
                    // from the experiment.
                    return;
                }
            }
            drop(ready);
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
        .expect("spawn awake thread")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinners_run_while_held_and_stop_with_the_last_hold() {
        if std::env::var_os("CCLOAD_LAB_IDLE").is_some() {
            eprintln!("SKIPPED: CCLOAD_LAB_IDLE is set");
            return;
        }
        let n = cpus().len();
        let a = Awake::hold();
        let b = Awake::hold();
        assert_eq!(Awake::spinners(), n);
        drop(a);
        assert_eq!(Awake::spinners(), n, "one hold is still alive");
        // The spinners are SCHED_IDLE.
        let policy = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| {
                let t = t.ok()?.path();
                let comm = std::fs::read_to_string(t.join("comm")).ok()?;
                comm.starts_with("awake-").then(|| {
                    let stat = std::fs::read_to_string(t.join("stat")).unwrap();
                    // field 41 (policy), after the ") " that ends comm
                    let rest = &stat[stat.rfind(") ").unwrap() + 2..];
                    rest.split_whitespace()
                        .nth(38)
                        .unwrap()
                        .parse::<i32>()
                        .unwrap()
                })
            })
            .collect::<Vec<_>>();
        assert_eq!(policy, vec![libc::SCHED_IDLE; n]);
        drop(b);
        assert_eq!(Awake::spinners(), 0);
    }
}

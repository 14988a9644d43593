//! Test harness for ccload's privileged integration tests: privilege checks
//! that skip loudly, network-namespace guards, the `ccload` binary, and a
//! real TCP transfer with a chosen congestion control.
//!
//! Every guard removes what it created in `Drop`, so a failing test still
//! leaves no namespace, pin or registered controller behind.

use std::ffi::CString;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub mod delay;
pub mod lab;
pub mod link;
pub mod nl;

/// Why privileged tests cannot run here, if they cannot.
pub fn privileged_skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Some("kernel has no BTF".into());
    }
    if !ccload::doctor::bpffs_mounted() {
        return Some("bpffs not mounted at /sys/fs/bpf".into());
    }
    None
}

/// Skip (with a printed reason) unless root on a BTF kernel; else take the
/// serial lock (tests share the global CC namespace) and return it.  With
/// CCLOAD_REQUIRE_PRIVILEGED=1 (set by .ci/run: CI is root on a BTF kernel)
/// a skip is a failure, so a CI that cannot run them never passes silently.
#[macro_export]
macro_rules! privileged {
    () => {{
        if let Some(why) = $crate::privileged_skip_reason() {
            if std::env::var_os("CCLOAD_REQUIRE_PRIVILEGED").is_some_and(|v| v == "1") {
                panic!("privileged test cannot run ({why}) and CCLOAD_REQUIRE_PRIVILEGED=1");
            }
            eprintln!("SKIPPED {}: {why}", module_path!());
            return;
        }
        $crate::serial()
    }};
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises privileged tests in this process and, via flock, across test
/// binaries running at the same time.
pub struct Serial {
    _g: MutexGuard<'static, ()>,
    _f: std::fs::File,
}

pub fn serial() -> Serial {
    let g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/run/lock/ccload-itests.lock")
        .or_else(|_| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open("/tmp/ccload-itests.lock")
        })
        .expect("lock file");
    // SAFETY: flock on an fd we own; blocks until the other binary is done.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    Serial { _g: g, _f: f }
}

/// Path of the `ccload` binary built in this workspace.
pub fn ccload_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CCLOAD_BIN") {
        return p.into();
    }
    // target/<profile>/deps/<test-exe> -> target/<profile>/ccload
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("ccload");
    assert!(
        bin.exists(),
        "{} missing: build the workspace first (cargo build --workspace)",
        bin.display()
    );
    bin
}

/// Run `ccload args...`.
pub fn ccload(args: &[&str]) -> Output {
    Command::new(ccload_bin())
        .args(args)
        .output()
        .expect("spawn ccload")
}

/// Run ccload and require success; returns stdout.
pub fn ccload_ok(args: &[&str]) -> String {
    let o = ccload(args);
    assert!(
        o.status.success(),
        "ccload {args:?} failed ({}):\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

pub fn status_json() -> serde_json::Value {
    serde_json::from_str(&ccload_ok(&["status", "--json"])).expect("status --json parses")
}

/// Detaches `algo` on drop (also when the test panics).
pub struct Attached(pub &'static str);

impl Attached {
    pub fn new(algo: &'static str, extra: &[&str]) -> Attached {
        let mut args = vec!["attach", "--algo", algo];
        args.extend_from_slice(extra);
        ccload_ok(&args);
        Attached(algo)
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        let _ = ccload(&["detach", "--algo", self.0]);
    }
}

pub fn registered(name: &str) -> bool {
    ccload::bpf::is_registered(name)
}

/// Wait (bounded) until `f` holds; returns whether it did.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

// ---------------------------------------------------------------------------
// Network namespaces.

static NS_SEQ: AtomicU32 = AtomicU32::new(0);

/// A named network namespace `ccl-t<pid>-<n>` with lo up; deleted on drop.
pub struct NetNs {
    pub name: String,
}

fn sh(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

pub fn run_ok(cmd: &str, args: &[&str]) {
    let o = sh(cmd, args);
    assert!(
        o.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

impl NetNs {
    pub fn new() -> NetNs {
        let name = format!(
            "ccl-t{}-{}",
            std::process::id(),
            NS_SEQ.fetch_add(1, Ordering::SeqCst)
        );
        run_ok("ip", &["netns", "add", &name]);
        let ns = NetNs { name };
        run_ok("ip", &["-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    /// Run `f` on a thread that has entered this namespace.  Sockets created
    /// there stay in the namespace wherever they are used afterwards.
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = CString::new(format!("/run/netns/{}", self.name)).unwrap();
        std::thread::spawn(move || {
            // SAFETY: open + setns on a path we created; only this thread moves.
            unsafe {
                let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                assert!(fd >= 0, "open netns");
                assert_eq!(libc::setns(fd, libc::CLONE_NEWNET), 0, "setns");
                libc::close(fd);
            }
            f()
        })
        .join()
        .expect("netns thread panicked")
    }

    /// A command line run inside the namespace (network only; mounts stay).
    pub fn exec(&self, cmd: &str, args: &[&str]) -> Output {
        let mut v = vec![format!("--net=/run/netns/{}", self.name), cmd.to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        Command::new("nsenter").args(&v).output().expect("nsenter")
    }
}

impl Default for NetNs {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = sh("ip", &["netns", "del", &self.name]);
    }
}

// ---------------------------------------------------------------------------
// Transfers.

pub fn set_cc(fd: i32, cc: &str) -> std::io::Result<()> {
    // SAFETY: valid buffer and length.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as u32,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

pub fn get_cc(fd: i32) -> String {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as u32;
    // SAFETY: valid out-buffer and length.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "getsockopt TCP_CONGESTION");
    String::from_utf8_lossy(&buf[..len as usize])
        .trim_end_matches('\0')
        .to_string()
}

#[derive(Debug)]
pub struct Transfer {
    pub bytes: u64,
    pub secs: f64,
    pub sender_cc: String,
    pub receiver_cc: String,
    /// Receiver progress: (seconds since the first byte, bytes so far),
    /// about every 50 ms.
    pub timeline: Vec<(f64, u64)>,
}

impl Transfer {
    pub fn mbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs / 1e6
    }

    /// Goodput from `t0` seconds after the first byte to the last byte.
    pub fn mbps_after(&self, t0: f64) -> f64 {
        let i = self.timeline.iter().position(|&(t, _)| t >= t0);
        let (Some(i), Some(&(t1, b1))) = (i, self.timeline.last()) else {
            return 0.0;
        };
        let (ta, ba) = self.timeline[i];
        if t1 <= ta {
            return 0.0;
        }
        (b1 - ba) as f64 * 8.0 / (t1 - ta) / 1e6
    }
}

fn listen(cc: &str, bind: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(bind)?;
    set_cc(listener.as_raw_fd(), cc)?;
    Ok(listener)
}

type Served = (u64, String, Vec<(f64, u64)>);

fn serve(listener: TcpListener) -> std::io::Result<Served> {
    let (mut s, _) = listener.accept()?;
    let cc = get_cc(s.as_raw_fd());
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    let mut timeline = Vec::new();
    let mut start: Option<Instant> = None;
    let mut next = 0.0;
    loop {
        let n = s.read(&mut buf)?;
        let t = start
            .get_or_insert_with(Instant::now)
            .elapsed()
            .as_secs_f64();
        total += n as u64;
        if t >= next || n == 0 {
            timeline.push((t, total));
            next = t + 0.05;
        }
        if n == 0 {
            break;
        }
    }
    Ok((total, cc, timeline))
}

fn send(addr: SocketAddr, cc: &str, bytes: u64) -> std::io::Result<(String, f64)> {
    let sock = socket_for(addr)?;
    set_cc(sock.as_raw_fd(), cc)?;
    let mut c = connect(sock, addr)?;
    let sender_cc = get_cc(c.as_raw_fd());
    let chunk = vec![0x5au8; 1 << 20];
    let start = Instant::now();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        c.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    c.shutdown(std::net::Shutdown::Write)?;
    // Wait for the receiver to close: the last byte has arrived then.
    let mut sink = [0u8; 16];
    while c.read(&mut sink)? > 0 {}
    Ok((sender_cc, start.elapsed().as_secs_f64()))
}

fn finish(
    server: std::thread::JoinHandle<std::io::Result<Served>>,
    sent: std::io::Result<(String, f64)>,
) -> std::io::Result<Transfer> {
    let (sender_cc, secs) = sent?;
    let (bytes, receiver_cc, timeline) = server.join().expect("server thread")?;
    Ok(Transfer {
        bytes,
        secs,
        sender_cc,
        receiver_cc,
        timeline,
    })
}

/// Send `bytes` from a client to a server in the current namespace, both
/// sockets set to `cc` (the server via its listener).  Run it inside a
/// namespace with [`NetNs::run`].
pub fn transfer(cc: &str, bytes: u64, bind: SocketAddr) -> std::io::Result<Transfer> {
    let listener = listen(cc, bind)?;
    let addr = listener.local_addr()?;
    let server = std::thread::spawn(move || serve(listener));
    finish(server, send(addr, cc, bytes))
}

/// Send `bytes` from a client in `snd` to a server in `rcv` listening on
/// `bind` (an address of `rcv`), both ends with `cc`.
pub fn transfer_across(
    snd: &NetNs,
    rcv: &NetNs,
    cc: &str,
    bytes: u64,
    bind: SocketAddr,
) -> std::io::Result<Transfer> {
    let cc1 = cc.to_string();
    let listener = rcv.run(move || listen(&cc1, bind))?;
    let addr = listener.local_addr()?;
    let server = std::thread::spawn(move || serve(listener));
    let cc2 = cc.to_string();
    let sent = snd.run(move || send(addr, &cc2, bytes));
    finish(server, sent)
}

/// An unconnected TCP socket, so TCP_CONGESTION is set before the handshake.
fn socket_for(addr: SocketAddr) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let fam = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: socket() returns a new fd we own.
    let fd = unsafe { libc::socket(fam, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

fn connect(fd: std::os::fd::OwnedFd, addr: SocketAddr) -> std::io::Result<TcpStream> {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let SocketAddr::V4(a) = addr else {
        unimplemented!("IPv6 transfers are not used by the tests")
    };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: valid sockaddr_in of the right size.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            &sin as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(unsafe { TcpStream::from_raw_fd(fd.into_raw_fd()) })
}

// ---------------------------------------------------------------------------
// Telemetry.

use std::io::BufRead;
use std::process::{Child, Stdio};
use std::sync::mpsc;

/// A `ccload watch --format json` child whose records arrive on a channel.
pub struct Watch {
    pub child: Child,
    pub rx: mpsc::Receiver<serde_json::Value>,
}

impl Watch {
    pub fn start(args: &[&str]) -> Watch {
        let mut child = Command::new(ccload_bin())
            .args(["watch", "--format", "json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let v: serde_json::Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("watch printed malformed JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Watch { child, rx }
    }

    pub fn stop(mut self) -> String {
        use std::io::Read;
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Integer field of a telemetry record.
pub fn i(v: &serde_json::Value, k: &str) -> i64 {
    v[k].as_i64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

/// Kp the ccpd kernel law used in a controlled round of a telemetry record,
/// for Kp in `kps` (Q10).  With Kd = 0 (D = 0), delta + d = Kp * E >> 10
/// exactly, so every controlled record tells which Kp the kernel used.
pub fn ccpd_kp_used(rec: &serde_json::Value, kps: &[i64]) -> Option<i64> {
    let (e, d, delta) = (i(rec, "e_q10"), i(rec, "d_q10"), i(rec, "delta_q10"));
    // |E| >= 1/4 segment: below that Kp * E rounds to the same value for
    // the gains compared (2 and 8 differ by >= 384 in Q10 from 256 up).
    if rec["phase"] != "CA" || i(rec, "c_sps") == 0 || e.abs() < 256 {
        return None;
    }
    kps.iter().copied().find(|kp| (kp * e) >> 10 == delta + d)
}

/// A cgroup v2 directory `ccl-t<pid>-<tag>` for a test; its binding is
/// removed and the directory deleted on drop.
pub struct TestCgroup(pub PathBuf);

impl TestCgroup {
    pub fn new(tag: &str) -> TestCgroup {
        let root = ccload::cgroup::cgroup2_mount().expect("cgroup2 mounted");
        let p = root.join(format!("ccl-t{}-{tag}", std::process::id()));
        std::fs::create_dir(&p).unwrap();
        TestCgroup(p)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = ccload(&["cgroup", "unset", self.path()]);
        // Helper processes have exited; retry briefly while the kernel
        // finishes moving them out.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

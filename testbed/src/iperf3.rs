//! iperf3 as a flow's two ends: `iperf3 -s -1` in the receiver's namespace,
//! `iperf3 -c` in the sender's, the congestion control set by iperf3 itself
//! (`-C`).  Users measure with iperf3, curl and nginx, not with the lab's
//! own sender: iperf3's send loop, buffer sizes and timing are its own.
//!
//! The flow's TCP_INFO is read from iperf3's data socket, duplicated into
//! this process with pidfd_getfd(2) (Linux 5.6): the sampling loop treats
//! it as any other flow's socket.  The duplicate keeps the socket open
//! until it is dropped, after iperf3 has ended.  No crate wraps
//! pidfd_getfd; the two syscalls are below.

use std::io::{Error, ErrorKind, Read, Result};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::netns::NetNs;

/// How long an iperf3 flow may take to show its server listening and its
/// data socket: the control exchange is a few round trips.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Is `iperf3` on PATH?
pub fn available() -> bool {
    Command::new("iperf3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One iperf3 flow: its server and client processes, the server's port.
pub struct Iperf3 {
    server: Child,
    client: Child,
    pub port: u16,
}

fn spawn_in(ns: &NetNs, args: &[String]) -> Result<Child> {
    Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", ns.name))
        .arg("iperf3")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Error::new(
                e.kind(),
                format!("iperf3: {e} (scripts/setup.sh installs it)"),
            )
        })
}

/// Does the namespace of process `pid` have a TCP socket listening on
/// `port`?  (/proc/<pid>/net/tcp is that namespace's table.)
fn listening(pid: u32, port: u16) -> bool {
    let want = format!(":{port:04X} ");
    std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).is_ok_and(|t| {
        t.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && format!("{} ", f[1]).ends_with(&want) && f[3] == "0A"
        })
    })
}

/// stderr of an ended child, for an error message.
fn stderr_of(c: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = c.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s.trim().to_string()
}

impl Iperf3 {
    /// Start the server on `bind:port` in `rx` and, once it listens, the
    /// client in `tx` with congestion control `cc`, for `secs` seconds
    /// (`-t`: whole seconds; the caller stops it earlier when its time is
    /// not whole).  No `-n`: iperf3 ends such a test once the bytes are
    /// written, before they arrive.
    pub fn start(
        rx: &NetNs,
        tx: &NetNs,
        bind: IpAddr,
        port: u16,
        cc: &str,
        secs: u64,
    ) -> Result<Iperf3> {
        let mut server = spawn_in(
            rx,
            &["-s", "-1", "-B", &bind.to_string(), "-p", &port.to_string()].map(String::from),
        )?;
        let t0 = Instant::now();
        while !listening(server.id(), port) {
            if let Some(st) = server.try_wait()? {
                return Err(Error::other(format!(
                    "iperf3 server ended ({st}): {}",
                    stderr_of(&mut server)
                )));
            }
            if t0.elapsed() > START_TIMEOUT {
                let _ = server.kill();
                let _ = server.wait();
                return Err(Error::new(
                    ErrorKind::TimedOut,
                    "iperf3 server never listened",
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let client = spawn_in(
            tx,
            &[
                "-c".to_string(),
                bind.to_string(),
                "-p".into(),
                port.to_string(),
                "-C".into(),
                cc.to_string(),
                "-t".into(),
                secs.max(1).to_string(),
            ],
        );
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                let _ = server.kill();
                let _ = server.wait();
                return Err(e);
            }
        };
        Ok(Iperf3 {
            server,
            client,
            port,
        })
    }

    /// The client's data socket, duplicated into this process, once the
    /// client has connected it (None before).  iperf3 connects its control
    /// socket first and then the data stream, both to the server's port:
    /// the data socket is the second, the higher descriptor.  An error
    /// when the client has ended without one.
    pub fn data_socket(&mut self) -> Result<Option<TcpStream>> {
        if let Some(st) = self.client.try_wait()? {
            return Err(Error::other(format!(
                "iperf3 client ended ({st}) before its data stream showed: {}",
                stderr_of(&mut self.client)
            )));
        }
        let pid = self.client.id();
        let mut fds: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/fd"))?
            .filter_map(|e| {
                let e = e.ok()?;
                let target = std::fs::read_link(e.path()).ok()?;
                target
                    .to_string_lossy()
                    .starts_with("socket:")
                    .then(|| e.file_name().to_string_lossy().parse().ok())?
            })
            .collect();
        fds.sort_unstable();
        let pidfd = pidfd_open(pid)?;
        let mut to_server = Vec::new();
        for fd in fds {
            let s = TcpStream::from(dup_from(&pidfd, fd)?);
            if s.peer_addr().is_ok_and(|a| a.port() == self.port) {
                to_server.push(s);
            }
        }
        Ok(if to_server.len() >= 2 {
            to_server.pop()
        } else {
            None
        })
    }

    /// Stop the client (SIGINT: iperf3 ends the test and closes its
    /// sockets) and the server; wait for both.
    pub fn stop(mut self) {
        for c in [&mut self.client, &mut self.server] {
            if c.try_wait().is_ok_and(|s| s.is_none()) {
                // SAFETY: signalling a child of ours that has not been reaped.
                unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            }
        }
        for c in [&mut self.client, &mut self.server] {
            let t0 = Instant::now();
            while c.try_wait().is_ok_and(|s| s.is_none()) {
                if t0.elapsed() > Duration::from_secs(3) {
                    let _ = c.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.wait();
        }
    }
}

impl Drop for Iperf3 {
    fn drop(&mut self) {
        // `stop` consumed and waited for them; a flow dropped without it
        // (an error, a panic) must not leave processes behind.
        for c in [&mut self.client, &mut self.server] {
            if c.try_wait().is_ok_and(|s| s.is_none()) {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// A pidfd for process `pid` (pidfd_open(2)).
fn pidfd_open(pid: u32) -> Result<OwnedFd> {
    // SAFETY: a plain syscall; the descriptor it returns is owned once.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just gave us, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Descriptor `fd` of the process behind `pidfd`, duplicated into this
/// one (pidfd_getfd(2); needs ptrace rights over it: root, or our own
/// child).
fn dup_from(pidfd: &OwnedFd, fd: i32) -> Result<OwnedFd> {
    // SAFETY: a plain syscall on a pidfd we own.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just gave us, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(got as i32) })
}

/// A free TCP port on `ip` in `ns` (bound and released: nothing else
/// binds in a namespace of ours).
pub fn free_port(ns: &NetNs, ip: IpAddr) -> Result<u16> {
    ns.run(move || std::net::TcpListener::bind(SocketAddr::new(ip, 0)).and_then(|l| l.local_addr()))
        .map(|a| a.port())
}

//! Bulk TCP transfers with a chosen congestion control on both ends, set
//! before the handshake (TCP_CONGESTION on an unconnected socket).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Instant;

use crate::netns::NetNs;

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

/// A listener in `rcv` on `bind` with `cc`, and its address.
fn listen_in(
    rcv: &NetNs,
    cc: &str,
    bind: SocketAddr,
) -> std::io::Result<(TcpListener, SocketAddr)> {
    let cc = cc.to_string();
    let listener = rcv.run(move || listen(&cc, bind))?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// The sender never connected (say its CC was not registered): wake the
/// server's accept so that its thread ends instead of leaking.
fn unblock<T>(snd: &NetNs, addr: SocketAddr, server: std::thread::JoinHandle<T>) {
    let _ = snd.run(move || TcpStream::connect(addr).map(drop));
    let _ = server.join();
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
    let (listener, addr) = listen_in(rcv, cc, bind)?;
    let server = std::thread::spawn(move || serve(listener));
    let cc2 = cc.to_string();
    let sent = snd.run(move || send(addr, &cc2, bytes));
    match sent {
        Err(e) => {
            unblock(snd, addr, server);
            Err(e)
        }
        ok => finish(server, ok),
    }
}

/// An unconnected TCP socket, so TCP_CONGESTION is set before the handshake.
pub fn socket_for(addr: SocketAddr) -> std::io::Result<std::os::fd::OwnedFd> {
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

pub fn connect(fd: std::os::fd::OwnedFd, addr: SocketAddr) -> std::io::Result<TcpStream> {
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

/// CPU time (user and system) of the calling thread so far, s: what the
/// kernel charges to it, the softirq work done in its context included.
pub fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// A transfer at a fixed rate and what it cost each end.
#[derive(Debug)]
pub struct Paced {
    pub bytes: u64,
    pub secs: f64,
    pub sender_cc: String,
    /// CPU of the sending thread, s (on a veth pair the receiver's stack
    /// runs in the sender's softirq context, and the other way round).
    pub sender_cpu_s: f64,
    /// CPU of the receiving thread, s.
    pub receiver_cpu_s: f64,
}

impl Paced {
    /// Both ends' CPU per byte delivered, ns.
    pub fn ns_per_byte(&self) -> f64 {
        (self.sender_cpu_s + self.receiver_cpu_s) * 1e9 / self.bytes.max(1) as f64
    }
}

/// Send at `rate_bit_s` (in 64-KiB writes, each due when the bytes before
/// it are, at that rate) for `secs` from a client in `snd` to a server in
/// `rcv` listening on `bind`, both ends with `cc`.
pub fn paced_across(
    snd: &NetNs,
    rcv: &NetNs,
    cc: &str,
    rate_bit_s: f64,
    secs: f64,
    bind: SocketAddr,
) -> std::io::Result<Paced> {
    let (listener, addr) = listen_in(rcv, cc, bind)?;
    // (a thread blocked in accept uses no CPU: counting from its start is
    // counting from the connection's)
    let server = std::thread::spawn(move || -> std::io::Result<(u64, f64)> {
        let cpu0 = thread_cpu_s();
        let (total, _, _) = serve(listener)?;
        Ok((total, thread_cpu_s() - cpu0))
    });
    let cc2 = cc.to_string();
    let sent = snd.run(move || -> std::io::Result<(String, f64, f64)> {
        let sock = socket_for(addr)?;
        set_cc(sock.as_raw_fd(), &cc2)?;
        let mut c = connect(sock, addr)?;
        let sender_cc = get_cc(c.as_raw_fd());
        let chunk = vec![0x5au8; 64 << 10];
        let bytes_per_s = rate_bit_s / 8.0;
        let cpu0 = thread_cpu_s();
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            let due = std::time::Duration::from_secs_f64(sent as f64 / bytes_per_s);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
            c.write_all(&chunk)?;
            sent += chunk.len() as u64;
        }
        c.shutdown(std::net::Shutdown::Write)?;
        let mut sink = [0u8; 16];
        while c.read(&mut sink)? > 0 {}
        Ok((
            sender_cc,
            start.elapsed().as_secs_f64(),
            thread_cpu_s() - cpu0,
        ))
    });
    let (sender_cc, secs, sender_cpu_s) = match sent {
        Err(e) => {
            unblock(snd, addr, server);
            return Err(e);
        }
        Ok(x) => x,
    };
    let (bytes, receiver_cpu_s) = server.join().expect("server thread")?;
    Ok(Paced {
        bytes,
        secs,
        sender_cc,
        sender_cpu_s,
        receiver_cpu_s,
    })
}

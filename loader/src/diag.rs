//! TCP sockets of the current network namespace with their congestion control,
//! over NETLINK_SOCK_DIAG (the interface `ss` uses), asking for INET_DIAG_CONG.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_CONG: u16 = 4;
const NLMSG_DONE: u16 = 3;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const TCP_STATES_ALL: u32 = 0xfff;
const INET_DIAG_MSG_LEN: usize = 72;

/// One TCP socket.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TcpSock {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: u8,
    pub cookie: u64,
    pub cong: String,
}

fn nla_align(n: usize) -> usize {
    (n + 3) & !3
}

fn request(family: u8) -> Vec<u8> {
    // struct inet_diag_req_v2: family, protocol, ext, pad, states, sockid (48)
    let mut req = vec![
        family,
        libc::IPPROTO_TCP as u8,
        1 << (INET_DIAG_CONG - 1),
        0,
    ];
    req.extend_from_slice(&TCP_STATES_ALL.to_ne_bytes());
    req.extend_from_slice(&[0u8; 48]);
    let len = 16 + req.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_ne_bytes());
    msg.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid
    msg.extend_from_slice(&req);
    msg
}

fn addr(family: u8, raw: &[u8], port_be: &[u8]) -> SocketAddr {
    let port = u16::from_be_bytes([port_be[0], port_be[1]]);
    let ip = if family == libc::AF_INET as u8 {
        IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))
    } else {
        let mut b = [0u8; 16];
        b.copy_from_slice(&raw[..16]);
        IpAddr::V6(Ipv6Addr::from(b))
    };
    SocketAddr::new(ip, port)
}

/// Parse one inet_diag_msg with its attributes.
fn parse_msg(body: &[u8]) -> Option<TcpSock> {
    if body.len() < INET_DIAG_MSG_LEN {
        return None;
    }
    let family = body[0];
    let state = body[1];
    // id at offset 4: sport(2) dport(2) src(16) dst(16) if(4) cookie(8)
    let id = &body[4..52];
    let local = addr(family, &id[4..20], &id[0..2]);
    let remote = addr(family, &id[20..36], &id[2..4]);
    let cookie = u32::from_ne_bytes(id[40..44].try_into().ok()?) as u64
        | (u32::from_ne_bytes(id[44..48].try_into().ok()?) as u64) << 32;
    let mut cong = String::new();
    let mut off = INET_DIAG_MSG_LEN;
    while off + 4 <= body.len() {
        let len = u16::from_ne_bytes([body[off], body[off + 1]]) as usize;
        let ty = u16::from_ne_bytes([body[off + 2], body[off + 3]]);
        if len < 4 || off + len > body.len() {
            break;
        }
        if ty == INET_DIAG_CONG {
            let v = &body[off + 4..off + len];
            cong = String::from_utf8_lossy(v.split(|b| *b == 0).next().unwrap_or(&[])).into();
        }
        off += nla_align(len);
    }
    Some(TcpSock {
        local,
        remote,
        state,
        cookie,
        cong,
    })
}

fn dump(family: u8) -> io::Result<Vec<TcpSock>> {
    // SAFETY: plain socket syscalls on an fd we own and close.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let close = scopeguard(fd);
    let msg = request(family);
    // SAFETY: msg is a valid buffer of msg.len() bytes.
    if unsafe { libc::send(fd, msg.as_ptr().cast(), msg.len(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    'recv: loop {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let data = &buf[..n as usize];
        let mut off = 0;
        while off + 16 <= data.len() {
            let len = u32::from_ne_bytes(data[off..off + 4].try_into().unwrap()) as usize;
            let ty = u16::from_ne_bytes(data[off + 4..off + 6].try_into().unwrap());
            if len < 16 || off + len > data.len() {
                break;
            }
            match ty {
                NLMSG_DONE => break 'recv,
                NLMSG_ERROR => {
                    let err = i32::from_ne_bytes(data[off + 16..off + 20].try_into().unwrap());
                    if err != 0 {
                        return Err(io::Error::from_raw_os_error(-err));
                    }
                }
                _ => out.extend(parse_msg(&data[off + 16..off + len])),
            }
            off += (len + 3) & !3;
        }
        if n == 0 {
            break;
        }
    }
    drop(close);
    Ok(out)
}

struct FdGuard(i32);
impl Drop for FdGuard {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.0) };
    }
}
fn scopeguard(fd: i32) -> FdGuard {
    FdGuard(fd)
}

/// All TCP sockets (v4 and v6) of this network namespace.
pub fn tcp_sockets() -> io::Result<Vec<TcpSock>> {
    let mut v = dump(libc::AF_INET as u8)?;
    v.extend(dump(libc::AF_INET6 as u8)?);
    Ok(v)
}

/// How many sockets use congestion control `name` now.
pub fn count_using(name: &str) -> io::Result<usize> {
    Ok(tcp_sockets()?.iter().filter(|s| s.cong == name).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_layout() {
        let r = request(libc::AF_INET as u8);
        assert_eq!(r.len(), 16 + 56);
        assert_eq!(u32::from_ne_bytes(r[0..4].try_into().unwrap()), 72);
        assert_eq!(r[16], libc::AF_INET as u8);
        assert_eq!(r[18], 1 << 3);
    }

    #[test]
    fn sees_own_listener_with_cong() {
        // Works unprivileged: a listening socket in this namespace.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let socks = tcp_sockets().unwrap();
        let me = socks
            .iter()
            .find(|s| s.local.port() == port)
            .expect("own listener listed");
        assert!(!me.cong.is_empty(), "INET_DIAG_CONG attribute parsed");
        let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
        assert_eq!(me.cong, default.trim());
    }
}

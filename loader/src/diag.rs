//! TCP sockets of the current network namespace with their congestion control,
//! over NETLINK_SOCK_DIAG (the interface `ss` uses), asking for INET_DIAG_CONG.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::netlink;

const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_CONG: u16 = 4;
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

/// struct inet_diag_req_v2: family, protocol, ext, pad, states, sockid (48).
fn request(family: u8) -> Vec<u8> {
    let mut req = vec![
        family,
        libc::IPPROTO_TCP as u8,
        1 << (INET_DIAG_CONG - 1),
        0,
    ];
    req.extend_from_slice(&TCP_STATES_ALL.to_ne_bytes());
    req.extend_from_slice(&[0u8; 48]);
    req
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
pub(crate) fn parse_msg(body: &[u8]) -> Option<TcpSock> {
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
    let cong = String::from_utf8_lossy(cong_of(body)?).into();
    Some(TcpSock {
        local,
        remote,
        state,
        cookie,
        cong,
    })
}

/// The INET_DIAG_CONG name of one inet_diag_msg (empty when absent).
fn cong_of(body: &[u8]) -> Option<&[u8]> {
    let attrs = body.get(INET_DIAG_MSG_LEN..)?;
    Some(
        netlink::attrs(attrs)
            .find(|(ty, _)| *ty == INET_DIAG_CONG)
            .map(|(_, v)| v.split(|b| *b == 0).next().unwrap_or(&[]))
            .unwrap_or(&[]),
    )
}

fn dump(family: u8) -> io::Result<Vec<TcpSock>> {
    let fd = netlink::socket(NETLINK_SOCK_DIAG)?;
    let mut out = Vec::new();
    netlink::dump(&fd, SOCK_DIAG_BY_FAMILY, 1, &request(family), |_, body| {
        out.extend(parse_msg(body))
    })?;
    Ok(out)
}

/// All TCP sockets (v4 and v6) of this network namespace.
pub fn tcp_sockets() -> io::Result<Vec<TcpSock>> {
    let mut v = dump(libc::AF_INET as u8)?;
    v.extend(dump(libc::AF_INET6 as u8)?);
    Ok(v)
}

/// The number of TCP sockets (v4 and v6) of this network namespace per
/// congestion control, counted as the dump is read: a server with a
/// million sockets costs no more memory than the names.
pub fn count_by_cc() -> io::Result<std::collections::BTreeMap<String, u64>> {
    let mut n = std::collections::BTreeMap::<String, u64>::new();
    for family in [libc::AF_INET as u8, libc::AF_INET6 as u8] {
        let fd = netlink::socket(NETLINK_SOCK_DIAG)?;
        netlink::dump(&fd, SOCK_DIAG_BY_FAMILY, 1, &request(family), |_, body| {
            if let Some(c) = cong_of(body) {
                let name = String::from_utf8_lossy(c);
                match n.get_mut(name.as_ref()) {
                    Some(v) => *v += 1,
                    None => {
                        n.insert(name.into_owned(), 1);
                    }
                }
            }
        })?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_layout() {
        let r = netlink::request(SOCK_DIAG_BY_FAMILY, 1, &request(libc::AF_INET as u8));
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
        // The counting walk sees at least this listener under that name.
        assert!(count_by_cc().unwrap()[default.trim()] >= 1);
    }
}

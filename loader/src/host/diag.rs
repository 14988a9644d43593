//! TCP sockets of the current network namespace with their congestion control
//! and `struct tcp_info`, over NETLINK_SOCK_DIAG (the interface `ss` uses),
//! asking for INET_DIAG_CONG and INET_DIAG_INFO, and optionally for the
//! values the sockets hold in given BPF socket-storage maps
//! (INET_DIAG_REQ_SK_BPF_STORAGES; needs CAP_NET_ADMIN and CAP_BPF).
//! Hand-written: netlink-packet-sock-diag has no BPF storage attributes.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::host::netlink;

const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_INFO: u16 = 2;
const INET_DIAG_CONG: u16 = 4;
const INET_DIAG_SK_BPF_STORAGES: u16 = 20;
/// Request attribute (enum inet_diag_req_attrs) and its nested map fds.
const INET_DIAG_REQ_SK_BPF_STORAGES: u16 = 2;
const SK_DIAG_BPF_STORAGE_REQ_MAP_FD: u16 = 1;
/// Reply: SK_DIAG_BPF_STORAGE entries of a map id and a value.
const SK_DIAG_BPF_STORAGE: u16 = 1;
const SK_DIAG_BPF_STORAGE_MAP_ID: u16 = 2;
const SK_DIAG_BPF_STORAGE_MAP_VALUE: u16 = 3;
const NLA_F_NESTED: u16 = 0x8000;
const TCP_STATES_ALL: u32 = 0xfff;
const INET_DIAG_MSG_LEN: usize = 72;

/// One TCP socket.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TcpSock {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: u8,
    /// `ss`'s name of the state (ESTAB, LISTEN, TIME-WAIT, ...).
    pub state_name: &'static str,
    pub cookie: u64,
    pub cong: String,
    /// From INET_DIAG_INFO (`struct tcp_info`); absent for sockets the
    /// kernel sends none for (TIME-WAIT, NEW_SYN_RECV).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub info: Option<TcpInfo>,
    /// The socket's values in the storage maps the dump asked for:
    /// (map id, value).
    #[serde(skip)]
    pub storages: Vec<(u32, Vec<u8>)>,
}

/// The `struct tcp_info` fields `ccload flows` shows, in base units.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct TcpInfo {
    /// Open, Disorder, CWR, Recovery, Loss.
    pub ca_state: &'static str,
    pub mss: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub srtt_us: u32,
    pub rttvar_us: u32,
    pub min_rtt_us: u32,
    pub rto_us: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Retransmitted segments now in flight, and in the socket's life.
    pub retrans: u32,
    pub total_retrans: u32,
    pub lost: u32,
    pub bytes_acked: u64,
    pub bytes_retrans: u64,
    pub delivered: u32,
    /// The kernel's latest delivery-rate sample, bit/s.
    pub delivery_rate_bps: u64,
    /// Pacing rate, bit/s; None when the kernel says unlimited (~0).
    pub pacing_rate_bps: Option<u64>,
}

/// `ss`'s state names, by TCP_* state number.
pub fn state_name(s: u8) -> &'static str {
    match s {
        1 => "ESTAB",
        2 => "SYN-SENT",
        3 => "SYN-RECV",
        4 => "FIN-WAIT-1",
        5 => "FIN-WAIT-2",
        6 => "TIME-WAIT",
        7 => "UNCONN",
        8 => "CLOSE-WAIT",
        9 => "LAST-ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "SYN-RECV",
        _ => "UNKNOWN",
    }
}

/// The kernel's congestion state names (enum tcp_ca_state).
pub(crate) fn ca_state_name(s: u8) -> &'static str {
    match s {
        0 => "Open",
        1 => "Disorder",
        2 => "CWR",
        3 => "Recovery",
        4 => "Loss",
        _ => "?",
    }
}

/// Parse the `struct tcp_info` of INET_DIAG_INFO (uapi/linux/tcp.h
/// offsets).  A kernel sends the length it has: fields past it read 0, and
/// one too short for the window is no info at all.
pub(crate) fn parse_info(b: &[u8]) -> Option<TcpInfo> {
    if b.len() < 104 {
        return None;
    }
    let u32_at = |o: usize| {
        b.get(o..o + 4)
            .map(|x| u32::from_ne_bytes(x.try_into().unwrap()))
            .unwrap_or(0)
    };
    let u64_at = |o: usize| {
        b.get(o..o + 8)
            .map(|x| u64::from_ne_bytes(x.try_into().unwrap()))
            .unwrap_or(0)
    };
    Some(TcpInfo {
        ca_state: ca_state_name(b[1]),
        rto_us: u32_at(8),
        mss: u32_at(16),
        unacked: u32_at(24),
        lost: u32_at(32),
        retrans: u32_at(36),
        srtt_us: u32_at(68),
        rttvar_us: u32_at(72),
        ssthresh: u32_at(76),
        cwnd: u32_at(80),
        total_retrans: u32_at(100),
        pacing_rate_bps: match u64_at(104) {
            u64::MAX => None,
            r => Some(r.saturating_mul(8)),
        },
        bytes_acked: u64_at(120),
        min_rtt_us: u32_at(148),
        delivery_rate_bps: u64_at(160).saturating_mul(8),
        delivered: u32_at(192),
        bytes_retrans: u64_at(208),
    })
}

/// struct inet_diag_req_v2: family, protocol, ext, pad, states, sockid (48).
fn request(family: u8) -> Vec<u8> {
    request_ext(family, 1 << (INET_DIAG_CONG - 1))
}

fn request_ext(family: u8, ext: u8) -> Vec<u8> {
    let mut req = vec![family, libc::IPPROTO_TCP as u8, ext, 0];
    req.extend_from_slice(&TCP_STATES_ALL.to_ne_bytes());
    req.extend_from_slice(&[0u8; 48]);
    req
}

/// Append the INET_DIAG_REQ_SK_BPF_STORAGES attribute: one nested
/// SK_DIAG_BPF_STORAGE_REQ_MAP_FD per map (none: nothing appended).
fn push_storages(req: &mut Vec<u8>, map_fds: &[i32]) {
    if map_fds.is_empty() {
        return;
    }
    let len = 4 + 8 * map_fds.len();
    req.extend_from_slice(&(len as u16).to_ne_bytes());
    req.extend_from_slice(&(INET_DIAG_REQ_SK_BPF_STORAGES | NLA_F_NESTED).to_ne_bytes());
    for fd in map_fds {
        req.extend_from_slice(&8u16.to_ne_bytes());
        req.extend_from_slice(&SK_DIAG_BPF_STORAGE_REQ_MAP_FD.to_ne_bytes());
        req.extend_from_slice(&fd.to_ne_bytes());
    }
}

/// The (map id, value) pairs of an INET_DIAG_SK_BPF_STORAGES attribute.
fn parse_storages(b: &[u8]) -> Vec<(u32, Vec<u8>)> {
    netlink::attrs(b)
        .filter(|(ty, _)| *ty == SK_DIAG_BPF_STORAGE)
        .filter_map(|(_, e)| {
            let (mut id, mut val) = (None, None);
            for (ty, v) in netlink::attrs(e) {
                match ty {
                    SK_DIAG_BPF_STORAGE_MAP_ID if v.len() >= 4 => {
                        id = Some(u32::from_ne_bytes(v[..4].try_into().unwrap()))
                    }
                    SK_DIAG_BPF_STORAGE_MAP_VALUE => val = Some(v.to_vec()),
                    _ => {}
                }
            }
            Some((id?, val?))
        })
        .collect()
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
    let (mut info, mut storages) = (None, Vec::new());
    for (ty, v) in netlink::attrs(&body[INET_DIAG_MSG_LEN..]) {
        match ty {
            INET_DIAG_INFO => info = parse_info(v),
            INET_DIAG_SK_BPF_STORAGES => storages = parse_storages(v),
            _ => {}
        }
    }
    Some(TcpSock {
        local,
        remote,
        state,
        state_name: state_name(state),
        cookie,
        cong,
        info,
        storages,
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

fn dump(family: u8, map_fds: &[i32]) -> io::Result<Vec<TcpSock>> {
    let fd = netlink::socket(NETLINK_SOCK_DIAG)?;
    let mut out = Vec::new();
    let ext = 1 << (INET_DIAG_CONG - 1) | 1 << (INET_DIAG_INFO - 1);
    let mut req = request_ext(family, ext);
    push_storages(&mut req, map_fds);
    netlink::dump(&fd, SOCK_DIAG_BY_FAMILY, 1, &req, |_, body| {
        out.extend(parse_msg(body))
    })?;
    Ok(out)
}

/// All TCP sockets (v4 and v6) of this network namespace.
pub fn tcp_sockets() -> io::Result<Vec<TcpSock>> {
    tcp_sockets_with(&[])
}

/// [`tcp_sockets`], each with its values in the socket-storage maps
/// `map_fds` (`TcpSock::storages`).
pub fn tcp_sockets_with(map_fds: &[i32]) -> io::Result<Vec<TcpSock>> {
    let mut v = dump(libc::AF_INET as u8, map_fds)?;
    v.extend(dump(libc::AF_INET6 as u8, map_fds)?);
    Ok(v)
}

/// [`tcp_sockets`] of another network namespace: a name under
/// /run/netns (as `ip netns` and `ss -N` take it) or a path such as
/// /proc/PID/ns/net.  The query runs on a thread that joins it; this
/// process stays where it is.
pub fn tcp_sockets_in(netns: &str, map_fds: &[i32]) -> anyhow::Result<Vec<TcpSock>> {
    use anyhow::Context;
    use std::os::fd::AsRawFd;
    let path = if netns.contains('/') {
        std::path::PathBuf::from(netns)
    } else {
        std::path::Path::new("/run/netns").join(netns)
    };
    let f = std::fs::File::open(&path)
        .with_context(|| format!("network namespace {}", path.display()))?;
    let fds = map_fds.to_vec();
    let t = std::thread::spawn(move || -> io::Result<Vec<TcpSock>> {
        // SAFETY: setns on a thread of our own, with an fd we hold open.
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        tcp_sockets_with(&fds)
    });
    t.join()
        .map_err(|_| anyhow::anyhow!("netns query thread panicked"))?
        .with_context(|| format!("TCP sockets of network namespace {}", path.display()))
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
    fn tcp_info_offsets_follow_the_uapi_header() {
        let mut b = vec![0u8; 232];
        b[1] = 3;
        b[16..20].copy_from_slice(&1448u32.to_ne_bytes());
        b[68..72].copy_from_slice(&40_123u32.to_ne_bytes());
        b[80..84].copy_from_slice(&207u32.to_ne_bytes());
        b[100..104].copy_from_slice(&9u32.to_ne_bytes());
        b[160..168].copy_from_slice(&6_250_000u64.to_ne_bytes());
        let i = parse_info(&b).unwrap();
        assert_eq!(
            (i.ca_state, i.mss, i.srtt_us, i.cwnd, i.total_retrans),
            ("Recovery", 1448, 40_123, 207, 9)
        );
        assert_eq!(i.delivery_rate_bps, 50_000_000);
        // A short (older kernel's) struct: later fields read 0, no panic.
        let short = parse_info(&b[..120]).unwrap();
        assert_eq!((short.cwnd, short.delivery_rate_bps), (207, 0));
        assert!(parse_info(&b[..50]).is_none());
        assert_eq!(state_name(1), "ESTAB");
        assert_eq!(state_name(10), "LISTEN");
    }

    #[test]
    fn storage_request_and_reply_attributes() {
        let mut req = request_ext(libc::AF_INET as u8, 0);
        push_storages(&mut req, &[]);
        assert_eq!(req.len(), 56, "no maps, no attribute");
        push_storages(&mut req, &[5, 9]);
        let a: Vec<(u16, &[u8])> = netlink::attrs(&req[56..]).collect();
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].0, INET_DIAG_REQ_SK_BPF_STORAGES);
        assert_eq!(
            u16::from_ne_bytes([req[58], req[59]]) & NLA_F_NESTED,
            NLA_F_NESTED
        );
        let fds: Vec<i32> = netlink::attrs(a[0].1)
            .map(|(ty, v)| {
                assert_eq!(ty, SK_DIAG_BPF_STORAGE_REQ_MAP_FD);
                i32::from_ne_bytes(v.try_into().unwrap())
            })
            .collect();
        assert_eq!(fds, [5, 9]);
        // A reply's nest: two entries, one with a pad before its id.
        let attr = |ty: u16, v: &[u8]| {
            let mut b = ((4 + v.len()) as u16).to_ne_bytes().to_vec();
            b.extend_from_slice(&ty.to_ne_bytes());
            b.extend_from_slice(v);
            b.resize(b.len().div_ceil(4) * 4, 0);
            b
        };
        let mut e1 = attr(SK_DIAG_BPF_STORAGE_MAP_ID, &7u32.to_ne_bytes());
        e1.extend(attr(SK_DIAG_BPF_STORAGE_MAP_VALUE, &[1, 2, 3, 4, 5, 6]));
        let mut e2 = attr(1, &[]);
        e2.extend(attr(SK_DIAG_BPF_STORAGE_MAP_ID, &8u32.to_ne_bytes()));
        e2.extend(attr(SK_DIAG_BPF_STORAGE_MAP_VALUE, &[9; 8]));
        let mut nest = attr(SK_DIAG_BPF_STORAGE | NLA_F_NESTED, &e1);
        nest.extend(attr(SK_DIAG_BPF_STORAGE | NLA_F_NESTED, &e2));
        assert_eq!(
            parse_storages(&nest),
            vec![(7, vec![1, 2, 3, 4, 5, 6]), (8, vec![9; 8])]
        );
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
        assert_eq!(me.state_name, "LISTEN");
        assert!(me.info.is_some(), "INET_DIAG_INFO parsed");
        let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
        assert_eq!(me.cong, default.trim());
        // The counting walk sees at least this listener under that name.
        assert!(count_by_cc().unwrap()[default.trim()] >= 1);
    }
}

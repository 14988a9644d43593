//! Queue statistics of a qdisc over rtnetlink (RTM_GETQDISC), so the lab can
//! sample the bottleneck every few milliseconds without spawning `tc`.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const RTM_GETQDISC: u16 = 38;
const RTM_NEWQDISC: u16 = 36;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const TCA_KIND: u16 = 1;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;

/// One qdisc's counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QdiscStats {
    pub kind: String,
    pub handle: u32,
    pub parent: u32,
    pub bytes: u64,
    pub packets: u32,
    /// Packets queued now.
    pub qlen: u32,
    /// Bytes queued now.
    pub backlog: u32,
    pub drops: u32,
}

/// An rtnetlink socket bound in the namespace where it was created.
pub struct QdiscProbe {
    fd: OwnedFd,
    ifindex: i32,
    seq: u32,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
}

/// Iterate netlink attributes in `b`: (type, payload).
fn attrs(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut o = 0;
    std::iter::from_fn(move || {
        if o + 4 > b.len() {
            return None;
        }
        let len = u16_at(b, o) as usize;
        if len < 4 || o + len > b.len() {
            return None;
        }
        let item = (u16_at(b, o + 2) & 0x3fff, &b[o + 4..o + len]);
        o += align4(len);
        Some(item)
    })
}

impl QdiscProbe {
    /// A probe for device `ifindex` of the calling thread's namespace.
    pub fn new(ifindex: i32) -> std::io::Result<QdiscProbe> {
        // SAFETY: socket(2); the fd is owned below.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(QdiscProbe {
            // SAFETY: fresh fd we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            ifindex,
            seq: 0,
        })
    }

    /// All qdiscs of the device, root first as the kernel lists them.
    pub fn sample(&mut self) -> std::io::Result<Vec<QdiscStats>> {
        self.seq += 1;
        // nlmsghdr (16) + tcmsg (20)
        let mut req = [0u8; 36];
        req[0..4].copy_from_slice(&36u32.to_ne_bytes());
        req[4..6].copy_from_slice(&RTM_GETQDISC.to_ne_bytes());
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
        req[6..8].copy_from_slice(&flags.to_ne_bytes());
        req[8..12].copy_from_slice(&self.seq.to_ne_bytes());
        req[20..24].copy_from_slice(&self.ifindex.to_ne_bytes());
        // SAFETY: sending our buffer on our socket (to the kernel, pid 0).
        let n = unsafe { libc::send(self.fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            // SAFETY: receiving into our buffer.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let b = &buf[..n as usize];
            let mut o = 0;
            while o + 16 <= b.len() {
                let len = u32_at(b, o) as usize;
                let ty = u16_at(b, o + 4);
                if len < 16 || o + len > b.len() {
                    break;
                }
                match ty {
                    NLMSG_DONE => return Ok(out),
                    NLMSG_ERROR => {
                        let err = u32_at(b, o + 16) as i32;
                        if err != 0 {
                            return Err(std::io::Error::from_raw_os_error(-err));
                        }
                    }
                    RTM_NEWQDISC if len >= 36 => {
                        let m = &b[o + 16..o + len];
                        if u32_at(m, 4) as i32 == self.ifindex {
                            out.push(parse_qdisc(m));
                        }
                    }
                    _ => {}
                }
                o += align4(len);
            }
        }
    }

    /// The qdisc with `handle` (e.g. 0x0010_0000 for "10:", handles are hex).
    pub fn by_handle(&mut self, handle: u32) -> std::io::Result<Option<QdiscStats>> {
        Ok(self.sample()?.into_iter().find(|q| q.handle == handle))
    }
}

fn parse_qdisc(m: &[u8]) -> QdiscStats {
    let mut q = QdiscStats {
        handle: u32_at(m, 8),
        parent: u32_at(m, 12),
        ..Default::default()
    };
    for (ty, p) in attrs(&m[20..]) {
        match ty {
            TCA_KIND => {
                q.kind = String::from_utf8_lossy(p)
                    .trim_end_matches('\0')
                    .to_string();
            }
            TCA_STATS2 => {
                for (t2, p2) in attrs(p) {
                    if t2 == TCA_STATS_BASIC && p2.len() >= 12 {
                        q.bytes = u64::from_ne_bytes(p2[0..8].try_into().unwrap());
                        q.packets = u32_at(p2, 8);
                    } else if t2 == TCA_STATS_QUEUE && p2.len() >= 12 {
                        q.qlen = u32_at(p2, 0);
                        q.backlog = u32_at(p2, 4);
                        q.drops = u32_at(p2, 8);
                    }
                }
            }
            _ => {}
        }
    }
    q
}

/// The index of device `name` in the calling thread's namespace.
pub fn ifindex(name: &str) -> std::io::Result<i32> {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(i as i32)
    }
}

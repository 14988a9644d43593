//! Queue statistics of a qdisc over rtnetlink (RTM_GETQDISC), so the lab can
//! sample the bottleneck every few milliseconds without spawning `tc`.

use std::os::fd::OwnedFd;

use ccload::host::netlink::{self, attrs};

const RTM_GETQDISC: u16 = 38;
const RTM_NEWQDISC: u16 = 36;
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

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
}

impl QdiscProbe {
    /// A probe for device `ifindex` of the calling thread's namespace.
    pub fn new(ifindex: i32) -> std::io::Result<QdiscProbe> {
        Ok(QdiscProbe {
            fd: netlink::socket(libc::NETLINK_ROUTE)?,
            ifindex,
            seq: 0,
        })
    }

    /// All qdiscs of the device, root first as the kernel lists them.
    pub fn sample(&mut self) -> std::io::Result<Vec<QdiscStats>> {
        self.seq += 1;
        // struct tcmsg (20 bytes); the kernel dumps every device, filtered here.
        let mut tcmsg = [0u8; 20];
        tcmsg[4..8].copy_from_slice(&self.ifindex.to_ne_bytes());
        let mut out = Vec::new();
        netlink::dump(&self.fd, RTM_GETQDISC, self.seq, &tcmsg, |ty, m| {
            if ty == RTM_NEWQDISC && m.len() >= 20 && u32_at(m, 4) as i32 == self.ifindex {
                out.push(parse_qdisc(m));
            }
        })?;
        Ok(out)
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

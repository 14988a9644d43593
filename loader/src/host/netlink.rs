//! The netlink plumbing shared by sock_diag (`diag`) and the testbed's
//! rtnetlink qdisc sampler: a dump request, the receive loop that walks
//! nlmsghdrs until NLMSG_DONE, and the attribute walker.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;

/// Round a netlink length up to 4 bytes.
pub fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// A netlink socket of `protocol` (NETLINK_ROUTE, NETLINK_SOCK_DIAG, ...),
/// bound to the calling thread's network namespace.
pub fn socket(protocol: i32) -> io::Result<OwnedFd> {
    // SAFETY: socket(2); the fd is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            protocol,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A dump request: nlmsghdr (type `ty`, REQUEST|DUMP, `seq`, pid 0) and
/// `payload`.
pub fn request(ty: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let len = 16 + payload.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_ne_bytes());
    msg.extend_from_slice(&ty.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    msg.extend_from_slice(payload);
    msg
}

/// Send a dump request of message type `ty` with `payload`, then call
/// `on_msg(type, body)` for every reply message until NLMSG_DONE.
pub fn dump(
    fd: &OwnedFd,
    ty: u16,
    seq: u32,
    payload: &[u8],
    mut on_msg: impl FnMut(u16, &[u8]),
) -> io::Result<()> {
    let msg = request(ty, seq, payload);
    // SAFETY: msg is a valid buffer of msg.len() bytes on our socket.
    if unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(());
        }
        if walk(&buf[..n as usize], &mut on_msg)? {
            return Ok(());
        }
    }
}

/// The messages of one receive batch: `on_msg` for data messages; Ok(true)
/// at NLMSG_DONE; an error for an NLMSG_ERROR with a code, or one too short
/// to carry its code (16-byte header + 4-byte error).
pub(crate) fn walk(data: &[u8], on_msg: &mut impl FnMut(u16, &[u8])) -> io::Result<bool> {
    let mut off = 0;
    while off + 16 <= data.len() {
        let len = u32::from_ne_bytes(data[off..off + 4].try_into().unwrap()) as usize;
        let ty = u16::from_ne_bytes(data[off + 4..off + 6].try_into().unwrap());
        if len < 16 || off + len > data.len() {
            break;
        }
        match ty {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let Some(code) = data.get(off + 16..off + 20).filter(|_| len >= 20) else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("netlink: NLMSG_ERROR of {len} bytes carries no error code"),
                    ));
                };
                let err = i32::from_ne_bytes(code.try_into().unwrap());
                if err != 0 {
                    return Err(io::Error::from_raw_os_error(-err));
                }
            }
            _ => on_msg(ty, &data[off + 16..off + len]),
        }
        off += align4(len);
    }
    Ok(false)
}

/// The attributes in `b`: (type without the nested/byte-order flags, payload).
pub fn attrs(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut o = 0;
    std::iter::from_fn(move || {
        if o + 4 > b.len() {
            return None;
        }
        let len = u16::from_ne_bytes([b[o], b[o + 1]]) as usize;
        if len < 4 || o + len > b.len() {
            return None;
        }
        let item = (
            u16::from_ne_bytes([b[o + 2], b[o + 3]]) & 0x3fff,
            &b[o + 4..o + len],
        );
        o += align4(len);
        Some(item)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attrs_walks_aligned_attributes_and_stops_on_garbage() {
        // (len 5, type 1, "a" + 3 pad), (len 8, type 0x8002 nested, u32 7), truncated
        let mut b = vec![5, 0, 1, 0, b'a', 0, 0, 0, 8, 0, 2, 0x80];
        b.extend_from_slice(&7u32.to_ne_bytes());
        b.extend_from_slice(&[40, 0, 3, 0]);
        let v: Vec<(u16, Vec<u8>)> = attrs(&b).map(|(t, p)| (t, p.to_vec())).collect();
        assert_eq!(
            v,
            vec![(1, b"a".to_vec()), (2, 7u32.to_ne_bytes().to_vec())]
        );
    }

    fn hdr(len: u32, ty: u16) -> Vec<u8> {
        let mut b = len.to_ne_bytes().to_vec();
        b.extend_from_slice(&ty.to_ne_bytes());
        b.extend_from_slice(&[0; 10]);
        b
    }

    #[test]
    fn walk_reports_short_and_real_errors_without_panicking() {
        let mut seen = Vec::new();
        let mut f = |t: u16, p: &[u8]| seen.push((t, p.len()));
        // a 16-byte NLMSG_ERROR (no code): an error, not a panic
        let e = walk(&hdr(16, NLMSG_ERROR), &mut f).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        // NLMSG_ERROR with -EPERM
        let mut b = hdr(20, NLMSG_ERROR);
        b.extend_from_slice(&(-1i32).to_ne_bytes());
        assert_eq!(walk(&b, &mut f).unwrap_err().raw_os_error(), Some(1));
        // an ACK (code 0), a data message, then DONE
        let mut b = hdr(20, NLMSG_ERROR);
        b.extend_from_slice(&0i32.to_ne_bytes());
        b.extend(hdr(24, 20));
        b.extend_from_slice(&[1; 8]);
        b.extend(hdr(16, NLMSG_DONE));
        assert!(walk(&b, &mut f).unwrap());
        // a length past the buffer ends the batch
        assert!(!walk(&hdr(4096, 20), &mut f).unwrap());
        assert_eq!(seen, vec![(20, 8)]);
    }
}

//! TCP ports on this machine: finding a free one, telling whether one is taken, and (best effort, Linux)
//! naming the process that holds it.
//!
//! This module owns the question "may a serve be started on host:port?" (case 27: a port already held by
//! another server makes every later number belong to the wrong server). It never starts or stops processes;
//! [`crate::io::serve`] uses it before spawning and after stopping.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::Duration;

/// How long [`port_in_use`] waits for a TCP connect before treating the port as not answering, in ms.
pub(crate) const CONNECT_PROBE_TIMEOUT_MS: u64 = 500;

/// Ports handed out by [`free_port`] in this process, so that two callers (e.g. tests running in
/// parallel) do not get the same port between its release and its use.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Resolves `host` (a name, an IPv4 address or an IPv6 address, with or without brackets) with `port`.
///
/// Errors: `InvalidInput` if the host does not resolve to any address.
pub(crate) fn resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    let bare = host.trim().trim_start_matches('[').trim_end_matches(']');
    if bare.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty host"));
    }
    let addrs: Vec<SocketAddr> = (bare, port).to_socket_addrs()?.collect();
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("host {host:?} resolves to no address"),
        ));
    }
    Ok(addrs)
}

/// `host:port` as written in messages and URLs (`127.0.0.1:8080`, `[::1]:8080`).
pub(crate) fn host_port(host: &str, port: u16) -> String {
    let bare = host.trim().trim_start_matches('[').trim_end_matches(']');
    if bare.contains(':') {
        format!("[{bare}]:{port}")
    } else {
        format!("{bare}:{port}")
    }
}

/// A TCP port on `host` that was free a moment ago: binds `host:0`, reads the port the OS chose, and
/// releases it.
///
/// Another process can still take the port before the caller uses it; within this process the same port
/// is not handed out twice (up to 50 attempts), so parallel tests each get their own.
///
/// Errors: the host does not resolve, or binding fails (e.g. an address not on this machine).
pub fn free_port(host: &str) -> io::Result<u16> {
    let addr = resolve(host, 0)?[0];
    let mut last = 0u16;
    for _ in 0..50 {
        let port = {
            let listener = TcpListener::bind(addr)?;
            listener.local_addr()?.port()
        };
        last = port;
        let mut guard = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
        let set = guard.get_or_insert_with(HashSet::new);
        if set.insert(port) {
            return Ok(port);
        }
    }
    Ok(last)
}

/// Whether something already holds `host:port`: true if a TCP connect succeeds (someone answers) or if
/// binding the address fails with "address in use" (bound, perhaps not listening).
///
/// A host that does not resolve, or a bind refused for another reason (permission, address not on this
/// machine), counts as not in use: starting a serve there fails on its own, with its own message.
pub(crate) fn port_in_use(host: &str, port: u16) -> bool {
    let Ok(addrs) = resolve(host, port) else {
        return false;
    };
    let timeout = Duration::from_millis(CONNECT_PROBE_TIMEOUT_MS);
    for addr in &addrs {
        if TcpStream::connect_timeout(&connect_target(*addr), timeout).is_ok() {
            return true;
        }
    }
    for addr in &addrs {
        // std sets SO_REUSEADDR on Unix, so sockets in TIME_WAIT do not count as "in use".
        if let Err(e) = TcpListener::bind(addr) {
            if e.kind() == io::ErrorKind::AddrInUse {
                return true;
            }
        }
    }
    false
}

/// Whether a TCP connect to `host:port` is refused (or otherwise fails) within `timeout`: the port is
/// closed for clients. Used after stopping a serve.
pub fn refuses_connections(host: &str, port: u16, timeout: Duration) -> bool {
    let Ok(addrs) = resolve(host, port) else {
        return true;
    };
    addrs
        .iter()
        .all(|a| TcpStream::connect_timeout(&connect_target(*a), timeout).is_err())
}

/// The unspecified address (0.0.0.0 / ::) is a fine bind address but an odd connect target: connect to
/// loopback instead.
pub(crate) fn connect_target(addr: SocketAddr) -> SocketAddr {
    let mut a = addr;
    if a.ip().is_unspecified() {
        match a {
            SocketAddr::V4(_) => a.set_ip(std::net::Ipv4Addr::LOCALHOST.into()),
            SocketAddr::V6(_) => a.set_ip(std::net::Ipv6Addr::LOCALHOST.into()),
        }
    }
    a
}

/// The pid of a process holding a TCP socket on local port `port` (listening sockets first), found by
/// matching the socket inode in `/proc/net/tcp{,6}` against `/proc/*/fd`. Linux only, best effort:
/// `None` when the socket or its owner cannot be seen (another network or pid namespace, no permission
/// to read another user's fds, not Linux).
pub fn owner_pid(port: u16) -> Option<u32> {
    let mut listening = Vec::new();
    let mut other = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = fs::read_to_string(table) {
            for (inode, state) in socket_inodes(&text, port) {
                if state == 0x0A {
                    listening.push(inode);
                } else {
                    other.push(inode);
                }
            }
        }
    }
    let wanted: Vec<u64> = listening.into_iter().chain(other).collect();
    if wanted.is_empty() {
        return None;
    }
    let mut found: Vec<(usize, u32)> = Vec::new();
    for pid in super::procfs::pids() {
        let Ok(fds) = fs::read_dir(super::procfs::path(pid, "fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = fs::read_link(fd.path()) else {
                continue;
            };
            let t = target.to_string_lossy();
            if let Some(ino) = t
                .strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|r| r.parse::<u64>().ok())
            {
                if let Some(rank) = wanted.iter().position(|w| *w == ino) {
                    found.push((rank, pid));
                }
            }
        }
    }
    found.sort();
    found.first().map(|(_, pid)| *pid)
}

/// `(inode, state)` of each socket in a `/proc/net/tcp`-format table whose local port is `port`.
/// Sockets with inode 0 (e.g. TIME_WAIT, owned by no process) are skipped.
fn socket_inodes(table: &str, port: u16) -> Vec<(u64, u8)> {
    let mut out = Vec::new();
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 10 {
            continue;
        }
        let Some(local_port) = cols[1]
            .rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
        else {
            continue;
        };
        if local_port != port {
            continue;
        }
        let Ok(state) = u8::from_str_radix(cols[3], 16) else {
            continue;
        };
        let Ok(inode) = cols[9].parse::<u64>() else {
            continue;
        };
        if inode != 0 {
            out.push((inode, state));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_port_is_bindable_and_not_in_use() {
        let port = free_port("127.0.0.1").unwrap();
        assert_ne!(port, 0);
        assert!(!port_in_use("127.0.0.1", port));
        let _l = TcpListener::bind(("127.0.0.1", port)).unwrap();
    }

    #[test]
    fn free_port_never_repeats_within_the_process() {
        let a: HashSet<u16> = (0..20).map(|_| free_port("127.0.0.1").unwrap()).collect();
        assert_eq!(a.len(), 20);
    }

    #[test]
    fn listening_port_is_in_use_and_owned_by_this_process() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(port_in_use("127.0.0.1", port));
        assert!(port_in_use("localhost", port));
        assert!(port_in_use("0.0.0.0", port));
        assert!(!refuses_connections(
            "127.0.0.1",
            port,
            Duration::from_millis(500)
        ));
        if std::path::Path::new("/proc/net/tcp").exists() {
            // A child another test spawns holds this socket too between its fork and its exec (an owner
            // then, truly): asked again, the owner is this process.
            let me = Some(std::process::id());
            let mut owners = vec![owner_pid(port)];
            while owners.last() != Some(&me) && owners.len() < 5 {
                std::thread::sleep(Duration::from_millis(100));
                owners.push(owner_pid(port));
            }
            assert_eq!(owners.last(), Some(&me), "owners named: {owners:?}");
        }
        drop(l);
        // A port just closed refuses connections. Another test or process may bind the freed port at once
        // (a CI run binds hundreds, beside a kill loop starting serves): a port taken again is no evidence,
        // so up to five ports are tried; a `refuses_connections` that never says true fails every one.
        let mut refused = refuses_connections("127.0.0.1", port, Duration::from_millis(500));
        for _ in 0..4 {
            if refused {
                break;
            }
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = l.local_addr().unwrap().port();
            drop(l);
            refused = refuses_connections("127.0.0.1", port, Duration::from_millis(500));
        }
        assert!(refused, "no closed port of five refused connections");
    }

    #[test]
    fn unresolvable_host_is_an_error_not_a_panic() {
        assert!(free_port("no such host .invalid").is_err());
        assert!(!port_in_use("", 8080));
        assert!(resolve("", 1).is_err());
    }

    #[test]
    fn host_port_brackets_ipv6() {
        assert_eq!(host_port("127.0.0.1", 8080), "127.0.0.1:8080");
        assert_eq!(host_port("::1", 8080), "[::1]:8080");
        assert_eq!(host_port("[::1]", 8080), "[::1]:8080");
    }

    #[test]
    fn proc_net_tcp_rows_are_matched_by_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:1F90 0100007F:C350 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0000000000000000\n\
   2: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 999 1 0000000000000000 100 0 0 10 0\n\
garbage\n";
        assert_eq!(socket_inodes(table, 8080), vec![(12345, 0x0A)]);
        assert_eq!(socket_inodes(table, 8081), vec![(999, 0x0A)]);
        assert!(socket_inodes(table, 1).is_empty());
    }
}

//! What a command may ask of the kernel: no capabilities at all (root's commands too: no
//! `chown`, `mknod`, `sethostname`, kernel log, raw sockets, overriding file modes, …), and,
//! without the network, no Unix socket (a socket file such as `docker.sock` or systemd's is
//! reached by path, which neither the network namespace nor Landlock stops) and no io_uring
//! (which could open one past the filter).

use rustix::thread::{CapabilitySet, CapabilitySets};

/// Drops every capability: from the bounding set (an `exec` cannot gain one back, even of a
/// set-uid or file-capability program, even as root), the ambient set, and the thread's own
/// sets.
pub fn drop_capabilities() -> Result<(), String> {
    let held =
        rustix::thread::capabilities(None).map_err(|e| format!("reading the capabilities: {e}"))?;
    // An unprivileged process outside a user namespace holds none and may not change the
    // bounding set; no new privileges (set next) keeps an `exec` from gaining any.
    if held.permitted.is_empty() && held.effective.is_empty() {
        return rustix::thread::clear_ambient_capability_set()
            .map_err(|e| format!("clearing the ambient capabilities: {e}"));
    }
    for cap in CapabilitySet::all().iter() {
        match rustix::thread::remove_capability_from_bounding_set(cap) {
            // A capability this kernel does not know.
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(e) => return Err(format!("dropping capabilities: {e}")),
        }
    }
    rustix::thread::clear_ambient_capability_set()
        .map_err(|e| format!("clearing the ambient capabilities: {e}"))?;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(|e| format!("dropping capabilities: {e}"))
}

/// The seccomp filter of a command without the network: `socket(AF_UNIX, …)` and
/// `io_uring_setup` fail with EACCES; everything else is allowed (`socketpair` too: a pair
/// reaches nothing). Needs no new privileges set first.
#[cfg(target_os = "linux")]
pub fn no_unix_sockets() -> Result<(), String> {
    use std::collections::BTreeMap;

    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => TargetArch::x86_64,
        "aarch64" => TargetArch::aarch64,
        "riscv64" => TargetArch::riscv64,
        other => return Err(format!("no seccomp filter for {other}")),
    };
    let unix = || -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        Ok(vec![SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            libc::AF_UNIX as u64,
        )?])?])
    };
    let build = || -> Result<seccompiler::BpfProgram, seccompiler::Error> {
        let mut rules = BTreeMap::new();
        rules.insert(libc::SYS_socket, unix()?);
        rules.insert(libc::SYS_io_uring_setup, Vec::new());
        // The x32 numbers of the same calls (bit 30 set), where a kernel still runs x32.
        if arch == TargetArch::x86_64 {
            rules.insert(X32 | libc::SYS_socket, unix()?);
            rules.insert(X32 | libc::SYS_io_uring_setup, Vec::new());
        }
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EACCES as u32),
            arch,
        )?;
        filter.try_into().map_err(seccompiler::Error::Backend)
    };
    let program = build().map_err(|e| format!("building the seccomp filter: {e}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))
}

/// The x32 system-call bit.
#[cfg(target_os = "linux")]
const X32: i64 = 0x4000_0000;

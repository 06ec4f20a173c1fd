//! What a sandboxed command sees of the machine's processes.
//!
//! `/proc/<pid>/cmdline` of every process is readable by everyone, so a
//! command run on the host's `/proc` lists every other running command
//! with its arguments (`ps ax`), other users' bots' included. The launcher
//! therefore gives itself a mount namespace of its own (before it confines
//! itself: Landlock forbids changing the mounts afterwards) and mounts a
//! fresh `proc` on `/proc` with `hidepid=ptraceable` (Linux 5.8): a process
//! is listed there only to whoever may trace it. Landlock lets a command
//! trace only the processes of its own sandbox (its own domain), so the
//! command sees its own processes and nothing else: neither the host nor
//! another command, each of which runs in a domain of its own.
//!
//! Nothing else changes: the command keeps the host's process ids (it is
//! the same process, the launcher becomes it) and every other mount.
//!
//! Mounting a `proc` for the machine's process ids takes `CAP_SYS_ADMIN`
//! (a host run as root). Without it, a `/proc` that the administrator
//! mounted `hidepid=ptraceable` for the whole machine has the same effect,
//! and is what the probe looks for; otherwise the command sees every
//! process, as before, and the probe says why (the host logs it once at
//! start). A command never fails for want of this.

use std::ffi::CStr;

use rustix::mount::MountFlags;
use rustix::mount::MountPropagationFlags;
use rustix::thread::UnshareFlags;

/// The option of the `proc` mount that lists only traceable processes.
const HIDE: &CStr = c"hidepid=ptraceable";

/// What a command sees of the machine's processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessView {
    /// Only its own: `/proc` lists the processes it may trace.
    Own,
    /// Every process with its arguments, for the reason given.
    All(String),
}

impl ProcessView {
    /// The probe's line for it, read back by [`ProcessView::parse`].
    pub fn line(&self) -> String {
        match self {
            Self::Own => "processes=own".to_owned(),
            Self::All(why) => format!("processes=all {}", why.replace('\n', " ")),
        }
    }

    /// Reads a [`ProcessView::line`].
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.trim().strip_prefix("processes=")?;
        match rest.split_once(' ').unwrap_or((rest, "")) {
            ("own", "") => Some(Self::Own),
            ("all", why) => Some(Self::All(why.trim().to_owned())),
            _ => None,
        }
    }
}

/// Gives this process a mount namespace of its own with a `/proc` that
/// lists only the processes it may trace (module doc), to be called before
/// Landlock confines it; says what the command will see. On failure the
/// process keeps the host's `/proc` (the mounts it sees are unchanged).
pub(super) fn private_proc() -> ProcessView {
    match mount_private_proc() {
        Ok(()) => ProcessView::Own,
        Err(why) => {
            let system_hides = std::fs::read_to_string("/proc/self/mountinfo")
                .is_ok_and(|info| proc_hides_untraceable(&info));
            if system_hides {
                ProcessView::Own
            } else {
                ProcessView::All(why)
            }
        }
    }
}

fn mount_private_proc() -> Result<(), String> {
    const ADVICE: &str = "the host needs CAP_SYS_ADMIN (run as root) to mount a private /proc \
                          for its commands; or mount the machine's /proc with \
                          hidepid=ptraceable (docs/security.md)";
    // Only a new mount namespace: rustix deprecated its safe `unshare` for
    // `UnshareFlags::FILES` (a thread's file descriptors no longer the
    // others'), which is not asked for; NEWNS leaves every thread's files
    // as they are (it gives this thread its own cwd and root, still the
    // same directories). Only this thread is in the new namespace: the
    // one that confines itself and executes the command.
    #[allow(deprecated)]
    rustix::thread::unshare(UnshareFlags::NEWNS)
        .map_err(|e| format!("cannot make a mount namespace of its own ({e}): {ADVICE}"))?;
    // private before anything is mounted: a mount under a shared `/`
    // would appear in the host's namespace too
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|e| format!("cannot make its mounts private ({e}): {ADVICE}"))?;
    rustix::mount::mount(
        "proc",
        "/proc",
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        HIDE,
    )
    .map_err(|e| {
        format!("cannot mount a /proc with hidepid=ptraceable (Linux 5.8 or later) ({e}): {ADVICE}")
    })
}

/// Whether `mountinfo` (`/proc/self/mountinfo`) has `/proc` mounted with
/// `hidepid=ptraceable` (the last mount there, the one seen).
pub(crate) fn proc_hides_untraceable(mountinfo: &str) -> bool {
    mountinfo
        .lines()
        // the last mount at /proc is the one seen
        .rev()
        .find_map(|line| {
            // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS
            let (mount, fs) = line.split_once(" - ")?;
            let point = mount.split(' ').nth(4)?;
            let mut fs = fs.split(' ');
            let kind = fs.next()?;
            let super_options = fs.nth(1).unwrap_or("");
            (point == "/proc").then_some((kind, super_options))
        })
        .is_some_and(|(kind, options)| {
            kind == "proc"
                && options
                    .split(',')
                    .any(|o| o == "hidepid=ptraceable" || o == "hidepid=4")
        })
}

#[cfg(test)]
#[path = "sandbox_proc_tests.rs"]
mod tests;

//! Shell commands that outlive a host killed with SIGKILL.
//!
//! A command runs in its own process group, which the Shell tool kills on
//! timeout, cancel and exit; a host that dies without running its code
//! cannot. Each running command is therefore listed as a file
//! `<dir>/<pgid>` holding its leader's start time, removed when the call
//! ends. A host starting on the same data directory ([`ShellRegistry::reap`])
//! kills every group still listed whose leader has the same start time —
//! a pid reused by another process since has another start time and is
//! left alone — and clears the list, before any turn resumes (the call is
//! then reported `outcome unknown`, and nothing of it runs on).
//!
//! Start times come from `/proc/<pid>/stat` (Linux). Elsewhere nothing is
//! listed and nothing is reaped.

use std::path::Path;
use std::path::PathBuf;

/// The list of running commands' process groups.
#[derive(Debug, Clone)]
pub struct ShellRegistry {
    dir: PathBuf,
}

/// A listed command; dropping it takes it off the list.
#[derive(Debug)]
pub(crate) struct Listed {
    path: PathBuf,
}

impl Drop for Listed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl ShellRegistry {
    /// A registry kept in `dir` (created when needed).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Lists the group led by `pgid` while the returned guard lives. A
    /// failure to list only loses the clean-up after a SIGKILL: it is
    /// logged, the command runs.
    pub(crate) fn list(&self, pgid: u32) -> Option<Listed> {
        let started = start_time(pgid)?;
        let path = self.dir.join(pgid.to_string());
        let written = std::fs::create_dir_all(&self.dir)
            .and_then(|()| std::fs::write(&path, started.to_string()));
        match written {
            Ok(()) => Some(Listed { path }),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot list a running shell command");
                None
            }
        }
    }

    /// Kills the process groups a previous host left running and clears
    /// the list; returns how many were killed.
    pub fn reap(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut killed = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            if let Some(pgid) = still_running(&path)
                && kill_group(pgid)
            {
                killed += 1;
                tracing::warn!(
                    pgid,
                    "killed a shell command left running by a host that was killed"
                );
            }
            let _ = std::fs::remove_file(&path);
        }
        killed
    }
}

/// The group a list file names, if its leader is still the process that
/// was listed.
fn still_running(path: &Path) -> Option<u32> {
    let pgid: u32 = path.file_name()?.to_str()?.parse().ok()?;
    let listed: u64 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    (start_time(pgid) == Some(listed)).then_some(pgid)
}

fn kill_group(pgid: u32) -> bool {
    let Ok(pid) = i32::try_from(pgid) else {
        return false;
    };
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .is_ok()
}

/// When process `pid` started, in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`; the command name before it may hold spaces and
/// parentheses, so fields are counted after its closing one).
#[cfg(target_os = "linux")]
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(not(target_os = "linux"))]
fn start_time(_pid: u32) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn the_start_time_of_this_process_is_read_and_stable() {
        let me = std::process::id();
        let t = start_time(me);
        assert!(t.is_some());
        assert_eq!(t, start_time(me));
    }

    #[test]
    fn a_listed_pid_with_another_start_time_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let reg = ShellRegistry::new(dir.path());
        // this process, listed with a start time it does not have: a reused pid
        let me = std::process::id();
        std::fs::write(dir.path().join(me.to_string()), "1").unwrap();
        std::fs::write(dir.path().join("not-a-pid"), "5").unwrap();
        assert_eq!(reg.reap(), 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

//! A Shell command's process group, killed however the call ends, and
//! listed so that a host killed with SIGKILL has it killed at the next start.
//!
//! A command runs in its own process group, owned by a [`GroupGuard`]: the
//! Shell tool kills the group on timeout, cancel and exit, and dropping the
//! guard kills it too, so a call whose future is dropped (a stopping host
//! kills its actors and drops the turns they were running) leaves nothing
//! behind. A host that dies without running its code cannot; each running
//! command is therefore listed as a file `<dir>/<pgid>` holding its
//! leader's start time, removed only once the group has been killed (a
//! group the guard could not kill stays listed). A host starting on the
//! same data directory ([`ShellRegistry::reap`]) kills every group still
//! listed whose leader has the same start time — a pid reused by another
//! process since has another start time and is left alone — and clears the
//! list, before any turn resumes (the call is then reported `outcome
//! unknown`, and nothing of it runs on).
//!
//! A process that leaves the group (`setsid`, `setpgid`) is not killed
//! with it. While such a process holds the command's output pipes open the
//! call cannot see the end of the output: the guard then finds the
//! processes holding those pipes (`/proc/<pid>/fd`) and kills them too
//! ([`kill_pipe_holders`]). One that left the group and closed or
//! redirected its output is not found, and runs on. The list file names
//! the pipes too, so that a host started after a SIGKILL kills such a
//! process as well (it kept running and did its work after the call had
//! been reported `outcome unknown`; QA, 2026-12-04): one that holds a
//! listed pipe and started between the command and the new host.
//!
//! Start times come from `/proc/<pid>/stat` and open files from
//! `/proc/<pid>/fd` (Linux). Elsewhere nothing is listed and nothing is
//! reaped, the guard kills without the check, and escapees are not found.

use std::path::Path;
use std::path::PathBuf;

use nix::errno::Errno;

/// The list of running commands' process groups.
#[derive(Debug, Clone)]
pub struct ShellRegistry {
    dir: PathBuf,
}

impl ShellRegistry {
    /// A registry kept in `dir` (created when needed).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// A registry kept in `dir`, which is made now and must be a
    /// directory the host can write: a start fails with this error
    /// otherwise, naming it and the fix. (A plain file in its place let
    /// the host start with every command unlisted, so a SIGKILL left
    /// them running and a restart did not kill them; QA, 2026-12-04.)
    pub fn open(dir: impl Into<PathBuf>) -> std::io::Result<Self> {
        let dir = dir.into();
        let probe = dir.join(".writable");
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&probe, b""))
            .and_then(|()| std::fs::remove_file(&probe))
            .map_err(|e| {
                let shown = dir.display();
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "the list of running shell commands {shown} cannot be used ({e}); it must \
                         be a directory the user running botfleet can write (the host kills the \
                         commands listed there after a crash): move away whatever is there (the \
                         host creates it again), or fix its owner and permissions (`chown -R \
                         $(id -un) {shown}`, `chmod u+rwx {shown}`)"
                    ),
                )
            })?;
        Ok(Self { dir })
    }

    /// Lists the group led by `pgid`, whose leader started at `started`,
    /// with its output `pipes`; returns the list file. A failure to list
    /// only loses the clean-up after a SIGKILL: it is logged, the command
    /// runs.
    fn list(&self, pgid: u32, started: u64, pipes: &[String]) -> Option<PathBuf> {
        let path = self.dir.join(pgid.to_string());
        let mut text = started.to_string();
        for pipe in pipes {
            text.push('\n');
            text.push_str(pipe);
        }
        let written = std::fs::create_dir_all(&self.dir).and_then(|()| std::fs::write(&path, text));
        match written {
            Ok(()) => Some(path),
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
        let now = start_time(std::process::id());
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(listed) = Listed::read(&path) else {
                let _ = std::fs::remove_file(&path);
                continue;
            };
            if start_time(listed.pgid) == Some(listed.started) && kill_group(listed.pgid).is_ok() {
                killed += 1;
                tracing::warn!(
                    pgid = listed.pgid,
                    "killed a shell command left running by a host that was killed"
                );
            }
            // what left the group holding the output: started with the
            // command or after it, before this host (a pipe id of a later
            // pipe is another's)
            if !listed.pipes.is_empty()
                && let Some(now) = now
            {
                killed += kill_pipe_holders(
                    &listed.pipes,
                    Holders::LeftBehind {
                        group: listed.pgid,
                        from: listed.started,
                        to: now,
                    },
                );
            }
            let _ = std::fs::remove_file(&path);
        }
        killed
    }
}

/// The process group of a running command, from its start until the group
/// is killed. Dropping it kills the group (if [`GroupGuard::kill`] has not
/// already), then takes it off the list.
#[derive(Debug)]
pub(crate) struct GroupGuard {
    pgid: u32,
    /// The leader's start time, to tell it from a later process given the
    /// same pid (none: unknown, not checked).
    started: Option<u64>,
    /// The list file (none: not listed).
    listed: Option<PathBuf>,
    /// Whether the group has been killed or found gone: nothing is left
    /// to kill, and it can come off the list.
    killed: bool,
    /// The command's output pipes (as `/proc/<pid>/fd` links name them,
    /// `pipe:[inode]`) while they may still be held open by a process
    /// outside the group.
    pipes: Vec<String>,
}

impl GroupGuard {
    /// Guards the group led by `pgid`, a child not yet waited for (so its
    /// start time can be read), listed in `registry` if there is one, and
    /// watches its output `pipes` (ids from [`pipe_id`]): a process that
    /// left the group and still holds one is killed with the group.
    pub(crate) fn new(pgid: u32, registry: Option<&ShellRegistry>, pipes: Vec<String>) -> Self {
        let started = start_time(pgid);
        let listed = registry
            .zip(started)
            .and_then(|(r, t)| r.list(pgid, t, &pipes));
        Self {
            pgid,
            started,
            listed,
            killed: false,
            pipes,
        }
    }

    /// The output was read to its end: no process holds the pipes any more.
    pub(crate) fn output_closed(&mut self) {
        self.pipes.clear();
    }

    /// The pipes still watched (for [`kill_pipe_holders`] off the runtime's
    /// threads).
    pub(crate) fn watched_pipes(&self) -> Vec<String> {
        self.pipes.clone()
    }

    /// Kills the whole group with SIGKILL, once. The leader may have been
    /// waited for already (the command exited, its background children
    /// may run on): its pid stays taken while any process of the group
    /// lives, so a pid now held by a process with another start time means
    /// the group is gone, and it is left alone.
    pub(crate) fn kill(&mut self) {
        if self.killed {
            return;
        }
        let reused = self
            .started
            .is_some_and(|listed| start_time(self.pgid).is_some_and(|now| now != listed));
        self.killed = reused
            || match kill_group(self.pgid) {
                // ESRCH: no process left in the group
                Ok(()) | Err(Errno::ESRCH) => true,
                Err(error) => {
                    tracing::warn!(pgid = self.pgid, %error, "cannot kill a shell command's process group");
                    false
                }
            };
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        if !self.pipes.is_empty() {
            kill_pipe_holders(&self.pipes, Holders::Any);
        }
        // a group not killed stays listed: the next start retries
        if self.killed
            && let Some(path) = &self.listed
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A list file: `<dir>/<pgid>` holding the leader's start time, then the
/// output's pipe ids, a line each (a file of an older host has no pipes).
struct Listed {
    pgid: u32,
    started: u64,
    pipes: Vec<String>,
}

impl Listed {
    fn read(path: &Path) -> Option<Self> {
        let pgid: u32 = path.file_name()?.to_str()?.parse().ok()?;
        let text = std::fs::read_to_string(path).ok()?;
        let mut lines = text.lines();
        let started: u64 = lines.next()?.trim().parse().ok()?;
        let pipes = lines
            .map(str::trim)
            .filter(|l| l.starts_with("pipe:"))
            .map(str::to_owned)
            .collect();
        Some(Self {
            pgid,
            started,
            pipes,
        })
    }
}

fn kill_group(pgid: u32) -> nix::Result<()> {
    let pid = i32::try_from(pgid).map_err(|_| Errno::EINVAL)?;
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
}

/// The id of the pipe open as file descriptor `fd` of this process, as
/// `/proc/<pid>/fd` links name it (`pipe:[inode]`), the same for both ends.
#[cfg(target_os = "linux")]
pub(crate) fn pipe_id(fd: std::os::fd::RawFd) -> Option<String> {
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    let target = target.to_str()?;
    target.starts_with("pipe:").then(|| target.to_owned())
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn pipe_id(_fd: std::os::fd::RawFd) -> Option<String> {
    None
}

/// Which processes holding a command's output pipes [`kill_pipe_holders`]
/// kills.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Holders {
    /// Every one but this process (the host reads the pipes).
    Any,
    /// Those a command listed by a killed host left behind: out of its
    /// `group` (killed on its own), started between `from` and `to`
    /// (clock ticks since boot, both included: the command's start and
    /// this host's), so that a later pipe given a listed pipe's id is not
    /// taken for it.
    LeftBehind { group: u32, from: u64, to: u64 },
}

/// Kills (SIGKILL) every other process holding one of `pipes` open — a
/// command's background process that left its group and kept its output
/// open — and the group such a process leads (it made it with `setsid`,
/// so its members are its own), among `which`; returns how many were
/// found. Reads every `/proc/<pid>/fd` this user may read: called only
/// when the output stays open after the group was killed, and for a
/// command a killed host left listed.
#[cfg(target_os = "linux")]
pub(crate) fn kill_pipe_holders(pipes: &[String], which: Holders) -> usize {
    use nix::sys::signal::Signal;
    use nix::unistd::Pid;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let me = std::process::id();
    let my_group = nix::unistd::getpgrp();
    let mut found = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|pid| *pid != me)
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|t| pipes.iter().any(|p| t.as_os_str() == p.as_str()))
        });
        let chosen = || match which {
            Holders::Any => true,
            Holders::LeftBehind { group, from, to } => {
                start_time(pid).is_some_and(|started| (from..=to).contains(&started))
                    && i32::try_from(pid).is_ok_and(|p| {
                        nix::unistd::getpgid(Some(Pid::from_raw(p)))
                            .is_ok_and(|g| u32::try_from(g.as_raw()).ok() != Some(group))
                    })
            }
        };
        let Some(pid) = (holds && chosen())
            .then(|| i32::try_from(pid).ok())
            .flatten()
        else {
            continue;
        };
        let pid = Pid::from_raw(pid);
        let leads = nix::unistd::getpgid(Some(pid)).is_ok_and(|g| g == pid && g != my_group);
        let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
        if leads {
            let _ = nix::sys::signal::killpg(pid, Signal::SIGKILL);
        }
        tracing::info!(
            pid = pid.as_raw(),
            "killed a process that left a shell command's process group and kept its output open"
        );
        found += 1;
    }
    found
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn kill_pipe_holders(_pipes: &[String], _which: Holders) -> usize {
    0
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

    #[cfg(target_os = "linux")]
    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    }

    /// A group leader `sh` that has started a background `sleep`; returns
    /// the leader and the sleep's pid.
    #[cfg(target_os = "linux")]
    fn group_with_a_child() -> (std::process::Child, u32) {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let mut leader = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(leader.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        (leader, line.trim().parse().unwrap())
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_dropped_guard_kills_the_whole_group_then_unlists_it() {
        let dir = tempfile::tempdir().unwrap();
        let reg = ShellRegistry::new(dir.path());
        let (mut leader, child) = group_with_a_child();
        let guard = GroupGuard::new(leader.id(), Some(&reg), Vec::new());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        drop(guard);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let _ = leader.wait();
        // SIGKILL is delivered at once; init reaps the orphan soon after
        for _ in 0..100 {
            if !alive(child) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("the background child {child} survived its group's guard");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_guard_whose_pid_now_has_another_start_time_kills_nothing() {
        let (mut leader, child) = group_with_a_child();
        let pgid = leader.id();
        let started = start_time(pgid).unwrap();
        // as if the listed leader had exited and its pid been reused
        drop(GroupGuard {
            pgid,
            started: Some(started + 1),
            listed: None,
            killed: false,
            pipes: Vec::new(),
        });
        let alive_after = alive(pgid) && alive(child);
        let _ = kill_group(pgid);
        let _ = leader.wait();
        assert!(alive_after, "another process's group was killed");
    }
}

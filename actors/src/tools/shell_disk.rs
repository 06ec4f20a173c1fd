//! Shell and the free space of the workspace's file system: a command is
//! not started when the disk is far below the tools' reserve, and one that
//! takes the disk below it is stopped with its process group
//! (workspace_disk.rs has the reserve and why).

use std::time::Duration;

use crate::tools::ToolError;
use crate::tools::workspace::DiskSpace;
use crate::tools::workspace::FREE_SPACE_HINT;
use crate::tools::workspace::Workspace;
use crate::tools::workspace::disk_size;

/// How often the free space is looked at while a command runs. A write
/// at disk speed (1-2 GB/s) goes this much times that past the reserve
/// before it is stopped, which the reserve's default (512 MiB) leaves room
/// for.
const POLL: Duration = Duration::from_millis(100);

/// How far down a running command may take the free space.
#[derive(Debug, Clone, Copy)]
pub(super) struct Floor {
    /// Below this many free bytes it is stopped.
    bytes: u64,
    /// The space at its start.
    start: DiskSpace,
}

/// Where the command's floor is, or why it may not start: at or above the
/// reserve, the reserve; below it but above half of it, the free space at
/// the start less [`DiskSpace::below_reserve_slack`] (it may free space,
/// `rm`, but not take more); below half of it, it is not started. `None`:
/// no reserve.
pub(super) fn floor(ws: &Workspace) -> Result<Option<Floor>, ToolError> {
    let Some(space) = ws.disk_space() else {
        return Ok(None);
    };
    if space.free >= space.reserve {
        return Ok(Some(Floor {
            bytes: space.reserve,
            start: space,
        }));
    }
    if space.free >= space.reserve / 2 {
        return Ok(Some(Floor {
            bytes: space.free.saturating_sub(space.below_reserve_slack()),
            start: space,
        }));
    }
    Err(ToolError::new(
        format!(
            "the command was not started: the workspace's disk has only {} free, less than \
             half of the {}",
            disk_size(space.free),
            space.reserve_text()
        ),
        "tell your owner: the host's operator has to free space on the disk (or lower \
         runtime.tools_min_free_disk_mb) before commands can run again",
    ))
}

impl Floor {
    /// The largest file the command may write: the room above its floor
    /// at its start, and [`DiskSpace::below_reserve_slack`] beyond it, so
    /// that a file grown to it has taken the disk below the floor and the
    /// watch of [`Floor::crossed`] stops the command with its own words.
    /// The watch looks every 100 ms, which a call that takes space at
    /// once outran by any amount (QA: `fallocate -l 2G` went 1.7 GiB past
    /// the reserve), as did a `setsid` writer left running after the call,
    /// which nothing watches: with the limit (`RLIMIT_FSIZE`, set by the
    /// command's first `sh`: shell.rs) each of their files stops at it
    /// with `File too large`.
    pub(super) fn file_limit(&self) -> u64 {
        self.start.free.saturating_sub(self.bytes) + self.start.below_reserve_slack()
    }

    /// A note for the result of a command started below the reserve.
    pub(super) fn note(&self) -> String {
        if self.start.free >= self.start.reserve {
            return String::new();
        }
        format!(
            "\n[the workspace's disk has {} free, below the {}: commands may only free space \
             until it is back above it; {FREE_SPACE_HINT}]",
            disk_size(self.start.free),
            self.start.reserve_text()
        )
    }

    /// Waits until the free space falls below the floor; returns it then.
    pub(super) async fn crossed(self, ws: &Workspace) -> DiskSpace {
        loop {
            tokio::time::sleep(POLL).await;
            if let Some(now) = ws.disk_space()
                && now.free < self.bytes
            {
                return now;
            }
        }
    }
}

/// The error of a command stopped by [`Floor::crossed`].
pub(super) fn stopped(now: &DiskSpace, output: &str) -> ToolError {
    ToolError::new(
        format!(
            "the command was stopped and killed with its process group: the workspace's disk \
             has only {} free, below the {}; the files it wrote are left as they are; output \
             so far:\n{output}",
            disk_size(now.free),
            now.reserve_text()
        ),
        format!(
            "{FREE_SPACE_HINT}; then run something that writes less (a limit such as `head -c`)"
        ),
    )
}

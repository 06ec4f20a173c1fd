//! The free space the tools leave on the workspace's file system.
//!
//! By default the workspace (`host.workspace`, `<data_dir>/workspace`) is
//! on the file system of the store: a bot that fills it (`cat /dev/zero >
//! f` in Shell) stopped every user's messages (`507`) until the operator
//! deleted the file. The tools therefore keep a reserve free there
//! ([`DiskReserve`], `runtime.tools_min_free_disk_mb`): Write and Edit
//! refuse a write that would go below it, and Shell does not start a
//! command below it and stops one that takes the disk below it
//! (shell_disk.rs). A bot may still free space: between the reserve and
//! half of it a command starts, but may only free space (it is stopped
//! when the free space falls an eighth of the reserve, at least 1 MiB and
//! at most 64 MiB, below what it was at its start: room for its shell and
//! temporary files and for what the store and other bots write meanwhile,
//! so that an `rm` is not stopped by someone else's writes).

use std::path::Path;

/// The default reserve: 512 MiB, or 5 % of the file system when that is
/// less (a small disk is not made unusable by the default).
const DEFAULT_MAX_BYTES: u64 = 512 * MIB;
/// 1 MiB.
pub(crate) const MIB: u64 = 1024 * 1024;
/// The least and the most a command started below the reserve may take
/// the free space down before it is stopped ([`DiskSpace::below_reserve_slack`]).
const BELOW_RESERVE_SLACK: (u64, u64) = (MIB, 64 * MIB);

/// How much space on the workspace's file system the tools leave free.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum DiskReserve {
    /// 512 MiB, or 5 % of the file system when that is less.
    #[default]
    Default,
    /// This many MiB (0: no reserve, the tools may fill the disk).
    Mib(u64),
}

impl DiskReserve {
    /// The reserve in bytes on a file system of `total` bytes.
    fn bytes(self, total: u64) -> u64 {
        match self {
            Self::Default => DEFAULT_MAX_BYTES.min(total / 20),
            Self::Mib(mib) => mib.saturating_mul(MIB),
        }
    }
}

/// The free space on a workspace's file system, against its reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DiskSpace {
    /// Bytes an unprivileged writer may still use.
    pub(crate) free: u64,
    /// Bytes the tools leave free.
    pub(crate) reserve: u64,
    /// Whether the reserve is the configured number or the default.
    pub(crate) configured: bool,
}

impl DiskSpace {
    /// The space on the file system of `path` (`None`: no reserve, or the
    /// file system cannot be asked, and nothing is held back).
    pub(crate) fn of(path: &Path, reserve: DiskReserve) -> Option<Self> {
        if reserve == DiskReserve::Mib(0) || path.as_os_str().is_empty() {
            return None;
        }
        let stat = rustix::fs::statvfs(path).ok()?;
        let block = stat.f_frsize.max(1);
        let total = stat.f_blocks.saturating_mul(block);
        Some(Self {
            free: stat.f_bavail.saturating_mul(block),
            reserve: reserve.bytes(total),
            configured: matches!(reserve, DiskReserve::Mib(_)),
        })
    }

    /// Whether writing `bytes` more keeps the reserve.
    pub(crate) fn allows(&self, bytes: u64) -> bool {
        self.free.saturating_sub(bytes) >= self.reserve && self.free >= bytes
    }

    /// What the reserve is, for a message: "512 MiB kept free for the
    /// fleet's store (runtime.tools_min_free_disk_mb)".
    pub(crate) fn reserve_text(&self) -> String {
        let how = if self.configured {
            "runtime.tools_min_free_disk_mb"
        } else {
            "the default of runtime.tools_min_free_disk_mb: 512 MiB or 5 % of the disk"
        };
        format!(
            "{} kept free for the fleet's messages and memory ({how})",
            size(self.reserve)
        )
    }
}

impl DiskSpace {
    /// How far a command started below the reserve may take the free
    /// space down before it is stopped: an eighth of the reserve, between
    /// 1 MiB and 64 MiB. The free space is the whole disk's, so the store's
    /// own writes under load and other bots' commands count against it
    /// too; a fixed 1 MiB got a bot's `rm` stopped while the store grew.
    pub(crate) fn below_reserve_slack(&self) -> u64 {
        let (least, most) = BELOW_RESERVE_SLACK;
        (self.reserve / 8).clamp(least, most)
    }

    /// The error of a Write or Edit of `bytes` bytes to `what` that would
    /// take the disk below the reserve.
    pub(crate) fn write_refused(&self, what: &str, bytes: usize) -> crate::tools::ToolError {
        crate::tools::ToolError::new(
            format!(
                "{what} was not written: its {} would take the workspace's disk, which has {} \
                 free, below the {}",
                size(u64::try_from(bytes).unwrap_or(u64::MAX)),
                size(self.free),
                self.reserve_text()
            ),
            FREE_SPACE_HINT,
        )
    }
}

/// Bytes for a message: `3.2 MiB`, `812 KiB`, `17 bytes`.
pub(crate) fn size(bytes: u64) -> String {
    // display only: precision lost above 2^53 bytes does not matter
    #[allow(clippy::cast_precision_loss)]
    let b = bytes as f64;
    if bytes >= 1024 * MIB {
        format!("{:.1} GiB", b / (1024.0 * MIB as f64))
    } else if bytes >= MIB {
        format!("{:.1} MiB", b / MIB as f64)
    } else if bytes >= 1024 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

/// The advice to a bot whose workspace's disk is at its reserve.
pub(crate) const FREE_SPACE_HINT: &str = "delete files you no longer need from the workspace \
    (Shell `du -sh * .[!.]* | sort -h` shows the largest; `rm` them); if none of them is \
    yours to delete, tell your owner: the host's operator can free space on the disk";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_reserve_is_512_mib_or_5_percent_of_a_small_disk() {
        assert_eq!(DiskReserve::Default.bytes(100 * 1024 * MIB), 512 * MIB);
        assert_eq!(DiskReserve::Default.bytes(60 * MIB), 3 * MIB);
        assert_eq!(DiskReserve::Mib(7).bytes(1), 7 * MIB);
    }

    #[test]
    fn a_write_may_not_cross_the_reserve() {
        let space = DiskSpace {
            free: 10 * MIB,
            reserve: 4 * MIB,
            configured: true,
        };
        assert!(space.allows(6 * MIB));
        assert!(!space.allows(6 * MIB + 1));
        assert!(!space.allows(u64::MAX));
        assert!(DiskSpace::of(Path::new("/"), DiskReserve::Mib(0)).is_none());
    }

    #[test]
    fn a_command_below_the_reserve_may_go_an_eighth_of_it_lower() {
        let below = |reserve| DiskSpace {
            free: reserve * 3 / 4,
            reserve,
            configured: true,
        };
        assert_eq!(below(512 * MIB).below_reserve_slack(), 64 * MIB);
        assert_eq!(below(80 * MIB).below_reserve_slack(), 10 * MIB);
        assert_eq!(below(4 * MIB).below_reserve_slack(), MIB);
        assert_eq!(below(100 * 1024 * MIB).below_reserve_slack(), 64 * MIB);
    }
}

//! The Shell tool's OS sandbox: `botfleet sandbox-exec` (a hidden
//! subcommand) restricts itself with Landlock, then becomes the command
//! (`exec`, same process id, so the process group the Shell tool kills is
//! the command's, and the environment the tool set is the command's).
//!
//! What the command may do:
//! - read and execute everything except the `--hide` paths (the data
//!   directory, the fleet file, the fleet workspace), by the walk of
//!   sandbox_walk.rs (a snapshot taken when the command starts);
//! - read, write, create and remove beneath each `--rw` directory (the
//!   calling bot's workspace), and use the devices every program needs
//!   (`/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`);
//! - write nowhere else, `/tmp` included: `TMPDIR` is `.tmp/` in the first
//!   `--rw` directory (created if missing);
//! - signal and reach abstract unix sockets only within the sandbox
//!   (Landlock ABI 6 and later): no `kill` of the host. Landlock always
//!   denies tracing a process outside the sandbox, which covers reading the
//!   host's `/proc/<pid>/environ` (API keys, tokens), memory and open files;
//! - see only its own processes: `/proc` is a private one listing only
//!   what the command may trace (sandbox_proc.rs), so `ps ax` shows neither
//!   the host nor other commands with their arguments, when the host may
//!   mount it (root) or the machine's `/proc` hides so already;
//! - open as many files at once as the host could when it started: its
//!   soft open-file limit (`ulimit -n`) from before `botfleet run` raised
//!   its own to the hard one (`--open-files`, [`starting_open_files`]);
//! - inherit no open file but stdin, stdout and stderr: every other
//!   descriptor is close-on-exec ([`close_inherited`]);
//! - hold no capability: a host run as root would hand its commands
//!   root's, which Landlock does not confine (`CAP_SYS_PTRACE` gets past
//!   its ptrace scoping to read the host's `/proc/<pid>/environ`,
//!   `CAP_SYS_MODULE` loads kernel code); the launcher drops them all,
//!   bounding set included, before it becomes the command.
//!
//! The network is not restricted. The crate's best-effort compatibility
//! enforces what the kernel has; a kernel without Landlock enforces
//! nothing, and then the launcher refuses to run the command (fail closed):
//! the host only uses it after a probe (`--probe`, [`probe`]) said the
//! kernel has Landlock (src/sandbox_host.rs).

use std::ffi::OsString;
use std::fs::File;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::path::PathBuf;

use anyhow::Context;
use anyhow::bail;
use landlock::ABI;
use landlock::Access;
use landlock::AccessFs;
use landlock::BitFlags;
use landlock::LandlockStatus;
use landlock::PathBeneath;
use landlock::RestrictionStatus;
use landlock::Ruleset;
use landlock::RulesetAttr;
use landlock::RulesetCreated;
use landlock::RulesetCreatedAttr;
use landlock::RulesetStatus;
use landlock::Scope;

#[path = "sandbox_host.rs"]
mod host;
#[path = "sandbox_proc.rs"]
mod proc;
#[path = "sandbox_walk.rs"]
mod walk;

pub use host::hidden_paths;
pub use host::record_starting_open_files;
pub use host::shell_sandbox;
pub use host::starting_open_files;
pub use proc::ProcessView;

/// The Landlock ABI whose rights the sandbox asks for (tested on a kernel
/// with ABI 7): every filesystem right up to device ioctls (ABI 5) and the
/// signal and abstract-socket scopes (ABI 6). An older kernel enforces
/// what it has (best effort); a newer one the same as this.
const TARGET_ABI: ABI = ABI::V6;

/// The directory in the first `--rw` directory that `TMPDIR` names.
const TMP_DIR: &str = ".tmp";

/// How far the kernel enforced the sandbox, as the probe reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforcement {
    /// Everything asked for.
    Full,
    /// Part of it: the kernel's Landlock is older than [`TARGET_ABI`].
    Partial,
    /// Nothing: the kernel has no Landlock (or it is disabled).
    None,
}

/// What `sandbox-exec --probe` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// How far a sandbox is enforced.
    pub enforcement: Enforcement,
    /// The kernel's Landlock ABI as the crate knows it (0: none).
    pub abi: u32,
    /// What a command sees of the machine's processes.
    pub processes: ProcessView,
}

impl Probe {
    /// The lines `--probe` prints, read back by the host ([`Probe::parse`]).
    pub fn line(&self) -> String {
        let enforced = match self.enforcement {
            Enforcement::Full => "full",
            Enforcement::Partial => "partial",
            Enforcement::None => "none",
        };
        format!(
            "landlock enforced={enforced} abi={}\n{}",
            self.abi,
            self.processes.line()
        )
    }

    /// Reads a [`Probe::line`]. Without its second line (what commands
    /// see of the processes), they see every process.
    pub fn parse(text: &str) -> Option<Self> {
        let mut lines = text.trim().lines();
        let rest = lines.next()?.trim().strip_prefix("landlock enforced=")?;
        let (enforced, abi) = rest.split_once(" abi=")?;
        let enforcement = match enforced {
            "full" => Enforcement::Full,
            "partial" => Enforcement::Partial,
            "none" => Enforcement::None,
            _ => return None,
        };
        let processes = match lines.next() {
            Some(line) => ProcessView::parse(line)?,
            None => ProcessView::All("the launcher did not say what commands see".to_owned()),
        };
        Some(Self {
            enforcement,
            abi: abi.parse().ok()?,
            processes,
        })
    }

    fn of(status: &RestrictionStatus, processes: ProcessView) -> Self {
        let enforcement = match status.ruleset {
            RulesetStatus::FullyEnforced => Enforcement::Full,
            RulesetStatus::PartiallyEnforced => Enforcement::Partial,
            RulesetStatus::NotEnforced => Enforcement::None,
        };
        let abi = match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => {
                effective_abi.to_string().parse().unwrap_or(0)
            }
            LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => 0,
        };
        Self {
            enforcement,
            abi,
            processes,
        }
    }
}

/// Gives this process the private `/proc` a command gets, then restricts
/// it as the sandbox does (with no rule: nothing of the filesystem is
/// left) and says how far the kernel enforced both. The process is of no
/// use afterwards but to print the answer and exit.
pub fn probe() -> anyhow::Result<Probe> {
    // first: Landlock forbids mounting once it restricts
    let processes = proc::private_proc();
    let status = ruleset()?
        .restrict_self()
        .context("cannot restrict the probe with Landlock")?;
    Ok(Probe::of(&status, processes))
}

/// Confines this process (module doc), gives it the soft open-file limit
/// `open_files` when given, and replaces it with `program` (its name, then
/// its arguments). Returns only on failure, with what went wrong: then
/// nothing was run.
pub fn exec(
    rw: &[PathBuf],
    hide: &[PathBuf],
    open_files: Option<u64>,
    program: &[OsString],
) -> anyhow::Error {
    // before Landlock, which forbids mounting; where it cannot be had the
    // command sees every process, as the probe told the host at its start
    proc::private_proc();
    match confine(rw, hide) {
        Ok(tmp) => {
            let Some((name, args)) = program.split_first() else {
                return anyhow::anyhow!("no program to run: give it after `--`");
            };
            // after the walk of the rules, which opens paths one at a time
            if let Some(soft) = open_files
                && let Err(e) = limit_open_files(soft)
            {
                return e;
            }
            if let Err(e) = close_inherited() {
                return e;
            }
            let e = std::process::Command::new(name)
                .args(args)
                .env("TMPDIR", tmp)
                .exec();
            anyhow::anyhow!("cannot run {}: {e}", name.to_string_lossy())
        }
        Err(e) => e,
    }
}

/// Marks every descriptor above stderr close-on-exec, so the command gets
/// only 0–2 (the Shell tool's pipes). A descriptor the host inherited
/// from whatever started it (`botfleet run 7>>file`, a supervisor's
/// socket) was open in every command, and writing to it got past
/// Landlock, which checks paths only when they are opened (QA). Fails
/// closed: the command is not run.
///
/// The one `unsafe` of the binary: no safe wrapper (std, nix, rustix) acts
/// on a descriptor number nothing in the process owns, which is exactly
/// what an inherited one is.
#[allow(unsafe_code)]
fn close_inherited() -> anyhow::Result<()> {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC only sets the
    // close-on-exec flag of this process's own descriptors 3 and up; it
    // closes none, so nothing this process still uses before the exec
    // below is invalidated. Landlock (kernel 5.13+) implies close_range
    // with this flag (5.11+), so where the sandbox runs the call exists.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3_u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc != 0 {
        bail!(
            "cannot keep the host's other open files from the command (close_range: {}); the \
             command was not run",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Sets this process's soft open-file limit (`RLIMIT_NOFILE`, `ulimit
/// -n`) to `soft`, at most its hard limit, which stays: the host raised
/// its own soft limit to the hard one for its connections (src/cli_run.rs),
/// and a command inherited it, so a bot's command could hold that many
/// files open. The program may raise it again up to the hard limit, as in
/// any shell.
fn limit_open_files(soft: u64) -> anyhow::Result<()> {
    use nix::sys::resource::Resource;
    use nix::sys::resource::getrlimit;
    use nix::sys::resource::setrlimit;
    let (_, hard) =
        getrlimit(Resource::RLIMIT_NOFILE).context("cannot read the open-file limit")?;
    let soft = soft.min(hard);
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard)
        .with_context(|| format!("cannot set the open-file limit (`ulimit -n`) to {soft}"))
}

/// Restricts this process; returns the temporary directory to use.
fn confine(rw: &[PathBuf], hide: &[PathBuf]) -> anyhow::Result<PathBuf> {
    let writable = rw
        .iter()
        .map(|dir| {
            let real = dir
                .canonicalize()
                .with_context(|| format!("--rw {}", dir.display()))?;
            if !real.is_dir() {
                bail!("--rw {} is not a directory", dir.display());
            }
            Ok(real)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let Some(first) = writable.first() else {
        bail!("give the directory the command may write in with --rw");
    };
    let hidden = hide
        .iter()
        .map(|p| resolved(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let Some((w, h)) = walk::hidden_inside_writable(&writable, &hidden) {
        bail!(
            "{} is to be hidden but is inside the writable {}: Landlock cannot hide a path \
             inside a directory it grants; move the workspace (host.workspace) away from \
             the data directory and the fleet file",
            h.display(),
            w.display()
        );
    }
    let tmp = first.join(TMP_DIR);
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;

    let read = AccessFs::from_read(TARGET_ABI);
    let mut rules = ruleset()?;
    for path in walk::read_grants(&hidden, list) {
        rules = add(rules, &path, read)?;
    }
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    for name in walk::DEVICES {
        let path = Path::new("/dev").join(name);
        if let Some((fd, file_type)) = open_path(&path)
            && file_type.is_char_device()
        {
            rules = rules.add_rule(PathBeneath::new(fd, device | AccessFs::IoctlDev))?;
        }
    }
    for dir in &writable {
        rules = add(rules, dir, AccessFs::from_all(TARGET_ABI))?;
    }
    drop_capabilities()?;
    let status = rules
        .restrict_self()
        .context("cannot restrict the command with Landlock")?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(tmp),
        RulesetStatus::NotEnforced => bail!(
            "this kernel does not enforce Landlock, so the command would run unconfined; \
             it was not run (set runtime.shell_sandbox = \"off\" to run commands without \
             the sandbox)"
        ),
    }
}

/// Drops every capability this process holds, for good: the bounding set
/// too, so that `sh` run as root (a host run as root) starts with none.
/// Landlock confines files, signals and tracing, not what a capability
/// allows beside them (`CAP_SYS_PTRACE` reads a non-dumpable host's
/// `/proc/<pid>/environ`, `CAP_SYS_MODULE` loads kernel code). A process
/// without capabilities (a host run as a plain user) has nothing to drop.
fn drop_capabilities() -> anyhow::Result<()> {
    use rustix::io::Errno;
    use rustix::thread::CapabilitySet;
    use rustix::thread::CapabilitySets;

    let held = rustix::thread::capabilities(None).context("cannot read the capabilities")?;
    if held.permitted.is_empty() && held.inheritable.is_empty() {
        return Ok(());
    }
    for bit in 0..u64::BITS {
        match rustix::thread::remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(
            1 << bit,
        )) {
            Ok(()) => {}
            // past the last capability this kernel knows
            Err(Errno::INVAL) => break,
            Err(e) => return Err(e).context("cannot drop the capability bounding set"),
        }
    }
    match rustix::thread::clear_ambient_capability_set() {
        // a kernel before ambient capabilities (4.3) has none to clear
        Ok(()) | Err(Errno::INVAL) => {}
        Err(e) => return Err(e).context("cannot clear the ambient capabilities"),
    }
    let none = CapabilitySet::empty();
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: none,
            permitted: none,
            inheritable: none,
        },
    )
    .context("cannot drop the capabilities")
}

/// The sandbox's rule set before its rules: every right of
/// [`TARGET_ABI`] handled (so denied unless granted), and the scopes.
fn ruleset() -> anyhow::Result<RulesetCreated> {
    Ruleset::default()
        .handle_access(AccessFs::from_all(TARGET_ABI))?
        .scope(Scope::from_all(TARGET_ABI))?
        .create()
        .context("cannot create a Landlock rule set")
}

/// Grants `access` beneath `path` (only the rights a file can have when
/// it is not a directory); a symbolic link or a path that cannot be
/// opened (gone since it was listed) is skipped.
fn add(
    rules: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> anyhow::Result<RulesetCreated> {
    let Some((fd, file_type)) = open_path(path) else {
        return Ok(rules);
    };
    if file_type.is_symlink() {
        return Ok(rules);
    }
    let access = if file_type.is_dir() {
        access
    } else {
        access & AccessFs::from_file(TARGET_ABI)
    };
    Ok(rules.add_rule(PathBeneath::new(fd, access))?)
}

/// `path` opened without following a final symbolic link (`O_PATH |
/// O_NOFOLLOW`: an entry swapped for a link after it was listed is seen as
/// the link, and skipped), with its type.
fn open_path(path: &Path) -> Option<(File, std::fs::FileType)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let file_type = file.metadata().ok()?.file_type();
    Some((file, file_type))
}

/// The names in `dir`.
fn list(dir: &Path) -> std::io::Result<Vec<OsString>> {
    std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.file_name()))
        .collect()
}

/// `path` made absolute with its symbolic links resolved, as far as it
/// exists (the rest appended): Landlock's rules are on files, so the walk
/// must go down the real path.
fn resolved(path: &Path) -> anyhow::Result<PathBuf> {
    let absolute =
        std::path::absolute(path).with_context(|| format!("--hide {}", path.display()))?;
    let mut rest = Vec::new();
    let mut existing = absolute.as_path();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return Ok(rest
                .iter()
                .rev()
                .fold(real, |p: PathBuf, part| p.join(part)));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return Ok(absolute),
        }
    }
}

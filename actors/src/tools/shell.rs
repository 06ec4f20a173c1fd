//! Shell: a command in the workspace, in its own process group.
//!
//! The command runs under `sh -c` with the workspace as working directory, a
//! cleared environment (PATH, HOME = workspace, LANG), stdin closed, and its
//! own process group. On timeout or turn cancellation the whole group is
//! killed (SIGKILL), after the command exits any process it left behind in
//! the group is killed too, and a call whose future is dropped (a stopping
//! host drops the turns it was running) kills the group as it goes
//! ([`GroupGuard`]). A process that left the group (`setsid`) is killed too
//! if it holds the output open; the end of the output is awaited for a
//! bounded time only, so the call ends on time whatever such a process does
//! (shell_output.rs).
//!
//! Confinement is twofold. A path check on the command text refuses
//! absolute paths and `..` that plainly leave the workspace (shell_paths.rs);
//! globs and expansions get past it, so when the host gives a launcher
//! ([`ShellSandbox::Launcher`]) `sh` runs under an OS sandbox (Landlock)
//! that lets it write only in the workspace and read nothing of the host's
//! own files: see docs/security.md for what that does and does not stop.

use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Effect;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolLimits;
use super::ToolOutput;
use super::parse_args;
use super::shell_registry::GroupGuard;
use super::shell_registry::pipe_id;
use super::truncate_output;
use crate::ShellLauncher;
use crate::ShellSandbox;
use crate::model::ToolSpec;
use output::OutputEnd;
pub(crate) use paths::check_paths;

#[path = "shell_disk.rs"]
mod disk;
#[path = "shell_output.rs"]
mod output;
#[path = "shell_paths.rs"]
mod paths;

/// Runs a shell command in the workspace.
///
/// It holds the timeouts its schema states; the call itself applies those
/// of the fleet settings, and [`Runtime::new`](crate::Runtime::new)
/// registers it built from them, so the two agree.
#[derive(Debug, Clone, Copy)]
pub struct Shell {
    default_timeout: Duration,
    max_timeout: Duration,
}

impl Shell {
    /// The tool with `limits`' timeouts in its schema.
    pub fn new(limits: &ToolLimits) -> Self {
        Self {
            default_timeout: limits.shell_default_timeout,
            max_timeout: limits.shell_max_timeout,
        }
    }
}

impl Default for Shell {
    fn default() -> Self {
        Self::new(&ToolLimits::default())
    }
}

/// Seconds as the schema shows them (`60`, `2.5`).
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellArgs {
    command: String,
    #[serde(default)]
    timeout_s: Option<f64>,
    #[serde(default)]
    cwd: Option<String>,
}

enum Ending {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
    /// The workspace's disk went below the tools' reserve (shell_disk.rs).
    DiskLow(super::workspace::DiskSpace),
}

/// A Shell call's arguments checked, as [`Shell::prepare`] gives them.
struct Prepared {
    args: ShellArgs,
    timeout: Duration,
    cwd: std::path::PathBuf,
}

impl Shell {
    /// Checks a call's arguments and the paths its command names, without
    /// running anything: what the call refuses before it starts.
    fn prepare(&self, ctx: &ToolContext<'_>, args: Value) -> Result<Prepared, ToolError> {
        let args: ShellArgs = parse_args("Shell", args)?;
        if args.command.trim().is_empty() {
            return Err(ToolError::new(
                "the command is empty",
                "give a command to run",
            ));
        }
        if let Some(at) = args.command.find('\0') {
            // the system takes no NUL inside an argument: it was "could not
            // start the shell", telling the model the host was broken
            return Err(ToolError::new(
                format!("the command holds a NUL byte (at byte {at}); a command cannot carry one"),
                "remove it; to produce a NUL byte, have the command write one (`printf '\\0'`)",
            ));
        }
        if args.command.len() > MAX_COMMAND_BYTES {
            return Err(ToolError::new(
                format!(
                    "the command is {} bytes; the system runs a command of at most {MAX_COMMAND_BYTES} \
                     bytes (its limit on one argument, 128 KiB)",
                    args.command.len()
                ),
                "Write the long text (a script, a heredoc's content) to a file, then run the file \
                 with a short command such as `sh script.sh`",
            ));
        }
        let limits = ctx.limits();
        let timeout = match args.timeout_s {
            None => limits.shell_default_timeout,
            // 0 and below too: named as the minimum the schema gives, as a
            // small positive one is (QA: "must be a positive number, got 0")
            Some(s) if s.is_finite() && s < MIN_TIMEOUT_S => {
                return Err(ToolError::new(
                    format!(
                        "timeout_s {} is below the minimum of {MIN_TIMEOUT_S} s",
                        short_number(s)
                    ),
                    format!(
                        "pass at least {MIN_TIMEOUT_S}, or leave timeout_s out for the default of {} s",
                        seconds(limits.shell_default_timeout)
                    ),
                ));
            }
            Some(s) if s.is_finite() && s > 0.0 => {
                // compared before converting: a Duration of 1e30 s panics
                if s > limits.shell_max_timeout.as_secs_f64() {
                    return Err(ToolError::new(
                        format!(
                            "timeout_s {} is above the limit of {} s",
                            short_number(s),
                            limits.shell_max_timeout.as_secs()
                        ),
                        "ask for a shorter timeout, or split the work",
                    ));
                }
                Duration::from_secs_f64(s)
            }
            Some(s) => {
                return Err(ToolError::bad_args(
                    "Shell",
                    format!("timeout_s must be a positive number, got {s}"),
                ));
            }
        };
        // the workspace itself unusable: said as such (it was "cwd . does
        // not exist", with a hint to `mkdir -p` it)
        if let Some(why) = ctx.workspace().problem() {
            return Err(ToolError::new(
                format!(
                    "commands cannot run: your workspace is not usable ({why}); tell your \
                     owner, the host's operator has to fix it and restart the host"
                ),
                super::files::UNUSABLE_HINT,
            ));
        }
        let cwd = match &args.cwd {
            Some(c) => ctx.workspace().resolve(c).map_err(|e| {
                ToolError::new(e.to_string(), "give cwd relative to the workspace root")
            })?,
            None => ctx.workspace().root().to_path_buf(),
        };
        if !cwd.is_dir() {
            return Err(not_a_directory(&cwd, args.cwd.as_deref().unwrap_or(".")));
        }
        check_paths(ctx.workspace(), &cwd, &args.command)?;
        Ok(Prepared { args, timeout, cwd })
    }
}

#[async_trait]
impl Tool for Shell {
    fn spec(&self) -> ToolSpec {
        let default = seconds(self.default_timeout);
        let max = seconds(self.max_timeout);
        ToolSpec {
            name: "Shell".into(),
            description: format!(
                "Run a shell command (sh -c) in the workspace and return its exit code, stdout and stderr. The command and everything it starts is killed at the timeout ({default} s unless timeout_s says otherwise)."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout_s": {"type": "number", "minimum": 0.1, "maximum": self.max_timeout.as_secs_f64(), "description": format!("Seconds before the command is killed (default {default}, at most {max}).")},
                    "cwd": {"type": "string", "description": "Working directory relative to the workspace root."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::External
    }

    fn idempotent(&self) -> bool {
        false
    }

    fn mutates(&self) -> bool {
        true
    }

    /// Refused here, before review asks a model or approval a person:
    /// a command whose paths leave the workspace ran into this check only
    /// after the person approved it, and the approval was used up by a
    /// call that never ran (QA).
    fn precheck(&self, ctx: &ToolContext<'_>, args: &Value) -> Result<(), ToolError> {
        self.prepare(ctx, args.clone()).map(drop)
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        // checked again as it runs (the engine's precheck came before a
        // review and an approval that may take minutes, during which the
        // workspace may change: a directory made, a symlink planted)
        let Prepared { args, timeout, cwd } = self.prepare(ctx, args)?;
        let limits = ctx.limits();
        let floor = disk::floor(ctx.workspace())?;
        let file_bytes = floor.as_ref().map(disk::Floor::file_limit);

        let mut cmd = match &ctx.rt.settings.shell_sandbox {
            ShellSandbox::Direct => direct(ctx.rt.settings.shell_open_files, file_bytes),
            ShellSandbox::Launcher(launcher) => {
                sandboxed(launcher, ctx.workspace().root(), file_bytes)
            }
            ShellSandbox::Unavailable(why) => {
                return Err(ToolError::new(
                    why.clone(),
                    "the host cannot run commands safely; tell the user",
                ));
            }
        };
        cmd.arg("-c")
            .arg(&args.command)
            .current_dir(&cwd)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", ctx.workspace().root())
            .env("LANG", "C.UTF-8")
            .envs(
                ctx.secrets
                    .values
                    .iter()
                    .map(|(name, value)| (name.as_str(), value.expose())),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            if e.kind() == std::io::ErrorKind::ArgumentListTooLong {
                // the command with the environment (the bot's secrets) is
                // over the system's total: nothing is wrong with the host
                ToolError::new(
                    format!(
                        "the system refused to start a command this long ({} bytes, with the \
                         bot's secrets as environment variables): {e}",
                        args.command.len()
                    ),
                    "Write the long text to a file, then run the file with a short command",
                )
            } else if let Some((cause, hint)) = super::files::host_failure(&e) {
                // no descriptor left for its pipes, no room on the disk
                ToolError::new(format!("could not start the shell: {cause} ({e})"), hint)
            } else {
                // not the program's path: the launcher is the host's binary
                ToolError::new(
                    format!("could not start the shell: {e}"),
                    "the host cannot run commands right now; tell the user",
                )
            }
        })?;
        let Some(pgid) = child.id() else {
            return Err(ToolError::new(
                "sh started but has no process id",
                "the host cannot run commands right now; tell the user",
            ));
        };
        // declared after `child`, so dropped first: however the call ends
        // the whole group is killed (not only the leader, which is all
        // `kill_on_drop` kills), then taken off the list that the next start
        // reaps if the host dies first (shell_registry.rs)
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let pipes = [
            stdout.as_ref().map(|p| p.as_raw_fd()),
            stderr.as_ref().map(|p| p.as_raw_fd()),
        ]
        .into_iter()
        .flatten()
        .filter_map(pipe_id)
        .collect();
        let mut group = GroupGuard::new(pgid, ctx.rt.settings.shell_registry.as_ref(), pipes);
        // read past the limit by the longest secret: one the cut goes
        // through is then found whole and left out whole
        let keep = limits.max_output_bytes + ctx.secrets.redactor.longest();
        // the readers stop when told, or when the call is dropped
        let stop = CancellationToken::new();
        let _stop_on_drop = stop.clone().drop_guard();
        let out_task = output::spawn_reader(stdout, keep, stop.clone());
        let err_task = output::spawn_reader(stderr, keep, stop.clone());
        let ending = tokio::select! {
            status = child.wait() => match status {
                Ok(s) => Ending::Exited(s),
                Err(e) => {
                    group.kill();
                    return Err(ToolError::new(format!("waiting for the command failed: {e}"), "try again"));
                }
            },
            _ = tokio::time::sleep(timeout) => Ending::TimedOut,
            _ = ctx.cancel.cancelled() => Ending::Cancelled,
            now = async {
                match floor {
                    Some(floor) => floor.crossed(ctx.workspace()).await,
                    None => std::future::pending().await,
                }
            } => Ending::DiskLow(now),
        };
        // kill the group in every case: on timeout/cancel the command itself,
        // after a normal exit whatever it left running in the background
        group.kill();
        let _ = child.wait().await;
        let (out, err, end) = output::finish(&mut group, &stop, out_task, err_task).await;
        // scrubbed before it is cut: a cut through a secret leaves a part
        // of it that no later search for the whole secret finds
        let render = |captured: &output::Captured| {
            let read = String::from_utf8_lossy(&captured.kept);
            let (text, shown) = ctx
                .secrets
                .redactor
                .scrub_cut(&read, limits.max_output_bytes);
            // counted in the bytes the command wrote, not in those of
            // the lossy text (a byte of binary output is 3 there)
            let more = captured
                .total
                .saturating_sub(output::raw_len(&captured.kept, shown));
            if more > 0 {
                format!("{text}\n[... {more} more bytes not shown]")
            } else {
                text
            }
        };
        let note = match end {
            OutputEnd::Closed | OutputEnd::HoldersKilled(0) => String::new(),
            OutputEnd::HoldersKilled(n) => format!(
                "\n[{n} background process(es) that left the command's process group (setsid) kept its output open and were killed]"
            ),
            OutputEnd::LeftOpen => "\n[a background process that left the command's process group (setsid) keeps its output open and could not be killed: output it writes from now on is not read]".to_owned(),
        };
        let note = format!("{note}{}", floor.map(|f| f.note()).unwrap_or_default());
        let body = format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}{note}",
            render(&out),
            render(&err)
        );
        // each stream is cut to the limit already, with its own note: the
        // whole holds both, whichever way the command ended (a timed-out
        // one's was cut to one stream's limit, so a long stdout left out
        // its stderr, often the reason it hung, under a note that counted
        // only the bytes of that cut)
        let whole = limits.max_output_bytes * 2 + 256;
        match ending {
            Ending::Exited(status) => {
                let code = exit_code(status);
                Ok(ToolOutput::text(truncate_output(
                    &format!("exit code: {code}\n{body}"),
                    whole,
                )))
            }
            Ending::TimedOut => Err(ToolError::new(
                format!(
                    "the command timed out after {:.1} s and was killed with its process group; output so far:\n{}",
                    timeout.as_secs_f64(),
                    truncate_output(&body, whole)
                ),
                "make the command faster, run less at once, or pass a larger timeout_s",
            )),
            Ending::Cancelled => Err(ToolError::new(
                "the turn was cancelled; the command was killed with its process group",
                "do not rely on its effects; check the state before continuing",
            )),
            Ending::DiskLow(now) => Err(disk::stopped(&now, &truncate_output(&body, whole))),
        }
    }
}

/// The longest command run: Linux takes one argument of at most 128 KiB
/// (`MAX_ARG_STRLEN`, its final NUL included), and a longer one fails to
/// start with `E2BIG`, which says nothing of what to do instead.
const MAX_COMMAND_BYTES: usize = 128 * 1024 - 1;

/// `n` as a message quotes it: in full up to a million, in exponent form
/// past it (`1e308` was written out in its 309 digits: QA).
fn short_number(n: f64) -> String {
    if n.abs() < 1e6 {
        format!("{n:?}")
    } else {
        format!("{n:e}")
    }
}

/// The schema's minimum `timeout_s`: a shorter one gives a command no
/// time to start.
const MIN_TIMEOUT_S: f64 = 0.1;

/// How a command ended, for its result: its exit code, or the signal that
/// killed it.
fn exit_code(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => code.to_string(),
        (None, Some(signal)) => match signal_name(signal) {
            Some(name) => format!("killed by signal {signal} ({name})"),
            None => format!("killed by signal {signal}"),
        },
        (None, None) => "killed by a signal".into(),
    }
}

/// The name of a common signal.
fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return None,
    })
}

/// Why `cwd` (as given: `given`), which is no directory, cannot be the
/// working directory, saying what it is instead: creating it, as for a
/// path that does not exist, would fail.
fn not_a_directory(cwd: &Path, given: &str) -> ToolError {
    let what = match std::fs::symlink_metadata(cwd) {
        Err(_) => {
            return ToolError::new(
                format!("cwd {given} does not exist"),
                "create it first (Shell `mkdir -p`), or leave cwd out",
            );
        }
        Ok(m) if m.file_type().is_symlink() => {
            let target = std::fs::read_link(cwd)
                .map(|t| format!(" to {}", t.display()))
                .unwrap_or_default();
            match std::fs::metadata(cwd) {
                Ok(m) => format!("a symbolic link{target}, which is {}", kind(&m)),
                Err(_) => format!("a symbolic link{target}, which does not exist"),
            }
        }
        Ok(m) => kind(&m).to_owned(),
    };
    ToolError::new(
        format!("cwd {given} is {what}, not a directory"),
        "give a directory of the workspace as cwd, or leave cwd out",
    )
}

/// What a file that is no directory is, for a message.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let t = meta.file_type();
    if t.is_file() {
        "a file"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "a special file"
    }
}

/// `sh` run directly, to be given `-c COMMAND`: a first `sh` (its script
/// [`first_sh`]) `exec`s the real one, which keeps the process id and so
/// the process group Shell kills, and says what it says (`sh: 1: …`) as
/// if started directly.
fn direct(open_files: Option<u64>, file_bytes: Option<u64>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(first_sh(open_files, file_bytes))
        .arg("sh");
    cmd
}

/// What the first `sh` runs before it `exec`s the real one with the
/// command, setting what the command and all it starts inherit:
/// - with `open_files`, the soft open-file limit (the host's raised one
///   is inherited otherwise). Only ever lowered, so `ulimit` cannot fail
///   for want of a privilege; if it fails anyway the command still runs,
///   with the host's limit;
/// - with `file_bytes`, the file-size limit (`RLIMIT_FSIZE`; shell_disk.rs,
///   `Floor::file_limit`), in the 512-byte blocks POSIX's `ulimit -f`
///   counts; set before the command runs, so nothing it starts escapes it;
/// - `SIGXFSZ` ignored, which no non-interactive shell may trap again: a
///   write past the file-size limit fails with `EFBIG`, which programs
///   report in their own words (`fallocate failed: File too large`),
///   instead of dying silently with exit code 153.
fn first_sh(open_files: Option<u64>, file_bytes: Option<u64>) -> String {
    let open_files = open_files
        .map(|soft| format!("ulimit -S -n {soft} 2>/dev/null; "))
        .unwrap_or_default();
    let file_size = file_bytes
        .map(|bytes| format!("ulimit -f {} 2>/dev/null; ", bytes.div_ceil(512)))
        .unwrap_or_default();
    format!("{open_files}{file_size}trap '' XFSZ; exec sh \"$@\"")
}

/// `sh` run through `launcher`, confined to `workspace`: the launcher
/// sandboxes itself, then becomes the first `sh` of [`direct`] (same
/// process id, same process group, the environment set here), so the
/// rest of the call is as for `sh` run directly.
fn sandboxed(
    launcher: &ShellLauncher,
    workspace: &Path,
    file_bytes: Option<u64>,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&launcher.program);
    cmd.args(&launcher.args).arg("--rw").arg(workspace);
    for hidden in &launcher.hidden {
        cmd.arg("--hide").arg(hidden);
    }
    cmd.arg("--")
        .arg("sh")
        .arg("-c")
        .arg(first_sh(None, file_bytes))
        .arg("sh");
    cmd
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;

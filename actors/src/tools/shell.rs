//! Shell: a command in the workspace, in its own process group.
//!
//! The command runs under `sh -c` with the workspace as working directory, a
//! cleared environment (PATH, HOME = workspace, LANG), stdin closed, and its
//! own process group. On timeout or turn cancellation the whole group is
//! killed (SIGKILL), after the command exits any process it left behind in
//! the group is killed too, and a call whose future is dropped (a stopping
//! host drops the turns it was running) kills the group as it goes
//! ([`GroupGuard`]), so nothing outlives the call.
//!
//! Confinement here is a path check on the command text (absolute paths and
//! `..` that leave the workspace are refused), not an OS sandbox: see
//! docs/security.md for what that does and does not stop.

use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;
use tokio::io::AsyncRead;
use tokio::io::AsyncReadExt;

use super::Effect;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::Workspace;
use super::parse_args;
use super::shell_registry::GroupGuard;
use super::truncate_output;
use crate::model::ToolSpec;

/// Runs a shell command in the workspace.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shell;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellArgs {
    command: String,
    #[serde(default)]
    timeout_s: Option<f64>,
    #[serde(default)]
    cwd: Option<String>,
}

/// Absolute paths a command may name although they are outside the workspace.
const ALLOWED_OUTSIDE: &[&str] = &[
    // the harmless devices auto-review lets a command redirect to or from
    // (safety/shell_rules.rs)
    "/dev/null",
    "/dev/zero",
    "/dev/tty",
    "/dev/urandom",
    "/dev/random",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/bin/",
    "/usr/bin/",
    "/usr/local/bin/",
    "/sbin/",
    "/usr/sbin/",
];

/// Refuses a command naming a path outside the workspace.
pub(crate) fn check_paths(
    workspace: &Workspace,
    cwd: &std::path::Path,
    command: &str,
) -> Result<(), ToolError> {
    let tokens = command.split(|c: char| c.is_whitespace() || ";|&<>()'\"=`$,".contains(c));
    for token in tokens.filter(|t| !t.is_empty()) {
        let outside = if token.starts_with('~') {
            true
        } else if token.starts_with('/') {
            if ALLOWED_OUTSIDE.iter().any(|a| {
                token == a.trim_end_matches('/') || (a.ends_with('/') && token.starts_with(a))
            }) {
                false
            } else {
                workspace.resolve(token).is_err()
            }
        } else if token == ".."
            || token.starts_with("../")
            || token.contains("/../")
            || token.ends_with("/..")
        {
            let joined = cwd.join(token);
            workspace.resolve(&joined.to_string_lossy()).is_err()
        } else {
            false
        };
        if outside {
            return Err(ToolError::new(
                format!("the command names {token:?}, which is outside the workspace"),
                "work with paths inside the workspace (relative paths are resolved from it)",
            ));
        }
    }
    Ok(())
}

/// Reads a pipe to the end, keeping at most `keep` bytes.
async fn drain<R: AsyncRead + Unpin>(mut pipe: R, keep: usize) -> (Vec<u8>, usize) {
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n;
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, total)
}

enum Ending {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
}

#[async_trait]
impl Tool for Shell {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Shell".into(),
            description: "Run a shell command (sh -c) in the workspace and return its exit code, stdout and stderr. The command and everything it starts is killed at the timeout.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout_s": {"type": "number", "minimum": 0.1, "description": "Seconds before the command is killed (default 60, at most 600)."},
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

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: ShellArgs = parse_args("Shell", args)?;
        if args.command.trim().is_empty() {
            return Err(ToolError::new(
                "the command is empty",
                "give a command to run",
            ));
        }
        let limits = ctx.limits();
        let timeout = match args.timeout_s {
            None => limits.shell_default_timeout,
            Some(s) if s.is_finite() && s > 0.0 => {
                // compared before converting: a Duration of 1e30 s panics
                if s > limits.shell_max_timeout.as_secs_f64() {
                    return Err(ToolError::new(
                        format!(
                            "timeout_s {s} is above the limit of {} s",
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
        let cwd = match &args.cwd {
            Some(c) => ctx.workspace().resolve(c).map_err(|e| {
                ToolError::new(e.to_string(), "give cwd relative to the workspace root")
            })?,
            None => ctx.workspace().root().to_path_buf(),
        };
        if !cwd.is_dir() {
            return Err(ToolError::new(
                format!("cwd {} is not a directory", cwd.display()),
                "create it first (Shell `mkdir -p`), or leave cwd out",
            ));
        }
        check_paths(ctx.workspace(), &cwd, &args.command)?;

        let mut cmd = tokio::process::Command::new("sh");
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
            ToolError::new(
                format!("could not start sh: {e}"),
                "the host cannot run commands right now; tell the user",
            )
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
        let mut group = GroupGuard::new(pgid, ctx.rt.settings.shell_registry.as_ref());
        let keep = limits.max_output_bytes;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let out_task = tokio::spawn(async move {
            match stdout {
                Some(p) => drain(p, keep).await,
                None => (Vec::new(), 0),
            }
        });
        let err_task = tokio::spawn(async move {
            match stderr {
                Some(p) => drain(p, keep).await,
                None => (Vec::new(), 0),
            }
        });
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
        };
        // kill the group in every case: on timeout/cancel the command itself,
        // after a normal exit whatever it left running in the background
        group.kill();
        let _ = child.wait().await;
        let (out, out_total) = out_task.await.unwrap_or_default();
        let (err, err_total) = err_task.await.unwrap_or_default();
        let render = |bytes: &[u8], total: usize| {
            let text = ctx
                .secrets
                .redactor
                .scrub(&String::from_utf8_lossy(bytes))
                .into_owned();
            if total > bytes.len() {
                format!("{text}\n[... {} more bytes not shown]", total - bytes.len())
            } else {
                text
            }
        };
        let body = format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            render(&out, out_total),
            render(&err, err_total)
        );
        match ending {
            Ending::Exited(status) => {
                let code = status
                    .code()
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "killed by a signal".into());
                Ok(ToolOutput::text(truncate_output(
                    &format!("exit code: {code}\n{body}"),
                    limits.max_output_bytes * 2 + 256,
                )))
            }
            Ending::TimedOut => Err(ToolError::new(
                format!(
                    "the command timed out after {:.1} s and was killed with its process group; output so far:\n{}",
                    timeout.as_secs_f64(),
                    truncate_output(&body, limits.max_output_bytes)
                ),
                "make the command faster, run less at once, or pass a larger timeout_s",
            )),
            Ending::Cancelled => Err(ToolError::new(
                "the turn was cancelled; the command was killed with its process group",
                "do not rely on its effects; check the state before continuing",
            )),
        }
    }
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;

//! A write past the host's file-size limit (`RLIMIT_FSIZE`: `ulimit -f`,
//! systemd `LimitFSIZE=`) fails instead of killing the host.
//!
//! The kernel answers such a write with `SIGXFSZ`, whose default action
//! ends the process (with a core dump, and no log line): a host under a
//! limit its store outgrew died at its first write and, restarted by its
//! service manager, at every start after. With a handler installed the
//! write fails with `EFBIG` instead, which SQLite reports as an I/O error:
//! the request is answered `503 storage_error` (its message names the
//! limit), a turn waits and retries, and the log says why here.
//!
//! A handler, not `SIG_IGN` (which the crates could not set without
//! `unsafe` anyway): a caught signal is reset to its default action by
//! `exec`, where an ignored one would be inherited. (The Shell tool's
//! commands ignore it themselves, so that the file-size limit it gives
//! them is met with `EFBIG`: actors/src/tools/shell.rs.)

/// How often a write past the limit is logged again while it lasts.
#[cfg(unix)]
const REPEAT_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// How soon a line the log file did not take is tried again.
#[cfg(unix)]
const UNWRITTEN_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Installs the handler, and a task that logs each `SIGXFSZ`: the host
/// then keeps running and its writes past the limit fail. Unix only.
#[cfg(unix)]
pub(super) fn survive_file_size_limit() {
    use tokio::signal::unix::SignalKind;
    let mut signals = match tokio::signal::unix::signal(SignalKind::from_raw(libc::SIGXFSZ)) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot handle SIGXFSZ: a write past the file-size limit (ulimit -f) will kill the host");
            return;
        }
    };
    tokio::spawn(async move {
        // the store's checkpoint thread and every retry hit the limit again,
        // several times a second: one line, then one a minute with a count
        let mut logged: Option<std::time::Instant> = None;
        let mut repeats: u64 = 0;
        // a line the log file (under the same limit) did not take: tried
        // again on a timer until it lands. Not at the next signal: the
        // failed write of the line raises one itself, and the line was
        // tried again at once, in a loop, while the limit lasted; and
        // once it was lifted no signal came, and the line was never
        // written (a test read the log for it, and failed now and then)
        let mut unwritten = false;
        loop {
            let retry = async {
                if unwritten {
                    tokio::time::sleep(UNWRITTEN_RETRY).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                signal = signals.recv() => {
                    if signal.is_none() {
                        break;
                    }
                    if unwritten || logged.is_some_and(|at| at.elapsed() < REPEAT_LOG_EVERY) {
                        repeats += 1;
                        continue;
                    }
                }
                () = retry => {}
            }
            let before = stderr_file_len();
            tracing::error!(
                repeats,
                "a write went past the host's file-size limit (RLIMIT_FSIZE: `ulimit -f`, systemd `LimitFSIZE=`) and failed; nothing more is saved while the limit lasts. Restart the host without the limit (`ulimit -f unlimited`, `LimitFSIZE=infinity`): a running process's limit can be raised only up to its hard limit (`prlimit --pid PID --fsize=unlimited:`), which `ulimit -f` and `LimitFSIZE=` set too. Logged again at most once a minute; `repeats` counts the writes since the last line"
            );
            unwritten = before.is_some() && stderr_file_len() == before;
            if !unwritten {
                logged = Some(std::time::Instant::now());
                repeats = 0;
            }
        }
    });
}

/// The length of the file stderr writes to, if it is a regular file (the
/// host's log redirected to a file); `None` for a pipe or a terminal.
#[cfg(unix)]
fn stderr_file_len() -> Option<u64> {
    use std::os::fd::AsFd;
    let fd = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
    let meta = std::fs::File::from(fd).metadata().ok()?;
    meta.is_file().then_some(meta.len())
}

#[cfg(not(unix))]
pub(super) fn survive_file_size_limit() {}

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
//! `exec`, so the Shell tool's commands still get the default `SIGXFSZ`,
//! where an ignored one would be inherited.

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
        while signals.recv().await.is_some() {
            tracing::error!(
                "a write went past the host's file-size limit (RLIMIT_FSIZE: `ulimit -f`, systemd `LimitFSIZE=`) and failed; raise or remove the limit (`ulimit -f unlimited`, `LimitFSIZE=infinity`)"
            );
        }
    });
}

#[cfg(not(unix))]
pub(super) fn survive_file_size_limit() {}

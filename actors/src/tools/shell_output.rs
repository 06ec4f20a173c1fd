//! Reading a Shell command's output, with a bound on how long its end is
//! awaited once the command is over.
//!
//! The output ends when no process holds the pipes open. The group is
//! killed when the command exits, times out or is cancelled, so this is
//! normally at once; a process that left the group (`setsid`) and kept the
//! output open would hold the call for as long as it runs. So once the
//! command is over the end is awaited for [`EOF_GRACE`]; then the processes
//! still holding the pipes are killed ([`kill_pipe_holders`]) and the end
//! awaited for [`KILLED_GRACE`] more; then reading stops with what was read.

use std::time::Duration;

use tokio::io::AsyncRead;
use tokio::io::AsyncReadExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::tools::shell_registry::GroupGuard;
use crate::tools::shell_registry::Holders;
use crate::tools::shell_registry::kill_pipe_holders;

/// How long the end of the output is awaited once the group is killed
/// before the processes still holding it are looked for.
pub(super) const EOF_GRACE: Duration = Duration::from_millis(100);

/// How long it is awaited after they were killed.
pub(super) const KILLED_GRACE: Duration = Duration::from_millis(400);

/// What was read from one pipe.
#[derive(Debug, Default)]
pub(super) struct Captured {
    /// The first bytes, up to the limit.
    pub(super) kept: Vec<u8>,
    /// How many bytes were read in all.
    pub(super) total: usize,
}

/// How many bytes of `raw` the first `shown` bytes of its lossy text
/// (`String::from_utf8_lossy`, where each invalid sequence became one
/// U+FFFD of 3 bytes) stand for: what a binary output showed, counted
/// as the command wrote it. `shown` is at a char boundary of that text.
pub(super) fn raw_len(raw: &[u8], shown: usize) -> usize {
    let (mut text, mut bytes) = (0, 0);
    for chunk in raw.utf8_chunks() {
        let valid = chunk.valid().len();
        if text + valid >= shown {
            return bytes + (shown - text);
        }
        (text, bytes) = (text + valid, bytes + valid);
        if !chunk.invalid().is_empty() {
            let replacement = char::REPLACEMENT_CHARACTER.len_utf8();
            if text + replacement > shown {
                return bytes;
            }
            (text, bytes) = (text + replacement, bytes + chunk.invalid().len());
        }
    }
    bytes
}

/// What became of the output's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OutputEnd {
    /// Every process holding it closed it.
    Closed,
    /// Processes outside the group held it; they were killed (how many),
    /// then it closed.
    HoldersKilled(usize),
    /// It was still open when reading stopped (a process outside the
    /// group that could not be killed holds it).
    LeftOpen,
}

/// Reads a pipe until its end or `stop`, keeping at most `keep` bytes.
pub(super) fn spawn_reader<R: AsyncRead + Unpin + Send + 'static>(
    pipe: Option<R>,
    keep: usize,
    stop: CancellationToken,
) -> JoinHandle<Captured> {
    tokio::spawn(async move {
        let mut captured = Captured::default();
        let Some(mut pipe) = pipe else {
            return captured;
        };
        let mut buf = [0u8; 8192];
        loop {
            let read = tokio::select! {
                // data already there is read before a stop is seen
                biased;
                read = pipe.read(&mut buf) => read,
                () = stop.cancelled() => break,
            };
            match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    captured.total += n;
                    let room = keep.saturating_sub(captured.kept.len());
                    captured.kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        captured
    })
}

/// Waits for both readers once the command is over (its group killed),
/// bounded as the module says; stops them with `stop` if the output stays
/// open.
pub(super) async fn finish(
    group: &mut GroupGuard,
    stop: &CancellationToken,
    out: JoinHandle<Captured>,
    err: JoinHandle<Captured>,
) -> (Captured, Captured, OutputEnd) {
    let both = async {
        let (out, err) = tokio::join!(out, err);
        (out.unwrap_or_default(), err.unwrap_or_default())
    };
    tokio::pin!(both);
    if let Ok((out, err)) = tokio::time::timeout(EOF_GRACE, &mut both).await {
        group.output_closed();
        return (out, err, OutputEnd::Closed);
    }
    let pipes = group.watched_pipes();
    let killed = tokio::task::spawn_blocking(move || kill_pipe_holders(&pipes, Holders::Any))
        .await
        .unwrap_or(0);
    let end = match tokio::time::timeout(KILLED_GRACE, &mut both).await {
        Ok(read) => {
            group.output_closed();
            return (read.0, read.1, OutputEnd::HoldersKilled(killed));
        }
        Err(_) => OutputEnd::LeftOpen,
    };
    stop.cancel();
    let (out, err) = both.await;
    (out, err, end)
}

//! One file of the JSONL mirror, and the file-level work of
//! [`JsonlMirror`](super::JsonlMirror): opening a session file (cutting a
//! partial last line, reading the last gid, telling a damaged one), cutting
//! one back after a failed write, and writing one again from the store.

use std::fs::File;
use std::fs::OpenOptions;
use std::io::Read;
use std::io::Seek;
use std::io::SeekFrom;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;

use super::error::IndexError;
use crate::ids::SessionId;
use crate::record::Entry;
use crate::store::Store;

/// Read size when scanning a file backwards for its last line.
pub(super) const TAIL_CHUNK: usize = 64 * 1024;
/// Entries read per query when a damaged file is written again.
const BACKFILL_PAGE: i64 = 1_000;

#[cfg(test)]
thread_local! {
    /// Makes the next write of a mirror file write this many bytes, then
    /// fail as a full disk does.
    pub(super) static FAIL_NEXT_WRITE: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// An open session file. Only complete lines reach the file: a line is
/// buffered whole, and a failed write is cut back (see [`JsonlMirror`](super::JsonlMirror)).
pub(super) struct MirrorFile {
    pub(super) path: PathBuf,
    pub(super) file: File,
    /// Complete lines not written to the file yet.
    pub(super) buf: Vec<u8>,
    /// Bytes written to the file.
    pub(super) len: u64,
    /// Bytes known durable (fsynced, or there when the file was opened).
    pub(super) synced_len: u64,
    /// Gid of the last line, buffered or written.
    pub(super) last_gid: i64,
    /// Seq of the last line, buffered or written (0: none): the next
    /// entry of the session follows it without a gap.
    pub(super) last_seq: i64,
    /// When the file was last used, to close the least recently used one.
    pub(super) used: u64,
}

impl MirrorFile {
    pub(super) fn dirty(&self) -> bool {
        !self.buf.is_empty() || self.len != self.synced_len
    }

    /// Writes the buffered lines to the file (no fsync).
    pub(super) fn write_out(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            #[cfg(test)]
            if let Some(cut) = FAIL_NEXT_WRITE.take() {
                // a disk that fills up partway through the write
                self.file.write_all(&self.buf[..cut.min(self.buf.len())])?;
                return Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "no space left on device (test)",
                ));
            }
            self.file.write_all(&self.buf)?;
            self.len += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes the buffered lines and makes them durable.
    pub(super) fn sync(&mut self) -> std::io::Result<()> {
        self.write_out()?;
        if self.len != self.synced_len {
            self.file.sync_data()?;
            self.synced_len = self.len;
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct GidOnly {
    gid: i64,
    seq: i64,
}

/// What opening a session file found.
pub(super) enum Opened {
    /// A usable file.
    File(MirrorFile),
    /// The last line is not an entry: why.
    Damaged(String),
}

/// Buffers an entry's line in its file.
pub(super) fn push_line(file: &mut MirrorFile, entry: &Entry) -> Result<(), IndexError> {
    let mut line = serde_json::to_vec(entry).map_err(|e| {
        IndexError::io(
            &file.path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    line.push(b'\n');
    file.buf.extend_from_slice(&line);
    file.last_gid = entry.gid;
    file.last_seq = entry.seq;
    Ok(())
}

/// Writes a session's entries before `before_gid`, read from the store,
/// into `path` and fsyncs it; returns how many it wrote.
pub(super) fn write_from_store(
    store: &Store,
    path: &Path,
    session: SessionId,
    before_gid: i64,
) -> Result<usize, IndexError> {
    let io = |e| IndexError::io(path, e);
    let mut out = std::io::BufWriter::new(File::create(path).map_err(io)?);
    let mut written = 0;
    let mut after_seq = 0;
    'pages: loop {
        let page = store.entries_after_now(session, after_seq, BACKFILL_PAGE)?;
        let Some(last) = page.last() else { break };
        after_seq = last.seq;
        for entry in &page {
            if entry.gid >= before_gid {
                break 'pages;
            }
            serde_json::to_writer(&mut out, entry)
                .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
            out.write_all(b"\n").map_err(io)?;
            written += 1;
        }
    }
    out.flush().map_err(io)?;
    out.get_ref().sync_data().map_err(io)?;
    Ok(written)
}

/// Cuts a file back to `len` after a failed write. If even that fails the
/// next open still cuts a partial last line, as after a crash.
pub(super) fn cut_back(path: &Path, len: u64) {
    let cut = OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(len));
    if let Err(error) = cut {
        tracing::warn!(path = %path.display(), %error, "could not cut a mirror file back after a failed write; its next open repairs it");
    }
}

/// Makes a bot's directory in the mirror's root, never the root itself. A
/// root deleted while the host runs stops the mirror, but the mirror's
/// check that its root is in place may pass just before the deletion:
/// making the root again here would leave one holding only this file and
/// a resume marker, which a restart takes for the whole mirror (the other
/// sessions' files never written again).
pub(super) fn make_bot_dir(dir: &Path) -> Result<(), IndexError> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(IndexError::io(dir, e)),
    }
}

/// Opens a session file for appending, repairing a cut last line and
/// reading the gid of the last complete one.
pub(super) fn open_file(path: &Path) -> Result<Opened, IndexError> {
    let io = |e| IndexError::io(path, e);
    if let Some(dir) = path.parent() {
        make_bot_dir(dir)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(io)?;
    let mut len = file.metadata().map_err(io)?.len();
    if len > 0 && read_byte(&mut file, len - 1).map_err(io)? != b'\n' {
        let keep = rfind_newline(&mut file, len)
            .map_err(io)?
            .map_or(0, |p| p + 1);
        tracing::warn!(path = %path.display(), cut = len - keep, "truncating a partly written mirror line");
        file.set_len(keep).map_err(io)?;
        len = keep;
    }
    let (last_gid, last_seq) = if len == 0 {
        (0, 0)
    } else {
        let start = rfind_newline(&mut file, len - 1)
            .map_err(io)?
            .map_or(0, |p| p + 1);
        let mut line = vec![0; (len - 1 - start) as usize];
        file.seek(SeekFrom::Start(start)).map_err(io)?;
        file.read_exact(&mut line).map_err(io)?;
        match serde_json::from_slice::<GidOnly>(&line) {
            Ok(last) => (last.gid, last.seq),
            Err(e) => {
                return Ok(Opened::Damaged(format!(
                    "its last line is not an entry: {e}"
                )));
            }
        }
    };
    Ok(Opened::File(MirrorFile {
        path: path.to_path_buf(),
        file,
        buf: Vec::new(),
        len,
        synced_len: len,
        last_gid,
        last_seq,
        used: 0,
    }))
}

/// Removes every `<bot>/<session>.jsonl` under `root` (and bot directories
/// left empty).
pub(super) fn remove_session_files(root: &Path) -> Result<(), IndexError> {
    let dirs = std::fs::read_dir(root).map_err(|e| IndexError::io(root, e))?;
    for dir in dirs {
        let dir = dir.map_err(|e| IndexError::io(root, e))?;
        if !dir.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dir = dir.path();
        let files = std::fs::read_dir(&dir).map_err(|e| IndexError::io(&dir, e))?;
        for file in files {
            let path = file.map_err(|e| IndexError::io(&dir, e))?.path();
            if path.extension().is_some_and(|x| x == "jsonl") {
                std::fs::remove_file(&path).map_err(|e| IndexError::io(&path, e))?;
            }
        }
        // kept if other files (moved-aside damaged ones) are still there
        let _ = std::fs::remove_dir(&dir);
    }
    Ok(())
}

/// A free name beside a damaged file: `<name>.damaged-<time>`, with `-2`,
/// `-3`… if that exists.
pub(super) fn aside_path(path: &Path) -> PathBuf {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let base = PathBuf::from(format!("{}.damaged-{stamp}", path.display()));
    let mut aside = base.clone();
    let mut n = 1;
    while aside.exists() {
        n += 1;
        aside = PathBuf::from(format!("{}-{n}", base.display()));
    }
    aside
}

fn read_byte(file: &mut File, at: u64) -> std::io::Result<u8> {
    let mut b = [0u8; 1];
    file.seek(SeekFrom::Start(at))?;
    file.read_exact(&mut b)?;
    Ok(b[0])
}

/// Offset of the last `\n` strictly before `before`, scanning backwards.
fn rfind_newline(file: &mut File, before: u64) -> std::io::Result<Option<u64>> {
    let mut end = before;
    let mut buf = vec![0u8; TAIL_CHUNK];
    while end > 0 {
        let start = end.saturating_sub(TAIL_CHUNK as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(start + i as u64));
        }
        end = start;
    }
    Ok(None)
}

//! The JSONL mirror: every transcript entry appended as one JSON line to
//! `<root>/<bot>/<session>.jsonl` (root is `<data_dir>/transcripts`), for
//! people and tools outside the host. Each line is an [`Entry`] as serde
//! writes it (`id`, `session`, `seq`, `gid`, `author`, `turn`,
//! `created_at`, `kind` and the kind's fields).
//!
//! Files are append-only and idempotent by gid: a file's last line tells
//! its last gid, and an entry at or below it is not written again. A line
//! cut short by a crash (no final newline) is truncated when the file is
//! next opened. The file `<root>/.mirrored_gid` records, after each
//! [`JsonlMirror::flush`] (and when the mirror is dropped), the gid up to
//! which every file is complete, so a restart resumes from there; deleting
//! the whole root rebuilds the mirror from the store.
//!
//! Like the index, the mirror is derived: SQLite stays the source of truth.

use std::collections::HashMap;
use std::fs::File;
use std::fs::OpenOptions;
use std::io::BufWriter;
use std::io::Read;
use std::io::Seek;
use std::io::SeekFrom;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;

use super::error::IndexError;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::record::Entry;

/// Name of the resume marker file in the mirror root.
const MARKER_FILE: &str = ".mirrored_gid";
/// Files kept open at once; more are flushed and closed.
const MAX_OPEN_FILES: usize = 128;
/// Read size when scanning a file backwards for its last line.
const TAIL_CHUNK: usize = 64 * 1024;

struct MirrorFile {
    out: BufWriter<File>,
    last_gid: i64,
    dirty: bool,
}

/// Appends entries to per-session JSONL files; see the module docs.
pub struct JsonlMirror {
    root: PathBuf,
    files: HashMap<SessionId, MirrorFile>,
    /// Every entry up to this gid is in its file, durably.
    mirrored_gid: i64,
    /// Highest gid handed to [`JsonlMirror::append`].
    written_gid: i64,
}

impl std::fmt::Debug for JsonlMirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlMirror")
            .field("root", &self.root)
            .field("mirrored_gid", &self.mirrored_gid)
            .finish()
    }
}

#[derive(Deserialize)]
struct GidOnly {
    gid: i64,
}

impl JsonlMirror {
    /// Opens the mirror rooted at `root` (created if needed) and reads its
    /// resume marker.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, IndexError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| IndexError::io(&root, e))?;
        let marker = root.join(MARKER_FILE);
        let mirrored_gid = match std::fs::read_to_string(&marker) {
            Ok(s) => s.trim().parse().map_err(|e| IndexError::CorruptMarker {
                dir: marker.clone(),
                detail: format!("{e}"),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(IndexError::io(marker, e)),
        };
        Ok(Self {
            root,
            files: HashMap::new(),
            mirrored_gid,
            written_gid: mirrored_gid,
        })
    }

    /// The file of a session.
    pub fn path_of(&self, bot: &BotId, session: SessionId) -> PathBuf {
        self.root
            .join(bot.as_str())
            .join(format!("{session}.jsonl"))
    }

    /// Every entry up to this gid is durably mirrored; a restart resumes
    /// after it.
    pub fn mirrored_gid(&self) -> i64 {
        self.mirrored_gid
    }

    /// Highest gid handed over so far (durable after the next flush).
    pub fn written_gid(&self) -> i64 {
        self.written_gid
    }

    /// Appends an entry of `bot`'s session unless its file already has it.
    /// Returns whether a line was written. Entries of one session must come
    /// in gid order.
    pub fn append(&mut self, entry: &Entry, bot: &BotId) -> Result<bool, IndexError> {
        if !self.files.contains_key(&entry.session) && self.files.len() >= MAX_OPEN_FILES {
            self.close_all()?;
        }
        let path = self.path_of(bot, entry.session);
        let file = match self.files.entry(entry.session) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(open_file(&path)?),
        };
        let written = entry.gid > file.last_gid;
        if written {
            let mut line = serde_json::to_vec(entry).map_err(|e| {
                IndexError::io(
                    &path,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                )
            })?;
            line.push(b'\n');
            file.out
                .write_all(&line)
                .map_err(|e| IndexError::io(&path, e))?;
            file.last_gid = entry.gid;
            file.dirty = true;
        }
        // Only now: a failed write must be retried from this entry.
        self.written_gid = self.written_gid.max(entry.gid);
        Ok(written)
    }

    /// Notes that every entry up to `gid` was handed over (entries the
    /// caller had nothing to write for, e.g. of a deleted session).
    pub fn pass(&mut self, gid: i64) {
        self.written_gid = self.written_gid.max(gid);
    }

    /// Writes buffered lines through to disk (fsync) and records the resume
    /// marker.
    pub fn flush(&mut self) -> Result<(), IndexError> {
        for file in self.files.values_mut() {
            if file.dirty {
                file.out
                    .flush()
                    .map_err(|e| IndexError::io(&self.root, e))?;
                file.out
                    .get_ref()
                    .sync_data()
                    .map_err(|e| IndexError::io(&self.root, e))?;
                file.dirty = false;
            }
        }
        if self.written_gid != self.mirrored_gid {
            let marker = self.root.join(MARKER_FILE);
            let tmp = self.root.join(".mirrored_gid.tmp");
            std::fs::write(&tmp, self.written_gid.to_string())
                .map_err(|e| IndexError::io(&tmp, e))?;
            std::fs::rename(&tmp, &marker).map_err(|e| IndexError::io(&marker, e))?;
            self.mirrored_gid = self.written_gid;
        }
        Ok(())
    }

    /// Whether lines or the resume marker wait for a [`JsonlMirror::flush`].
    pub fn has_unflushed(&self) -> bool {
        self.written_gid != self.mirrored_gid || self.files.values().any(|f| f.dirty)
    }

    fn close_all(&mut self) -> Result<(), IndexError> {
        self.flush()?;
        self.files.clear();
        Ok(())
    }
}

/// A mirror dropped without a last flush (the indexer actor killed when the
/// fleet stops, rather than stopped) flushes here, so its files are
/// complete and the resume marker says so. Not while panicking: what was
/// handed over may be half written.
impl Drop for JsonlMirror {
    fn drop(&mut self) {
        if std::thread::panicking() || !self.has_unflushed() {
            return;
        }
        if let Err(error) = self.flush() {
            tracing::warn!(%error, "flushing the JSONL mirror on drop failed; the next start rewrites what is missing");
        }
    }
}

/// Opens a session file for appending, repairing a cut last line and
/// reading the gid of the last complete one.
fn open_file(path: &Path) -> Result<MirrorFile, IndexError> {
    let io = |e| IndexError::io(path, e);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| IndexError::io(dir, e))?;
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
    let last_gid = if len == 0 {
        0
    } else {
        let start = rfind_newline(&mut file, len - 1)
            .map_err(io)?
            .map_or(0, |p| p + 1);
        let mut line = vec![0; (len - 1 - start) as usize];
        file.seek(SeekFrom::Start(start)).map_err(io)?;
        file.read_exact(&mut line).map_err(io)?;
        serde_json::from_slice::<GidOnly>(&line)
            .map_err(|e| IndexError::CorruptMarker {
                dir: path.to_path_buf(),
                detail: format!("last line of the mirror file is not an entry ({e}); delete the mirror root to rebuild it"),
            })?
            .gid
    };
    Ok(MirrorFile {
        out: BufWriter::new(file),
        last_gid,
        dirty: false,
    })
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

#[cfg(test)]
#[path = "jsonl_mirror_tests.rs"]
mod tests;

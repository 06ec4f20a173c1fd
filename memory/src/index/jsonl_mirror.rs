//! The JSONL mirror: every transcript entry appended as one JSON line to
//! `<root>/<bot>/<session>.jsonl` (root is `<data_dir>/transcripts`), for
//! people and tools outside the host. Each line is an [`Entry`] as serde
//! writes it (`id`, `session`, `seq`, `gid`, `author`, `turn`,
//! `created_at`, `kind` and the kind's fields).
//!
//! Files are append-only and idempotent by gid: a file's last line tells
//! its last gid, and an entry at or below it is not written again. The file
//! `<root>/.mirrored_gid` records, after each [`JsonlMirror::flush`] (and
//! when the mirror is dropped), the gid up to which every file is complete,
//! so a restart resumes from there; deleting the whole root rebuilds the
//! mirror from the store.
//!
//! Like the index, the mirror is derived: SQLite stays the source of truth,
//! and damage heals itself:
//! - A write or fsync that fails (a full disk) cuts the file back to what
//!   was durable before it and closes it; what was cut is handed over again
//!   (the mirror's cursor goes back to its marker), so no partial line stays
//!   and nothing is skipped.
//! - A line cut short by a crash (no final newline) is truncated when the
//!   file is next opened.
//! - A file whose last line is not an entry is moved to
//!   `<session>.jsonl.damaged-<UTC time>` and written again from the store
//!   ([`JsonlMirror::with_store`]), with a `WARN` line; so is one whose
//!   lines end before entries the store has ahead of the next one to
//!   write (cut short at a line's end while the host was stopped).
//! - A resume marker that does not parse is damage too: the mirror starts
//!   from gid 0 (every file keeps what it has and gets what it lacks).
//! - A session file deleted (while the host runs, or while it is stopped)
//!   is written again whole from the store, with a `WARN` line, when its
//!   session is next written: at the next flush of a file the host still
//!   had open (it was appending to the unlinked file), or when the file is
//!   opened again.
//! - The whole root deleted while the host runs stops the mirror until the
//!   host restarts (which rebuilds it), with one `ERROR` line: the indexer
//!   drops it ([`JsonlMirror::abandon`]) and search indexing goes on.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::path::Path;
use std::path::PathBuf;

use super::error::IndexError;
use super::mirror_file::MirrorFile;
use super::mirror_file::Opened;
use super::mirror_file::aside_path;
use super::mirror_file::cut_back;
use super::mirror_file::make_bot_dir;
use super::mirror_file::open_file;
use super::mirror_file::push_line;
use super::mirror_file::remove_session_files;
use super::mirror_file::write_from_store;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::record::Entry;
use crate::store::Store;

/// Name of the resume marker file in the mirror root.
const MARKER_FILE: &str = ".mirrored_gid";
/// The marker is written here first, then renamed over it.
const MARKER_TMP: &str = ".mirrored_gid.tmp";
/// Files kept open at once; the least recently used one is closed first.
const MAX_OPEN_FILES: usize = 128;
/// Buffered bytes of one file that are written out before the next flush.
const WRITE_THROUGH: usize = 64 * 1024;

/// Appends entries to per-session JSONL files; see the module docs.
pub struct JsonlMirror {
    root: PathBuf,
    files: HashMap<SessionId, MirrorFile>,
    /// Files closed with lines written but not fsynced: path and the length
    /// known durable. The next flush syncs them.
    unsynced: HashMap<PathBuf, u64>,
    /// Every entry up to this gid is in its file, durably. Lines written
    /// beyond a file's durable length all have higher gids.
    mirrored_gid: i64,
    /// Highest gid handed to [`JsonlMirror::append`].
    written_gid: i64,
    /// Where a damaged file is written again from.
    store: Option<Store>,
    /// Use counter for [`MirrorFile::used`].
    clock: u64,
}

impl std::fmt::Debug for JsonlMirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlMirror")
            .field("root", &self.root)
            .field("mirrored_gid", &self.mirrored_gid)
            .finish()
    }
}

impl JsonlMirror {
    /// Checks, before the host starts, that `root` can hold the mirror: a
    /// directory the process can write, created if missing. Anything else
    /// (a plain file where the directory should be, a directory of another
    /// user) would stop the indexer at every start while searches answered
    /// from an index that no longer grows, so the host refuses to start
    /// with [`IndexError::MirrorNotWritable`], which says what to do.
    pub fn check_root(root: impl AsRef<Path>) -> Result<(), IndexError> {
        let root = root.as_ref();
        let refuse = |cause: std::io::Error| IndexError::MirrorNotWritable {
            dir: root.to_path_buf(),
            cause,
        };
        if root.exists() && !root.is_dir() {
            return Err(refuse(std::io::ErrorKind::NotADirectory.into()));
        }
        std::fs::create_dir_all(root).map_err(refuse)?;
        let probe = root.join(".botfleet-write-probe");
        std::fs::write(&probe, b"")
            .and_then(|()| std::fs::remove_file(&probe))
            .map_err(refuse)
    }

    /// Opens the mirror rooted at `root` (created if needed) and reads its
    /// resume marker. A marker that does not parse is logged and removed,
    /// and the mirror resumes from gid 0.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, IndexError> {
        let root = root.into();
        if root.exists() && !root.is_dir() {
            return Err(IndexError::MirrorNotWritable {
                dir: root,
                cause: std::io::ErrorKind::NotADirectory.into(),
            });
        }
        std::fs::create_dir_all(&root).map_err(|e| IndexError::io(&root, e))?;
        let marker = root.join(MARKER_FILE);
        let mirrored_gid = match std::fs::read_to_string(&marker) {
            Ok(s) => match s.trim().parse::<i64>() {
                Ok(gid) if gid >= 0 => gid,
                Ok(_) | Err(_) => {
                    tracing::warn!(
                        marker = %marker.display(),
                        found = %s.chars().take(40).collect::<String>(),
                        "the JSONL mirror's resume marker is damaged (not a gid); checking every mirror file against the store and completing them"
                    );
                    std::fs::remove_file(&marker).map_err(|e| IndexError::io(&marker, e))?;
                    0
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(IndexError::io(marker, e)),
        };
        Ok(Self {
            root,
            files: HashMap::new(),
            unsynced: HashMap::new(),
            mirrored_gid,
            written_gid: mirrored_gid,
            store: None,
            clock: 0,
        })
    }

    /// Opens the mirror at `root` emptied of what an earlier mirror wrote
    /// (the resume marker and every `<bot>/<session>.jsonl`), to be written
    /// again from the store. Other files (moved-aside damaged ones) stay.
    pub fn open_empty(root: impl Into<PathBuf>) -> Result<Self, IndexError> {
        let root = root.into();
        if root.exists() {
            for name in [MARKER_FILE, MARKER_TMP] {
                let path = root.join(name);
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(IndexError::io(path, e)),
                }
            }
            remove_session_files(&root)?;
        }
        Self::open(root)
    }

    /// The store a damaged file is written again from. Without one, a
    /// damaged file is an error that names the fix.
    pub fn with_store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
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

    /// Highest gid handed over so far (durable after the next flush). After
    /// a failed write it goes back to [`JsonlMirror::mirrored_gid`]: read
    /// the store after it again.
    pub fn written_gid(&self) -> i64 {
        self.written_gid
    }

    /// Appends an entry of `bot`'s session unless its file already has it.
    /// Returns whether a line was written. Entries of one session must come
    /// in gid order. On an error the entries after
    /// [`JsonlMirror::written_gid`] must be handed over again.
    pub fn append(&mut self, entry: &Entry, bot: &BotId) -> Result<bool, IndexError> {
        let session = entry.session;
        if !self.files.contains_key(&session) {
            // opening would make the bot's directory, and so a root with
            // none of the other files and no resume marker
            self.check_root_in_place()?;
            self.make_room()?;
            let path = self.path_of(bot, session);
            let file = self.open_session(&path, session, entry.gid, entry.seq)?;
            self.files.insert(session, file);
        }
        self.clock += 1;
        let clock = self.clock;
        let Some(file) = self.files.get_mut(&session) else {
            return Err(IndexError::Task("a mirror file vanished".into()));
        };
        file.used = clock;
        let written = entry.gid > file.last_gid;
        if written {
            push_line(file, entry)?;
            if file.buf.len() >= WRITE_THROUGH
                && let Err(e) = file.write_out()
            {
                return Err(self.fail(session, e));
            }
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
    /// marker. A failure cuts the failing file back to its durable length
    /// (see [`JsonlMirror::append`]).
    pub fn flush(&mut self) -> Result<(), IndexError> {
        self.check_root_in_place()?;
        if let Err(e) = self.rewrite_deleted_files() {
            self.rewind();
            return Err(e);
        }
        let failed = self
            .files
            .iter_mut()
            .filter(|(_, f)| f.dirty())
            .find_map(|(session, f)| f.sync().err().map(|e| (*session, e)));
        if let Some((session, e)) = failed {
            return Err(self.fail(session, e));
        }
        while let Some((path, synced_len)) =
            self.unsynced.iter().next().map(|(p, l)| (p.clone(), *l))
        {
            let synced = OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.sync_data());
            if let Err(e) = synced {
                cut_back(&path, synced_len);
                self.unsynced.remove(&path);
                self.rewind();
                return Err(IndexError::io(path, e));
            }
            self.unsynced.remove(&path);
        }
        if self.written_gid != self.mirrored_gid {
            let marker = self.root.join(MARKER_FILE);
            let tmp = self.root.join(MARKER_TMP);
            std::fs::write(&tmp, self.written_gid.to_string())
                .map_err(|e| IndexError::io(&tmp, e))?;
            std::fs::rename(&tmp, &marker).map_err(|e| IndexError::io(&marker, e))?;
            self.mirrored_gid = self.written_gid;
        }
        Ok(())
    }

    /// Whether lines or the resume marker wait for a [`JsonlMirror::flush`].
    pub fn has_unflushed(&self) -> bool {
        self.written_gid != self.mirrored_gid
            || !self.unsynced.is_empty()
            || self.files.values().any(MirrorFile::dirty)
    }

    /// Whether the mirror's root was deleted (while the host runs): the
    /// mirror cannot go on until a restart rebuilds it.
    pub fn root_gone(&self) -> bool {
        !self.root.is_dir()
    }

    /// Stops a mirror whose root was deleted while the host runs
    /// ([`JsonlMirror::root_gone`]), or one of whose files it cannot
    /// write ([`crate::index::feed`]): says once, at `ERROR`, what to do,
    /// and drops what waits to be written without writing it (the restart
    /// writes the whole mirror again from the store).
    pub fn abandon(mut self, error: &IndexError) {
        let why = if self.root_gone() {
            format!(
                "the JSONL mirror's directory {} was deleted while the host runs: the mirror stops (search indexing goes on); restart the host, which writes the mirror again from the store (or stop it and run `botfleet reindex`)",
                self.root.display()
            )
        } else {
            format!(
                "the JSONL mirror cannot write a file in {}: the mirror stops (search indexing goes on); make the directory and its files the host's to write (e.g. `chown -R $(id -un) {}`), then restart the host, which writes what the mirror lacks from the store",
                self.root.display(),
                self.root.display()
            )
        };
        tracing::error!(%error, "{why}");
        if let Some(store) = &self.store {
            store.stats().health.note_stopped("JSONL mirror", why);
        }
        self.files.clear();
        self.unsynced.clear();
        self.rewind();
    }

    fn check_root_in_place(&self) -> Result<(), IndexError> {
        if self.root_gone() {
            return Err(IndexError::io(
                &self.root,
                std::io::ErrorKind::NotFound.into(),
            ));
        }
        Ok(())
    }

    /// Writes again, whole from the store, each file with lines to flush
    /// that is no longer at its path (deleted while the host runs: its
    /// lines went to the unlinked file).
    fn rewrite_deleted_files(&mut self) -> Result<(), IndexError> {
        let gone: Vec<SessionId> = self
            .files
            .iter()
            .filter(|(_, f)| f.dirty() && !f.path.exists())
            .map(|(session, _)| *session)
            .collect();
        for session in gone {
            let Some(file) = self.files.remove(&session) else {
                continue;
            };
            self.unsynced.remove(&file.path);
            let path = file.path.clone();
            drop(file);
            self.restore_missing(
                &path,
                session,
                self.written_gid + 1,
                "was deleted while the host ran",
            )?;
        }
        Ok(())
    }

    /// A session file that is missing though the store may have entries
    /// of it before `before_gid` that the mirror handed over: writes them
    /// from the store into a temporary file, then moves it in place. None
    /// (a new session) leaves the path free. Without a store, says what to
    /// do.
    fn restore_missing(
        &mut self,
        path: &Path,
        session: SessionId,
        before_gid: i64,
        what: &str,
    ) -> Result<(), IndexError> {
        let Some(store) = self.store.clone() else {
            tracing::warn!(
                path = %path.display(),
                "a JSONL mirror file {what}: its session's earlier entries are not in it; stop the host and run `botfleet reindex` to write the mirror again"
            );
            return Ok(());
        };
        if let Some(dir) = path.parent() {
            make_bot_dir(dir)?;
        }
        let tmp = PathBuf::from(format!("{}.rebuild", path.display()));
        let written = match write_from_store(&store, &tmp, session, before_gid) {
            Ok(n) => n,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        if written == 0 {
            let _ = std::fs::remove_file(&tmp);
            return Ok(());
        }
        std::fs::rename(&tmp, path).map_err(|e| IndexError::io(path, e))?;
        // written whole and fsynced: what an earlier close left unsynced is
        // in the new file
        self.unsynced.remove(path);
        tracing::warn!(
            path = %path.display(),
            entries = written,
            "a JSONL mirror file {what}: wrote it again from the store"
        );
        Ok(())
    }

    /// Opens a session's file; a damaged one is moved aside and written
    /// again from the store up to (not including) `before_gid`, the gid of
    /// the entry to append (`next_seq` in its session), and so is a
    /// missing one whose session has entries before it, and one whose
    /// lines stop short of that entry's (cut short while the host was
    /// stopped: its last complete line was taken for where it stands, and
    /// the lines after it were never written again, a gap for good; audit).
    fn open_session(
        &mut self,
        path: &Path,
        session: SessionId,
        before_gid: i64,
        next_seq: i64,
    ) -> Result<MirrorFile, IndexError> {
        if next_seq > 1 && !path.exists() {
            self.restore_missing(path, session, before_gid, "was missing")?;
        }
        let mut file = match open_file(path)? {
            Opened::File(file)
                if file.last_gid < before_gid
                    && file.last_seq.saturating_add(1) < next_seq
                    && self.lines_missing(session, file.last_seq, before_gid)? =>
            {
                let cause = format!(
                    "its lines end at seq {}, before the next entry's {next_seq}: the lines between are missing (the file was cut short)",
                    file.last_seq
                );
                drop(file);
                self.rebuild(path, session, before_gid, &cause)?
            }
            Opened::File(file) => file,
            Opened::Damaged(cause) => self.rebuild(path, session, before_gid, &cause)?,
        };
        // closed earlier with lines not yet fsynced: those are not durable
        if let Some(synced_len) = self.unsynced.remove(path) {
            file.synced_len = file.synced_len.min(synced_len);
        }
        Ok(file)
    }

    /// Whether the store has entries of `session` after `last_seq` and
    /// before `before_gid`: lines a file that ends at `last_seq` lacks.
    /// (Seqs follow on without gaps as the store writes them; the store is
    /// asked rather than trusted to, so a gap it holds is never taken for
    /// missing lines.) Without a store, none are known.
    fn lines_missing(
        &self,
        session: SessionId,
        last_seq: i64,
        before_gid: i64,
    ) -> Result<bool, IndexError> {
        let Some(store) = &self.store else {
            return Ok(false);
        };
        let next = store.entries_after_now(session, last_seq, 1)?;
        Ok(next.first().is_some_and(|e| e.gid < before_gid))
    }

    /// Writes a damaged file's session again from the store (its entries
    /// before `before_gid`) into a temporary file, fsyncs it, then moves
    /// the damaged file aside and the new one in its place: a failure on
    /// the way leaves the damaged file where it was, to be tried again.
    fn rebuild(
        &mut self,
        path: &Path,
        session: SessionId,
        before_gid: i64,
        cause: &str,
    ) -> Result<MirrorFile, IndexError> {
        let damaged = || IndexError::MirrorDamaged {
            path: path.to_path_buf(),
            detail: cause.to_owned(),
        };
        let Some(store) = self.store.clone() else {
            return Err(damaged());
        };
        let tmp = PathBuf::from(format!("{}.rebuild", path.display()));
        if let Err(e) = write_from_store(&store, &tmp, session, before_gid) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        let aside = aside_path(path);
        std::fs::rename(path, &aside).map_err(|e| IndexError::io(path, e))?;
        if let Err(e) = std::fs::rename(&tmp, path) {
            // put the damaged file back: a missing file would be started
            // empty and miss the session's earlier entries
            let _ = std::fs::rename(&aside, path);
            return Err(IndexError::io(path, e));
        }
        self.unsynced.remove(path);
        tracing::warn!(
            path = %path.display(),
            moved_to = %aside.display(),
            cause,
            "a JSONL mirror file was damaged: moved it aside and wrote it again from the store (delete the moved copy once you no longer need it)"
        );
        match open_file(path)? {
            Opened::File(file) => Ok(file),
            Opened::Damaged(_) => Err(damaged()),
        }
    }

    /// Closes the least recently used file if too many are open: its lines
    /// are written, their fsync waits for the next flush.
    fn make_room(&mut self) -> Result<(), IndexError> {
        if self.files.len() < MAX_OPEN_FILES {
            return Ok(());
        }
        let Some(session) = self
            .files
            .iter()
            .min_by_key(|(_, f)| f.used)
            .map(|(s, _)| *s)
        else {
            return Ok(());
        };
        let Some(mut file) = self.files.remove(&session) else {
            return Ok(());
        };
        if let Err(e) = file.write_out() {
            self.files.insert(session, file);
            return Err(self.fail(session, e));
        }
        if file.dirty() {
            self.unsynced.insert(file.path.clone(), file.synced_len);
        }
        Ok(())
    }

    /// A write or fsync of a session's file failed: cut the file back to
    /// its durable length (no partial line may stay: the next line would be
    /// appended to it), close it, and go back to the marker, so that what
    /// was cut is handed over again.
    fn fail(&mut self, session: SessionId, e: std::io::Error) -> IndexError {
        let Some(file) = self.files.remove(&session) else {
            return IndexError::io(&self.root, e);
        };
        cut_back(&file.path, file.synced_len);
        self.rewind();
        IndexError::io(file.path, e)
    }

    /// Goes back to the last durable point: entries after it are handed
    /// over again (files skip what they already have).
    fn rewind(&mut self) {
        self.written_gid = self.mirrored_gid;
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

#[cfg(test)]
#[path = "jsonl_mirror_tests.rs"]
mod tests;

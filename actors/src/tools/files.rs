//! Read, Write and Edit: files inside the fleet workspace.
//!
//! Only regular files are read or replaced (`file_io.rs`): a FIFO, socket
//! or device is refused before it is opened. Read streams a window of the
//! file (`read_window.rs`), so its memory is bounded by the output limit
//! whatever the file's size, and says how to continue where it stopped
//! (`offset`, and `column` inside a line longer than the limit). Write and
//! Edit replace a file through a temporary file created exclusively beside
//! it, so a crash never leaves half a file and nothing planted at a
//! temporary path is followed.

#[path = "file_args.rs"]
mod file_args;
#[path = "file_errors.rs"]
mod file_errors;
#[path = "file_io.rs"]
mod file_io;
#[path = "read_window.rs"]
mod read_window;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

pub(super) use self::file_errors::UNUSABLE_HINT;
use self::file_errors::blocked;
use self::file_errors::file_error;
pub(super) use self::file_errors::host_failure;
use self::file_errors::io_error;
use self::file_errors::not_text;
use self::file_errors::workspace_error;
use self::read_window::Shown;
use self::read_window::Stop;
use self::read_window::Window;
use self::read_window::WindowError;
use super::Effect;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::parse_args;
use super::show_path;
use crate::model::ToolSpec;

/// `path` checked and made absolute in the workspace, for `action`
/// ("read", "write", "edit"): refused when it is outside, or when a
/// symbolic link on its way loops (named, where the system's error names
/// no link).
fn resolve(
    ctx: &ToolContext<'_>,
    path: &str,
    action: &str,
) -> Result<std::path::PathBuf, ToolError> {
    let path = checked(ctx, path, action)?;
    // a test swaps a directory for a symlink here, between check and open
    #[cfg(test)]
    crate::tools::test_support::between_check_and_open();
    Ok(path)
}

/// [`resolve`]'s checks of `path`, changing nothing.
fn checked(
    ctx: &ToolContext<'_>,
    path: &str,
    action: &str,
) -> Result<std::path::PathBuf, ToolError> {
    let path = ctx
        .workspace()
        .resolve(path)
        .map_err(|e| workspace_error(&e))?;
    if let Some(refused) = file_errors::looped(action, ctx.workspace().root(), &path) {
        return Err(refused);
    }
    Ok(path)
}

/// `Tool::precheck` of the file tools: a `path` outside the workspace is
/// refused before the gate, as the call would refuse it (QA: a Write to
/// `../bob/.bashrc` asked the person, who approved, and was then refused,
/// the approval used up). Other argument errors are the call's to name.
fn precheck_path(ctx: &ToolContext<'_>, args: &Value, action: &str) -> Result<(), ToolError> {
    match args.get("path").and_then(Value::as_str) {
        Some(path) => checked(ctx, path, action).map(drop),
        None => Ok(()),
    }
}

/// A path for messages; the workspace root is `.`.
fn shown(ctx: &ToolContext<'_>, path: &std::path::Path) -> String {
    let shown = show_path(ctx.workspace(), path);
    if shown.is_empty() { ".".into() } else { shown }
}

/// A blocking file job, run off the async threads.
async fn blocking<T: Send + 'static>(
    shown: &str,
    job: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(job)
        .await
        .map_err(|e| ToolError::new(format!("the file job on {shown} failed: {e}"), "try again"))?
}

/// Reads a text file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Read;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default)]
    column: Option<u64>,
}

#[async_trait]
impl Tool for Read {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Read".into(),
            description: "Read a text file of the workspace, optionally from line `offset` (1-based) for `limit` lines. Long output is cut at the output limit with a note saying how to Read on (`offset`, and `column` inside a very long line).".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the workspace root."},
                    "offset": {"type": "integer", "minimum": 1},
                    "limit": {"type": "integer", "minimum": 1},
                    "column": {"type": "integer", "minimum": 1, "description": "Start at this character (1-based) of line `offset`, to continue a line cut at the output limit."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::External
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn mutates(&self) -> bool {
        false
    }

    fn precheck(&self, ctx: &ToolContext<'_>, args: &Value) -> Result<(), ToolError> {
        precheck_path(ctx, args, "read")
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        file_args::known_fields("Read", &args, &["path", "offset", "limit", "column"])?;
        file_args::from_one("Read", &args, &["offset", "limit", "column"])?;
        let args: ReadArgs = parse_args("Read", args)?;
        let path = resolve(ctx, &args.path, "read")?;
        a_file("Read", ctx, &args.path, &path)?;
        let shown = shown(ctx, &path);
        let window = Window {
            line: args.offset.unwrap_or(1).max(1),
            column: args.column.unwrap_or(1).max(1),
            limit: args.limit.unwrap_or(u64::MAX).max(1),
            budget: ctx.limits().max_output_bytes,
            // a secret through a cut end is found whole in this much more
            context: ctx.secrets.redactor.longest().saturating_sub(1),
        };
        let cancel = ctx.cancel.clone();
        let name = shown.clone();
        let workspace = ctx.workspace().clone();
        let read = blocking(&shown, move || {
            let ws = workspace
                .beneath()
                .map_err(|e| io_error("read", &name, &e))?;
            let (file, _) =
                file_io::open_regular(&ws, &path).map_err(|e| file_error("read", &name, &e))?;
            read_window::read_window(file, window, &cancel).map_err(|e| match e {
                WindowError::NotText { line } => not_text(&name, Some(line)),
                WindowError::Cancelled => ToolError::new(
                    format!("reading {name} stopped: the turn was cancelled"),
                    "nothing; the turn is ending",
                ),
                WindowError::Io(e) => io_error("read", &name, &e),
            })
        })
        .await?;
        Ok(ToolOutput::text(render(hidden(ctx, read), &window)))
    }
}

/// `read` with every part of a secret (the bot's or the host's) that a
/// cut end of the window goes through hidden, here where the file's bytes
/// around the window are known: no later search for the whole secret
/// finds such a part. The secrets inside the window are left to the one
/// scrub of every tool result (`outcome_batch` in `engine/calls.rs`), so
/// the window is searched once.
fn hidden(ctx: &ToolContext<'_>, read: Shown) -> Shown {
    let text = match ctx
        .secrets
        .redactor
        .hide_cut_parts(&read.text, &read.before, &read.after)
    {
        std::borrow::Cow::Borrowed(_) => read.text,
        std::borrow::Cow::Owned(text) => text,
    };
    Shown { text, ..read }
}

/// The window's text with a note on where the file goes on.
fn render(read: Shown, window: &Window) -> String {
    let Shown { mut text, stop, .. } = read;
    let budget = window.budget;
    let note = match stop {
        Stop::Eof => return text,
        Stop::Limit { next } => {
            format!(
                "[the file continues at line {next}; Read again with offset {next} to see more]"
            )
        }
        Stop::Budget { next } => format!(
            "[truncated at the output limit of {budget} bytes: the file continues at line {next}; \
             Read again with offset {next} to see more]"
        ),
        Stop::MidLine { line, column } => format!(
            "[truncated at the output limit of {budget} bytes: line {line} continues at character \
             {column}; Read again with offset {line} and column {column} to see more]"
        ),
        Stop::PastEnd { lines: 0 } => "[the file is empty]".to_owned(),
        Stop::PastEnd { lines } => format!(
            "[offset {} is past the end: the file has {lines} line{}]",
            window.line,
            if lines == 1 { "" } else { "s" }
        ),
        Stop::PastLineEnd { line, chars } => format!(
            "[column {} is past the end of line {line}, which has {chars} character{}]",
            window.column,
            if chars == 1 { "" } else { "s" }
        ),
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&note);
    text
}

/// Creates or overwrites a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Write;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

/// Whether the path as given names a directory (`dir/`, `.`, `a/..`).
fn names_directory(given: &str) -> bool {
    let given = given.trim_end();
    given.ends_with('/') || matches!(given.rsplit('/').next(), Some("." | ".."))
}

/// Refuses a path that names the workspace root or, as given, a
/// directory: `tool` works on files. (Read and Edit opened `a.txt` for
/// `a.txt/`, which names a directory everywhere else: QA, 2026-12-05.)
fn a_file(
    tool: &str,
    ctx: &ToolContext<'_>,
    given: &str,
    path: &std::path::Path,
) -> Result<(), ToolError> {
    let what = if path == ctx.workspace().root() {
        "the workspace root"
    } else if names_directory(given) {
        "a directory"
    } else {
        return Ok(());
    };
    Err(ToolError::new(
        format!("path {given:?} names {what}, not a file; {tool} works on files"),
        "give the path of a file, such as `notes/todo.md` (without a trailing `/`)",
    ))
}

#[async_trait]
impl Tool for Write {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Write".into(),
            description:
                "Create or overwrite a text file in the workspace (parent directories are created)."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the workspace root (`~/` is the root too)."},
                    "content": {"type": "string", "description": "The whole new content."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::External
    }

    fn idempotent(&self) -> bool {
        // writing the same content twice leaves the same file
        true
    }

    fn mutates(&self) -> bool {
        true
    }

    fn precheck(&self, ctx: &ToolContext<'_>, args: &Value) -> Result<(), ToolError> {
        precheck_path(ctx, args, "write")
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        file_args::known_fields("Write", &args, &["path", "content"])?;
        let args: WriteArgs = parse_args("Write", args)?;
        file_args::plain_path(&args.path)?;
        file_args::short_enough(&args.path, ctx.workspace().root())?;
        if args.content.len() > ctx.limits().max_file_bytes {
            return Err(ToolError::new(
                format!(
                    "the content has {} bytes; the limit is {}",
                    args.content.len(),
                    ctx.limits().max_file_bytes
                ),
                // Edit keeps a file under the same limit: only a command
                // makes a larger one (QA: "in parts with Edit" never could)
                "write it as several files under the limit and join them with Shell \
                 (`cat part1 part2 > whole`), or generate it with Shell",
            )
            .or_without("Shell", "write it as several files, each under the limit"));
        }
        let path = resolve(ctx, &args.path, "write")?;
        a_file("Write", ctx, &args.path, &path)?;
        let shown = shown(ctx, &path);
        let name = shown.clone();
        let len = args.content.len();
        // the disk the store is on, in the default layout (workspace_disk.rs):
        // a file that grows is not written past its reserve; one replaced
        // by as much or less may always be, to free space, as Edit's (QA,
        // 2026-12-05: emptying a big file was refused, "its 0 bytes would
        // take the disk below" the reserve)
        let before = std::fs::metadata(&path).map_or(0, |m| m.len());
        if u64::try_from(len).unwrap_or(u64::MAX) > before
            && let Some(space) = ctx.workspace().disk_space()
            && !space.allows(u64::try_from(len).unwrap_or(u64::MAX))
        {
            return Err(space.write_refused(&shown, len));
        }
        let workspace = ctx.workspace().clone();
        blocking(&shown, move || {
            let ws = workspace
                .beneath()
                .map_err(|e| io_error("write", &name, &e))?;
            let (parent, file) =
                file_io::split(&path).map_err(|e| file_error("write", &name, &e))?;
            let dir = file_io::make_dirs(&ws, parent).map_err(|e| {
                match file_io::blocker(&ws, parent) {
                    Some(blocker) => blocked(ws.root(), &name, blocker),
                    None => file_error("create the directory of", &name, &e),
                }
            })?;
            let permissions =
                file_io::existing_target(&dir, file).map_err(|e| file_error("write", &name, &e))?;
            file_io::replace(&dir, file, args.content.as_bytes(), permissions)
                .map_err(|e| file_error("write", &name, &e))
        })
        .await?;
        Ok(ToolOutput::text(format!("wrote {len} bytes to {shown}")))
    }
}

/// Replaces text in a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Edit;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
    #[serde(default)]
    replace_all: bool,
}

#[async_trait]
impl Tool for Edit {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Edit".into(),
            description: "Replace `old_text` with `new_text` in a workspace file. `old_text` must occur exactly once unless `replace_all` is true.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the workspace root (`~/` is the root too)."},
                    "old_text": {"type": "string"},
                    "new_text": {"type": "string"},
                    "replace_all": {"type": "boolean", "default": false}
                },
                "required": ["path", "old_text", "new_text"],
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

    fn precheck(&self, ctx: &ToolContext<'_>, args: &Value) -> Result<(), ToolError> {
        precheck_path(ctx, args, "edit")
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        file_args::known_fields(
            "Edit",
            &args,
            &["path", "old_text", "new_text", "replace_all"],
        )?;
        let args: EditArgs = parse_args("Edit", args)?;
        if args.old_text.is_empty() {
            return Err(ToolError::new(
                "old_text is empty",
                "give the exact text to replace, or use Write for a new file",
            ));
        }
        if args.old_text == args.new_text {
            return Err(ToolError::new(
                "old_text and new_text are the same; nothing to change",
                "give in new_text the text that should replace old_text",
            ));
        }
        let path = resolve(ctx, &args.path, "edit")?;
        a_file("Edit", ctx, &args.path, &path)?;
        let shown = shown(ctx, &path);
        let max = ctx.limits().max_file_bytes;
        let (name, at, workspace) = (shown.clone(), path.clone(), ctx.workspace().clone());
        let read = blocking(&shown, move || {
            let ws = workspace
                .beneath()
                .map_err(|e| io_error("edit", &name, &e))?;
            file_io::read_bounded(&ws, &at, max).map_err(|e| file_error("edit", &name, &e))
        });
        let (bytes, permissions) = match read.await? {
            Ok(read) => read,
            Err(size) => {
                return Err(ToolError::new(
                    format!("{shown} has {size} bytes; Edit changes files of up to {max} bytes"),
                    "change it with Shell (e.g. `sed -i`), or split it into smaller files",
                )
                .or_without("Shell", "Write its new content as smaller files instead"));
            }
        };
        let text = match String::from_utf8(bytes) {
            Ok(text) if !text.contains('\0') => text,
            Ok(_) | Err(_) => return Err(not_text(&shown, None)),
        };
        // overlapping occurrences count: "aa" is twice in "aaa", and which
        // one was meant is not known (QA, 2026-12-05: the first was
        // replaced, "1 occurrence"); replace_all replaces them as
        // `str::replace` finds them, one after another
        let count_of = |old: &str| {
            if args.replace_all {
                text.matches(old).count()
            } else {
                overlapping(&text, old)
            }
        };
        let (mut old_text, mut new_text) = (args.old_text.clone(), args.new_text.clone());
        let mut count = count_of(&old_text);
        // a file whose lines end in CRLF, and old_text's lines in LF (a
        // model writes `\n`): the edit matches and writes CRLF lines (QA:
        // it failed, "copy the exact text", which a model dropping `\r`
        // never could)
        let mut crlf = false;
        if count == 0
            && text.contains("\r\n")
            && old_text.contains('\n')
            && !old_text.contains("\r\n")
        {
            // counted once, with the file's line ends
            let with_crlf = old_text.replace('\n', "\r\n");
            let found = count_of(&with_crlf);
            if found > 0 {
                crlf = true;
                count = found;
                old_text = with_crlf;
                new_text = new_text.replace("\r\n", "\n").replace('\n', "\r\n");
            }
        }
        if count == 0 {
            // a file with `\r` line ends in places (mixed, or old Mac
            // ones) that old_text has not: said, or the model copies the
            // same text again (QA)
            if text.contains('\r') && !old_text.contains('\r') {
                return Err(ToolError::new(
                    format!(
                        "old_text does not occur in {shown}; lines of the file end in \\r (CR, \
                         as Windows' \\r\\n or old Mac files), and old_text has none"
                    ),
                    "Read the file and copy the exact text, \\r included where its lines have \
                     one, or replace the lines one at a time",
                ));
            }
            return Err(ToolError::new(
                format!("old_text does not occur in {shown}"),
                "Read the file and copy the exact text, including whitespace",
            ));
        }
        if count > 1 && !args.replace_all {
            return Err(ToolError::new(
                format!("old_text occurs {count} times in {shown}"),
                "include more surrounding text so it is unique, or set replace_all to true",
            ));
        }
        let replaced = if args.replace_all { count } else { 1 };
        let new_len = text.len() - replaced * old_text.len() + replaced * new_text.len();
        if new_len > max {
            return Err(ToolError::new(
                format!("{shown} would have {new_len} bytes after the edit; the limit is {max}"),
                "replace less at a time, or change the file with Shell",
            )
            .or_without("Shell", "replace less at a time"));
        }
        // a file that grows: not past the disk's reserve (workspace_disk.rs);
        // one that shrinks may always be written, to free space
        if new_len > text.len()
            && let Some(space) = ctx.workspace().disk_space()
            && !space.allows(u64::try_from(new_len).unwrap_or(u64::MAX))
        {
            return Err(space.write_refused(&shown, new_len));
        }
        let new = if args.replace_all {
            text.replace(&old_text, &new_text)
        } else {
            text.replacen(&old_text, &new_text, 1)
        };
        let (name, workspace) = (shown.clone(), ctx.workspace().clone());
        blocking(&shown, move || {
            let ws = workspace
                .beneath()
                .map_err(|e| io_error("write", &name, &e))?;
            let (parent, file) =
                file_io::split(&path).map_err(|e| file_error("write", &name, &e))?;
            let dir = file_io::open_dir(&ws, parent).map_err(|e| file_error("write", &name, &e))?;
            file_io::replace(&dir, file, new.as_bytes(), Some(permissions))
                .map_err(|e| file_error("write", &name, &e))
        })
        .await?;
        Ok(ToolOutput::text(format!(
            "replaced {replaced} occurrence{} in {shown}{}",
            if replaced == 1 { "" } else { "s" },
            if crlf {
                " (old_text matched where the file's lines end in CRLF, and new_text was \
                 written with CRLF line ends)"
            } else {
                ""
            }
        )))
    }
}

/// How many times `pattern` (not empty) occurs in `text`, overlapping
/// occurrences counted (`"aa"` in `"aaa"`: 2).
fn overlapping(text: &str, pattern: &str) -> usize {
    let step = pattern.chars().next().map_or(1, char::len_utf8);
    let mut count = 0;
    let mut from = 0;
    while let Some(at) = text.get(from..).and_then(|rest| rest.find(pattern)) {
        count += 1;
        from += at + step;
    }
    count
}

#[cfg(test)]
#[path = "files_tests.rs"]
mod tests;

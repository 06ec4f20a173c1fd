//! Read, Write and Edit: files inside the fleet workspace.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use super::Effect;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::parse_args;
use super::show_path;
use crate::model::ToolSpec;

fn resolve(ctx: &ToolContext<'_>, path: &str) -> Result<std::path::PathBuf, ToolError> {
    ctx.workspace().resolve(path).map_err(|e| {
        ToolError::new(
            e.to_string(),
            "use a path relative to the workspace root; files outside it cannot be reached",
        )
    })
}

fn io_error(action: &str, shown: &str, e: &std::io::Error) -> ToolError {
    let hint = match e.kind() {
        std::io::ErrorKind::NotFound => {
            "check the path (list the directory with Shell `ls`), or Write the file first"
        }
        std::io::ErrorKind::PermissionDenied => {
            "the host may not touch this file; choose another path"
        }
        std::io::ErrorKind::IsADirectory => "this is a directory; give a file path",
        _ => "check the path and try again",
    };
    ToolError::new(format!("cannot {action} {shown}: {e}"), hint)
}

/// Reads a text file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Read;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

#[async_trait]
impl Tool for Read {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "Read".into(),
            description: "Read a text file of the workspace, optionally from line `offset` (1-based) for `limit` lines.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the workspace root."},
                    "offset": {"type": "integer", "minimum": 1},
                    "limit": {"type": "integer", "minimum": 1}
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

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: ReadArgs = parse_args("Read", args)?;
        let path = resolve(ctx, &args.path)?;
        let shown = show_path(ctx.workspace(), &path);
        let meta = tokio::fs::metadata(&path)
            .await
            .map_err(|e| io_error("read", &shown, &e))?;
        if meta.is_dir() {
            return Err(ToolError::new(
                format!("{shown} is a directory"),
                "list it with Shell `ls`, then Read a file in it",
            ));
        }
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|e| io_error("read", &shown, &e))?;
        let text = String::from_utf8(bytes).map_err(|_| {
            ToolError::new(
                format!("{shown} is not UTF-8 text"),
                "inspect binary files with Shell (e.g. `file` or `xxd | head`)",
            )
        })?;
        let start = args.offset.unwrap_or(1).max(1) - 1;
        let selected: String = match args.limit {
            None if start == 0 => text,
            limit => text
                .lines()
                .skip(start)
                .take(limit.unwrap_or(usize::MAX))
                .collect::<Vec<_>>()
                .join("\n"),
        };
        let max = ctx.limits().max_output_bytes;
        if selected.len() > max {
            let mut end = max;
            while !selected.is_char_boundary(end) {
                end -= 1;
            }
            let shown_lines = selected[..end].lines().count();
            return Ok(ToolOutput::text(format!(
                "{}\n[truncated: the file continues; Read again with offset {} to see more]",
                &selected[..end],
                start + shown_lines + 1
            )));
        }
        Ok(ToolOutput::text(selected))
    }
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
                    "path": {"type": "string", "description": "Path relative to the workspace root."},
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

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: WriteArgs = parse_args("Write", args)?;
        if args.content.len() > ctx.limits().max_file_bytes {
            return Err(ToolError::new(
                format!(
                    "the content has {} bytes; the limit is {}",
                    args.content.len(),
                    ctx.limits().max_file_bytes
                ),
                "write the file in parts with Edit, or generate it with Shell",
            ));
        }
        let path = resolve(ctx, &args.path)?;
        let shown = show_path(ctx.workspace(), &path);
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| io_error("create the directory of", &shown, &e))?;
        }
        // write to a temporary file and rename, so a crash never leaves half a file
        let tmp = path.with_file_name(format!(
            ".{}.botfleet-tmp",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ));
        tokio::fs::write(&tmp, args.content.as_bytes())
            .await
            .map_err(|e| io_error("write", &shown, &e))?;
        tokio::fs::rename(&tmp, &path)
            .await
            .map_err(|e| io_error("write", &shown, &e))?;
        Ok(ToolOutput::text(format!(
            "wrote {} bytes to {shown}",
            args.content.len()
        )))
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
                    "path": {"type": "string"},
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

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> Result<ToolOutput, ToolError> {
        let args: EditArgs = parse_args("Edit", args)?;
        if args.old_text.is_empty() {
            return Err(ToolError::new(
                "old_text is empty",
                "give the exact text to replace, or use Write for a new file",
            ));
        }
        let path = resolve(ctx, &args.path)?;
        let shown = show_path(ctx.workspace(), &path);
        let text = tokio::fs::read_to_string(&path)
            .await
            .map_err(|e| io_error("read", &shown, &e))?;
        let count = text.matches(&args.old_text).count();
        if count == 0 {
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
        let new = if args.replace_all {
            text.replace(&args.old_text, &args.new_text)
        } else {
            text.replacen(&args.old_text, &args.new_text, 1)
        };
        let tmp = path.with_file_name(format!(
            ".{}.botfleet-tmp",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ));
        tokio::fs::write(&tmp, new.as_bytes())
            .await
            .map_err(|e| io_error("write", &shown, &e))?;
        tokio::fs::rename(&tmp, &path)
            .await
            .map_err(|e| io_error("write", &shown, &e))?;
        Ok(ToolOutput::text(format!(
            "replaced {} occurrence{} in {shown}",
            if args.replace_all { count } else { 1 },
            if args.replace_all && count != 1 {
                "s"
            } else {
                ""
            }
        )))
    }
}

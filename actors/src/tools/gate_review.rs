//! The gate's review step: which writes are in the notes area, the exact
//! action of a call (for Shell, with the scripts it runs, read now), the
//! rules and the reviewer model, the review log, and the check that a
//! Shell command's scripts did not change between review and its lock.

use botfleet_memory::Mutation;
use botfleet_memory::ReviewRecord;
use botfleet_memory::SessionKind;
use serde_json::Value;
use unicode_segmentation::UnicodeSegmentation;

use super::super::ToolContext;
use super::super::ToolError;
use crate::engine::budget_pause;
use crate::prompts::prompts;
use crate::safety::Action;
use crate::safety::ResolvedScript;
use crate::safety::ReviewConfig;
use crate::safety::ReviewDecision;
use crate::safety::ReviewMode;
use crate::safety::ReviewSurface;
use crate::safety::Reviewer;
use crate::safety::credential_path;
use crate::safety::may_run_scripts;
use crate::safety::resolve_scripts;
use crate::safety::review_rules;
use crate::safety::review_with_model;
use crate::safety::sensitive_write_target;
use crate::safety::written_targets;

/// Whether a Write/Edit stays inside `<notes_dir>/<bot id>/` and changes
/// nothing that runs later: git internals (a repository's hooks and
/// config), CI pipelines and shell start-up files are reviewed wherever
/// they are, also when a symlink leads there.
pub(super) fn in_notes_area(ctx: &ToolContext<'_>, args: &Value) -> bool {
    let Some(path) = args.get("path").and_then(Value::as_str) else {
        return false;
    };
    let root = ctx.workspace().root();
    let notes = root
        .join(&ctx.rt.settings.review.notes_dir)
        .join(ctx.bot.id.as_str());
    sensitive_write_target(path).is_none()
        && ctx.workspace().resolve(path).is_ok_and(|p| {
            p.starts_with(&notes)
                && p.strip_prefix(root)
                    .is_ok_and(|rel| sensitive_write_target(&rel.to_string_lossy()).is_none())
        })
}

/// What credentials a Read would return, if its path (as given, or the
/// file it leads to through links) is one the Shell rules ask about:
/// `.ssh/`, `id_rsa`, `.env`, `.aws/credentials`… The workspace is HOME
/// for Shell, so these are the same files.
pub(super) fn reads_credentials(ctx: &ToolContext<'_>, args: &Value) -> Option<&'static str> {
    let path = args.get("path").and_then(Value::as_str)?;
    if let Some(what) = credential_path(path) {
        return Some(what);
    }
    let root = ctx.workspace().root();
    let resolved = ctx.workspace().resolve(path).ok()?;
    let rel = resolved.strip_prefix(root).ok()?;
    credential_path(&rel.to_string_lossy())
}

/// The scripts a Shell call would run, read now (none when the command
/// cannot run a script file).
async fn shell_scripts(ctx: &ToolContext<'_>, args: &Value) -> Vec<ResolvedScript> {
    let command = args
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if !may_run_scripts(&command) {
        return Vec::new();
    }
    let workspace = ctx.workspace().clone();
    let cwd = match args.get("cwd").and_then(Value::as_str) {
        Some(c) => workspace
            .resolve(c)
            .unwrap_or_else(|_| workspace.root().to_path_buf()),
        None => workspace.root().to_path_buf(),
    };
    // reads files: off the async workers
    tokio::task::spawn_blocking(move || resolve_scripts(&workspace, &cwd, &command))
        .await
        .unwrap_or_default()
}

/// Whether the scripts a reviewed Shell call runs are still the ones that
/// were reviewed (same files, same hashes). Called holding the
/// workspace's exclusive lock: once it says yes, nothing of botfleet's
/// can change them before the call runs.
async fn scripts_unchanged(ctx: &ToolContext<'_>, args: &Value, action: &Action) -> bool {
    shell_scripts(ctx, args).await == action.scripts
}

/// Whether `action` (reviewed, and maybe approved, before the call waited
/// for the workspace) is still what the call does now that it holds it:
/// the scripts a Shell command runs, where its `cwd` leads, and where the
/// files it (or a Write, an Edit) writes lead through links. Each is read
/// again (review: a link re-pointed by another bot's command while the
/// approved call waited made it run, or write, elsewhere than approved).
pub(super) async fn action_unchanged(ctx: &ToolContext<'_>, args: &Value, action: &Action) -> bool {
    let surface = action.surface;
    if surface == ReviewSurface::Shell && !scripts_unchanged(ctx, args, action).await {
        return false;
    }
    let links = links_followed(ctx, surface, args);
    let reviewed = action
        .args
        .get(LINKS)
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if links.as_slice() != reviewed {
        return false;
    }
    surface != ReviewSurface::Shell
        || cwd_leads_to(ctx, args).as_deref()
            == action.args.get(CWD_LEADS_TO).and_then(Value::as_str)
}

/// Characters (grapheme clusters: what a reader counts as one) of a long
/// text the summary keeps from its start and from its end (with a note of
/// how many characters it left out between them).
const SUMMARY_HEAD: usize = 100;
const SUMMARY_TAIL: usize = 60;
/// The fewest characters a summary's cut leaves out: about what its
/// marker (` …(123 characters)… `) takes.
const MIN_LEFT_OUT: usize = 24;

/// A command or description as an approval's summary shows it: runs of
/// whitespace as one space, and a text still longer than
/// `SUMMARY_HEAD + SUMMARY_TAIL` characters cut in the middle, so that
/// its end shows too. (Round 19's web tester: a command padded with 3,000
/// spaces before `; curl … | sh` showed only its harmless start, cut at
/// 160 characters, on the card a person approves from.)
pub(super) fn summary_text(text: &str) -> String {
    let mut flat = String::with_capacity(text.len().min(4 * (SUMMARY_HEAD + SUMMARY_TAIL)));
    let mut space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space {
            flat.push(' ');
            space = false;
        }
        flat.push(c);
    }
    // whole grapheme clusters on each side of the cut: an emoji sequence
    // (👨‍👩‍👧‍👦) or a letter with its marks (é, न्दी) is kept or left out whole,
    // never shown as a dangling joiner or a mark with no letter
    let clusters: Vec<&str> = flat.graphemes(true).collect();
    // a cut that would leave out fewer characters than its marker takes
    // saves nothing and hides part of the command (QA: `sed  …(2
    // characters)… /$/\r/"`): the text is shown whole
    if clusters.len() <= SUMMARY_HEAD + SUMMARY_TAIL + MIN_LEFT_OUT {
        return flat;
    }
    let head = clusters[..SUMMARY_HEAD].concat();
    let tail = clusters[clusters.len() - SUMMARY_TAIL..].concat();
    let left_out = flat.chars().count() - head.chars().count() - tail.chars().count();
    format!("{head} …({left_out} characters)… {tail}")
}

/// The exact action of a call: canonical arguments (a Shell timeout does
/// not change the effect and is left out), a summary, and for Shell the
/// scripts it would run, read now.
pub(super) async fn build_action(
    ctx: &ToolContext<'_>,
    tool: &str,
    surface: ReviewSurface,
    args: &Value,
) -> Action {
    let mut canonical = args.clone();
    let mut scripts = Vec::new();
    // the summary is cut and its spaces joined: scrubbed of the bot's
    // secrets before, a secret the cut went through, or one with runs of
    // spaces, would no longer be found (QA: the card showed 27 of its 28
    // characters)
    let text = |key: &str| {
        let given = args.get(key).and_then(Value::as_str).unwrap_or("");
        ctx.secrets.redactor.scrub(given).into_owned()
    };
    if surface == ReviewSurface::Shell {
        if let Some(map) = canonical.as_object_mut() {
            map.remove("timeout_s");
        }
        scripts = shell_scripts(ctx, args).await;
    }
    let links = links_followed(ctx, surface, args);
    if !links.is_empty()
        && let Some(map) = canonical.as_object_mut()
    {
        map.insert(LINKS.into(), Value::Array(links));
    }
    if surface == ReviewSurface::Shell
        && let Some(rel) = cwd_leads_to(ctx, args)
        && let Some(map) = canonical.as_object_mut()
    {
        map.insert(CWD_LEADS_TO.into(), Value::String(rel));
    }
    let mut summary = match tool {
        "Shell" => format!("run `{}`", summary_text(&text("command"))),
        // the size of what would be written, not of its scrubbed text
        // (QA: a secret in it shrank the count)
        "Write" => format!(
            "write {} ({} bytes)",
            text("path"),
            args.get("content")
                .and_then(Value::as_str)
                .map_or(0, str::len)
        ),
        "Edit" => format!("edit {}", text("path")),
        "Read" => format!("read {}", text("path")),
        "Task" => format!("start a subagent: {}", summary_text(&text("description"))),
        "SendToAgent" => format!("send a message to {}", text("agent")),
        "SendMessage" if ctx.scope.session.key.kind == SessionKind::Agent => {
            format!("reply to {}", ctx.scope.session.key.peer)
        }
        "SendMessage" => "post a message in a room shared with other people".to_owned(),
        "CreateAgent" => format!("create the agent {}", text("name")),
        "UpdateAgent" => format!("change the agent {}", text("agent")),
        other => format!("call {other}"),
    };
    if !scripts.is_empty() {
        let origins: Vec<&str> = scripts.iter().map(|s| s.origin.as_str()).collect();
        summary.push_str(&format!(" (runs {})", origins.join(", ")));
    }
    Action {
        tool: tool.to_owned(),
        surface,
        args: canonical,
        summary,
        scripts,
        secret_names: ctx.secrets.values.iter().map(|(n, _)| n.clone()).collect(),
    }
}

/// Rules, then the reviewer model when the rules allow and one is set.
pub(super) async fn review(
    ctx: &ToolContext<'_>,
    action: &Action,
    config: &ReviewConfig,
) -> ReviewDecision {
    let rules = review_rules(action, config).stricter(symlinked_target(action));
    if rules != ReviewDecision::Allow {
        return rules;
    }
    let Some(name) = &config.reviewer else {
        return rules;
    };
    // the reviewer's tokens are the bot's: not spent past its daily
    // budget (the step's own model call may have spent it; the reviewer
    // was asked all the same). A person decides instead, as when the
    // reviewer fails.
    match budget_pause(&ctx.rt.store, ctx.bot, ctx.turn_tokens).await {
        Ok(Some(pause)) => {
            return ReviewDecision::Ask {
                reason: format!(
                    "the bot's daily token budget is spent ({} of {} tokens), so the reviewer \
                     model was not asked and a person must decide",
                    pause.used, pause.budget
                ),
            };
        }
        Ok(None) => {}
        // unread, the budget does not hold the review back: the turn's
        // next model request checks it again
        Err(e) => {
            tracing::warn!(bot = %ctx.bot.id, error = %e, "could not read the daily token budget before the reviewer's call");
        }
    }
    match ctx.rt.models.get(name) {
        Some(model) => {
            let vault = ctx.rt.vault();
            let mut usage = None;
            let reviewer = Reviewer {
                model: model.as_ref(),
                encoding: ctx.rt.settings.context_for(name).encoding,
                hidden: &ctx.secrets.redactor,
                host: vault.host_redactor(),
                timeout: config.reviewer_timeout,
            };
            let decision = review_with_model(
                &reviewer,
                ctx.bot.id.as_str(),
                action,
                ctx.cancel,
                &mut usage,
            )
            .await;
            // the reviewer's tokens are the bot's, as its fact extraction's
            // are (outside the turn: no turn counted)
            if let Some(usage) = usage {
                let day = ctx.store().clock().now().format("%Y-%m-%d").to_string();
                let added = Mutation::AddUsage {
                    bot: ctx.bot.id.clone(),
                    day,
                    turns: 0,
                    usage,
                };
                if let Err(e) = ctx.store().write(vec![added]).await {
                    tracing::warn!(bot = %ctx.bot.id, error = %e, "could not record the reviewer model's token usage");
                }
            }
            decision
        }
        None => ReviewDecision::Ask {
            reason: format!(
                "the reviewer model {name:?} is not configured, so a person must decide"
            ),
        },
    }
}

/// A Write/Edit whose path, or a file a Shell command writes (`cp x
/// link/hooks/pre-commit`), leads through a symlink to a file that runs
/// later: the rules only see the path as given (QA: a symlink to a
/// repository's `.git`, made by an earlier command, let `cp` plant a hook
/// unasked).
/// Read from the action's `writes_through_links` ([`links_followed`],
/// resolved once, as the action was built).
fn symlinked_target(action: &Action) -> ReviewDecision {
    let links = action
        .args
        .get(LINKS)
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for link in links {
        let (Some(given), Some(rel)) = (
            link.get("path").and_then(Value::as_str),
            link.get("leads_to").and_then(Value::as_str),
        ) else {
            continue;
        };
        if sensitive_write_target(given).is_some() {
            // the rules asked already
            continue;
        }
        if let Some(what) = sensitive_write_target(rel) {
            return ReviewDecision::Ask {
                reason: format!("changes {what} ({rel}, where {given} leads)"),
            };
        }
    }
    ReviewDecision::Allow
}

/// The key of an action's arguments that holds [`links_followed`].
const LINKS: &str = "writes_through_links";

/// The files a Write/Edit (its `path`) or a Shell command (the files it
/// writes) would write, each as given and where it leads now, relative
/// to the workspace's root (`None` when it cannot be resolved there).
fn written_files(
    ctx: &ToolContext<'_>,
    surface: ReviewSurface,
    args: &Value,
) -> Vec<(String, Option<String>)> {
    let text = |key: &str| args.get(key).and_then(Value::as_str);
    let (given, cwd): (Vec<String>, Option<&str>) = match surface {
        ReviewSurface::FileWrite => (text("path").into_iter().map(str::to_owned).collect(), None),
        ReviewSurface::Shell => (written_targets(text("command").unwrap_or("")), text("cwd")),
        _ => return Vec::new(),
    };
    let workspace = ctx.workspace();
    let root = workspace.root();
    let base = cwd
        .and_then(|c| workspace.resolve(c).ok())
        .unwrap_or_else(|| root.to_path_buf());
    given
        .into_iter()
        .map(|given| {
            let rel = workspace
                .resolve(&base.join(&given).to_string_lossy())
                .ok()
                .and_then(|p| {
                    p.strip_prefix(root)
                        .ok()
                        .map(|rel| rel.to_string_lossy().into_owned())
                });
            (given, rel)
        })
        .collect()
}

/// Where the files an action writes lead through symlinks, for those
/// that lead elsewhere than as given (`{"path": "a.txt", "leads_to":
/// ".bashrc"}`), as a part of the action: an approval covers the file a
/// link led to when the person decided, and a link re-pointed before the
/// approved call ran made it write another (audit, 2026-12-07). Review
/// reads them there too ([`symlinked_target`]).
fn links_followed(ctx: &ToolContext<'_>, surface: ReviewSurface, args: &Value) -> Vec<Value> {
    written_files(ctx, surface, args)
        .into_iter()
        .filter_map(|(given, rel)| {
            let rel = rel?;
            let plain = std::path::Path::new(&given)
                .components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .collect::<std::path::PathBuf>();
            (plain != std::path::Path::new(&rel))
                .then(|| serde_json::json!({"path": given, "leads_to": rel}))
        })
        .collect()
}

/// The key of a Shell action's arguments that holds [`cwd_leads_to`].
const CWD_LEADS_TO: &str = "cwd_leads_to";

/// Where a Shell call's `cwd` leads through symlinks, relative to the
/// workspace's root (`.` for the root), when that is elsewhere than as
/// given: an approval covers the directory the command ran in when the
/// person decided, and the card shows it (audit: `rm -rf *` approved in
/// `build`, a link to `scratch`, ran in the root once the bot re-pointed
/// the link, and the card had shown only `cwd: build`).
fn cwd_leads_to(ctx: &ToolContext<'_>, args: &Value) -> Option<String> {
    let given = args.get("cwd").and_then(Value::as_str)?;
    let workspace = ctx.workspace();
    let resolved = workspace.resolve(given).ok()?;
    let rel = resolved.strip_prefix(workspace.root()).ok()?;
    let plain = std::path::Path::new(given)
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect::<std::path::PathBuf>();
    (plain != rel).then(|| match rel.to_string_lossy() {
        r if r.is_empty() => ".".to_owned(),
        r => r.into_owned(),
    })
}

/// Logs a decision that was not `allow` (tracing and the review log).
pub(super) async fn log_review(
    ctx: &ToolContext<'_>,
    action: &Action,
    mode: ReviewMode,
    decision: &ReviewDecision,
) {
    tracing::info!(
        bot = %ctx.bot.id,
        tool = %action.tool,
        surface = action.surface.as_str(),
        mode = mode.as_str(),
        decision = decision.name(),
        reason = decision.reason().unwrap_or(""),
        "auto-review"
    );
    let record = ReviewRecord {
        bot: ctx.bot.id.clone(),
        session: ctx.session(),
        turn: Some(ctx.turn),
        call_id: ctx.call_id.to_owned(),
        tool: action.tool.clone(),
        surface: action.surface.as_str().to_owned(),
        mode: mode.as_str().to_owned(),
        decision: decision.name().to_owned(),
        reason: decision.reason().unwrap_or("").to_owned(),
        fingerprint: action.fingerprint(),
        at: 0,
    };
    if let Err(e) = ctx
        .store()
        .write(vec![Mutation::RecordReview(Box::new(record))])
        .await
    {
        tracing::warn!(error = %e, "could not log a review decision");
    }
}

pub(super) fn denied(ctx: &ToolContext<'_>, reason: &str) -> ToolError {
    let text = prompts()
        .review_denied
        .render(&[("reason", reason), ("owner", ctx.bot.owner.as_str())])
        .unwrap_or_else(|_| format!("auto-review blocked this action: {reason}"));
    ToolError::new(
        text,
        "do not retry it or reach the same result another way; tell your owner what you need",
    )
}

#[cfg(test)]
#[path = "gate_summary_tests.rs"]
mod summary_tests;

//! The safety layer: auto-review and approvals, loop detection, file
//! locks, redaction and secrets (DESIGN.md §8, seed 002, docs/security.md).
//!
//! Each primitive is self-contained and synchronous or runtime-agnostic, so
//! the turn engine composes them rather than they it:
//!
//! - [`LoopDetector`] watches one streamed assistant message for repeated
//!   characters or lines and fails open after its time budget;
//!   [`ToolCallLoopGuard`] watches a turn's tool calls for the same calls
//!   over and over.
//! - [`LockManager`] hands out per-path read/write locks and a global
//!   exclusive lock, FIFO fair, released on drop, withdrawn on cancellation.
//! - [`decide`] is the decision matrix of classification × privacy mode ×
//!   purpose; [`Classified`] carries a value with its classification.
//! - [`Sensitive`] and [`Secret`] keep values out of logs and serialised
//!   output; [`Redactor`] scrubs known secret values from text.
//! - [`review_rules`] judges the exact [`Action`] of a tool call (a shell
//!   command is parsed, and the scripts it runs are read by
//!   [`resolve_scripts`]); [`review_with_model`] asks an optional reviewer
//!   model; [`approvals`] records a person's decision and wakes the bot.
//!   The tool gate (`tools/gate.rs`) puts them in order.

pub mod approvals;
/// Credentials a shell pattern reaches once expanded.
mod credential_glob;
mod file_locks;
mod loop_detector;
mod makefile;
mod patterns;
mod redaction;
mod review;
mod scripts;
mod secrets;
mod shell_git;
mod shell_inline;
mod shell_net;
mod shell_parse;
mod shell_rules;
mod shell_words;
mod tool_loop;

pub use file_locks::ExclusiveGuard;
pub use file_locks::LockInfo;
pub use file_locks::LockManager;
pub use file_locks::LockMode;
pub use file_locks::LockState;
pub use file_locks::LockTarget;
pub use file_locks::PathGuard;
pub use loop_detector::LoopConfig;
pub use loop_detector::LoopDetector;
pub use loop_detector::LoopKind;
pub use loop_detector::LoopVerdict;
pub use loop_detector::RepeatThreshold;
pub use patterns::HostAllowlist;
pub use patterns::host_pattern_port;
pub use patterns::valid_host_pattern;
pub use redaction::Classification;
pub use redaction::Classified;
pub use redaction::Decision;
pub use redaction::PrivacyMode;
pub use redaction::Purpose;
pub use redaction::RedactedForm;
pub use redaction::decide;
pub use review::Action;
pub use review::ResolvedScript;
pub use review::ReviewConfig;
pub use review::ReviewDecision;
pub use review::ReviewMode;
pub use review::ReviewModes;
pub use review::ReviewSurface;
pub use review::Reviewer;
pub use review::ScriptKind;
pub use review::canonical_json;
pub use review::credential_path;
pub use review::review_rules;
pub use review::review_with_model;
pub use review::sensitive_write_target;
pub use review::shown_script;
pub use scripts::may_run_scripts;
pub use scripts::resolve_scripts;
pub use secrets::Cuts;
pub use secrets::REDACTED;
pub use secrets::Redactor;
pub use secrets::ScrubStream;
pub use secrets::Secret;
pub use secrets::Sensitive;
pub(crate) use secrets::forms as secret_forms;
pub use shell_rules::written_targets;
pub use tool_loop::ToolCallLoopGuard;
pub use tool_loop::ToolLoopConfig;
pub use tool_loop::ToolLoopVerdict;

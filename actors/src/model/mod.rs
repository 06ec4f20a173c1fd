//! The model boundary: one trait, two providers (OpenAI-compatible HTTP and
//! the deterministic scripted model).
//!
//! A provider turns a [`ModelRequest`] into a [`ModelResponse`], streaming
//! text deltas to a [`StreamSink`] as they arrive so the caller can watch the
//! stream (loop detection) and abort it (interrupts).

pub(crate) mod call_usage;
mod openai;
pub(crate) mod reasoning_text;
mod scripted;
mod types;

pub use openai::MaxTokensField;
pub use openai::OpenAiModel;
pub use openai::OpenAiOptions;
pub use openai::base_url_problem;
pub use scripted::Script;
pub use scripted::ScriptError;
pub use scripted::ScriptedModel;
pub use types::ChatMessage;
pub use types::FinishReason;
pub use types::ModelError;
pub use types::ModelRequest;
pub use types::ModelResponse;
pub use types::Purpose;
pub use types::SinkControl;
pub use types::StreamSink;
pub use types::ToolCall;
pub use types::ToolSpec;
pub use types::Usage;
pub(crate) use types::assistant_token_text;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// A chat model with tool calls.
#[async_trait]
pub trait Model: Send + Sync + 'static {
    /// Short description for logs and status (`openai:grok-4`, `scripted:echo.toml`).
    fn describe(&self) -> String;

    /// Whether the model answers requests of `purpose` at all. A scripted
    /// model without a rule for a purpose answers every such request with
    /// nothing, so the engine does not ask it for a compaction it cannot
    /// write (each attempt would read the session and log a failure).
    fn answers(&self, purpose: Purpose) -> bool {
        let _ = purpose;
        true
    }

    /// Whether requests must alternate user and assistant roles: the
    /// engine sends consecutive user-side messages as one and leaves out
    /// assistant messages with neither text nor tool calls
    /// (`engine/request.rs`). The chat templates of many served models
    /// (Mistral's and Gemma's under vLLM) refuse anything else.
    fn alternating_roles(&self) -> bool {
        true
    }

    /// Runs one completion. Text deltas go to `sink` as they arrive; when
    /// the sink answers [`SinkControl::Abort`] or `cancel` fires, the stream
    /// is dropped and the call returns [`ModelError::Aborted`] or
    /// [`ModelError::Cancelled`]. An answer that arrives whole (not
    /// streamed) is complete and paid for already: a provider may then
    /// cut its text where the sink aborted and return it, its tool calls
    /// included (the OpenAI provider does, `openai/body.rs`).
    async fn complete(
        &self,
        request: &ModelRequest,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError>;

    /// Runs one completion as [`Model::complete`] does, its error cleaned
    /// of `hidden`'s secrets as well as of the provider's own: the host's
    /// credentials, which a server may echo in an error body (and the
    /// error reaches the turn's notice, the transcript and the log). A
    /// provider that cuts such texts cleans them before the cut (a cut
    /// through a secret leaves a start of it no search finds); this
    /// default cleans the finished error.
    async fn complete_hiding(
        &self,
        request: &ModelRequest,
        hidden: &crate::safety::Redactor,
        sink: &mut dyn StreamSink,
        cancel: &CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        let result = self.complete(request, sink, cancel).await;
        result.map_err(|e| e.scrubbed(hidden))
    }
}

//! A reasoning block a model writes before its answer, in the answer's
//! text. A thinking model served without a reasoning parser (vLLM without
//! `--reasoning-parser`, llama.cpp with `--reasoning-format none`, some
//! Ollama and LM Studio versions) sends its thinking as `<think>…</think>`
//! at the start of `content` instead of in `reasoning_content`. A caller
//! that reads the answer as data (the fact extractor's JSON, the
//! reviewer's verdict, a compaction's summary) reads it after that block.

/// Opening and closing tags of the reasoning blocks models inline.
const REASONING_TAGS: [(&str, &str); 2] = [("<think>", "</think>"), ("<thinking>", "</thinking>")];

/// An answer that is a reasoning block never closed: the model spent its
/// tokens thinking and wrote no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnclosedReasoning {
    /// The block's opening tag (`<think>`).
    pub(crate) open: &'static str,
}

/// `text` after a leading reasoning block (tags in any ASCII case), both
/// trimmed; `text` trimmed when it starts with none.
pub(crate) fn after_reasoning(text: &str) -> Result<&str, UnclosedReasoning> {
    let text = text.trim();
    for (open, close) in REASONING_TAGS {
        let Some(head) = text.get(..open.len()) else {
            continue;
        };
        if !head.eq_ignore_ascii_case(open) {
            continue;
        }
        let rest = &text[open.len()..];
        return match find_ignore_case(rest, close) {
            Some(i) => Ok(rest[i + close.len()..].trim()),
            None => Err(UnclosedReasoning { open }),
        };
    }
    Ok(text)
}

/// Byte index of `needle` (ASCII) in `hay`, ignoring ASCII case.
fn find_ignore_case(hay: &str, needle: &str) -> Option<usize> {
    let (hay, needle) = (hay.as_bytes(), needle.as_bytes());
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::UnclosedReasoning;
    use super::after_reasoning;

    #[test]
    fn a_leading_block_is_skipped_in_any_case() {
        assert_eq!(
            after_reasoning("  <think>\nhmm {not json}\n</think>\n\n{\"a\": 1}\n"),
            Ok("{\"a\": 1}")
        );
        assert_eq!(
            after_reasoning("<THINKING>x</Thinking>answer"),
            Ok("answer")
        );
        assert_eq!(after_reasoning(" plain answer "), Ok("plain answer"));
        // only a leading block: one later in the text is the answer's own
        assert_eq!(
            after_reasoning("a <think>b</think>"),
            Ok("a <think>b</think>")
        );
    }

    #[test]
    fn a_block_that_never_closes_is_no_answer() {
        assert_eq!(
            after_reasoning("<think>\nI wonder"),
            Err(UnclosedReasoning { open: "<think>" })
        );
        // as a compaction reads its summary: no summary at all
        assert_eq!(after_reasoning("<think>\nI wonder").unwrap_or_default(), "");
        assert_eq!(
            after_reasoning("<think>\nI need to summarise.\n</think>\nSUMMARY"),
            Ok("SUMMARY")
        );
        // multibyte text right after the tag's length is no panic
        assert_eq!(after_reasoning("ééééé"), Ok("ééééé"));
    }
}

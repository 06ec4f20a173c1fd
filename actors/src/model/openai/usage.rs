//! The `usage` of an answer as servers send it. Usage is accounting
//! only, so an odd one never fails the answer: a missing or `null` count
//! is no usage (the engine then counts the tokens itself), a count sent
//! as a non-integer number (`12.0`, some servers' JSON writers) is
//! rounded, and a negative count, one past a billion or one that is no
//! number at all makes the usage count as missing; more cached tokens
//! than prompt tokens count as the prompt's. An odd count is noted for
//! one WARN per answer (`body.rs`).

use serde::Deserialize;
use serde_json::Value;

use crate::model::Usage;

/// A `usage` object; each count as the server wrote it.
#[derive(Debug, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<Value>,
    #[serde(default)]
    completion_tokens: Option<Value>,
    /// OpenAI, xAI, vLLM: `{"cached_tokens": N}`.
    #[serde(default)]
    prompt_tokens_details: Option<Value>,
    /// DeepSeek.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<Value>,
}

/// A usage read: the counts, when usable, and what was odd in them.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ReadUsage {
    /// The counts; `None` when `prompt_tokens` or `completion_tokens` is
    /// missing, `null` or unusable.
    pub(super) usage: Option<Usage>,
    /// The odd counts as sent (`prompt_tokens = 12.5`), for the log.
    pub(super) odd: Option<String>,
}

impl WireUsage {
    /// The usage and what was odd in it.
    pub(super) fn read(self) -> ReadUsage {
        let mut odd = Vec::new();
        let prompt = count("prompt_tokens", self.prompt_tokens.as_ref(), &mut odd);
        let completion = count(
            "completion_tokens",
            self.completion_tokens.as_ref(),
            &mut odd,
        );
        let details = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.get("cached_tokens"));
        let cached =
            count("prompt_tokens_details.cached_tokens", details, &mut odd).or_else(|| {
                count(
                    "prompt_cache_hit_tokens",
                    self.prompt_cache_hit_tokens.as_ref(),
                    &mut odd,
                )
            });
        let usage = match (prompt, completion) {
            (Some(prompt_tokens), Some(completion_tokens)) => Some(Usage {
                prompt_tokens,
                completion_tokens,
                // no more than the prompt it is part of (QA: 500 cached
                // of a 100-token prompt grew the bot's cached count by 500)
                cached_prompt_tokens: match cached {
                    Some(c) if c > prompt_tokens => {
                        odd.push(format!(
                            "cached tokens {c} > prompt_tokens {prompt_tokens} (counted as {prompt_tokens})"
                        ));
                        prompt_tokens
                    }
                    Some(c) => c,
                    None => 0,
                },
            }),
            (None, _) | (_, None) => None,
        };
        ReadUsage {
            usage,
            odd: (!odd.is_empty()).then(|| odd.join(", ")),
        }
    }
}

/// The largest count one answer is believed: a billion tokens, a hundred
/// times the largest context window offered. A larger one is a server's
/// bug (QA: `2**63` crashed the turn's budget check with an overflow, and
/// a count past `i64::MAX` went negative in the store, which turned the
/// bot's daily budget off).
const MAX_COUNT: u64 = 1_000_000_000;

/// A token count: a non-negative integer as it is, a non-negative
/// non-integer rounded; `None` for a missing or `null` one and for an
/// unusable one (negative, not a number, above [`MAX_COUNT`]), which is
/// noted in `odd`.
fn count(name: &str, value: Option<&Value>, odd: &mut Vec<String>) -> Option<u64> {
    let value = value?;
    if value.is_null() {
        return None;
    }
    if let Some(n) = value.as_u64().filter(|n| *n <= MAX_COUNT) {
        return Some(n);
    }
    odd.push(format!("{name} = {value}"));
    match value.as_f64() {
        // rounded below MAX_COUNT, far inside u64
        Some(f) if f.is_finite() && f >= 0.0 && f.round() <= MAX_COUNT as f64 => {
            Some(f.round() as u64)
        }
        Some(_) | None => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::ReadUsage;
    use super::Usage;
    use super::WireUsage;

    fn read(value: serde_json::Value) -> ReadUsage {
        serde_json::from_value::<WireUsage>(value).unwrap().read()
    }

    #[test]
    fn odd_counts_are_rounded_or_left_out_and_noted() {
        let usage = |p, c, cached| {
            Some(Usage {
                prompt_tokens: p,
                completion_tokens: c,
                cached_prompt_tokens: cached,
            })
        };
        assert_eq!(
            read(json!({"prompt_tokens": 12, "completion_tokens": 3,
                        "prompt_tokens_details": {"cached_tokens": 8}})),
            ReadUsage {
                usage: usage(12, 3, 8),
                odd: None
            }
        );
        let floats = read(json!({"prompt_tokens": 12.0, "completion_tokens": 2.6,
                                 "total_tokens": 15.0}));
        assert_eq!(floats.usage, usage(12, 3, 0));
        assert_eq!(
            floats.odd.as_deref(),
            Some("prompt_tokens = 12.0, completion_tokens = 2.6")
        );
        for huge in [
            json!(1e20),
            json!(u64::MAX),
            json!(1e308),
            json!(1_000_000_001_u64),
        ] {
            let read = read(json!({"prompt_tokens": 5, "completion_tokens": huge}));
            assert_eq!(read.usage, None, "{huge}");
            assert_eq!(read.odd, Some(format!("completion_tokens = {huge}")));
        }
        assert_eq!(
            read(json!({"prompt_tokens": 1_000_000_000_u64, "completion_tokens": 3})).usage,
            usage(1_000_000_000, 3, 0)
        );
        let negative = read(json!({"prompt_tokens": -1, "completion_tokens": 3}));
        assert_eq!(negative.usage, None);
        assert_eq!(negative.odd.as_deref(), Some("prompt_tokens = -1"));
        let text = read(json!({"prompt_tokens": "12", "completion_tokens": 3,
                               "prompt_cache_hit_tokens": -4}));
        assert_eq!(text.usage, None);
        assert_eq!(
            text.odd.as_deref(),
            Some("prompt_tokens = \"12\", prompt_cache_hit_tokens = -4")
        );
        // more cached than the prompt: as many as the prompt, noted
        let cached = read(json!({"prompt_tokens": 100, "completion_tokens": 3,
                                 "prompt_tokens_details": {"cached_tokens": 500}}));
        assert_eq!(cached.usage, usage(100, 3, 100));
        assert_eq!(
            cached.odd.as_deref(),
            Some("cached tokens 500 > prompt_tokens 100 (counted as 100)")
        );
        assert_eq!(read(json!({"prompt_tokens": null})), ReadUsage::default());
        assert_eq!(
            read(json!({"prompt_tokens": 1, "completion_tokens": 1,
                        "prompt_tokens_details": null})),
            ReadUsage {
                usage: usage(1, 1, 0),
                odd: None
            }
        );
    }
}

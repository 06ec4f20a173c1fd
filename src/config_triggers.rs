//! `[[bots.routines]]` and `[[bots.hooks]]`: the triggers that wake a bot
//! besides messages, and their validation.

use serde::Deserialize;

use super::BotConfig;
use super::ConfigError;
use super::LoadedFleet;

/// `[[bots.routines]]`: a prompt bound to a cron schedule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutineConfig {
    /// Name, unique per bot.
    pub name: String,
    /// Cron expression: 5 fields, or 6 with seconds first.
    pub cron: String,
    /// IANA time zone the expression is read in, e.g. `Asia/Shanghai`.
    pub timezone: String,
    /// What the bot is asked to do.
    pub prompt: String,
    /// Whether a run may end without SendMessage (default true).
    #[serde(default = "default_true")]
    pub silent_ok: bool,
    /// Slots missed while the host was down: `once` (default) or `skip`.
    #[serde(default)]
    pub catch_up: botfleet_memory::CatchUp,
}

impl RoutineConfig {
    /// The definition the scheduler takes.
    pub fn spec(&self) -> botfleet_actors::scheduler::RoutineSpec {
        botfleet_actors::scheduler::RoutineSpec {
            name: self.name.clone(),
            cron: self.cron.clone(),
            timezone: self.timezone.clone(),
            prompt: self.prompt.clone(),
            silent_ok: self.silent_ok,
            catch_up: self.catch_up,
        }
    }
}

fn default_true() -> bool {
    true
}

/// `[[bots.hooks]]`: a webhook `POST /v1/hooks/{bot}/{name}` signed with
/// HMAC-SHA256 of the body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// Name, unique per bot (in the URL).
    pub name: String,
    /// The signing secret, inline.
    #[serde(default)]
    pub secret: Option<String>,
    /// Or the name of an environment variable holding it.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// Largest payload accepted, in bytes, at most `host.max_body_bytes`
    /// (default: 64 KiB, or `host.max_body_bytes` when that is smaller).
    #[serde(default)]
    pub max_payload_bytes: Option<usize>,
    /// How far a timestamped signature's `X-Botfleet-Timestamp` may be
    /// from the host's clock, in seconds (default 300).
    #[serde(default)]
    pub timestamp_tolerance_s: Option<u64>,
    /// Whether only timestamped signatures are accepted (default false:
    /// body-only signatures, as GitHub sends them, are too).
    #[serde(default)]
    pub require_timestamp: bool,
    /// New deliveries admitted per minute, a minute's worth at once
    /// (default 120).
    #[serde(default)]
    pub deliveries_per_minute: Option<u32>,
}

/// Longest timestamp tolerance a hook may set: a day.
const MAX_TIMESTAMP_TOLERANCE_S: u64 = 86_400;

/// A hook's payload limit when fleet.toml sets none.
const DEFAULT_HOOK_PAYLOAD: usize = 64 * 1024;

impl HookConfig {
    /// The payload limit in force under a host body limit of `max_body`.
    pub fn payload_limit(&self, max_body: usize) -> usize {
        self.max_payload_bytes
            .unwrap_or(DEFAULT_HOOK_PAYLOAD.min(max_body))
    }

    /// Whether [`Self::payload_limit`] under `max_body` is the host's body
    /// limit: the hook sets none, and the host's is below the default (a
    /// payload over it is let in by raising the host's, which bounds the
    /// hook's own).
    pub fn payload_limited_by_host(&self, max_body: usize) -> bool {
        self.max_payload_bytes.is_none() && max_body <= DEFAULT_HOOK_PAYLOAD
    }
}

impl super::FleetFile {
    /// The `[[bots.hooks]]` entry `hook` of bot `bot`, if there is one.
    pub fn hook(&self, bot: &str, hook: &str) -> Option<&HookConfig> {
        self.bots
            .iter()
            .filter(|b| b.id == bot)
            .flat_map(|b| b.hooks.iter())
            .find(|h| h.name == hook)
    }
}

/// Shortest inline hook secret.
pub const MIN_HOOK_SECRET: usize = 16;

impl LoadedFleet {
    pub(super) fn validate_routines_and_hooks(
        &self,
        key: &str,
        b: &BotConfig,
    ) -> Result<(), ConfigError> {
        use botfleet_actors::scheduler::NAME_RULE;
        use botfleet_actors::scheduler::valid_name;
        for (j, r) in b.routines.iter().enumerate() {
            let key = format!("{key}.routines[{j}]");
            if let Err(e) = r.spec().validate() {
                return Err(self.invalid(format!("{key}.{}", e.field()), e.to_string()));
            }
            // one differing only in case as the API refuses it (QA: the
            // file took both)
            let earlier = b.routines[..j].iter().map(|o| o.name.as_str());
            if let Some(problem) = name_taken("routine", &r.name, earlier) {
                return Err(self.invalid(format!("{key}.name"), problem));
            }
        }
        for (j, h) in b.hooks.iter().enumerate() {
            let key = format!("{key}.hooks[{j}]");
            if !valid_name(&h.name) {
                return Err(self.invalid(
                    format!("{key}.name"),
                    format!("hook name {:?} is not valid: {NAME_RULE}", h.name),
                ));
            }
            // as routines (QA: `gh` and `GH` were two hooks, with two URLs
            // and sessions people read as one name)
            let earlier = b.hooks[..j].iter().map(|o| o.name.as_str());
            if let Some(problem) = name_taken("hook", &h.name, earlier) {
                return Err(self.invalid(format!("{key}.name"), problem));
            }
            match (&h.secret, &h.secret_env) {
                (Some(_), Some(_)) => {
                    return Err(self.invalid(
                        format!("{key}.secret"),
                        "give either `secret` or `secret_env`, not both",
                    ));
                }
                (None, None) => {
                    return Err(self.invalid(
                        format!("{key}.secret"),
                        "missing: give `secret = \"...\"` or `secret_env = \"ENV_VAR\"`",
                    ));
                }
                // as for a `secret_env` value: senders sign with the secret
                // alone, so a space pasted around it fails every delivery
                (Some(s), None) if s.trim() != s => {
                    return Err(self.invalid(
                        format!("{key}.secret"),
                        "the secret starts or ends with whitespace; senders sign with the \
                         secret alone, so every delivery would fail its signature: remove the \
                         whitespace",
                    ));
                }
                (Some(s), None) if s.chars().count() < MIN_HOOK_SECRET => {
                    return Err(self.invalid(
                        format!("{key}.secret"),
                        format!(
                            "the secret is too short; use at least {MIN_HOOK_SECRET} characters"
                        ),
                    ));
                }
                _ => {}
            }
            if h.timestamp_tolerance_s
                .is_some_and(|t| t == 0 || t > MAX_TIMESTAMP_TOLERANCE_S)
            {
                return Err(self.invalid(
                    format!("{key}.timestamp_tolerance_s"),
                    format!(
                        "must be between 1 and {MAX_TIMESTAMP_TOLERANCE_S} seconds (default 300)"
                    ),
                ));
            }
            if h.deliveries_per_minute == Some(0) {
                return Err(self.invalid(
                    format!("{key}.deliveries_per_minute"),
                    "must be at least 1 (default 120); a hook that should take nothing is \
                     better removed",
                ));
            }
            let limit = h.payload_limit(self.file.host.max_body_bytes);
            if limit == 0 || limit > self.file.host.max_body_bytes {
                return Err(self.invalid(
                    format!("{key}.max_payload_bytes"),
                    format!(
                        "must be between 1 and host.max_body_bytes ({})",
                        self.file.host.max_body_bytes
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Why `name`, of a bot's `what` (`routine`, `hook`), cannot follow the
/// bot's `earlier` ones: the same name, or one differing only in case
/// (two names people read as one); `None` when it may.
fn name_taken<'a>(
    what: &str,
    name: &str,
    mut earlier: impl Iterator<Item = &'a str>,
) -> Option<String> {
    let other = earlier.find(|o| o.eq_ignore_ascii_case(name))?;
    Some(if other == name {
        format!("{what} {name:?} is defined twice for this bot")
    } else {
        format!(
            "{what} {name:?} differs from this bot's {what} {other:?} only in case: two names \
             people read as one; rename one of them"
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::LoadedFleet;
    use super::super::tests::ISSUE_EXAMPLE;
    use super::super::tests::err;

    fn hooked(lines: &str) -> String {
        format!(
            "{ISSUE_EXAMPLE}[[bots.hooks]]\nname = \"gh\"\nsecret = \"a-long-enough-hook-secret\"\n{lines}"
        )
    }

    /// The replay and flood settings of a hook: read, found by bot and
    /// name, and refused out of range naming the key.
    #[test]
    fn a_hooks_timestamp_and_rate_settings() {
        let text = hooked(
            "timestamp_tolerance_s = 60\nrequire_timestamp = true\ndeliveries_per_minute = 5\n",
        );
        let f = LoadedFleet::parse(&text, "fleet.toml", None).unwrap();
        let h = f.file.hook("researcher", "gh").unwrap();
        assert_eq!(
            (
                h.timestamp_tolerance_s,
                h.require_timestamp,
                h.deliveries_per_minute
            ),
            (Some(60), true, Some(5))
        );
        assert!(f.file.hook("researcher", "other").is_none());
        let plain = LoadedFleet::parse(&hooked(""), "fleet.toml", None).unwrap();
        let h = plain.file.hook("researcher", "gh").unwrap();
        assert_eq!(
            (
                h.timestamp_tolerance_s,
                h.require_timestamp,
                h.deliveries_per_minute
            ),
            (None, false, None)
        );
        for (line, key) in [
            (
                "timestamp_tolerance_s = 0",
                "bots[0].hooks[0].timestamp_tolerance_s",
            ),
            (
                "timestamp_tolerance_s = 86401",
                "bots[0].hooks[0].timestamp_tolerance_s",
            ),
            (
                "deliveries_per_minute = 0",
                "bots[0].hooks[0].deliveries_per_minute",
            ),
        ] {
            let e = err(&hooked(&format!("{line}\n")));
            assert!(e.contains(key), "{line}: {e}");
        }
        // two routines whose names differ only in case (QA: taken)
        let twins = format!(
            "{ISSUE_EXAMPLE}{}",
            ["tick", "TICK"]
                .map(|n| format!(
                    "[[bots.routines]]\nname = \"{n}\"\ncron = \"0 9 * * *\"\ntimezone = \"UTC\"\nprompt = \"p\"\n"
                ))
                .concat()
        );
        let e = err(&twins);
        assert!(
            e.contains("bots[0].routines[1].name")
                && e.contains(
                    "routine \"TICK\" differs from this bot's routine \"tick\" only in case"
                ),
            "{e}"
        );
        // two hooks whose names differ only in case, as routines (QA:
        // both taken, two URLs)
        let twins = format!(
            "{ISSUE_EXAMPLE}{}",
            [("gh", "0123456789abcdef-1"), ("GH", "0123456789abcdef-2")]
                .map(|(n, secret)| format!(
                    "[[bots.hooks]]\nname = \"{n}\"\nsecret = \"{secret}\"\n"
                ))
                .concat()
        );
        let e = err(&twins);
        assert!(
            e.contains("bots[0].hooks[1].name")
                && e.contains("hook \"GH\" differs from this bot's hook \"gh\" only in case"),
            "{e}"
        );
        // a negative rate names the range, not the Rust type (QA: it
        // said "expected u32")
        let e = err(&hooked("deliveries_per_minute = -1\n"));
        assert!(
            e.contains("bots[0].hooks[0].deliveries_per_minute")
                && e.contains("`-1`, expected a whole number from 0 to 4294967295")
                && !e.contains("u32"),
            "{e}"
        );
    }
}

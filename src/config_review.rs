//! `[review]`: auto-review of side effects (docs/security.md).
//!
//! ```toml
//! [review]
//! shell = "enforce"          # off | shadow | enforce (every surface defaults to enforce)
//! file_write = "enforce"     # Write/Edit outside notes/<bot id>/
//! extension = "enforce"      # MCP and script tools
//! subagent = "enforce"       # Task
//! delivery = "enforce"       # SendToAgent, messages in rooms shared with other users
//! automation = "enforce"     # CreateAgent, UpdateAgent
//! allow_hosts = ["github.com", "*.corp.example"]   # may receive data without asking
//! reviewer = "local"         # optional: a provider that reviews what the rules allow
//! reviewer_timeout_s = 30
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use botfleet_actors::safety::HostAllowlist;
use botfleet_actors::safety::ReviewConfig;
use botfleet_actors::safety::ReviewMode;
use botfleet_actors::safety::ReviewModes;
use botfleet_actors::safety::host_pattern_port;
use botfleet_actors::safety::valid_host_pattern;
use serde::Deserialize;

use super::ProviderConfig;

/// `[review]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewFileConfig {
    /// Shell commands.
    #[serde(default)]
    pub shell: ReviewMode,
    /// Write/Edit outside the bot's notes area.
    #[serde(default)]
    pub file_write: ReviewMode,
    /// MCP and script tools.
    #[serde(default)]
    pub extension: ReviewMode,
    /// Starting subagents.
    #[serde(default)]
    pub subagent: ReviewMode,
    /// Delivery to third parties.
    #[serde(default)]
    pub delivery: ReviewMode,
    /// Creating and changing agents and automations.
    #[serde(default)]
    pub automation: ReviewMode,
    /// Hosts that may receive data without asking (`host` or `*.domain`).
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// A provider that reviews what the rules allow.
    #[serde(default)]
    pub reviewer: Option<String>,
    /// Seconds the reviewer may take (default 30); slower counts as "ask".
    #[serde(default)]
    pub reviewer_timeout_s: Option<u64>,
}

impl ReviewFileConfig {
    /// The runtime's review settings.
    pub fn to_config(&self) -> ReviewConfig {
        let defaults = ReviewConfig::default();
        ReviewConfig {
            modes: ReviewModes {
                shell: self.shell,
                file_write: self.file_write,
                extension: self.extension,
                subagent: self.subagent,
                delivery: self.delivery,
                automation: self.automation,
            },
            allow_hosts: HostAllowlist::new(&self.allow_hosts),
            reviewer: self.reviewer.clone(),
            reviewer_timeout: self
                .reviewer_timeout_s
                .map(Duration::from_secs)
                .unwrap_or(defaults.reviewer_timeout),
            ..defaults
        }
    }

    /// Checks the section: `(key, message)` of the first problem.
    pub(crate) fn validate(
        &self,
        providers: &BTreeMap<String, ProviderConfig>,
    ) -> Result<(), (String, String)> {
        for (i, host) in self.allow_hosts.iter().enumerate() {
            if let Some((name, port)) = host_pattern_port(host.trim()) {
                return Err((
                    format!("review.allow_hosts[{i}]"),
                    format!(
                        "{host:?} has a port (:{port}); hosts are compared without their port, so it could never match: write {name:?} (it allows every port)"
                    ),
                ));
            }
            if !valid_host_pattern(host.trim()) {
                return Err((
                    format!("review.allow_hosts[{i}]"),
                    format!(
                        "{host:?} is not a host pattern; expected a host name such as \"github.com\", \"*.example.com\" or an IP address (IPv6 as \"[::1]\"), with no scheme, path or port"
                    ),
                ));
            }
        }
        if let Some(name) = &self.reviewer
            && !providers.contains_key(name)
        {
            let defined: Vec<&str> = providers.keys().map(String::as_str).collect();
            return Err((
                "review.reviewer".into(),
                format!(
                    "provider {name:?} is not defined; defined: {}",
                    if defined.is_empty() {
                        "(none)".to_owned()
                    } else {
                        defined.join(", ")
                    }
                ),
            ));
        }
        if self.reviewer_timeout_s == Some(0) {
            return Err((
                "review.reviewer_timeout_s".into(),
                "must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::config::LoadedFleet;

    const BASE: &str = "[[users]]\nid = \"alice\"\ntoken = \"alice-secret\"\n[providers.s]\nkind = \"scripted\"\nscript = \"s.toml\"\n[[bots]]\nid = \"b\"\nname = \"B\"\nowner = \"alice\"\nprovider = \"s\"\ntools = [\"SendMessage\"]\n";

    fn load(review: &str) -> Result<LoadedFleet, String> {
        LoadedFleet::parse(&format!("{BASE}[review]\n{review}"), "fleet.toml", None)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_enforce_everywhere() {
        let f = LoadedFleet::parse(BASE, "fleet.toml", None).unwrap();
        assert_eq!(f.file.review.to_config(), ReviewConfig::default());
        assert_eq!(
            ReviewConfig::default().modes,
            ReviewModes::all(ReviewMode::Enforce)
        );
    }

    #[test]
    fn modes_hosts_and_reviewer() {
        let f = load("shell = \"shadow\"\ndelivery = \"off\"\nallow_hosts = [\"github.com\", \"*.corp.example\"]\nreviewer = \"s\"\nreviewer_timeout_s = 5\n").unwrap();
        let c = f.file.review.to_config();
        assert_eq!(c.modes.shell, ReviewMode::Shadow);
        assert_eq!(c.modes.delivery, ReviewMode::Off);
        assert_eq!(c.modes.file_write, ReviewMode::Enforce);
        assert!(c.allow_hosts.allows("x.corp.example"));
        assert_eq!(c.reviewer.as_deref(), Some("s"));
        assert_eq!(c.reviewer_timeout, Duration::from_secs(5));
    }

    #[test]
    fn errors_name_the_key() {
        let e = load("shell = \"enforced\"\n").unwrap_err();
        assert!(e.contains("shell") && e.contains("enforce"), "{e}");
        let e = load("allow_hosts = [\"https://github.com\"]\n").unwrap_err();
        assert!(
            e.contains("review.allow_hosts[0]") && e.contains("not a host pattern"),
            "{e}"
        );
        // hosts are compared without their port: one with a port never matches
        for (pattern, name) in [("github.com:443", "github.com"), ("[::1]:8080", "[::1]")] {
            let e = load(&format!("allow_hosts = [\"x.org\", {pattern:?}]\n")).unwrap_err();
            assert!(
                e.contains("review.allow_hosts[1]")
                    && e.contains("has a port")
                    && e.contains(&format!("write {name:?}")),
                "{e}"
            );
        }
        let f = load("allow_hosts = [\"[::1]\", \"[2001:db8::1]\", \"10.0.0.1\"]\n").unwrap();
        assert!(
            f.file
                .review
                .to_config()
                .allow_hosts
                .allows("[2001:db8::1]")
        );
        let e = load("reviewer = \"nope\"\n").unwrap_err();
        assert!(
            e.contains("review.reviewer") && e.contains("defined: s"),
            "{e}"
        );
        let e = load("mode = \"off\"\n").unwrap_err();
        assert!(e.contains("unknown field `mode`"), "{e}");
    }
}

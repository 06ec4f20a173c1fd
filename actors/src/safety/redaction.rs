//! What may be logged or stored: classification × privacy mode × purpose.
//!
//! Every piece of data that leaves the turn for storage carries a
//! [`Classification`]. The user's [`PrivacyMode`] and the [`Purpose`] of the
//! write decide, through [`decide`], whether the value is kept as is or
//! replaced by a [`RedactedForm`]. The vocabulary follows seed 002 (the
//! `allowedPurpose()` matrix of the system botfleet is modelled on).
//!
//! # The matrix
//!
//! Modes run from strictest to most permissive:
//! `Unspecified` (no choice made: treated like `NoStorage`, failing closed),
//! `NoStorage`, `NoTraining`, `UsageDataTrainingAllowed`,
//! `UsageCodebaseTrainingAllowed`. Key: **A** allow, **D** digest,
//! **B** basename, **P** placeholder.
//!
//! | class | purpose | Unspec | NoStorage | NoTraining | UsageData | Codebase |
//! |---|---|---|---|---|---|---|
//! | safe | any | A | A | A | A | A |
//! | credentials | any | P | P | P | P | P |
//! | unspecified | any | P | P | P | P | P |
//! | code | logging | D | D | D | D | A |
//! | code | usage | D | D | A | A | A |
//! | code | training | P | P | P | P | A |
//! | path | logging | B | B | A | A | A |
//! | path | usage | B | B | A | A | A |
//! | path | training | P | P | P | P | A |
//! | provider info | logging | A | A | A | A | A |
//! | provider info | usage | A | A | A | A | A |
//! | provider info | training | P | P | P | A | A |
//!
//! Invariants (tested): safe data is always allowed; credentials and
//! unclassified data are never stored in any form but a placeholder (no
//! digest: a hash of a short secret can be brute-forced); training sees
//! nothing under `NoTraining` or stricter; a more permissive mode never
//! reveals less. The seed's `UNSAFE_ALWAYS_ALLOWED` escape hatch is left out
//! on purpose: values that stay inside the process do not go through this
//! matrix, and nothing that is stored may bypass it.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

use sha2::Digest as _;
use sha2::Sha256;

/// How sensitive a piece of data is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Classification {
    /// Host-generated, non-identifying data (counts, durations, enum names).
    Safe,
    /// Source code, file contents, tool output derived from them.
    Code,
    /// Keys, tokens, passwords: never stored.
    Credentials,
    /// File system paths.
    Path,
    /// Which provider and model served a request, request ids.
    ProviderInfo,
    /// Not classified: treated like credentials.
    Unspecified,
}

impl Classification {
    /// Every classification, for tables and tests.
    pub const ALL: [Classification; 6] = [
        Classification::Safe,
        Classification::Code,
        Classification::Credentials,
        Classification::Path,
        Classification::ProviderInfo,
        Classification::Unspecified,
    ];

    /// Short lower-case name, used in placeholders (`[credentials]`).
    pub const fn label(self) -> &'static str {
        match self {
            Classification::Safe => "safe",
            Classification::Code => "code",
            Classification::Credentials => "credentials",
            Classification::Path => "path",
            Classification::ProviderInfo => "provider-info",
            Classification::Unspecified => "unspecified",
        }
    }
}

/// The user's consent to what their data may be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrivacyMode {
    /// No choice recorded; handled like [`PrivacyMode::NoStorage`].
    Unspecified,
    /// Nothing beyond safe metadata is stored.
    NoStorage,
    /// Stored for operation and usage accounting, never used for training.
    NoTraining,
    /// Usage data (not code or paths) may be used for training.
    UsageDataTrainingAllowed,
    /// Usage data and the codebase may be used for training.
    UsageCodebaseTrainingAllowed,
}

impl PrivacyMode {
    /// Every mode, strictest first.
    pub const ALL: [PrivacyMode; 5] = [
        PrivacyMode::Unspecified,
        PrivacyMode::NoStorage,
        PrivacyMode::NoTraining,
        PrivacyMode::UsageDataTrainingAllowed,
        PrivacyMode::UsageCodebaseTrainingAllowed,
    ];
}

/// What a stored value will be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// Operational logs and traces.
    Logging,
    /// Usage accounting (tokens, costs, tool statistics).
    Usage,
    /// Data sets for training models.
    Training,
}

impl Purpose {
    /// Every purpose.
    pub const ALL: [Purpose; 3] = [Purpose::Logging, Purpose::Usage, Purpose::Training];
}

/// What is stored instead of a value that may not be stored as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RedactedForm {
    /// Only the classification: `[credentials]`.
    Placeholder,
    /// The classification, a 48-bit SHA-256 prefix and the length, so equal
    /// values can be correlated: `[code sha256:0123456789ab len=42]`.
    Digest,
    /// The last path component: `…/main.rs`.
    Basename,
}

/// The verdict of [`decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Store the value as is.
    Allow,
    /// Store `form` instead of the value.
    Redact {
        /// The replacement.
        form: RedactedForm,
    },
}

const ALLOW: Decision = Decision::Allow;
const PLACEHOLDER: Decision = Decision::Redact {
    form: RedactedForm::Placeholder,
};
const DIGEST: Decision = Decision::Redact {
    form: RedactedForm::Digest,
};
const BASENAME: Decision = Decision::Redact {
    form: RedactedForm::Basename,
};

/// Decides whether data of `class` may be stored for `purpose` under `mode`;
/// see the module docs for the table.
pub const fn decide(mode: PrivacyMode, purpose: Purpose, class: Classification) -> Decision {
    use PrivacyMode::NoStorage;
    use PrivacyMode::NoTraining;
    use PrivacyMode::Unspecified;
    use PrivacyMode::UsageCodebaseTrainingAllowed as Codebase;
    use PrivacyMode::UsageDataTrainingAllowed as UsageData;
    match class {
        Classification::Safe => ALLOW,
        Classification::Credentials | Classification::Unspecified => PLACEHOLDER,
        Classification::Code => match (purpose, mode) {
            (Purpose::Logging, Unspecified | NoStorage | NoTraining | UsageData) => DIGEST,
            (Purpose::Logging, Codebase) => ALLOW,
            (Purpose::Usage, Unspecified | NoStorage) => DIGEST,
            (Purpose::Usage, NoTraining | UsageData | Codebase) => ALLOW,
            (Purpose::Training, Unspecified | NoStorage | NoTraining | UsageData) => PLACEHOLDER,
            (Purpose::Training, Codebase) => ALLOW,
        },
        Classification::Path => match (purpose, mode) {
            (Purpose::Logging | Purpose::Usage, Unspecified | NoStorage) => BASENAME,
            (Purpose::Logging | Purpose::Usage, NoTraining | UsageData | Codebase) => ALLOW,
            (Purpose::Training, Unspecified | NoStorage | NoTraining | UsageData) => PLACEHOLDER,
            (Purpose::Training, Codebase) => ALLOW,
        },
        Classification::ProviderInfo => match (purpose, mode) {
            (
                Purpose::Logging | Purpose::Usage,
                Unspecified | NoStorage | NoTraining | UsageData | Codebase,
            ) => ALLOW,
            (Purpose::Training, Unspecified | NoStorage | NoTraining) => PLACEHOLDER,
            (Purpose::Training, UsageData | Codebase) => ALLOW,
        },
    }
}

impl Decision {
    /// The text to store for `value` of `class` under this decision.
    pub fn apply<'a>(self, class: Classification, value: &'a str) -> Cow<'a, str> {
        match self {
            Decision::Allow => Cow::Borrowed(value),
            Decision::Redact { form } => Cow::Owned(form.render(class, value)),
        }
    }
}

impl RedactedForm {
    /// What is stored in place of `value` of `class`.
    pub fn render(self, class: Classification, value: &str) -> String {
        match self {
            RedactedForm::Placeholder => format!("[{}]", class.label()),
            RedactedForm::Digest => {
                let digest = Sha256::digest(value.as_bytes());
                format!(
                    "[{} sha256:{} len={}]",
                    class.label(),
                    hex::encode(&digest[..6]),
                    value.len()
                )
            }
            RedactedForm::Basename => match Path::new(value).file_name() {
                Some(name) if name.len() == value.len() => name.to_string_lossy().into_owned(),
                Some(name) => format!("…/{}", name.to_string_lossy()),
                None => format!("[{}]", class.label()),
            },
        }
    }
}

/// A value together with its classification.
///
/// `Debug` shows what the strictest setting would log, so a stray `{:?}`
/// cannot leak it; [`Classified::render`] gives the form for a real write.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Classified<T> {
    /// How sensitive `value` is.
    pub class: Classification,
    /// The value itself.
    pub value: T,
}

impl<T: AsRef<str>> Classified<T> {
    /// Classifies `value`.
    pub fn new(class: Classification, value: T) -> Self {
        Self { class, value }
    }

    /// The text to store for `purpose` under `mode`.
    pub fn render(&self, mode: PrivacyMode, purpose: Purpose) -> Cow<'_, str> {
        decide(mode, purpose, self.class).apply(self.class, self.value.as_ref())
    }
}

impl<T: AsRef<str>> fmt::Debug for Classified<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(PrivacyMode::Unspecified, Purpose::Logging))
    }
}

#[cfg(test)]
#[path = "redaction_tests.rs"]
mod tests;

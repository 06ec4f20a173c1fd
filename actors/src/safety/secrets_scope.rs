//! Narrower redactors for bots whose commands are isolated (vault.rs):
//! scrubbing a value a bot cannot see only lets it test guesses of it.

use std::sync::Arc;

use super::Redactor;
use super::Secret;
use super::forms;

impl Redactor {
    /// This redactor, scrubbing `owner`'s values of `other`'s shared set
    /// too, as they stand at each scrub, and no one else's: for a bot of
    /// `owner` whose commands cannot see other commands' arguments, where
    /// scrubbing other people's values would only let it test guesses of
    /// them (vault.rs). Unchanged when `other` has no shared set.
    #[must_use]
    pub fn also_scrubbing_of(mut self, other: &Redactor, owner: &str) -> Self {
        if let Some(shared) = &other.shared {
            self.shared = Some(Arc::clone(shared));
            self.shared_owner = Some(owner.into());
        }
        self
    }

    /// This redactor, also hiding `values` (each as is, JSON-escaped and
    /// percent-encoded) from what a model provider's errors show
    /// ([`Redactor::expose_patterns`]) but not scrubbing them from tool
    /// output ([`Redactor::scrub`]): the host's credentials, for a bot
    /// whose commands cannot read them, which a scrub of its output would
    /// only let test guesses of (vault.rs); a server's error may still
    /// quote them.
    #[must_use]
    pub fn also_hiding_from_model_errors<'v>(
        mut self,
        values: impl IntoIterator<Item = &'v str>,
    ) -> Self {
        for value in values.into_iter().filter(|v| !v.is_empty()) {
            for form in forms(value) {
                let known = self
                    .patterns
                    .iter()
                    .chain(&self.model_only)
                    .any(|p| p.expose() == form);
                if !known {
                    self.model_only.push(Secret::new(form));
                }
            }
        }
        self
    }
}

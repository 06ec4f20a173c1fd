//! Every person's secrets, scrubbed from every bot's tool output.
//!
//! A person's secret (stored through the API) reaches only their own
//! bots' commands, as an environment variable; but a command that puts it
//! in an argument (`curl -H "Authorization: Bearer $TOKEN"`) shows it to
//! every other command on the machine (`/proc/<pid>/cmdline`, `ps`), so
//! another person's bot could print it. A [`SharedSecrets`] set holds the
//! values of every person's secrets the vault has read (it adds a
//! person's values each time it reads them for one of their bots' turns,
//! before that turn's commands are given any) and every redactor made
//! with it ([`Redactor::also_scrubbing`](super::Redactor::also_scrubbing))
//! scrubs them as the set stands when it scrubs, however long ago the
//! redactor was made. A value leaves the set when its person's values are
//! read again without it (deleted through the API).
//!
//! The set is searched by one automaton per [`CHUNK_BYTES`] of its
//! patterns (a regex of their escaped forms, longest first, which the
//! regex crate runs as a lazy DFA behind a literal prefilter, or as
//! Aho-Corasick for thousands of them), rebuilt when the set changes: a
//! scan of a text costs about the same however many values there are.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use parking_lot::Mutex;
use parking_lot::RwLock;
use regex::bytes::Regex;
use regex::bytes::RegexBuilder;

use super::Secret;
use super::forms;

/// The most pattern bytes one regex holds; a larger set is searched by
/// several (each a pass over the text).
const CHUNK_BYTES: usize = 256 * 1024;

/// The values of every person's secrets; see the module docs.
#[derive(Default)]
pub(crate) struct SharedSecrets {
    /// Each person's values (sorted, each once), by the person's id.
    by_owner: Mutex<HashMap<String, Vec<Secret>>>,
    /// The searcher over every value in `by_owner`, replaced whole when
    /// they change.
    current: RwLock<Arc<Matcher>>,
    /// A searcher over each person's values alone, replaced when theirs
    /// change: what a bot of theirs scrubs where commands cannot see each
    /// other's arguments (`Redactor::also_scrubbing_of`).
    of_owner: RwLock<HashMap<String, Arc<Matcher>>>,
}

impl std::fmt::Debug for SharedSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSecrets")
            .field("patterns", &self.current().patterns.len())
            .finish()
    }
}

impl SharedSecrets {
    /// Makes `values` the values of `owner` (none: `owner` has none now);
    /// true when that changed the set, whose searcher is then rebuilt.
    pub(crate) fn set_owner<'v>(
        &self,
        owner: &str,
        values: impl IntoIterator<Item = &'v str>,
    ) -> bool {
        let mut new: Vec<&str> = values.into_iter().filter(|v| !v.is_empty()).collect();
        new.sort_unstable();
        new.dedup();
        let mut by_owner = self.by_owner.lock();
        let old: Vec<&str> = by_owner
            .get(owner)
            .map(|v| v.iter().map(Secret::expose).collect())
            .unwrap_or_default();
        if old == new {
            return false;
        }
        // only for a change: it was built at every turn of a bot with a
        // secret, under the lock every user's turn takes (QA)
        let own = Matcher::new(new.iter().copied());
        if new.is_empty() {
            by_owner.remove(owner);
        } else {
            let values = new.into_iter().map(Secret::new).collect();
            by_owner.insert(owner.to_owned(), values);
        }
        // built under the lock: two changes at once are searched in the
        // order they were made, the later one last
        let matcher = Matcher::new(by_owner.values().flatten().map(Secret::expose));
        *self.current.write() = Arc::new(matcher);
        let mut of_owner = self.of_owner.write();
        if own.is_empty() {
            of_owner.remove(owner);
        } else {
            of_owner.insert(owner.to_owned(), Arc::new(own));
        }
        true
    }

    /// The searcher as the set stands.
    pub(crate) fn current(&self) -> Arc<Matcher> {
        self.current.read().clone()
    }

    /// The searcher over `owner`'s values alone, as they stand.
    pub(crate) fn current_of(&self, owner: &str) -> Arc<Matcher> {
        self.of_owner.read().get(owner).cloned().unwrap_or_default()
    }
}

/// A search for a fixed set of secrets.
#[derive(Default)]
pub(crate) struct Matcher {
    /// Each value as is, JSON-escaped and percent-encoded, each once.
    patterns: Vec<Secret>,
    /// The searchers, each over a part of `patterns`.
    searchers: Vec<Searcher>,
    /// Bytes of the longest pattern (0 without any).
    max_len: usize,
}

/// One pass over a text.
enum Searcher {
    /// An alternation of the patterns' escaped forms, longest first.
    Regex(Regex),
    /// The patterns one by one, where their regex could not be built
    /// (too large): slower, same answer.
    Plain(Vec<Secret>),
}

impl Matcher {
    fn new<'v>(values: impl IntoIterator<Item = &'v str>) -> Self {
        let mut patterns: Vec<Secret> = Vec::new();
        for value in values {
            for form in forms(value) {
                patterns.push(Secret::new(form));
            }
        }
        // longest first: at a place where several start, the alternation
        // reports the first that matches, which then covers the others
        patterns.sort_unstable_by(|a, b| {
            let (a, b) = (a.expose(), b.expose());
            b.len().cmp(&a.len()).then_with(|| a.cmp(b))
        });
        patterns.dedup_by(|a, b| a.expose() == b.expose());
        let max_len = patterns.first().map_or(0, |p| p.expose().len());
        let mut searchers = Vec::new();
        let mut chunk: Vec<&Secret> = Vec::new();
        let mut bytes = 0;
        for pattern in &patterns {
            if !chunk.is_empty() && bytes + pattern.expose().len() > CHUNK_BYTES {
                searchers.push(Searcher::new(&chunk));
                chunk.clear();
                bytes = 0;
            }
            bytes += pattern.expose().len();
            chunk.push(pattern);
        }
        if !chunk.is_empty() {
            searchers.push(Searcher::new(&chunk));
        }
        Self {
            patterns,
            searchers,
            max_len,
        }
    }

    /// The texts it finds. Every call site is a place where they may leak.
    pub(crate) fn patterns(&self) -> impl Iterator<Item = &str> {
        self.patterns.iter().map(Secret::expose)
    }

    /// Bytes of the longest text it finds (0 without any).
    pub(crate) fn longest(&self) -> usize {
        self.max_len
    }

    /// True when it finds nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Byte ranges in `hay` of the occurrences of its texts, by start,
    /// the longest at each start (which holds every shorter one there):
    /// their union is that of every occurrence, overlapping or not.
    pub(crate) fn occurrences(&self, hay: &[u8]) -> Vec<Range<usize>> {
        let mut found = Vec::new();
        for searcher in &self.searchers {
            searcher.occurrences(hay, &mut found);
        }
        found.sort_unstable_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
        found.dedup_by_key(|r| r.start);
        found
    }
}

impl Searcher {
    fn new(patterns: &[&Secret]) -> Self {
        let alternation = patterns
            .iter()
            .map(|p| regex::escape(p.expose()))
            .collect::<Vec<_>>()
            .join("|");
        let built = RegexBuilder::new(&alternation)
            // escaped literals hold no class, case or look-around that
            // Unicode mode would change; the limits fit a full chunk
            .size_limit(CHUNK_BYTES * 64)
            .dfa_size_limit(CHUNK_BYTES * 32)
            .build();
        match built {
            Ok(regex) => Searcher::Regex(regex),
            Err(error) => {
                tracing::warn!(
                    patterns = patterns.len(),
                    %error,
                    "the secrets' search pattern could not be built; they are searched one by one"
                );
                Searcher::Plain(patterns.iter().map(|p| Secret::new(p.expose())).collect())
            }
        }
    }

    fn occurrences(&self, hay: &[u8], found: &mut Vec<Range<usize>>) {
        match self {
            Searcher::Regex(regex) => {
                let mut from = 0;
                while from < hay.len() {
                    let Some(m) = regex.find_at(hay, from) else {
                        break;
                    };
                    found.push(m.range());
                    // the next start may be inside this occurrence
                    from = m.start() + 1;
                }
            }
            Searcher::Plain(patterns) => {
                for pattern in patterns {
                    let pattern = pattern.expose().as_bytes();
                    if pattern.is_empty() {
                        // never made (`set_owner` skips empty values)
                        continue;
                    }
                    for (at, window) in hay.windows(pattern.len()).enumerate() {
                        if window == pattern {
                            found.push(at..at + pattern.len());
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "secrets_shared_tests.rs"]
mod tests;

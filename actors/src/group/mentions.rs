//! Mentions in a user's room message: who is addressed.
//!
//! `@Name` addresses a member whose bot id or display name is `Name`
//! (case-insensitive; a display name with spaces matches without them).
//! `@everyone`, or no mention at all, addresses every member. A mention
//! that matches nobody is reported back, never silently dropped; if every
//! mention is unknown, nobody runs (the user meant someone specific).
//!
//! A mention starts at `@` at the start of the text or after a character
//! that cannot be part of a name (so `alice@example.com` is no mention),
//! and takes letters, digits, `.`, `_` and `-`; trailing `.`, `_` and `-`
//! are sentence punctuation, not part of the name.

use std::collections::HashMap;

/// The names a member answers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberName {
    /// Bot id.
    pub id: String,
    /// Display name.
    pub name: String,
}

impl MemberName {
    /// A mention both `self` and `other` would answer to, if any (a room
    /// with both would wake the two for it).
    pub fn clash(&self, other: &MemberName) -> Option<String> {
        let squeezed =
            |n: &MemberName| -> String { n.name.chars().filter(|c| !c.is_whitespace()).collect() };
        [
            self.id.clone(),
            squeezed(self),
            other.id.clone(),
            squeezed(other),
        ]
        .into_iter()
        .find(|token| !token.is_empty() && self.answers_to(token) && other.answers_to(token))
    }

    fn answers_to(&self, token: &str) -> bool {
        let squeezed: String = self.name.chars().filter(|c| !c.is_whitespace()).collect();
        token.eq_ignore_ascii_case(&self.id)
            || token.to_lowercase() == self.name.to_lowercase()
            || token.to_lowercase() == squeezed.to_lowercase()
    }
}

/// The words `m` answers to, lowercased and each once: its id, its name,
/// and its name without whitespace (empty ones left out).
///
/// Two members that [`MemberName::clash`] share one of them: each clause
/// of `answers_to(token)` (the id ignoring ASCII case, the name or the
/// squeezed name ignoring case) implies that `token.to_lowercase()` is one
/// of these words, so a token both answer to is, lowercased, in both sets.
/// The converse need not hold; [`NameIndex`] confirms with `clash`.
fn mention_keys(m: &MemberName) -> Vec<String> {
    let squeezed: String = m.name.chars().filter(|c| !c.is_whitespace()).collect();
    let mut keys = vec![
        m.id.to_lowercase(),
        m.name.to_lowercase(),
        squeezed.to_lowercase(),
    ];
    keys.retain(|k| !k.is_empty());
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Members indexed by the words they answer to, to find which of many
/// members a new one clashes with without comparing it to each: checking
/// thousands of bots pairwise took minutes.
#[derive(Debug, Clone)]
pub struct NameIndex<T> {
    /// The members, in the order they were added, each with its tag.
    entries: Vec<(T, MemberName)>,
    /// Positions in `entries` of the members answering to each word of
    /// [`mention_keys`], ascending.
    by_key: HashMap<String, Vec<usize>>,
}

impl<T> Default for NameIndex<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            by_key: HashMap::new(),
        }
    }
}

impl<T> NameIndex<T> {
    /// Adds `name`, tagged `tag` (say, where it was listed).
    pub fn insert(&mut self, tag: T, name: MemberName) {
        let at = self.entries.len();
        for key in mention_keys(&name) {
            self.by_key.entry(key).or_default().push(at);
        }
        self.entries.push((tag, name));
    }

    /// The first member added that clashes with `name`, with its tag and
    /// the mention both answer to: what asking each member in turn
    /// `member.clash(name)` finds, but looking only at members that share
    /// one of `name`'s words.
    pub fn first_clash(&self, name: &MemberName) -> Option<(&T, &MemberName, String)> {
        let mut candidates: Vec<usize> = mention_keys(name)
            .iter()
            .filter_map(|k| self.by_key.get(k))
            .flatten()
            .copied()
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        candidates.into_iter().find_map(|at| {
            let (tag, them) = self.entries.get(at)?;
            them.clash(name).map(|token| (tag, them, token))
        })
    }
}

/// Who a message addresses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    /// Indices of the addressed members, in room order.
    pub members: Vec<usize>,
    /// Mentions that match no member, as written (first spelling, once).
    pub unknown: Vec<String>,
}

/// The word addressing every member.
pub const EVERYONE: &str = "everyone";

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// The `@` mentions of `text`, in order, as written.
pub fn mentions(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        if c == '@' && !prev.is_some_and(is_name_char) {
            let rest = &text[i + 1..];
            let end = rest
                .char_indices()
                .find(|(_, c)| !is_name_char(*c))
                .map(|(j, _)| j)
                .unwrap_or(rest.len());
            let token = rest[..end].trim_end_matches(['.', '_', '-']);
            if !token.is_empty() {
                out.push(token);
            }
        }
        prev = Some(c);
    }
    out
}

/// Who `text` addresses among `members` (the room's members in order).
pub fn select(text: &str, members: &[MemberName]) -> Selection {
    let tokens = mentions(text);
    let mut everyone = tokens.is_empty();
    let mut chosen = vec![false; members.len()];
    let mut unknown: Vec<String> = Vec::new();
    for token in tokens {
        if token.eq_ignore_ascii_case(EVERYONE) {
            everyone = true;
            continue;
        }
        let mut found = false;
        for (i, m) in members.iter().enumerate() {
            if m.answers_to(token) {
                chosen[i] = true;
                found = true;
            }
        }
        if !found
            && !unknown
                .iter()
                .any(|u| u.to_lowercase() == token.to_lowercase())
        {
            unknown.push(token.to_owned());
        }
    }
    let members = if everyone {
        (0..members.len()).collect()
    } else {
        (0..members.len()).filter(|i| chosen[*i]).collect()
    };
    Selection { members, unknown }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::MemberName;

    /// Members with ids `ids` and display names like `Gamma-Name`.
    pub(crate) fn members(ids: &[&str]) -> Vec<MemberName> {
        ids.iter()
            .map(|id| {
                let mut name: Vec<char> = id.chars().collect();
                if let Some(c) = name.first_mut() {
                    *c = c.to_ascii_uppercase();
                }
                MemberName {
                    id: (*id).to_owned(),
                    name: format!("{}-Name", name.into_iter().collect::<String>()),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::tests_support::members;
    use super::*;

    #[test]
    fn finds_mentions_but_not_emails() {
        assert_eq!(
            mentions("@a, hi @B. mail bob@example.com (@c-d_) @ @..."),
            vec!["a", "B", "c-d"]
        );
        assert_eq!(mentions("@张三 你好"), vec!["张三"]);
    }

    #[test]
    fn selects_by_id_or_name_case_insensitively() {
        let m = members(&["alpha", "beta", "gamma"]);
        let s = select("@BETA what do you think, @gamma-name?", &m);
        assert_eq!(s.members, vec![1, 2]);
        assert!(s.unknown.is_empty());
        let spaced = vec![MemberName {
            id: "r2".into(),
            name: "Research Bot".into(),
        }];
        assert_eq!(select("@researchbot go", &spaced).members, vec![0]);
    }

    #[test]
    fn everyone_or_no_mention_selects_all() {
        let m = members(&["alpha", "beta"]);
        assert_eq!(select("hello", &m).members, vec![0, 1]);
        assert_eq!(select("@Everyone hello @beta", &m).members, vec![0, 1]);
    }

    /// The index finds what comparing with every earlier member in turn
    /// finds: the same member, the same mention, for names that differ in
    /// case, spaces, non-ASCII case rules, or are blank.
    #[test]
    fn the_name_index_finds_the_first_clash_like_a_pairwise_pass() {
        let names: Vec<MemberName> = [
            ("alpha", "Alpha"),
            ("beta", "Al Pha"),
            ("gamma", "BETA"),
            ("delta", "Beta Bot"),
            ("betabot", "Other"),
            ("kelvin", "Temp"),
            ("temp2", "\u{212A}elvin"),
            ("blank1", "   "),
            ("blank2", "  "),
            ("empty", ""),
            ("sigma", "ΟΔΟΣ"),
            ("sigma2", "οδος"),
            ("strasse", "Straße"),
            ("s2", "STRASSE"),
            ("x", "X"),
            ("ALPHA", "New"),
        ]
        .into_iter()
        .map(|(id, name)| MemberName {
            id: id.into(),
            name: name.into(),
        })
        .collect();
        let mut index = NameIndex::default();
        let mut clashes = 0;
        for (i, me) in names.iter().enumerate() {
            let pairwise = names[..i]
                .iter()
                .enumerate()
                .find_map(|(j, them)| them.clash(me).map(|token| (j, token)));
            let indexed = index
                .first_clash(me)
                .map(|(j, _, token): (&usize, _, _)| (*j, token));
            assert_eq!(indexed, pairwise, "{me:?}");
            clashes += usize::from(pairwise.is_some());
            index.insert(i, me.clone());
        }
        assert!(clashes >= 4, "the names should clash now and then");
    }

    #[test]
    fn unknown_names_are_reported() {
        let m = members(&["alpha", "beta"]);
        let s = select("@Zed and @zed and @beta", &m);
        assert_eq!(s.members, vec![1]);
        assert_eq!(s.unknown, vec!["Zed".to_owned()]);
        let s = select("@Zed only", &m);
        assert_eq!(
            s,
            Selection {
                members: vec![],
                unknown: vec!["Zed".into()]
            }
        );
    }
}

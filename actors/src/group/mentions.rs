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

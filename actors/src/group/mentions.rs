//! Mentions in a user's room message: who is addressed.
//!
//! `@Name` addresses a member whose bot id or display name is `Name`,
//! compared by [`name_key`] (ignoring case, width, spaces and invisible
//! characters: `@researchbot` and `@ＲｅｓｅａｒｃｈＢｏｔ` both address
//! "Research Bot"). `@everyone`, or no mention at all, addresses every
//! member. A mention that matches nobody is reported back, never silently
//! dropped; if every mention is unknown, nobody runs (the user meant
//! someone specific).
//!
//! A mention can hold only letters and digits, so a display name also
//! answers to its short forms: its letters and digits alone (`@小助手`
//! for "小助手🤖", `@研究员Researcher` for "研究员 (Researcher)"), and
//! those of the name without its bracketed parts (`@研究员`). A short
//! form counts only when no member's id or name is the mention itself and
//! exactly one member has it (two bots "Bot (A)" and "Bot (B)" in a room
//! make `@Bot` unknown, not both addressed): a mention wakes one member,
//! and rooms and fleets accepted before short forms existed stay valid,
//! as [`MemberName::clash`] still compares whole names only.
//!
//! A mention starts at `@` or the full-width `＠` at the start of the
//! text, after a character that cannot be part of a name (so
//! `alice@example.com` is no mention), or after a CJK character (Chinese
//! and Japanese put no space before it: `你好@记忆`). It takes letters,
//! digits, combining marks, `.`, `_` and `-`; trailing `.`, `_` and `-`
//! are sentence punctuation, not part of the name. As CJK text has no
//! spaces either, a mention that matches nobody whole but goes on in CJK
//! characters (`@回声机器人你好`, `@研究员查一下`) addresses the member
//! with the longest name, id or short form that the mention starts with,
//! ending right before a CJK character; at each length an id or whole
//! name wins over a short form.

use std::collections::HashMap;

use botfleet_memory::name_key;
use icu_properties::CodePointMapData;
use icu_properties::props::GeneralCategory;

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
    /// with both would wake the two for it): as written when one of their
    /// ids or names is it, else the [`name_key`] they share.
    pub fn clash(&self, other: &MemberName) -> Option<String> {
        let mine = mention_keys(self);
        let theirs = mention_keys(other);
        let shared = mine.iter().find(|k| theirs.contains(k))?.clone();
        let squeezed =
            |n: &MemberName| -> String { n.name.chars().filter(|c| !c.is_whitespace()).collect() };
        Some(
            [
                self.id.clone(),
                squeezed(self),
                other.id.clone(),
                squeezed(other),
            ]
            .into_iter()
            .find(|token| {
                let key = name_key(token);
                mine.contains(&key) && theirs.contains(&key)
            })
            .unwrap_or(shared),
        )
    }

    /// Whether `token` (a mention, or the name SendToAgent was given)
    /// addresses this member: its [`name_key`] is the id's or the name's.
    pub fn answers_to(&self, token: &str) -> bool {
        let key = name_key(token);
        !key.is_empty() && mention_keys(self).contains(&key)
    }
}

/// The words `m` answers to: the [`name_key`]s of its id and its name
/// (empty ones left out, each once). Two members [`MemberName::clash`]
/// exactly when they share one; [`NameIndex`] looks members up by them.
/// The members of a room as its notices name them, in speaking order:
/// `@a (Alice), @b (Bob)`.
pub(crate) fn members_list(members: &[MemberName]) -> String {
    members
        .iter()
        .map(|n| format!("@{} ({})", n.id, n.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn mention_keys(m: &MemberName) -> Vec<String> {
    let mut keys = vec![name_key(&m.id), name_key(&m.name)];
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
    is_letter_or_digit(c) || matches!(c, '.' | '_' | '-')
}

/// Whether `c` is a letter, a digit or a combining mark (Hindi's vowel
/// signs and virama are part of the word they are written in), but not
/// a variation selector (which only picks how an emoji looks).
fn is_letter_or_digit(c: char) -> bool {
    let selector = matches!(c, '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}');
    let mark = || {
        matches!(
            CodePointMapData::<GeneralCategory>::new().get(c),
            GeneralCategory::NonspacingMark | GeneralCategory::SpacingMark
        )
    };
    c.is_alphanumeric() || (!selector && mark())
}

/// Brackets whose contents a name's short form may leave out (after
/// NFKC, which makes the full-width `（` and `［` ASCII).
fn opens(c: char) -> bool {
    matches!(c, '(' | '[' | '{' | '【' | '〔' | '〖' | '〘')
}

/// See [`opens`].
fn closes(c: char) -> bool {
    matches!(c, ')' | ']' | '}' | '】' | '〕' | '〗' | '〙')
}

/// The letters and digits of `key` (a [`name_key`]), in order.
fn letters_and_digits(key: &str) -> String {
    key.chars().filter(|c| is_letter_or_digit(*c)).collect()
}

/// The mentions display name `name` answers to besides its
/// [`name_key`] (see the module docs): its letters and digits, and those
/// outside its brackets (each once, none empty).
fn short_forms(name: &str) -> Vec<String> {
    let key = name_key(name);
    let mut depth = 0usize;
    let unbracketed: String = key
        .chars()
        .filter(|c| {
            if opens(*c) {
                depth += 1;
            } else if closes(*c) {
                depth = depth.saturating_sub(1);
                return false;
            }
            depth == 0
        })
        .collect();
    let mut forms = vec![letters_and_digits(&key), letters_and_digits(&unbracketed)];
    forms.retain(|f| !f.is_empty());
    forms.dedup();
    forms
}

/// Whether `c` is written without spaces around words: Han, kana,
/// Hangul and Bopomofo (a mention may follow or be followed by one).
fn is_cjk(c: char) -> bool {
    matches!(
        c,
        '\u{1100}'..='\u{11ff}'
            | '\u{3005}'..='\u{3007}'
            | '\u{3040}'..='\u{30ff}'
            | '\u{3100}'..='\u{312f}'
            | '\u{3130}'..='\u{318f}'
            | '\u{31a0}'..='\u{31bf}'
            | '\u{31f0}'..='\u{31ff}'
            | '\u{3400}'..='\u{4dbf}'
            | '\u{4e00}'..='\u{9fff}'
            | '\u{a960}'..='\u{a97f}'
            | '\u{ac00}'..='\u{d7ff}'
            | '\u{f900}'..='\u{faff}'
            | '\u{ff66}'..='\u{ff9f}'
            | '\u{20000}'..='\u{323af}'
    )
}

/// The `@` (or `＠`) mentions of `text`, in order, as written. An `@` right
/// after a letter, a digit, `_` or `-` is an address's (`bob@example.com`),
/// not a mention; after a `.` it is one (`@Alpha.@Beta`: an address's
/// local part never ends with a dot; QA, the second mention was dropped
/// unreported).
pub fn mentions(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        if matches!(c, '@' | '＠') && prev.is_none_or(|p| !is_name_char(p) || p == '.' || is_cjk(p))
        {
            let rest = &text[i + c.len_utf8()..];
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

/// Whom one mention addresses.
#[derive(Debug, PartialEq, Eq)]
enum Addressed {
    /// `@everyone`.
    Everyone,
    /// These members (indices into the room's members).
    Members(Vec<usize>),
}

/// Whom `token` addresses among `members`: those answering to it whole,
/// else to its longest start that a CJK character follows (`回声机器人`
/// of `回声机器人你好`); at each length an id or a whole name first, then
/// a short form only one member has; `None` if nobody.
fn resolve(token: &str, members: &[MemberName]) -> Option<Addressed> {
    let forms: Vec<Vec<String>> = members.iter().map(|m| short_forms(&m.name)).collect();
    let whole = std::iter::once(token.len());
    let cjk_cuts = token
        .char_indices()
        .filter(|(at, c)| *at > 0 && is_cjk(*c))
        .map(|(at, _)| at)
        .rev();
    for cut in whole.chain(cjk_cuts) {
        let head = &token[..cut];
        if name_key(head) == EVERYONE {
            return Some(Addressed::Everyone);
        }
        let found: Vec<usize> = (0..members.len())
            .filter(|i| members[*i].answers_to(head))
            .collect();
        if !found.is_empty() {
            return Some(Addressed::Members(found));
        }
        let short = letters_and_digits(&name_key(head));
        let having: Vec<usize> = (0..members.len())
            .filter(|i| !short.is_empty() && forms[*i].contains(&short))
            .collect();
        if let [only] = having[..] {
            return Some(Addressed::Members(vec![only]));
        }
    }
    None
}

/// Who `text` addresses among `members` (the room's members in order).
pub fn select(text: &str, members: &[MemberName]) -> Selection {
    let tokens = mentions(text);
    let mut everyone = tokens.is_empty();
    let mut chosen = vec![false; members.len()];
    let mut unknown: Vec<String> = Vec::new();
    for token in tokens {
        match resolve(token, members) {
            Some(Addressed::Everyone) => everyone = true,
            Some(Addressed::Members(found)) => {
                for i in found {
                    chosen[i] = true;
                }
            }
            None => {
                if !unknown.iter().any(|u| name_key(u) == name_key(token)) {
                    unknown.push(token.to_owned());
                }
            }
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
#[path = "mentions_tests.rs"]
mod tests;

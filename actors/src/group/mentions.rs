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
//! A mention starts at `@` or the full-width `＠` at the start of the
//! text, after a character that cannot be part of a name (so
//! `alice@example.com` is no mention), or after a CJK character (Chinese
//! and Japanese put no space before it: `你好@记忆`). It takes letters,
//! digits, `.`, `_` and `-`; trailing `.`, `_` and `-` are sentence
//! punctuation, not part of the name. As CJK text has no spaces either,
//! a mention that matches nobody whole but goes on in CJK characters
//! (`@回声机器人你好`) addresses the member with the longest name or id
//! that the mention starts with, ending right before a CJK character.

use std::collections::HashMap;

use botfleet_memory::name_key;

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
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-')
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
            | '\u{20000}'..='\u{3134f}'
    )
}

/// The `@` (or `＠`) mentions of `text`, in order, as written.
pub fn mentions(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        if matches!(c, '@' | '＠') && prev.is_none_or(|p| !is_name_char(p) || is_cjk(p)) {
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
/// of `回声机器人你好`); `None` if nobody.
fn resolve(token: &str, members: &[MemberName]) -> Option<Addressed> {
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

    /// Mentions as Chinese users type them: right after a CJK character,
    /// with the full-width `＠`, and with no space before the text that
    /// follows (each was ignored, or an unknown mention).
    #[test]
    fn mentions_in_cjk_text_find_their_members() {
        assert_eq!(mentions("你好@记忆 请记住"), vec!["记忆"]);
        assert_eq!(mentions("＠记忆 请记住"), vec!["记忆"]);
        assert_eq!(mentions("你好＠记忆，请记住"), vec!["记忆"]);
        assert_eq!(mentions("mail bob@example.com"), Vec::<&str>::new());
        let m = vec![
            MemberName {
                id: "echo".into(),
                name: "回声机器人".into(),
            },
            MemberName {
                id: "mem".into(),
                name: "记忆".into(),
            },
            MemberName {
                id: "mem2".into(),
                name: "记忆助手".into(),
            },
        ];
        for (text, want) in [
            ("你好@记忆 请记住", vec![1]),
            ("＠记忆 请记住", vec![1]),
            ("@回声机器人你好", vec![0]),
            ("@echo你好", vec![0]),
            // the longest name the mention starts with
            ("@记忆助手请记住", vec![2]),
            ("@记忆请记住", vec![1]),
        ] {
            let s = select(text, &m);
            assert_eq!((s.members, s.unknown), (want, vec![]), "{text}");
        }
        assert_eq!(select("@Everyone大家好", &m).members, vec![0, 1, 2]);
        // a start that a CJK character does not follow is no match
        let s = select("@echoes你好", &m);
        assert_eq!(s.unknown, vec!["echoes你好".to_owned()]);
    }

    /// Names that read the same clash: full width, invisible characters,
    /// case beyond ASCII (each passed for another bot's name).
    #[test]
    fn names_that_read_the_same_clash() {
        let helper = MemberName {
            id: "helper".into(),
            name: "Helper".into(),
        };
        for name in ["Ｈｅｌｐｅｒ", "Helper\u{200b}", "HELPER", "Hel per"] {
            let other = MemberName {
                id: "hy".into(),
                name: name.into(),
            };
            assert!(helper.clash(&other).is_some(), "{name:?}");
            assert!(other.clash(&helper).is_some(), "{name:?}");
        }
        let greek = MemberName {
            id: "sis".into(),
            name: "ΣΊΣΥΦΟΣ".into(),
        };
        assert!(greek.answers_to("σίσυφος"));
        assert!(greek.answers_to("σίσυφοσ"));
        let cyrillic = MemberName {
            id: "hy".into(),
            name: "H\u{435}lper".into(),
        };
        // left to the name rule, which refuses a word mixing alphabets
        assert_eq!(helper.clash(&cyrillic), None);
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

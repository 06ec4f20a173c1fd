//! Search queries: the request a caller fills in, the small query language
//! of its `text`, and its translation into a tantivy query.
//!
//! The language is described on [`SearchQuery`].
//!
//! Errors are [`QueryError`]s that say what to change: an empty query, one
//! over [`MAX_QUERY_CHARS`], an unclosed quote, an empty phrase, a query that
//! only excludes, a limit outside `1..=MAX_SEARCH_LIMIT`, an unknown role or
//! kind filter.

use std::collections::HashSet;
use std::hash::Hash;
use std::ops::Bound;

use serde::Deserialize;
use serde::Serialize;
use tantivy::Term;
use tantivy::query::BooleanQuery;
use tantivy::query::BoostQuery;
use tantivy::query::ConstScoreQuery;
use tantivy::query::Occur;
use tantivy::query::PhraseQuery;
use tantivy::query::Query;
use tantivy::query::RangeQuery;
use tantivy::query::TermQuery;
use tantivy::query::TermSetQuery;
use tantivy::schema::IndexRecordOption;
use tantivy::tokenizer::TextAnalyzer;

use self::exclusion::Excluded;
use super::error::MAX_QUERY_CHARS;
use super::error::MAX_SEARCH_LIMIT;
use super::error::MAX_SEARCH_OFFSET;
use super::error::QueryError;
use super::schema::Fields;
use super::schema::KINDS;
use super::schema::KINDS_LIST;
use super::schema::ROLES;
use super::schema::ROLES_LIST;
use super::tokenizer::CharClass;
use super::tokenizer::Script;
use super::tokenizer::classify;
use super::tokenizer::han_words;
use super::tokenizer::query_analyzer;
use crate::ids::BotId;
use crate::ids::SessionId;

/// Hits returned when a query does not say.
pub const DEFAULT_SEARCH_LIMIT: usize = 10;

fn default_limit() -> usize {
    DEFAULT_SEARCH_LIMIT
}

/// A search over the transcript. Visibility is the caller's job: pass the
/// sessions the asker may read in `sessions`.
///
/// The query language of `text` is deliberately small, so that ordinary
/// text never fails:
///
/// - words are all required: `deploy staging` finds entries with both;
/// - `"exact phrase"` (or `“…”`) requires the words in that order, next to
///   each other; for CJK text a phrase is an exact substring;
/// - `-word` or `-"a phrase"` excludes entries that contain it;
/// - `a OR b` between two terms accepts either; `OR` anywhere else is the
///   word "or";
/// - everything else (`:`, `(`, `*`, `+`, `?`, ...) is punctuation and only
///   separates words. `e-mail` and `foo.bar` are phrases of their parts.
///
/// An unquoted run of Chinese characters is cut into words with jieba and
/// each word must occur (as a substring), in any order: `供应商排除` finds
/// `供应商被排除了`. Kana and hangul runs are kept whole. Quote the text to
/// require it exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchQuery {
    /// The query text, in the language above.
    pub text: String,
    /// Only entries of these sessions (`None`: every session; an empty list
    /// finds nothing).
    #[serde(default)]
    pub sessions: Option<Vec<SessionId>>,
    /// Only entries of this bot's sessions.
    #[serde(default)]
    pub bot: Option<BotId>,
    /// Only entries whose author plays one of these roles (`user`, `agent`,
    /// `event`, `assistant`, `tool`, `system`); empty means any.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Only entries of these kinds (`user_message`, `delivery`, ...); empty
    /// means any but `summary` (compaction summaries restate each other).
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Per session, the first seq the asker may read: entries of that
    /// session before it are left out (the history of a room from before
    /// it was shared with the asker). Sessions not listed: every seq.
    #[serde(default)]
    pub visible_from: Vec<(SessionId, i64)>,
    /// Room members' own sessions searched together with their room's
    /// timeline: their copies of the timeline's messages are left out, so
    /// a room message is found once, where it was said
    /// ([`RoomCopies`]).
    #[serde(default)]
    pub room_copies: Vec<RoomCopies>,
    /// Messages between bots kept both where they were sent and where
    /// they arrived, both covered by this search: the copy to leave out,
    /// so each is found once ([`BotCopies`]).
    #[serde(default)]
    pub bot_copies: Vec<BotCopies>,
    /// Most hits to return, `1..=MAX_SEARCH_LIMIT`.
    #[serde(default = "default_limit")]
    pub limit: usize,
    /// Best hits to skip before the first returned, `0..=MAX_SEARCH_OFFSET`
    /// (paging: the next page starts at `offset + limit`).
    #[serde(default)]
    pub offset: usize,
}

impl SearchQuery {
    /// A query for `text` over every session, [`DEFAULT_SEARCH_LIMIT`] hits.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            sessions: None,
            bot: None,
            roles: Vec::new(),
            kinds: Vec::new(),
            visible_from: Vec::new(),
            room_copies: Vec::new(),
            bot_copies: Vec::new(),
            limit: DEFAULT_SEARCH_LIMIT,
            offset: 0,
        }
    }

    /// Restricts the search to these sessions.
    pub fn in_sessions(mut self, sessions: impl IntoIterator<Item = SessionId>) -> Self {
        self.sessions = Some(sessions.into_iter().collect());
        self
    }

    /// Leaves out the entries of each `(session, seq)` before `seq`
    /// ([`SearchQuery::visible_from`]).
    pub fn visible_from(mut self, floors: impl IntoIterator<Item = (SessionId, i64)>) -> Self {
        self.visible_from.extend(floors);
        self
    }

    /// Leaves out the copies of room messages in these member sessions
    /// ([`SearchQuery::room_copies`]).
    pub fn without_room_copies(mut self, copies: impl IntoIterator<Item = RoomCopies>) -> Self {
        self.room_copies.extend(copies);
        self
    }

    /// Leaves out these copies of messages between bots
    /// ([`SearchQuery::bot_copies`]).
    pub fn without_bot_copies(mut self, copies: impl IntoIterator<Item = BotCopies>) -> Self {
        self.bot_copies.extend(copies);
        self
    }

    /// Restricts the search to one bot's sessions.
    pub fn of_bot(mut self, bot: BotId) -> Self {
        self.bot = Some(bot);
        self
    }

    /// Restricts the search to entries of these roles.
    pub fn with_roles(mut self, roles: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.roles = roles.into_iter().map(Into::into).collect();
        self
    }

    /// Restricts the search to entries of these kinds.
    pub fn with_kinds(mut self, kinds: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.kinds = kinds.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the most hits to return.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Sets how many of the best hits to skip (the start of a page).
    pub fn with_offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }
}

/// A room member's own session in a room whose timeline the same search
/// covers. Each message of the room is on the timeline once (a person's
/// message, a member's published reply), and again in its members'
/// sessions: quoted in the coordinator's input of every member shown it
/// (an `event` by `inputs_by`), and, for a member's own reply, as the
/// `delivery` its turn wrote before the room published it. Searched with
/// the timeline, those copies only repeat the timeline's hit, once per
/// member: a phrase said in a room of three members was found four
/// times, each copy pointing at a member's session instead of the room.
/// So they are left out there; everything else of the member's session
/// (its notes, tool results, held messages, approvals) stays, and a
/// search of the member's session alone (without the timeline) finds
/// the copies too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomCopies {
    /// The member's session in the room.
    pub session: SessionId,
    /// Author of the room coordinator's inputs in that session.
    pub inputs_by: String,
    /// Only the copies written from this time on (ms), when the searcher
    /// reads the timeline from a later seq than its start (a bot taken out
    /// of the room and added back, a room shared after it began): the
    /// timeline's earlier messages are not found there, so their copies
    /// in the member's session are kept. `None`: every copy. (Before, both
    /// were left out, and such a message was found nowhere: QA.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_time: Option<i64>,
}

/// The kind of a member's replies, copied to the timeline when published.
const REPLY_KIND: &str = "delivery";

/// The kind of the coordinator's inputs to a member.
const INPUT_KIND: &str = "event";

/// One required unit of a query: a single term or a phrase of terms with
/// their relative positions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Part {
    /// One indexed term.
    Term(String),
    /// Terms at relative positions (at least two).
    Phrase(Vec<(usize, String)>),
}

/// Alternatives (`OR`), each a conjunction of parts.
pub(crate) type Group = Vec<Vec<Part>>;

/// The query text, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ParsedText {
    /// Every group must match.
    pub(crate) must: Vec<Group>,
    /// No group may match.
    pub(crate) must_not: Vec<Group>,
}

impl ParsedText {
    /// The alternatives that can match, each a conjunction of parts, for
    /// highlighting.
    pub(crate) fn positive_alternatives(&self) -> impl Iterator<Item = &[Part]> {
        self.must.iter().flatten().map(Vec::as_slice)
    }
}

/// A lexical item of the query text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    /// Unquoted text.
    Bare { text: String, negated: bool },
    /// Quoted text; `at` is the opening quote's char position.
    Quoted {
        text: String,
        negated: bool,
        at: usize,
    },
    /// The `OR` operator.
    Or,
}

impl Item {
    fn is_positive_text(&self) -> bool {
        match self {
            Item::Bare { negated, .. } | Item::Quoted { negated, .. } => !negated,
            Item::Or => false,
        }
    }
}

fn closing_quote(c: char) -> Option<char> {
    match c {
        '"' => Some('"'),
        '\u{201C}' => Some('\u{201D}'),
        // full width, as Chinese and Japanese input methods type it
        '\u{FF02}' => Some('\u{FF02}'),
        _ => None,
    }
}

/// Whether `c` is the minus that excludes a term: `-`, or its full-width
/// form `－` (U+FF0D) that a Chinese input method types (QA: `北京大学
/// －讨论` searched for 讨论 instead of excluding it).
fn is_minus(c: char) -> bool {
    c == '-' || c == '\u{FF0D}'
}

/// Whether `word` is the `OR` operator, in ASCII or full width (`ＯＲ`).
fn is_or(word: &str) -> bool {
    word == "OR" || word == "\u{FF2F}\u{FF32}"
}

/// Splits the text into items; fails on an unclosed quote.
fn lex(text: &str) -> Result<Vec<Item>, QueryError> {
    let chars: Vec<char> = text.chars().collect();
    let mut items = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).copied();
        let negated = is_minus(c)
            && next.is_some_and(|n| closing_quote(n).is_some() || classify(n) != CharClass::Other);
        let start = if negated { i + 1 } else { i };
        let first = chars[start];
        if let Some(close) = closing_quote(first) {
            let Some(len) = chars[start + 1..].iter().position(|&c| c == close) else {
                return Err(QueryError::UnbalancedQuote {
                    quote: first,
                    close,
                    at: start,
                });
            };
            let end = start + 1 + len;
            items.push(Item::Quoted {
                text: chars[start + 1..end].iter().collect(),
                negated,
                at: start,
            });
            i = end + 1;
            continue;
        }
        let len = chars[start..]
            .iter()
            .position(|&c| c.is_whitespace() || closing_quote(c).is_some())
            .unwrap_or(chars.len() - start);
        let word: String = chars[start..start + len].iter().collect();
        i = start + len;
        if is_or(&word) && !negated {
            items.push(Item::Or);
        } else {
            items.push(Item::Bare {
                text: word,
                negated,
            });
        }
    }
    // `OR` is an operator only between two positive terms.
    for k in 0..items.len() {
        if items[k] == Item::Or {
            let between = k > 0
                && items[k - 1].is_positive_text()
                && items.get(k + 1).is_some_and(Item::is_positive_text);
            if !between {
                items[k] = Item::Bare {
                    text: "OR".into(),
                    negated: false,
                };
            }
        }
    }
    Ok(items)
}

/// Turns analyzed tokens into a part (`None` if there are none).
fn part_of(analyzer: &mut TextAnalyzer, text: &str) -> Option<Part> {
    let mut tokens: Vec<(usize, String)> = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while let Some(token) = stream.next() {
        tokens.push((token.position, token.text.clone()));
    }
    let base = tokens.first()?.0;
    if tokens.len() == 1 {
        return tokens.pop().map(|(_, t)| Part::Term(t));
    }
    Some(Part::Phrase(
        tokens.into_iter().map(|(p, t)| (p - base, t)).collect(),
    ))
}

/// The parts of an unquoted word: non-CJK stretches are phrases of their
/// words, Han runs are cut into words by jieba, kana and hangul runs stay
/// whole.
fn bare_parts(analyzer: &mut TextAnalyzer, text: &str) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut segment_start = 0;
    let mut segment_script: Option<Script> = None;
    let mut flush = |segment: &str, script: Option<Script>, parts: &mut Vec<Part>| match script {
        Some(Script::Han) => parts.extend(
            han_words(segment)
                .into_iter()
                .filter_map(|w| part_of(analyzer, w)),
        ),
        Some(Script::Kana | Script::Hangul) | None => parts.extend(part_of(analyzer, segment)),
    };
    for (i, c) in text.char_indices() {
        let script = match classify(c) {
            CharClass::Cjk(s) => Some(s),
            CharClass::Word | CharClass::Other => None,
        };
        if script != segment_script && i > segment_start {
            flush(&text[segment_start..i], segment_script, &mut parts);
            segment_start = i;
        }
        segment_script = script;
    }
    flush(&text[segment_start..], segment_script, &mut parts);
    parts
}

/// Parses and validates the query text.
pub(crate) fn parse_text(text: &str) -> Result<ParsedText, QueryError> {
    let chars = text.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(QueryError::TooLong {
            chars,
            max: MAX_QUERY_CHARS,
        });
    }
    if text.trim().is_empty() {
        return Err(QueryError::Empty);
    }
    let mut analyzer = query_analyzer();
    let mut parsed = ParsedText::default();
    let mut after_or = false;
    for item in lex(text)? {
        let (parts, negated) = match item {
            Item::Or => {
                after_or = true;
                continue;
            }
            Item::Bare { text, negated } => (bare_parts(&mut analyzer, &text), negated),
            Item::Quoted { text, negated, at } => match part_of(&mut analyzer, &text) {
                Some(part) => (vec![part], negated),
                None => return Err(QueryError::EmptyPhrase { at }),
            },
        };
        if parts.is_empty() {
            // Punctuation alone: ignored.
            continue;
        }
        let groups = if negated {
            &mut parsed.must_not
        } else {
            &mut parsed.must
        };
        match groups.last_mut() {
            Some(group) if after_or && !negated => group.push(parts),
            _ => groups.push(vec![parts]),
        }
        after_or = false;
    }
    // after the loop: `a a OR b` is `a AND (a OR b)`, not `a OR b`
    dedup_groups(&mut parsed.must);
    dedup_groups(&mut parsed.must_not);
    if parsed.must.is_empty() {
        return Err(if parsed.must_not.is_empty() {
            QueryError::NoWords {
                query: text.to_owned(),
            }
        } else {
            QueryError::OnlyExclusions
        });
    }
    Ok(parsed)
}

/// Keeps the first of repeated parts of a conjunction, repeated
/// alternatives of a group and repeated groups: asking for a word twice
/// matches what asking once does, but each repeat was searched (and
/// highlighted) again, so a Chinese word written 170 times took twenty times
/// as long as once. A phrase is one part: its words keep their order.
fn dedup_groups(groups: &mut Vec<Group>) {
    for group in groups.iter_mut() {
        for parts in group.iter_mut() {
            dedup_in_order(parts);
        }
        dedup_in_order(group);
    }
    dedup_in_order(groups);
}

/// Drops the items equal to an earlier one.
fn dedup_in_order<T: Clone + Eq + Hash>(items: &mut Vec<T>) {
    let mut seen = HashSet::new();
    items.retain(|item| seen.insert(item.clone()));
}

/// Checks the limit and the filters of a query.
pub(crate) fn validate(query: &SearchQuery) -> Result<(), QueryError> {
    if query.limit == 0 || query.limit > MAX_SEARCH_LIMIT {
        return Err(QueryError::LimitOutOfRange {
            limit: query.limit,
            max: MAX_SEARCH_LIMIT,
        });
    }
    if query.offset > MAX_SEARCH_OFFSET {
        return Err(QueryError::OffsetOutOfRange {
            offset: query.offset,
            max: MAX_SEARCH_OFFSET,
        });
    }
    if let Some(role) = query.roles.iter().find(|r| !ROLES.contains(&r.as_str())) {
        return Err(QueryError::UnknownRole {
            role: role.clone(),
            known: ROLES_LIST,
        });
    }
    if let Some(kind) = query.kinds.iter().find(|k| !KINDS.contains(&k.as_str())) {
        return Err(QueryError::UnknownKind {
            kind: kind.clone(),
            known: KINDS_LIST,
        });
    }
    Ok(())
}

fn part_query(fields: &Fields, part: &Part) -> Box<dyn Query> {
    match part {
        Part::Term(t) => Box::new(TermQuery::new(
            Term::from_field_text(fields.text, t),
            IndexRecordOption::WithFreqs,
        )),
        Part::Phrase(terms) => Box::new(PhraseQuery::new_with_offset(
            terms
                .iter()
                .map(|(offset, t)| (*offset, Term::from_field_text(fields.text, t)))
                .collect(),
        )),
    }
}

/// Most words of a plain query whose being written together is scored.
const TOGETHER_MAX: usize = 8;

/// What a plain query of several words (`lynx hyena`: each word its own
/// group of one term) adds to the score of a text that has them side by
/// side in that order: a phrase of them, boosted, that matches nothing by
/// itself (`Occur::Should` beside the words' `Must`). The text with the
/// words together ranked last of four (QA, 2026-12-05). `None` for one
/// word, for a query with quotes, `OR` or a word the tokenizer splits
/// (a Chinese word is a phrase already), and past [`TOGETHER_MAX`] words.
fn written_together(fields: &Fields, must: &[Group]) -> Option<Box<dyn Query>> {
    if must.len() < 2 || must.len() > TOGETHER_MAX {
        return None;
    }
    let terms: Option<Vec<Term>> = must
        .iter()
        .map(|group| match group.as_slice() {
            [alternative] => match alternative.as_slice() {
                [Part::Term(t)] => Some(Term::from_field_text(fields.text, t)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let terms = terms?;
    // the same word twice is no phrase to favour
    if terms.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    Some(Box::new(BoostQuery::new(
        Box::new(PhraseQuery::new(terms)),
        2.0,
    )))
}

fn all_of(mut queries: Vec<Box<dyn Query>>) -> Box<dyn Query> {
    if queries.len() == 1
        && let Some(q) = queries.pop()
    {
        return q;
    }
    Box::new(BooleanQuery::intersection(queries))
}

fn group_query(fields: &Fields, group: &Group) -> Box<dyn Query> {
    let mut alternatives: Vec<Box<dyn Query>> = group
        .iter()
        .map(|parts| all_of(parts.iter().map(|p| part_query(fields, p)).collect()))
        .collect();
    if alternatives.len() == 1
        && let Some(q) = alternatives.pop()
    {
        return q;
    }
    Box::new(BooleanQuery::union(alternatives))
}

/// Up to this many values, a filter is a union of term queries (each term
/// looked up directly); above, one `TermSetQuery` (one pass over the term
/// dictionary into a bitset), which wins for long lists.
const DIRECT_TERMS_MAX: usize = 64;

/// A filter clause that matches `values` of a raw field and adds no score.
fn filter<'a>(
    field: tantivy::schema::Field,
    values: impl ExactSizeIterator<Item = &'a str>,
) -> Box<dyn Query> {
    let terms = values.map(|v| Term::from_field_text(field, v));
    let matcher: Box<dyn Query> = if terms.len() <= DIRECT_TERMS_MAX {
        Box::new(BooleanQuery::union(
            terms
                .map(|t| Box::new(TermQuery::new(t, IndexRecordOption::Basic)) as Box<dyn Query>)
                .collect(),
        ))
    } else {
        Box::new(TermSetQuery::new(terms))
    };
    Box::new(ConstScoreQuery::new(matcher, 0.0))
}

/// The entries of `session` before seq `from` (the field `seq` is fast:
/// the range is read from its column).
fn before(fields: &Fields, session: SessionId, from: i64) -> Box<dyn Query> {
    let id = session.to_string();
    let range = RangeQuery::new(
        Bound::Included(Term::from_field_i64(fields.seq, 0)),
        Bound::Excluded(Term::from_field_i64(fields.seq, from)),
    );
    Box::new(BooleanQuery::new(vec![
        (
            Occur::Must,
            filter(fields.session, std::iter::once(id.as_str())),
        ),
        (Occur::Must, Box::new(range)),
    ]))
}

/// The copies of room messages in members' sessions ([`RoomCopies`]):
/// in those sessions, every delivery and the events of the coordinators
/// (from its `from_time` on, for a copy that has one).
fn room_copies(fields: &Fields, copies: &[RoomCopies]) -> Box<dyn Query> {
    let mut authors: Vec<&str> = copies.iter().map(|c| c.inputs_by.as_str()).collect();
    authors.sort_unstable();
    authors.dedup();
    let inputs = BooleanQuery::new(vec![
        (
            Occur::Must,
            filter(fields.kind, std::iter::once(INPUT_KIND)),
        ),
        (Occur::Must, filter(fields.author, authors.into_iter())),
    ]);
    let kinds = BooleanQuery::union(vec![
        filter(fields.kind, std::iter::once(REPLY_KIND)),
        Box::new(inputs),
    ]);
    // the sessions whose copies all go in one filter; each with a time
    // of its own
    let whole: Vec<String> = copies
        .iter()
        .filter(|c| c.from_time.is_none())
        .map(|c| c.session.to_string())
        .collect();
    let mut places: Vec<Box<dyn Query>> = Vec::new();
    if !whole.is_empty() {
        places.push(filter(fields.session, whole.iter().map(String::as_str)));
    }
    for copy in copies {
        let Some(from) = copy.from_time else { continue };
        let id = copy.session.to_string();
        let since = RangeQuery::new(
            Bound::Included(Term::from_field_i64(fields.time, from)),
            Bound::Included(Term::from_field_i64(fields.time, i64::MAX)),
        );
        places.push(Box::new(BooleanQuery::new(vec![
            (
                Occur::Must,
                filter(fields.session, std::iter::once(id.as_str())),
            ),
            (Occur::Must, Box::new(since)),
        ])));
    }
    Box::new(BooleanQuery::new(vec![
        (Occur::Must, Box::new(BooleanQuery::union(places))),
        (Occur::Must, Box::new(kinds)),
    ]))
}

/// The kinds a search without a `kinds` filter leaves out: compaction
/// summaries, and the runtime's reminders (the same fixed text each time,
/// "Send your answer now with the SendMessage tool": a search for
/// "answer" filled its first page with them, above what people said; QA,
/// 2026-12-05).
const UNLESS_ASKED: [&str; 2] = ["summary", "reminder"];

/// A `MustNot` clause of `query`. Every exclusion goes through
/// [`Excluded`]: tantivy's exclusion seeks excluded phrases backwards,
/// which panicked debug builds (see `query_exclusion.rs`).
fn excluded(query: Box<dyn Query>) -> (Occur, Box<dyn Query>) {
    (Occur::MustNot, Box::new(Excluded::new(query)))
}

/// The tantivy query for a validated request.
pub(crate) fn compile(fields: &Fields, query: &SearchQuery, text: &ParsedText) -> Box<dyn Query> {
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for group in &text.must {
        clauses.push((Occur::Must, group_query(fields, group)));
    }
    if let Some(together) = written_together(fields, &text.must) {
        clauses.push((Occur::Should, together));
    }
    for group in &text.must_not {
        clauses.push(excluded(group_query(fields, group)));
    }
    if let Some(sessions) = &query.sessions {
        let ids: Vec<String> = sessions.iter().map(ToString::to_string).collect();
        clauses.push((
            Occur::Must,
            filter(fields.session, ids.iter().map(String::as_str)),
        ));
    }
    for (session, from) in &query.visible_from {
        clauses.push(excluded(before(fields, *session, *from)));
    }
    if !query.room_copies.is_empty() {
        clauses.push(excluded(room_copies(fields, &query.room_copies)));
    }
    if !query.bot_copies.is_empty() {
        clauses.push(excluded(copies::bot_copies(fields, &query.bot_copies)));
    }
    if let Some(bot) = &query.bot {
        clauses.push((
            Occur::Must,
            filter(fields.bot, std::iter::once(bot.as_str())),
        ));
    }
    if !query.roles.is_empty() {
        clauses.push((
            Occur::Must,
            filter(fields.role, query.roles.iter().map(String::as_str)),
        ));
    }
    if query.kinds.is_empty() {
        // Each compaction's summary restates the facts of the ones before
        // it, so a fact of a long conversation matched every summary since
        // and crowded out what was really said; the newest summary is in
        // the bot's prompt anyway. Asked for by kind, they are found.
        clauses.push(excluded(filter(fields.kind, UNLESS_ASKED.into_iter())));
    } else {
        clauses.push((
            Occur::Must,
            filter(fields.kind, query.kinds.iter().map(String::as_str)),
        ));
    }
    if clauses.len() == 1
        && matches!(clauses[0].0, Occur::Must)
        && let Some((_, q)) = clauses.pop()
    {
        return q;
    }
    Box::new(BooleanQuery::new(clauses))
}

#[path = "query_exclusion.rs"]
mod exclusion;

/// Messages between bots stored twice.
#[path = "query_copies.rs"]
mod copies;
pub use copies::BotCopies;

#[cfg(test)]
#[path = "query_tests.rs"]
mod tests;

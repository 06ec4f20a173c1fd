//! The index schema, the document built from a transcript entry, and the
//! commit marker that ties the index to the store.
//!
//! | field   | type | indexed as          | stored | fast |
//! | ------- | ---- | ------------------- | ------ | ---- |
//! | text    | text | CJK bigram + words, positions | yes | |
//! | bot     | str  | raw                 | yes    |      |
//! | session | str  | raw                 | yes    |      |
//! | author  | str  | raw                 | yes    |      |
//! | role    | str  | raw                 | yes    |      |
//! | kind    | str  | raw                 | yes    |      |
//! | time    | i64  | yes (ms since epoch) | yes   | yes  |
//! | gid     | i64  | yes                 | yes    | yes  |
//! | seq     | i64  | no                  | yes    | yes  |

use serde::Deserialize;
use serde::Serialize;
use tantivy::TantivyDocument;
use tantivy::schema::FAST;
use tantivy::schema::Field;
use tantivy::schema::INDEXED;
use tantivy::schema::IndexRecordOption;
use tantivy::schema::STORED;
use tantivy::schema::STRING;
use tantivy::schema::Schema;
use tantivy::schema::TextFieldIndexing;
use tantivy::schema::TextOptions;

use super::tokenizer::TOKENIZER_NAME;
use crate::ids::BotId;
use crate::record::Entry;
use crate::record::EntryKind;

/// Version of what the index holds and how it is tokenized. Bump it when
/// the schema, the tokenizer or the text taken from an entry changes: an
/// index of another format is rebuilt from the store.
///
/// 2: a letter-prefixed number (`v2`, `x86`) is also indexed as its digits
/// (format 1 indexes lacked them: `2.3.1` did not find `v2.3.1`).
///
/// 3: words are put in NFC and fully case-folded (`ς`→`σ`, `ß`→`ss`),
/// combining marks and invisible (Default_Ignorable) characters stay
/// inside the word or CJK run they are in, and the word limit counts
/// characters instead of bytes (format 2 held `σίσυφος` and `σίσυφοσ`
/// apart and cut `nai\u{308}ve` into `nai` and `ve`).
///
/// 4: the results of [`QUOTING_TOOLS`] are left out (format 3 held them,
/// so each search found the quotes of the searches before it).
///
/// 5: accents are folded in words (`Zürich` is `zurich`, `Tromsø` is
/// `tromso`, Greek tonos dropped; format 4 held the accented terms, so
/// `Zurich` did not find `Zürich`).
///
/// 6: a letter-prefixed number gives its letters as a term too (`iphone`
/// of `iphone15`; format 5 gave only its digits, so `iPhone` did not find
/// `iPhone15的价格`), and Han Extension H (U+31350–U+323AF) is cut as Han
/// rather than held as one word.
pub(crate) const FORMAT: u32 = 6;

/// The field of an entry's gid, also the fast column searches break ties
/// in score with (`search.rs`).
pub(crate) const GID_FIELD: &str = "gid";

/// The tools whose results only quote what the index already holds, so
/// their results are not indexed:
///
/// - `SearchTranscript`: its hits' snippets; indexed, a search for a word
///   found every earlier search for it, one more copy each time;
/// - `ReadTranscript`: the entries around one entry, as they are;
/// - `CheckSubagent`: a subagent's task, report and latest steps, which
///   its own session holds (and its parent may search), plus a status
///   that is stale by the next call; a parent polls it while it waits.
///
/// The memory tools stay indexed: `Remember` and `Forget` results are the
/// transcript's only record of what a bot wrote to or removed from its
/// memory, which the index does not hold. Each name is a built-in tool's
/// (a test in `actors/src/tools/recall_tests.rs` checks it).
pub(crate) const QUOTING_TOOLS: &[&str] = &["SearchTranscript", "ReadTranscript", "CheckSubagent"];

/// Whether `kind` only quotes other entries (see [`QUOTING_TOOLS`]). Read
/// from the entry alone (a tool result names its tool), so a rebuild
/// leaves out exactly what live indexing left out.
pub(crate) fn quotes_the_transcript(kind: &EntryKind) -> bool {
    // only a tool result names a tool: any other kind, a new one too, is
    // the text of the conversation itself
    let EntryKind::ToolResult { name, .. } = kind else {
        return false;
    };
    QUOTING_TOOLS.contains(&name.as_str())
}

/// Handles of the schema's fields.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fields {
    pub(crate) text: Field,
    pub(crate) bot: Field,
    pub(crate) session: Field,
    pub(crate) author: Field,
    pub(crate) role: Field,
    pub(crate) kind: Field,
    pub(crate) time: Field,
    pub(crate) gid: Field,
    pub(crate) seq: Field,
}

/// Builds the schema.
pub(crate) fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text_options = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(TOKENIZER_NAME)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    let fields = Fields {
        text: b.add_text_field("text", text_options),
        bot: b.add_text_field("bot", STRING | STORED),
        session: b.add_text_field("session", STRING | STORED),
        author: b.add_text_field("author", STRING | STORED),
        role: b.add_text_field("role", STRING | STORED),
        kind: b.add_text_field("kind", STRING | STORED),
        time: b.add_i64_field("time", INDEXED | STORED | FAST),
        gid: b.add_i64_field(GID_FIELD, INDEXED | STORED | FAST),
        seq: b.add_i64_field("seq", STORED | FAST),
    };
    (b.build(), fields)
}

impl Fields {
    /// The document of an entry, or `None` for an entry without searchable
    /// text (turn ends) or one that only quotes others (the results of
    /// [`QUOTING_TOOLS`]): it is skipped, only its gid moves the marker.
    pub(crate) fn document(&self, entry: &Entry, bot: &BotId) -> Option<TantivyDocument> {
        let text = entry.kind.text();
        if text.trim().is_empty() || quotes_the_transcript(&entry.kind) {
            return None;
        }
        let mut doc = TantivyDocument::default();
        doc.add_text(self.text, text);
        doc.add_text(self.bot, bot.as_str());
        doc.add_text(self.session, entry.session.to_string());
        doc.add_text(self.author, &entry.author);
        doc.add_text(self.role, entry.kind.role());
        doc.add_text(self.kind, entry.kind.name());
        doc.add_i64(self.time, entry.created_at);
        doc.add_i64(self.gid, entry.gid);
        doc.add_i64(self.seq, entry.seq);
        Some(doc)
    }
}

/// The durable marker written with every commit (as the tantivy commit
/// payload, so it is atomic with the documents it describes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Marker {
    /// [`FORMAT`] of the index.
    pub(crate) format: u32,
    /// Every entry with a gid up to this one is in the index.
    pub(crate) last_gid: i64,
}

impl Marker {
    pub(crate) fn new(last_gid: i64) -> Self {
        Self {
            format: FORMAT,
            last_gid,
        }
    }

    pub(crate) fn to_payload(self) -> String {
        format!(
            "{{\"format\":{},\"last_gid\":{}}}",
            self.format, self.last_gid
        )
    }

    pub(crate) fn from_payload(payload: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(payload)
    }
}

/// The known roles (as [`crate::EntryKind::role`] names them).
pub(crate) const ROLES: &[&str] = &["user", "agent", "event", "assistant", "tool", "system"];

/// The known entry kinds (as [`crate::EntryKind::name`] names them).
pub(crate) const KINDS: &[&str] = &[
    "user_message",
    "agent_message",
    "event",
    "assistant",
    "tool_result",
    "delivery",
    "reaction",
    "reminder",
    "notice",
    "approval",
    "turn_end",
    "summary",
];

/// [`ROLES`] as one line for error messages.
pub(crate) const ROLES_LIST: &str = "user, agent, event, assistant, tool, system";

/// [`KINDS`] as one line for error messages.
pub(crate) const KINDS_LIST: &str = "user_message, agent_message, event, assistant, tool_result, delivery, reaction, reminder, notice, approval, turn_end, summary";

#[cfg(test)]
mod tests {
    use super::*;

    /// The kind filter knows every `EntryKind`: the names are read from
    /// serde's "unknown variant" message, so a new variant fails this test
    /// until it is added to [`KINDS`].
    #[test]
    fn kind_vocabulary_matches_entry_kind() {
        let message = serde_json::from_str::<EntryKind>(r#"{"kind":"?"}"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        // unknown variant `?`, expected one of `a`, `b`, ... at line 1 column 10
        let names: Vec<&str> = message.split('`').skip(3).step_by(2).collect();
        assert_eq!(names, KINDS, "{message}");
        assert_eq!(KINDS.join(", "), KINDS_LIST);
    }

    #[test]
    fn role_vocabulary_is_listed() {
        for kind in [
            EntryKind::UserMessage { text: "x".into() },
            EntryKind::Reminder { text: "x".into() },
        ] {
            assert!(ROLES.contains(&kind.role()), "{}", kind.role());
        }
        assert_eq!(ROLES.join(", "), ROLES_LIST);
    }

    #[test]
    fn marker_round_trips() -> Result<(), serde_json::Error> {
        let m = Marker::new(42);
        assert_eq!(Marker::from_payload(&m.to_payload())?, m);
        Ok(())
    }
}

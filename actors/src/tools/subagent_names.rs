//! A subagent's display name: its parent's name and its task's title
//! (`Boss · audit the logs`), under the rules every bot's name follows
//! (`botfleet_memory::display_name_problem`: fleet.toml, CreateAgent,
//! UpdateAgent). The name is shown by `GET /v1/bots`, the web page and
//! `botfleet bots`, on one line. It follows the parent's name: the store
//! names the subagents again when their parent is renamed
//! (`SubagentRecord::name_under`, `Writer::subagent_names_follow`).
//!
//! A title that breaks those rules is refused, not cleaned: it is also
//! the task's label the parent reads back (CheckSubagent's list, one line
//! per task, and the subagent's role), where a newline or a bidi control
//! would break or reorder the line just as in a name, and a cleaned label
//! would not be the title the model gave. The model is told what is
//! wrong and gives another title. Only the length is not the name's: a
//! title may be longer than a name leaves room for, and the name keeps
//! what fits of it.

use botfleet_memory::SubagentRecord;
use unicode_segmentation::UnicodeSegmentation;

use super::ToolError;

/// Longest piece of a title judged at once: a name's length less the
/// visible character it is judged after (see [`title_problem`]), with
/// room to spare.
const PIECE_CHARS: usize = 90;

/// The next step of a refused title.
const NEXT_STEP: &str =
    "give the task a short title of plain text on one line and put the details in `prompt`";

/// The name of a subagent of `parent` (its parent's display name) for the
/// task titled `description` (trimmed, not empty), or the refusal of a
/// title that breaks the rules of names.
pub(super) fn subagent_name(parent: &str, description: &str) -> Result<String, ToolError> {
    if let Some(problem) = title_problem(description) {
        return Err(ToolError::new(
            format!(
                "the description names the subagent, so it follows the rules of names: it {problem}"
            ),
            NEXT_STEP,
        ));
    }
    let name = SubagentRecord::name_under(parent, description);
    // what only the whole name shows: a room's speaker marker made of
    // words of the title and the parent's name (`( person)`)
    match botfleet_memory::display_name_problem(&name) {
        Some(problem) => Err(ToolError::new(
            format!("the subagent's name {name:?}, your name and the description, {problem}"),
            NEXT_STEP,
        )),
        None => Ok(name),
    }
}

/// Why `title` could not be part of a name, but for its length: each of
/// its words (pieces of at most [`PIECE_CHARS`] characters of a longer
/// one) judged by the rules of names after a visible character, as in the
/// name it goes into (a title "You" names nobody "You"; a zero-width
/// joiner after a space is refused as in a name). Words are what is
/// between ASCII spaces: a newline or any other white space but the
/// plain space stays in the word and is judged.
fn title_problem(title: &str) -> Option<String> {
    title
        .split(' ')
        .filter(|w| !w.is_empty())
        .flat_map(pieces)
        .find_map(|piece| botfleet_memory::display_name_problem(&format!("x {piece}")))
}

/// `word` in pieces of at most [`PIECE_CHARS`] characters, cut between
/// graphemes (an emoji sequence's joiners stay between its parts).
fn pieces(word: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut piece = String::new();
    let mut chars = 0;
    for g in word.graphemes(true) {
        let n = g.chars().count();
        if chars + n > PIECE_CHARS && !piece.is_empty() {
            out.push(std::mem::take(&mut piece));
            chars = 0;
        }
        piece.push_str(g);
        chars += n;
    }
    if !piece.is_empty() {
        out.push(piece);
    }
    out
}

#[cfg(test)]
#[path = "subagent_names_tests.rs"]
mod tests;

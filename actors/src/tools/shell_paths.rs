//! The Shell tool's path check: a command naming a path outside the
//! workspace is refused before it runs.
//!
//! Every token of the command text that starts with `/` or `~`, or walks
//! out with `..`, is refused unless it resolves inside the workspace or is
//! one of [`ALLOWED_OUTSIDE`]. Three places where a `/` is not a path are
//! told apart by reading the command as shell words (quotes, operators,
//! redirections, the command each word belongs to):
//!
//! - inside arithmetic `$(( … ))` (without a command substitution in it),
//!   `/` is division;
//! - a word that is exactly `/` is not a path as an argument of `echo`,
//!   `printf`, `expr`, `tr`, `test` or `[`, nor as the value of a delimiter
//!   option (`awk -F /`, `cut -d /`, `sort -t /`, `paste -d /`, `join -t /`);
//! - the quoted program of `sed` or `awk`, or pattern of `grep` (`sed "s/
//!   /_/g"`, `awk '/^#/ {next}'`, `grep -r "/api/v1" src`) is regular
//!   expressions: a token in it is refused only if it names something that
//!   exists outside the workspace (`/etc/passwd`, `/usr/`), or a new name in
//!   an existing directory other than `/` (`print > "/tmp/out"`). Lone
//!   slashes and made-up names at the root (`/_/g`) pass.
//!
//! The words come from a lexer of its own (not safety/shell_parse.rs,
//! which keeps neither where a word is in the text nor whether it was
//! quoted): everything outside the exempt words is still checked token by
//! token, so a word it misreads is checked strictly, never exempted.
//!
//! A redirection target is never exempt (`echo hi > /x` is refused), nor a
//! word of a command whose name could be redefined in the same text (a
//! function or alias definition turns the exemptions off). This is a guard
//! against a model naming paths outside the workspace, not a sandbox: see
//! docs/security.md.

use std::ops::Range;
use std::path::Path;

use crate::tools::ToolError;
use crate::tools::Workspace;

/// Absolute paths a command may name although they are outside the workspace.
const ALLOWED_OUTSIDE: &[&str] = &[
    // the harmless devices auto-review lets a command redirect to or from
    // (safety/shell_rules.rs)
    "/dev/null",
    "/dev/zero",
    "/dev/tty",
    "/dev/urandom",
    "/dev/random",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/bin/",
    "/usr/bin/",
    "/usr/local/bin/",
    "/sbin/",
    "/usr/sbin/",
];

/// Characters that end a token of the command text.
const SEPARATORS: &str = ";|&<>()'\"=`$,";

/// Commands to which a lone `/` argument is text, not a path.
const SLASH_AS_TEXT: &[&str] = &["echo", "printf", "expr", "tr", "test", "["];

/// A command's options whose value is a delimiter (a lone `/` is text).
const DELIMITER_OPTIONS: &[(&[&str], &[&str])] = &[
    (AWKS, &["-F", "--field-separator"]),
    (&["cut"], &["-d", "--delimiter"]),
    (&["sort"], &["-t", "--field-separator"]),
    (&["paste"], &["-d", "--delimiters"]),
    (&["join"], &["-t"]),
];

const AWKS: &[&str] = &["awk", "gawk", "mawk", "nawk"];
const SEDS: &[&str] = &["sed", "gsed"];
const GREPS: &[&str] = &["grep", "egrep", "fgrep"];

/// How a command takes its program (or pattern): the options that give it
/// (`-e`), the options that give it from a file instead (`-f`: then no
/// operand is the program), and the other options that take a value.
struct ProgramOptions {
    program: &'static [&'static str],
    from_file: &'static [&'static str],
    valued: &'static [&'static str],
}

fn program_options(name: &str) -> Option<ProgramOptions> {
    if SEDS.contains(&name) {
        Some(ProgramOptions {
            program: &["-e", "--expression"],
            from_file: &["-f", "--file"],
            valued: &["-l", "--line-length"],
        })
    } else if AWKS.contains(&name) {
        Some(ProgramOptions {
            program: &[],
            from_file: &["-f", "--file"],
            valued: &["-F", "-v", "--field-separator", "--assign"],
        })
    } else if GREPS.contains(&name) {
        Some(ProgramOptions {
            program: &["-e", "--regexp"],
            from_file: &["-f", "--file"],
            valued: &[
                "-m",
                "-A",
                "-B",
                "-C",
                "-d",
                "-D",
                "--max-count",
                "--after-context",
                "--before-context",
                "--context",
            ],
        })
    } else {
        None
    }
}

/// One simple command of the text: its words, and whether it runs inside
/// a command substitution or subshell (whose output may be spliced into
/// another word: no exemptions there).
#[derive(Debug, Default)]
struct Command {
    words: Vec<Word>,
    nested: bool,
}

/// One shell word of the command text.
#[derive(Debug, Default)]
struct Word {
    /// Where it is in the text.
    span: Range<usize>,
    /// Its text with quotes and escapes removed.
    value: String,
    /// Whether any of it was quoted or escaped.
    quoted: bool,
    /// Whether an unquoted part of it holds `/`, `~` or a glob character
    /// (the shell would expand or read it as a path).
    loose: bool,
    /// Whether it holds a command substitution (`$(` or a backquote).
    substitution: bool,
    /// Whether it is the target of a redirection.
    redirect: bool,
}

/// Refuses a command naming a path outside the workspace.
pub(crate) fn check_paths(
    workspace: &Workspace,
    cwd: &Path,
    command: &str,
) -> Result<(), ToolError> {
    let text = mask_arithmetic(command);
    let commands = lex(&text);
    let exemptions_allowed = !defines_commands(&text);
    let mut masked = text.clone().into_bytes();
    let mut patterns: Vec<&str> = Vec::new();
    for command in &commands {
        let words = &command.words;
        let name = command_name(words);
        for (i, word) in words.iter().enumerate() {
            let exempt = exemptions_allowed
                && !command.nested
                && match classify(name, words, i) {
                    Some(Exempt::Text) => true,
                    Some(Exempt::Pattern) => {
                        patterns.push(&word.value);
                        true
                    }
                    None => false,
                };
            if exempt {
                masked[word.span.clone()].fill(b' ');
            } else {
                // unquoted too: `\/etc` or `/e"tc"` name /etc
                check_tokens(workspace, cwd, &word.value, Strictness::Strict)?;
            }
        }
    }
    check_tokens(
        workspace,
        cwd,
        &String::from_utf8_lossy(&masked),
        Strictness::Strict,
    )?;
    for pattern in patterns {
        check_tokens(workspace, cwd, pattern, Strictness::Pattern)?;
    }
    Ok(())
}

/// Why a word is not read as paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exempt {
    /// A lone `/` that is text (an operand of `echo`, a delimiter).
    Text,
    /// The program of `sed`/`awk` or the pattern of `grep`: checked as
    /// [`Strictness::Pattern`].
    Pattern,
}

/// How the tokens of a text are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strictness {
    /// Any absolute path outside the workspace is refused.
    Strict,
    /// Regular expressions: refused only for what exists outside, or a
    /// new name in an existing directory other than `/`.
    Pattern,
}

fn classify(name: Option<(usize, &str)>, words: &[Word], i: usize) -> Option<Exempt> {
    let word = &words[i];
    let (start, name) = name?;
    if i == start || word.redirect || word.substitution {
        return None;
    }
    if word.value == "/" {
        let previous = i
            .checked_sub(1)
            .map(|p| &words[p])
            .filter(|p| !p.redirect)
            .map(|p| p.value.as_str());
        let delimiter = DELIMITER_OPTIONS.iter().any(|(commands, options)| {
            commands.contains(&name) && previous.is_some_and(|p| options.contains(&p))
        });
        return (SLASH_AS_TEXT.contains(&name) || delimiter).then_some(Exempt::Text);
    }
    let only_slashes = word.value.chars().all(|c| c == '/');
    (word.quoted && !word.loose && !only_slashes && is_program(name, words, start, i))
        .then_some(Exempt::Pattern)
}

/// Whether word `i` is the program of `sed`/`awk` or the pattern of
/// `grep` (whose name is word `start`).
fn is_program(name: &str, words: &[Word], start: usize, i: usize) -> bool {
    let Some(opts) = program_options(name) else {
        return false;
    };
    let mut given = false;
    let mut first_operand = None;
    let mut options_end = false;
    let mut j = start + 1;
    while j < words.len() {
        let w = &words[j];
        if w.redirect {
            j += 1;
            continue;
        }
        let v = w.value.as_str();
        if options_end || !v.starts_with('-') || v == "-" {
            first_operand.get_or_insert(j);
        } else if v == "--" {
            options_end = true;
        } else if opts.program.contains(&v) {
            given = true;
            if j + 1 == i {
                return true;
            }
            j += 1;
        } else if opts.from_file.contains(&v) {
            given = true;
            j += 1;
        } else if opts.valued.contains(&v) {
            j += 1;
        }
        j += 1;
    }
    !given && first_operand == Some(i)
}

/// The command's name: where its first word is that is neither an
/// assignment nor a redirection target, and that word's base name.
fn command_name(words: &[Word]) -> Option<(usize, &str)> {
    let assignment = |w: &Word| w.value.contains('=') && !w.value.starts_with('=') && !w.quoted;
    let (at, first) = words
        .iter()
        .enumerate()
        .find(|(_, w)| !w.redirect && !assignment(w))?;
    Some((at, first.value.rsplit('/').next().unwrap_or(&first.value)))
}

/// Whether the text defines a function or an alias (after which a name
/// like `echo` may run anything).
fn defines_commands(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(off) = text[i..].find('(') {
        let open = i + off;
        let after = text[open + 1..].trim_start();
        let before = text[..open].trim_end();
        if after.starts_with(')')
            && before
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            return true;
        }
        i = open + 1;
        if i >= bytes.len() {
            break;
        }
    }
    text.split(|c: char| c.is_whitespace() || ";|&(){}".contains(c))
        .any(|w| w == "alias" || w == "function")
}

/// The text with every `/` inside an arithmetic expansion `$(( … ))`
/// replaced by a space (division, not a path). Only a real expansion is
/// masked: not one in single quotes, escaped or in a comment, and not one
/// holding quotes, escapes, a command substitution or a line break (where
/// the reading could be wrong).
fn mask_arithmetic(command: &str) -> String {
    let bytes = command.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    let mut single = false;
    let mut double = false;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\\' if !single => i += 1,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single
                && !double
                && (i == 0 || bytes[i - 1].is_ascii_whitespace() || bytes[i - 1] == b';') =>
            {
                // a comment, to the end of the line
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'$' if !single && bytes[i..].starts_with(b"$((") => {
                if let Some(end) = arithmetic_end(bytes, i + 3) {
                    let inner = &bytes[i + 3..end];
                    let plain = !inner.windows(2).any(|w| w == b"$(")
                        && !inner
                            .iter()
                            .any(|c| matches!(c, b'\'' | b'"' | b'\\' | b'`' | b'\n' | b'#'));
                    if plain {
                        for c in &mut out[i + 3..end] {
                            if *c == b'/' {
                                *c = b' ';
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    // only ASCII bytes were replaced by ASCII bytes
    String::from_utf8(out).unwrap_or_else(|_| command.to_owned())
}

/// Where the `))` closing an arithmetic expansion whose text starts at
/// `start` begins.
fn arithmetic_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 2usize;
    for (k, b) in bytes[start..].iter().enumerate() {
        match b {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 1 {
                    // `))` closes it; `)` followed by anything else does not
                    return (bytes.get(start + k + 1) == Some(&b')')).then_some(start + k);
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits the text into commands of shell words. Not a full shell parser:
/// what it misreads is checked strictly (exemptions need a word it
/// understood in a position it recognised).
fn lex(text: &str) -> Vec<Command> {
    let mut lexer = Lexer::default();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            ' ' | '\t' => lexer.end_word(at),
            '\n' | ';' | '|' | '&' | '(' | ')' | '`' => {
                lexer.end_word(at);
                match c {
                    '(' => lexer.depth += 1,
                    ')' => lexer.depth = lexer.depth.saturating_sub(1),
                    '`' => lexer.in_backquote = !lexer.in_backquote,
                    _ => {}
                }
                lexer.end_command();
            }
            '<' | '>' => {
                lexer.end_word(at);
                lexer.redirect_next = true;
            }
            _ => {
                let w = lexer.word.get_or_insert_with(|| Word {
                    span: at..at,
                    ..Word::default()
                });
                match c {
                    '\'' => {
                        w.quoted = true;
                        for (_, q) in chars.by_ref() {
                            if q == '\'' {
                                break;
                            }
                            w.value.push(q);
                        }
                    }
                    '"' => {
                        w.quoted = true;
                        while let Some((_, q)) = chars.next() {
                            match q {
                                '"' => break,
                                '\\' => {
                                    if let Some((_, e)) = chars.next() {
                                        if !matches!(e, '"' | '\\' | '$' | '`' | '\n') {
                                            w.value.push('\\');
                                        }
                                        w.value.push(e);
                                    }
                                }
                                '`' => {
                                    w.substitution = true;
                                    w.value.push(q);
                                }
                                '$' if chars.peek().is_some_and(|(_, n)| *n == '(') => {
                                    w.substitution = true;
                                    w.value.push(q);
                                }
                                _ => w.value.push(q),
                            }
                        }
                    }
                    '\\' => {
                        w.quoted = true;
                        if let Some((_, e)) = chars.next() {
                            w.value.push(e);
                        }
                    }
                    _ => {
                        if matches!(c, '/' | '~' | '*' | '?' | '[' | '{' | '}') {
                            w.loose = true;
                        }
                        if c == '$' && chars.peek().is_some_and(|(_, n)| *n == '(') {
                            w.substitution = true;
                        }
                        w.value.push(c);
                    }
                }
            }
        }
    }
    lexer.end_word(text.len());
    lexer.end_command();
    lexer.done
}

/// The state of [`lex`].
#[derive(Default)]
struct Lexer {
    done: Vec<Command>,
    command: Command,
    word: Option<Word>,
    redirect_next: bool,
    /// Open parentheses (subshells, substitutions) around the position.
    depth: usize,
    in_backquote: bool,
}

impl Lexer {
    fn end_word(&mut self, end: usize) {
        if let Some(mut w) = self.word.take() {
            w.span.end = end;
            w.redirect = std::mem::take(&mut self.redirect_next);
            self.command.nested |= self.depth > 0 || self.in_backquote;
            self.command.words.push(w);
        }
    }

    fn end_command(&mut self) {
        self.redirect_next = false;
        let command = std::mem::take(&mut self.command);
        if !command.words.is_empty() {
            self.done.push(command);
        }
    }
}

/// Refuses the first token of `text` that names a path outside the workspace.
fn check_tokens(
    workspace: &Workspace,
    cwd: &Path,
    text: &str,
    strictness: Strictness,
) -> Result<(), ToolError> {
    let tokens = text.split(|c: char| c.is_whitespace() || SEPARATORS.contains(c));
    for token in tokens.filter(|t| !t.is_empty()) {
        // a quoted `~` is not expanded (and is awk's match operator)
        let outside = if token.starts_with('~') {
            strictness == Strictness::Strict
        } else if token.starts_with('/') {
            !allowed_outside(token)
                && workspace.resolve(token).is_err()
                && match strictness {
                    Strictness::Strict => true,
                    Strictness::Pattern => names_something(token),
                }
        } else if token == ".."
            || token.starts_with("../")
            || token.contains("/../")
            || token.ends_with("/..")
        {
            let joined = cwd.join(token);
            workspace.resolve(&joined.to_string_lossy()).is_err()
        } else {
            false
        };
        if outside {
            return Err(ToolError::new(
                format!("the command names {token:?}, which is outside the workspace"),
                "work with paths inside the workspace (relative paths are resolved from it)",
            ));
        }
    }
    Ok(())
}

fn allowed_outside(token: &str) -> bool {
    ALLOWED_OUTSIDE
        .iter()
        .any(|a| token == a.trim_end_matches('/') || (a.ends_with('/') && token.starts_with(a)))
}

/// Whether an absolute token of a regular expression would name a real
/// place: something that exists, or a new name in an existing directory
/// other than the root. Lone slashes and `/word/` (a regex between
/// slashes, with no such directory) do not.
fn names_something(token: &str) -> bool {
    if token.trim_end_matches('/').is_empty() {
        return false;
    }
    let path = Path::new(token);
    if path.symlink_metadata().is_ok() {
        return true;
    }
    !token.ends_with('/')
        && path
            .parent()
            .is_some_and(|p| p != Path::new("/") && p.symlink_metadata().is_ok())
}

#[cfg(test)]
#[path = "shell_paths_tests.rs"]
mod tests;

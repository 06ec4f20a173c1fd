//! The Shell tool's path check: a command naming a path outside the
//! workspace is refused before it runs.
//!
//! Every token of the command text that starts with `/` or `~`, or walks
//! out with `..`, is refused unless it resolves inside the workspace or is
//! one of [`ALLOWED_OUTSIDE`]. `~` and `~/…` are the workspace root, as
//! the tool runs commands with HOME set to it (shell.rs): they are judged
//! like the path after them (`cd ~`, `ls ~/` pass, `ls ~/../..` is
//! refused); `~user`, `~+` and `~-` (also after a `:`, as in
//! `PATH=x:~root/bin`) are refused. Four places where a `/` is not a path
//! are told apart by reading the command as shell words (quotes,
//! operators, redirections, the command each word belongs to;
//! shell_paths_words.rs):
//!
//! - inside arithmetic `$(( … ))` (without a command substitution in it),
//!   `/` is division;
//! - a word that is exactly `/` is not a path as an argument of `echo`,
//!   `printf`, `expr`, `tr`, `test` or `[`, nor as the value of a delimiter
//!   option (`awk -F /`, `cut -d /`, `sort -t /`, `paste -d /` or
//!   `paste -sd /`, `join -t /`, `cut --delimiter=/`), nor as the pattern
//!   of `grep` (`grep -c / file`; after `-e` or `-f`, also in a cluster as
//!   `-re x`, every operand is a file: `grep -re x /` is refused);
//! - the quoted program of `sed` or `awk`, or pattern of `grep` (`sed "s/
//!   /_/g"`, `awk '/^#/ {next}'`, `grep -r "/api/v1" src`) is regular
//!   expressions: a token in it is refused only if it names something that
//!   exists outside the workspace (`/etc/passwd`, `/usr/`), or a new name in
//!   an existing directory other than `/` (`print > "/tmp/out"`). Lone
//!   slashes and made-up names at the root (`/_/g`) pass;
//! - a text, that is a quoted argument holding a space (a message, a
//!   program's text: `git commit -m "a/b and c / d"`, `python3 -c
//!   "print(6 / 2)"`): a run of slashes standing alone between two other
//!   words of it is an operator or a separator. The argument reaches its
//!   program as one word, so as a path it would be a relative one; only
//!   something that splits it into words again could make that slash the
//!   root. The rest of a text is checked as strictly as any word (`-m "see
//!   /etc/hosts"`, `"open('/etc/x')"` are refused), and a slash with no
//!   word on one side is a path (`cat "/ x"`, `"ls /"`), so a text that
//!   starts as a path is one (`cat "/etc/pass wd"`). Texts get no
//!   exemption when the command text names anything that splits text into
//!   words again ([`SPLITTERS`]: a shell or `eval` running it as shell
//!   code, `sh -c "ls / x"`, `echo "ls / x" | sh`; `xargs`, `read`,
//!   `export`, `for`…), nor in an assignment (`m="a / b"; ls $m`) or
//!   `printf -v`, whose variable an unquoted `$m` splits again.
//!
//! A variable's value is not in the text: a path going up after one
//! (`$PWD/..`), or starting with one the text does not set to a checked
//! value (`$A/x`), is refused (shell_paths_vars.rs).
//!
//! Everything outside the exempt words is still checked token by token,
//! so a word the lexer misreads is checked strictly, never exempted. A
//! program's text can still compute a path (`chr(47)`), as a command can
//! through a variable: the check catches paths written out.
//!
//! A redirection target is never exempt (`echo hi > /x` is refused), nor a
//! word of a command whose name could be redefined in the same text (a
//! function or alias definition turns the exemptions off), nor a word of a
//! command substitution or subshell (its output may be split into words).
//! This is a guard against a model naming paths outside the workspace, not
//! a sandbox: see docs/security.md.

use std::ops::Range;
use std::path::Path;

use crate::tools::ToolError;
use crate::tools::Workspace;
use options::delimiter_given;
use options::delimiter_option;
use options::is_program;
use words::Command;
use words::Word;
use words::lex;
use words::mask_arithmetic;

#[path = "shell_paths_options.rs"]
mod options;
#[path = "shell_paths_vars.rs"]
mod vars;
#[path = "shell_paths_words.rs"]
mod words;

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

/// Programs and builtins that split a text into words again: those that
/// run a string as shell code (`sh -c CODE`, `eval CODE`, `su -c CODE`,
/// `sudo -s CODE`, `ssh HOST CODE`, `watch CODE`, `trap CODE EXIT`, `env -S
/// CODE`…) or read it from a pipe (`echo … | sh`), and those that split
/// their input or store a text in a variable an unquoted `$v` splits
/// (`xargs`, `read`, `export v=…`, `for v in …`). The shells are those of
/// safety/shell_words.rs.
const SPLITTERS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "ash",
    "mksh",
    "fish",
    "csh",
    "tcsh",
    "eval",
    "su",
    "runuser",
    "sudo",
    "doas",
    "flock",
    "script",
    "watch",
    "env",
    "ssh",
    "trap",
    "tmux",
    "screen",
    "parallel",
    "expect",
    "xargs",
    "read",
    "mapfile",
    "readarray",
    "set",
    "export",
    "declare",
    "local",
    "readonly",
    "typeset",
    "let",
    "for",
    "select",
];

/// Refuses a command naming a path outside the workspace.
pub(crate) fn check_paths(
    workspace: &Workspace,
    cwd: &Path,
    command: &str,
) -> Result<(), ToolError> {
    let text = mask_arithmetic(command);
    let commands = lex(&text);
    let exemptions_allowed = !defines_commands(&text);
    let texts_allowed = !splits_again(&commands);
    // the tokens below would read `$PWD/..` as the relative `PWD/..`
    let judged = vars::check_expansions(workspace, cwd, &text, &commands, !texts_allowed)?;
    let mut masked = text.clone().into_bytes();
    for span in judged {
        masked[span].fill(b' ');
    }
    let mut patterns: Vec<&str> = Vec::new();
    for command in &commands {
        let words = &command.words;
        let name = command_name(words);
        for (i, word) in words.iter().enumerate() {
            let exempt = if exemptions_allowed && !command.nested {
                classify(&text[word.span.clone()], name, words, i, texts_allowed)
            } else {
                None
            };
            match exempt {
                Some(Exempt::Text) => {}
                Some(Exempt::Pattern) => patterns.push(&word.value),
                Some(Exempt::Spaced) => {
                    check_tokens(
                        workspace,
                        cwd,
                        &mask_lone_slashes(&word.value),
                        Strictness::Strict,
                    )?;
                }
                // unquoted too: `\/etc` or `/e"tc"` name /etc
                None => check_tokens(workspace, cwd, &word.value, Strictness::Strict)?,
            }
            if exempt.is_some() {
                masked[word.span.clone()].fill(b' ');
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

/// Why a word is not read as paths (all of it or some of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exempt {
    /// A lone `/` that is text (an operand of `echo`, a delimiter, grep's
    /// pattern).
    Text,
    /// The program of `sed`/`awk` or the pattern of `grep`: checked as
    /// [`Strictness::Pattern`].
    Pattern,
    /// A quoted argument holding a space: checked strictly but for the
    /// runs of slashes standing alone between two of its words
    /// ([`mask_lone_slashes`]).
    Spaced,
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

/// Why word `i` of a command (whose raw text is `raw`) is exempt, if it is.
fn classify(
    raw: &str,
    name: Option<(usize, &str)>,
    words: &[Word],
    i: usize,
    texts_allowed: bool,
) -> Option<Exempt> {
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
        let text = SLASH_AS_TEXT.contains(&name)
            || previous.is_some_and(|p| delimiter_option(name, p))
            || is_program(name, words, start, i);
        return text.then_some(Exempt::Text);
    }
    if delimiter_given(name, &word.value) {
        return Some(Exempt::Text);
    }
    let only_slashes = word.value.chars().all(|c| c == '/');
    if word.quoted && !word.loose && !only_slashes && is_program(name, words, start, i) {
        return Some(Exempt::Pattern);
    }
    // an assignment stores the text for an unquoted `$v` to split again
    let assignment = raw.split_once('=').is_some_and(|(name, _)| is_name(name));
    (texts_allowed
        && i > start
        && !assignment
        && word.quoted
        && word.value.contains(char::is_whitespace))
    .then_some(Exempt::Spaced)
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

/// Whether the text may split a text into words again: a word of it
/// names one of [`SPLITTERS`] (its base name, wherever it is: `timeout 5
/// sh -c`, `find -exec sh -c`), or a `printf` stores its output in a
/// variable (`-v`).
fn splits_again(commands: &[Command]) -> bool {
    commands.iter().any(|c| {
        let printf_v = command_name(&c.words).is_some_and(|(_, name)| name == "printf")
            && c.words.iter().any(|w| w.value.starts_with("-v"));
        printf_v
            || c.words.iter().any(|w| {
                let base = w.value.rsplit('/').next().unwrap_or(&w.value);
                SPLITTERS.contains(&base)
            })
    })
}

/// Whether `name` is a shell variable name.
fn is_name(name: &str) -> bool {
    name.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A text with every run of slashes that stands alone between two other
/// of its words (`1 / 2`, `6 // 4`, `and / or`) replaced by spaces: an
/// operator or a separator. One at either end stays (`ls /`).
fn mask_lone_slashes(text: &str) -> String {
    let mut chunks: Vec<Range<usize>> = Vec::new();
    let mut open: Option<usize> = None;
    for (at, c) in text.char_indices() {
        match (c.is_whitespace(), open) {
            (true, Some(from)) => {
                chunks.push(from..at);
                open = None;
            }
            (false, None) => open = Some(at),
            (true, None) | (false, Some(_)) => {}
        }
    }
    if let Some(from) = open {
        chunks.push(from..text.len());
    }
    let mut out = text.to_owned();
    let inner = chunks.len().saturating_sub(1);
    for chunk in chunks.iter().take(inner).skip(1) {
        if text[chunk.clone()].bytes().all(|b| b == b'/') {
            out.replace_range(chunk.clone(), &" ".repeat(chunk.len()));
        }
    }
    out
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

/// Refuses the first token of `text` that names a path outside the workspace.
fn check_tokens(
    workspace: &Workspace,
    cwd: &Path,
    text: &str,
    strictness: Strictness,
) -> Result<(), ToolError> {
    let tokens = text.split(|c: char| c.is_whitespace() || SEPARATORS.contains(c));
    for token in tokens.filter(|t| !t.is_empty()) {
        let outside = if let Some(after) = token.strip_prefix('~') {
            // a regex's `~` is awk's match operator
            strictness == Strictness::Strict && !home_inside(workspace, after)
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
        // an assignment expands `~` after each `:` too (`PATH=x:~u/bin`)
        let outside = outside
            || (strictness == Strictness::Strict
                && token
                    .split(':')
                    .skip(1)
                    .filter_map(|part| part.strip_prefix('~'))
                    .any(|after| !home_inside(workspace, after)));
        if outside {
            return Err(ToolError::new(
                format!("the command names {token:?}, which is outside the workspace"),
                "work with paths inside the workspace (relative paths are resolved from it)",
            ));
        }
    }
    Ok(())
}

/// Whether `~` followed by `after` stays in the workspace. The Shell tool
/// runs commands with HOME set to the workspace root, so `~` is the root
/// and `~/x` is `x` in it (`~/../x` is not); `~user`, `~+` and `~-` are
/// another user's home, $PWD and $OLDPWD, which the text does not show.
/// A quoted `~` is not expanded but names `~` in the working directory,
/// inside too unless `..` walks out: judged the same way.
fn home_inside(workspace: &Workspace, after: &str) -> bool {
    let Some(path) = after.strip_prefix('/') else {
        return after.is_empty();
    };
    let path = path.trim_start_matches('/');
    path.is_empty() || workspace.resolve(path).is_ok()
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

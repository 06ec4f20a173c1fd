//! Which word of a command the path check may read as text: the value of
//! a delimiter option (`cut -d /`, `paste -sd /`), or the program of `sed`
//! or `awk` or the pattern of `grep`, found by reading the command's
//! options as getopt does (clusters, attached values, `--`).

use super::words::Word;

/// An option whose value is a delimiter (a lone `/` is text there).
struct Delimiter {
    commands: &'static [&'static str],
    short: char,
    long: &'static str,
    /// The command's single-letter options that take no value: they may
    /// come before `short` in one cluster (`paste -sd /`). A letter that
    /// takes a value would take the rest (`cut -fd /`: `/` is a file).
    flags: &'static str,
}

const DELIMITERS: &[Delimiter] = &[
    Delimiter {
        commands: AWKS,
        short: 'F',
        long: "--field-separator",
        flags: "",
    },
    Delimiter {
        commands: &["cut"],
        short: 'd',
        long: "--delimiter",
        flags: "nsz",
    },
    Delimiter {
        commands: &["sort"],
        short: 't',
        long: "--field-separator",
        flags: "bcCdfghiMmnRrsuVz",
    },
    Delimiter {
        commands: &["paste"],
        short: 'd',
        long: "--delimiters",
        flags: "sz",
    },
    Delimiter {
        commands: &["join"],
        short: 't',
        long: "",
        flags: "iz",
    },
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
            // gawk's -E is -f that also ends the options
            from_file: &["-f", "--file", "-E", "--exec"],
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

/// What an option word of a command with a program does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OptionKind {
    /// Gives the program (`-e`).
    Program,
    /// Gives the program from a file (`-f`).
    FromFile,
    /// Takes some other value (`-m 2`).
    Valued,
}

impl ProgramOptions {
    /// The value-taking option an option word holds, and whether its value
    /// is in the same word (`-e/x/`, `--regexp=x`, `-rex`) rather than the
    /// next one (`-e x`, `-re x`). A short cluster is read as getopt reads
    /// it: flags up to the first letter that takes a value, which takes the
    /// rest of the word.
    fn option(&self, word: &str) -> Option<(OptionKind, bool)> {
        let kind = |option: &str| {
            if self.program.contains(&option) {
                Some(OptionKind::Program)
            } else if self.from_file.contains(&option) {
                Some(OptionKind::FromFile)
            } else if self.valued.contains(&option) {
                Some(OptionKind::Valued)
            } else {
                None
            }
        };
        if word.starts_with("--") {
            let (option, attached) = match word.split_once('=') {
                Some((option, _)) => (option, true),
                None => (word, false),
            };
            return kind(option).map(|k| (k, attached));
        }
        let letters = word.strip_prefix('-')?;
        letters.char_indices().find_map(|(at, letter)| {
            let attached = at + letter.len_utf8() < letters.len();
            kind(&format!("-{letter}")).map(|k| (k, attached))
        })
    }
}

/// Whether `option` (the word before a lone `/`) is a delimiter option of
/// command `name`: `-d`, `--delimiter`, or a cluster of value-less flags
/// ending in the delimiter's letter (`-sd`).
pub(super) fn delimiter_option(name: &str, option: &str) -> bool {
    DELIMITERS
        .iter()
        .filter(|d| d.commands.contains(&name))
        .any(|d| {
            if option.starts_with("--") {
                return !d.long.is_empty() && option == d.long;
            }
            option.strip_prefix('-').is_some_and(|letters| {
                letters
                    .strip_suffix(d.short)
                    .is_some_and(|before| before.chars().all(|c| d.flags.contains(c)))
            })
        })
}

/// Whether `word` is a long delimiter option given `/` (`--delimiter=/`).
pub(super) fn delimiter_given(name: &str, word: &str) -> bool {
    word.split_once('=').is_some_and(|(option, value)| {
        value == "/"
            && DELIMITERS
                .iter()
                .any(|d| d.commands.contains(&name) && !d.long.is_empty() && option == d.long)
    })
}

/// Whether word `i` is the program of `sed`/`awk` or the pattern of
/// `grep` (whose name is word `start`). An option it does not know is
/// taken for a flag: if it takes a value (`--exclude-dir /`), the word
/// taken for the program is that value, and the real program after it is
/// checked as a file would be; a file is never taken for the program.
pub(super) fn is_program(name: &str, words: &[Word], start: usize, i: usize) -> bool {
    let Some(opts) = program_options(name) else {
        return false;
    };
    let mut given = false;
    let mut first_operand = None;
    let mut options_end = false;
    let mut j = start + 1;
    while j < words.len() {
        let w = &words[j];
        j += 1;
        if w.redirect {
            continue;
        }
        let v = w.value.as_str();
        if options_end || !v.starts_with('-') || v == "-" {
            first_operand.get_or_insert(j - 1);
            continue;
        }
        if v == "--" {
            options_end = true;
            continue;
        }
        let Some((kind, attached)) = opts.option(v) else {
            continue;
        };
        match kind {
            OptionKind::Program | OptionKind::FromFile => given = true,
            OptionKind::Valued => {}
        }
        if !attached {
            if kind == OptionKind::Program && j == i {
                return true;
            }
            // the value is the next word
            j += 1;
        }
    }
    !given && first_operand == Some(i)
}

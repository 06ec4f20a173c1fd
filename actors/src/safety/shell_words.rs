//! Reading a command's words: where the program starts after wrappers
//! (`sudo`, `env`, `nohup`, `timeout`, `xargs`...), and flags versus
//! positional arguments.

/// Where the program of a command starts, after assignments, keywords
/// and wrappers (`sudo`, `env A=b`, `nohup`, `timeout 5`, `xargs -n1`...);
/// and whether it runs as another user.
pub(crate) fn program_start(words: &[String]) -> (usize, bool) {
    let mut i = 0;
    let mut elevated = false;
    let value_flags =
        |w: &str, flags: &str| w.len() == 2 && w.starts_with('-') && flags.contains(&w[1..]);
    while let Some(w) = words.get(i) {
        let w = w.as_str();
        let assignment = w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !name.as_bytes()[0].is_ascii_digit()
        });
        if assignment
            || matches!(
                w,
                "!" | "{"
                    | "}"
                    | "if"
                    | "then"
                    | "else"
                    | "elif"
                    | "fi"
                    | "do"
                    | "done"
                    | "while"
                    | "until"
                    | "time"
                    | "exec"
                    | "command"
                    | "builtin"
                    | "nohup"
                    | "setsid"
                    | "unbuffer"
                    | "chronic"
            )
        {
            i += 1;
            continue;
        }
        let skip_flags = |mut j: usize, takes_value: &str| {
            while let Some(f) = words.get(j) {
                if f == "--" {
                    return j + 1;
                }
                if !f.starts_with('-') || f.len() == 1 {
                    break;
                }
                j += if value_flags(f, takes_value) { 2 } else { 1 };
            }
            j
        };
        match w {
            "sudo" | "doas" => {
                elevated = true;
                i = skip_flags(i + 1, "ugpCDrtUh");
            }
            "env" => {
                let mut j = skip_flags(i + 1, "uCS");
                while words
                    .get(j)
                    .is_some_and(|a| a.contains('=') && !a.starts_with('='))
                {
                    j += 1;
                }
                if j >= words.len() {
                    return (i, elevated);
                }
                i = j;
            }
            "nice" | "ionice" | "stdbuf" | "xargs" | "watch" | "strace" | "ltrace" => {
                i = skip_flags(i + 1, "ncpIiLPsaEdoeO");
            }
            "timeout" => {
                i = skip_flags(i + 1, "sk") + 1;
            }
            _ => return (i, elevated),
        }
    }
    (i, elevated)
}

/// The file name of a program path.
pub(crate) fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Positional arguments: words not starting with `-` (all after `--`),
/// skipping the value of a flag in `takes_value` (single letters).
pub(crate) fn positionals<'a>(args: &'a [String], takes_value: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut rest = false;
    while let Some(a) = args.get(i) {
        if rest || !a.starts_with('-') || a == "-" {
            out.push(a.as_str());
        } else if a == "--" {
            rest = true;
        } else if a.len() == 2 && takes_value.contains(&a[1..]) {
            i += 1;
        }
        i += 1;
    }
    out
}

/// Whether a short-flag cluster (`-rf`) holds any of `letters`.
pub(crate) fn has_short(args: &[String], letters: &str) -> bool {
    args.iter().any(|a| {
        a.starts_with('-')
            && !a.starts_with("--")
            && a.len() > 1
            && a[1..].bytes().all(|b| b.is_ascii_alphabetic())
            && a[1..].chars().any(|c| letters.contains(c))
    })
}

/// Whether `flag` is one of the words.
pub(crate) fn has(args: &[String], flag: &str) -> bool {
    args.iter().any(|a| a == flag)
}

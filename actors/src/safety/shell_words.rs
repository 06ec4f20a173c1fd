//! Reading a command's words: where the program starts after wrappers
//! (`sudo`, `env`, `nohup`, `timeout`, `xargs`, `flock`...), the shell code
//! a wrapper runs (`sh -c`, `flock -c`, `script -c`, `watch`), and flags
//! versus positional arguments.

/// Shells.
pub(crate) const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "csh", "tcsh",
];

/// Where the program of a command starts, after assignments, keywords
/// and wrappers (`sudo`, `env A=b`, `nohup`, `timeout 5`, `xargs -n1`,
/// `flock lk`...); and whether it runs as another user. A wrapper given
/// its command as one string of shell code (`flock lk -c CODE`,
/// `script -c CODE`, `watch CODE`, `env -S CODE`) is the program itself:
/// [`inline_shell`] gives its code.
pub(crate) fn program_start(words: &[String]) -> (usize, bool) {
    let mut i = 0;
    let mut elevated = false;
    while let Some(w) = words.get(i) {
        let w = w.as_str();
        if is_assignment(w)
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
            )
        {
            i += 1;
            continue;
        }
        let next = match basename(w) {
            "time" => skip_flags(words, i + 1, "fo", &["--format", "--output"]),
            "exec" => skip_flags(words, i + 1, "a", &[]),
            "command" | "builtin" | "nohup" | "setsid" | "unbuffer" | "chronic" | "torsocks"
            | "catchsegv" | "busybox" => skip_flags(words, i + 1, "", &[]),
            "sudo" | "doas" => {
                elevated = true;
                skip_flags(
                    words,
                    i + 1,
                    "ugpCDrtUhRT",
                    &[
                        "--user",
                        "--group",
                        "--prompt",
                        "--chdir",
                        "--close-from",
                        "--role",
                        "--type",
                        "--host",
                        "--other-user",
                        "--chroot",
                        "--command-timeout",
                    ],
                )
            }
            "env" => {
                if env_split_string(&words[i + 1..]).is_some() {
                    return (i, elevated);
                }
                let mut j = skip_flags(words, i + 1, "uCS", &["--unset", "--chdir"]);
                while words
                    .get(j)
                    .is_some_and(|a| a.contains('=') && !a.starts_with('='))
                {
                    j += 1;
                }
                if j >= words.len() {
                    return (i, elevated);
                }
                j
            }
            // more launchers that run the command after them (QA: a
            // script behind `taskset 1`, `setarch x86_64`, `chrt -o 0`,
            // `setpriv`, `prlimit`, `unshare -U` ran unreviewed)
            "taskset" => {
                if words[i + 1..]
                    .iter()
                    .any(|a| a == "--pid" || is_cluster_with(a, 'p'))
                {
                    return (i, elevated);
                }
                // its mask or CPU list, then the command
                skip_flags(words, i + 1, "", &[]) + 1
            }
            "chrt" => {
                if words[i + 1..].iter().any(|a| {
                    a == "--pid"
                        || a == "--max"
                        || is_cluster_with(a, 'p')
                        || is_cluster_with(a, 'm')
                }) {
                    return (i, elevated);
                }
                // its priority, then the command
                skip_flags(
                    words,
                    i + 1,
                    "TPD",
                    &["--sched-runtime", "--sched-period", "--sched-deadline"],
                ) + 1
            }
            "setpriv" => skip_flags(
                words,
                i + 1,
                "",
                &[
                    "--reuid",
                    "--regid",
                    "--ruid",
                    "--rgid",
                    "--euid",
                    "--egid",
                    "--groups",
                    "--inh-caps",
                    "--ambient-caps",
                    "--bounding-set",
                    "--securebits",
                    "--pdeathsig",
                    "--selinux-label",
                    "--apparmor-profile",
                    "--landlock-access",
                    "--landlock-rule",
                ],
            ),
            "prlimit" => {
                if words[i + 1..]
                    .iter()
                    .any(|a| a == "--pid" || a.starts_with("--pid=") || is_cluster_with(a, 'p'))
                {
                    return (i, elevated);
                }
                skip_flags(words, i + 1, "", &["--output"])
            }
            "unshare" => skip_flags(
                words,
                i + 1,
                "S",
                &[
                    "--setuid",
                    "--setgid",
                    "--propagation",
                    "--setgroups",
                    "--map-user",
                    "--map-group",
                    "--root",
                    "--wd",
                ],
            ),
            "setarch" => skip_flags(words, i + 2, "", &[]),
            "linux32" | "linux64" | "i386" | "x86_64" => skip_flags(words, i + 1, "", &[]),
            "nice" => skip_flags(words, i + 1, "n", &["--adjustment"]),
            "ionice" => skip_flags(words, i + 1, "cnpPu", &["--class", "--classdata"]),
            "stdbuf" => skip_flags(words, i + 1, "ioe", &["--input", "--output", "--error"]),
            "xargs" => skip_flags(
                words,
                i + 1,
                "adEILnPs",
                &[
                    "--arg-file",
                    "--delimiter",
                    "--max-lines",
                    "--max-args",
                    "--max-procs",
                    "--max-chars",
                    "--process-slot-var",
                ],
            ),
            "strace" | "ltrace" => skip_flags(words, i + 1, "abeEIoOpPsSuXAFLnw", &[]),
            "proxychains" | "proxychains4" => skip_flags(words, i + 1, "f", &[]),
            "timeout" => skip_flags(words, i + 1, "sk", &["--signal", "--kill-after"]) + 1,
            "watch" => {
                let args = &words[i + 1..];
                if !args
                    .iter()
                    .any(|a| a == "--exec" || is_cluster_with(a, 'x'))
                {
                    return (i, elevated);
                }
                skip_flags(words, i + 1, "n", &["--interval"])
            }
            "flock" => {
                // flock [options] FILE COMMAND... | FILE -c CODE | FD
                let file = skip_flags(
                    words,
                    i + 1,
                    "wE",
                    &["--wait", "--timeout", "--conflict-exit-code"],
                );
                match words.get(file + 1).map(String::as_str) {
                    None | Some("-c" | "--command") => return (i, elevated),
                    Some(_) => file + 1,
                }
            }
            "script" => {
                // util-linux `script -c CODE [file]`; BSD `script [-q] FILE COMMAND...`
                let args = &words[i + 1..];
                if script_code(args).is_some() {
                    return (i, elevated);
                }
                let file = skip_flags(words, i + 1, "EIOBTmFt", &["--log-io", "--echo"]);
                if file + 1 >= words.len() {
                    return (i, elevated);
                }
                file + 1
            }
            _ => return (i, elevated),
        };
        i = next;
    }
    (i, elevated)
}

/// `NAME=value` (a shell variable assignment).
pub(crate) fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit()
    })
}

/// From `from`: past the flags of a wrapper, where `short` lists the
/// single-letter flags that take the next word as their value and `long`
/// the long ones (`--opt=value` is one word anyway). Stops at the first
/// word that is not a flag, and after `--`.
fn skip_flags(words: &[String], from: usize, short: &str, long: &[&str]) -> usize {
    let mut j = from;
    while let Some(f) = words.get(j) {
        if f == "--" {
            return j + 1;
        }
        if !f.starts_with('-') || f.len() == 1 {
            break;
        }
        let takes_value = (f.len() == 2 && short.contains(&f[1..])) || long.contains(&f.as_str());
        j += if takes_value { 2 } else { 1 };
    }
    j
}

/// A short-flag cluster (`-qc`) holding `letter`.
fn is_cluster_with(word: &str, letter: char) -> bool {
    word.starts_with('-')
        && !word.starts_with("--")
        && word.len() > 1
        && word[1..].bytes().all(|b| b.is_ascii_alphabetic())
        && word[1..].contains(letter)
}

/// The shell code a command runs as one string, if it takes one:
/// `sh -c CODE`, `su -c CODE`, `flock FILE -c CODE`, `script -c CODE`,
/// `watch CODE...` (joined, as watch does), `eval WORDS...`,
/// `env -S CODE`. `program` is the basename of the program word.
pub(crate) fn inline_shell(program: &str, args: &[String]) -> Option<String> {
    match program {
        p if SHELLS.contains(&p) => {
            let at = args.iter().position(|a| is_cluster_with(a, 'c'))?;
            args[at + 1..].iter().find(|a| !a.starts_with('-')).cloned()
        }
        "su" | "runuser" => args.iter().enumerate().find_map(|(i, a)| {
            if a == "--command" || is_cluster_with(a, 'c') {
                args.get(i + 1).cloned()
            } else {
                a.strip_prefix("--command=").map(str::to_owned)
            }
        }),
        "flock" => {
            let at = args.iter().position(|a| a == "-c" || a == "--command")?;
            args.get(at + 1).cloned()
        }
        "script" => script_code(args),
        "watch"
            if !args
                .iter()
                .any(|a| a == "--exec" || is_cluster_with(a, 'x')) =>
        {
            let words = args.to_vec();
            let start = skip_flags(&words, 0, "n", &["--interval"]);
            (start < words.len()).then(|| words[start..].join(" "))
        }
        "eval" => (!args.is_empty()).then(|| args.join(" ")),
        "env" => env_split_string(args),
        _ => None,
    }
}

/// `script -c CODE`, `--command CODE`, `--command=CODE`, `-qc CODE`,
/// `-cCODE`.
fn script_code(args: &[String]) -> Option<String> {
    for (i, a) in args.iter().enumerate() {
        if a == "--command" {
            return args.get(i + 1).cloned();
        }
        if let Some(code) = a.strip_prefix("--command=") {
            return Some(code.to_owned());
        }
        if a.starts_with('-') && !a.starts_with("--") && a.len() > 1 {
            if let Some(at) = a.find('c') {
                let rest = &a[at + 1..];
                return if rest.is_empty() {
                    args.get(i + 1).cloned()
                } else {
                    Some(rest.to_owned())
                };
            }
        } else if !a.starts_with('-') {
            // options end at the file name (BSD form: the command follows)
            return None;
        }
    }
    None
}

/// `env -S STRING` / `--split-string=STRING`: a command line in one word.
fn env_split_string(args: &[String]) -> Option<String> {
    for (i, a) in args.iter().enumerate() {
        if a == "-S" || a == "--split-string" {
            return args.get(i + 1).cloned();
        }
        if let Some(s) = a
            .strip_prefix("--split-string=")
            .or_else(|| a.strip_prefix("-S"))
        {
            return Some(s.to_owned());
        }
        if !a.starts_with('-') {
            return None;
        }
    }
    None
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

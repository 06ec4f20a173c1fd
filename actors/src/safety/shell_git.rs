//! Git in shell commands: force-pushes and remote deletions, settings
//! that make git run commands (`git config core.fsmonitor "…"`,
//! `git -c alias.x='!…' x`, `GIT_CONFIG_KEY_0=…`), and the commands git
//! runs for its caller (`git submodule foreach`, `rebase --exec`,
//! `bisect run`, `filter-branch --tree-filter`, `GIT_SSH_COMMAND=…`),
//! which are reviewed like commands of their own.

use super::shell_words::has_short;
use super::shell_words::positionals;

/// What review makes of a git command.
#[derive(Debug, Default)]
pub(crate) struct GitReview {
    /// Concerns a person must decide on.
    pub(crate) asks: Vec<String>,
    /// Shell code git would run: reviewed like a command.
    pub(crate) code: Vec<String>,
    /// Addresses a remote is pointed at by a setting (`remote.NAME.url`,
    /// `pushurl`, the base of a `url.BASE.insteadOf` rewrite), however
    /// it is set; `None` for one review cannot see (`--config-env`):
    /// checked against the allowlist (`shell_rules.rs`), as a later `git
    /// push NAME` names no host.
    pub(crate) remotes: Vec<Option<String>>,
}

/// Values of a command-running setting that run nothing of concern: the
/// usual ways to turn a pager or an editor off.
const HARMLESS_VALUES: &[&str] = &["cat", "less", "less -R", "less -FRX", "more", "true", ":"];

/// Environment variables whose value git runs as a command.
const COMMAND_VARIABLES: &[&str] = &[
    "GIT_SSH_COMMAND",
    "GIT_SSH",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_EXTERNAL_DIFF",
    "GIT_ASKPASS",
    "GIT_PROXY_COMMAND",
];

/// Reviews `git ARGS`.
pub(crate) fn git(args: &[String]) -> GitReview {
    let mut review = GitReview::default();
    // global options, up to the subcommand
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let a = a.as_str();
        let next = args.get(i + 1).map(String::as_str);
        match a {
            "-c" => {
                if let Some(kv) = next {
                    let (key, value) = kv.split_once('=').unwrap_or((kv, "true"));
                    setting(key, Some(value), &mut review);
                }
                i += 2;
            }
            "--config-env" => {
                if let Some(kv) = next {
                    setting(kv.split_once('=').map_or(kv, |(k, _)| k), None, &mut review);
                }
                i += 2;
            }
            "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix" => i += 2,
            _ => {
                if let Some(kv) = a.strip_prefix("--config-env=") {
                    setting(kv.split_once('=').map_or(kv, |(k, _)| k), None, &mut review);
                } else if let Some(dir) = a.strip_prefix("--exec-path=") {
                    review.asks.push(format!(
                        "makes git run its programs from {dir} (--exec-path)"
                    ));
                } else if !a.starts_with('-') {
                    break;
                }
                i += 1;
            }
        }
    }
    // an `ext::` remote is a command git runs (`ext::sh -c cat% .env`,
    // `%` quoting a space): QA, 2026-12-05, run unasked once
    // `protocol.allow` let it
    for a in args {
        if let Some(at) = a.find("ext::") {
            let command = a[at + "ext::".len()..]
                .replace("% ", " ")
                .replace("%%", "%");
            review.asks.push(
                "uses an ext:: remote, which runs a command (git's ext transport)".to_owned(),
            );
            review.code.push(command);
        }
    }
    let Some((sub, rest)) = args.get(i..).and_then(<[String]>::split_first) else {
        return review;
    };
    match sub.as_str() {
        // the programs git runs on the other side, given as shell code
        // (QA, 2026-12-05: `git push --receive-pack='cat .env > x; …'`
        // ran unreviewed)
        "push" | "send-pack" => {
            push(rest, &mut review);
            review
                .code
                .extend(option_values(rest, None, "receive-pack"));
            review.code.extend(option_values(rest, None, "exec"));
        }
        "clone" => {
            review
                .code
                .extend(option_values(rest, Some('u'), "upload-pack"));
            // settings written into the new repository's config: they run
            // at its next git command (`core.fsmonitor`)
            for kv in option_values(rest, Some('c'), "config") {
                let (key, value) = kv.split_once('=').unwrap_or((kv.as_str(), "true"));
                setting(key, Some(value), &mut review);
            }
            // a template's hooks are copied in and run (`post-checkout`)
            if !option_values(rest, None, "template").is_empty() {
                review.asks.push(
                    "clones with a template directory, whose hooks git copies in and runs \
                     (git clone --template)"
                        .to_owned(),
                );
            }
        }
        "fetch" | "pull" | "fetch-pack" | "ls-remote" | "archive" => {
            review.code.extend(option_values(rest, None, "upload-pack"));
            review.code.extend(option_values(rest, None, "exec"));
        }
        "config" => config(rest, &mut review),
        "submodule" => {
            if let Some(at) = rest.iter().position(|a| a == "foreach") {
                let code: Vec<&str> = rest[at + 1..]
                    .iter()
                    .map(String::as_str)
                    .skip_while(|a| a.starts_with("--"))
                    .collect();
                if !code.is_empty() {
                    review.code.push(code.join(" "));
                }
            }
        }
        "rebase" => review.code.extend(values_of(rest, "-x", "--exec")),
        "bisect" if rest.first().is_some_and(|a| a == "run") && rest.len() > 1 => {
            review.code.push(rest[1..].join(" "));
        }
        "filter-branch" => {
            for (i, a) in rest.iter().enumerate() {
                if a.starts_with("--") && a.ends_with("-filter") {
                    review.code.extend(rest.get(i + 1).cloned());
                }
            }
        }
        "difftool" | "mergetool" => review.code.extend(values_of(rest, "-x", "--extcmd")),
        _ => {}
    }
    review
}

/// Assignments among a command's words (`GIT_SSH_COMMAND=… git fetch`,
/// `export GIT_CONFIG_KEY_0=…`) that make git run commands.
pub(crate) fn git_environment(words: &[String]) -> GitReview {
    let mut review = GitReview::default();
    let value_of = |name: &str| {
        words
            .iter()
            .find_map(|w| w.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
    };
    for word in words {
        let Some((name, value)) = word.split_once('=') else {
            continue;
        };
        if COMMAND_VARIABLES.contains(&name) && !value.trim().is_empty() {
            review.code.push(value.to_owned());
        } else if let Some(n) = name.strip_prefix("GIT_CONFIG_KEY_") {
            setting(
                value,
                value_of(&format!("GIT_CONFIG_VALUE_{n}")),
                &mut review,
            );
        } else if name == "GIT_CONFIG_PARAMETERS" {
            // 'key'='value' 'key2'='value2'
            for pair in value.split("' '") {
                let pair = pair.trim_matches(|c: char| c == '\'' || c.is_whitespace());
                // `'key'='value'`, or the older `'key=value'` git still
                // reads (QA, 2026-12-05: an alias run unasked)
                let (key, v) = pair
                    .split_once("'='")
                    .or_else(|| pair.split_once('='))
                    .unwrap_or((pair, "true"));
                setting(key, Some(v), &mut review);
            }
        } else if name == "GIT_ALLOW_PROTOCOL" && value.split(':').any(|p| p == "ext") {
            review.asks.push(
                "allows git's ext:: transport, which runs commands (GIT_ALLOW_PROTOCOL)".to_owned(),
            );
        }
    }
    review
}

/// `git config …` that sets a value.
fn config(rest: &[String], review: &mut GitReview) {
    const READS: &[&str] = &[
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--get-color",
        "--get-colorbool",
        "-l",
        "--list",
        "--unset",
        "--unset-all",
        "--remove-section",
        "--rename-section",
        "-e",
        "--edit",
    ];
    const VALUED: &[&str] = &[
        "-f",
        "--file",
        "--blob",
        "--type",
        "--default",
        "--comment",
        "--value",
    ];
    let mut pos = Vec::new();
    let mut i = 0;
    while let Some(a) = rest.get(i) {
        if READS.contains(&a.as_str()) {
            return;
        }
        if VALUED.contains(&a.as_str()) {
            i += 1;
        } else if !a.starts_with('-') || a == "-" {
            pos.push(a.as_str());
        }
        i += 1;
    }
    let (key, value) = match pos.as_slice() {
        ["set", key, value, ..] => (*key, *value),
        [
            "get" | "list" | "unset" | "remove-section" | "rename-section" | "edit",
            ..,
        ] => return,
        [key, value, ..] => (*key, *value),
        _ => return,
    };
    setting(key, Some(value), review);
}

/// A setting given a value (`None`: from somewhere review cannot see).
fn setting(key: &str, value: Option<&str>, review: &mut GitReview) {
    if let Some(address) = remote_address(key, value) {
        review.remotes.push(address);
    }
    let Some(what) = runs_commands(key, value) else {
        return;
    };
    let shown = value.map_or_else(
        || "a value review cannot see".to_owned(),
        |v| {
            let v: String = v.chars().take(80).collect();
            format!("{v:?}")
        },
    );
    review
        .asks
        .push(format!("sets the git setting {key} to {shown}: {what}"));
    if let Some(v) = value {
        let code = v.trim_start().strip_prefix('!').unwrap_or(v);
        review.code.push(code.to_owned());
    }
}

/// The address a setting points a remote at, if it is such a setting:
/// `remote.NAME.url` and `pushurl` name it in their value, a
/// `url.BASE.insteadOf` (or `pushInsteadOf`) rewrite in its key (the
/// addresses starting with the value go to BASE). `Some(None)`: such a
/// setting whose value review cannot see.
fn remote_address(key: &str, value: Option<&str>) -> Option<Option<String>> {
    let lower = key.to_ascii_lowercase();
    if lower.starts_with("remote.") && (lower.ends_with(".url") || lower.ends_with(".pushurl")) {
        return Some(value.map(str::to_owned));
    }
    let base = key.get(4..).filter(|_| lower.starts_with("url."))?;
    [".insteadof", ".pushinsteadof"].iter().find_map(|suffix| {
        let end = base.len().checked_sub(suffix.len())?;
        lower
            .ends_with(suffix)
            .then(|| base.get(..end).map(str::to_owned))
            .flatten()
            .map(Some)
    })
}

/// Why a setting makes git run something, if it does.
fn runs_commands(key: &str, value: Option<&str>) -> Option<&'static str> {
    if value.is_some_and(|v| {
        let v = v.trim();
        HARMLESS_VALUES.contains(&v)
            || matches!(
                v.to_ascii_lowercase().as_str(),
                "true" | "false" | "yes" | "no" | "on" | "off" | "1" | "0" | ""
            )
    }) {
        return None;
    }
    let key = key.to_ascii_lowercase();
    let (section, rest) = key.split_once('.')?;
    let last = key.rsplit('.').next().unwrap_or("");
    let runs = "git runs it as a command";
    match section {
        "core" => match rest {
            "fsmonitor"
            | "sshcommand"
            | "pager"
            | "editor"
            | "askpass"
            | "gitproxy"
            | "alternaterefscommand" => Some(runs),
            "hookspath" => Some("git runs the hooks it finds there"),
            _ => None,
        },
        "alias" => value
            .is_none_or(|v| v.trim_start().starts_with('!'))
            .then_some("the alias runs a shell command"),
        "filter" if matches!(last, "clean" | "smudge" | "process") => Some(runs),
        "diff" if matches!(last, "textconv" | "command") || rest == "external" => Some(runs),
        "merge" if last == "driver" => Some(runs),
        "difftool" | "mergetool" if last == "cmd" => Some(runs),
        // a plain name is one of git's own helpers (`store`, `cache`)
        "credential" if last == "helper" => value
            .is_none_or(|v| {
                let v = v.trim_start();
                v.starts_with('!') || v.split_whitespace().next().is_some_and(|w| w.contains('/'))
            })
            .then_some(runs),
        "sequence" if rest == "editor" => Some(runs),
        "gpg" if last == "program" => Some(runs),
        "pager" => Some(runs),
        "uploadpack" if rest == "packobjectshook" => Some(runs),
        "remote" if matches!(last, "uploadpack" | "receivepack") => Some(runs),
        "protocol" if rest == "ext.allow" => Some("lets ext:: remotes run commands"),
        // `always` lets every transport, ext:: among them
        "protocol" if rest == "allow" => value
            .is_none_or(|v| v.trim().eq_ignore_ascii_case("always"))
            .then_some("lets ext:: remotes run commands"),
        "include" if rest == "path" => Some("git reads more settings from that file"),
        "includeif" if last == "path" => Some("git reads more settings from that file"),
        _ => None,
    }
}

/// The values of an option given as `-x V` or `-xV` (with `short`),
/// `--long V` or `--long=V`, the long name also cut short as git takes it
/// (`--upload-pac`, `--receive`: here any start of three letters or
/// more). QA, 2026-12-05: `clone -u'…'` and `push --receive='…'` ran
/// their commands unreviewed.
fn option_values(args: &[String], short: Option<char>, long: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if let Some(given) = a.strip_prefix("--") {
            let (name, attached) = match given.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (given, None),
            };
            if name.len() >= 3 && long.starts_with(name) {
                match attached {
                    Some(value) => out.push(value.to_owned()),
                    None => {
                        out.extend(args.get(i + 1).cloned());
                        i += 1;
                    }
                }
            }
        } else if let (Some(letter), Some(rest)) = (short, a.strip_prefix('-'))
            && let Some(value) = rest.strip_prefix(letter)
        {
            if value.is_empty() {
                out.extend(args.get(i + 1).cloned());
                i += 1;
            } else {
                out.push(value.to_owned());
            }
        }
        i += 1;
    }
    out
}

/// The values of a flag given as `-x V`, `--long V` or `--long=V`.
fn values_of(args: &[String], short: &str, long: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a == short || a == long {
            out.extend(args.get(i + 1).cloned());
        } else if let Some(v) = a.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            out.push(v.to_owned());
        }
    }
    out
}

/// `git push` that overwrites or deletes remote history.
fn push(rest: &[String], review: &mut GitReview) {
    let force = rest.iter().any(|a| {
        matches!(a.as_str(), "--force" | "--mirror" | "--delete" | "--prune")
            || a.starts_with("--force-with-lease")
    }) || has_short(rest, "fd");
    let refspec = positionals(rest, "o")
        .iter()
        .skip(1)
        .any(|r| r.starts_with('+') || r.starts_with(':'));
    if force || refspec {
        review
            .asks
            .push("force-pushes or deletes remote history (git push --force)".to_owned());
    }
}

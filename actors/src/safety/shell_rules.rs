//! The rules for shell commands: what makes a command `deny` (no
//! legitimate use in a workspace: wiping the file system, formatting or
//! overwriting disks, fork bombs, shutting the machine down) or `ask`
//! (reading credentials, dumping the environment, sending data to paste
//! sites or hosts off the allowlist, piping downloads into an interpreter,
//! force-pushing, world-writable permissions, running a script the same
//! command writes, git settings that run commands, inline interpreter code
//! that uses the network), applied to every simple command of the parsed
//! line, inside substitutions and groups, through wrappers (`sudo`,
//! `timeout`, `xargs`, `flock`, `script -c`, `watch`, `sh -c`...) and to
//! the scripts it would run.

use super::credential_glob;
use super::credential_glob::PatternKind;
use super::patterns;
use super::patterns::HostAllowlist;
use super::review::Findings;
use super::review::ResolvedScript;
use super::review::ScriptKind;
use super::review::scan_text;
use super::review::sensitive_write_target;
use super::shell_git;
use super::shell_git::GitReview;
use super::shell_inline;
use super::shell_net;
use super::shell_parse::Script;
use super::shell_parse::SimpleCommand;
use super::shell_parse::parse;
use super::shell_words::SHELLS;
use super::shell_words::basename;
use super::shell_words::has;
use super::shell_words::has_short;
use super::shell_words::inline_shell;
use super::shell_words::positionals;
use super::shell_words::program_start;

/// Deepest nesting of `sh -c`, `eval` and substitutions reviewed.
const MAX_DEPTH: u8 = 6;

/// Programs that fetch from the network (their output is downloaded data).
const DOWNLOADERS: &[&str] = &[
    "curl", "wget", "fetch", "aria2c", "http", "https", "xh", "nc", "ncat", "netcat", "socat",
];

/// Other interpreters that run a program given on stdin.
const INTERPRETERS: &[&str] = &[
    "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "Rscript",
];

/// System directories: deleting or opening them up is never a workspace task.
const SYSTEM_DIRS: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/opt",
    "/proc",
    "/root",
    "/sbin",
    "/srv",
    "/sys",
    "/usr",
    "/var",
    "/usr/bin",
    "/usr/lib",
    "/usr/local",
    "/var/lib",
];

/// Devices a command may write to: they discard data or print it to the
/// terminal, and touch no disk. Any other `/dev/` path written is denied.
/// Redirections that only read (`< /dev/urandom`) are not held to it.
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/tty",
];

/// Reviews a command line and the scripts it would run.
pub(crate) fn review_command(
    command: &str,
    scripts: &[ResolvedScript],
    allow: &HostAllowlist,
    findings: &mut Findings,
) {
    fork_bomb(command, findings);
    let parsed = parse(command);
    walk(&parsed, allow, findings, 0);
    let mut written = Vec::new();
    collect_written(&parsed, &mut written, 0);
    for w in &written {
        if let Some(what) = sensitive_write_target(w) {
            findings.ask(format!("changes {what} ({w})"));
        }
    }
    for script in scripts {
        let name = file_name(&script.path);
        match script.kind {
            ScriptKind::Shell => {
                let mut inner = Findings::default();
                fork_bomb(&script.text, &mut inner);
                walk(&parse(&script.text), allow, &mut inner, 1);
                findings.absorb(inner, &script.origin);
            }
            ScriptKind::Program => {
                let mut inner = Findings::default();
                scan_text(&script.text, allow, true, &mut inner);
                findings.absorb(inner, &script.origin);
            }
            ScriptKind::TooLarge => findings.ask(format!(
                "{} runs {}, which is too large to review",
                script.origin, script.path
            )),
            ScriptKind::Binary | ScriptKind::Missing => {}
        }
        if written.iter().any(|w| file_name(w) == name) {
            findings.ask(format!(
                "the command writes {} and runs it, so the review cannot see what will run",
                script.path
            ));
        }
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `f(){ f|f& };f` in any spelling.
fn fork_bomb(text: &str, findings: &mut Findings) {
    if !text.contains("(") {
        return;
    }
    let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let mut from = 0;
    while let Some(at) = squeezed[from..].find("(){") {
        let at = from + at;
        let name_start = squeezed[..at]
            .rfind([';', '&', '|', '{', '}', '(', ')'])
            .map_or(0, |p| p + 1);
        let name = &squeezed[name_start..at];
        if !name.is_empty() && squeezed[at..].contains(&format!("{name}|{name}&")) {
            findings.deny("is a fork bomb");
            return;
        }
        from = at + 3;
    }
}

fn is_root_like(target: &str) -> bool {
    let t = target
        .strip_suffix('*')
        .unwrap_or(target)
        .trim_end_matches('/');
    if t.is_empty() {
        return target.starts_with('/');
    }
    matches!(t, "~" | "$HOME" | "${HOME}" | "/." | "/..") || SYSTEM_DIRS.contains(&t)
}

/// Whether one of `nested` (a word's substitutions) is a bare `pwd`.
fn runs_pwd(nested: &[Script]) -> bool {
    nested.iter().any(|n| {
        n.commands
            .iter()
            .any(|c| c.words.first().is_some_and(|w| basename(w) == "pwd"))
    })
}

fn is_everything_here(target: &str) -> bool {
    if matches!(
        target,
        "." | "./" | "*" | "./*" | ".*" | ".." | "../" | "../*" | "~/*"
    ) {
        return true;
    }
    // the working directory by name (QA: `rm -rf $PWD`, `"$(pwd)"/`)
    let t = target.trim_end_matches('*').trim_end_matches('/');
    if matches!(t, "$PWD" | "${PWD}" | "$OLDPWD" | "${OLDPWD}") {
        return true;
    }
    // a pattern of wildcards alone matches every name here (QA: `rm -rf
    // ?*`, `[a-z]*` emptied the workspace unasked), and a path up and
    // back down may name the working directory itself (`../alice`)
    only_wildcards(target) || target.starts_with("../")
}

/// Whether `pattern` is made of wildcards alone (`?*`, `[a-z]*`, `*?`):
/// no literal character outside a bracket class.
fn only_wildcards(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    let mut any = false;
    while let Some(c) = chars.next() {
        match c {
            '*' | '?' => any = true,
            '[' => {
                // a class: up to its `]`
                if !chars.by_ref().any(|c| c == ']') {
                    return false;
                }
                any = true;
            }
            _ => return false,
        }
    }
    any
}

/// `find` tests that pick some files out of a tree: without any, `find
/// DIR -delete` deletes the whole of it.
const FIND_FILTERS: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-lname",
    "-ilname",
    "-newer",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-size",
    "-empty",
    "-user",
    "-group",
    "-perm",
    "-links",
    "-inum",
    "-samefile",
];

fn walk(script: &Script, allow: &HostAllowlist, f: &mut Findings, depth: u8) {
    if depth > MAX_DEPTH {
        f.ask("nests commands too deeply to review");
        return;
    }
    let mut pipeline = usize::MAX;
    let mut downloaded = false;
    // a `cd` to a place the review cannot tell (a pattern, a variable, a
    // substitution): the scripts named after it by relative path are not
    // the ones the review reads (QA: `cd d?; sh b.sh` was reviewed as
    // `./b.sh` and ran `d2/b.sh` unasked)
    let mut cd_unknown: Option<String> = None;
    for cmd in &script.commands {
        if cmd.pipeline != pipeline {
            pipeline = cmd.pipeline;
            downloaded = false;
        }
        for nested in &cmd.nested {
            walk(nested, allow, f, depth + 1);
        }
        redirects(cmd, f);
        let downloads = cmd.nested.iter().any(|n| contains_downloader(n, depth));
        let (start, elevated) = program_start(&cmd.words);
        // a secret copied into another variable is out of sight of the
        // rules that follow it by name (QA: `x=$FLEET_SECRET; echo $x |
        // rev` showed the model the secret, reversed, unasked)
        for word in &cmd.words[..start] {
            if let Some((_, value)) = word.split_once('=')
                && let Some(name) = patterns::secret_variable_in(value)
            {
                f.ask(format!(
                    "copies the secret ${name} into another variable, out of the review's sight"
                ));
            }
        }
        // a here-document holding a secret: fed to the program whole
        // (QA: `base64 <<EOF` of `$FLEET_SECRET` printed it encoded)
        if let Some(name) = cmd
            .stdin_text
            .as_deref()
            .and_then(patterns::secret_variable_in)
        {
            f.ask(format!("feeds the secret ${name} to a command as text"));
        }
        let Some(program) = cmd.words.get(start).map(|w| basename(w)) else {
            downloaded |= downloads;
            continue;
        };
        let args = &cmd.words[start + 1..];
        if program == "cd" {
            let dir = args
                .iter()
                .find(|a| !a.starts_with('-') || a.as_str() == "-");
            cd_unknown = dir
                .filter(|d| d.contains(['*', '?', '[', '$', '`']) || d.as_str() == "-")
                .map(|d| d.to_string())
                .or(cd_unknown.take());
        } else if let Some(dir) = &cd_unknown
            && runs_relative_script(&cmd.words[start], program, args)
        {
            f.ask(format!(
                "runs a script by relative path after `cd {dir}`, a directory the review cannot tell"
            ));
        }
        for (i, word) in cmd.words.iter().enumerate() {
            // an option's value after `=` (`grep -r --include=.env`), and
            // a `find -iname` pattern in any case (`-iname .ENV`), name
            // files too (QA, 2026-12-05: both read a secret unasked)
            let value = word
                .strip_prefix('-')
                .and_then(|w| w.split_once('='))
                .map(|(_, v)| v.to_owned());
            let folded = (program == "find"
                && i.checked_sub(1)
                    .and_then(|p| cmd.words.get(p))
                    .is_some_and(|p| matches!(p.as_str(), "-iname" | "-ipath" | "-iwholename")))
            .then(|| word.to_lowercase());
            for w in std::iter::once(word).chain(&value).chain(&folded) {
                if let Some(what) = patterns::credential_in(w) {
                    f.ask(format!("reads {what} ({word})"));
                } else if let Some(what) = credential_glob::credential_glob(w) {
                    f.ask(format!("reads {what} (the pattern {word} reaches them)"));
                }
            }
            // a pattern find or grep matches as they do, not as the shell
            let previous = i.checked_sub(1).and_then(|p| cmd.words.get(p));
            let tool_pattern = match previous.map(String::as_str) {
                Some("-name" | "-iname") if program == "find" => {
                    Some((word.to_lowercase(), PatternKind::Name))
                }
                Some("-path" | "-ipath" | "-wholename" | "-iwholename") if program == "find" => {
                    Some((word.to_lowercase(), PatternKind::Path))
                }
                Some("--include") => Some((word.clone(), PatternKind::Name)),
                _ => word
                    .strip_prefix("--include=")
                    .map(|v| (v.to_owned(), PatternKind::Name)),
            };
            if let Some((pattern, kind)) = tool_pattern
                && let Some(what) = credential_glob::tool_pattern(&pattern, kind)
            {
                f.ask(format!("reads {what} (the pattern {word} matches them)"));
            }
        }
        // a substitution is left as `$()` in its word: one running `pwd`
        // names the working directory (QA: `rm -rf "$(pwd)"` ran unasked)
        let named_pwd: Vec<String>;
        let rule_args = if program == "rm" && runs_pwd(&cmd.nested) {
            named_pwd = args.iter().map(|a| a.replace("$()", "$PWD")).collect();
            &named_pwd[..]
        } else {
            args
        };
        command_rules(program, rule_args, allow, f, depth);
        let inline = inline_shell(program, args);
        if let Some(code) = &inline {
            fork_bomb(code, f);
            walk(&parse(code), allow, f, depth + 1);
        }
        if let Some(code) = shell_inline::inline_code(program, args) {
            program_code(program, &code, allow, f, depth);
        }
        apply_git(shell_git::git_environment(&cmd.words), allow, f, depth);
        let runs_stdin = reads_program_from_stdin(program, args);
        if cmd.stage > 0 && downloaded && runs_stdin {
            f.ask(format!(
                "pipes a download into {program}, running code nobody reviewed"
            ));
        }
        let evaluates = SHELLS.contains(&program)
            || INTERPRETERS.contains(&program)
            || inline.is_some()
            || matches!(program, "eval" | "source" | ".");
        if evaluates && downloads {
            f.ask(format!(
                "runs downloaded code with {program}, code nobody reviewed"
            ));
        }
        if runs_stdin && let Some(body) = &cmd.stdin_text {
            if SHELLS.contains(&program) {
                walk(&parse(body), allow, f, depth + 1);
            } else {
                program_code(program, body, allow, f, depth);
            }
        }
        if elevated {
            f.ask(format!("runs {program} as another user (sudo)"));
        }
        downloaded |= downloads || DOWNLOADERS.contains(&program);
    }
}

/// Whether the command whose program word is `word` (basename
/// `program`) runs a script named by a relative path: `./x`, `dir/x`, or
/// a shell or interpreter given a file.
fn runs_relative_script(word: &str, program: &str, args: &[String]) -> bool {
    let relative = |w: &str| !w.starts_with('/') && !w.starts_with('-') && !w.is_empty();
    if word.contains('/') && relative(word) {
        return true;
    }
    (SHELLS.contains(&program)
        || INTERPRETERS.contains(&program)
        || matches!(program, "source" | "."))
        && args
            .iter()
            .find(|a| !a.starts_with('-'))
            .is_some_and(|a| relative(a))
}

/// Program code given inline to an interpreter (`python3 -c`, a
/// here-document): credentials and paste sites in it, network use, and
/// the commands it spawns.
fn program_code(program: &str, code: &str, allow: &HostAllowlist, f: &mut Findings, depth: u8) {
    scan_text(code, allow, true, f);
    if let Some(name) = patterns::secret_variable_in(code) {
        f.ask(format!(
            "hands the secret ${name} to inline {program} code, which may print it transformed"
        ));
    }
    if let Some(api) = shell_inline::environment_use(code) {
        // (QA: `os.environ["FLEET_SECRET"][::-1]`, `$ENV{...}` reversed,
        // awk's `ENVIRON` printed the secrets transformed, unasked)
        f.ask(format!(
            "runs inline {program} code that reads the environment ({api}), which holds secrets"
        ));
    }
    if let Some(what) = shell_inline::network_use(code) {
        f.ask(format!(
            "runs inline {program} code that uses the network ({what}), which the review cannot follow"
        ));
    }
    for command in shell_inline::spawned_commands(code) {
        walk(&parse(&command), allow, f, depth + 1);
    }
}

/// The concerns of a git command, and the commands git would run.
fn apply_git(review: GitReview, allow: &HostAllowlist, f: &mut Findings, depth: u8) {
    for reason in review.asks {
        f.ask(reason);
    }
    for address in &review.remotes {
        shell_net::remote_address(address.as_deref(), allow, f);
    }
    for code in review.code {
        walk(&parse(&code), allow, f, depth + 1);
    }
}

fn redirects(cmd: &SimpleCommand, f: &mut Findings) {
    for r in &cmd.redirects {
        let t = r.target.as_str();
        if r.writes() {
            // devices first: `/dev` is a system directory too, and the
            // harmless devices must not fall through to that rule
            if t.starts_with("/dev/") {
                if !WRITABLE_DEVICES.contains(&t) {
                    f.deny(format!("writes raw data to the device {t}"));
                }
            } else if SYSTEM_DIRS.iter().any(|d| t.starts_with(&format!("{d}/"))) {
                f.deny(format!("overwrites the system file {t}"));
            }
        }
        if let Some(what) = patterns::credential_in(t) {
            f.ask(format!("reads or writes {what} ({t})"));
        }
    }
}

fn contains_downloader(script: &Script, depth: u8) -> bool {
    depth <= MAX_DEPTH
        && script.commands.iter().any(|c| {
            let (start, _) = program_start(&c.words);
            let Some(program) = c.words.get(start).map(|w| basename(w)) else {
                return c.nested.iter().any(|n| contains_downloader(n, depth + 1));
            };
            DOWNLOADERS.contains(&program)
                || c.nested.iter().any(|n| contains_downloader(n, depth + 1))
                || inline_shell(program, &c.words[start + 1..])
                    .is_some_and(|code| contains_downloader(&parse(&code), depth + 1))
        })
}

/// Whether the program reads the code it runs from stdin (`sh`, `bash -s`,
/// `python3 -`), rather than from a file or `-c`.
fn reads_program_from_stdin(program: &str, args: &[String]) -> bool {
    if SHELLS.contains(&program) {
        if has_short(args, "c") {
            return false;
        }
        let pos = positionals(args, "oO");
        pos.is_empty() || pos[0] == "-" || has_short(args, "s")
    } else if INTERPRETERS.contains(&program) {
        if has(args, "-c") || has(args, "-m") || has(args, "-e") {
            return false;
        }
        let pos = positionals(args, "WX");
        pos.is_empty() || pos[0] == "-"
    } else {
        false
    }
}

fn command_rules(
    program: &str,
    args: &[String],
    allow: &HostAllowlist,
    f: &mut Findings,
    depth: u8,
) {
    // bash's indirect expansion reads the variable another names
    // (`x=ALICE_SECRET; echo "${!x}" | rev`): which one, no rule can tell
    // (QA: a bot's secret printed reversed, unasked)
    if args.iter().any(|a| a.contains("${!")) {
        f.ask("expands a variable another one names (${!…}), which may be a secret");
    }
    if shell_net::network_rules(program, args, allow, f) {
        return;
    }
    match program {
        "rm" => rm(args, f),
        p if p == "mkfs"
            || p.starts_with("mkfs.")
            || matches!(p, "mke2fs" | "mkswap" | "wipefs") =>
        {
            f.deny(format!("formats a file system ({p})"));
        }
        "fdisk" | "sfdisk" | "parted" | "gdisk" if args.iter().any(|a| a.starts_with("/dev/")) => {
            f.deny("repartitions a disk");
        }
        "dd" => {
            if let Some(of) = args.iter().find_map(|a| a.strip_prefix("of="))
                && of.starts_with("/dev/")
                && !WRITABLE_DEVICES.contains(&of)
            {
                f.deny(format!("writes raw data to the device {of} (dd)"));
            }
        }
        "shred" => {
            if args.iter().any(|a| a.starts_with("/dev/")) {
                f.deny("shreds a device");
            } else {
                f.ask("shreds files beyond recovery");
            }
        }
        "chmod" => chmod(args, f),
        "chown" | "chgrp" => {
            let recursive = has_short(args, "R") || has(args, "--recursive");
            if recursive
                && positionals(args, "")
                    .iter()
                    .skip(1)
                    .any(|t| is_root_like(t))
            {
                f.deny(format!("changes the owner of system files ({program} -R)"));
            }
        }
        "git" => {
            shell_net::git_push(args, allow, f);
            shell_net::git_remote(args, allow, f);
            apply_git(shell_git::git(args), allow, f, depth);
        }
        "shutdown" | "reboot" | "halt" | "poweroff" | "killall5" => {
            f.deny(format!("shuts down or disrupts the machine ({program})"));
        }
        "init" | "telinit" if args.first().is_some_and(|a| a == "0" || a == "6") => {
            f.deny("shuts down the machine");
        }
        "systemctl"
            if args
                .iter()
                .any(|a| matches!(a.as_str(), "poweroff" | "reboot" | "halt" | "kexec")) =>
        {
            f.deny("shuts down the machine");
        }
        "kill" | "pkill" if args.last().is_some_and(|a| a == "-1") => {
            f.deny("kills every process (kill -1)");
        }
        "crontab" if has(args, "-r") => f.ask("deletes the crontab"),
        "find" => find(args, allow, f, depth),
        // a hard link to a file whose change runs something later (a
        // shell start-up file, a git hook): a write through the other
        // name changes it, out of the review's sight (QA: `ln .bashrc
        // notes/x && echo … >> notes/x` changed .bashrc unasked). A
        // symbolic link is followed by the write's own check.
        "ln" | "cp" | "link"
            if program == "link"
                || (program == "ln" && !args.iter().any(|a| symbolic_flag(a)))
                || (program == "cp" && args.iter().any(|a| link_flag(a))) =>
        {
            // the file linked, or the link's new name (`link notes/y
            // .profile` makes .profile the same file as notes/y, which a
            // write then changes unasked: QA): either side
            for operand in args.iter().filter(|a| !a.starts_with('-')) {
                if let Some(what) = sensitive_write_target(operand) {
                    f.ask(format!(
                        "hard-links {what} ({operand}) with another name, through which a \
                         write changes it unseen"
                    ));
                }
            }
        }
        "mv" if args.last().is_some_and(|a| a == "/dev/null") => {
            f.ask("moves files to /dev/null (deletes them)");
        }
        "printenv" if args.is_empty() || args.iter().any(|a| patterns::is_secret_name(a)) => {
            f.ask("prints environment variables, which hold secrets");
        }
        "env" if inline_shell(program, args).is_none() => {
            f.ask("dumps the environment, which holds secrets");
        }
        "set" if args.is_empty() => f.ask("dumps the shell's variables, which hold secrets"),
        "export" if args.is_empty() || args.iter().all(|a| a == "-p") => {
            f.ask("dumps the environment, which holds secrets");
        }
        "declare" | "typeset" | "compgen" if args.iter().all(|a| a.starts_with('-')) => {
            f.ask("dumps the shell's variables, which hold secrets");
        }
        // `declare -p NAME` prints NAME's value (QA: a bot's secret read
        // so, reversed, unasked)
        "declare" | "typeset" if args.iter().any(|a| a.starts_with('-') && a.contains('p')) => {
            if let Some(name) = args
                .iter()
                .filter(|a| !a.starts_with('-'))
                .map(|a| a.split('=').next().unwrap_or_default())
                .find(|name| patterns::is_secret_name(name))
            {
                f.ask(format!("prints the secret ${name} ({program} -p)"));
            }
        }
        // printed as it is, or transformed first (QA: `expr substr
        // "$FLEET_SECRET" 1 12`, reversed, encoded: scrubbing the output
        // catches only the value as it is)
        "echo" | "printf" | "cat" | "expr" | "rev" | "base64" | "base32" | "basenc" | "od"
        | "xxd" | "hexdump" | "tr" | "fold" | "cut" | "tee" | "sed" | "awk" | "gawk" | "mawk" => {
            if let Some(name) = args.iter().find_map(|a| patterns::secret_variable_in(a)) {
                f.ask(format!("prints the secret ${name}"));
            }
            // awk's program is its first word, not a flag's value
            if matches!(program, "awk" | "gawk" | "mawk")
                && args.iter().any(|a| a.contains("ENVIRON"))
            {
                f.ask(format!(
                    "runs {program} code that reads the environment (ENVIRON), which holds secrets"
                ));
            }
        }
        "gpg" if args.iter().any(|a| a.starts_with("--export-secret")) => {
            f.ask("exports secret keys");
        }
        "security"
            if args
                .first()
                .is_some_and(|a| a.starts_with("find-") || a == "dump-keychain") =>
        {
            f.ask("reads the keychain");
        }
        p if INTERPRETERS.contains(&p)
            && args
                .iter()
                .any(|a| a == "http.server" || a == "SimpleHTTPServer") =>
        {
            f.ask("serves the workspace over HTTP");
        }
        "php" if has(args, "-S") => f.ask("serves the workspace over HTTP"),
        "su" | "runuser" => f.ask(format!("runs commands as another user ({program})")),
        _ => {}
    }
}

fn rm(args: &[String], f: &mut Findings) {
    if has(args, "--no-preserve-root") {
        f.deny("deletes the whole file system (rm --no-preserve-root)");
    }
    let recursive = has_short(args, "rR") || has(args, "--recursive");
    for target in positionals(args, "") {
        if is_root_like(target) {
            f.deny(format!("deletes {target}, a system or home directory"));
        } else if recursive && is_everything_here(target) {
            f.ask(format!("deletes everything in {target} (rm -r {target})"));
        }
    }
}

fn chmod(args: &[String], f: &mut Findings) {
    let recursive = has_short(args, "R") || has(args, "--recursive");
    let pos = positionals(args, "");
    let Some((mode, targets)) = pos.split_first() else {
        return;
    };
    if targets.iter().any(|t| is_root_like(t)) {
        f.deny(format!(
            "changes permissions of system files (chmod {mode})"
        ));
        return;
    }
    let world = mode.ends_with("777")
        || mode.ends_with("666")
        || matches!(*mode, "a+rwx" | "ugo+rwx" | "o+w" | "a+w" | "o+rwx");
    if recursive && world {
        f.ask(format!(
            "makes files writable by everyone (chmod -R {mode})"
        ));
    }
}

fn find(args: &[String], allow: &HostAllowlist, f: &mut Findings, depth: u8) {
    // no start path given (the first word a test): `.` (QA: `find
    // -delete` emptied the workspace unasked)
    let start = args
        .first()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-') && !matches!(*a, "(" | "!"))
        .unwrap_or(".");
    if has(args, "-delete") && is_root_like(start) {
        f.deny(format!("deletes files under {start} (find -delete)"));
    } else if has(args, "-delete")
        && is_everything_here(start)
        && !args.iter().any(|a| FIND_FILTERS.contains(&a.as_str()))
    {
        // (QA: `find . -delete` emptied the workspace unasked, where
        // `rm -r .` asks)
        f.ask(format!(
            "deletes everything in {start} (find {start} -delete)"
        ));
    }
    let mut i = 0;
    while i < args.len() {
        if matches!(args[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let end = args[i + 1..]
                .iter()
                .position(|a| matches!(a.as_str(), ";" | "\\;" | "+"))
                .map_or(args.len(), |p| i + 1 + p);
            let words: Vec<String> = args[i + 1..end]
                .iter()
                .filter(|w| *w != "{}")
                .cloned()
                .collect();
            let cmd = SimpleCommand {
                words,
                ..SimpleCommand::default()
            };
            walk(
                &Script {
                    commands: vec![cmd],
                },
                allow,
                f,
                depth + 1,
            );
            i = end;
        }
        i += 1;
    }
}

/// The files `command` writes, as its words name them (redirections, `tee`,
/// copy destinations, curl and wget outputs): the gate follows them
/// through the workspace's symlinks (`tools/gate_review.rs`), which the
/// rules, reading text only, cannot.
pub fn written_targets(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    collect_written(&parse(command), &mut out, 0);
    out
}

/// Files a command writes: redirections, `tee`, copy destinations, curl
/// and wget outputs (including the URL's file name for `-O`).
fn collect_written(script: &Script, out: &mut Vec<String>, depth: u8) {
    if depth > MAX_DEPTH {
        return;
    }
    for cmd in &script.commands {
        for n in &cmd.nested {
            collect_written(n, out, depth + 1);
        }
        out.extend(
            cmd.redirects
                .iter()
                .filter(|r| r.writes())
                .map(|r| r.target.clone()),
        );
        let (start, _) = program_start(&cmd.words);
        let Some(program) = cmd.words.get(start).map(|w| basename(w)) else {
            continue;
        };
        let args = &cmd.words[start + 1..];
        if let Some(code) = inline_shell(program, args) {
            collect_written(&parse(&code), out, depth + 1);
        }
        let url_names = || {
            args.iter()
                .filter(|a| a.contains("://"))
                .filter_map(|a| a.rsplit('/').next().map(str::to_owned))
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
        };
        match program {
            "tee" => out.extend(positionals(args, "").iter().map(|s| s.to_string())),
            "cp" | "mv" | "install" | "ln" => {
                out.extend(positionals(args, "tSm").last().map(|s| s.to_string()))
            }
            "dd" => out.extend(
                args.iter()
                    .filter_map(|a| a.strip_prefix("of=").map(str::to_owned)),
            ),
            "curl" => {
                for (i, a) in args.iter().enumerate() {
                    if a == "-o" || a == "--output" {
                        out.extend(args.get(i + 1).cloned());
                    }
                }
                if has_short(args, "O") || has(args, "--remote-name") {
                    out.extend(url_names());
                }
            }
            "wget" => {
                let named = args.iter().enumerate().find_map(|(i, a)| {
                    if a == "-O" || a == "--output-document" {
                        args.get(i + 1).cloned()
                    } else {
                        a.strip_prefix("--output-document=").map(str::to_owned)
                    }
                });
                match named {
                    Some(n) if n != "-" => out.push(n),
                    Some(_) => {}
                    None if !has_short(args, "O") => out.extend(url_names()),
                    None => {}
                }
            }
            "sed" if has_short(args, "i") => out.extend(
                positionals(args, "ef")
                    .iter()
                    .skip(1)
                    .map(|s| s.to_string()),
            ),
            _ => {}
        }
    }
}

/// Whether `arg` of `ln` asks for a symbolic link (`-s`, in a cluster of
/// short flags too, or `--symbolic`).
fn symbolic_flag(arg: &str) -> bool {
    arg == "--symbolic" || (arg.starts_with('-') && !arg.starts_with("--") && arg.contains('s'))
}

/// Whether `arg` of `cp` asks for hard links instead of copies (`-l`, in
/// a cluster of short flags too, or `--link`).
fn link_flag(arg: &str) -> bool {
    arg == "--link" || (arg.starts_with('-') && !arg.starts_with("--") && arg.contains('l'))
}

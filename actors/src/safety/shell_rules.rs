//! The rules for shell commands: what makes a command `deny` (no
//! legitimate use in a workspace: wiping the file system, formatting or
//! overwriting disks, fork bombs, shutting the machine down) or `ask`
//! (reading credentials, dumping the environment, sending data to paste
//! sites or hosts off the allowlist, piping downloads into an interpreter,
//! force-pushing, world-writable permissions, running a script the same
//! command writes), applied to every simple command of the parsed line,
//! inside substitutions and groups, and to the scripts it would run.

use super::patterns;
use super::patterns::HostAllowlist;
use super::review::Findings;
use super::review::ResolvedScript;
use super::review::ScriptKind;
use super::review::scan_text;
use super::shell_parse::Script;
use super::shell_parse::SimpleCommand;
use super::shell_parse::parse;

/// Deepest nesting of `sh -c`, `eval` and substitutions reviewed.
const MAX_DEPTH: u8 = 6;

/// Programs that fetch from the network (their output is downloaded data).
const DOWNLOADERS: &[&str] = &[
    "curl", "wget", "fetch", "aria2c", "http", "https", "xh", "nc", "ncat", "netcat", "socat",
];

/// Shells.
const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "csh", "tcsh",
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
    collect_written(&parsed, &mut written);
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
            .rfind(|c: char| matches!(c, ';' | '&' | '|' | '{' | '}' | '(' | ')'))
            .map_or(0, |p| p + 1);
        let name = &squeezed[name_start..at];
        if !name.is_empty() && squeezed[at..].contains(&format!("{name}|{name}&")) {
            findings.deny("is a fork bomb");
            return;
        }
        from = at + 3;
    }
}

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

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Positional arguments: words not starting with `-` (all after `--`),
/// skipping the value of a flag in `takes_value` (single letters).
fn positionals<'a>(args: &'a [String], takes_value: &str) -> Vec<&'a str> {
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
fn has_short(args: &[String], letters: &str) -> bool {
    args.iter().any(|a| {
        a.starts_with('-')
            && !a.starts_with("--")
            && a.len() > 1
            && a[1..].bytes().all(|b| b.is_ascii_alphabetic())
            && a[1..].chars().any(|c| letters.contains(c))
    })
}

fn has(args: &[String], flag: &str) -> bool {
    args.iter().any(|a| a == flag)
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

fn is_everything_here(target: &str) -> bool {
    matches!(
        target,
        "." | "./" | "*" | "./*" | ".*" | ".." | "../" | "../*" | "~/*"
    )
}

fn walk(script: &Script, allow: &HostAllowlist, f: &mut Findings, depth: u8) {
    if depth > MAX_DEPTH {
        f.ask("nests commands too deeply to review");
        return;
    }
    let mut pipeline = usize::MAX;
    let mut downloaded = false;
    for cmd in &script.commands {
        if cmd.pipeline != pipeline {
            pipeline = cmd.pipeline;
            downloaded = false;
        }
        for nested in &cmd.nested {
            walk(nested, allow, f, depth + 1);
        }
        redirects(cmd, f);
        let downloads = cmd.nested.iter().any(contains_downloader);
        let (start, elevated) = program_start(&cmd.words);
        let Some(program) = cmd.words.get(start).map(|w| basename(w)) else {
            downloaded |= downloads;
            continue;
        };
        let args = &cmd.words[start + 1..];
        for word in &cmd.words {
            if let Some(what) = patterns::credential_in(word) {
                f.ask(format!("reads {what} ({word})"));
            }
        }
        command_rules(program, args, allow, f, depth);
        let runs_stdin = reads_program_from_stdin(program, args);
        if cmd.stage > 0 && downloaded && runs_stdin {
            f.ask(format!(
                "pipes a download into {program}, running code nobody reviewed"
            ));
        }
        let evaluates = SHELLS.contains(&program)
            || INTERPRETERS.contains(&program)
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
                scan_text(body, allow, true, f);
            }
        }
        if elevated {
            f.ask(format!("runs {program} as another user (sudo)"));
        }
        downloaded |= downloads || DOWNLOADERS.contains(&program);
    }
}

fn redirects(cmd: &SimpleCommand, f: &mut Findings) {
    for r in &cmd.redirects {
        let t = r.target.as_str();
        if r.writes()
            && t.starts_with("/dev/")
            && !matches!(t, "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty")
        {
            f.deny(format!("writes raw data to the device {t}"));
        } else if r.writes() && SYSTEM_DIRS.iter().any(|d| t.starts_with(&format!("{d}/"))) {
            f.deny(format!("overwrites the system file {t}"));
        }
        if let Some(what) = patterns::credential_in(t) {
            f.ask(format!("reads or writes {what} ({t})"));
        }
    }
}

fn contains_downloader(script: &Script) -> bool {
    script.commands.iter().any(|c| {
        let (start, _) = program_start(&c.words);
        c.words
            .get(start)
            .is_some_and(|w| DOWNLOADERS.contains(&basename(w)))
            || c.nested.iter().any(contains_downloader)
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
                && !matches!(of, "/dev/null" | "/dev/stdout" | "/dev/stderr")
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
        "git" => git(args, f),
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
        "mv" if args.last().is_some_and(|a| a == "/dev/null") => {
            f.ask("moves files to /dev/null (deletes them)");
        }
        "printenv" => {
            if args.is_empty() || args.iter().any(|a| patterns::is_secret_name(a)) {
                f.ask("prints environment variables, which hold secrets");
            }
        }
        "env" => f.ask("dumps the environment, which holds secrets"),
        "set" if args.is_empty() => f.ask("dumps the shell's variables, which hold secrets"),
        "export" if args.is_empty() || args.iter().all(|a| a == "-p") => {
            f.ask("dumps the environment, which holds secrets");
        }
        "declare" | "typeset" | "compgen" if args.iter().all(|a| a.starts_with('-')) => {
            f.ask("dumps the shell's variables, which hold secrets");
        }
        "echo" | "printf" | "cat" => {
            if let Some(name) = args.iter().find_map(|a| patterns::secret_variable_in(a)) {
                f.ask(format!("prints the secret ${name}"));
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
        "curl" => curl(args, allow, f),
        "wget" => wget(args, allow, f),
        "nc" | "ncat" | "netcat" | "telnet" => netcat(program, args, allow, f),
        "socat" => {
            let hosts: Vec<String> = args.iter().flat_map(|a| socat_hosts(a)).collect();
            if hosts.is_empty() || hosts.iter().any(|h| !allow.allows(h)) {
                f.ask("opens a raw network connection (socat)");
            }
        }
        "scp" | "sftp" | "rsync" => copy(program, args, allow, f),
        "ssh" | "mosh" => {
            if let Some(host) = positionals(args, "bcDEeFIiJLlmOopQRSWw").first() {
                let host = host.rsplit('@').next().unwrap_or(host);
                if !allow.allows(host) {
                    f.ask(format!("connects to {host} over ssh (runs commands there)"));
                }
            }
        }
        "ftp" | "tftp" | "lftp" => {
            let host = positionals(args, "p").first().map(|h| h.to_string());
            if host.as_deref().is_none_or(|h| !allow.allows(h)) {
                f.ask(format!("opens an FTP connection ({program})"));
            }
        }
        "http" | "https" | "xh" => httpie(args, allow, f),
        "aws" | "gsutil" | "rclone" | "azcopy" => cloud_copy(program, args, f),
        p if INTERPRETERS.contains(&p)
            && args
                .iter()
                .any(|a| a == "http.server" || a == "SimpleHTTPServer") =>
        {
            f.ask("serves the workspace over HTTP");
        }
        "php" if has(args, "-S") => f.ask("serves the workspace over HTTP"),
        "su" | "runuser" => {
            f.ask(format!("runs commands as another user ({program})"));
            shell_code(args, allow, f, depth);
        }
        p if SHELLS.contains(&p) => shell_code(args, allow, f, depth),
        "eval" => walk(&parse(&args.join(" ")), allow, f, depth + 1),
        _ => {}
    }
}

/// `sh -c CODE`: the code is a command line of its own.
fn shell_code(args: &[String], allow: &HostAllowlist, f: &mut Findings, depth: u8) {
    let Some(at) = args.iter().position(|a| {
        a.starts_with('-')
            && !a.starts_with("--")
            && a[1..].bytes().all(|b| b.is_ascii_alphabetic())
            && a.contains('c')
    }) else {
        return;
    };
    if let Some(code) = args[at + 1..].iter().find(|a| !a.starts_with('-')) {
        fork_bomb(code, f);
        walk(&parse(code), allow, f, depth + 1);
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

fn git(args: &[String], f: &mut Findings) {
    let pos = positionals(args, "Cc");
    let Some((sub, rest)) = pos.split_first() else {
        return;
    };
    if *sub != "push" {
        return;
    }
    let after = args
        .iter()
        .position(|a| a == "push")
        .map_or(&args[..0], |i| &args[i + 1..]);
    let force = after.iter().any(|a| {
        matches!(a.as_str(), "--force" | "--mirror" | "--delete" | "--prune")
            || a.starts_with("--force-with-lease")
    }) || has_short(after, "fd");
    let refspec = rest
        .iter()
        .skip(1)
        .any(|r| r.starts_with('+') || r.starts_with(':'));
    if force || refspec {
        f.ask("force-pushes or deletes remote history (git push --force)");
    }
}

fn find(args: &[String], allow: &HostAllowlist, f: &mut Findings, depth: u8) {
    let start = args.first().map(String::as_str).unwrap_or(".");
    if has(args, "-delete") && is_root_like(start) {
        f.deny(format!("deletes files under {start} (find -delete)"));
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

/// Asks about an upload to `hosts` unless every host is allowed.
fn upload(what: &str, hosts: &[String], allow: &HostAllowlist, f: &mut Findings) {
    if hosts.is_empty() {
        f.ask(format!("{what} to a host the review cannot see"));
    }
    for host in hosts {
        if allow.allows(host) {
            continue;
        }
        if patterns::is_paste_host(host) {
            f.ask(format!(
                "{what} to {host}, a paste site or anonymous file host"
            ));
        } else {
            f.ask(format!(
                "{what} to {host}, which is not on the review allowlist"
            ));
        }
    }
}

fn curl(args: &[String], allow: &HostAllowlist, f: &mut Findings) {
    let mut sends = has_short(args, "dFT");
    for (i, a) in args.iter().enumerate() {
        let a = a.as_str();
        if a.starts_with("--data")
            || a.starts_with("--form")
            || matches!(a, "--upload-file" | "--json")
        {
            sends = true;
        }
        let method = if matches!(a, "-X" | "--request") {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix("-X")
                .or_else(|| a.strip_prefix("--request="))
        };
        if method
            .is_some_and(|m| matches!(m.to_ascii_uppercase().as_str(), "POST" | "PUT" | "PATCH"))
        {
            sends = true;
        }
    }
    if sends {
        let hosts: Vec<String> = args.iter().flat_map(|a| patterns::url_hosts(a)).collect();
        upload("sends data", &hosts, allow, f);
    }
}

fn wget(args: &[String], allow: &HostAllowlist, f: &mut Findings) {
    let sends = args.iter().any(|a| {
        a.starts_with("--post-")
            || a.starts_with("--body-")
            || a.strip_prefix("--method=").is_some_and(|m| {
                matches!(m.to_ascii_uppercase().as_str(), "POST" | "PUT" | "PATCH")
            })
    });
    if sends {
        let hosts: Vec<String> = args.iter().flat_map(|a| patterns::url_hosts(a)).collect();
        upload("sends data", &hosts, allow, f);
    }
}

fn netcat(program: &str, args: &[String], allow: &HostAllowlist, f: &mut Findings) {
    if has_short(args, "l") || has(args, "--listen") {
        f.ask(format!("listens for network connections ({program})"));
    }
    if has_short(args, "ec") || has(args, "--exec") || has(args, "--sh-exec") {
        f.ask(format!("runs a program over the network ({program} -e)"));
    }
    let pos = positionals(args, "psiwqxXecOIT");
    if let Some(host) = pos
        .iter()
        .find(|p| !p.bytes().all(|b| b.is_ascii_digit() || b == b'-'))
        && !allow.allows(host)
    {
        f.ask(format!(
            "opens a raw network connection to {host} ({program})"
        ));
    }
}

fn socat_hosts(address: &str) -> Vec<String> {
    let upper = address.to_ascii_uppercase();
    if ["TCP", "UDP", "OPENSSL", "SSL", "SCTP"]
        .iter()
        .any(|p| upper.starts_with(p))
    {
        address
            .split(':')
            .nth(1)
            .map(|h| vec![h.split(',').next().unwrap_or(h).to_ascii_lowercase()])
            .unwrap_or_default()
    } else {
        Vec::new()
    }
}

/// `[user@]host:path` or a `scheme://host` URL: the host.
fn remote_host(spec: &str) -> Option<String> {
    if let Some(h) = patterns::url_hosts(spec).into_iter().next() {
        return Some(h);
    }
    let (before, _) = spec.split_once(':')?;
    if before.is_empty() || before.contains('/') || spec.starts_with('-') {
        return None;
    }
    Some(
        before
            .rsplit('@')
            .next()
            .unwrap_or(before)
            .to_ascii_lowercase(),
    )
}

fn copy(program: &str, args: &[String], allow: &HostAllowlist, f: &mut Findings) {
    let pos = positionals(args, "PiocFlSJe");
    if program == "sftp" {
        if let Some(host) = pos
            .first()
            .map(|h| remote_host(h).unwrap_or_else(|| h.rsplit('@').next().unwrap_or(h).to_owned()))
            && !allow.allows(&host)
        {
            f.ask(format!("opens an sftp session to {host}"));
        }
        return;
    }
    if pos.len() < 2 {
        return;
    }
    if let Some(host) = pos.last().and_then(|d| remote_host(d))
        && !allow.allows(&host)
    {
        f.ask(format!(
            "copies files to {host}, which is not on the review allowlist ({program})"
        ));
    }
}

fn httpie(args: &[String], allow: &HostAllowlist, f: &mut Findings) {
    let pos = positionals(args, "aAv");
    let sends = pos.iter().any(|p| matches!(*p, "POST" | "PUT" | "PATCH"))
        || pos
            .iter()
            .skip(1)
            .any(|p| p.contains('=') || p.contains(":=") || p.starts_with('@'))
        || has(args, "--form")
        || has(args, "-f");
    if sends {
        let mut hosts: Vec<String> = args.iter().flat_map(|a| patterns::url_hosts(a)).collect();
        if hosts.is_empty()
            && let Some(url) = pos.iter().find(|p| p.contains('.') && !p.contains('='))
        {
            hosts.push(
                url.split(['/', ':'])
                    .next()
                    .unwrap_or(url)
                    .to_ascii_lowercase(),
            );
        }
        upload("sends data", &hosts, allow, f);
    }
}

fn cloud_copy(program: &str, args: &[String], f: &mut Findings) {
    let pos = positionals(args, "");
    let dest = pos.last().copied().unwrap_or("");
    let uploads = match program {
        "aws" => pos.first() == Some(&"s3") && pos.len() > 3 && dest.starts_with("s3://"),
        "gsutil" => pos.len() > 2 && dest.starts_with("gs://"),
        "rclone" => {
            pos.len() > 2
                && matches!(pos[0], "copy" | "sync" | "move" | "copyto" | "moveto")
                && remote_host(dest).is_some()
        }
        _ => matches!(pos.first(), Some(&"copy") | Some(&"sync")),
    };
    if uploads {
        f.ask(format!("uploads to cloud storage ({program} → {dest})"));
    }
}

/// Files a command writes: redirections, `tee`, copy destinations, curl
/// and wget outputs (including the URL's file name for `-O`).
fn collect_written(script: &Script, out: &mut Vec<String>) {
    for cmd in &script.commands {
        for n in &cmd.nested {
            collect_written(n, out);
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

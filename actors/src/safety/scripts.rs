//! Resolving the scripts a shell command would run, so that review sees
//! their text and approvals bind their hashes (seed 000 §4.1: `npm run
//! deploy` names a script; what it does is in package.json).
//!
//! Recognised: `./x`, `path/to/x`, `sh|bash|zsh|... x`, `source x`, `. x`,
//! `python|node|perl|ruby|... x`, `npm|yarn|pnpm|bun run X` (with `pre`/`post`
//! scripts; `npm test`, `npm start`, `npm install` lifecycle scripts),
//! and `make [-C dir] [-f file] [targets]` (the recipes of the targets and
//! their prerequisites, with the Makefile's own variables expanded), also
//! behind wrappers (`timeout`, `flock lk`, `xargs`...) and in shell code
//! given as a string (`sh -c './x.sh'`, `flock lk -c …`, `script -c …`,
//! `watch …`, `eval …`). Shell scripts are resolved recursively (a package
//! script running `./deploy.sh`). Files are read only inside the
//! workspace: each path is checked by name ([`Workspace::resolve`]) and
//! then opened beneath the root ([`Workspace::open_regular`]), so a
//! directory swapped for a symlink out in between (by a process the bot
//! left running) leads nowhere: the file counts as missing. Only regular
//! files are read, never more than a bound.
//!
//! What it does not cover: scripts a resolved script reaches through
//! variables or other programs, dependencies' install scripts, and anything
//! fetched from the network at run time (docs/security.md).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read as _;
use std::path::Path;
use std::path::PathBuf;

use sha2::Digest;
use sha2::Sha256;

use super::makefile::Makefile;
use super::review::ResolvedScript;
use super::review::ScriptKind;
use super::shell_parse::Script;
use super::shell_parse::parse;
use super::shell_words::inline_shell;
use super::shell_words::program_start;
use crate::tools::Workspace;

/// Largest script whose text is reviewed.
const MAX_REVIEW_BYTES: u64 = 512 * 1024;
/// Largest file read to hash it.
const MAX_HASH_BYTES: u64 = 8 * 1024 * 1024;
/// Most scripts resolved for one command.
const MAX_SCRIPTS: usize = 16;
/// Deepest chain of scripts running scripts.
const MAX_DEPTH: u8 = 3;

const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "ash", "mksh"];
const INTERPRETERS: &[&str] = &[
    "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "Rscript",
    "deno", "tsx", "ts-node",
];

/// The first file (in byte order, as the shell sorts in the C locale)
/// that `pattern`, a word with `*` or `?` in its last component, matches
/// in its directory under `cwd`, as a path relative to `cwd`. `None` for
/// a word without them, or when nothing matches (the shell then passes
/// the word as it is).
fn glob_first(workspace: &Workspace, cwd: &Path, pattern: &str) -> Option<String> {
    let (dir, name) = match pattern.rsplit_once('/') {
        Some((dir, name)) => (dir, name),
        None => ("", pattern),
    };
    if !name.contains(['*', '?']) || dir.contains(['*', '?', '[']) {
        return None;
    }
    let base = workspace.resolve(&cwd.join(dir).to_string_lossy()).ok()?;
    let mut names: Vec<String> = std::fs::read_dir(base)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        // a leading `*` does not match a hidden file
        .filter(|n| !n.starts_with('.') || name.starts_with('.'))
        .filter(|n| wildcard(name.as_bytes(), n.as_bytes()))
        .collect();
    names.sort();
    let first = names.into_iter().next()?;
    Some(if dir.is_empty() {
        first
    } else {
        format!("{dir}/{first}")
    })
}

/// Whether `name` matches `pattern` with `*` (any run) and `?` (one byte).
/// Greedy, going back only to the last `*`: time bounded by the product
/// of the lengths, whatever the model writes (`*a*a*a*…b` against a long
/// name would take exponential time in a plain recursive match).
fn wildcard(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    // the last `*` seen, and where in `name` it started matching
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == b'?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                // the `*` takes one more byte
                Some((sp, sn)) => {
                    star = Some((sp, sn + 1));
                    p = sp + 1;
                    n = sn + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// What a shell or an interpreter is told to run.
enum Operand<'a> {
    /// Code given in the arguments (`-c`, `-e`, `-m`): reviewed as such
    /// elsewhere (`inline_shell`), or not a file.
    Code,
    /// A script file.
    File(&'a str),
    /// What its stdin holds (no file, `-s`, `-`).
    Stdin,
}

/// A shell's script operand: options read as the shell does (QA: the first
/// word not starting with `-` was taken for the script, so `sh -o errexit
/// x.sh` reviewed a file "errexit" and `sh +e x.sh` one called "+e"; any
/// dash-word with a `c`, `--norc` included, was taken for `-c`; and a
/// script fed on stdin was not reviewed at all).
fn shell_operand(args: &[String]) -> Operand<'_> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let word = a.as_str();
        match word {
            "--" => return args.get(i + 1).map_or(Operand::Stdin, |f| Operand::File(f)),
            "-" => return Operand::Stdin,
            "--rcfile" | "--init-file" => i += 1,
            w if w.starts_with("--") => {}
            w if (w.starts_with('-') || w.starts_with('+')) && w.len() > 1 => {
                let letters = &w[1..];
                if w.starts_with('-') && letters.contains('c') {
                    return Operand::Code;
                }
                if letters.contains('s') {
                    return Operand::Stdin;
                }
                // `-o NAME`, `+O NAME`: the option's name is the next word
                if letters.contains('o') || letters.contains('O') {
                    i += 1;
                }
            }
            file => return Operand::File(file),
        }
        i += 1;
    }
    Operand::Stdin
}

/// Options of the interpreters that take the next word as their value.
const INTERPRETER_VALUE_OPTIONS: &[&str] = &[
    "-W",
    "-X",
    "-Q",
    "-r",
    "-I",
    "-M",
    "--require",
    "--import",
    "--loader",
];

/// An interpreter's script operand (`python3 -W ignore x.py`, `python3 -
/// < x.py`), as [`shell_operand`] for shells.
fn interpreter_operand(args: &[String]) -> Operand<'_> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let word = a.as_str();
        match word {
            "-c" | "-m" | "-e" | "-E" | "-p" | "eval" => return Operand::Code,
            "--" => return args.get(i + 1).map_or(Operand::Stdin, |f| Operand::File(f)),
            "-" => return Operand::Stdin,
            "run" => {}
            w if INTERPRETER_VALUE_OPTIONS.contains(&w) => i += 1,
            w if w.starts_with('-') => {}
            file => return Operand::File(file),
        }
        i += 1;
    }
    Operand::Stdin
}

/// The files the `at`th command of `script` reads its stdin from: the
/// target of its `<` redirection, or the files a `cat` before it in its
/// pipeline prints (`cat x.sh | sh`).
fn stdin_files(script: &Script, at: usize) -> Vec<&str> {
    let Some(cmd) = script.commands.get(at) else {
        return Vec::new();
    };
    if let Some(r) = cmd.redirects.iter().rev().find(|r| r.op == "<") {
        return vec![r.target.as_str()];
    }
    if cmd.stage == 0 || at == 0 {
        return Vec::new();
    }
    let Some(before) = script.commands.get(at - 1) else {
        return Vec::new();
    };
    if before.pipeline != cmd.pipeline || before.stage + 1 != cmd.stage {
        return Vec::new();
    }
    let (start, _) = program_start(&before.words);
    match before
        .words
        .get(start)
        .map(|w| w.rsplit('/').next().unwrap_or(w))
    {
        Some("cat") => before.words[start + 1..]
            .iter()
            .map(String::as_str)
            .filter(|w| !w.starts_with('-'))
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether `command` may run a script file at all (a cheap, conservative
/// word check): when not, resolution needs no file system access.
pub fn may_run_scripts(command: &str) -> bool {
    command
        .split(|c: char| {
            c.is_whitespace() || matches!(c, ';' | '|' | '&' | '(' | ')' | '`' | '"' | '\'' | '$')
        })
        .any(|w| {
            w.contains('/')
                || w == "."
                || SHELLS.contains(&w)
                || INTERPRETERS.contains(&w)
                || matches!(
                    w,
                    "source" | "npm" | "yarn" | "pnpm" | "bun" | "make" | "gmake"
                )
        })
}

/// The scripts `command` would run from `cwd` (inside the workspace).
pub fn resolve_scripts(workspace: &Workspace, cwd: &Path, command: &str) -> Vec<ResolvedScript> {
    let mut r = Resolver {
        workspace,
        out: Vec::new(),
    };
    r.script(&parse(command), cwd, 0);
    r.out
}

struct Resolver<'a> {
    workspace: &'a Workspace,
    out: Vec<ResolvedScript>,
}

impl Resolver<'_> {
    fn script(&mut self, script: &Script, cwd: &Path, depth: u8) {
        let mut cwd = cwd.to_path_buf();
        for (at, cmd) in script.commands.iter().enumerate() {
            for nested in &cmd.nested {
                self.script(nested, &cwd, depth);
            }
            let (start, _) = program_start(&cmd.words);
            let Some(first) = cmd.words.get(start) else {
                continue;
            };
            let args = &cmd.words[start + 1..];
            let program = first.rsplit('/').next().unwrap_or(first);
            if let Some(code) = inline_shell(program, args)
                && depth < MAX_DEPTH
            {
                self.script(&parse(&code), &cwd, depth + 1);
                continue;
            }
            if program == "cd" {
                if let Some(dir) = args.first()
                    && let Ok(p) = self.workspace.resolve(&cwd.join(dir).to_string_lossy())
                {
                    cwd = p;
                }
                continue;
            }
            if first.contains('/') && !first.starts_with("/usr/") && !first.starts_with("/bin/") {
                self.file(first, &cwd, first, None, depth);
            } else if SHELLS.contains(&program) || matches!(program, "source" | ".") {
                let operand = if SHELLS.contains(&program) {
                    shell_operand(args)
                } else {
                    args.first().map_or(Operand::Stdin, |f| Operand::File(f))
                };
                self.operand(operand, script, at, program, &cwd, ScriptKind::Shell, depth);
            } else if INTERPRETERS.contains(&program) {
                let operand = interpreter_operand(args);
                self.operand(
                    operand,
                    script,
                    at,
                    program,
                    &cwd,
                    ScriptKind::Program,
                    depth,
                );
            } else if matches!(program, "npm" | "yarn" | "pnpm" | "bun") {
                self.package(program, args, &cwd, depth);
            } else if matches!(program, "make" | "gmake") {
                self.make(program, args, &cwd);
            }
        }
    }

    /// Resolves what a shell or an interpreter (`program`, the `at`th
    /// command of `script`) runs: its script file, or what its stdin is
    /// fed from (`sh < x.sh`, `cat x.sh | sh`, `python3 - < x.py`).
    #[allow(clippy::too_many_arguments)]
    fn operand(
        &mut self,
        operand: Operand<'_>,
        script: &Script,
        at: usize,
        program: &str,
        cwd: &Path,
        kind: ScriptKind,
        depth: u8,
    ) {
        match operand {
            Operand::Code => {}
            Operand::File(file) => {
                // `sh x*`: the shell runs the first file the pattern matches
                // (QA: the pattern itself was looked for, found missing, and
                // what ran was never reviewed)
                let matched = glob_first(self.workspace, cwd, file);
                let file = matched.as_deref().unwrap_or(file);
                self.file(file, cwd, &format!("{program} {file}"), Some(kind), depth);
            }
            Operand::Stdin => {
                for file in stdin_files(script, at) {
                    let origin = format!("{program} < {file}");
                    self.file(file, cwd, &origin, Some(kind), depth);
                }
            }
        }
    }

    fn push(&mut self, script: ResolvedScript) -> bool {
        if self.out.len() >= MAX_SCRIPTS
            || self
                .out
                .iter()
                .any(|s| s.path == script.path && s.origin == script.origin)
        {
            return false;
        }
        self.out.push(script);
        true
    }

    fn shown(&self, path: &Path) -> String {
        path.strip_prefix(self.workspace.root())
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| path.display().to_string())
    }

    /// A script file run directly or by an interpreter.
    fn file(
        &mut self,
        given: &str,
        cwd: &Path,
        origin: &str,
        as_kind: Option<ScriptKind>,
        depth: u8,
    ) {
        let Some((path, file)) = open(self.workspace, &cwd.join(given)) else {
            return;
        };
        let shown = self.shown(&path);
        let script = match read(file) {
            Read::Missing => ResolvedScript {
                origin: origin.to_owned(),
                path: shown,
                kind: ScriptKind::Missing,
                text: String::new(),
                sha256: String::new(),
            },
            Read::TooLarge(sha256) => ResolvedScript {
                origin: origin.to_owned(),
                path: shown,
                kind: ScriptKind::TooLarge,
                text: String::new(),
                sha256,
            },
            Read::Binary(sha256) => ResolvedScript {
                origin: origin.to_owned(),
                path: shown,
                kind: ScriptKind::Binary,
                text: String::new(),
                sha256,
            },
            Read::Text(text, sha256) => {
                let kind = as_kind.unwrap_or_else(|| kind_of(&path, &text));
                ResolvedScript {
                    origin: origin.to_owned(),
                    path: shown,
                    kind,
                    text,
                    sha256,
                }
            }
        };
        let nested =
            (script.kind == ScriptKind::Shell && depth < MAX_DEPTH).then(|| parse(&script.text));
        if self.push(script)
            && let Some(nested) = nested
        {
            self.script(&nested, cwd, depth + 1);
        }
    }

    /// `npm run X` and friends: the package.json scripts that run.
    fn package(&mut self, program: &str, args: &[String], cwd: &Path, depth: u8) {
        let Some((path, scripts)) = package_scripts(self.workspace, cwd) else {
            return;
        };
        let pos: Vec<&str> = args
            .iter()
            .filter(|a| !a.starts_with('-'))
            .map(String::as_str)
            .collect();
        let names: Vec<String> = match (program, pos.as_slice()) {
            (_, ["run" | "run-script" | "rum" | "urn", name, ..]) => vec![(*name).to_owned()],
            (_, ["test" | "t" | "tst", ..]) => vec!["test".into()],
            (_, [cmd @ ("start" | "stop" | "restart"), ..]) => vec![(*cmd).to_owned()],
            ("npm" | "yarn" | "pnpm", ["install" | "i" | "ci", ..]) | ("yarn", []) => {
                ["install", "prepare"].map(String::from).to_vec()
            }
            ("yarn" | "pnpm" | "bun", [name, ..]) if scripts.contains_key(*name) => {
                vec![(*name).to_owned()]
            }
            _ => return,
        };
        let mut text = String::new();
        let mut bound = Sha256::new();
        for name in names {
            for key in [format!("pre{name}"), name.clone(), format!("post{name}")] {
                if let Some(value) = scripts.get(&key) {
                    text.push_str(value);
                    text.push('\n');
                    bound.update(key.as_bytes());
                    bound.update([0]);
                    bound.update(value.as_bytes());
                    bound.update([b'\n']);
                }
            }
        }
        if text.is_empty() {
            return;
        }
        let origin = format!("{program} {}", pos.join(" "));
        let script = ResolvedScript {
            origin,
            path: self.shown(&path),
            kind: ScriptKind::Shell,
            text,
            sha256: hex::encode(bound.finalize()),
        };
        let nested = (depth < MAX_DEPTH).then(|| parse(&script.text));
        if self.push(script)
            && let Some(nested) = nested
        {
            self.script(&nested, cwd, depth + 1);
        }
    }

    /// `make [targets]`: the recipes that run.
    fn make(&mut self, program: &str, args: &[String], cwd: &Path) {
        let mut dir = cwd.to_path_buf();
        let mut file = None;
        let mut targets = Vec::new();
        let mut i = 0;
        while let Some(a) = args.get(i) {
            let value = |flag: &str, long: &str| -> Option<String> {
                if a == flag || a == long {
                    args.get(i + 1).cloned()
                } else {
                    a.strip_prefix(&format!("{long}="))
                        .map(str::to_owned)
                        .or_else(|| {
                            a.strip_prefix(flag)
                                .filter(|v| !v.is_empty())
                                .map(str::to_owned)
                        })
                }
            };
            if let Some(d) = value("-C", "--directory") {
                dir = dir.join(d);
                i += usize::from(a == "-C" || a == "--directory");
            } else if let Some(f) = value("-f", "--file") {
                file = Some(f);
                i += usize::from(a == "-f" || a == "--file");
            } else if !a.starts_with('-') && !a.contains('=') {
                targets.push(a.clone());
            }
            i += 1;
        }
        let candidates: Vec<PathBuf> = match &file {
            Some(f) => vec![dir.join(f)],
            None => ["GNUmakefile", "makefile", "Makefile"]
                .iter()
                .map(|n| dir.join(n))
                .collect(),
        };
        let Some((path, bytes)) = candidates.into_iter().find_map(|p| {
            let (p, file) = open(self.workspace, &p)?;
            let bytes = read_at_most(file?, MAX_REVIEW_BYTES)?;
            Some((p, bytes))
        }) else {
            return;
        };
        let Ok(source) = String::from_utf8(bytes) else {
            return;
        };
        let makefile = Makefile::parse(&source);
        let goals = if targets.is_empty() {
            makefile.default_goal.iter().cloned().collect()
        } else {
            targets
        };
        let text = makefile.recipes(&goals);
        let origin = if goals.is_empty() {
            program.to_owned()
        } else {
            format!("{program} {}", goals.join(" "))
        };
        let script = ResolvedScript {
            origin,
            path: self.shown(&path),
            kind: ScriptKind::Shell,
            text,
            sha256: hex::encode(Sha256::digest(source.as_bytes())),
        };
        let nested = parse(&script.text);
        if self.push(script) {
            self.script(&nested, &dir, 1);
        }
    }
}

enum Read {
    Missing,
    TooLarge(String),
    Binary(String),
    Text(String, String),
}

/// `given` checked by name ([`Workspace::resolve`]; `None` if it is
/// refused) and the regular file there opened beneath the root: `None`
/// when there is none, also when the path leads out of the workspace by
/// now (a directory of it swapped for a symlink out since the check).
fn open(workspace: &Workspace, given: &Path) -> Option<(PathBuf, Option<File>)> {
    let path = workspace.resolve(&given.to_string_lossy()).ok()?;
    // a test swaps a directory for a symlink here, between check and open
    #[cfg(test)]
    crate::tools::test_support::between_check_and_open();
    let file = workspace.open_regular(&path).ok().flatten();
    Some((path, file))
}

/// The content of `file`, `None` if it is larger than `max` bytes (at
/// most `max + 1` are read) or cannot be read.
fn read_at_most(file: File, max: u64) -> Option<Vec<u8>> {
    if file.metadata().ok()?.len() > max {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}

/// What the script file `file` (see [`open`]) holds.
fn read(file: Option<File>) -> Read {
    let Some(file) = file else {
        return Read::Missing;
    };
    let Ok(meta) = file.metadata() else {
        return Read::Missing;
    };
    let too_large = || {
        let id = format!("{}:{:?}", meta.len(), meta.modified().ok());
        Read::TooLarge(hex::encode(Sha256::digest(id.as_bytes())))
    };
    if meta.len() > MAX_HASH_BYTES {
        return too_large();
    }
    let mut bytes = Vec::new();
    match file.take(MAX_HASH_BYTES + 1).read_to_end(&mut bytes) {
        // grown since
        Ok(_) if bytes.len() as u64 > MAX_HASH_BYTES => return too_large(),
        Ok(_) => {}
        Err(_) => return Read::Missing,
    }
    let sha256 = hex::encode(Sha256::digest(&bytes));
    if bytes.len() as u64 > MAX_REVIEW_BYTES {
        return Read::TooLarge(sha256);
    }
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Read::Binary(sha256);
    }
    match String::from_utf8(bytes) {
        Ok(text) => Read::Text(text, sha256),
        Err(_) => Read::Binary(sha256),
    }
}

/// A file run directly: shell unless its extension or shebang names
/// another interpreter.
fn kind_of(path: &Path, text: &str) -> ScriptKind {
    let shebang = text
        .lines()
        .next()
        .filter(|l| l.starts_with("#!"))
        .unwrap_or("");
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let other = [
        "python", "node", "perl", "ruby", "php", "deno", "lua", "Rscript",
    ];
    if other.iter().any(|i| shebang.contains(i))
        || matches!(
            ext,
            "py" | "js" | "mjs" | "cjs" | "ts" | "rb" | "pl" | "php" | "lua" | "R"
        )
    {
        ScriptKind::Program
    } else {
        ScriptKind::Shell
    }
}

/// The nearest package.json at or above `cwd` (inside the workspace) and
/// its `scripts`; none if the nearest is larger than [`MAX_HASH_BYTES`].
fn package_scripts(
    workspace: &Workspace,
    cwd: &Path,
) -> Option<(PathBuf, BTreeMap<String, String>)> {
    let mut dir = Some(cwd);
    while let Some(d) = dir {
        if !d.starts_with(workspace.root()) {
            return None;
        }
        if let Some((p, Some(file))) = open(workspace, &d.join("package.json"))
            && let Ok(meta) = file.metadata()
        {
            // a larger one is not looked past: npm would run its scripts,
            // not those of a package.json above
            if meta.len() > MAX_HASH_BYTES {
                return None;
            }
            let mut text = String::new();
            match file.take(MAX_HASH_BYTES + 1).read_to_string(&mut text) {
                Ok(n) if n as u64 > MAX_HASH_BYTES => return None,
                Ok(_) => {}
                // unreadable, or not UTF-8: as if there were none
                Err(_) => {
                    dir = d.parent();
                    continue;
                }
            }
            let value: serde_json::Value = serde_json::from_str(&text).ok()?;
            let scripts = value
                .get("scripts")?
                .as_object()?
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect();
            return Some((p, scripts));
        }
        dir = d.parent();
    }
    None
}

#[cfg(test)]
#[path = "scripts_tests.rs"]
mod tests;

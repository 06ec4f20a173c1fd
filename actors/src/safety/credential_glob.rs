//! Credentials a shell pattern reaches once the shell expands it: `cat
//! .s*/*` prints `~/.ssh/id_rsa`, `cat .[e]nv` prints `.env`, `find .
//! -name 'id_*' -exec cat {} +` prints a private key. The words are
//! checked for credential paths as they are written (`patterns.rs`); a
//! pattern is matched here against a sample path of each credential store
//! and file name, one path component at a time, as the shell matches it
//! (`*` and `?` within a component, `[…]` sets, a leading `.` matched only
//! by a literal `.`). QA, 2026-12-05: those three ran unasked, where `cat
//! ~/.ssh/*` was asked about.

/// A sample path of each credential the review asks about reading, and
/// what it is.
const SAMPLES: &[(&str, &str)] = &[
    (".ssh/id_rsa", "SSH keys"),
    (".ssh/id_ed25519", "SSH keys"),
    (".aws/credentials", "AWS credentials"),
    (
        ".config/gcloud/application_default_credentials.json",
        "Google Cloud credentials",
    ),
    (".azure/accessTokens.json", "Azure credentials"),
    (".kube/config", "Kubernetes credentials"),
    (".docker/config.json", "Docker registry credentials"),
    (".gnupg/private-keys-v1.d/key.key", "GnuPG keys"),
    (".password-store/site.gpg", "a password store"),
    (".config/gh/hosts.yml", "GitHub CLI credentials"),
    (
        ".terraform.d/credentials.tfrc.json",
        "Terraform credentials",
    ),
    ("etc/shadow", "the system password hashes"),
    ("etc/gshadow", "the system password hashes"),
    ("proc/self/environ", "a process environment"),
    ("id_rsa", "a credentials file"),
    ("id_dsa", "a credentials file"),
    ("id_ecdsa", "a credentials file"),
    ("id_ed25519", "a credentials file"),
    (".netrc", "a credentials file"),
    (".pgpass", "a credentials file"),
    (".npmrc", "a credentials file"),
    (".pypirc", "a credentials file"),
    (".git-credentials", "a credentials file"),
    (".vault-token", "a credentials file"),
    ("credentials.json", "a credentials file"),
    (".env", "an environment file with secrets"),
    (".env.local", "an environment file with secrets"),
    (".env.production", "an environment file with secrets"),
];

/// Directories that are credential stores as a whole: a pattern naming
/// one (`.s*` for `.ssh`) reaches what it holds. A pattern naming a
/// directory that merely holds one (`.c*` for `.config`) does not count:
/// `du -sh .c*` was asked about as reading Google Cloud credentials (QA,
/// 2026-12-05).
const STORE_DIRS: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".kube",
    ".gnupg",
    ".password-store",
    ".config/gcloud",
    ".config/gh",
    ".terraform.d",
];

/// What credential `word`, a shell pattern, may expand to; `None` for a
/// word without pattern characters (`patterns::credential_in` reads those)
/// and for a component too loose to tell (`*`, `*.json`, `.*`: no literal
/// start, or fewer than two literal characters, would ask about every
/// `cat *.json`).
pub(crate) fn credential_glob(word: &str) -> Option<&'static str> {
    if word.len() > 4096 || !word.contains(['*', '?', '[']) {
        return None;
    }
    let path = ["~/", "$HOME/", "${HOME}/", "./", "/"]
        .iter()
        .find_map(|p| word.strip_prefix(p))
        .unwrap_or(word);
    let globs: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    SAMPLES.iter().find_map(|(sample, what)| {
        let parts: Vec<&str> = sample.split('/').collect();
        reaches(&globs, &parts).then_some(*what)
    })
}

/// How a tool matches a pattern that is not the shell's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatternKind {
    /// Against a file's name, a leading `.` matched by wildcards too
    /// (`find -name`, `grep --include`).
    Name,
    /// Against a file's whole path, `*` matching `/` too (`find -path`).
    Path,
}

/// What credential `pattern`, matched as `kind` (not as the shell matches
/// it), may name. `find . -name '*.env' -exec cat {} +` and `grep -r
/// --include='*env'` read `.env`, and `find -path '*ssh*'` a private key,
/// unasked (QA, 2026-12-05): their wildcards match a leading dot, and
/// `*.env` is how env files are named. At least two literal characters
/// (`*` alone is no name); only the names of dotfiles and keys, so
/// `-name '*.json'` is not taken for `credentials.json`.
pub(crate) fn tool_pattern(pattern: &str, kind: PatternKind) -> Option<&'static str> {
    if pattern.len() > 4096 || !pattern.contains(['*', '?', '[']) {
        return None;
    }
    let literals = pattern
        .chars()
        .filter(|c| !matches!(c, '*' | '?' | '[' | ']'))
        .count();
    if literals < 2 {
        return None;
    }
    let g: Vec<char> = pattern.chars().collect();
    match kind {
        // the samples that are names of dotfiles and keys
        PatternKind::Name => SAMPLES
            .iter()
            .filter(|(name, _)| {
                !name.contains('/') && (name.starts_with('.') || name.starts_with("id_"))
            })
            .find_map(|(name, what)| {
                let n: Vec<char> = name.chars().collect();
                match_from(&g, &n).then_some(*what)
            }),
        PatternKind::Path => SAMPLES.iter().find_map(|(sample, what)| {
            let n: Vec<char> = format!("./{sample}").chars().collect();
            match_from(&g, &n).then_some(*what)
        }),
    }
}

/// Whether pattern components `globs` reach `sample`: their last
/// components match all of it (directories before it lead there), or,
/// fewer, they match its first components (a directory holding it, as
/// `cp -r .s* out` copies `.ssh`). One pattern component in the match
/// must be specific enough ([`specific`]): `.s*/*` is, `build/*` is not.
fn reaches(globs: &[&str], sample: &[&str]) -> bool {
    let matched: &[&str] = if globs.len() >= sample.len() {
        let from = globs.len() - sample.len();
        let (_, tail) = globs.split_at(from);
        if !tail.iter().zip(sample).all(|(g, s)| matches(g, s)) {
            return false;
        }
        tail
    } else {
        let dir = sample.get(..globs.len()).unwrap_or_default().join("/");
        if !STORE_DIRS.contains(&dir.as_str())
            || !globs.iter().zip(sample).all(|(g, s)| matches(g, s))
        {
            return false;
        }
        globs
    };
    matched.iter().any(|g| g.contains(['*', '?', '['])) && matched.iter().any(|g| specific(g))
}

/// Whether a pattern component says enough to name a credential: a
/// literal start and at least two literal characters (`.s*`, `id_*`,
/// `.[e]nv`; not `*`, `*.json`, `.*`).
fn specific(glob: &str) -> bool {
    let wild = |c: char| matches!(c, '*' | '?' | '[');
    if glob.starts_with(wild) {
        return false;
    }
    let mut literals = 0;
    let mut in_set = false;
    for c in glob.chars() {
        match c {
            '[' if !in_set => in_set = true,
            ']' if in_set => in_set = false,
            '*' | '?' if !in_set => {}
            _ if !in_set => literals += 1,
            _ => {}
        }
    }
    literals >= 2
}

/// Whether shell pattern `glob` matches the file name `name`: `*` any
/// run, `?` one character, `[…]` a set (`!` or `^` negates, `a-z`
/// ranges), `\` quotes the next character; a name starting with `.` is
/// matched only by a pattern starting with a literal `.`.
fn matches(glob: &str, name: &str) -> bool {
    if name.starts_with('.') && !(glob.starts_with('.') || glob.starts_with("\\.")) {
        return false;
    }
    let g: Vec<char> = glob.chars().collect();
    let n: Vec<char> = name.chars().collect();
    match_from(&g, &n)
}

fn match_from(g: &[char], n: &[char]) -> bool {
    match g.split_first() {
        None => n.is_empty(),
        Some(('*', rest)) => (0..=n.len()).any(|i| n.get(i..).is_some_and(|t| match_from(rest, t))),
        Some(('?', rest)) => n.split_first().is_some_and(|(_, t)| match_from(rest, t)),
        Some(('[', rest)) => match set(rest) {
            Some((members, after)) => n
                .split_first()
                .is_some_and(|(c, t)| members.has(*c) && match_from(after, t)),
            // no closing bracket: a literal `[`
            None => n
                .split_first()
                .is_some_and(|(c, t)| *c == '[' && match_from(rest, t)),
        },
        Some(('\\', rest)) => match rest.split_first() {
            Some((lit, after)) => n
                .split_first()
                .is_some_and(|(c, t)| c == lit && match_from(after, t)),
            None => n.first() == Some(&'\\') && n.len() == 1,
        },
        Some((lit, rest)) => n
            .split_first()
            .is_some_and(|(c, t)| c == lit && match_from(rest, t)),
    }
}

/// A `[…]` set: its members (`a-z` ranges among them), whether it is
/// negated, and what follows its `]`.
struct Set<'a> {
    members: &'a [char],
    negated: bool,
}

impl Set<'_> {
    fn has(&self, c: char) -> bool {
        let m = self.members;
        let mut i = 0;
        let mut found = false;
        while let Some(&first) = m.get(i) {
            if m.get(i + 1) == Some(&'-')
                && let Some(&last) = m.get(i + 2)
            {
                found |= (first..=last).contains(&c);
                i += 3;
            } else {
                found |= first == c;
                i += 1;
            }
        }
        found != self.negated
    }
}

/// The set that starts `g` (after its `[`) and what follows its `]`;
/// `None` without a closing `]` (the `[` is then a literal).
fn set(g: &[char]) -> Option<(Set<'_>, &[char])> {
    let (negated, body) = match g.first() {
        Some('!' | '^') => (true, g.get(1..)?),
        _ => (false, g),
    };
    // a `]` first is a member
    let close = body.iter().skip(1).position(|c| *c == ']')? + 1;
    let members = body.get(..close)?;
    let after = body.get(close + 1..)?;
    Some((Set { members, negated }, after))
}

#[cfg(test)]
#[path = "credential_glob_tests.rs"]
mod tests;

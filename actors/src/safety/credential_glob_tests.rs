use super::*;

#[test]
fn patterns_that_reach_credentials() {
    for (word, what) in [
        (".s*/*", "SSH keys"),
        ("~/.s*/*", "SSH keys"),
        (".s*", "SSH keys"),
        (".ss?/id_*", "SSH keys"),
        ("$HOME/.ssh/id_r?a", "SSH keys"),
        (".[e]nv", "an environment file with secrets"),
        (".en[v]", "an environment file with secrets"),
        ("app/.env*", "an environment file with secrets"),
        ("id_*", "a credentials file"),
        (".aw?/cred*", "AWS credentials"),
        ("/et?/shad*", "the system password hashes"),
        (".git-cred*", "a credentials file"),
    ] {
        assert_eq!(credential_glob(word), Some(what), "{word}");
    }
}

#[test]
fn patterns_that_do_not() {
    for word in [
        "*",
        "*.json",
        ".*",
        "*.py",
        "src/*.rs",
        "build/*",
        "[a-z]*",
        "notes/*.md",
        "?*",
        ".e*x",
        "target/debug/.fingerprint/*",
        // no pattern: read by credential_in
        ".env",
        "id_rsa",
        // an id file in another store's shape, not a key
        "ids_*",
        // a directory that holds a store, not a store (QA, 2026-12-05)
        ".c*",
        ".con*",
    ] {
        assert_eq!(credential_glob(word), None, "{word}");
    }
}

#[test]
fn shell_matching() {
    assert!(matches("id_*", "id_rsa"));
    assert!(matches("[!x]d_rsa", "id_rsa"));
    assert!(matches("[a-j]d_rsa", "id_rsa"));
    assert!(!matches("[^i]d_rsa", "id_rsa"));
    assert!(!matches("*", ".env"));
    assert!(matches(".*", ".env"));
    assert!(matches(r"\.env", ".env"));
    assert!(matches("[]x]", "]"));
    assert!(matches("a[", "a["));
}

#[test]
fn find_and_grep_patterns_match_dotfiles() {
    for (pattern, kind, what) in [
        (
            "*.env",
            PatternKind::Name,
            "an environment file with secrets",
        ),
        (
            "*env",
            PatternKind::Name,
            "an environment file with secrets",
        ),
        ("id_*", PatternKind::Name, "a credentials file"),
        ("*ssh*", PatternKind::Path, "SSH keys"),
        (
            "*/.env",
            PatternKind::Path,
            "an environment file with secrets",
        ),
    ] {
        assert_eq!(tool_pattern(pattern, kind), Some(what), "{pattern}");
    }
    for (pattern, kind) in [
        ("*.json", PatternKind::Name),
        ("*.md", PatternKind::Name),
        ("*.rs", PatternKind::Name),
        ("*", PatternKind::Name),
        ("*/src/*", PatternKind::Path),
        (".env", PatternKind::Name),
    ] {
        assert_eq!(tool_pattern(pattern, kind), None, "{pattern}");
    }
}

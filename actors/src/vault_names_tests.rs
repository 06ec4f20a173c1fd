//! The secret-name rule: environment-variable names, and none that
//! steers what commands run, load or trust.
#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn names_look_like_env_vars() {
    assert!(valid_secret_name("GITHUB_TOKEN"));
    assert!(valid_secret_name("_X1"));
    for bad in ["", "github", "1X", "A-B", "A B", "https_proxy"] {
        assert!(!valid_secret_name(bad), "{bad}");
        assert!(secret_name_shape_problem(bad).is_some(), "{bad}");
    }
}

/// A secret becomes an environment variable of the commands that use
/// it: one named after a variable that steers how they run is refused.
#[test]
fn names_that_steer_commands_are_reserved() {
    for name in [
        "PATH",
        "HOME",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "DYLD_INSERT_LIBRARIES",
        "SHELL",
        "IFS",
        "PWD",
        "USER",
        "TMPDIR",
        "BASH_ENV",
        "ENV",
        "LC_ALL",
    ] {
        let problem = secret_name_problem(name).unwrap_or_default();
        assert!(problem.contains("reserved"), "{name}: {problem:?}");
        assert!(!valid_secret_name(name), "{name}");
    }
    // only whole names and the listed families
    for fine in [
        "PATHS",
        "MY_PATH",
        "HOME_URL",
        "LDAP_TOKEN",
        "ENVIRONMENT",
        "USER_TOKEN",
        "GITHUB_TOKEN",
        "GITLAB_TOKEN",
        "NODE_AUTH_TOKEN",
        "SSH_PRIVATE_KEY",
        "CARGO_REGISTRY_TOKEN",
        "CARGO_REGISTRIES_MINE_TOKEN",
        "GOOGLE_API_KEY",
        "PROXY_PASSWORD",
        "LESSON_KEY",
        "EDITOR_TOKEN",
    ] {
        assert_eq!(secret_name_problem(fine), None, "{fine}");
    }
    assert!(
        secret_name_problem("a-b")
            .unwrap_or_default()
            .contains("not a secret name")
    );
}

/// Before, these were accepted: `GIT_CONFIG_GLOBAL` (a config with
/// `core.fsmonitor` runs code in a reviewed `git status`), `LESSOPEN`,
/// `PAGER`, the proxies and the certificate stores (a reviewed `curl`
/// talks through someone else).
#[test]
fn names_that_change_what_commands_run_or_trust_are_reserved() {
    for name in [
        "GIT_CONFIG",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_KEY_0",
        "GIT_CONFIG_VALUE_0",
        "GIT_CONFIG_PARAMETERS",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_TEMPLATE_DIR",
        "GIT_ASKPASS",
        "GIT_PAGER",
        "GIT_EDITOR",
        "GIT_SSH_COMMAND",
        "GIT_EXEC_PATH",
        "SSH_ASKPASS",
        "LESSOPEN",
        "LESSCLOSE",
        "PAGER",
        "EDITOR",
        "VISUAL",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "RUBYLIB",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "FTP_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "CURL_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "XDG_CONFIG_HOME",
        "OPENSSL_CONF",
        // GNU make loads and obeys these as it does MAKEFLAGS (QA,
        // 2026-12-05: a secret MAKEFILES made a reviewed `make` run code
        // its Makefile did not hold), and compilers' and configs' kin
        "MAKEFILES",
        "GNUMAKEFLAGS",
        "CFLAGS",
        "LDFLAGS",
        "RUSTFLAGS",
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER",
        "CARGO_REGISTRIES_MINE_CREDENTIAL_PROVIDER",
        "CGO_LDFLAGS",
        "YARN_YARN_PATH",
        "AWS_CONFIG_FILE",
        "KUBECONFIG",
        // programs gcc and tar run, cargo's other settings, the Go and
        // Rust toolchains, the JVM's build tools (QA, 2026-12-05: a
        // secret COMPILER_PATH made a reviewed `gcc -c x.c` run its `as`,
        // TAR_OPTIONS a reviewed `tar xf` run `--to-command=`; and the
        // docs said every CARGO_ name was reserved, where only five
        // families were)
        "COMPILER_PATH",
        "GCC_EXEC_PREFIX",
        "TAR_OPTIONS",
        "CARGO_REGISTRY_GLOBAL_CREDENTIAL_PROVIDERS",
        "CARGO_INSTALL_ROOT",
        "CARGO_REGISTRIES_MINE_INDEX",
        "CARGO_REGISTRIES__TOKEN",
        "CARGO_HOME",
        "GOROOT",
        "RUSTUP_TOOLCHAIN",
        "MAVEN_OPTS",
        "DOTNET_STARTUP_HOOKS",
        "LUA_INIT",
        "VIMINIT",
    ] {
        let problem = secret_name_problem(name).unwrap_or_default();
        assert!(
            problem.contains("is reserved")
                && problem.contains("would change what the bot's commands run, load or trust"),
            "{name}: {problem:?}"
        );
        // the name it suggests instead is a usable one
        let instead = problem
            .split("such as ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_default();
        assert!(valid_secret_name(instead), "{name}: suggests {instead:?}");
        // reserved names keep their shape: one stored before can be deleted
        assert_eq!(secret_name_shape_problem(name), None, "{name}");
    }
}

/// Before, these were accepted, and no command saw their value: the shell
/// that runs a command sets them itself (bash puts each command's path in
/// `_`), and dash refuses to run anything with an `OPTIND` that is not a
/// number. Names of the same shape that the shell leaves alone stay fine.
#[test]
fn names_the_shell_sets_itself_are_refused() {
    for name in [
        "_",
        "PPID",
        "SHLVL",
        "LINENO",
        "RANDOM",
        "SECONDS",
        "OPTIND",
        "OPTERR",
        "PS1",
        "BASH",
        "BASHPID",
        "BASH_VERSION",
        "BASH_XTRACEFD",
        "EPOCHSECONDS",
    ] {
        let problem = secret_name_problem(name).unwrap_or_default();
        assert!(
            problem.contains("a name the shell sets itself")
                && problem.contains("no command would ever see this value"),
            "{name}: {problem:?}"
        );
        let instead = problem.split("such as ").nth(1).unwrap_or_default();
        assert!(valid_secret_name(instead), "{name}: suggests {instead:?}");
        // the shape is fine: one stored before can be deleted
        assert_eq!(secret_name_shape_problem(name), None, "{name}");
    }
    assert!(
        secret_name_problem("_")
            .unwrap_or_default()
            .ends_with("such as MY_SECRET")
    );
    // the reserved ones among bash's say so, as before
    assert!(
        secret_name_problem("BASH_ENV")
            .unwrap_or_default()
            .contains("is reserved")
    );
    for fine in [
        "__",
        "_X",
        "_1",
        "MY_BASH",
        "PS1_TOKEN",
        "OPTIONS",
        "RANDOM_SEED",
    ] {
        assert_eq!(secret_name_problem(fine), None, "{fine}");
    }
}

/// A good name with a space around it (pasted with one) says to remove
/// the space, naming the name meant.
#[test]
fn a_name_with_spaces_around_it_says_to_remove_them() {
    for bad in ["GITHUB_TOKEN ", " GITHUB_TOKEN", "\tGITHUB_TOKEN\n"] {
        let problem = secret_name_shape_problem(bad).unwrap();
        assert!(
            problem.contains("remove them") && problem.contains("\"GITHUB_TOKEN\""),
            "{problem}"
        );
    }
    // a name still wrong without the spaces gets the general rule
    // a name still wrong without the spaces gets the general rule, as
    // does one the shell sets itself (` _` is not "use `_`")
    for bad in ["github token ", " _", "OPTIND "] {
        let problem = secret_name_shape_problem(bad).unwrap();
        assert!(problem.contains("environment-variable name"), "{problem}");
    }
}

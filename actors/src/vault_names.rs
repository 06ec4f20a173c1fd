//! The rule for secret names: a secret reaches Shell as an environment
//! variable of its name, so a name must be an environment-variable name
//! and not one that common tools read to choose a program, library or
//! config to run or load, or where to send traffic and whom to trust
//! (docs/security.md, "Reserved secret names").

/// Whole names that steer how the shell, the dynamic loader, an
/// interpreter or a common tool runs a command: one named `PATH` would
/// break every command, `LD_PRELOAD` would load code into commands that
/// passed review, `PAGER` or `LESSOPEN` would run a program when a
/// reviewed `git log` or `less` runs, `SSL_CERT_FILE` or `HTTPS_PROXY`
/// would send a reviewed `curl` through someone else's hands.
const RESERVED_NAMES: &[&str] = &[
    // the shell and the system
    "PATH",
    "HOME",
    "SHELL",
    "USER",
    "LOGNAME",
    "PWD",
    "OLDPWD",
    "TMPDIR",
    "IFS",
    "ENV",
    "BASH_ENV",
    "ZDOTDIR",
    "CDPATH",
    "SHELLOPTS",
    "BASHOPTS",
    "GLOBIGNORE",
    "PS4",
    "PROMPT_COMMAND",
    "POSIXLY_CORRECT",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "HOSTALIASES",
    "GCONV_PATH",
    "LOCPATH",
    "NLSPATH",
    // programs other programs start: pagers, editors, password prompts
    "PAGER",
    "MANPAGER",
    "MANOPT",
    "LESS",
    "LESSOPEN",
    "LESSCLOSE",
    "LESSKEY",
    "LESSKEYIN",
    "LESSEDIT",
    "EDITOR",
    "VISUAL",
    "BROWSER",
    "SYSTEMD_PAGER",
    "SYSTEMD_EDITOR",
    "SSH_ASKPASS",
    "SSH_ASKPASS_REQUIRE",
    "SUDO_ASKPASS",
    "SSH_AUTH_SOCK",
    "GNUPGHOME",
    // interpreters and build tools: code or options they load
    "PERL5LIB",
    "PERL5OPT",
    "PERL5DB",
    "PERLLIB",
    "RUBYLIB",
    "RUBYOPT",
    "GEM_HOME",
    "GEM_PATH",
    "NODE_OPTIONS",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CC",
    "CXX",
    // where gcc finds the programs it runs (`as`, `ld`, `cc1`): one
    // named so runs in a reviewed `gcc -c x.c`; the header and library
    // paths put other code into what it builds
    "COMPILER_PATH",
    "GCC_EXEC_PREFIX",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH",
    // GNU tar's default options: `--to-command=` runs a program for
    // every file of a reviewed `tar xf`; rsync's remote shell and
    // connect program
    "TAR_OPTIONS",
    "RSYNC_RSH",
    "RSYNC_CONNECT_PROG",
    "CVS_RSH",
    // editors and interpreters that run commands from a variable
    "VIMINIT",
    "EXINIT",
    "MYVIMRC",
    "VIMRUNTIME",
    "LUA_INIT",
    "LUA_PATH",
    "LUA_CPATH",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "R_PROFILE",
    "R_PROFILE_USER",
    "R_ENVIRON",
    "R_ENVIRON_USER",
    "TCLLIBPATH",
    // the JVM's build tools: options (`-javaagent:`), the java they run,
    // and Gradle's home with its init scripts
    "JAVA_HOME",
    "MAVEN_OPTS",
    "MAVEN_ARGS",
    "M2_HOME",
    "GRADLE_OPTS",
    "GRADLE_USER_HOME",
    "SBT_OPTS",
    "ANT_OPTS",
    "DOTNET_ROOT",
    "DOTNET_STARTUP_HOOKS",
    "BUNDLE_GEMFILE",
    // a compiler's options load plugins (`-fplugin=`, `-C linker=`) in a
    // reviewed `make` or `cargo build`
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "MAKEFLAGS",
    // GNU make reads these two as it reads MAKEFLAGS: makefiles to load
    // (MAKEFILES) and options, `--eval=` among them (GNUMAKEFLAGS); code
    // a reviewed `make` runs that its Makefile does not hold (QA)
    "MAKEFILES",
    "GNUMAKEFLAGS",
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "GOFLAGS",
    "GOENV",
    "GOROOT",
    "GOPATH",
    "GOBIN",
    "GOCACHE",
    "GOMODCACHE",
    "GOWORK",
    "GOVCS",
    "GONOPROXY",
    "GOPRIVATE",
    "GOTOOLCHAIN",
    "GOPROXY",
    "GOSUMDB",
    "GONOSUMDB",
    "GOINSECURE",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    // configs whose entries run programs: the AWS CLI's
    // `credential_process`, kubectl's exec plugins
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "KUBECONFIG",
    // network traffic and trust (the `*_PROXY` family is a suffix below)
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "SSLKEYLOGFILE",
    "CURL_CA_BUNDLE",
    "CURL_HOME",
    "WGETRC",
    "NETRC",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "NODE_TLS_REJECT_UNAUTHORIZED",
];

/// Families of reserved names, by prefix: the dynamic loader's
/// (`LD_PRELOAD`, macOS's `DYLD_*`), the C library's, the locale's and
/// bash's exported functions; all of git's (`GIT_CONFIG_*` and
/// `GIT_DIR` pick the config and repository a reviewed `git status`
/// reads, `GIT_SSH_COMMAND`, `GIT_PAGER`, `GIT_ASKPASS`, `GIT_EDITOR`,
/// `GIT_EXEC_PATH` the programs it runs, and new ones come with new
/// versions), Python's, OpenSSL's (`OPENSSL_CONF` loads engines), pip's,
/// npm's and yarn's settings (package index, certificates, scripts' shell,
/// yarn's `YARN_YARN_PATH`), all of cargo's (`CARGO_TARGET_<T>_LINKER`
/// runs a program in a reviewed `cargo build`, `CARGO_INSTALL_ROOT`,
/// `CARGO_REGISTRIES_<NAME>_INDEX` and the credential providers choose
/// what it runs; its tokens stay secrets' names: [`usable_cargo`]) and
/// rustup's (`RUSTUP_TOOLCHAIN` picks the compiler a reviewed `cargo`
/// runs), cgo's compiler flags, .NET's runtime settings, bundler's, and
/// the XDG directories (`XDG_CONFIG_HOME` holds git's config too).
const RESERVED_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "GLIBC_",
    "MALLOC_",
    "LC_",
    "BASH_FUNC_",
    "GIT_",
    "PYTHON",
    "OPENSSL_",
    "PIP_",
    "NPM_CONFIG_",
    "YARN_",
    "CARGO_",
    "RUSTUP_",
    "CGO_",
    "DOTNET_",
    "COMPLUS_",
    "CORECLR_",
    "BUNDLE_",
    "XDG_",
];

/// Families of reserved names, by suffix: `HTTP_PROXY`, `HTTPS_PROXY`,
/// `ALL_PROXY`, `NO_PROXY`, `FTP_PROXY` and curl's `<SCHEME>_PROXY` for
/// every scheme it speaks; cargo's `CARGO_REGISTRIES_<NAME>_CREDENTIAL_PROVIDER`
/// (a program it runs for a token). (The lower-case spellings tools also read are
/// no secret names at all: a name is upper case.)
const RESERVED_SUFFIXES: &[&str] = &["_PROXY", "_CREDENTIAL_PROVIDER", "_CREDENTIAL_PROVIDERS"];

/// The names of cargo's that are credentials, not settings: its registry
/// tokens (`CARGO_REGISTRY_TOKEN`, `CARGO_REGISTRIES_<NAME>_TOKEN`), usable
/// as secrets' names though every other `CARGO_*` is reserved.
fn usable_cargo(name: &str) -> bool {
    name == "CARGO_REGISTRY_TOKEN"
        || name
            .strip_prefix("CARGO_REGISTRIES_")
            .and_then(|rest| rest.strip_suffix("_TOKEN"))
            .is_some_and(|registry| !registry.is_empty())
}

/// Names the shell that runs a command (`sh -c`: dash or bash, whichever
/// the system has) sets itself, so a command never sees a secret of that
/// name: bash sets `_` to each command's path in its environment, `PPID`,
/// `SHLVL`, `LINENO`, `RANDOM`, `SECONDS`, `OPTIND`, `OPTERR` and the
/// `EPOCH*` clocks are the shell's own values, bash drops `PS1` and `PS2`
/// when it is not interactive; and an `OPTIND` that is not a
/// number makes dash refuse to run any command at all ("Illegal number",
/// quoting the value). bash's own `BASH`, `BASHPID` and `BASH_*` are
/// likewise (a prefix below).
const SHELL_NAMES: &[&str] = &[
    "_",
    "PPID",
    "SHLVL",
    "LINENO",
    "RANDOM",
    "SRANDOM",
    "SECONDS",
    "OPTIND",
    "OPTERR",
    "HISTCMD",
    "EPOCHSECONDS",
    "EPOCHREALTIME",
    "PS1",
    "PS2",
    "BASH",
    "BASHPID",
];

/// Families of names the shell sets itself: bash's own (`BASH_VERSION`,
/// `BASH_COMMAND`, `BASH_ARGV0`, `BASH_XTRACEFD`, …).
const SHELL_PREFIXES: &[&str] = &["BASH_"];

/// Longest secret name.
const MAX_NAME_LEN: usize = 64;

/// Whether `name` is a usable secret name ([`secret_name_problem`] finds
/// nothing wrong with it).
pub fn valid_secret_name(name: &str) -> bool {
    secret_name_problem(name).is_none()
}

/// Whether `name` is one of the reserved names or families.
fn reserved(name: &str) -> bool {
    if usable_cargo(name) {
        return false;
    }
    RESERVED_NAMES.contains(&name)
        || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
        || RESERVED_SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// Whether the shell sets `name` itself ([`SHELL_NAMES`]).
fn set_by_the_shell(name: &str) -> bool {
    SHELL_NAMES.contains(&name) || SHELL_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// A name of the user's own to store the value of `name` under: `MY_NAME`
/// or `NAME_VALUE`, whichever is free to use.
fn instead_of(name: &str) -> String {
    if name.trim_matches('_').is_empty() {
        return "MY_SECRET".to_owned();
    }
    [format!("MY_{name}"), format!("{name}_VALUE")]
        .into_iter()
        .find(|n| n.len() <= MAX_NAME_LEN && !reserved(n) && !set_by_the_shell(n))
        .unwrap_or_else(|| "MY_SECRET".to_owned())
}

/// What is wrong with the shape of `name` as a secret name, if anything:
/// it must be an environment-variable name (`A-Z`, `0-9`, `_`, not
/// starting with a digit, at most 64 characters). Reserved names pass:
/// a stored secret whose name became reserved can still be deleted.
pub fn secret_name_shape_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let shaped = matches!(chars.next(), Some(c) if c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= MAX_NAME_LEN;
    (!shaped).then(|| {
        // a usable name pasted with a space: say so (one that is not
        // usable even so gets the general rule below)
        let trimmed = name.trim();
        if trimmed != name && secret_name_problem(trimmed).is_none() {
            return format!(
                "{name:?} is not a secret name: it has spaces around it; remove them and use \
                 {trimmed:?}"
            );
        }
        format!(
            "{name:?} is not a secret name; use an environment-variable name such as \
             GITHUB_TOKEN (A-Z, 0-9 and _, not starting with a digit, at most 64 characters)"
        )
    })
}

/// What is wrong with `name` as a secret name, if anything: its shape
/// ([`secret_name_shape_problem`]), a name the shell sets itself, which
/// no command would see (`_`, `PPID`, `OPTIND`, `BASH_*`, …), or it is
/// reserved because it steers
/// what commands run, load or trust (`PATH`, `LD_*`, `GIT_*`, `PAGER`,
/// `*_PROXY`, `SSL_CERT_FILE`, …). The message names the rule and what to
/// do instead.
pub fn secret_name_problem(name: &str) -> Option<String> {
    if let Some(problem) = secret_name_shape_problem(name) {
        return Some(problem);
    }
    if reserved(name) {
        let instead = instead_of(name);
        return Some(format!(
            "{name:?} is reserved: commands get each secret as an environment variable of its \
             name, and {name} would change what the bot's commands run, load or trust (a \
             program, library or config the shell and common tools (git, ssh, less, curl, \
             interpreters) pick from it, or where their network traffic goes), even \
             for commands that passed review; store it under a name of your own such as \
             {instead}, and let a command that needs it set it openly \
             (`{name}=\"${instead}\" …`), where review sees it"
        ));
    }
    set_by_the_shell(name).then(|| {
        let instead = instead_of(name);
        format!(
            "{name:?} is a name the shell sets itself: commands get each secret as an \
             environment variable of its name, and the shell that runs them (`sh`) replaces or \
             refuses a variable named {name}, so no command would ever see this value; store \
             it under a name of your own such as {instead}"
        )
    })
}

#[cfg(test)]
#[path = "vault_names_tests.rs"]
mod tests;

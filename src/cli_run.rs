//! `botfleet run`: start a host, serve until SIGINT, SIGTERM or SIGHUP,
//! stop it; a second signal, or blocking work that outlives the stop, does
//! not keep the process alive.
//!
//! SIGHUP stops the host as SIGTERM does: its default action killed the
//! process outright (a closed terminal, an SSH session that dropped, a
//! `kill -HUP` meant as "reload"), with no checkpoint, fact extractions cut and Shell
//! commands left running until the next start. A host started with SIGHUP
//! ignored (`nohup botfleet run`) keeps ignoring it, as `nohup` asks.
//! There is no configuration reload: a changed fleet.toml takes effect at
//! the next start.

use std::process::ExitCode;
use std::time::Duration;

use super::exit;
use super::terminal;
use crate::host;

/// Runs a host until SIGINT, SIGTERM or SIGHUP, then stops it: success
/// once the store is closed, 130 on a second signal.
pub(super) async fn run(opts: host::HostOptions) -> anyhow::Result<ExitCode> {
    // before the start, whose banner warns from the limit as raised
    raise_open_file_limit();
    // read before the start takes the options (a file it cannot load stops
    // the start, which says why)
    let published = published_tokens(&opts);
    // listening from now on: before the start, which serves HTTP before it
    // returns (a SIGTERM sent once /healthz answered, and before this,
    // killed the process by the default action instead of stopping it; a
    // signal during the start stops the host once it is up), and so that
    // no signal falls between the first wait and the second (a Ctrl-C
    // just after "stopping…" was lost)
    let mut signals = StopSignals::new()?;
    let running = host::start(opts).await?;
    terminal::serving();
    let exposed = exposed_warning(running.addr, &published);
    // after the first line, which says where the host listens
    let (first, rest) = running.banner.split_at(running.banner.len().min(1));
    for line in first.iter().chain(&exposed).chain(rest) {
        outln!("{line}");
        // a warning reaches the log too (stderr), for an operator who
        // reads only that
        if let Some(warning) = line.strip_prefix("WARNING: ") {
            tracing::warn!("{warning}");
        }
    }
    outln!("{}", host::send_hint(running.addr));
    let signal = signals.next().await;
    // the whole stop is bounded from here
    let deadline = tokio::time::Instant::now() + STOP_LIMIT;
    // what the warning names if the exit is held up: the runtime keeps no
    // list of its blocking work, the fleet knows whose turns it cuts off
    // (read before they are, from what the bots last published)
    let running_turns = turns_running(&running.fleet).await;
    // at once: from now on no turn starts and no model request is made,
    // running turns are cut off beside the API's drain (not after it),
    // and new requests are answered 503
    running.begin_stop();
    match signal {
        "SIGINT" => outln!("stopping… (Ctrl-C again to stop at once)"),
        // a service manager's stop, or `kill`: no Ctrl-C was pressed
        other => outln!("stopping… ({other}; send it again, or Ctrl-C, to stop at once)"),
    }
    // on a thread of its own, so that it outlives this runtime: once `run`
    // returns, dropping the runtime waits for every blocking task (a
    // search that never ends held the process forever, deaf to signals)
    let guard = ExitGuard::start(signals, running_turns, deadline);
    // a task, as before: a panic in the stop is reported by the panic hook
    // and the exit goes on
    let stopped = tokio::spawn(running.shutdown()).await;
    guard.done();
    // the stop's last word: the log showed "stopping…" and nothing after
    // it, whether the stop finished or was cut off (QA)
    match stopped {
        Ok(()) => outln!("stopped cleanly"),
        Err(e) => outln!(
            "stopped, but the stop itself failed ({e}): the next start resumes as after a crash"
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// Tokens anyone can read in botfleet's docs and its built-in example
/// fleet (`examples/fleet.toml`, README, docs/api.md).
const PUBLISHED_TOKENS: &[&str] = &["alice-secret"];

/// The users of the fleet `opts` start whose token is one of
/// [`PUBLISHED_TOKENS`] (inline, or from `token_env`). A fleet that does
/// not load has none: the start refuses it.
pub(super) fn published_tokens(opts: &host::HostOptions) -> Vec<String> {
    let Ok(loaded) = host::load_fleet(opts) else {
        return Vec::new();
    };
    loaded
        .file
        .users
        .iter()
        .filter(|u| {
            let token = match (&u.token, &u.token_env) {
                (Some(t), _) => Some(t.clone()),
                (None, Some(var)) => std::env::var(var).ok(),
                (None, None) => None,
            };
            token.is_some_and(|t| PUBLISHED_TOKENS.contains(&t.as_str()))
        })
        .map(|u| u.id.clone())
        .collect()
}

/// A warning when the host listens beyond loopback (`--listen
/// 0.0.0.0:PORT`, a LAN address) while `users` sign in with a token from
/// the docs: anyone who reaches the port could act as them, and the
/// example fleet's bots have Shell. It started silently (round 22, H4).
pub(super) fn exposed_warning(addr: std::net::SocketAddr, users: &[String]) -> Option<String> {
    if addr.ip().is_loopback() || users.is_empty() {
        return None;
    }
    let reach = if addr.ip().is_unspecified() {
        "every network interface of this machine"
    } else {
        "an address other machines can reach"
    };
    Some(format!(
        "WARNING: listening on {addr}, {reach}, while user(s) {} sign in with a token \
         published in botfleet's docs ({}): anyone who reaches this port can act as them, \
         through their bots' tools too (Shell where a bot has it). Give each user a token of \
         their own (`token_env` in your fleet.toml), or listen on loopback only (--listen \
         127.0.0.1:{})",
        users.join(", "),
        PUBLISHED_TOKENS.join(", "),
        addr.port()
    ))
}

/// The most open files [`raise_open_file_limit`] raises the soft limit
/// to: a hard limit may be "unlimited" or huge, and a million descriptors
/// is more than a host uses.
const MAX_OPEN_FILES: nix::libc::rlim_t = 1 << 20;

/// Raises this process's soft open-file limit (`RLIMIT_NOFILE`, `ulimit
/// -n`) to its hard limit, at most [`MAX_OPEN_FILES`], and logs it. A
/// shell's soft limit is often 1024 or less while its hard limit is far
/// higher (systemd's default is 1024:524288): the host ran with the soft
/// one, so that idle event streams could take every descriptor and leave
/// `/healthz` and new messages unanswered until they closed. The hard
/// limit is the operator's (`ulimit -Hn`, systemd `LimitNOFILE=`); the
/// start banner's warning (`http_server::fd_warning`) compares the cap on
/// connections with the limit as raised. The soft limit it started with
/// is recorded for the Shell sandbox's launcher, which gives it back to
/// each command (src/sandbox.rs).
fn raise_open_file_limit() {
    use nix::sys::resource::Resource;
    use nix::sys::resource::getrlimit;
    use nix::sys::resource::setrlimit;
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(limits) => limits,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the open-file limit (RLIMIT_NOFILE); it stays as it is");
            return;
        }
    };
    // given back to Shell commands, which would inherit the raised one
    crate::sandbox::record_starting_open_files(soft);
    let Some(raised) = raised_soft_limit(soft, hard) else {
        return;
    };
    match setrlimit(Resource::RLIMIT_NOFILE, raised, hard) {
        Ok(()) => tracing::info!(
            "raised the open-file limit (RLIMIT_NOFILE, `ulimit -n`) from {soft} to {raised}{}",
            if raised == hard {
                ", its hard limit".to_owned()
            } else {
                format!(" (its hard limit is {hard}, more than the host needs)")
            }
        ),
        Err(e) => tracing::warn!(
            error = %e,
            "cannot raise the open-file limit (RLIMIT_NOFILE, `ulimit -n`) from {soft} to its hard limit {raised}; the host runs with {soft}"
        ),
    }
}

/// The soft open-file limit to raise `soft` to, given the hard limit
/// `hard`: the hard limit, at most [`MAX_OPEN_FILES`]; `None` when `soft`
/// is that already or more (it is never lowered). `RLIM_INFINITY` is the
/// largest value, so an unlimited hard limit gives [`MAX_OPEN_FILES`].
fn raised_soft_limit(
    soft: nix::libc::rlim_t,
    hard: nix::libc::rlim_t,
) -> Option<nix::libc::rlim_t> {
    let target = hard.min(MAX_OPEN_FILES);
    (soft < target).then_some(target)
}

/// How long the process may take to exit once the stop is done (the store
/// closed and flushed) before it exits without waiting for the blocking
/// work still running.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// The longest a stop takes, from the signal to the exit
/// (docs/operations.md): the API's drain (5 s) beside the turns' cut-off,
/// the scheduler's stop and the fact extractions' wait (5 s), then the
/// fleet's stop and the store's close. A stop still not done then (a
/// store writer stuck on a slow disk) is left: the process exits, and the
/// next start resumes what was running as after a crash.
const STOP_LIMIT: Duration = Duration::from_secs(15);

/// The bots whose turns are running, to name them if the exit is held up.
async fn turns_running(fleet: &botfleet_actors::FleetHandle) -> Vec<String> {
    let active = tokio::time::timeout(Duration::from_secs(1), fleet.active()).await;
    match active {
        Ok(Ok(bots)) => bots
            .into_iter()
            .filter(|b| b.turn.is_some())
            .map(|b| b.id.to_string())
            .collect(),
        Ok(Err(_)) | Err(_) => Vec::new(),
    }
}

/// Watches a stopping host from a thread with its own runtime: a second
/// SIGINT, SIGTERM or SIGHUP exits at once with status 130 (while the stop runs
/// and while the runtime is dropped after it), once the stop is done the
/// process exits at the latest [`EXIT_GRACE`] later, and in any case at
/// [`STOP_LIMIT`] after the signal.
struct ExitGuard {
    done: tokio::sync::oneshot::Sender<()>,
}

impl ExitGuard {
    /// Starts watching. If no thread can be started, a second signal is
    /// still seen while the stop runs (by a task), but not after it.
    fn start(
        signals: StopSignals,
        running_turns: Vec<String>,
        deadline: tokio::time::Instant,
    ) -> Self {
        let (done, stopped) = tokio::sync::oneshot::channel();
        let started = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| {
                std::thread::Builder::new()
                    .name("botfleet-exit".into())
                    .spawn(move || {
                        rt.block_on(watch_exit(signals, stopped, running_turns, deadline))
                    })
                    .map_err(anyhow::Error::from)
            });
        if let Err(e) = started {
            tracing::warn!(
                error = %e,
                "cannot watch the exit from a thread of its own: a second Ctrl-C is seen only while the host stops, and the exit may wait for blocking work"
            );
            // the signals went with the failed start: listen anew
            match StopSignals::new() {
                Ok(mut signals) => {
                    tokio::spawn(async move {
                        let _ = signals.next().await;
                        stop_at_once();
                    });
                }
                Err(e) => tracing::warn!(error = %e, "cannot listen for a second Ctrl-C"),
            }
        }
        Self { done }
    }

    /// The stop is done: the store is closed and flushed.
    fn done(self) {
        let _ = self.done.send(());
    }
}

/// Why the exit watch ends the process.
enum HeldUp {
    /// The stop is done but blocking work keeps the process up.
    BlockingWork,
    /// The stop itself is not done by [`STOP_LIMIT`].
    Stop,
}

/// The exit watch's thread: a second signal, the grace after the stop, or
/// the stop's limit (`deadline`), whichever comes first.
async fn watch_exit(
    mut signals: StopSignals,
    stopped: tokio::sync::oneshot::Receiver<()>,
    running_turns: Vec<String>,
    deadline: tokio::time::Instant,
) {
    let held_up = async {
        // an error: the stop itself ended (a panic), so `run` returns and
        // the runtime's drop is what is waited for, as after a stop
        match tokio::time::timeout_at(deadline, stopped).await {
            Ok(_) => {
                let grace = tokio::time::Instant::now() + EXIT_GRACE;
                tokio::time::sleep_until(grace.min(deadline)).await;
                HeldUp::BlockingWork
            }
            Err(_) => HeldUp::Stop,
        }
    };
    tokio::select! {
        _ = signals.next() => stop_at_once(),
        held = held_up => {
            let turns = if running_turns.is_empty() {
                "none".to_owned()
            } else {
                running_turns.join(", ")
            };
            match held {
                HeldUp::BlockingWork => {
                    tracing::warn!(
                        "the host stopped (its store is closed) but blocking work was still running: a search, a file tool or a script check of a cancelled turn (bots with a turn running at the stop: {turns}); exiting without waiting for it"
                    );
                    std::process::exit(0);
                }
                HeldUp::Stop => {
                    tracing::warn!(
                        "the stop was not done {} s after the signal (the store had not closed); exiting: what was committed is safe, and the next start resumes the rest as after a crash (bots with a turn running at the stop: {turns})",
                        STOP_LIMIT.as_secs()
                    );
                    std::process::exit(i32::from(exit::ERROR));
                }
            }
        }
    }
}

/// A second signal: out at once, without waiting for turns, tasks or
/// blocking threads (the runtime would on its way out); what is committed
/// is safe, the next start resumes the rest as after a crash.
fn stop_at_once() -> ! {
    errln!("stopped at once; the next start resumes what was running");
    std::process::exit(exit::INTERRUPTED);
}

/// SIGINT (Ctrl-C), SIGTERM and SIGHUP, each received from the moment
/// this is made (listening replaces the signal's default action, which
/// for SIGHUP, as for SIGTERM, is to kill the process). SIGHUP is not
/// listened to when it was ignored at the start ([`hangup_ignored`]).
struct StopSignals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn new() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::SignalKind;
            use tokio::signal::unix::signal;
            Ok(Self {
                int: signal(SignalKind::interrupt())?,
                term: signal(SignalKind::terminate())?,
                hup: if hangup_ignored() {
                    None
                } else {
                    Some(signal(SignalKind::hangup())?)
                },
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    /// The next SIGINT, SIGTERM or SIGHUP, by its name.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.int.recv() => "SIGINT",
                _ = self.term.recv() => "SIGTERM",
                () = async {
                    match &mut self.hup {
                        Some(hup) => {
                            hup.recv().await;
                        }
                        None => std::future::pending().await,
                    }
                } => "SIGHUP",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}

/// Whether SIGHUP was ignored when this process started, as `nohup` and
/// some supervisors start it: such a host must outlive the terminal it
/// was started from. Read once, before this process listens for SIGHUP
/// (which clears the ignore), from the kernel's `SigIgn` mask of
/// `/proc/self/status` (bit 0 is SIGHUP): the disposition itself can only
/// be read through `sigaction`, which needs `unsafe`. Elsewhere, and when
/// the file cannot be read, SIGHUP counts as not ignored.
#[cfg(unix)]
fn hangup_ignored() -> bool {
    static IGNORED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *IGNORED.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("SigIgn:"))
                    .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
            })
            .is_some_and(|mask| mask & 1 != 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The soft limit goes up to the hard one, capped, and never down.
    #[test]
    fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
        assert_eq!(raised_soft_limit(64, 20_000), Some(20_000));
        assert_eq!(raised_soft_limit(1024, 524_288), Some(524_288));
        assert_eq!(
            raised_soft_limit(1024, nix::libc::RLIM_INFINITY),
            Some(MAX_OPEN_FILES)
        );
        assert_eq!(raised_soft_limit(1024, 4_000_000), Some(MAX_OPEN_FILES));
        assert_eq!(raised_soft_limit(20_000, 20_000), None);
        assert_eq!(raised_soft_limit(2_000_000, 4_000_000), None);
        assert_eq!(
            raised_soft_limit(nix::libc::RLIM_INFINITY, nix::libc::RLIM_INFINITY),
            None
        );
    }
}

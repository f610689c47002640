//! Wiring shared by every command: the clients built once from the global flags, the outcome a
//! command reports to `main` (which alone turns it into an exit code), and the stop signal,
//! caught from the first statement of `main`.

use precise_ttl_dynamodb::Dynamo;
use precise_ttl_flags as args;

/// What a command wants the process to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Finished, but some items could not be deleted; they stay due.
    Partial,
    /// `doctor` found problems.
    Findings,
}

/// The clients every command shares, built once.
pub async fn connect(global: &args::Global) -> Result<Dynamo, precise_ttl_dynamodb::AdapterError> {
    Dynamo::connect(&global.connect_options()).await
}

/// The archive sink at `url`, opened (a folder created, a bucket checked).
pub async fn open_sink(
    url: &precise_ttl_archive::SinkUrl,
    tuning: &args::SinkTuning,
    global: &args::Global,
) -> Result<precise_ttl_archive::Sink, precise_ttl_archive::SinkError> {
    precise_ttl_archive::Sink::open(url, &tuning.options(global)).await
}

/// `--archive`'s sink, opened, if the flag was given.
pub async fn open_archive(
    archive: &args::ArchiveArg,
    global: &args::Global,
) -> Result<Option<precise_ttl_archive::Sink>, precise_ttl_archive::SinkError> {
    match &archive.archive {
        None => Ok(None),
        Some(url) => Ok(Some(open_sink(url, &archive.tuning, global).await?)),
    }
}

/// An operator tool's error as the adapter's or the store's own, so `main`'s hints and exit
/// codes find it in the chain as they find the adapter's.
pub fn ops_error(e: precise_ttl_ops::error::OpsError) -> anyhow::Error {
    match e {
        precise_ttl_ops::error::OpsError::Adapter(e) => e.into(),
        precise_ttl_ops::error::OpsError::Store(e) => e.into(),
    }
}

/// How long a stopping command waits for its archive to reach its final place (S3: the last
/// segments uploaded); what is left stays in the spool for the next start.
pub const ARCHIVE_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// SIGTERM and SIGINT, caught from the first statement of `main` (see [`catch_stop_signals`]).
///
/// A stop that comes while a command starts (parsing its flags, connecting, opening its lease
/// table or archive) must end it in order, with exit status 0, as a stop later does: a service
/// manager stops processes at any moment, and a test may stop one just spawned. So the handlers
/// are not installed by the command when it gets round to it, but by `main` before anything
/// else, and the stop is a flag that a command reads whenever it looks. Before that statement
/// (the dynamic loader's work, well under a millisecond) a signal has its default effect.
///
/// Commands that do not stop in order (`setup`, `status`, `sweep`, `doctor`, …) keep the default
/// effect: [`die_on_stop_signals`].
#[cfg(unix)]
mod stop {
    use std::sync::Arc;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, Ordering};

    const SIGNALS: [i32; 2] = [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT];

    struct Flags {
        /// Which signal came, one flag each, so a command that ends by it can end by the same.
        came: [Arc<AtomicBool>; 2],
        /// Set for commands that do not stop in order: the signal then has its default effect.
        default: Arc<AtomicBool>,
    }

    static FLAGS: OnceLock<Flags> = OnceLock::new();

    pub fn catch() {
        // Blocked while the handlers are registered: signal-hook installs the OS handler before
        // it publishes the action, and a signal in between would run a handler with nothing to
        // do and be lost (a test that waited for the handler in /proc and stopped the process at
        // once hung in CI). A blocked signal stays pending and lands once unblocked, after.
        use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
        let mut blocked = SigSet::empty();
        blocked.add(Signal::SIGTERM);
        blocked.add(Signal::SIGINT);
        let mut before = SigSet::empty();
        let masked = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&blocked), Some(&mut before));
        register();
        if masked.is_ok() {
            let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&before), None);
        }
    }

    fn register() {
        FLAGS.get_or_init(|| {
            let flags = Flags {
                came: [Arc::default(), Arc::default()],
                default: Arc::default(),
            };
            for (signal, came) in SIGNALS.iter().zip(&flags.came) {
                // Order matters: the flag first, then the default effect when asked for. A
                // registration that fails (it cannot for these two signals) leaves the default.
                let _ = signal_hook::flag::register(*signal, Arc::clone(came));
                let _ = signal_hook::flag::register_conditional_default(
                    *signal,
                    Arc::clone(&flags.default),
                );
            }
            flags
        });
    }

    pub fn die() {
        let Some(flags) = FLAGS.get() else { return };
        flags.default.store(true, Ordering::SeqCst);
        // One that came before this: its default effect now.
        for (signal, came) in SIGNALS.iter().zip(&flags.came) {
            if came.load(Ordering::SeqCst) {
                let _ = signal_hook::low_level::emulate_default_handler(*signal);
            }
        }
    }

    pub fn came() -> bool {
        FLAGS
            .get()
            .is_some_and(|f| f.came.iter().any(|c| c.load(Ordering::SeqCst)))
    }
}

/// Catches SIGTERM and SIGINT into a flag. Called as the first statement of `main`.
pub fn catch_stop_signals() {
    #[cfg(unix)]
    stop::catch();
}

/// For a command that does not stop in order: SIGTERM and SIGINT end the process as if never
/// caught, including one that came while the command line was parsed.
pub fn die_on_stop_signals() {
    #[cfg(unix)]
    stop::die();
}

/// The stop, as a channel: `true` once SIGTERM or SIGINT came. The first call (inside the
/// runtime) starts the one listener.
fn stopped() -> &'static tokio::sync::watch::Sender<bool> {
    static STOPPED: std::sync::OnceLock<tokio::sync::watch::Sender<bool>> =
        std::sync::OnceLock::new();
    STOPPED.get_or_init(|| {
        let (tx, _) = tokio::sync::watch::channel(false);
        let sender = tx.clone();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            // The streams first, then the flag: a signal that came before the streams existed
            // is in the flag, one after is in a stream.
            let term = signal(SignalKind::terminate()).ok();
            let interrupt = signal(SignalKind::interrupt()).ok();
            tokio::spawn(async move {
                if !stop::came() {
                    match (term, interrupt) {
                        (Some(mut term), Some(mut interrupt)) => {
                            tokio::select! {
                                _ = interrupt.recv() => {}
                                _ = term.recv() => {}
                            }
                        }
                        _ => {
                            let _ = tokio::signal::ctrl_c().await;
                        }
                    }
                }
                sender.send_replace(true);
            });
        }
        #[cfg(not(unix))]
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            sender.send_replace(true);
        });
        tx
    })
}

/// Starts listening for the stop (inside the runtime, at the start of a command that stops in
/// order). [`signal`] does it too; calling it first wakes the command the moment a stop comes.
pub fn listen_for_stop() {
    stopped();
}

/// SIGINT or SIGTERM: completes when one has come, at once if one came already (at any time
/// since the first statement of `main`).
pub fn signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    let mut rx = stopped().subscribe();
    async move {
        // An error means the listener is gone, which it never is before the process ends.
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
}

/// Calls `attempt` until it succeeds, fails for good, or a signal arrives (`Ok(None)`): see
/// [`precise_ttl_dynamodb::reach`].
pub async fn until_reachable<T, F, Fut>(attempt: F) -> anyhow::Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, precise_ttl_dynamodb::AdapterError>>,
{
    until_reachable_by(None, attempt).await
}

/// [`until_reachable`], giving up with an error at `deadline` (`run --for`): a scheduled run
/// whose store never answered ends on time and says so, rather than waiting past its slot
/// while the next one starts, and exits non-zero, having done nothing.
pub async fn until_reachable_by<T, F, Fut>(
    deadline: Option<tokio::time::Instant>,
    attempt: F,
) -> anyhow::Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, precise_ttl_dynamodb::AdapterError>>,
{
    use precise_ttl_dynamodb::reach::{ReachError, until_reachable};
    const WHY: &str = "the --for deadline passed before the store could be reached";
    until_reachable(signal(), deadline, attempt)
        .await
        .map_err(|e| match e {
            ReachError::Fatal(e) => e.into(),
            ReachError::DeadlinePassed(Some(e)) => anyhow::Error::new(e).context(WHY),
            ReachError::DeadlinePassed(None) => anyhow::anyhow!("{WHY} (no answer yet)"),
        })
}

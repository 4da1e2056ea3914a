//! The subprocess host: drives any adapter speaking protocol v1 over its stdin and stdout.
//!
//! Whatever the adapter does (hang, die, write garbage, answer the wrong id,
//! write a 50 MB line, flood stderr) becomes a [`HostError`] for that step,
//! within the deadline and in bounded memory; the harness never hangs or
//! crashes because of it.

mod concurrent;
mod tail;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use delegation_model::{Action, ActionResult};
use delegation_protocol::{
    DEFAULT_LINE_LIMIT, DecodeError, HostMessage, INITIALIZE, InitializeParams, InitializeResult,
    LineDecoder, LineTooLong, LogParams, PROTOCOL_VERSION, STORE_DIR_ENV, encode_action,
    encode_request, error_code,
};
use serde_json::value::RawValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout, timeout_at};

use crate::{Host, HostError, HostLauncher};
use tail::Tail;

/// How the harness treats one adapter process. Every field has a default
/// chosen so that a slow CI machine does not cause false verdicts while a hung
/// adapter still costs seconds, not minutes.
#[derive(Clone, Debug)]
pub struct ProcessOptions {
    /// Deadline for each request, `initialize` included. Default 10 s.
    pub request_timeout: Duration,
    /// Longest line accepted from the adapter. Default 1 MiB.
    pub line_limit: usize,
    /// How much of stderr (and of `log` notifications) is kept for reports. Default 64 KiB.
    pub stderr_tail_bytes: usize,
    /// How many `log` notifications are kept as structured records. Default 1000.
    pub log_records: usize,
    /// On shutdown, how long the adapter may take to exit after its stdin
    /// closes before it gets SIGTERM. Default 2 s.
    pub stdin_close_grace: Duration,
    /// How long after SIGTERM before SIGKILL. Default 2 s.
    pub term_grace: Duration,
    /// After the adapter closes stdout, how long to wait for its exit status. Default 1 s.
    pub exit_status_wait: Duration,
    /// Extra environment variables for the adapter.
    pub env: Vec<(String, String)>,
    /// Working directory of the adapter; default: the harness's own.
    pub current_dir: Option<PathBuf>,
    /// Rewrites a raw result before it is decoded as an `ActionResult`: where
    /// a host's own deny-reason names become the harness's (from the
    /// expectations file). Applied only to a result that does not decode as
    /// it comes: a translation maps names that would not decode, and a
    /// result that decodes needs none (parsing every reply to a value to
    /// find that out was a fifth of the harness's work over stdio).
    /// Absent: results are decoded as they come.
    pub translate_result: Option<ResultTranslator>,
}

/// A rewrite of a raw result, failing with a message naming what could not be translated.
#[derive(Clone)]
pub struct ResultTranslator(
    pub Arc<dyn Fn(&mut serde_json::Value) -> Result<(), String> + Send + Sync>,
);

impl std::fmt::Debug for ResultTranslator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResultTranslator")
    }
}

impl Default for ProcessOptions {
    fn default() -> Self {
        ProcessOptions {
            request_timeout: Duration::from_secs(10),
            line_limit: DEFAULT_LINE_LIMIT,
            stderr_tail_bytes: 64 * 1024,
            log_records: 1000,
            stdin_close_grace: Duration::from_secs(2),
            term_grace: Duration::from_secs(2),
            exit_status_wait: Duration::from_secs(1),
            env: Vec::new(),
            current_dir: None,
            translate_result: None,
        }
    }
}

/// Starts an adapter from a command line such as `node adapter.js --strict`.
#[derive(Clone, Debug)]
pub struct ProcessLauncher {
    command_line: String,
    program: String,
    args: Vec<String>,
    options: ProcessOptions,
}

impl ProcessLauncher {
    /// Splits `command_line` as a POSIX shell would (quotes, escapes), without running a shell.
    pub fn new(command_line: &str, options: ProcessOptions) -> Result<ProcessLauncher, HostError> {
        let mut words = shell_words::split(command_line).map_err(|e| {
            HostError::Launch(format!(
                "cannot split host command `{command_line}`: {e}; quote it as a POSIX shell would"
            ))
        })?;
        if words.is_empty() {
            return Err(HostError::Launch(
                "host command is empty; expected a program and its arguments, such as `node adapter.js`"
                    .into(),
            ));
        }
        let program = words.remove(0);
        Ok(ProcessLauncher {
            command_line: command_line.to_string(),
            program,
            args: words,
            options,
        })
    }

    pub fn options(&self) -> &ProcessOptions {
        &self.options
    }

    /// Starts the adapter on `store_dir`; the concrete type, for callers that
    /// want the log records and memory figures [`Host`] does not expose.
    pub async fn launch_process(&self, store_dir: &Path) -> Result<ProcessHost, HostError> {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env(STORE_DIR_ENV, store_dir)
            // Inherited by everything the adapter starts, so that a descendant
            // that left the process group can still be found after the run.
            .env(RUN_MARKER_ENV, run_marker())
            .envs(self.options.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, so that shutdown reaches the adapter's
            // children too (a `sh -c` wrapper, a node worker).
            .process_group(0);
        if let Some(dir) = &self.options.current_dir {
            command.current_dir(dir);
        }
        if let Some(&original) = ORIGINAL_SOFT_LIMIT.get() {
            // SAFETY: runs in the child between fork and exec, and calls
            // only setrlimit, which is async-signal-safe.
            unsafe {
                command.pre_exec(move || {
                    let mut limit = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                        limit.rlim_cur = original;
                        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                    }
                    Ok(())
                });
            }
        }
        let mut child = command.spawn().map_err(|e| {
            HostError::from_launch_io(
                format!(
                    "cannot start `{}` (from `{}`)",
                    self.program, self.command_line
                ),
                &e,
            )
        })?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(HostError::Launch(format!(
                "`{}` started without the piped stdin, stdout and stderr it was given",
                self.command_line
            )));
        };
        if let Some(pid) = child.id() {
            lock(&LIVE_GROUPS).insert(pid as i32);
        }
        let tail = Arc::new(Mutex::new(Tail::new(self.options.stderr_tail_bytes)));
        let stderr_task = tokio::spawn({
            let tail = Arc::clone(&tail);
            async move {
                // Drained continuously: a pipe left full would block the
                // adapter in its next write to stderr.
                let mut buf = Vec::with_capacity(READ_CHUNK);
                loop {
                    buf.clear();
                    match stderr.read_buf(&mut buf).await {
                        Ok(n @ 1..) => lock(&tail).push(&buf[..n]),
                        _ => break,
                    }
                }
            }
        });
        Ok(ProcessHost {
            pgid: child.id().map(|pid| pid as i32),
            child,
            stdin: Some(stdin),
            stdout,
            decoder: LineDecoder::new(self.options.line_limit),
            pending: VecDeque::new(),
            read_buf: Vec::with_capacity(READ_CHUNK),
            stdout_bytes: 0,
            eof: false,
            next_id: 1,
            tail,
            stderr_task: Some(stderr_task),
            logs: VecDeque::new(),
            logs_dropped: 0,
            notifications: 0,
            broken: None,
            exit_status: None,
            stopped: false,
            store_dir: store_dir.to_path_buf(),
            options: self.options.clone(),
        })
    }
}

#[async_trait]
impl HostLauncher for ProcessLauncher {
    async fn launch(&self, store_dir: &Path) -> Result<Box<dyn Host>, HostError> {
        Ok(Box::new(self.launch_process(store_dir).await?))
    }

    fn describe(&self) -> String {
        self.command_line.clone()
    }
}

/// One running adapter process.
pub struct ProcessHost {
    child: Child,
    /// Equal to the child's pid: it leads its own group.
    pgid: Option<i32>,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    decoder: LineDecoder,
    /// Lines decoded from stdout but not yet consumed.
    pending: VecDeque<Result<Vec<u8>, LineTooLong>>,
    /// Filled by `read_buf` into its spare capacity, never zeroed: zeroing
    /// two 64 KiB buffers was 130,000 instructions a host start.
    read_buf: Vec<u8>,
    /// Bytes read from stdout so far: none at a deadline suggests an unflushed stdout.
    stdout_bytes: u64,
    eof: bool,
    next_id: u64,
    tail: Arc<Mutex<Tail>>,
    stderr_task: Option<JoinHandle<()>>,
    logs: VecDeque<LogParams>,
    logs_dropped: u64,
    notifications: u64,
    /// The verdict that broke the stream; every later call returns it at once.
    broken: Option<HostError>,
    exit_status: Option<ExitStatus>,
    stopped: bool,
    store_dir: PathBuf,
    options: ProcessOptions,
}

/// Why an exchange stopped before a response arrived.
enum Stop {
    Verdict(HostError),
    /// stdout closed or stdin refused the request: the process is (nearly) gone.
    Gone,
}

impl ProcessHost {
    /// `log` notifications received, oldest first (at most `log_records` are kept).
    pub fn logs(&self) -> impl Iterator<Item = &LogParams> {
        self.logs.iter()
    }

    /// `log` notifications dropped because more than `log_records` arrived.
    pub fn logs_dropped(&self) -> u64 {
        self.logs_dropped
    }

    /// Notifications other than `log`: counted, otherwise ignored.
    pub fn other_notifications(&self) -> u64 {
        self.notifications
    }

    /// Total bytes the adapter wrote to stderr, of which only the tail is kept.
    pub fn stderr_bytes_seen(&self) -> u64 {
        lock(&self.tail).total()
    }

    /// The most memory the line decoder held for an incomplete line; never above the line limit.
    pub fn decoder_high_water_mark(&self) -> usize {
        self.decoder.high_water_mark()
    }

    /// Bytes of stdout dropped as part of over-long lines.
    pub fn discarded_bytes(&self) -> u64 {
        self.decoder.discarded()
    }

    /// The verdict that marked this host broken, if any.
    pub fn broken(&self) -> Option<&HostError> {
        self.broken.as_ref()
    }

    /// How the adapter ended, once it has.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.exit_status
    }

    /// The adapter's pid, which is also its process group id.
    pub fn pid(&self) -> Option<u32> {
        self.pgid.map(|p| p as u32)
    }

    /// Sends one request and returns its `result`, under the request deadline.
    async fn request(
        &mut self,
        method: &str,
        id: u64,
        line: Vec<u8>,
    ) -> Result<Box<RawValue>, HostError> {
        if let Some(verdict) = &self.broken {
            return Err(verdict.clone());
        }
        let deadline = Instant::now() + self.options.request_timeout;
        let outcome = match timeout_at(deadline, self.exchange(method, id, &line)).await {
            Ok(Ok(result)) => return Ok(result),
            Ok(Err(Stop::Verdict(verdict))) => verdict,
            Ok(Err(Stop::Gone)) => self.exited(method).await,
            Err(_) if self.stdout_bytes == 0 => HostError::Silent {
                method: method.to_string(),
                after_ms: self.options.request_timeout.as_millis() as u64,
            },
            Err(_) => HostError::Timeout {
                method: method.to_string(),
                after_ms: self.options.request_timeout.as_millis() as u64,
            },
        };
        if is_fatal(&outcome) {
            self.broken = Some(outcome.clone());
        }
        Err(outcome)
    }

    /// The next request id; ids are never reused within one process.
    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    async fn exchange(
        &mut self,
        method: &str,
        id: u64,
        line: &[u8],
    ) -> Result<Box<RawValue>, Stop> {
        let stdin = self.stdin.as_mut().ok_or(Stop::Gone)?;
        if stdin.write_all(line).await.is_err() || stdin.flush().await.is_err() {
            return Err(Stop::Gone);
        }
        loop {
            let line = match self.next_line().await {
                None => return Err(Stop::Gone),
                Some(Err(too_long)) => return Err(self.violation(method, too_long.to_string())),
                Some(Ok(line)) => line,
            };
            match delegation_protocol::decode_message(&line) {
                // Blank lines carry nothing; tolerating them costs nothing.
                Err(DecodeError::Blank) => continue,
                Err(e) => return Err(self.violation(method, e.to_string())),
                Ok(HostMessage::Log(log)) => self.record_log(log),
                Ok(HostMessage::Notification(_)) => self.notifications += 1,
                Ok(HostMessage::Response(response)) => {
                    return match response.id {
                        Some(got) if got != id => Err(self.violation(
                            method,
                            format!("response has id {got}; expected {id}, the id of this request"),
                        )),
                        _ => self.answer(method, id, response),
                    };
                }
            }
        }
    }

    /// What one response to request `id` says: its result, or the verdict
    /// its error (or its null id) is.
    fn answer(
        &self,
        method: &str,
        id: u64,
        response: delegation_protocol::Response,
    ) -> Result<Box<RawValue>, Stop> {
        match (response.id, response.outcome) {
            (Some(_), Ok(result)) => Ok(result),
            (Some(_), Err(error)) if error_code::UNSUPPORTED.contains(&error.code) => {
                Err(Stop::Verdict(HostError::Unsupported {
                    method: method.to_string(),
                }))
            }
            (Some(_), Err(error)) => Err(Stop::Verdict(HostError::Rpc {
                method: method.to_string(),
                code: error.code,
                message: error.message,
            })),
            (None, outcome) => Err(self.violation(
                method,
                format!(
                    "error response has id null (the host could not read request {id}): {}",
                    outcome.err().map(|e| e.message).unwrap_or_default()
                ),
            )),
        }
    }

    /// A raw result as an `ActionResult`, translated first when the options
    /// say so. A result of the wrong shape is a violation for this step, but
    /// the stream is still in step, so the host is not marked broken.
    fn decode_result(&self, method: &str, result: &RawValue) -> Result<ActionResult, HostError> {
        let shape_error = |e: serde_json::Error| HostError::Protocol {
            method: method.to_string(),
            detail: format!("result does not match ActionResult: {e}"),
        };
        match &self.options.translate_result {
            None => serde_json::from_str(result.get()).map_err(shape_error),
            Some(ResultTranslator(translate)) => {
                if let Ok(decoded) = serde_json::from_str(result.get()) {
                    return Ok(decoded);
                }
                let mut raw: serde_json::Value =
                    serde_json::from_str(result.get()).map_err(shape_error)?;
                translate(&mut raw).map_err(|detail| HostError::Protocol {
                    method: method.to_string(),
                    detail,
                })?;
                serde_json::from_value(raw).map_err(shape_error)
            }
        }
    }

    fn violation(&self, method: &str, detail: String) -> Stop {
        Stop::Verdict(HostError::Protocol {
            method: method.to_string(),
            detail,
        })
    }

    /// The next line of stdout, `None` at end of stream. Cancel-safe: a
    /// deadline may drop it mid-read without losing buffered lines.
    async fn next_line(&mut self) -> Option<Result<Vec<u8>, LineTooLong>> {
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some(line);
            }
            if self.eof {
                return None;
            }
            self.read_buf.clear();
            match self.stdout.read_buf(&mut self.read_buf).await {
                Ok(n @ 1..) => {
                    self.stdout_bytes += n as u64;
                    self.pending.extend(self.decoder.push(&self.read_buf[..n]));
                }
                Ok(0) | Err(_) => {
                    self.eof = true;
                    self.pending.extend(self.decoder.finish().map(Ok));
                }
            }
        }
    }

    fn record_log(&mut self, log: LogParams) {
        lock(&self.tail).push(format!("[{:?}] {}\n", log.level, log.message).as_bytes());
        if self.logs.len() >= self.options.log_records {
            self.logs.pop_front();
            self.logs_dropped += 1;
        }
        self.logs.push_back(log);
    }

    /// The verdict for a process that went away during `method`.
    async fn exited(&mut self, method: &str) -> HostError {
        let status = match self.exit_status {
            Some(status) => Some(status),
            None => match timeout(self.options.exit_status_wait, self.child.wait()).await {
                Ok(Ok(status)) => Some(status),
                _ => None,
            },
        };
        self.exit_status = status;
        self.settle_stderr(Duration::from_millis(500)).await;
        HostError::Exited {
            method: method.to_string(),
            status: match status {
                Some(status) => status.to_string(),
                None => "closed its stdout but is still running".into(),
            },
            stderr_tail: self.stderr_tail(),
        }
    }

    /// Lets the stderr reader take the adapter's last words, within `wait`.
    async fn settle_stderr(&mut self, wait: Duration) {
        if let Some(task) = self.stderr_task.as_mut()
            && timeout(wait, task).await.is_ok()
        {
            self.stderr_task = None;
        }
    }

    fn signal_group(&self, signal: i32) {
        if let Some(pgid) = self.pgid {
            // SAFETY: kill(2) with a negative pid signals a process group;
            // it touches no memory of ours. ESRCH (group gone) is fine.
            unsafe {
                libc::kill(-pgid, signal);
            }
        }
    }
}

/// The environment variable every adapter (and so every process it starts)
/// gets, holding [`run_marker`].
pub const RUN_MARKER_ENV: &str = "DELEGATION_HARNESS_RUN";

/// Unique to this harness process: the value of [`RUN_MARKER_ENV`] in its adapters.
pub fn run_marker() -> &'static str {
    static MARKER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MARKER.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{}-{nanos}", std::process::id())
    })
}

/// The soft descriptor limit this process was started with, when
/// [`raise_descriptor_limit`] raised it: adapters get it back.
static ORIGINAL_SOFT_LIMIT: std::sync::OnceLock<libc::rlim_t> = std::sync::OnceLock::new();

/// Raises this process's soft descriptor limit to its hard limit when it
/// is below `needed`, and returns the limit now in force. Adapters started
/// afterwards still get the soft limit the harness was given: the harness
/// needs descriptors for many jobs, a host should run as its users run it.
///
/// Only when needed, because giving adapters their limit back takes a
/// `pre_exec` step, and a command with one is started by `fork` rather than
/// `posix_spawn`: the catalogue over stdio took 60% more CPU that way.
pub fn raise_descriptor_limit(needed: u64) -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write one rlimit we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < needed && limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                let _ = ORIGINAL_SOFT_LIMIT.set(limit.rlim_cur);
                return Some(raised.rlim_cur as u64);
            }
        }
    }
    Some(limit.rlim_cur as u64)
}

/// The most one read from an adapter's stdout or stderr takes (a pipe's
/// buffer on Linux).
const READ_CHUNK: usize = 64 * 1024;

/// Process groups of adapters started and not yet stopped by this process.
static LIVE_GROUPS: Mutex<std::collections::BTreeSet<i32>> =
    Mutex::new(std::collections::BTreeSet::new());

/// Sends SIGKILL to the process group of every adapter still running, and
/// waits (at most `wait`) until each group leader is dead: what an
/// interrupted run does before it removes the store directories.
pub fn kill_all_adapters(wait: Duration) {
    let groups: Vec<i32> = lock(&LIVE_GROUPS).iter().copied().collect();
    for pgid in &groups {
        // SAFETY: kill(2) on a process group; touches no memory of ours.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
    for pgid in groups {
        wait_until_dead(pgid, wait);
    }
}

/// Waits until `pid` has exited (a zombie holds no files any more) or `wait` passes.
fn wait_until_dead(pid: i32, wait: Duration) {
    let until = std::time::Instant::now() + wait;
    while std::time::Instant::now() < until {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            // The state follows the command name in parentheses.
            Ok(stat)
                if stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|s| s.trim_start().starts_with('Z')) =>
            {
                return;
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return,
        }
    }
}

/// A process an adapter started that is still alive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Survivor {
    pub pid: u32,
    /// Its command line, arguments separated by spaces.
    pub command: String,
}

/// Every process still alive that carries this harness process's
/// [`run_marker`] in its environment: adapters and whatever they started,
/// including descendants that left the adapter's process group (`setsid`).
/// Empty where `/proc` cannot be read.
///
/// A process of a group just killed can still be seen alive for a moment
/// (SIGKILL delivered, exit not yet done; easily so on a loaded machine), so
/// only what is still there after up to a second counts as surviving: a
/// warning about an escaped process must not be a race.
pub fn surviving_descendants() -> Vec<Survivor> {
    let patience = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        let alive = marked_processes();
        if alive.is_empty() || std::time::Instant::now() >= patience {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One look at `/proc` for live processes carrying the run marker.
fn marked_processes() -> Vec<Survivor> {
    let wanted = format!("{RUN_MARKER_ENV}={}", run_marker());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !environ
            .split(|&b| b == 0)
            .any(|var| var == wanted.as_bytes())
        {
            continue;
        }
        let dead = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|s| s.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if dead {
            continue;
        }
        let command = std::fs::read(entry.path().join("cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .split('\0')
                    .filter(|a| !a.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        out.push(Survivor { pid, command });
    }
    out
}

/// Kills the survivors found by [`surviving_descendants`], by pid, and
/// waits (at most 2 s each) until they are dead.
pub fn kill_survivors(survivors: &[Survivor]) {
    for s in survivors {
        // SAFETY: kill(2) on one pid; touches no memory of ours.
        unsafe {
            libc::kill(s.pid as i32, libc::SIGKILL);
        }
    }
    for s in survivors {
        wait_until_dead(s.pid as i32, Duration::from_secs(2));
    }
}

/// A verdict after which the stream cannot be trusted: the next line might
/// be the late answer to this request, so the host is marked broken.
fn is_fatal(verdict: &HostError) -> bool {
    matches!(
        verdict,
        HostError::Timeout { .. }
            | HostError::Silent { .. }
            | HostError::Exited { .. }
            | HostError::Protocol { .. }
    )
}

fn lock<T>(shared: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a byte ring or a set of
    // group ids inconsistent.
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[async_trait]
impl Host for ProcessHost {
    async fn initialize(
        &mut self,
        mut params: InitializeParams,
    ) -> Result<InitializeResult, HostError> {
        let launched_on = self.store_dir.to_string_lossy().into_owned();
        if params.environment.store_dir.is_empty() {
            params.environment.store_dir = launched_on;
        } else if params.environment.store_dir != launched_on {
            return Err(HostError::Launch(format!(
                "initialize names store_dir `{}` but the adapter was launched on `{launched_on}`; \
                 pass the launch directory (or leave store_dir empty to have it filled in)",
                params.environment.store_dir
            )));
        }
        let id = self.take_id();
        let line = encode_request(id, INITIALIZE, &params);
        let result = self.request(INITIALIZE, id, line).await?;
        let result: InitializeResult =
            serde_json::from_str(result.get()).map_err(|e| HostError::Protocol {
                method: INITIALIZE.into(),
                detail: format!("result does not match InitializeResult: {e}"),
            })?;
        let major = |v: &str| v.split('.').next().unwrap_or_default().to_string();
        if major(&result.protocol_version) != major(PROTOCOL_VERSION) {
            let verdict = HostError::Protocol {
                method: INITIALIZE.into(),
                detail: format!(
                    "host speaks protocol_version `{}`; this harness speaks `{PROTOCOL_VERSION}` (same major version required)",
                    result.protocol_version
                ),
            };
            self.broken = Some(verdict.clone());
            return Err(verdict);
        }
        Ok(result)
    }

    async fn call(&mut self, action: &Action) -> Result<ActionResult, HostError> {
        let method = action.method();
        let id = self.take_id();
        let result = self.request(method, id, encode_action(id, action)).await?;
        self.decode_result(method, &result)
    }

    async fn call_concurrently(
        &mut self,
        actions: &[Action],
    ) -> Vec<Result<ActionResult, HostError>> {
        self.call_concurrently_noting(actions, &|_| {}).await
    }

    async fn call_concurrently_noting(
        &mut self,
        actions: &[Action],
        noted: &(dyn Fn(usize) + Send + Sync),
    ) -> Vec<Result<ActionResult, HostError>> {
        let requests: Vec<concurrent::InFlight> = actions
            .iter()
            .map(|action| {
                let id = self.take_id();
                concurrent::InFlight {
                    method: action.method(),
                    id,
                    line: encode_action(id, action),
                }
            })
            .collect();
        let answers = self.request_all(&requests, noted).await;
        answers
            .into_iter()
            .zip(&requests)
            .map(|(answer, sent)| self.decode_result(sent.method, &answer?))
            .collect()
    }

    async fn shutdown(&mut self) -> Result<(), HostError> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        // Closing stdin is the polite request: a well-behaved adapter exits
        // at end of input, having flushed its store.
        self.stdin = None;
        if self.exit_status.is_none() {
            let grace = self.options.stdin_close_grace;
            let mut status = timeout(grace, self.child.wait())
                .await
                .ok()
                .and_then(Result::ok);
            if status.is_none() {
                self.signal_group(libc::SIGTERM);
                let grace = self.options.term_grace;
                status = timeout(grace, self.child.wait())
                    .await
                    .ok()
                    .and_then(Result::ok);
            }
            if status.is_none() {
                self.signal_group(libc::SIGKILL);
                status = timeout(Duration::from_secs(5), self.child.wait())
                    .await
                    .ok()
                    .and_then(Result::ok);
            }
            self.exit_status = status;
        }
        // Children the adapter left behind would keep our stderr pipe open
        // and hold the store; the group id stays theirs while any is alive.
        self.signal_group(libc::SIGKILL);
        if let Some(pgid) = self.pgid {
            lock(&LIVE_GROUPS).remove(&pgid);
        }
        self.settle_stderr(Duration::from_millis(500)).await;
        if self.broken.is_none() {
            let status = self
                .exit_status
                .map_or_else(|| "status unknown".into(), |s| s.to_string());
            self.broken = Some(HostError::Exited {
                method: "shutdown".into(),
                status: format!("stopped by the harness, {status}; launch it again to continue"),
                stderr_tail: self.stderr_tail(),
            });
        }
        match self.exit_status {
            Some(_) => Ok(()),
            None => Err(HostError::Launch(format!(
                "adapter (pid {:?}) survived SIGKILL for 5 s",
                self.pid()
            ))),
        }
    }

    fn stderr_tail(&self) -> String {
        lock(&self.tail).text()
    }

    fn take_log(&mut self) -> String {
        lock(&self.tail).take_step()
    }
}

impl Drop for ProcessHost {
    fn drop(&mut self) {
        // `kill_on_drop` reaches only the adapter itself, not its children.
        if !self.stopped {
            self.signal_group(libc::SIGKILL);
            if let Some(pgid) = self.pgid {
                // Dropped mid-run (an interrupt, an abandoned scenario): the
                // store directory is removed next, so let the adapter die
                // first rather than write into a directory being deleted.
                wait_until_dead(pgid, Duration::from_secs(2));
                lock(&LIVE_GROUPS).remove(&pgid);
            }
        }
    }
}

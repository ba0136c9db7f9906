//! Starting a locked server: exactly the locked argv (I1), exactly the passthrough environment
//! (I2), its own process group so the whole tree can be ended, stderr kept for error messages.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// What the wire layer needs of a server to start it. The layers above decide how its process
/// is made (`crate::launch::Launch`: the sandbox, learn mode or the plain guard); the wire layer
/// only resolves the program, spawns the command it is handed and speaks to it.
pub trait Start: Sync {
    /// The server's name, for messages.
    fn server(&self) -> &str;
    /// The locked argv.
    fn argv(&self) -> &[String];
    /// Forward the server's stderr lines to ours (the proxy does; lock and verify keep them).
    fn forward_stderr(&self) -> bool;
    /// The command that runs the server, `program` being `argv[0]` as found on `PATH`, and
    /// what must stay alive as long as it runs. An error means the server is not started.
    fn command(
        &self,
        program: &Path,
    ) -> Result<(std::process::Command, Option<Box<dyn Companion>>), SpawnError>;
}

/// What lives beside a started server, made by the [`Start`] that made its command: a
/// sandbox's private state and egress proxy, learn mode's recording proxy.
pub trait Companion: Send {
    /// Finishes set-up once the child runs (in a sandbox's allow mode, takes over the egress
    /// listener); an error means the start failed.
    fn after_spawn(
        &mut self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + '_>> {
        Box::pin(async { Ok(()) })
    }

    /// What its egress proxy refused so far, and how many more were not kept.
    fn refusals(&self) -> (Vec<crate::refusals::EgressRefusal>, usize) {
        (Vec::new(), 0)
    }
}

/// The server's environment (I2): exactly the passthrough names that are set in ours. Values are
/// handed to the child and never written anywhere else.
pub fn server_env(names: &[String]) -> Vec<(OsString, OsString)> {
    names
        .iter()
        .filter_map(|n| std::env::var_os(n).map(|v| (OsString::from(n), v)))
        .collect()
}

/// Which passthrough names are not set in our environment (for hints).
pub fn unset_names(names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter(|n| std::env::var_os(n).is_none())
        .cloned()
        .collect()
}

/// Finds `argv[0]` the way a shell would, on mcpsum's own `PATH` (the server's environment may not
/// have one). A name with a slash is used as it is.
pub fn resolve_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs_err::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Bytes kept of one stderr line (enough for [`TAIL_LINE_CHARS`] characters of any UTF-8).
const TAIL_LINE_BYTES: usize = 4 * TAIL_LINE_CHARS;
/// What marks a stderr line that was cut.
const CUT_MARK: &str = "… [line cut]";

/// A server's stderr, line by line. A server is hostile input and may write without ever ending
/// a line: [`crate::lines::Lines`] keeps only a line's first [`TAIL_LINE_BYTES`]; the line is
/// shown, marked cut, as soon as it passes them, and the rest of it is dropped as it is read.
struct StderrLines {
    lines: crate::lines::Lines,
    /// The line being dropped was shown already.
    shown: bool,
}

impl Default for StderrLines {
    fn default() -> Self {
        Self {
            lines: crate::lines::Lines::with_head(TAIL_LINE_BYTES, TAIL_LINE_BYTES),
            shown: false,
        }
    }
}

impl StderrLines {
    /// Takes the next bytes of stderr and shows the lines they end.
    fn take(&mut self, bytes: &[u8], emit: &mut impl FnMut(&str)) {
        self.lines.push(bytes);
        while let Some(frame) = self.lines.take_frame() {
            self.show(frame, emit);
        }
        if self.lines.skipping() && !self.shown {
            show_line(self.lines.head(), true, emit);
            self.shown = true;
        }
    }

    /// The end of stderr: a last line without a newline counts.
    fn finish(&mut self, emit: &mut impl FnMut(&str)) {
        if let Some(frame) = self.lines.finish() {
            self.show(frame, emit);
        }
    }

    fn show(&mut self, frame: crate::lines::Frame, emit: &mut impl FnMut(&str)) {
        match frame {
            crate::lines::Frame::Line(line) => show_line(&line, false, emit),
            crate::lines::Frame::TooLong(_) => {
                if !std::mem::take(&mut self.shown) {
                    show_line(self.lines.head(), true, emit);
                }
            }
        }
    }
}

/// Shows one stderr line, at most [`TAIL_LINE_CHARS`] of it.
fn show_line(bytes: &[u8], cut: bool, emit: &mut impl FnMut(&str)) {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end();
    let mut short: String = text.chars().take(TAIL_LINE_CHARS).collect();
    if cut || short.len() < text.len() {
        short.push_str(CUT_MARK);
    }
    emit(&short);
}

/// The last lines a server wrote to stderr.
#[derive(Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

const TAIL_LINES: usize = 20;
/// How long a failed launcher may take to finish its error line.
const LAUNCHER_LINE_WAIT: Duration = Duration::from_secs(2);
const TAIL_LINE_CHARS: usize = 400;

impl StderrTail {
    fn push(&self, line: String) {
        if let Ok(mut q) = self.0.lock() {
            if q.len() == TAIL_LINES {
                q.pop_front();
            }
            q.push_back(line);
        }
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// A running server.
pub struct ServerProcess {
    /// The child (the sandbox launcher when sandboxed, which execs the server).
    pub child: Child,
    /// Our end of its stdin; `None` once closed.
    pub stdin: Option<ChildStdin>,
    /// Its stdout.
    pub stdout: Option<BufReader<ChildStdout>>,
    /// Its last stderr lines.
    pub stderr: StderrTail,
    pgid: Option<i32>,
    /// What lives as long as the server (see [`Companion`]).
    companion: Option<Box<dyn Companion>>,
}

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// `argv[0]` was not found.
    #[error("`{0}` was not found on PATH")]
    NotFound(String),
    /// The OS refused to start it.
    #[error("cannot start `{program}`: {source}")]
    Io {
        /// `argv[0]`.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The sandbox could not be built (fail closed, I5).
    #[error("{0}")]
    Sandbox(String),
}

impl ServerProcess {
    /// Starts the server described by `launch`.
    pub async fn spawn(launch: &dyn Start) -> Result<Self, SpawnError> {
        let program = launch
            .argv()
            .first()
            .ok_or_else(|| SpawnError::NotFound(String::new()))?;
        let resolved =
            resolve_program(program).ok_or_else(|| SpawnError::NotFound(program.clone()))?;
        // The guard executes it in a child of its own: check here what the OS would refuse, so
        // the error is ours and not a line in the server's stderr.
        let refused = if !resolved.exists() {
            Some(libc::ENOENT)
        } else if !is_executable(&resolved) {
            Some(libc::EACCES)
        } else {
            None
        };
        if let Some(errno) = refused {
            return Err(SpawnError::Io {
                program: program.clone(),
                source: std::io::Error::from_raw_os_error(errno),
            });
        }
        let (mut cmd, companion) = launch.command(&resolved)?;
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|source| SpawnError::Io {
            program: program.clone(),
            source,
        })?;
        let pgid = child.id().and_then(|p| i32::try_from(p).ok());
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().map(BufReader::new);
        let stderr_pipe = child.stderr.take();
        let (Some(stdin), Some(stdout), Some(stderr_pipe)) = (stdin, stdout, stderr_pipe) else {
            return Err(SpawnError::Io {
                program: program.clone(),
                source: std::io::Error::other("no stdio pipes"),
            });
        };
        let tail = StderrTail::default();
        let forward = launch.forward_stderr();
        let server = launch.server().to_owned();
        let tail2 = tail.clone();
        let reader = tokio::spawn(async move {
            let mut pipe = stderr_pipe;
            let mut chunk = vec![0u8; crate::lines::READ_CHUNK];
            let mut lines = StderrLines::default();
            let mut emit = |text: &str| {
                if forward {
                    crate::output::server_stderr(&server, text);
                }
                tail2.push(text.to_owned());
            };
            loop {
                let n = match pipe.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                lines.take(&chunk[..n], &mut emit);
            }
            lines.finish(&mut emit);
        });
        let mut process = Self {
            child,
            stdin: Some(stdin),
            stdout: Some(stdout),
            stderr: tail,
            pgid,
            companion,
        };
        if let Some(companion) = process.companion.as_mut()
            && let Err(bridge) = companion.after_spawn().await
        {
            // The bridge closed because the launcher failed: its own line names the layer
            // (`user namespace: ...`). It is on stderr, which ends when the launcher exits.
            let _ = tokio::time::timeout(LAUNCHER_LINE_WAIT, reader).await;
            let line = process
                .stderr
                .lines()
                .into_iter()
                .find(|l| l.starts_with(mcpsum_sandbox::SETUP_FAILED_PREFIX));
            return Err(SpawnError::Sandbox(line.unwrap_or(bridge)));
        }
        Ok(process)
    }

    /// Ends the server: close stdin, wait up to `grace`, then SIGTERM and SIGKILL to the whole
    /// process group, so no child of the server outlives it.
    pub async fn shutdown(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        self.stdin = None;
        let status = tokio::time::timeout(grace, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok);
        self.signal_group(nix::sys::signal::Signal::SIGTERM);
        let status = match status {
            Some(s) => Some(s),
            None => tokio::time::timeout(Duration::from_millis(500), self.child.wait())
                .await
                .ok()
                .and_then(Result::ok),
        };
        self.signal_group(nix::sys::signal::Signal::SIGKILL);
        match status {
            Some(s) => Some(s),
            None => self.child.wait().await.ok(),
        }
    }

    /// The refusals of its sandbox's egress proxy so far, and how many more were not kept.
    pub fn egress_refusals(&self) -> (Vec<crate::refusals::EgressRefusal>, usize) {
        self.companion
            .as_ref()
            .map(|c| c.refusals())
            .unwrap_or_default()
    }

    /// Ends the server at once: SIGKILL to the whole process group, without the grace of
    /// [`ServerProcess::shutdown`]. For a server that did not answer within `--timeout-secs`:
    /// it had the time the person allowed, and waiting on a wedged server to exit would only
    /// stretch that bound (a server that ignores stdin EOF and SIGTERM cost a second more).
    pub async fn kill_now(&mut self) -> Option<std::process::ExitStatus> {
        self.stdin = None;
        self.signal_group(nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.start_kill();
        self.child.wait().await.ok()
    }

    fn signal_group(&self, signal: nix::sys::signal::Signal) {
        if let Some(pgid) = self.pgid {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), signal);
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.signal_group(nix::sys::signal::Signal::SIGKILL);
    }
}

/// Makes mcpsum the reaper of its descendants' orphans: a server's child that detaches
/// (`setsid`, double fork) is re-parented to mcpsum instead of to init, so
/// [`kill_adopted_orphans`] can end it when mcpsum is done. Best effort: without it, process
/// groups still end well-behaved trees.
pub fn become_subreaper() {
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// Ends every process still descending from mcpsum (adopted orphans of servers that were
/// already ended), repeatedly, until none is left: the guard's own sweep. Call it only when no
/// server should run any more.
pub fn kill_adopted_orphans() {
    mcpsum_sandbox::end_descendants();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(pieces: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        let mut lines = StderrLines::default();
        let mut emit = |t: &str| out.push(t.to_owned());
        for p in pieces {
            lines.take(p, &mut emit);
        }
        lines.finish(&mut emit);
        out
    }

    #[test]
    fn stderr_lines_are_split_and_bounded() {
        assert_eq!(
            lines_of(&[b"a\nb", b"c\r\n\nlast"]),
            ["a", "bc", "", "last"]
        );
        let long = vec![b'x'; 10 * TAIL_LINE_BYTES];
        let lines = lines_of(&[&long, &long, b"\nafter\n"]);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("xxx") && lines[0].ends_with(CUT_MARK));
        assert_eq!(
            lines[0].chars().count(),
            TAIL_LINE_CHARS + CUT_MARK.chars().count()
        );
        assert_eq!(lines[1], "after");
        // Never ended: shown once, cut, and nothing more at the end.
        assert_eq!(lines_of(&[&long]).len(), 1);
        // Ended in the same read: shown once, cut.
        let mut ended = long.clone();
        ended.extend_from_slice(b"\r\nnext");
        let lines = lines_of(&[&ended]);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].ends_with(CUT_MARK) && lines[1] == "next");
    }

    #[test]
    fn a_cut_stderr_line_is_shown_before_its_newline() {
        let mut out = Vec::new();
        let mut lines = StderrLines::default();
        let mut emit = |t: &str| out.push(t.to_owned());
        lines.take(&vec![b'y'; TAIL_LINE_BYTES + 1], &mut emit);
        lines.take(b"more, never shown", &mut emit);
        lines.take(b"\nnext\n", &mut emit);
        lines.finish(&mut emit);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out[0].starts_with('y') && out[0].ends_with(CUT_MARK));
        assert_eq!(out[1], "next");
    }
}

//! The one pseudo-terminal runner: a command with some of its streams on a fresh 24×100
//! pseudo-terminal, and what the terminal received (the terminal turns `\n` into `\r\n`).

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Command, Stdio};

/// Which of a command's streams are the terminal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OnTerminal {
    /// stderr; stdout is a pipe (read into [`TtyRun::stdout`]), stdin as the command has it.
    Stderr,
    /// stdin, stdout and stderr.
    All,
}

/// The outcome of a run on a terminal.
#[derive(Debug)]
pub struct TtyRun {
    pub code: i32,
    /// stdout when it was a pipe (empty otherwise).
    pub stdout: String,
    /// What the terminal received.
    pub terminal: String,
}

/// Runs `cmd` with `streams` on a new pseudo-terminal until it exits.
pub fn run_on_terminal(mut cmd: Command, streams: OnTerminal) -> TtyRun {
    let size = nix::pty::Winsize {
        ws_row: 24,
        ws_col: 100,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(&size, None).expect("a pseudo-terminal");
    // Not inherited by what other tests start meanwhile: a copy of the slave side held
    // elsewhere would keep the master from reaching its end.
    for fd in [&pty.master, &pty.slave] {
        nix::fcntl::fcntl(
            fd.as_fd(),
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .expect("close-on-exec");
    }
    let slave = |pty: &OwnedFd| Stdio::from(pty.try_clone().expect("dup the terminal"));
    cmd.stderr(slave(&pty.slave));
    match streams {
        OnTerminal::Stderr => {
            cmd.stdout(Stdio::piped());
        }
        OnTerminal::All => {
            cmd.stdin(slave(&pty.slave)).stdout(slave(&pty.slave));
        }
    }
    let mut child = cmd.spawn().expect("run the command");
    // Our copies of the terminal's slave side go with the command, so reading the master ends
    // (EIO) once the command and what it started have exited.
    drop(cmd);
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = master.read(&mut chunk) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&chunk[..n]);
        }
        seen
    });
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout).expect("read stdout");
    }
    let code = child.wait().expect("wait").code().unwrap_or(-1);
    let terminal = String::from_utf8_lossy(&reader.join().expect("reader")).into_owned();
    TtyRun {
        code,
        stdout,
        terminal,
    }
}

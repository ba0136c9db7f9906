//! The guard: the launcher's first step splits it in two. The child goes on to build the sandbox
//! and become the server; the parent stays outside every layer as a tiny reaper that outlives
//! it, so that nothing the server started can outlive mcpsum, even when mcpsum is `SIGKILL`ed.
//!
//! The guard is a child subreaper: every orphan of the server's tree (a `setsid` daemon, a
//! double fork) is re-parented to it, never to init. It ends the whole tree when
//! - the server exits (then it exits with the server's status, so mcpsum sees that status), or
//! - mcpsum dies (`PR_SET_PDEATHSIG`, checked against the parent pid: the signal carries no
//!   sender we could trust, and a group `SIGTERM` from mcpsum's own shutdown must not cut the
//!   server's grace period short).
//!
//! Once the tree is gone it removes the server's task cgroup (see `cgroup`), which it never
//! entered itself.
//!
//! A group `SIGKILL` from mcpsum's shutdown kills the guard too; the orphans then go to mcpsum,
//! which is itself a subreaper and ends them (and removes the task cgroup) before it exits.

use std::time::Duration;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpid, getppid};

use crate::fail::{Fail, fail};

/// The signals the guard waits for; blocked so `sigwait` takes them.
fn waited() -> SigSet {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        set.add(s);
    }
    set
}

/// Splits the launcher. Returns the guard's pid in the child (which goes on to launch the
/// server); the guard itself never returns.
pub(crate) fn split(parent: i32) -> Result<i32, Fail> {
    split_learning(parent, &mut None)
}

/// [`split`], with learning: the guard side takes `learner` and answers its notifications;
/// the server side finds it still in `learner` and installs the filter (learn mode).
pub(crate) fn split_learning(
    parent: i32,
    learner: &mut Option<crate::learn::Learner>,
) -> Result<i32, Fail> {
    let err = |what: &str, e: nix::Error| fail("guard", format!("{what}: {e}"), crate::fail::BUG);
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| err("PR_SET_CHILD_SUBREAPER", e))?;
    let set = waited();
    let mut old = SigSet::empty();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old))
        .map_err(|e| err("sigprocmask", e))?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(|e| err("PR_SET_PDEATHSIG", e))?;
    if getppid().as_raw() != parent {
        return Err(fail(
            "launcher",
            "mcpsum exited before the server started",
            "retry",
        ));
    }
    let me = getpid().as_raw();
    let fork_failed = |e| {
        fail(
            "guard",
            format!("fork: {e}"),
            "retry; if it persists, report it",
        )
    };
    match crate::sys::fork().map_err(fork_failed)? {
        None => {
            // The server side: the mask it inherits is the one mcpsum gave the launcher.
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old), None)
                .map_err(|e| err("sigprocmask", e))?;
            Ok(me)
        }
        Some(server) => {
            let keep = learner
                .take()
                .map(crate::learn::Learner::in_guard)
                .unwrap_or_default();
            watch(parent, server, &set, &keep)
        }
    }
}

/// The guard's whole life: wait, then end the tree and mirror the server's status.
fn watch(parent: i32, server: Pid, set: &SigSet, keep: &[std::os::fd::RawFd]) -> ! {
    // Hold nothing of the server's: not its stdin or stdout (mcpsum must see them close when
    // the server goes), not the egress bridge. Stderr stays for a last word, if ever needed.
    if let Ok(null) = fs_err::File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
    }
    // Except what learning needs (its listener and observation file).
    let mut from = 3u32;
    let mut keep: Vec<u32> = keep
        .iter()
        .filter_map(|fd| u32::try_from(*fd).ok())
        .collect();
    keep.sort_unstable();
    for fd in keep.into_iter().filter(|fd| *fd >= 3) {
        if fd > from {
            let _ = crate::sys::close_range(from, fd - 1);
        }
        from = fd + 1;
    }
    let _ = crate::sys::close_range(from, u32::MAX);
    // No core file of ours if the status we mirror is a crash.
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
    let mut status = None;
    loop {
        match set.wait() {
            Ok(Signal::SIGCHLD) | Err(_) => {}
            Ok(_) if getppid().as_raw() != parent => {
                end_tree();
                crate::cgroup::remove(getpid().as_raw());
                std::process::exit(crate::SETUP_FAILED_EXIT);
            }
            // mcpsum's shutdown signals the whole group, the server included: it has its grace.
            Ok(_) => {}
        }
        reap(server, &mut status);
        if let Some(status) = status {
            end_tree();
            crate::cgroup::remove(getpid().as_raw());
            mirror(status);
        }
        // mcpsum may have died while a signal of ours was already pending.
        if getppid().as_raw() != parent {
            end_tree();
            crate::cgroup::remove(getpid().as_raw());
            std::process::exit(crate::SETUP_FAILED_EXIT);
        }
    }
}

/// Reaps every exited child; records the server's status.
fn reap(server: Pid, status: &mut Option<WaitStatus>) {
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(ws) => {
                if ws.pid() == Some(server) {
                    *status = Some(ws);
                }
            }
        }
    }
}

/// Kills every descendant, round after round (a forking process can add children between a
/// scan and its kill; its orphans come back to us), until none is left.
pub(crate) fn end_tree() {
    let me = getpid().as_raw();
    for _ in 0..200 {
        // No child left means no descendant left: every orphan comes back to us.
        if waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) == Err(nix::errno::Errno::ECHILD)
        {
            return;
        }
        let tree = descendants(me);
        if tree.is_empty() {
            return;
        }
        for pid in tree {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let mut ignored = None;
        reap(Pid::from_raw(0), &mut ignored);
        std::thread::sleep(Duration::from_millis(2));
        reap(Pid::from_raw(0), &mut ignored);
    }
}

/// Every descendant of `root`: from the `children` lists of each thread, or, on a kernel
/// without them, from a scan of all of `/proc`.
fn descendants(root: i32) -> Vec<i32> {
    if !std::path::Path::new(&format!("/proc/{root}/task/{root}/children")).exists() {
        return descendants_by_scan(root);
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let pid = tree[i];
        if let Ok(tasks) = fs_err::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                let list = fs_err::read_to_string(task.path().join("children")).unwrap_or_default();
                tree.extend(
                    list.split_whitespace()
                        .filter_map(|c| c.parse::<i32>().ok()),
                );
            }
        }
        i += 1;
    }
    tree.remove(0);
    tree
}

/// Every live (not zombie) descendant of `root`, from a scan of `/proc`.
fn descendants_by_scan(root: i32) -> Vec<i32> {
    let Ok(entries) = fs_err::read_dir("/proc") else {
        return Vec::new();
    };
    let procs: Vec<(i32, i32)> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = fs_err::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 1..];
            let mut fields = rest.split_whitespace();
            let state = fields.next()?;
            let ppid = fields.next()?.parse::<i32>().ok()?;
            (state != "Z").then_some((pid, ppid))
        })
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(procs.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    tree.remove(0);
    tree
}

/// Exits as the server did: its code, or its signal.
fn mirror(status: WaitStatus) -> ! {
    match status {
        WaitStatus::Exited(_, code) => std::process::exit(code),
        WaitStatus::Signaled(_, sig, _) => {
            crate::sys::default_signal(sig);
            let mut one = SigSet::empty();
            one.add(sig);
            let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&one), None);
            let _ = kill(getpid(), sig);
            // A signal whose default is not to terminate.
            std::process::exit(128 + sig as i32)
        }
        _ => std::process::exit(crate::SETUP_FAILED_EXIT),
    }
}

/// `mcpsum __guard PARENT_PID PROGRAM ARGV0 [ARGS...]`: a server without a sandbox policy gets
/// the guard alone, then `PROGRAM` is executed with the environment mcpsum gave, as it would run
/// outside mcpsum (no floor: the AppArmor grant is the launcher's, never mcpsum's).
pub(crate) fn guard_main(args: Vec<std::ffi::OsString>) -> ! {
    let line = match guard_exec(&args, None) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{line}\n").as_bytes());
    std::process::exit(127)
}

/// `mcpsum __learn FILE PARENT_PID PROGRAM ARGV0 [ARGS...]`: [`guard_main`], learning: every
/// file the server's tree opens, executes or creates and every address it connects to is
/// appended to `FILE` (see `learn`). Never returns.
pub(crate) fn learn_main(args: Vec<std::ffi::OsString>) -> ! {
    let line = match args.split_first() {
        Some((file, rest)) => match guard_exec(rest, Some(std::path::Path::new(file))) {
            Ok(never) => match never {},
            Err(e) => e,
        },
        None => "mcpsum learn: bad arguments (this is a bug in mcpsum)".to_owned(),
    };
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{line}\n").as_bytes());
    std::process::exit(127)
}

fn guard_exec(
    args: &[std::ffi::OsString],
    learn: Option<&std::path::Path>,
) -> Result<std::convert::Infallible, String> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let [parent, program, argv @ ..] = args else {
        return Err("mcpsum guard: bad arguments (this is a bug in mcpsum)".into());
    };
    let parent: i32 = parent
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or("mcpsum guard: bad parent pid (this is a bug in mcpsum)")?;
    let mut learner = match learn {
        Some(file) => Some(crate::learn::Learner::new(file).map_err(|e| format!("mcpsum: {e}"))?),
        None => None,
    };
    let guard = split_learning(parent, &mut learner).map_err(|f| f.to_string())?;
    if let Some(learner) = learner {
        learner.in_server().map_err(|e| format!("mcpsum: {e}"))?;
    }
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| format!("mcpsum guard: PR_SET_PDEATHSIG: {e}"))?;
    if getppid().as_raw() != guard {
        return Err("mcpsum guard: the guard exited before the server started; retry".into());
    }
    let c = |s: &std::ffi::OsStr| {
        CString::new(s.as_bytes()).map_err(|_| "mcpsum guard: an argument contains a NUL byte")
    };
    let program_c = c(program)?;
    let argv = argv.iter().map(|a| c(a)).collect::<Result<Vec<_>, _>>()?;
    crate::sys::default_signal(Signal::SIGPIPE);
    let e = match nix::unistd::execv(&program_c, &argv) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    Err(format!("cannot start `{}`: {e}", program.to_string_lossy()))
}

/// The command that starts `program` with `argv` under a guard (see [`guard_main`]), learning
/// into `learn` when given (see [`learn_main`]).
pub(crate) fn guarded_command(
    program: &std::path::Path,
    argv: &[String],
    learn: Option<&std::path::Path>,
) -> Result<std::process::Command, crate::SandboxError> {
    // This very binary (`/proc/self/exe` names the running file even if it was replaced on
    // disk): `mcpsum`, which holds no AppArmor grant, not the launcher.
    let mut command = std::process::Command::new("/proc/self/exe");
    match learn {
        Some(file) => command.arg(crate::LEARN_SUBCOMMAND).arg(file),
        None => command.arg(crate::GUARD_SUBCOMMAND),
    };
    command
        .arg(std::process::id().to_string())
        .arg(program)
        .args(argv);
    Ok(command)
}

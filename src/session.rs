//! Client sessions: every proxy started by the same client process belongs to one session,
//! identified by the parent's pid and its start time (so a reused pid is a new session).

/// The session of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// `<pid>-<starttime>` of the client process.
    pub id: String,
    /// The client's pid.
    pub client_pid: u32,
    /// The client's start time in clock ticks since boot (`/proc/PID/stat` field 22).
    pub client_start: u64,
}

/// The session of the current process (its parent is the client).
pub fn current() -> Session {
    let pid = std::os::unix::process::parent_id();
    let start = start_time(pid).unwrap_or(0);
    Session {
        id: format!("{pid}-{start}"),
        client_pid: pid,
        client_start: start,
    }
}

/// A process's start time, or `None` when it is gone.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: split after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the client process of a session still runs.
pub fn alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

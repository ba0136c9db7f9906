//! What `lock` and `verify` wait for (issue 8, point 4): on a real pseudo-terminal one line is
//! redrawn in place while a slow server starts and pages its lists; on a pipe, and with `-q`,
//! nothing of it appears. The slow server is the fake one with `startDelayMs` (a first `uvx`
//! download) and `listDelayMs`.

use std::process::Command;

use serde_json::{Value, json};

use crate::support::{OnTerminal, TtyRun, World, fake_argv, run_on_terminal};

/// Runs `cmd` with stderr on a fresh 100-column pseudo-terminal and stdout on a pipe.
fn on_terminal(cmd: Command) -> TtyRun {
    run_on_terminal(cmd, OnTerminal::Stderr)
}

/// A 2026-07-28 server (one start, no era fallback) that takes 1.5 s to start and 0.6 s per
/// page, two pages of tools.
fn slow_scenario() -> Value {
    let tool = |n: &str| json!({"name": n, "inputSchema": {"type": "object"}});
    json!({"era": "modern", "startDelayMs": 1500, "listDelayMs": 600, "pageSize": 1,
           "tools": [tool("a"), tool("b")]})
}

/// Asserts nothing progress-like is in `text`.
#[track_caller]
fn assert_no_progress(what: &str, text: &str) {
    for needle in ["\r", "…", "listing", "waiting for"] {
        assert!(
            !text.contains(needle),
            "{what}: {needle:?} off a terminal:\n{}",
            text.escape_debug()
        );
    }
}

/// `… Ns` for some N: the seconds count.
fn has_seconds(text: &str) -> bool {
    text.match_indices("… ").any(|(i, _)| {
        let rest = &text[i + "… ".len()..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with('s')
    })
}

#[test]
fn lock_shows_what_it_waits_for_on_a_terminal_only() {
    let w = World::new();
    let s = w.scenario("slow", &slow_scenario());
    let mut cmd = w.cmd();
    cmd.args(["lock", "--name", "slow", "--"])
        .args(fake_argv(&s));
    let r = on_terminal(cmd);
    assert_eq!(r.code, 0, "{r:#?}");
    let t = &r.terminal;
    assert!(
        t.contains("\rstarting slow (/usr/bin/python3 "),
        "no start line:\n{}",
        t.escape_debug()
    );
    assert!(has_seconds(t), "no seconds:\n{}", t.escape_debug());
    assert!(
        t.contains("\rslow: listing tools, page 2… "),
        "no page line:\n{}",
        t.escape_debug()
    );
    // The line is cleared before the summary, which stands on a line of its own.
    assert!(
        t.contains(" \rlocked `slow`"),
        "not cleared:\n{}",
        t.escape_debug()
    );
    assert_eq!(r.stdout, "");

    // Off a terminal (a re-lock, as slow): no progress at all.
    let r = w.run(&["lock", "--name", "slow"]);
    r.code(0).stderr_has(&["locked `slow`"]);
    assert_no_progress("lock on a pipe", &r.stderr);
    assert_no_progress("lock on a pipe (stdout)", &r.stdout);
}

#[test]
fn verify_shows_the_servers_it_still_waits_for() {
    let w = World::new();
    let s = w.scenario("slow", &slow_scenario());
    w.lock_fake("slow", &s, &[]).code(0);
    let f = w.scenario(
        "fast",
        &json!({"tools": [{"name": "x", "inputSchema": {}}]}),
    );
    w.lock_fake("fast", &f, &[]).code(0);

    let mut cmd = w.cmd();
    cmd.arg("verify");
    let r = on_terminal(cmd);
    assert_eq!(r.code, 0, "{r:#?}");
    let t = &r.terminal;
    assert!(
        t.contains("waiting for 1 of 2 servers: slow (starting, ")
            || t.contains("waiting for 1 of 2 servers: slow (listing tools"),
        "no summary line:\n{}",
        t.escape_debug()
    );
    assert!(
        t.contains("slow (listing tools, page 2, "),
        "no page:\n{}",
        t.escape_debug()
    );
    // Cleared at the end: after the last redraw only spaces and `\r` follow.
    let tail = &t[t.rfind("waiting for").unwrap()..];
    let after = &tail[tail.find('\r').unwrap()..];
    assert!(
        after.chars().all(|c| c == '\r' || c == ' '),
        "not cleared: {:?}",
        after
    );
    assert!(r.stdout.contains("ok fast: clean") && r.stdout.contains("ok slow: clean"));
    assert_no_progress("verify stdout", &r.stdout);

    // A pipe, and `-q` on a terminal: nothing.
    let r = w.run(&["verify"]);
    r.code(0);
    assert_eq!(r.stderr, "");
    assert_no_progress("verify on a pipe", &r.stdout);
    let mut cmd = w.cmd();
    cmd.args(["-q", "verify"]);
    let r = on_terminal(cmd);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(r.terminal, "", "-q on a terminal");
}

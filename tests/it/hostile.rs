//! Servers that lie or misbehave: `lock` fails with exit 2, names the server, never pins a
//! partial surface, and leaves the existing lockfile byte-identical. Then hostile peers of a
//! running proxy, one class each: a source that hides injected text in an error answer, call
//! arguments that hide a key or reorder text in the approval prompt, a client that starts its
//! servers through shells and launchers, names that would swell the audit log.

use serde_json::{Value, json};

use crate::support::{World, assert_unchanged};

/// The hint for a server that completed its handshake, then broke the rules of `tools/list`: it
/// started and speaks MCP, so neither its command nor its environment is blamed.
const MISBEHAVES: &str = "hint: the server completed its handshake, then failed on `tools/list` as shown above: it misbehaves; report it to the server's authors";

fn tools(n: usize) -> Value {
    (0..n)
        .map(|i| json!({"name": format!("t{i}"), "inputSchema": {"type": "object"}}))
        .collect()
}

/// A world with `victim` (a plain server) locked, then its scenario turned hostile. Returns the
/// lockfile's bytes before anything hostile ran and the scenario path.
fn hostile_world(hostile: &Value) -> (World, Vec<u8>, std::path::PathBuf) {
    let w = World::new();
    let mut base = json!({"tools": tools(5)});
    let s = w.scenario("victim", &base);
    w.lock_fake("victim", &s, &[]).code(0);
    let before = w.lock_bytes();
    for (k, v) in hostile.as_object().unwrap() {
        base[k] = v.clone();
    }
    w.scenario("victim", &base);
    (w, before, s)
}

/// Re-locking `victim` with its recorded command fails with exit 2, names it, changes nothing.
fn relock_fails(w: &World, before: &[u8], extra: &[&str], needles: &[&str]) {
    let mut args = vec!["lock", "--name", "victim"];
    args.extend_from_slice(extra);
    let r = w.run(&args);
    r.code(2)
        .stderr_has(&["cannot lock server `victim`"])
        .stderr_has(needles);
    assert_unchanged(w, before, "re-lock of a hostile server");
}

/// Turns `victim`'s scenario hostile and re-locks it; also tries a new entry `fresh` with the
/// hostile scenario (era detection from scratch). Both must fail with exit 2, name the server,
/// pin nothing and leave the lockfile byte-identical.
fn assert_hostile(hostile: &Value, extra: &[&str], needles: &[&str]) {
    let (w, before, s) = hostile_world(hostile);
    relock_fails(&w, &before, extra, needles);
    let r = w.lock_fake("fresh", &s, extra);
    r.code(2)
        .stderr_has(&["cannot lock server `fresh`"])
        .stderr_has(needles);
    assert_unchanged(&w, &before, &format!("new entry with {hostile}"));
    assert!(
        !String::from_utf8_lossy(&w.lock_bytes()).contains("\"fresh\""),
        "no partial entry"
    );
}

#[test]
fn non_json_lines_are_skipped_with_a_warning() {
    // A banner at start and a stray line before an answer: the SDK clients skip such lines, so
    // mcpsum does too, and says so, the line escaped and cut.
    let banner = format!("Server ready\x1b[31m {}", "=".repeat(300));
    let (w, _, s) = hostile_world(&json!({"hostile": {
        "bannerLines": [banner], "nonJsonLineBefore": "tools/list"}}));
    for name in ["victim", "fresh"] {
        let r = if name == "victim" {
            w.run(&["lock", "--name", "victim"])
        } else {
            w.lock_fake("fresh", &s, &[])
        };
        r.code(0).stderr_has(&[
            &format!("server `{name}` wrote a line that is not JSON on its stdout"),
            r#"skipped it: "Server ready\u{1b}[31m ====="#,
            "=…\"",
            "not JSON (mcp_fake nonJsonLineBefore)",
            "while mcpsum waited for `tools/list`",
        ]);
        assert!(!r.stderr.contains(&"=".repeat(200)), "cut: {}", r.stderr);
    }
    w.run(&["verify"])
        .code(0)
        .stderr_has(&["server `victim` wrote a line that is not JSON"]);
    assert_eq!(
        w.lock_json()["servers"]["fresh"]["tools"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
}

#[test]
fn too_many_non_json_lines() {
    let lines: Vec<String> = (0..101).map(|i| format!("banner {i}")).collect();
    assert_hostile(
        &json!({"hostile": {"bannerLines": lines}}),
        &[],
        &[
            "more than 100 lines",
            "that are not JSON-RPC on its stdout",
            "banner 100",
        ],
    );
    let big = vec!["b".repeat(300_000); 4];
    assert_hostile(
        &json!({"hostile": {"bannerLines": big}}),
        &[],
        &["(or 1048576 bytes) that are not JSON-RPC"],
    );
}

#[test]
fn json_that_is_not_json_rpc_is_skipped_too() {
    let (w, _, _) = hostile_world(&json!({"hostile": {"bannerLines": ["42", "\"hello\""]}}));
    w.run(&["lock", "--name", "victim"]).code(0).stderr_has(&[
        "wrote a JSON value that is not a JSON-RPC message on its stdout",
        r#"skipped it: "42""#,
    ]);
}

#[test]
fn hundred_megabyte_line_is_refused_without_oom() {
    // 100 MB > the 64 MiB per-message limit: skipped while reading, never buffered whole.
    let hostile = json!({"hostile": {"hugeLineBytes": 104_857_600, "hugeLineOn": "tools/list"}});
    let needles = ["104857600 bytes", "the limit is 67108864 bytes"];
    let (w, before, s) = hostile_world(&hostile);
    relock_fails(&w, &before, &[], &needles);

    // A new entry, with mcpsum's peak memory sampled (VmHWM) while it runs.
    let mut child = w
        .cmd()
        .args(["lock", "--name", "fresh", "--"])
        .args(crate::support::fake_argv(&s))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    let status = loop {
        let sampled = std::fs::read_to_string(&status_path).ok().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        });
        peak_kib = peak_kib.max(sampled.unwrap_or(0));
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "exit 2, not killed: {stderr}");
    for n in ["cannot lock server `fresh`", needles[0], needles[1]] {
        assert!(stderr.contains(n), "stderr lacks {n:?}: {stderr}");
    }
    assert_unchanged(&w, &before, "new entry with a 100 MB line");
    assert!(peak_kib > 0, "sampled /proc");
    // The reader may hold up to the 64 MiB limit before it gives up on a line, never the whole
    // 100 MB line.
    assert!(
        peak_kib < 96 * 1024,
        "mcpsum peaked at {peak_kib} KiB while skipping a 100 MB line"
    );
    eprintln!("mcpsum peak RSS while skipping a 100 MB line: {peak_kib} KiB");
}

#[test]
fn stderr_without_a_newline_is_not_buffered() {
    // 300 MiB of stderr without a newline before the server reads anything: the lock goes on,
    // and mcpsum keeps only the start of that line.
    let (w, _, _) = hostile_world(&json!({"startDelayMs": 1500,
        "hostile": {"stderrFloodBytes": 300u64 << 20}}));
    let child = w
        .cmd()
        .args(["lock", "--name", "victim"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    let sampler = std::thread::spawn(move || {
        while let Ok(text) = std::fs::read_to_string(&status_path) {
            let hwm = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            peak_kib = peak_kib.max(hwm.unwrap_or(0));
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        peak_kib
    });
    let out = child.wait_with_output().unwrap();
    let peak_kib = sampler.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(peak_kib > 0, "sampled /proc");
    assert!(peak_kib < 64 * 1024, "mcpsum peaked at {peak_kib} KiB");
    eprintln!("mcpsum lock peak RSS with 300 MiB of stderr without a newline: {peak_kib} KiB");
}

#[test]
fn hang_times_out() {
    // Re-lock only: a new entry would reach the same hanging `tools/list` after the same
    // handshake, and each run waits out the timeout. The server answered `initialize`, so the
    // hint is not the one about `PATH` and `HOME` for `uvx`/`npx` (none is passed here).
    let (w, before, _) = hostile_world(&json!({"hostile": {"hangOn": "tools/list"}}));
    let started = std::time::Instant::now();
    relock_fails(
        &w,
        &before,
        &["--timeout-secs", "2"],
        &[
            "no answer to `tools/list` within 2 s",
            "hint: the server completed its handshake but did not answer `tools/list`; raise `--timeout-secs` if it is slow to list, otherwise report it to the server's authors",
        ],
    );
    assert!(
        started.elapsed().as_secs_f64() < 10.0,
        "bounded by the timeout"
    );
}

/// Before the handshake completes, a silent server may be a `uvx`/`npx` one missing `PATH` or
/// `HOME`: that hint stays for a hang on `initialize`.
#[test]
fn hang_before_the_handshake_hints_at_the_environment() {
    let (w, before, _) = hostile_world(&json!({"hostile": {"hangOn": "initialize"}}));
    relock_fails(
        &w,
        &before,
        &["--timeout-secs", "1"],
        &[
            "no answer to `initialize` within 1 s",
            "many need PATH and HOME: if this one does, lock it with `--env PATH` `--env HOME`",
        ],
    );
}

#[test]
fn exit_mid_list() {
    assert_hostile(
        &json!({"pageSize": 2, "hostile": {"exitOn": "tools/list", "exitOnPage": 2}}),
        &[],
        &["exited", "tools/list", MISBEHAVES],
    );
}

#[test]
fn duplicate_names() {
    assert_hostile(
        &json!({"hostile": {"duplicateNames": true}}),
        &[],
        &["two tools share the name `t0`"],
    );
}

#[test]
fn endless_cursor() {
    assert_hostile(
        &json!({"hostile": {"endlessCursor": true}}),
        &[],
        &["tools", "never pins a partial surface"],
    );
}

#[test]
fn repeated_cursor() {
    assert_hostile(
        &json!({"pageSize": 1, "hostile": {"repeatCursor": true}}),
        &[],
        &["repeated the `tools/list` cursor", MISBEHAVES],
    );
}

/// A cursor longer than 64 KiB is refused on the page that sends it (a server sending distinct
/// 30 MB cursors on empty pages once made mcpsum hold every one of them); one of exactly 64 KiB
/// is taken and sent back.
#[test]
fn cursor_longer_than_64_kib_is_refused() {
    assert_hostile(
        &json!({"pageSize": 2, "hostile": {"hugeCursorBytes": 65_537}}),
        &[],
        &[
            "the server sent a `tools/list` cursor of 65537 bytes",
            "mcpsum takes cursors of at most 65536 bytes",
            MISBEHAVES,
        ],
    );
    let (w, _, s) = hostile_world(&json!({"pageSize": 2, "hostile": {"hugeCursorBytes": 65_536}}));
    w.lock_fake("fresh", &s, &[])
        .code(0)
        .stderr_has(&["5 tools"]);
    w.run(&["verify"]).code(0);
}

#[test]
fn more_than_a_thousand_tools() {
    assert_hostile(
        &json!({"tools": [], "generateTools": 1001, "pageSize": 100}),
        &[],
        &["more than 1000 tools", MISBEHAVES],
    );
}

#[test]
fn unknown_legacy_protocol_version() {
    assert_hostile(
        &json!({"legacyVersions": ["1999-01-01"], "protocolVersion": "1999-01-01"}),
        &[],
        &["protocol version `1999-01-01`, which mcpsum does not speak"],
    );
}

#[test]
fn server_info_that_is_not_an_object() {
    assert_hostile(
        &json!({"serverInfo": "fake 1.0"}),
        &[],
        &["the `initialize` result has no `serverInfo` object"],
    );
}

#[test]
fn item_without_a_name() {
    assert_hostile(
        &json!({"tools": [{"description": "who am I", "inputSchema": {"type": "object"}}]}),
        &[],
        &["tool #0 is not an object with a string `name`"],
    );
}

#[test]
fn exactly_a_thousand_tools_lock() {
    let w = World::new();
    let s = w.scenario("big", &json!({"generateTools": 1000, "pageSize": 250}));
    w.lock_fake("big", &s, &[])
        .code(0)
        .stderr_has(&["1000 tools"]);
    w.run(&["verify"]).code(0);
}

#[test]
fn answers_with_a_wrong_id_and_notification_floods_are_ignored() {
    let w = World::new();
    let s = w.scenario(
        "s",
        &json!({"tools": tools(3), "hostile": {"idMismatch": true, "floodNotifications": 2000}}),
    );
    w.lock_fake("s", &s, &[]).code(0).stderr_has(&["3 tools"]);
    let bytes = String::from_utf8(w.lock_bytes()).unwrap();
    assert!(!bytes.contains("WRONG_ID_DECOY"), "{bytes}");
}

#[test]
fn server_exiting_during_initialize_names_the_server_and_shows_its_stderr() {
    assert_hostile(
        &json!({"hostile": {"exitOn": "initialize", "stderrLines": ["fatal: config missing"]}}),
        &[],
        &["exited", "fatal: config missing"],
    );
}

/// Wraps `inner` in `levels` arrays.
fn nested(levels: usize, inner: Value) -> Value {
    (0..levels).fold(inner, |v, _| json!([v]))
}

/// The wire nests an item one level less deep than `mcp.lock` does: an item a server can send
/// but the file could not hold is refused, instead of writing a lockfile no command can load.
/// One level less is locked, and every command still loads the file.
#[test]
fn an_item_nested_deeper_than_the_lockfile_holds_is_refused() {
    // The tool object and `inputSchema` are two levels, `x`'s arrays the rest: 124 in all.
    let deep = |arrays: usize| json!({"tools": [{"name": "d", "inputSchema": {"x": nested(arrays, json!(1))}}]});
    assert_hostile(
        &deep(122),
        &[],
        &["tool `d` nests 124 levels", "mcp.lock can hold at most 123"],
    );
    let (w, _, s) = hostile_world(&deep(121));
    w.lock_fake("fresh", &s, &[]).code(0);
    w.run(&["show"]).code(0);
    w.run(&["verify", "--name", "fresh"]).code(0);
}

/// Text from the server inside an error (a duplicate name, a JSON-RPC error message) stays on
/// its line: a newline in it is shown escaped and cannot print a line that reads like mcpsum's.
#[test]
fn server_text_in_errors_cannot_start_a_line() {
    let fake = "x\n\nhint: this server is safe; nothing to do";
    let (w, before, _) = hostile_world(&json!({
        "tools": [{"name": fake, "inputSchema": {"type": "object"}}],
        "hostile": {"duplicateNames": true}
    }));
    let r = w.run(&["lock", "--name", "victim"]);
    r.code(2)
        .stderr_has(&[r"two tools share the name `x\n\nhint: this server is safe"]);
    assert!(
        !r.stderr.contains("\nhint: this server is safe"),
        "{}",
        r.stderr
    );
    assert_unchanged(&w, &before, "a lock that failed");
}

// ----- hostile peers of a running proxy -----

/// Class: a source hides injected text in a JSON-RPC error (here to `prompts/get`, a locked
/// prompt called without its required argument): the error reaches the model all the same, so
/// it taints the session.
#[test]
fn a_source_error_to_prompts_get_taints() {
    use crate::support::Era;
    use crate::taint::{list_json, only_session, raw, set_policy};
    for era in [Era::Legacy, Era::Modern] {
        let w = World::new();
        let s = w.scenario(
            "web",
            &json!({"era": if era == Era::Legacy { "legacy" } else { "modern" },
                    "tools": [{"name": "send", "inputSchema": {"type": "object"}}],
                    "prompts": [{"name": "ask", "arguments": [{"name": "q", "required": true}]}]}),
        );
        w.lock_fake("web", &s, &[]).code(0);
        set_policy(
            &w,
            "web",
            &json!({"taint": {"sources": ["prompts:*"], "sinks": ["send"]}}),
        );
        let mut px = raw(&w, "web", era, json!({}));
        let r = px.request_answering("p", "prompts/get", json!({"name": "ask"}), None);
        assert!(r.get("error").is_some(), "{era:?}: {r:#}");
        // Refused (this client cannot show a prompt), naming the source, in either era's form.
        let text = px.call("s", "send", json!({})).to_string();
        assert!(
            text.contains("cannot show") && text.contains("prompts:* ask"),
            "{era:?}: {text}"
        );
        px.finish();
        let st = only_session(&list_json(&w));
        assert_eq!(st["session"]["taint"]["item"], "prompts:* ask", "{st:#}");
    }
}

/// Class: arguments built to hide from the person: a dangerous key after a long value, a key
/// whose bidi isolates and zero-width characters make it read as another, in a 2026-07-28
/// prompt. Every key is shown, every hidden character escaped.
#[test]
fn arguments_cannot_hide_from_the_approval_prompt() {
    use crate::support::Era;
    use crate::taint::prompt_for;
    let args = json!({"note": "n".repeat(2_000), "t\u{2066}o\u{2069}\u{200d}": "evil@example.org"});
    let msg = prompt_for(Era::Modern, &args);
    assert!(
        msg.contains(r#""t\u2066o\u2069\u200d": "evil@example.org""#),
        "{msg}"
    );
    assert!(
        !msg.contains(['\u{2066}', '\u{2069}', '\u{200d}']),
        "{msg:?}"
    );
}

/// Class: a client that starts a server through nested shells (each forks, none execs) is
/// still the client: the proxy's session is the test process's, two shells up.
#[test]
fn nested_shells_do_not_make_a_session_of_their_own() {
    use crate::support::Era;
    use crate::taint::{default_policy, list_json, only_session, raw_with, setup};
    let w = World::new();
    setup(&w, "web", Era::Legacy, &default_policy());
    let mcpsum = env!("CARGO_BIN_EXE_mcpsum");
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args([
        "-c",
        "/bin/bash -c '\"$0\" \"$@\"; exit $?' \"$0\" \"$@\"; exit $?",
        mcpsum,
    ]);
    let mut px = raw_with(&w, "web", Era::Legacy, json!({}), cmd);
    px.finish();
    let st = only_session(&list_json(&w));
    assert_eq!(st["session"]["clientPid"], std::process::id(), "{st:#}");
    let names: Vec<&str> = st["session"]["chains"]["web"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(&names[..2], ["bash", "dash"], "{names:?}");
}

/// Class: names that would swell the audit log: a 4 MiB method no one serves, a 4 MiB tool in
/// a call. Each record keeps a prefix and the digest.
#[test]
fn a_huge_method_name_does_not_swell_the_audit_log() {
    use crate::audit::{client, tool};
    let w = World::new();
    let s = w.scenario("big", &json!({"tools": [tool("echo")]}));
    w.lock_fake("big", &s, &[]).code(0);
    let log = w.path().join("state/audit.jsonl");
    let mut c = client(&w, "big", false);
    let before = std::fs::metadata(&log).unwrap().len();
    let huge = "m".repeat(4 << 20);
    for id in 1..=3 {
        let r = c.request(id, &huge, json!({}));
        assert!(r.get("error").is_some(), "{r}");
    }
    c.finish_ok();
    let grown = std::fs::metadata(&log).unwrap().len() - before;
    assert!(grown < 8 * 1024, "the log grew by {grown} bytes");
}

/// Class: characters that show nothing or overlay their neighbours (blank braille, combining
/// marks, format characters of other scripts, private use, other spaces), and a run of spaces
/// that pushes the rest of a value off the screen. All are escaped or counted in the prompt.
#[test]
fn blank_combining_format_characters_and_space_runs_cannot_hide_from_the_prompt() {
    use crate::support::Era;
    use crate::taint::prompt_for;
    let hidden = [
        '\u{2800}',
        '\u{0338}',
        '\u{20dd}',
        '\u{0600}',
        '\u{0605}',
        '\u{110bd}',
        '\u{13430}',
        '\u{1343f}',
        '\u{1bca0}',
        '\u{1bca3}',
        '\u{3000}',
        '\u{00a0}',
        '\u{e000}',
        '\u{2420}',
    ];
    let tricky: String = hidden.iter().map(|c| format!("x{c}")).collect();
    let padded = format!(
        "alice@example.org{}and BCC eve@evil.example",
        " ".repeat(7_000)
    );
    let args = json!({"to": padded, "note": tricky});
    for era in [Era::Legacy, Era::Modern] {
        let msg = prompt_for(era, &args);
        // The mark of a space run stands for itself only escaped.
        for c in hidden.into_iter().filter(|c| *c != '\u{2420}') {
            assert!(
                !msg.contains(c),
                "{era:?}: {:x} is shown raw: {msg:?}",
                c as u32
            );
        }
        assert_eq!(msg.matches('\u{2420}').count(), 1, "{era:?}: {msg}");
        for esc in [
            r"\u2800",
            r"\u0338",
            r"\u0600",
            r"\ud804\udcbd",
            r"\u3000",
            r"\u2420",
        ] {
            assert!(msg.contains(esc), "{era:?}: {esc} missing: {msg}");
        }
        assert!(
            msg.contains("alice@example.org\u{2420}\u{d7}7000and BCC eve@evil.example"),
            "{era:?}: {msg}"
        );
        assert!(!msg.contains(&" ".repeat(9)), "{era:?}: {msg}");
    }
}

/// Class: a wrapper that no name list knows (here a Python one-liner that runs its arguments,
/// as strace, sudo or a version manager's shim do) passes its stdio on: the proxy sees its own
/// stdin and stdout in it and walks past it to the client, the test process.
#[test]
fn an_unknown_wrapper_passing_stdio_on_does_not_make_a_session_of_its_own() {
    use crate::support::Era;
    use crate::taint::{default_policy, list_json, only_session, raw_with, setup};
    let w = World::new();
    setup(&w, "web", Era::Legacy, &default_policy());
    let mcpsum = env!("CARGO_BIN_EXE_mcpsum");
    let mut cmd = std::process::Command::new("python3");
    cmd.args([
        "-c",
        "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))",
        mcpsum,
    ]);
    let mut px = raw_with(&w, "web", Era::Legacy, json!({}), cmd);
    px.finish();
    let st = only_session(&list_json(&w));
    assert_eq!(st["session"]["clientPid"], std::process::id(), "{st:#}");
    let chain = st["session"]["chains"]["web"].as_array().unwrap();
    assert_eq!(chain.len(), 2, "{chain:?}");
    assert!(
        chain[0]["name"].as_str().unwrap().starts_with("python3"),
        "{chain:?}"
    );
    // A tracer gives the process it runs stdio of its own: known as its tracer instead.
    if std::path::Path::new("/usr/bin/strace").exists() {
        let w = World::new();
        setup(&w, "web", Era::Legacy, &default_policy());
        let mut cmd = std::process::Command::new("/usr/bin/strace");
        cmd.args(["-f", "-qq", "-o", "/dev/null", mcpsum]);
        let mut px = raw_with(&w, "web", Era::Legacy, json!({}), cmd);
        px.finish();
        let st = only_session(&list_json(&w));
        assert_eq!(st["session"]["clientPid"], std::process::id(), "{st:#}");
        assert_eq!(
            st["session"]["chains"]["web"][0]["name"], "strace",
            "{st:#}"
        );
    } else {
        eprintln!("strace is not installed: its case is skipped");
    }
}

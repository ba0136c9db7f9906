//! Era detection as the lockfile format's "Protocol era" section says.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::{World, starts, transcript_events};

fn tools() -> Value {
    json!([{"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}])
}

/// The first message each started process received.
fn first_messages(events: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut want = false;
    for e in events {
        match e["event"].as_str() {
            Some("start") => want = true,
            Some("recv") if want => {
                out.push(e["msg"].clone());
                want = false;
            }
            _ => {}
        }
    }
    out
}

#[test]
fn probe_sends_empty_client_capabilities() {
    let w = World::new();
    let t = w.transcript("m");
    let s = w.scenario(
        "m",
        &json!({"era": "modern", "tools": tools(), "transcript": t}),
    );
    w.lock_fake("m", &s, &[]).code(0);
    let first = first_messages(&transcript_events(&t));
    assert_eq!(first.len(), 1, "one process for a modern server");
    let probe = &first[0];
    assert_eq!(probe["method"], "server/discover");
    let meta = &probe["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({})
    );
    assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "mcpsum");
}

#[test]
fn legacy_server_that_exits_on_a_non_initialize_first_message_still_locks() {
    let w = World::new();
    let t = w.transcript("old");
    let s = w.scenario(
        "old",
        &json!({"era": "legacy", "hostile": {"exitOnNonInitialize": true}, "tools": tools(),
                "transcript": t}),
    );
    w.lock_fake("old", &s, &[])
        .code(0)
        .stderr_has(&["legacy (initialize)"]);
    let events = transcript_events(&t);
    assert_eq!(
        starts(&t),
        2,
        "a fresh process before initialize: {events:#?}"
    );
    let first = first_messages(&events);
    assert_eq!(first[0]["method"], "server/discover");
    assert_eq!(first[1]["method"], "initialize");
    assert_eq!(w.lock_json()["lockfileVersion"], 1);

    // verify and re-lock ask the locked era first: one process, `initialize` first.
    w.run(&["verify"]).code(0);
    w.run(&["lock", "--name", "old"]).code(0);
    let events = transcript_events(&t);
    assert_eq!(starts(&t), 4);
    let first = first_messages(&events);
    assert_eq!(first[2]["method"], "initialize");
    assert_eq!(first[3]["method"], "initialize");
}

#[test]
fn silent_on_discover_falls_back_after_the_timeout() {
    let w = World::new();
    let t = w.transcript("quiet");
    let s = w.scenario(
        "quiet",
        &json!({"era": "legacy", "hostile": {"silentOnDiscover": true}, "tools": tools(),
                "transcript": t}),
    );
    let started = std::time::Instant::now();
    w.lock_fake("quiet", &s, &["--timeout-secs", "2"])
        .code(0)
        .stderr_has(&["locked `quiet`", "legacy (initialize)"]);
    assert!(
        started.elapsed().as_secs_f64() >= 2.0,
        "waited for the timeout"
    );
    assert_eq!(starts(&t), 2);
    assert!(
        w.lock_json()["servers"]["quiet"]
            .get("supportedVersions")
            .is_none()
    );
}

#[test]
fn discover_errors_of_the_new_era_fail_the_lock() {
    for code in [-32022, -32021] {
        let w = World::new();
        let t = w.transcript("m");
        let s = w.scenario(
            "m",
            &json!({"era": "modern", "hostile": {"discoverError": code}, "tools": tools(),
                    "transcript": t}),
        );
        w.lock_fake("m", &s, &[]).code(2).stderr_has(&[
            "cannot lock server `m`",
            &code.to_string(),
            "does not fall back to `initialize`",
        ]);
        assert_eq!(starts(&t), 1, "no fallback after {code}");
        assert!(!w.lockfile().exists());
    }
}

#[test]
fn other_discover_errors_mean_legacy() {
    let w = World::new();
    let s = w.scenario(
        "m",
        &json!({"era": "legacy", "hostile": {"discoverError": -32603}, "tools": tools()}),
    );
    w.lock_fake("m", &s, &[])
        .code(0)
        .stderr_has(&["legacy (initialize)"]);
}

#[test]
fn bad_discover_results_fail_the_lock() {
    let cases = [
        (
            "no serverInfo",
            json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
                   "capabilities": {}, "ttlMs": 0, "cacheScope": "public"}),
            "io.modelcontextprotocol/serverInfo",
        ),
        (
            "no 2026-07-28",
            json!({"resultType": "complete", "supportedVersions": ["2025-11-25"],
                   "capabilities": {}, "ttlMs": 0, "cacheScope": "public",
                   "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "x", "version": "1"}}}),
            "does not list 2026-07-28",
        ),
        (
            "input_required",
            json!({"resultType": "input_required", "supportedVersions": ["2026-07-28"],
                   "capabilities": {}, "ttlMs": 0, "cacheScope": "public",
                   "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "x", "version": "1"}}}),
            "resultType",
        ),
    ];
    for (what, result, needle) in cases {
        let w = World::new();
        let t = w.transcript("m");
        let s = w.scenario(
            "m",
            &json!({"era": "dual", "hostile": {"discoverResult": result}, "tools": tools(),
                    "transcript": t}),
        );
        let r = w.lock_fake("m", &s, &[]);
        r.code(2)
            .stderr_has(&["cannot lock server `m`", "server/discover", needle]);
        assert_eq!(starts(&t), 1, "{what}: no fallback after a DiscoverResult");
        assert!(!w.lockfile().exists(), "{what}");
    }
}

#[test]
fn era_change_is_definitional_drift() {
    // Locked legacy; the server moves to 2026-07-28 only: `initialize` is refused, the fresh
    // probe finds the new era, and verify reports it.
    let w = World::new();
    let s = w.scenario("m", &json!({"era": "legacy", "tools": tools()}));
    w.lock_fake("m", &s, &[]).code(0);
    w.scenario("m", &json!({"era": "modern", "tools": tools()}));
    let r = w.run(&["verify"]);
    r.code(1)
        .stdout_has(&["drift m:", "era", "2026-07-28 (server/discover)"]);
}

#[test]
fn era_change_back_to_legacy_is_definitional_drift() {
    // Locked from a dual server in 2026-07-28; the server drops the new era.
    let w = World::new();
    let s = w.scenario("m", &json!({"era": "dual", "tools": tools()}));
    w.lock_fake("m", &s, &[]).code(0);
    assert_eq!(w.lock_json()["lockfileVersion"], 2);
    w.scenario("m", &json!({"era": "legacy", "tools": tools()}));
    w.run(&["verify"])
        .code(1)
        .stdout_has(&["drift m:", "era", "legacy (initialize)"]);
}

#[test]
fn modern_server_dropping_the_locked_version_fails_verification() {
    let w = World::new();
    let s = w.scenario("m", &json!({"era": "modern", "tools": tools()}));
    w.lock_fake("m", &s, &[]).code(0);
    w.scenario(
        "m",
        &json!({"era": "modern", "supportedVersions": ["2027-01-01"], "tools": tools()}),
    );
    // The seed's drift table: it cannot be spoken to as locked, a definitional change.
    w.run(&["verify"])
        .code(1)
        .stdout_has(&["drift m:", "no longer listed", "2027-01-01"]);
    let before = w.lock_bytes();
    w.run(&["lock", "--name", "m"])
        .code(2)
        .stderr_has(&["cannot lock server `m`", "-32022"]);
    crate::support::assert_unchanged(&w, &before, "re-lock");
}

#[test]
fn modern_server_dropping_the_locked_version_is_reported_as_such() {
    let w = World::new();
    let s = w.scenario("m", &json!({"era": "modern", "tools": tools()}));
    w.lock_fake("m", &s, &[]).code(0);
    w.scenario(
        "m",
        &json!({"era": "modern", "supportedVersions": ["2027-01-01"], "tools": tools()}),
    );
    let r = w.run(&["verify"]);
    r.code(1).stdout_has(&["2026-07-28", "2027-01-01"]);
    assert!(
        !r.stdout
            .contains("check that the command starts an MCP server"),
        "{r:?}"
    );
}

#[test]
fn lock_and_verify_present_the_same_client_identity() {
    // Some servers list more to clients that declare more: lock and verify must present one
    // fixed clientInfo and capability set, so the surface is compared like for like.
    let w = World::new();
    let t = w.transcript("l");
    let s = w.scenario(
        "l",
        &json!({"era": "legacy", "tools": tools(), "transcript": t}),
    );
    w.lock_fake("l", &s, &[]).code(0);
    w.run(&["verify"]).code(0);
    let events = transcript_events(&t);
    let inits: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "recv" && e["msg"]["method"] == "initialize")
        .map(|e| &e["msg"]["params"])
        .collect();
    assert_eq!(inits.len(), 2, "{events:#?}");
    assert_eq!(inits[0], inits[1]);
    assert_eq!(inits[0]["clientInfo"]["name"], "mcpsum");
    assert!(inits[0]["capabilities"].is_object());
    // The proxy sends `notifications/roots/list_changed` (a client with roots came after the
    // server asked), so the capability says it may.
    assert_eq!(
        inits[0]["capabilities"]["roots"],
        json!({"listChanged": true})
    );
    let initialized = events
        .iter()
        .filter(|e| e["event"] == "recv" && e["msg"]["method"] == "notifications/initialized")
        .count();
    assert_eq!(
        initialized, 2,
        "`notifications/initialized` after each handshake"
    );

    let t = w.transcript("m");
    let s = w.scenario(
        "m",
        &json!({"era": "modern", "tools": tools(), "transcript": t}),
    );
    w.lock_fake("m", &s, &[]).code(0);
    w.run(&["verify", "--name", "m"]).code(0);
    let metas: Vec<Value> = transcript_events(&t)
        .iter()
        .filter(|e| e["event"] == "recv" && e["msg"]["method"] == "tools/list")
        .map(|e| e["msg"]["params"]["_meta"].clone())
        .collect();
    assert_eq!(metas.len(), 2);
    assert_eq!(metas[0], metas[1]);
    assert_eq!(
        metas[0]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        metas[0]["io.modelcontextprotocol/clientCapabilities"], inits[0]["capabilities"],
        "the same capability set in both eras"
    );
}

#[test]
fn a_legacy_entry_keeps_its_era_when_the_server_learns_2026_07_28() {
    let w = World::new();
    let s = w.scenario("d", &json!({"era": "legacy", "tools": tools()}));
    w.lock_fake("d", &s, &[]).code(0);
    w.scenario("d", &json!({"era": "dual", "tools": tools()}));
    w.run(&["verify"]).code(0).stdout_has(&["ok d: clean"]);
    w.run(&["lock", "--name", "d"])
        .code(0)
        .stderr_has(&["legacy (initialize)", "unchanged since the previous lock"]);
    let lock = w.lock_json();
    assert_eq!(lock["lockfileVersion"], 1);
    assert!(lock["servers"]["d"].get("supportedVersions").is_none());
}

/// The methods the started processes received first, one per start.
fn first_methods(t: &std::path::Path) -> Vec<String> {
    first_messages(&transcript_events(t))
        .iter()
        .map(|m| m["method"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_dual_era_server_locks_modern_and_lock_says_how_to_keep_the_legacy_era() {
    let w = World::new();
    let s = w.scenario("d", &json!({"era": "dual", "tools": tools()}));
    w.lock_fake("d", &s, &[]).code(0).stderr_has(&[
        "2026-07-28 (server/discover)",
        "`d` also speaks the legacy era (it lists 2025-11-25)",
        "run `mcpsum lock --name d --era legacy`",
    ]);
    assert_eq!(w.lock_json()["lockfileVersion"], 2);
    // Asked for explicitly: nothing to point out.
    let r = w.run(&["lock", "--name", "d", "--era", "modern"]);
    r.code(0);
    assert!(!r.stderr.contains("--era legacy"), "{r:?}");
    // A modern-only server speaks one era: nothing to point out either.
    let s = w.scenario("m", &json!({"era": "modern", "tools": tools()}));
    let r = w.lock_fake("m", &s, &[]);
    r.code(0);
    assert!(!r.stderr.contains("also speaks"), "{r:?}");
}

#[test]
fn lock_era_legacy_locks_a_dual_server_through_initialize_and_keeps_it() {
    let w = World::new();
    let t = w.transcript("d");
    let s = w.scenario(
        "d",
        &json!({"era": "dual", "tools": tools(), "transcript": t}),
    );
    w.lock_fake("d", &s, &["--era", "legacy"])
        .code(0)
        .stderr_has(&["locked `d`", "legacy (initialize)"]);
    let lock = w.lock_json();
    assert_eq!(lock["lockfileVersion"], 1);
    assert!(lock["servers"]["d"].get("supportedVersions").is_none());
    assert_eq!(first_methods(&t), ["initialize"], "no probe");
    // A re-lock without `--era` keeps it, and `verify` is clean.
    w.run(&["lock", "--name", "d"])
        .code(0)
        .stderr_has(&["legacy (initialize)", "unchanged since the previous lock"]);
    w.run(&["verify"]).code(0).stdout_has(&["ok d: clean"]);
    assert_eq!(w.lock_json()["lockfileVersion"], 1);
    // `--era auto` detects again, and moves it.
    w.run(&["lock", "--name", "d", "--era", "auto"])
        .code(0)
        .stderr_has(&["2026-07-28 (server/discover)", "era"]);
    assert_eq!(w.lock_json()["lockfileVersion"], 2);
}

#[test]
fn lock_era_modern_requires_server_discover() {
    let w = World::new();
    let t = w.transcript("l");
    let s = w.scenario(
        "l",
        &json!({"era": "legacy", "tools": tools(), "transcript": t}),
    );
    w.lock_fake("l", &s, &["--era", "modern"])
        .code(2)
        .stderr_has(&[
            "cannot lock server `l`",
            "the server does not speak 2026-07-28",
            "`server/discover`",
            "hint: to lock it in the legacy era, run `mcpsum lock --name l --era legacy`",
        ]);
    assert!(!w.lockfile().exists());
    assert_eq!(first_methods(&t), ["server/discover"], "no fallback");
}

#[test]
fn a_relock_without_era_never_switches_it() {
    // Legacy entry, the server moves to 2026-07-28 only.
    let w = World::new();
    let s = w.scenario("x", &json!({"era": "legacy", "tools": tools()}));
    w.lock_fake("x", &s, &[]).code(0);
    w.scenario("x", &json!({"era": "modern", "tools": tools()}));
    let before = w.lock_bytes();
    w.run(&["lock", "--name", "x"]).code(2).stderr_has(&[
        "cannot lock server `x`",
        "the server does not speak the legacy era: it refused `initialize`",
        "hint: server `x` is locked in legacy (initialize) and a re-lock keeps its era; to lock it in 2026-07-28, run `mcpsum lock --name x --era modern`",
    ]);
    crate::support::assert_unchanged(&w, &before, "re-lock in the kept era");
    w.run(&["lock", "--name", "x", "--era", "modern"]).code(0);
    assert_eq!(w.lock_json()["lockfileVersion"], 2);

    // Modern entry, the server drops 2026-07-28 (it answers only `initialize`).
    w.scenario("x", &json!({"era": "legacy", "tools": tools()}));
    let before = w.lock_bytes();
    w.run(&["lock", "--name", "x"]).code(2).stderr_has(&[
        "the server does not speak 2026-07-28",
        "hint: server `x` is locked in 2026-07-28 (server/discover) and a re-lock keeps its era; to lock it in the legacy era, run `mcpsum lock --name x --era legacy`",
    ]);
    crate::support::assert_unchanged(&w, &before, "re-lock in the kept era");
    w.run(&["lock", "--name", "x", "--era", "auto"])
        .code(0)
        .stderr_has(&["legacy (initialize)"]);
    assert_eq!(w.lock_json()["lockfileVersion"], 1);
}

#[test]
fn lock_and_verify_answer_roots_list_with_no_roots() {
    // mcpsum declares `roots` to every server, so a server that asks gets an answer: an empty
    // list, which leaves it serving what its command line says.
    let w = World::new();
    let t = w.transcript("r");
    let s = w.scenario(
        "r",
        &json!({"tools": tools(), "rootsOnInitialized": true, "transcript": t}),
    );
    w.lock_fake("r", &s, &[]).code(0);
    w.run(&["verify"]).code(0).stdout_has(&["ok r: clean"]);
    let answers: Vec<Value> = transcript_events(&t)
        .into_iter()
        .filter(|e| e["event"] == "recv" && e["msg"]["id"] == "fake-roots-initialized")
        .map(|e| e["msg"].clone())
        .collect();
    assert_eq!(answers.len(), 2, "lock and verify: {answers:#?}");
    for a in &answers {
        assert_eq!(a["result"], json!({"roots": []}), "{a}");
    }
}

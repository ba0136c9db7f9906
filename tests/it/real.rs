//! Real servers installed by `scripts/install-test-deps.sh` into `target/test-deps/`: locked,
//! shown and verified clean. Skipped with a printed reason when absent, unless
//! `MCPSUM_REQUIRE_REAL_SERVERS=1` (CI), where absence fails.

use pretty_assertions::assert_eq;

use crate::support::{World, test_dep};

#[test]
fn mcp_server_time_is_dual_era_and_locks_as_2026_07_28() {
    let Some(bin) = test_dep("venv/bin/mcp-server-time") else {
        return;
    };
    let w = World::new();
    let bin = bin.display().to_string();
    w.run(&["lock", "--name", "time", "--", &bin])
        .code(0)
        .stderr_has(&["locked `time`", "2026-07-28 (server/discover)", "mcp-time"]);
    let lock = w.lock_json();
    assert_eq!(lock["lockfileVersion"], 2);
    let e = &lock["servers"]["time"];
    assert_eq!(e["protocolVersion"], "2026-07-28");
    assert!(
        e["supportedVersions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "2026-07-28"),
        "{e}"
    );
    let tools: Vec<&str> = e["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["convert_time", "get_current_time"]);

    w.run(&["show", "--name", "time"])
        .code(0)
        .stdout_has(&["get_current_time", "era          2026-07-28"]);
    let sj = w.run(&["show", "--json"]);
    sj.code(0);
    assert_eq!(sj.json()["servers"]["time"]["era"], "2026-07-28");
    w.run(&["verify"]).code(0).stdout_has(&["ok time: clean"]);
}

#[test]
fn mcp_server_time_locks_in_the_legacy_era_when_asked() {
    let Some(bin) = test_dep("venv/bin/mcp-server-time") else {
        return;
    };
    let w = World::new();
    let bin = bin.display().to_string();
    w.run(&["lock", "--name", "time", "--era", "legacy", "--", &bin])
        .code(0)
        .stderr_has(&["locked `time`", "legacy (initialize)"]);
    let lock = w.lock_json();
    assert_eq!(lock["lockfileVersion"], 1);
    let e = &lock["servers"]["time"];
    assert!(e.get("supportedVersions").is_none(), "{e}");
    assert!(e["protocolVersion"].as_str().unwrap() < "2026", "{e}");
    // Kept by a re-lock and by verify; `--era modern` moves it.
    w.run(&["lock", "--name", "time"])
        .code(0)
        .stderr_has(&["legacy (initialize)", "unchanged since the previous lock"]);
    w.run(&["verify"]).code(0).stdout_has(&["ok time: clean"]);
    w.run(&["lock", "--name", "time", "--era", "modern"])
        .code(0)
        .stderr_has(&["2026-07-28 (server/discover)"]);
    assert_eq!(w.lock_json()["lockfileVersion"], 2);
}

#[test]
fn server_everything_is_legacy() {
    let Some(index) =
        test_dep("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    else {
        return;
    };
    let w = World::new();
    let index = index.display().to_string();
    w.run(&[
        "lock",
        "--name",
        "everything",
        "--env",
        "PATH",
        "--",
        "node",
        &index,
        "stdio",
    ])
    .code(0)
    .stderr_has(&["locked `everything`", "legacy (initialize)"]);
    let lock = w.lock_json();
    assert_eq!(lock["lockfileVersion"], 1);
    let e = &lock["servers"]["everything"];
    assert!(e.get("supportedVersions").is_none());
    assert_eq!(e["envPassthrough"], serde_json::json!(["PATH"]));
    assert!(e["tools"].as_array().unwrap().len() >= 5, "{}", e["tools"]);
    assert!(!e["prompts"].as_array().unwrap().is_empty());
    assert!(!e["resources"].as_array().unwrap().is_empty());
    w.run(&["show"]).code(0).stdout_has(&[
        "everything",
        "era          legacy (initialize)",
        "env          PATH",
    ]);
    w.run(&["show", "--json"]).code(0);
    w.run(&["verify"])
        .code(0)
        .stdout_has(&["ok everything: clean"]);
}

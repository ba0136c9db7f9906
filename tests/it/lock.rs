//! `lock`, `show` and `verify` of well-behaved fake servers in each era, and pagination.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::{Run, World, bundled_scenario, fake_argv, snapshot_settings};

#[test]
fn example_legacy_lock_show_verify() {
    let w = World::new();
    let r = w.lock_fake("notes", &bundled_scenario("example.json"), &[]);
    r.code(0).stderr_has(&[
        "locked `notes`",
        "legacy (initialize), protocol 2025-11-25",
        "example-notes 1.2.0",
        "2 tools, 1 prompt, 1 resource, 1 resource template",
    ]);
    let lock = w.lock_json();
    assert_eq!(lock["lockfileVersion"], 1);
    let e = &lock["servers"]["notes"];
    assert_eq!(e["protocolVersion"], "2025-11-25");
    assert!(e.get("supportedVersions").is_none(), "legacy entry: {e}");
    assert_eq!(
        e["command"],
        json!(fake_argv(&bundled_scenario("example.json")))
    );
    assert_eq!(e["envPassthrough"], json!([]));
    let names: Vec<&str> = e["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add", "echo"]);
    let bytes = String::from_utf8(w.lock_bytes()).unwrap();
    assert!(bytes.ends_with("}\n") && !bytes.ends_with("\n\n"));
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("example_lockfile", w.redact(&bytes));
    });

    let show = w.run(&["show"]);
    show.code(0);
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("example_show", w.redact(&show.stdout));
    });
    let sj = w.run(&["show", "--json"]);
    sj.code(0);
    let sj = sj.json();
    let s = &sj["servers"]["notes"];
    assert_eq!(s["era"], "legacy");
    assert_eq!(
        s["counts"],
        json!({"tools": 2, "prompts": 1, "resources": 1, "resourceTemplates": 1})
    );
    assert_eq!(s["surfaceDigest"], e["digests"]["surface"]);
    assert_eq!(sj["lockfileVersion"], 1);

    w.run(&["verify"]).code(0).stdout_has(&["ok notes: clean"]);
    let vj = w.run(&["verify", "--json"]);
    vj.code(0);
    assert_eq!(vj.json()["servers"][0]["status"], "clean");
}

#[test]
fn modern_scenario_writes_version_2() {
    let w = World::new();
    w.lock_fake("modern", &bundled_scenario("modern.json"), &[])
        .code(0)
        .stderr_has(&[
            "locked `modern`",
            "2026-07-28 (server/discover), protocol 2026-07-28",
            "5 tools",
        ]);
    let lock = w.lock_json();
    assert_eq!(lock["lockfileVersion"], 2);
    let e = &lock["servers"]["modern"];
    assert_eq!(e["protocolVersion"], "2026-07-28");
    assert_eq!(e["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(
        e["serverInfo"],
        json!({"name": "example-modern", "version": "3.0.0"})
    );
    // pageSize 2 with 5 tools: all three pages are locked.
    assert_eq!(e["tools"].as_array().unwrap().len(), 5);
    snapshot_settings().bind(|| {
        insta::assert_snapshot!(
            "modern_lockfile",
            w.redact(&String::from_utf8(w.lock_bytes()).unwrap())
        );
    });
    let sj = w.run(&["show", "--name", "modern", "--json"]);
    sj.code(0);
    let sj = sj.json();
    assert_eq!(sj["lockfileVersion"], 2);
    assert_eq!(sj["servers"]["modern"]["era"], "2026-07-28");
    w.run(&["verify", "--name", "modern"])
        .code(0)
        .stdout_has(&["ok modern: clean"]);
}

#[test]
fn dual_scenario_locks_as_2026_07_28() {
    let w = World::new();
    w.lock_fake("dual", &bundled_scenario("dual.json"), &[])
        .code(0)
        .stderr_has(&["2026-07-28 (server/discover)"]);
    let lock = w.lock_json();
    assert_eq!(lock["lockfileVersion"], 2);
    assert_eq!(lock["servers"]["dual"]["protocolVersion"], "2026-07-28");
    assert_eq!(
        lock["servers"]["dual"]["supportedVersions"],
        json!(["2025-11-25", "2026-07-28"])
    );
    w.run(&["show"]).code(0).stdout_has(&[
        "era          2026-07-28 (server/discover), protocol 2026-07-28",
        "supported    2025-11-25, 2026-07-28",
    ]);
    w.run(&["verify"]).code(0).stdout_has(&["ok dual: clean"]);
}

#[test]
fn legacy_and_modern_entries_share_a_version_2_file() {
    let w = World::new();
    w.lock_fake("notes", &bundled_scenario("example.json"), &[])
        .code(0);
    assert_eq!(w.lock_json()["lockfileVersion"], 1);
    w.lock_fake("modern", &bundled_scenario("modern.json"), &[])
        .code(0);
    let lock = w.lock_json();
    assert_eq!(lock["lockfileVersion"], 2);
    let names: Vec<&String> = lock["servers"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["modern", "notes"], "servers sorted by name");
    w.run(&["verify"])
        .code(0)
        .stdout_has(&["ok modern: clean", "ok notes: clean"]);
}

#[test]
fn pagination_locks_every_page() {
    let w = World::new();
    for (name, era) in [("legacy", "legacy"), ("modern", "modern")] {
        let s = w.scenario(
            name,
            &json!({"era": era, "generateTools": 5, "pageSize": 2,
            "prompts": [{"name": "p1"}, {"name": "p2"}, {"name": "p3"}],
            "resources": [{"uri": "x://1", "name": "1"}, {"uri": "x://2", "name": "2"},
                          {"uri": "x://3", "name": "3"}]}),
        );
        w.lock_fake(name, &s, &[])
            .code(0)
            .stderr_has(&["5 tools, 3 prompts, 3 resources"]);
        let e = &w.lock_json()["servers"][name];
        let tools: Vec<&str> = e["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            tools,
            [
                "tool_0000",
                "tool_0001",
                "tool_0002",
                "tool_0003",
                "tool_0004"
            ]
        );
        assert_eq!(e["digests"]["tools"].as_object().unwrap().len(), 5);
        w.run(&["verify", "--name", name]).code(0);
    }
}

#[test]
fn a_kind_not_advertised_is_empty() {
    let w = World::new();
    // strictCapabilities: a list whose capability is not advertised gets -32601; mcpsum must not
    // even ask.
    let s = w.scenario(
        "s",
        &json!({"strictCapabilities": true, "tools": [{"name": "t", "inputSchema": {"type": "object"}}]}),
    );
    w.lock_fake("s", &s, &[])
        .code(0)
        .stderr_has(&["1 tool, 0 prompts, 0 resources, 0 resource templates"]);
    let e = &w.lock_json()["servers"]["s"];
    assert_eq!(e["prompts"], json!([]));
    assert_eq!(e["resourceTemplates"], json!([]));
}

#[test]
fn colour_follows_no_color_and_the_flag() {
    let w = World::new();
    let s = w.scenario(
        "s",
        &json!({"tools": [{"name": "t", "description": "one"}]}),
    );
    w.lock_fake("s", &s, &[]).code(0);
    w.scenario(
        "s",
        &json!({"tools": [{"name": "t", "description": "two"}]}),
    );
    let plain = w.run(&["verify"]);
    plain.code(1);
    assert!(!plain.stdout.contains('\u{1b}'), "NO_COLOR: {plain:?}");
    let coloured = w.run(&["--color", "always", "verify"]);
    coloured.code(1);
    assert!(
        coloured.stdout.contains("\u{1b}["),
        "--color always: {coloured:?}"
    );
    let never = w.run(&["--color", "never", "verify"]);
    assert!(!never.stdout.contains('\u{1b}'));
}

#[test]
fn quiet_lock_prints_nothing() {
    let w = World::new();
    let s = w.scenario("s", &json!({}));
    let r = w.lock_fake("s", &s, &["-q"]);
    r.code(0);
    assert_eq!(r.stderr, "");
    assert_eq!(r.stdout, "");
}

#[test]
fn help_texts() {
    let w = World::new();
    for cmd in ["lock", "verify", "show"] {
        let r = w.run(&[cmd, "--help"]);
        r.code(0);
        snapshot_settings().bind(|| {
            insta::assert_snapshot!(format!("help_{cmd}"), r.stdout);
        });
    }
}

#[test]
fn lockfile_in_a_missing_directory() {
    let w = World::new();
    let s = w.scenario("s", &json!({}));
    let missing = w.path().join("no/such/dir/mcp.lock");
    let out = w
        .bare_cmd()
        .arg("--lockfile")
        .arg(&missing)
        .args(["lock", "--name", "s", "--"])
        .args(fake_argv(&s))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no/such/dir"), "{stderr}");
    assert!(!missing.exists());
}

/// How `lock`, `show` and `verify` find the lockfile without `--lockfile` (SPEC §2).
#[test]
fn lockfile_discovery() {
    let w = World::new();
    if let Some(found) = w
        .path()
        .ancestors()
        .skip(1)
        .map(|d| d.join("mcp.lock"))
        .find(|p| p.is_file())
    {
        eprintln!("skipping: `{}` exists above the temp dir", found.display());
        return;
    }
    let s = w.scenario("s", &json!({}));
    let sub = w.path().join("a/b");
    std::fs::create_dir_all(&sub).unwrap();

    // `lock` creates `./mcp.lock` when none is found.
    let out = w
        .bare_cmd()
        .args(["lock", "--name", "s", "--"])
        .args(fake_argv(&s))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(w.lockfile().is_file());

    // From a subdirectory, the nearest ancestor's `mcp.lock` is used.
    let out = w.bare_cmd().current_dir(&sub).arg("show").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("s\n"));

    // `$MCPSUM_LOCKFILE` wins over the search; `--lockfile` over both.
    let other = w.path().join("other.lock");
    let out = w
        .bare_cmd()
        .env("MCPSUM_LOCKFILE", &other)
        .args(["lock", "--name", "t", "--"])
        .args(fake_argv(&s))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(other.is_file());
    let names = |p: &std::path::Path| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        v["servers"].as_object().unwrap().keys().cloned().collect()
    };
    assert_eq!(names(&w.lockfile()), ["s"]);
    assert_eq!(names(&other), ["t"]);
    let out = w
        .bare_cmd()
        .env("MCPSUM_LOCKFILE", &other)
        .arg("--lockfile")
        .arg(w.lockfile())
        .args(["show", "--json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["servers"].get("s").is_some(), "{doc}");

    // Nothing found: a reading command says so.
    let empty = World::new();
    let out = empty.bare_cmd().arg("verify").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no `mcp.lock` in the current directory or any parent")
    );
}

#[test]
fn lock_without_command_for_a_new_entry_is_refused() {
    let w = World::new();
    w.run(&["lock", "--name", "nothing"]).code(2).stderr_has(&[
        "`nothing` is not in",
        "a command is needed",
        "mcpsum lock --name nothing --",
    ]);
    assert!(!w.lockfile().exists());
}

#[test]
fn closed_stdout_pipe_ends_show_quietly() {
    // `mcpsum show | head -0`: the reader is gone before mcpsum writes; exit 0, no error.
    let w = World::new();
    let s = w.scenario("big", &json!({"generateTools": 1000, "pageSize": 500}));
    w.lock_fake("big", &s, &[]).code(0);
    let mut child = w
        .cmd()
        .arg("show")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("error"),
        "{stderr}"
    );
}

/// `lock --sandbox FILE` validates the policy before the server ever starts (I5: an untrusted
/// server never runs unconfined, not even to be locked), and a refused policy changes nothing.
#[test]
fn invalid_sandbox_file_is_refused_before_the_server_starts() {
    let w = World::new();
    let good = w.scenario("good", &json!({}));
    w.lock_fake("good", &good, &[]).code(0);
    let before = w.lock_bytes();
    let t = w.transcript("s");
    let s = w.scenario("s", &json!({"transcript": t}));
    let cases: [(&str, Option<&str>, &[&str]); 6] = [
        ("missing.json", None, &["cannot read", "missing.json"]),
        (
            "notjson.json",
            Some("{\"filesystem\": "),
            &["notjson.json", "not valid JSON"],
        ),
        (
            "typo.json",
            Some(r#"{"filesytem": {"read": []}, "network": {"allow": []}}"#),
            &["typo.json", "filesytem"],
        ),
        (
            "relative.json",
            Some(r#"{"filesystem": {"read": ["notes"]}, "network": {"allow": []}}"#),
            &[
                "relative.json",
                "filesystem.read[0]: `notes` is not absolute",
            ],
        ),
        (
            "dotdot.json",
            Some(r#"{"filesystem": {"write": ["/tmp/../etc"]}, "network": {"allow": []}}"#),
            &["filesystem.write[0]: `/tmp/../etc` contains `..`"],
        ),
        (
            "badhost.json",
            Some(r#"{"network": {"allow": ["https://example.com"]}}"#),
            &["badhost.json", "network.allow"],
        ),
    ];
    for (file, content, needles) in cases {
        let path = w.path().join(file);
        if let Some(c) = content {
            std::fs::write(&path, c).unwrap();
        }
        let r = w.lock_fake("s", &s, &["--sandbox", &path.display().to_string()]);
        r.code(2).stderr_has(needles);
        assert_eq!(
            crate::support::starts(&t),
            0,
            "{file}: the server never started"
        );
        crate::support::assert_unchanged(&w, &before, file);
    }
}

/// `lock --sandbox FILE` with a rule that is the root of the filesystem, however it is written,
/// refuses the policy before the server starts, like any other problem of the file.
#[test]
fn a_sandbox_rule_that_is_the_root_is_refused_before_the_server_starts() {
    let w = World::new();
    let t = w.transcript("s");
    let s = w.scenario("s", &json!({"transcript": t}));
    let path = w.path().join("root.json");
    std::fs::write(
        &path,
        r#"{"filesystem": {"read": ["//", "/./", "/.."], "write": ["/"]}, "network": {"allow": []}}"#,
    )
    .unwrap();
    let r = w.lock_fake("s", &s, &["--sandbox", &path.display().to_string()]);
    r.code(2).stderr_has(&[
        "(4 problems)",
        "filesystem.read[0]: `//` opens the whole filesystem",
        "filesystem.read[1]: `/./` opens the whole filesystem",
        "filesystem.read[2]: `/..` contains `..`",
        "filesystem.write[0]: `/` opens the whole filesystem",
    ]);
    assert_eq!(crate::support::starts(&t), 0, "the server never started");
    assert!(!w.lockfile().exists());
}

#[test]
fn sandbox_write_path_covering_the_lockfile_is_refused() {
    // The server must not be able to rewrite its own pin. Whether the policy check or the
    // sandbox build refuses it (or the sandbox is unavailable here), the server never runs.
    let w = World::new();
    let good = w.scenario("good", &json!({}));
    w.lock_fake("good", &good, &[]).code(0);
    let before = w.lock_bytes();
    let t = w.transcript("s");
    let s = w.scenario("s", &json!({"transcript": t}));
    let policy = w.path().join("covers.json");
    std::fs::write(
        &policy,
        serde_json::to_vec(
            &json!({"filesystem": {"write": [w.path().display().to_string()]},
                                   "network": {"allow": []}}),
        )
        .unwrap(),
    )
    .unwrap();
    let r = w.lock_fake("s", &s, &["--sandbox", &policy.display().to_string()]);
    r.code(2).stderr_has(&["`s`"]);
    eprintln!("refusal: {}", r.stderr);
    assert_eq!(crate::support::starts(&t), 0, "the server never started");
    crate::support::assert_unchanged(&w, &before, "covering write path");
}

/// `proj/mcp.lock` is a link to `shared/mcp.lock`: `lock` refuses to write it (renaming over the
/// link would replace it and leave the shared file stale; writing through it would let a
/// repository's link aim `lock` at any file, `~/.bashrc` say), before the server starts, and says
/// which path updates the target. Reading through the link still works, and so does the hint.
#[test]
fn lock_refuses_a_symlinked_lockfile() {
    let w = World::new();
    let (s, transcript) = one_tool(&w);
    let (link, target) = linked_lockfile(&w, &s);
    let proj = link.parent().unwrap();
    let before = std::fs::read(&target).unwrap();
    let starts_before = crate::support::starts(&transcript);

    // Found from `proj` without `--lockfile`, and named with it: refused either way.
    let real = target.canonicalize().unwrap();
    for flag in [
        vec![],
        vec!["--lockfile".to_owned(), link.display().to_string()],
    ] {
        let out = w
            .bare_cmd()
            .current_dir(proj)
            .args(flag)
            .args(lock_args("two", &s))
            .output()
            .unwrap();
        Run::from_output(out).code(2).stderr_has(&[
            "mcp.lock`: it is a symbolic link to `../shared/mcp.lock`",
            "mcpsum does not write a lockfile through a link",
            &format!(
                "hint: to update the file it points to, pass `--lockfile {}`",
                real.display()
            ),
            "replace the link with a regular file",
        ]);
    }
    assert!(is_link(&link), "the link is kept");
    assert_eq!(
        std::fs::read(&target).unwrap(),
        before,
        "the target is untouched"
    );
    assert_eq!(
        crate::support::starts(&transcript),
        starts_before,
        "no server started"
    );
    assert!(crate::support::temp_leftovers(proj).is_empty());

    // Reading through the link is fine.
    let out = w
        .bare_cmd()
        .current_dir(proj)
        .arg("verify")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // The hint's path updates the shared file, which the link then shows.
    let out = w
        .bare_cmd()
        .arg("--lockfile")
        .arg(&real)
        .args(lock_args("two", &s))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = w
        .bare_cmd()
        .current_dir(proj)
        .args(["show", "--json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&String> = doc["servers"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["one", "two"]);
    assert!(is_link(&link));
}

/// A dangling link and a link loop: `lock` refuses both without creating anything, and a
/// reading command says what the link is instead of "no such file".
#[test]
fn lock_refuses_dangling_and_looping_lockfile_links() {
    let w = World::new();
    let s = w.scenario("s", &json!({}));
    let link = w.lockfile();

    std::os::unix::fs::symlink("gone/mcp.lock", &link).unwrap();
    w.run(&lock_args("s", &s)).code(2).stderr_has(&[
        "mcp.lock`: it is a symbolic link to `gone/mcp.lock`, which does not exist",
        &format!(
            "hint: to create the file it points to, pass `--lockfile {}`",
            w.path().join("gone/mcp.lock").display()
        ),
    ]);
    assert!(!w.path().join("gone").exists(), "nothing created");
    assert!(is_link(&link));
    w.run(&["show"]).code(2).stderr_has(&[
        "mcp.lock`: it is a symbolic link to `gone/mcp.lock`, which does not exist",
        "hint: point the link at an existing lockfile",
    ]);
    // Found by the search from the working directory too, not passed over as if absent.
    Run::from_output(w.bare_cmd().arg("show").output().unwrap())
        .code(2)
        .stderr_has(&["which does not exist"]);

    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("mcp.lock", &link).unwrap();
    w.run(&lock_args("s", &s)).code(2).stderr_has(&[
        "mcp.lock`: it is a symbolic link to `mcp.lock`, which cannot be resolved",
        "hint: remove the link",
    ]);
    assert!(is_link(&link));
    assert!(crate::support::temp_leftovers(w.path()).is_empty());
}

/// `import` locks through `lock`'s code, so a linked lockfile is refused there too (with or
/// without `--write`): the file the link points to is untouched and the config is not routed.
#[test]
fn import_refuses_a_symlinked_lockfile() {
    let w = World::new();
    let (s, _) = one_tool(&w);
    let (link, target) = linked_lockfile(&w, &s);
    let before = std::fs::read(&target).unwrap();
    let config = w.path().join("servers.mcp.json");
    let argv = fake_argv(&s);
    std::fs::write(
        &config,
        serde_json::to_vec_pretty(
            &json!({"mcpServers": {"notes": {"command": argv[0], "args": argv[1..]}}}),
        )
        .unwrap(),
    )
    .unwrap();
    let config_before = std::fs::read(&config).unwrap();
    for write in [&[][..], &["--write"]] {
        let out = w
            .bare_cmd()
            .arg("--lockfile")
            .arg(&link)
            .arg("import")
            .args(write)
            .arg("--from")
            .arg(&config)
            .output()
            .unwrap();
        Run::from_output(out).code(2).stderr_has(&[
            "mcp.lock`: it is a symbolic link to `../shared/mcp.lock`",
            "mcpsum does not write a lockfile through a link",
            "server `notes` was not locked",
        ]);
        assert_eq!(std::fs::read(&target).unwrap(), before, "{write:?}");
        assert!(is_link(&link));
        assert_eq!(std::fs::read(&config).unwrap(), config_before, "not routed");
    }
}

/// A scenario with one tool that records its starts in a transcript.
fn one_tool(w: &World) -> (std::path::PathBuf, std::path::PathBuf) {
    let transcript = w.transcript("s");
    let s = w.scenario(
        "s",
        &json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}],
                "transcript": transcript.display().to_string()}),
    );
    (s, transcript)
}

/// `shared/mcp.lock` with `one` locked from `scenario`, and `proj/mcp.lock` linking to it as
/// `../shared/mcp.lock`. Returns (link, target).
fn linked_lockfile(
    w: &World,
    scenario: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let shared = w.path().join("shared");
    let proj = w.path().join("proj");
    std::fs::create_dir(&shared).unwrap();
    std::fs::create_dir(&proj).unwrap();
    let out = w
        .bare_cmd()
        .current_dir(&shared)
        .args(lock_args("one", scenario))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let link = proj.join("mcp.lock");
    std::os::unix::fs::symlink("../shared/mcp.lock", &link).unwrap();
    (link, shared.join("mcp.lock"))
}

fn is_link(path: &std::path::Path) -> bool {
    path.symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
}

/// `lock --name NAME -- python3 mcp_fake.py SCENARIO`, without `--lockfile`.
fn lock_args(name: &str, scenario: &std::path::Path) -> Vec<String> {
    let mut args = vec!["lock".into(), "--name".into(), name.into(), "--".into()];
    args.extend(fake_argv(scenario));
    args
}

//! `mcpsum import` through the real binary (issue 8, points 1 and 6): a reader per client on a
//! fixture written from that client's documented format (`tests/fixtures/import/`), the dry run,
//! `--write` then `--undo` byte for byte, environment values never shown, remote entries listed,
//! servers really locked and reachable through the rewritten entries, and the refusals.

use std::path::{Path, PathBuf};
use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::{
    Client, PYTHON, Run, World, example_scenario, fake_server, repo, snapshot_settings, starts,
    transcript_events,
};

/// Each fixture and where a client keeps it: `~` is the test's home, `.` its working directory.
const FIXTURES: [(&str, &str); 8] = [
    (
        "claude_desktop_config.json",
        "~/.config/Claude/claude_desktop_config.json",
    ),
    ("claude-code.mcp.json", "./.mcp.json"),
    ("claude.json", "~/.claude.json"),
    ("cursor-project.mcp.json", "./.cursor/mcp.json"),
    ("cursor-user.mcp.json", "~/.cursor/mcp.json"),
    ("vscode.mcp.json", "./.vscode/mcp.json"),
    ("codex.config.toml", "~/.codex/config.toml"),
    (
        "windsurf.mcp_config.json",
        "~/.codeium/windsurf/mcp_config.json",
    ),
];

/// The lock names the fixtures produce, with each one's passthrough names.
const LOCKED: [(&str, &[&str]); 11] = [
    ("My-Notes-", &[]),
    ("bare", &["BARE_MODE", "BARE_TOKEN"]),
    ("db", &["DATABASE_URL"]),
    ("docs", &["DOCS_TOKEN", "LANG"]),
    ("filesystem", &[]),
    ("memory", &["MEMORY_API_KEY"]),
    ("notes", &["NOTES_TOKEN"]),
    ("notes-cursor", &["NOTES_TOKEN"]),
    ("search", &["SEARCH_KEY"]),
    ("shared", &["SHARED_TOKEN"]),
    ("tracker", &["TRACKER_API_KEY"]),
];

/// A world with every fixture installed where its client looks, running the fake server with a
/// transcript (so a test can count server starts).
struct Setup {
    w: World,
    transcript: PathBuf,
    /// (fixture, installed path, installed bytes)
    files: Vec<(&'static str, PathBuf, Vec<u8>)>,
}

impl Setup {
    fn new() -> Self {
        Self::with(&FIXTURES)
    }

    fn with(fixtures: &[(&'static str, &str)]) -> Self {
        let w = World::new();
        let transcript = w.transcript("fake");
        let mut scenario = example_scenario();
        scenario["transcript"] = json!(transcript.display().to_string());
        let scenario = w.scenario("fake", &scenario);
        // A server started without arguments (Codex's `bare`): a script, as many are.
        let bare = w.path().join("bare-server");
        std::fs::write(
            &bare,
            format!(
                "#!/bin/sh\nexec {PYTHON} {} {}\n",
                fake_server().display(),
                scenario.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&bare, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let mut files = Vec::new();
        for (fixture, place) in fixtures {
            let path = place_path(&w, place);
            let text = std::fs::read_to_string(repo().join("tests/fixtures/import").join(fixture))
                .unwrap()
                .replace("@PYTHON@", PYTHON)
                .replace("@BARE_SERVER@", &bare.display().to_string())
                .replace("@FAKE@", &fake_server().display().to_string())
                .replace("@SCENARIO@", &scenario.display().to_string())
                .replace("@PROJECT@", &w.path().display().to_string());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
            files.push((*fixture, path, text.into_bytes()));
        }
        Self {
            w,
            transcript,
            files,
        }
    }

    fn file(&self, fixture: &str) -> &Path {
        &self.files.iter().find(|f| f.0 == fixture).unwrap().1
    }

    fn read(&self, fixture: &str) -> String {
        std::fs::read_to_string(self.file(fixture)).unwrap()
    }

    /// Asserts every installed file is byte for byte as installed.
    #[track_caller]
    fn assert_files_unchanged(&self, what: &str) {
        for (fixture, path, bytes) in &self.files {
            let now = std::fs::read(path).unwrap();
            assert!(
                now == *bytes,
                "{what}: {fixture} changed\n--- now\n{}",
                String::from_utf8_lossy(&now)
            );
        }
    }

    fn redact(&self, text: &str) -> String {
        let exe = env!("CARGO_BIN_EXE_mcpsum");
        self.w.redact(&text.replace(exe, "[MCPSUM]"))
    }

    fn manifest(&self) -> Value {
        let p = self.w.path().join("state/import-manifest.json");
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    }
}

fn place_path(w: &World, place: &str) -> PathBuf {
    if let Some(rest) = place.strip_prefix("$XDG/") {
        w.path().join("xdg").join(rest)
    } else if let Some(rest) = place.strip_prefix("~/") {
        w.path().join("home").join(rest)
    } else {
        w.path().join(place.strip_prefix("./").unwrap())
    }
}

/// The `--label` of each fake server started so far (`-` for one started without), sorted, with
/// repeats: a legacy server is started twice per lock (the era probe, then `initialize`).
fn started(transcript: &Path) -> Vec<String> {
    let mut out: Vec<String> = transcript_events(transcript)
        .iter()
        .filter(|e| e["event"] == "start")
        .map(|e| {
            let argv: Vec<&str> = e["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            argv.iter()
                .position(|a| *a == "--label")
                .map_or("-".to_owned(), |i| argv[i + 1].to_owned())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Backups (`*.mcpsum-backup-*`) anywhere under `dir`.
fn backups(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(backups(&p));
        } else if e.file_name().to_string_lossy().contains(".mcpsum-backup-") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Every file under `dir`, as text.
fn all_text_under(dir: &Path) -> String {
    let mut out = String::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.push_str(&all_text_under(&p));
        } else {
            out.push_str(&String::from_utf8_lossy(
                &std::fs::read(&p).unwrap_or_default(),
            ));
        }
    }
    out
}

/// No environment value of any fixture (they all say `SECRET`) in `text`.
#[track_caller]
fn assert_no_secret(text: &str, what: &str) {
    assert!(
        !text.contains("SECRET"),
        "{what} shows an environment value or other secret:\n{text}"
    );
}

#[track_caller]
fn assert_run_no_secret(r: &Run, what: &str) {
    assert_no_secret(&r.stdout, &format!("{what} (stdout)"));
    assert_no_secret(&r.stderr, &format!("{what} (stderr)"));
}

#[test]
fn each_reader_on_its_fixture() {
    for client in [
        "claude-desktop",
        "claude-code",
        "cursor",
        "vscode",
        "codex",
        "windsurf",
    ] {
        // A fresh world each: a dry run locks what it finds.
        let s = Setup::new();
        let r = s.w.run(&["import", "--from", client]);
        r.code(0);
        assert_run_no_secret(&r, client);
        snapshot_settings().bind(|| {
            insta::assert_snapshot!(format!("dry_run_{client}"), s.redact(&r.stdout));
        });
    }
    // What each reader must have understood, line by line.
    let s = Setup::new();
    let r = s.w.run(&["import"]);
    r.code(0);
    r.stdout_has(&[
        // Claude Desktop: both stdio servers, env names only.
        "as `notes`; env NOTES_TOKEN",
        "as `filesystem`; no environment",
        // Claude Code: project file, user scope, local scope per project.
        "as `tracker`; env TRACKER_API_KEY",
        "remote  sentry    http server at https://mcp.sentry.example: not supported yet, left as is",
        "left as is: it uses `${SCENARIO_PATH:-",
        "as `search`; env SEARCH_KEY",
        "as `db`; env DATABASE_URL",
        // Cursor: a remote entry by `url`; the clash with Claude Desktop's `notes`.
        "http server at https://docs.example.com: not supported yet",
        "as `notes-cursor`; env NOTES_TOKEN",
        "note: `notes` is taken by `notes` in `",
        // VS Code: JSON with comments, `type`, `inputs`, `envFile`, `${workspaceFolder}`.
        "as `memory`; env MEMORY_API_KEY",
        "remote  github            http server at https://api.githubcopilot.example",
        "remote  legacy-sse        sse server at http://localhost:3001",
        "left as is: it uses `${workspaceFolder}`",
        "left as is: it loads `envFile`",
        // Codex: `env` and `env_vars` names, a disabled entry, a remote one.
        "as `docs`; env DOCS_TOKEN, LANG",
        "as `bare`; env BARE_MODE, BARE_TOKEN",
        "remote  figma  http server at https://mcp.figma.example",
        "skip    off    left as is: it is disabled in this file",
        // Windsurf: `serverUrl`, an invalid lock name, the same server as Cursor's `shared`.
        "http server at https://actions.zapier.example: not supported yet",
        "note: `My Notes!` is not a valid lock name (1-64 of A-Z a-z 0-9 . _ -), so it is locked as `My-Notes-`",
    ]);
    assert_eq!(
        r.stdout.matches("as `shared`; env SHARED_TOKEN").count(),
        2,
        "{}",
        r.stdout
    );
}

#[test]
fn dry_run_locks_and_changes_no_config() {
    let s = Setup::new();
    let r = s.w.run(&["import"]);
    r.code(0);
    assert_run_no_secret(&r, "dry run");
    r.stderr_has(&[
        "locked 11 servers into",
        "dry run: no client config was changed",
        "rewrites 8 files",
    ]);
    // The diff shows the change, with every other string value masked.
    r.stdout_has(&[
        "+++ ",
        &format!("+      \"command\": \"{}\",", env!("CARGO_BIN_EXE_mcpsum")),
        &format!(
            "\"args\": [\"proxy\", \"--name\", \"notes\", \"--lockfile\", \"{}\"],",
            s.w.lockfile().display()
        ),
        "\"NOTES_TOKEN\": \"…\"",
        &format!(
            "+command = \"{}\" # the interpreter, not a shell",
            env!("CARGO_BIN_EXE_mcpsum")
        ),
    ]);
    s.assert_files_unchanged("dry run");
    assert!(
        !s.w.path().join("state/import-manifest.json").exists(),
        "the dry run wrote a manifest"
    );
    assert_eq!(backups(s.w.path()), Vec::<PathBuf>::new());
    // The servers are locked: what the diff routes to is there, and verifies clean.
    let lock: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.w.lockfile()).unwrap()).unwrap();
    assert_eq!(lock["servers"].as_object().unwrap().len(), 11, "{lock:#}");
    assert_no_secret(&lock.to_string(), "the lockfile");
    let starts_after_dry_run = starts(&s.transcript);
    assert!(starts_after_dry_run >= 11, "the dry run locked no server");
    s.w.run(&["verify"]).code(0);
    // `--write` then reuses those entries: no server starts again.
    let before = starts(&s.transcript);
    s.w.run(&["import", "--write"]).code(0);
    assert_eq!(
        starts(&s.transcript),
        before,
        "--write re-locked dry-run entries"
    );
}

#[test]
fn write_then_undo_is_byte_identical() {
    let s = Setup::new();
    let r = s.w.run(&["import", "--write"]);
    r.code(0);
    assert_run_no_secret(&r, "import --write");
    r.stderr_has(&["routed 12 servers in 8 files through mcpsum"]);

    // Every stdio server is locked (two configs share `shared`), with its env names.
    assert_eq!(
        started(&s.transcript),
        [
            "-",
            "code-local-db",
            "code-tracker",
            "code-user-search",
            "codex-docs",
            "cursor-notes",
            "desktop-filesystem",
            "desktop-notes",
            "shared",
            "vscode-memory",
            "windsurf-notes"
        ]
    );

    let lock = s.w.lock_json();
    let servers = lock["servers"].as_object().unwrap();
    let got: Vec<(String, Value)> = servers
        .iter()
        .map(|(n, e)| (n.clone(), e["envPassthrough"].clone()))
        .collect();
    let want: Vec<(String, Value)> = LOCKED
        .iter()
        .map(|(n, env)| ((*n).to_owned(), json!(env)))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        servers["notes"]["command"],
        json!([
            PYTHON,
            fake_server().display().to_string(),
            s.w.path().join("fake.json").display().to_string(),
            "--label",
            "desktop-notes"
        ])
    );
    assert_eq!(servers["notes"]["tools"].as_array().unwrap().len(), 2);
    s.w.run(&["verify"]).code(0);
    let starts_so_far = starts(&s.transcript);

    // Each file: only command and args changed; snapshots show the whole file.
    for (fixture, _, _) in &s.files {
        let text = s.read(fixture);
        snapshot_settings().bind(|| {
            insta::assert_snapshot!(format!("written_{fixture}"), s.redact(&text));
        });
    }
    // Backups hold the files as they were, with the same mode.
    assert_eq!(backups(s.w.path()).len(), 8);
    for (fixture, path, bytes) in &s.files {
        let prefix = format!(
            "{}.mcpsum-backup-",
            path.file_name().unwrap().to_string_lossy()
        );
        let mine: Vec<PathBuf> = backups(path.parent().unwrap())
            .into_iter()
            .filter(|b| {
                b.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&prefix)
            })
            .collect();
        assert_eq!(mine.len(), 1, "backups of {fixture}: {mine:?}");
        assert!(
            std::fs::read(&mine[0]).unwrap() == *bytes,
            "backup of {fixture}"
        );
        assert_eq!(
            std::fs::metadata(&mine[0]).unwrap().permissions(),
            std::fs::metadata(path).unwrap().permissions()
        );
    }
    // The manifest records the run, never a value.
    let manifest = s.manifest();
    assert_eq!(manifest["imports"].as_array().unwrap().len(), 1);
    assert_eq!(manifest["imports"][0]["files"].as_array().unwrap().len(), 8);
    assert_no_secret(
        &all_text_under(&s.w.path().join("state")),
        "the state directory",
    );
    assert_no_secret(&String::from_utf8_lossy(&s.w.lock_bytes()), "the lockfile");

    // A second run finds everything routed: nothing changes, nothing is recorded.
    let written: Vec<Vec<u8>> = s
        .files
        .iter()
        .map(|f| std::fs::read(&f.1).unwrap())
        .collect();
    let again = s.w.run(&["import", "--write"]);
    again.code(0);
    again.stderr_has(&["nothing to rewrite: every stdio server is already routed"]);
    again.stdout_has(&[
        "routed  notes",
        "already runs through mcpsum (`--name notes`)",
    ]);
    for (f, before) in s.files.iter().zip(&written) {
        assert!(
            std::fs::read(&f.1).unwrap() == *before,
            "second run changed {}",
            f.0
        );
    }
    assert_eq!(s.manifest()["imports"].as_array().unwrap().len(), 1);
    assert_eq!(
        starts(&s.transcript),
        starts_so_far,
        "the second run started servers"
    );

    // Undo: every file back byte for byte, backups gone, the record popped.
    let u = s.w.run(&["import", "--undo"]);
    u.code(0);
    u.stderr_has(&["restored `", "the lock entries in `"]);
    s.assert_files_unchanged("after --undo");
    assert_eq!(backups(s.w.path()), Vec::<PathBuf>::new());
    assert_eq!(s.manifest()["imports"], json!([]));
    let none = s.w.run(&["import", "--undo"]);
    none.code(2);
    none.stderr_has(&["nothing to undo", "hint:"]);
}

#[test]
fn remote_entries_are_listed_and_never_changed() {
    let s = Setup::new();
    s.w.run(&["import", "--write"]).code(0);
    let remote = |fixture: &str, pointer: &str| -> Value {
        let text = s.read(fixture);
        let v: Value = serde_json::from_str(&text).unwrap();
        v.pointer(pointer).cloned().unwrap()
    };
    assert_eq!(
        remote("claude-code.mcp.json", "/mcpServers/sentry"),
        json!({"type": "http", "url": "https://mcp.sentry.example/mcp", "headers": {"Authorization": "Bearer SECRET-code-sentry"}})
    );
    assert_eq!(
        remote("cursor-project.mcp.json", "/mcpServers/remote-docs/url"),
        json!("https://docs.example.com/mcp/SECRET-path-key")
    );
    assert_eq!(
        remote("windsurf.mcp_config.json", "/mcpServers/zapier"),
        json!({"serverUrl": "https://actions.zapier.example/mcp/SECRET-zapier-key/sse"})
    );
    let codex = s.read("codex.config.toml");
    assert!(codex.contains(
        "[mcp_servers.figma]\nurl = \"https://mcp.figma.example/mcp\"\nbearer_token_env_var = \"FIGMA_OAUTH_TOKEN\"\n"
    ));
    assert!(s.read("vscode.mcp.json").contains(
        "\"legacy-sse\": { \"type\": \"sse\", \"url\": \"http://localhost:3001/sse\" },"
    ));
}

/// Runs a rewritten entry the way its client would and asks for the tools.
#[test]
fn a_rewritten_entry_serves_the_locked_server() {
    let s = Setup::with(&[FIXTURES[4]]);
    s.w.run(&["import", "--write"]).code(0);
    let config: Value = serde_json::from_str(&s.read("cursor-user.mcp.json")).unwrap();
    let entry = &config["mcpServers"]["notes"];
    assert_eq!(entry["command"], json!(env!("CARGO_BIN_EXE_mcpsum")));
    let args: Vec<String> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    // The client sets the entry's `env` for mcpsum (it never changed), plus its own basics.
    let mut cmd = Command::new(entry["command"].as_str().unwrap());
    cmd.args(&args)
        .env_clear()
        .env("NOTES_TOKEN", "value-set-by-the-client")
        .env("MCPSUM_STATE_DIR", s.w.path().join("state"))
        .current_dir(s.w.path().join("home"));
    let mut client = Client::spawn(cmd, None).with_version("2025-11-25");
    let init = client.hello();
    assert_eq!(
        init["result"]["serverInfo"]["name"], "example-notes",
        "{init}"
    );
    let tools = client.request_next("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add", "echo"]);
    client.finish();
}

#[test]
fn undo_refuses_a_file_changed_since_the_import() {
    let s = Setup::with(&[FIXTURES[0], FIXTURES[4], FIXTURES[6]]);
    s.w.run(&["import", "--write"]).code(0);
    let desktop = s.file("claude_desktop_config.json").to_path_buf();
    let codex = s.file("codex.config.toml").to_path_buf();
    let written_codex = std::fs::read(&codex).unwrap();
    // The client (or you) edits a file after the import.
    let mut edited = std::fs::read_to_string(&desktop).unwrap();
    edited = edited.replace("\"Ctrl+Space\"", "\"Alt+Space\"");
    std::fs::write(&desktop, &edited).unwrap();

    let r = s.w.run(&["import", "--undo"]);
    r.code(2);
    r.stderr_has(&[
        "cannot undo the import of",
        &format!(
            "`{}` changed since the import; its backup is `",
            desktop.display()
        ),
        "hint: nothing was restored",
    ]);
    assert_run_no_secret(&r, "refused undo");
    // Nothing restored: not even the files that did not change.
    assert!(std::fs::read(&codex).unwrap() == written_codex);
    assert_eq!(std::fs::read_to_string(&desktop).unwrap(), edited);
    assert_eq!(backups(s.w.path()).len(), 3);

    // Put that file back by hand from its backup: undo then finishes the rest.
    let backup = backups(desktop.parent().unwrap()).pop().unwrap();
    std::fs::copy(&backup, &desktop).unwrap();
    let u = s.w.run(&["import", "--undo"]);
    u.code(0);
    u.stderr_has(&["it was already as before the import"]);
    s.assert_files_unchanged("undo after a hand restore");
    assert_eq!(backups(s.w.path()), Vec::<PathBuf>::new());
}

#[test]
fn a_server_that_cannot_be_locked_is_left_as_it_is() {
    let s = Setup::with(&[]);
    let path = s.w.path().join("home/.cursor/mcp.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let scenario = s.w.path().join("fake.json");
    let text = format!(
        "{{\n  \"mcpServers\": {{\n    \"good\": {{\"command\": \"{PYTHON}\", \"args\": [\"{}\", \"{}\"]}},\n    \"broken\": {{\"command\": \"/nonexistent/mcp-server\", \"args\": [\"--stdio\"]}}\n  }}\n}}\n",
        fake_server().display(),
        scenario.display()
    );
    std::fs::write(&path, &text).unwrap();
    let r = s.w.run(&["import", "--write"]);
    r.code(2);
    r.stderr_has(&[
        "cannot lock server `broken`",
        "import did not finish: 1 problem",
        "server `broken` was not locked",
    ]);
    let after: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(after["mcpServers"]["good"]["args"][0], "proxy");
    assert_eq!(
        after["mcpServers"]["broken"],
        json!({"command": "/nonexistent/mcp-server", "args": ["--stdio"]})
    );
    let lock = s.w.lock_json();
    assert_eq!(
        lock["servers"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["good"]
    );
    s.w.run(&["import", "--undo"]).code(0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn lockfile_entries_are_reused_or_not_overwritten() {
    let s = Setup::with(&[FIXTURES[6]]);
    let scenario = s.w.path().join("fake.json");
    // `docs` already locked with another command: the import must not replace it.
    s.w.lock_fake("docs", &scenario, &[]).code(0);
    let per_lock = starts(&s.transcript);
    // `bare` already locked exactly as Codex runs it: used as it is, not started again.
    let bare = s.w.path().join("bare-server").display().to_string();
    s.w.run(&[
        "lock",
        "--name",
        "bare",
        "--env",
        "BARE_MODE",
        "--env",
        "BARE_TOKEN",
        "--",
        &bare,
    ])
    .code(0);
    assert_eq!(starts(&s.transcript), 2 * per_lock);
    let docs_before = s.w.lock_json()["servers"]["docs"].clone();

    let r = s.w.run(&["import", "--write", "--from", "codex"]);
    r.code(0);
    r.stdout_has(&[
        "note: `docs` is taken by the lockfile's entry, which runs another command or environment, so this one is locked as `docs-codex`",
        "already in the lockfile as `bare` with this command",
    ]);
    let lock = s.w.lock_json();
    assert_eq!(lock["servers"]["docs"], docs_before);
    assert!(lock["servers"]["docs-codex"].is_object());
    assert_eq!(started(&s.transcript), ["-", "codex-docs"]);
    assert_eq!(
        starts(&s.transcript),
        3 * per_lock,
        "only docs-codex is started"
    );
    let codex = s.read("codex.config.toml");
    assert!(codex.contains("\"--name\", \"docs-codex\""), "{codex}");
    assert!(codex.contains("\"--name\", \"bare\""), "{codex}");
}

#[test]
fn from_a_path_and_bad_sources() {
    let s = Setup::with(&[]);
    let scenario = s.w.path().join("fake.json");
    let custom = s.w.path().join("team-servers.json");
    std::fs::write(
        &custom,
        format!(
            "{{\"mcpServers\": {{\"t\": {{\"command\": \"{PYTHON}\", \"args\": [\"{}\", \"{}\"], \"env\": {{\"T\": \"SECRET-t\"}}}}}}}}",
            fake_server().display(),
            scenario.display()
        ),
    )
    .unwrap();
    let r = s.w.run(&["import", "--from", "team-servers.json"]);
    r.code(0);
    r.stdout_has(&["config file: ", "as `t`; env T"]);
    assert_run_no_secret(&r, "--from PATH");

    let none = s.w.run(&["import"]);
    none.code(2);
    none.stderr_has(&[
        "found no MCP client config to import",
        "looked for `",
        ".cursor/mcp.json`",
        "hint: name a client or a file with `--from`",
    ]);
    let bad = s.w.run(&["import", "--from", "emacs"]);
    bad.code(2);
    bad.stderr_has(&[
        "`emacs` is neither a client nor a file",
        "hint: `--from` takes",
    ]);

    std::fs::write(
        &custom,
        "{\"mcpServers\": {\"t\": {\"command\": \"x\", \"env\": {\"K\": \"SECRET-k\"}}",
    )
    .unwrap();
    let broken = s.w.run(&["import", "--from", "team-servers.json"]);
    broken.code(2);
    broken.stderr_has(&["cannot read the config `", "on line 1"]);
    assert_run_no_secret(&broken, "a broken file");
    let env = s.w.run(&["import", "--env", "NOT-A-NAME"]);
    env.code(2);
    env.stderr_has(&["`--env` takes variable names"]);
}

#[test]
fn help_text() {
    let w = World::new();
    let r = w.run(&["import", "--help"]);
    r.code(0);
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("help_import", r.stdout);
    });
}

#[test]
fn a_symlinked_private_config_stays_a_symlink_and_private() {
    use std::os::unix::fs::PermissionsExt;
    let s = Setup::with(&[FIXTURES[4]]);
    // Dotfiles kept elsewhere and linked in, with a private mode (the file holds tokens).
    let link = s.file("cursor-user.mcp.json").to_path_buf();
    let real = s.w.path().join("dotfiles/cursor-mcp.json");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::rename(&link, &real).unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    let original = std::fs::read(&real).unwrap();

    s.w.run(&["import", "--write"]).code(0);
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    assert!(
        std::fs::read_to_string(&link)
            .unwrap()
            .contains("\"proxy\"")
    );
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&real), 0o600);
    let backup = backups(real.parent().unwrap())
        .pop()
        .expect("backup beside the real file");
    assert_eq!(mode(&backup), 0o600);

    s.w.run(&["import", "--undo"]).code(0);
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    assert!(std::fs::read(&real).unwrap() == original);
    assert_eq!(mode(&real), 0o600);
}

// ----- issue 21: user-level configs lock into the user-level lockfile -----

/// `mcpsum ARGS` without `--lockfile`, from `cwd`, with `XDG_CONFIG_HOME` set to the world's
/// `xdg` folder when `xdg` is true (else the default, `~/.config`).
fn bare(s: &Setup, cwd: &Path, xdg: bool, args: &[&str]) -> Run {
    let mut c = s.w.bare_cmd();
    if xdg {
        c.env("XDG_CONFIG_HOME", s.w.path().join("xdg"));
    }
    c.current_dir(cwd).args(args);
    Run::from_output(c.output().expect("run mcpsum"))
}

fn server_names(lockfile: &Path) -> Vec<String> {
    let v: Value = serde_json::from_slice(
        &std::fs::read(lockfile).unwrap_or_else(|e| panic!("`{}`: {e}", lockfile.display())),
    )
    .unwrap();
    v["servers"].as_object().unwrap().keys().cloned().collect()
}

/// The `--lockfile` value of a rewritten JSON entry.
fn routed_lockfile(s: &Setup, fixture: &str, pointer: &str) -> String {
    let v: Value = serde_json::from_str(&s.read(fixture)).unwrap();
    let args = v.pointer(pointer).unwrap()["args"]
        .as_array()
        .unwrap()
        .clone();
    let i = args.iter().position(|a| a == "--lockfile").unwrap();
    args[i + 1].as_str().unwrap().to_owned()
}

/// Every fixture where its client keeps it, Claude Desktop's under `$XDG_CONFIG_HOME`.
const FIXTURES_XDG: [(&str, &str); 8] = [
    (
        "claude_desktop_config.json",
        "$XDG/Claude/claude_desktop_config.json",
    ),
    FIXTURES[1],
    FIXTURES[2],
    FIXTURES[3],
    FIXTURES[4],
    FIXTURES[5],
    FIXTURES[6],
    FIXTURES[7],
];

/// Issue 21: without `--lockfile`, the servers of project configs are locked into the
/// project's `mcp.lock` and those of user-level configs (Claude Desktop's, `~/.claude.json`,
/// `~/.cursor/mcp.json`, Codex's, Windsurf's) into `$XDG_CONFIG_HOME/mcpsum/mcp.lock`, which
/// their rewritten entries name; both are said before they are written; the proxy of a
/// user-level entry serves from anywhere; `verify` outside a project points at the user-level
/// lockfile; `--undo` restores every file of both scopes.
#[test]
fn user_level_configs_lock_into_the_user_lockfile() {
    let s = Setup::with(&FIXTURES_XDG);
    let project = s.w.path().to_path_buf();
    let project_lock = project.join("mcp.lock");
    let user_lock = project.join("xdg/mcpsum/mcp.lock");

    let r = bare(&s, &project, true, &["import"]);
    r.code(0);
    let note_project = format!(
        "note: locking 3 servers of project configs into `{}` now; the client configs are not changed without `--write`",
        project_lock.display()
    );
    let note_user = format!(
        "note: locking 9 servers of user-level configs into `{}` now; the client configs are not changed without `--write`",
        user_lock.display()
    );
    r.stderr_has(&[
        &note_project,
        &note_user,
        &format!(
            "locked 3 servers into `{}`, locked 9 servers into `{}`; dry run: no client config was changed",
            project_lock.display(),
            user_lock.display()
        ),
    ]);
    // Said before it happens: the notes come before the first server is locked.
    let first_lock = r.stderr.find("locked `").expect("a lock summary");
    assert!(
        r.stderr.find(&note_user).unwrap() < first_lock,
        "{}",
        r.stderr
    );
    r.stdout_has(&[&format!(
        "Cursor: {}\n  a user-level config: its servers go into `{}`",
        s.file("cursor-user.mcp.json").display(),
        user_lock.display()
    )]);
    assert_eq!(server_names(&project_lock), ["memory", "shared", "tracker"]);
    assert_eq!(
        server_names(&user_lock),
        [
            "My-Notes-",
            "bare",
            "db",
            "docs",
            "filesystem",
            "notes",
            "notes-cursor",
            "search",
            "shared"
        ]
    );
    s.assert_files_unchanged("dry run");

    // `--write` reuses the entries and routes each file to its own lockfile.
    let r = bare(&s, &project, true, &["import", "--write"]);
    r.code(0);
    r.stderr_has(&[&format!(
        "routed 12 servers in 8 files through mcpsum (lockfiles `{}` (project configs) and `{}` (user-level configs))",
        project_lock.display(),
        user_lock.display()
    )]);
    assert_eq!(
        routed_lockfile(&s, "cursor-user.mcp.json", "/mcpServers/notes"),
        user_lock.display().to_string()
    );
    assert_eq!(
        routed_lockfile(&s, "cursor-project.mcp.json", "/mcpServers/shared"),
        project_lock.display().to_string()
    );
    assert_eq!(
        routed_lockfile(&s, "claude_desktop_config.json", "/mcpServers/filesystem"),
        user_lock.display().to_string()
    );
    let manifest = s.manifest();
    assert_eq!(
        manifest["imports"].as_array().unwrap().len(),
        1,
        "{manifest:#}"
    );

    // The rewritten user-level entry runs from any folder: it names its lockfile.
    let config: Value = serde_json::from_str(&s.read("cursor-user.mcp.json")).unwrap();
    let entry = &config["mcpServers"]["notes"];
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let mut cmd = Command::new(entry["command"].as_str().unwrap());
    cmd.args(&args)
        .env_clear()
        .env("NOTES_TOKEN", "value-set-by-the-client")
        .env("MCPSUM_STATE_DIR", s.w.path().join("state"))
        .current_dir("/");
    let mut client = Client::spawn(cmd, None).with_version("2025-11-25");
    let init = client.hello();
    assert_eq!(
        init["result"]["serverInfo"]["name"], "example-notes",
        "{init}"
    );
    client.finish();

    // Outside any project, a reading command names the user-level lockfile.
    let r = bare(&s, Path::new("/"), true, &["verify"]);
    r.code(2);
    r.stderr_has(&[&format!(
        "the servers imported from user-level client configs are in `{}`: pass `--lockfile {}`",
        user_lock.display(),
        user_lock.display()
    )]);
    let lock_arg = user_lock.display().to_string();
    bare(
        &s,
        Path::new("/"),
        true,
        &["--lockfile", &lock_arg, "verify"],
    )
    .code(0);

    // `--undo` puts every file back, of both scopes, and names both lockfiles.
    let r = bare(&s, &project, true, &["import", "--undo"]);
    r.code(0);
    r.stderr_has(&[&format!(
        "the lock entries in `{}` and `{}` are kept",
        project_lock.display(),
        user_lock.display()
    )]);
    s.assert_files_unchanged("after --undo");
    assert_eq!(backups(s.w.path()), Vec::<PathBuf>::new());
}

/// Without `XDG_CONFIG_HOME` the user-level lockfile is `~/.config/mcpsum/mcp.lock`, also for
/// a user-level file named with `--from`, and also when `import` runs in the home folder
/// (whose `.cursor/mcp.json` is Cursor's user-level config, not a project's).
#[test]
fn the_user_lockfile_defaults_to_the_config_folder() {
    let s = Setup::with(&[FIXTURES[4]]);
    let home = s.w.path().join("home");
    let user_lock = home.join(".config/mcpsum/mcp.lock");
    let cursor = s.file("cursor-user.mcp.json").display().to_string();
    for (i, cwd) in [s.w.path().to_path_buf(), home.clone()].iter().enumerate() {
        let r = bare(&s, cwd, false, &["import", "--from", &cursor]);
        r.code(0);
        if i == 0 {
            r.stderr_has(&[&format!(
                "note: locking 1 server of user-level configs into `{}` now",
                user_lock.display()
            )]);
        } else {
            r.stdout_has(&["already in the lockfile as `notes` with this command"]);
        }
        assert_eq!(server_names(&user_lock), ["notes"]);
        assert!(!cwd.join("mcp.lock").exists(), "{}", cwd.display());
    }
    let r = bare(&s, &home, false, &["import", "--write"]);
    r.code(0);
    assert_eq!(
        routed_lockfile(&s, "cursor-user.mcp.json", "/mcpServers/notes"),
        user_lock.display().to_string()
    );
    bare(&s, &home, false, &["import", "--undo"]).code(0);
    s.assert_files_unchanged("after --undo");
}

/// Issue 21: `import` locks the servers it found at once, as `lock --all` does: each fake server
/// waits before reading anything, and all three have started before any of them is spoken to
/// (one after the other, the first would be spoken to before the second starts). All land.
#[test]
fn import_locks_the_servers_at_once() {
    let w = World::new();
    let transcript = w.transcript("slow");
    let mut scenario = example_scenario();
    scenario["transcript"] = json!(transcript.display().to_string());
    scenario["startDelayMs"] = json!(3000);
    let scenario = w.scenario("slow", &scenario);
    let servers: serde_json::Map<String, Value> = ["a", "b", "c"]
        .iter()
        .map(|label| {
            (
                (*label).to_owned(),
                json!({"command": PYTHON, "args": [
                    fake_server().display().to_string(),
                    scenario.display().to_string(),
                    "--label",
                    label
                ]}),
            )
        })
        .collect();
    std::fs::create_dir_all(w.path().join(".cursor")).unwrap();
    std::fs::write(
        w.path().join(".cursor/mcp.json"),
        serde_json::to_vec_pretty(&json!({ "mcpServers": servers })).unwrap(),
    )
    .unwrap();
    let r = w.run(&["import", "--from", "cursor"]);
    r.code(0);
    let events = transcript_events(&transcript);
    let first_recv = events
        .iter()
        .position(|e| e["event"] == "recv")
        .unwrap_or_else(|| panic!("no server was spoken to: {events:#?}"));
    let mut started: Vec<String> = events[..first_recv]
        .iter()
        .filter(|e| e["event"] == "start")
        .filter_map(|e| {
            let argv = e["argv"].as_array()?;
            let i = argv.iter().position(|a| a == "--label")?;
            Some(argv[i + 1].as_str()?.to_owned())
        })
        .collect();
    started.sort();
    started.dedup();
    assert_eq!(started, ["a", "b", "c"], "{events:#?}");
    let lock = w.lock_json();
    let names: Vec<&String> = lock["servers"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["a", "b", "c"]);
}

//! Learn mode (#18) through the real binary, as root and as `nobody`: `mcpsum proxy --learn`
//! watches `tests/it/sandbox/learn_server.py` read a project, write into a folder, create a
//! folder, run a script, read `~/.ssh` and fetch over HTTPS from a loopback test host;
//! `mcpsum sandbox suggest` proposes a policy (the key warned about and left out); the
//! proposal is locked in and the same calls then work through the sandboxed proxy while what
//! the server never touched stays out of reach. `sandbox test` notes what a policy would
//! refuse of what was observed. A link the server makes, removes or renames onto grants its own
//! folder, never its target's, and `~/.local/bin` is never proposed.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::sandbox::{Sbx, escape_call, helper, kernel_lacks, policy, session, skip, users};

/// The learn server's argv.
fn learn_argv() -> Vec<String> {
    vec![
        crate::support::PYTHON.to_owned(),
        helper("learn_server.py").display().to_string(),
    ]
}

/// A loopback HTTPS host with a certificate for `localhost` and `127.0.0.1`: (child, port,
/// CA file). `None` when `openssl` is missing.
fn https_host(w: &Sbx) -> Option<(Child, u16, String)> {
    if !Path::new("/usr/bin/openssl").exists() {
        assert!(
            !crate::support::real_servers_required(),
            "`openssl` is missing: the HTTPS host cannot be made (MCPSUM_REQUIRE_REAL_SERVERS=1)"
        );
        return None;
    }
    let (cert, key) = (w.s("data/ca.pem"), w.root.join("key.pem"));
    let ok = Command::new("/usr/bin/openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "openssl could not make the test certificate");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(crate::support::PYTHON)
        .arg(helper("https_server.py"))
        .arg(&cert)
        .arg(&key)
        .args(["127.0.0.1", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the HTTPS host");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the HTTPS host did not start");
    w.chown();
    Some((child, port, cert))
}

/// The world's files: a project (a git repository), a folder the server writes into, a
/// script it runs, and files it never touches.
fn layout(w: &Sbx) {
    for d in ["data/proj/.git", "data/proj/src", "data/out", "data/bin"] {
        std::fs::create_dir_all(w.p(d)).unwrap();
    }
    std::fs::write(w.p("data/proj/src/main.txt"), "project source").unwrap();
    std::fs::write(w.p("data/proj/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(w.p("data/untouched.txt"), "UNTOUCHED").unwrap();
    let tool = w.p("data/bin/tool.sh");
    std::fs::write(&tool, "#!/bin/sh\necho tool-ran\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.chown();
}

/// A call of the learn server, as a step of the SDK client's plan.
fn call(tool: &str, args: Value) -> Value {
    json!({"op": "call", "name": tool, "arguments": args})
}

/// The learn server's JSON answer of step `i` of an SDK client's run.
fn answer(r: &Value, i: usize) -> Value {
    let text = crate::sandbox::first_text(&r["steps"][i]);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("step {i}: not JSON ({e}): {r:#}"))
}

/// The calls of one session (read a project, write into a folder, make a folder there, run a
/// script, fetch over HTTPS when there is a host), as SDK client steps.
fn exercise(w: &Sbx, port: Option<u16>) -> Vec<Value> {
    let mut steps = vec![
        call("read", json!({"path": w.s("data/proj/src/main.txt")})),
        call(
            "write",
            json!({"path": w.s("data/out/report.txt"), "text": "written"}),
        ),
        call("mkdir", json!({"path": w.s("data/out/cache")})),
        call("run", json!({"argv": [w.s("data/bin/tool.sh")]})),
    ];
    if let Some(port) = port {
        steps.push(call(
            "fetch",
            json!({"url": format!("https://localhost:{port}/learned")}),
        ));
    }
    steps
}

/// Checks the answers of [`exercise`]'s steps.
fn check_exercise(r: &Value, port: Option<u16>, ctx: &str) {
    assert_eq!(answer(r, 0)["value"], "project source", "{ctx}: {r:#}");
    assert_eq!(answer(r, 1)["ok"], json!(true), "{ctx}: {r:#}");
    assert_eq!(answer(r, 2)["ok"], json!(true), "{ctx}: {r:#}");
    assert_eq!(
        answer(r, 3)["value"]["stdout"],
        "tool-ran\n",
        "{ctx}: {r:#}"
    );
    if port.is_some() {
        assert_eq!(answer(r, 4)["value"]["status"], json!(200), "{ctx}: {r:#}");
    }
}

fn audit_events(w: &Sbx) -> Vec<Value> {
    std::fs::read_to_string(w.p("state/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// Locks `learn_server.py` as server `learn`, sandboxed to read only its own script, passing
/// `env`; false (after saying why) when the sandbox cannot be built on this kernel.
fn lock_learner(w: &Sbx, env: &[&str]) -> bool {
    let first = policy(&[helper("learn_server.py").display().to_string()], &[], &[]);
    let r = w.run(&w.lock_args("learn", &first, env, &learn_argv()));
    if let Some(why) = kernel_lacks(&r) {
        skip(&why);
        return false;
    }
    r.code(0);
    true
}

#[test]
fn learn_suggest_paste_and_run_sandboxed() {
    use crate::sandbox::sdk_client;
    if crate::support::test_dep("venv/bin/python").is_none() {
        return;
    }
    for uid in users() {
        let mut w = Sbx::new(uid);
        layout(&w);
        let https = https_host(&w);
        if https.is_none() {
            eprintln!("`openssl` is missing: learning without the HTTPS host");
        }
        let port = https.as_ref().map(|h| h.1);
        if let Some((_, _, ca)) = &https {
            w.extra_env.push(("SSL_CERT_FILE".into(), ca.clone()));
        }
        let ctx = format!("uid {uid}");
        // Locked under a first policy that grants only the server's own script.
        if !lock_learner(&w, &["SSL_CERT_FILE"]) {
            return;
        }

        // 1. Learn: the server runs unrestricted while its tree is watched.
        let mut steps = exercise(&w, port);
        steps.push(call("read", json!({"path": w.s("home/.ssh/id_ed25519")})));
        let r = sdk_client(
            &w,
            &w.argv(&["proxy", "--name", "learn", "--learn"]),
            json!(steps),
        );
        check_exercise(&r, port, &format!("{ctx}, learning"));
        assert_eq!(
            answer(&r, steps.len() - 1)["value"],
            "SECRET-SSH-KEY",
            "{ctx}: learning is not sandboxed: {r:#}"
        );
        let events = audit_events(&w);
        assert!(
            events
                .iter()
                .any(|e| e["event"] == "learn" && e["server"] == "learn"),
            "{ctx}: the audit log marks the learning session: {events:?}"
        );
        let observed = std::fs::read_to_string(w.p("state/learn/learn.jsonl")).unwrap();
        for (what, needle) in [
            ("the project read", w.s("data/proj/src/main.txt")),
            ("the folder made", w.s("data/out/cache")),
            ("the script run", w.s("data/bin/tool.sh")),
        ] {
            assert!(
                observed.contains(&needle),
                "{ctx}: {what} is observed:\n{observed}"
            );
        }
        assert!(observed.contains(r#""op":"exec""#), "{ctx}: {observed}");

        // 4. `sandbox test` notes what the first policy would refuse of it.
        let r = w.run(&["sandbox", "test", "--name", "learn"]);
        assert!(
            r.stdout.contains("learn mode: this policy would refuse"),
            "{ctx}: {}",
            r.stdout
        );
        assert!(r.stdout.contains(&w.s("data/out")), "{ctx}: {}", r.stdout);
        assert!(
            r.stdout.contains("some of these may stay refused"),
            "{ctx}: the hint does not promise to grant all of it: {}",
            r.stdout
        );

        // 2. The proposal.
        let text = w.run(&["sandbox", "suggest", "--name", "learn"]);
        text.code(0);
        assert!(
            text.stderr.contains(".ssh") && text.stderr.contains("looks secret"),
            "{ctx}: the key is warned about: {}",
            text.stderr
        );
        assert!(
            text.stdout.contains("a git repository"),
            "{ctx}: entries are explained: {}",
            text.stdout
        );
        let r = w.run(&["sandbox", "suggest", "--name", "learn", "--json"]);
        r.code(0);
        let proposal: Value = serde_json::from_str(&r.stdout)
            .unwrap_or_else(|e| panic!("{ctx}: not JSON ({e}): {}", r.stdout));
        let read = strings(&proposal["filesystem"]["read"]);
        let write = strings(&proposal["filesystem"]["write"]);
        let allow = strings(&proposal["network"]["allow"]);
        assert!(read.contains(&w.s("data/proj")), "{ctx}: {proposal}");
        assert!(read.contains(&w.s("data/bin/tool.sh")), "{ctx}: {proposal}");
        assert_eq!(write, [w.s("data/out")], "{ctx}: {proposal}");
        assert!(!r.stdout.contains(".ssh"), "{ctx}: no secret in the JSON");
        assert!(
            !read.iter().chain(&write).any(|p| p == "/"
                || *p == w.s("home")
                || *p == w.s("data")
                || p.starts_with("/usr")),
            "{ctx}: nothing wide, nothing of the base: {proposal}"
        );
        match port {
            Some(port) => {
                assert!(
                    allow.contains(&format!("localhost:{port}")),
                    "{ctx}: {proposal}"
                );
                assert!(
                    allow.contains(&format!("127.0.0.1:{port}")),
                    "{ctx}: {proposal}"
                );
            }
            None => assert!(allow.is_empty(), "{ctx}: {proposal}"),
        }

        // 3. Pasted in (locked with it), it passes `sandbox test`, and the same calls work
        // sandboxed; what the server never touched is out of reach.
        let r = w.run(&w.lock_args("learn", &proposal, &["SSL_CERT_FILE"], &learn_argv()));
        r.code(0);
        let r = w.run(&["sandbox", "test", "--name", "learn", "--json"]);
        assert_eq!(r.code, 0, "{ctx}: {}\n{}", r.stdout, r.stderr);
        let doc: Value = serde_json::from_str(&r.stdout).unwrap();
        let refused = strings(&doc["learned"]["refused"]);
        assert!(
            !refused
                .iter()
                .any(|l| l.contains(&w.s("data/")) || l.starts_with("connect")),
            "{ctx}: the proposal grants what was observed: {refused:?}"
        );
        let mut steps = exercise(&w, port);
        let first_probe = steps.len();
        let out_of_reach = [
            w.s("home/.ssh/id_ed25519"),
            w.s("data/untouched.txt"),
            w.s("outside/secret.txt"),
        ];
        for p in &out_of_reach {
            steps.push(call("read", json!({"path": p})));
        }
        steps.push(call(
            "write",
            json!({"path": w.s("data/proj/src/main.txt"), "text": "x"}),
        ));
        let r = sdk_client(&w, &w.argv(&["proxy", "--name", "learn"]), json!(steps));
        check_exercise(&r, port, &format!("{ctx}, sandboxed"));
        for (i, p) in out_of_reach.iter().enumerate() {
            let a = answer(&r, first_probe + i);
            assert_eq!(a["ok"], json!(false), "{ctx}: `{p}` is out of reach: {a}");
        }
        let a = answer(&r, first_probe + out_of_reach.len());
        assert_eq!(
            a["ok"],
            json!(false),
            "{ctx}: a read path is not writable: {a}"
        );

        // Observations add up until `--reset`.
        let r = w.run(&["sandbox", "suggest", "--name", "learn", "--reset"]);
        r.code(0);
        assert!(!w.p("state/learn/learn.jsonl").exists(), "{ctx}");
        let r = w.run(&["sandbox", "suggest", "--name", "learn"]);
        assert_eq!(r.code, 2, "{ctx}: {}", r.stderr);
        assert!(r.stderr.contains("--learn"), "{ctx}: {}", r.stderr);
        if let Some((mut child, _, _)) = https {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `@modelcontextprotocol/server-filesystem` through the real Python SDK client: learned
/// while it reads a file and writes into its folder, the proposal locked in, then the same
/// calls work sandboxed and the folder it was also given but never used stays out of reach.
#[test]
fn filesystem_server_learned_then_sandboxed_through_the_sdk() {
    use crate::sandbox::{first_text, nobody_can_run, sdk_client};
    use crate::support::test_dep;
    let Some(index) =
        test_dep("node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
    else {
        return;
    };
    if test_dep("venv/bin/python").is_none() {
        return;
    }
    for uid in users() {
        let w = Sbx::new(uid);
        std::fs::create_dir(w.p("allowed")).unwrap();
        std::fs::write(w.p("allowed/hello.txt"), "hello inside").unwrap();
        w.chown();
        if uid != 0 && !nobody_can_run(&["/usr/bin/test", "-r", &index.display().to_string()]) {
            eprintln!("skipping uid {uid}: it cannot read `{}`", index.display());
            continue;
        }
        let ctx = format!("uid {uid}");
        // Told two folders; it only ever uses `allowed`.
        let argv = vec![
            "/usr/bin/node".to_owned(),
            index.display().to_string(),
            w.s("allowed"),
            w.s("outside"),
        ];
        let mut lock = vec!["lock", "--name", "fs", "--"];
        lock.extend(argv.iter().map(String::as_str));
        w.run(&lock).code(0);
        let read = |path: String| json!({"op": "call", "name": "read_text_file", "arguments": {"path": path}});
        let steps = |n: &str| {
            json!([
                read(w.s("allowed/hello.txt")),
                {"op": "call", "name": "write_file",
                 "arguments": {"path": w.s(&format!("allowed/{n}.txt")), "content": "written"}},
            ])
        };
        let r = sdk_client(
            &w,
            &w.argv(&["proxy", "--name", "fs", "--learn"]),
            steps("one"),
        );
        assert_eq!(first_text(&r["steps"][0]), "hello inside", "{ctx}: {r:#}");
        assert_eq!(
            std::fs::read_to_string(w.p("allowed/one.txt")).unwrap_or_default(),
            "written",
            "{ctx}: {r:#}"
        );

        let r = w.run(&["sandbox", "suggest", "--name", "fs", "--json"]);
        r.code(0);
        let proposal: Value = serde_json::from_str(&r.stdout).unwrap();
        let write = strings(&proposal["filesystem"]["write"]);
        let read_set = strings(&proposal["filesystem"]["read"]);
        assert_eq!(write, [w.s("allowed")], "{ctx}: {proposal}");
        let real_index = std::fs::canonicalize(&index).unwrap();
        assert!(
            read_set
                .iter()
                .any(|p| real_index.starts_with(p) && p.ends_with("node_modules")),
            "{ctx}: the package tree (`node_modules`) is readable: {proposal}"
        );
        assert!(
            !read_set.iter().any(|p| p.contains("outside")),
            "{ctx}: {proposal}"
        );
        assert_eq!(proposal["network"]["allow"], json!([]), "{ctx}: {proposal}");

        let r = w.run(&w.lock_args("fs", &proposal, &[], &argv));
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        w.run(&["sandbox", "test", "--name", "fs"]).code(0);
        let mut sandboxed = steps("two");
        sandboxed
            .as_array_mut()
            .unwrap()
            .push(read(w.s("outside/secret.txt")));
        let r = sdk_client(&w, &w.argv(&["proxy", "--name", "fs"]), sandboxed);
        let s = &r["steps"];
        assert_eq!(first_text(&s[0]), "hello inside", "{ctx}: {r:#}");
        assert_eq!(
            std::fs::read_to_string(w.p("allowed/two.txt")).unwrap_or_default(),
            "written",
            "{ctx}: {r:#}"
        );
        assert!(
            s[2]["result"]["isError"] == json!(true)
                && !first_text(&s[2]).contains("OUTSIDE-SECRET"),
            "{ctx}: the folder it never used is out of reach: {}",
            s[2]
        );
    }
}

/// A learning server's tree still ends with the proxy, even a `SIGKILL`ed one: the guard that
/// records is the guard that reaps.
#[test]
fn a_learning_server_tree_dies_with_the_proxy() {
    for uid in users() {
        let w = Sbx::new(uid);
        let mut lock = vec![
            "lock".to_owned(),
            "--name".into(),
            "learn".into(),
            "--".into(),
        ];
        lock.extend(learn_argv());
        w.run(&lock).code(0);
        let mut s = session(
            w.command(&["proxy", "--name", "learn", "--learn"]),
            w.p("learn.stderr"),
        );
        let r = escape_call(
            &mut s,
            "run",
            json!({"argv": ["/bin/sh", "-c", "/usr/bin/sleep 297 >/dev/null 2>&1 & echo $!"]}),
        );
        let pid: i32 = r["value"]["stdout"]
            .as_str()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or_else(|| panic!("uid {uid}: no pid: {r}"));
        let alive = || {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with(b"/usr/bin/sleep"))
                && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .unwrap_or_default()
                    .rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        };
        assert!(alive(), "uid {uid}: the child runs");
        s.child.kill().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while alive() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(
            !alive(),
            "uid {uid}: the learning server's child outlived the proxy"
        );
    }
}

/// `git` run on `repo` as this world's user: its stdout.
fn git(w: &Sbx, repo: &str, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "safe.directory=*",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t.invalid",
        ])
        .arg("-C")
        .arg(w.p(repo))
        .args(args)
        .env("HOME", w.p("home"))
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The real `mcp-server-git` through the real Python SDK client: learned while it reads a
/// repository (`git_status`, `git_log`) and stages a file (`git_add` writes `.git/index`), the
/// proposal locked in, then the same calls work sandboxed while a repository it never used,
/// `~/.ssh` with the key committed in it, stays out of reach.
#[test]
fn git_server_learned_then_sandboxed_through_the_sdk() {
    use crate::sandbox::{first_text, nobody_can_run, sdk_client};
    use crate::support::test_dep;
    let Some(server) = test_dep("venv/bin/mcp-server-git") else {
        return;
    };
    if test_dep("venv/bin/python").is_none() {
        return;
    }
    let server = server.display().to_string();
    // The venv's interpreter may live under `/root` (closed to `nobody`): then `nobody` runs
    // the same installed package with the system Python of the same minor version.
    let lib = test_dep("venv/lib").expect("the venv has its `lib`");
    let site = std::fs::read_dir(&lib)
        .unwrap()
        .map(|e| e.unwrap().path().join("site-packages"))
        .find(|p| p.join("mcp_server_git").is_dir())
        .expect("mcp-server-git is in the venv's site-packages")
        .display()
        .to_string();
    let by_system_python = vec![
        crate::support::PYTHON.to_owned(),
        "-c".to_owned(),
        format!(
            "import sys; sys.path.insert(0, {site:?}); from mcp_server_git import main; main()"
        ),
    ];
    for uid in users() {
        let w = Sbx::new(uid);
        let argv = if uid == 0 || nobody_can_run(&[&server, "--help"]) {
            vec![server.clone()]
        } else {
            let mut help = by_system_python.clone();
            help.push("--help".to_owned());
            let help: Vec<&str> = help.iter().map(String::as_str).collect();
            if !nobody_can_run(&help) {
                eprintln!("skipping uid {uid}: it cannot run `mcp-server-git`");
                continue;
            }
            by_system_python.clone()
        };
        let ctx = format!("uid {uid}");
        std::fs::create_dir(w.p("data/repo")).unwrap();
        std::fs::write(w.p("data/repo/README.md"), "a repository\n").unwrap();
        git(&w, "data/repo", &["init", "-q", "-b", "main"]);
        git(&w, "data/repo", &["add", "README.md"]);
        git(&w, "data/repo", &["commit", "-q", "-m", "first commit"]);
        // A key kept in git: readable through the server unless the sandbox closes it.
        git(&w, "home/.ssh", &["init", "-q", "-b", "main"]);
        git(&w, "home/.ssh", &["add", "id_ed25519"]);
        git(&w, "home/.ssh", &["commit", "-q", "-m", "keys"]);
        for f in ["one.txt", "two.txt"] {
            std::fs::write(w.p(&format!("data/repo/{f}")), "new\n").unwrap();
        }
        w.chown();
        let mut lock = vec!["lock", "--name", "git", "--"];
        lock.extend(argv.iter().map(String::as_str));
        w.run(&lock).code(0);
        let repo = w.s("data/repo");
        let steps = |f: &str| {
            json!([
                {"op": "call", "name": "git_status", "arguments": {"repo_path": repo}},
                {"op": "call", "name": "git_log", "arguments": {"repo_path": repo, "max_count": 5}},
                {"op": "call", "name": "git_add", "arguments": {"repo_path": repo, "files": [f]}},
            ])
        };
        let check = |r: &Value, f: &str| {
            let s = &r["steps"];
            for i in 0..3 {
                assert_ne!(s[i]["result"]["isError"], json!(true), "{ctx}: {r:#}");
            }
            assert!(first_text(&s[0]).contains("one.txt"), "{ctx}: {r:#}");
            assert!(first_text(&s[1]).contains("first commit"), "{ctx}: {r:#}");
            let staged = git(&w, "data/repo", &["diff", "--cached", "--name-only"]);
            assert!(staged.lines().any(|l| l == f), "{ctx}: {staged:?} {r:#}");
        };
        let r = sdk_client(
            &w,
            &w.argv(&["proxy", "--name", "git", "--learn"]),
            steps("one.txt"),
        );
        check(&r, "one.txt");

        let r = w.run(&["sandbox", "suggest", "--name", "git", "--json"]);
        r.code(0);
        let proposal: Value = serde_json::from_str(&r.stdout).unwrap();
        let write = strings(&proposal["filesystem"]["write"]);
        let read_set = strings(&proposal["filesystem"]["read"]);
        assert_eq!(
            write,
            [format!("{repo}/.git")],
            "{ctx}: it writes into the repository's `.git` only: {proposal}"
        );
        assert!(
            r.stderr.contains("`.git/hooks` and `.git/config`"),
            "{ctx}: the grant of the hooks is warned about: {}",
            r.stderr
        );
        assert!(
            read_set
                .iter()
                .chain(&write)
                .any(|p| repo.starts_with(p.as_str())),
            "{ctx}: the repository is readable: {proposal}"
        );
        for secret in w.secrets() {
            assert!(
                !read_set
                    .iter()
                    .chain(&write)
                    .any(|p| secret.starts_with(p.as_str())),
                "{ctx}: `{secret}` is not proposed: {proposal}"
            );
        }
        assert_eq!(proposal["network"]["allow"], json!([]), "{ctx}: {proposal}");

        let r = w.run(&w.lock_args("git", &proposal, &[], &argv));
        if let Some(why) = kernel_lacks(&r) {
            return skip(&why);
        }
        r.code(0);
        w.run(&["sandbox", "test", "--name", "git"]).code(0);
        let mut sandboxed = steps("two.txt");
        sandboxed.as_array_mut().unwrap().push(json!(
            {"op": "call", "name": "git_show",
             "arguments": {"repo_path": w.s("home/.ssh"), "revision": "HEAD"}}
        ));
        let r = sdk_client(&w, &w.argv(&["proxy", "--name", "git"]), sandboxed);
        check(&r, "two.txt");
        let s = &r["steps"][3];
        assert!(
            s["result"]["isError"] == json!(true) && !s.to_string().contains("SECRET-SSH-KEY"),
            "{ctx}: the repository it never used (`~/.ssh`) is out of reach: {s}"
        );
    }
}

/// Issue 21: `sandbox suggest --write` shows the change to the entry's `policy` as a diff, then
/// merges the proposal into `policy.sandbox` (the entries already there stay) with an atomic
/// write; the merged policy passes `sandbox test`; a second `--write` writes nothing; a signed
/// lockfile is then said to need `mcpsum sign`.
#[test]
fn sandbox_suggest_write_merges_the_proposal_into_the_entry() {
    let uid = users()[0];
    let w = Sbx::new(uid);
    layout(&w);
    let ctx = format!("uid {uid}");
    let script = helper("learn_server.py").display().to_string();
    let first = policy(std::slice::from_ref(&script), &[], &[]);
    let r = w.run(&w.lock_args("learn", &first, &[], &learn_argv()));
    if let Some(why) = kernel_lacks(&r) {
        return skip(&why);
    }
    r.code(0);
    {
        let mut s = session(
            w.command(&["proxy", "--name", "learn", "--learn"]),
            w.p("learn.stderr"),
        );
        for step in exercise(&w, None) {
            let name = step["name"].as_str().unwrap();
            let a = escape_call(&mut s, name, step["arguments"].clone());
            assert_eq!(a["ok"], json!(true), "{ctx}, learning: {name}: {a}");
        }
    }
    // Signed, so that the write is seen to leave the signature behind.
    let key = w.p("signer");
    let keygen = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .expect("run ssh-keygen");
    assert!(keygen.success(), "ssh-keygen failed");
    w.chown();
    w.run(&["sign", "--key", &key.display().to_string()])
        .code(0);

    let before = std::fs::read(w.lockfile()).unwrap();
    let r = w.run(&["sandbox", "suggest", "--name", "learn"]);
    r.code(0);
    assert!(
        r.stdout.contains("--write` to merge it in"),
        "{ctx}: {}",
        r.stdout
    );
    assert_eq!(
        std::fs::read(w.lockfile()).unwrap(),
        before,
        "{ctx}: no --write, no edit"
    );

    let r = w.run(&["sandbox", "suggest", "--name", "learn", "--write"]);
    r.code(0);
    let out = w.s("data/out");
    r.stdout_has(&[
        &format!("servers.learn.policy of `{}`:", w.lockfile().display()),
        "  @@ ",
        &format!("  +        \"{out}\""),
        &format!("  +        \"{}\"", w.s("data/bin/tool.sh")),
        &format!("  -        \"{script}\"\n"),
    ]);
    r.stderr_has(&[
        "added to `servers.learn.policy.sandbox` of `",
        &format!("write `{out}`"),
        &format!("read `{}`", w.s("data/proj")),
        "check it with `mcpsum sandbox test --name learn`",
        "no longer matches it; review the change, then run `mcpsum sign`",
    ]);
    let lock = w.lock_json();
    let sandbox = &lock["servers"]["learn"]["policy"]["sandbox"];
    let read = strings(&sandbox["filesystem"]["read"]);
    assert_eq!(
        read[0], script,
        "{ctx}: the kept entry stays first: {sandbox}"
    );
    assert!(read.contains(&w.s("data/proj")), "{ctx}: {sandbox}");
    assert!(read.contains(&w.s("data/bin/tool.sh")), "{ctx}: {sandbox}");
    assert_eq!(strings(&sandbox["filesystem"]["write"]), [out], "{ctx}");
    assert_eq!(sandbox["network"]["allow"], json!([]), "{ctx}: {sandbox}");
    assert!(
        !serde_json::to_string(sandbox).unwrap().contains(".ssh"),
        "{ctx}: no secret merged in"
    );
    w.run(&["verify"]).code(0);
    let doc: Value = serde_json::from_str(
        &w.run(&["sandbox", "test", "--name", "learn", "--json"])
            .stdout,
    )
    .unwrap();
    assert_eq!(doc["passed"], json!(true), "{ctx}: {doc:#}");
    let refused = strings(&doc["learned"]["refused"]);
    assert!(
        !refused.iter().any(|l| l.contains(&w.s("data/"))),
        "{ctx}: the merged policy grants what was observed: {refused:?}"
    );

    // Everything proposed is granted now: nothing to write.
    let merged = std::fs::read(w.lockfile()).unwrap();
    let r = w.run(&["sandbox", "suggest", "--name", "learn", "--write", "--json"]);
    r.code(0);
    assert!(
        serde_json::from_str::<Value>(&r.stdout).is_ok(),
        "{ctx}: {}",
        r.stdout
    );
    r.stderr_has(&["already grants everything proposed; nothing written"]);
    assert_eq!(std::fs::read(w.lockfile()).unwrap(), merged, "{ctx}");
}

/// Observations add up across learning sessions; a `mkdir -p` of folders that exist (EEXIST)
/// proposes no write; folders only listed (`/etc`, `~/.config`, `~/.local/share`, which hold
/// `shadow`, `gh/hosts.yml` and a keyring) and what the server makes in a temporary folder of
/// its own are left out, so after pasting the proposal none of those secrets is readable.
#[test]
fn learning_adds_up_and_listings_mkdir_p_and_temporaries_grant_nothing() {
    for uid in users() {
        let w = Sbx::new(uid);
        layout(&w);
        std::fs::create_dir_all(w.p("home/.config/gh")).unwrap();
        std::fs::write(w.p("home/.config/gh/hosts.yml"), "oauth_token: SECRET-GH").unwrap();
        std::fs::write(w.p("data/log.txt"), "").unwrap();
        w.chown();
        let append = |line: &str| {
            let script = format!("echo {line} >> {}", w.s("data/log.txt"));
            json!({"argv": ["/bin/sh", "-c", script]})
        };
        let ctx = format!("uid {uid}");
        if !lock_learner(&w, &[]) {
            return;
        }
        let learn = |calls: &[(&str, Value)], log: &str| {
            let mut s = session(
                w.command(&["proxy", "--name", "learn", "--learn"]),
                w.p(log),
            );
            calls
                .iter()
                .map(|(tool, args)| escape_call(&mut s, tool, args.clone()))
                .collect::<Vec<_>>()
        };
        let made_tmp = "import os, tempfile; d = tempfile.mkdtemp(dir='/tmp'); \
                        os.mkdir(d + '/sub'); open(d + '/sub/f.txt', 'w').write('x'); print(d)";
        let one = learn(
            &[
                ("read", json!({"path": w.s("data/proj/src/main.txt")})),
                ("run", json!({"argv": ["/bin/mkdir", "-p", "/usr/share"]})),
                ("read", json!({"path": "/etc"})),
                ("read", json!({"path": w.s("home/.config")})),
                ("read", json!({"path": w.s("home/.local/share")})),
                (
                    "run",
                    json!({"argv": [crate::support::PYTHON, "-c", made_tmp]}),
                ),
                ("run", append("learning")),
            ],
            "one.stderr",
        );
        for (i, a) in one.iter().enumerate() {
            assert_eq!(a["ok"], json!(true), "{ctx}: call {i}: {a}");
        }
        let made = one[5]["value"]["stdout"]
            .as_str()
            .unwrap()
            .trim()
            .to_owned();
        assert!(made.starts_with("/tmp/"), "{ctx}: {made}");
        // A second session: its observations join the first one's.
        let two = learn(
            &[("read", json!({"path": w.s("data/readme.txt")}))],
            "two.stderr",
        );
        assert_eq!(two[0]["value"], "readable data", "{ctx}: {two:?}");

        let r = w.run(&["sandbox", "suggest", "--name", "learn", "--json"]);
        r.code(0);
        let proposal: Value = serde_json::from_str(&r.stdout).unwrap();
        let read = strings(&proposal["filesystem"]["read"]);
        let write = strings(&proposal["filesystem"]["write"]);
        assert!(read.contains(&w.s("data/proj")), "{ctx}: {proposal}");
        assert!(
            read.contains(&w.s("data/readme.txt")),
            "{ctx}: the second session adds up: {proposal}"
        );
        assert_eq!(
            write,
            [w.s("data/log.txt")],
            "{ctx}: only the file it appended to, which existed: {proposal}"
        );
        let shadow = "/etc/shadow".to_owned();
        let gh = w.s("home/.config/gh/hosts.yml");
        let keyring = w.s("home/.local/share/keyrings/login.keyring");
        for p in read.iter().chain(&write) {
            for never in [&shadow, &gh, &keyring, &made] {
                assert!(
                    !Path::new(never).starts_with(p),
                    "{ctx}: `{p}` would grant `{never}`: {proposal}"
                );
            }
            assert!(
                !p.starts_with("/usr") && !p.starts_with(&made),
                "{ctx}: {proposal}"
            );
        }

        let text = w.run(&["sandbox", "suggest", "--name", "learn"]);
        text.code(0);
        assert!(
            text.stderr.contains("listed the folders"),
            "{ctx}: the listings are noted: {}",
            text.stderr
        );
        // Pasted in: what it used works, the secrets it only listed the folders of stay closed.
        w.run(&w.lock_args("learn", &proposal, &[], &learn_argv()))
            .code(0);
        let mut s = session(w.command(&["proxy", "--name", "learn"]), w.p("sbx.stderr"));
        let a = escape_call(&mut s, "read", json!({"path": w.s("data/readme.txt")}));
        assert_eq!(a["value"], "readable data", "{ctx}: {a}");
        let a = escape_call(&mut s, "run", append("sandboxed"));
        assert_eq!(a["value"]["status"], json!(0), "{ctx}: {a}");
        assert_eq!(
            std::fs::read_to_string(w.p("data/log.txt")).unwrap(),
            "learning\nsandboxed\n",
            "{ctx}"
        );
        let a = escape_call(
            &mut s,
            "write",
            json!({"path": w.s("data/beside.txt"), "text": "x"}),
        );
        assert_eq!(a["ok"], json!(false), "{ctx}: nothing beside it: {a}");
        for p in [shadow.as_str(), gh.as_str(), keyring.as_str()] {
            let a = escape_call(&mut s, "read", json!({"path": p}));
            assert_eq!(a["ok"], json!(false), "{ctx}: `{p}` is out of reach: {a}");
        }
    }
}

/// Links: what the server does to a link (`ln -s`, `rm`, `ln -sf`, which renames a new link
/// onto it) grants the link's own folder, never its target's; a file appended to through a link
/// grants that file (what the sandbox checks). A program it puts in `~/.local/bin` is warned
/// about and never proposed, and `sandbox test` then notes that the policy refuses it.
#[test]
fn links_grant_their_own_folder_and_code_folders_are_never_proposed() {
    for uid in users() {
        let w = Sbx::new(uid);
        layout(&w);
        for d in ["data/tmpl", "data/target", "data/other", "home/.local/bin"] {
            std::fs::create_dir_all(w.p(d)).unwrap();
        }
        std::fs::write(w.p("data/target/f"), "").unwrap();
        std::fs::write(w.p("data/other/g"), "").unwrap();
        std::os::unix::fs::symlink(w.p("data/target/f"), w.p("data/out/through")).unwrap();
        w.chown();
        let ctx = format!("uid {uid}");
        if !lock_learner(&w, &[]) {
            return;
        }
        let (f, g, lnk) = (
            w.s("data/target/f"),
            w.s("data/other/g"),
            w.s("data/tmpl/lnk"),
        );
        let sh = |script: String| json!({"argv": ["/bin/sh", "-c", script]});
        let links = sh(format!(
            "ln -s {f} {lnk} && rm {lnk} && ln -s {f} {lnk} && ln -sf {g} {lnk}"
        ));
        let through = sh(format!("echo x >> {}", w.s("data/out/through")));
        let tool = sh(format!("touch {}", w.s("home/.local/bin/tool")));
        let mut s = session(
            w.command(&["proxy", "--name", "learn", "--learn"]),
            w.p("learn.stderr"),
        );
        for args in [&links, &through, &tool] {
            let a = escape_call(&mut s, "run", args.clone());
            assert_eq!(a["value"]["status"], json!(0), "{ctx}: {args}: {a}");
        }
        drop(s);

        let r = w.run(&["sandbox", "suggest", "--name", "learn", "--json"]);
        r.code(0);
        let proposal: Value = serde_json::from_str(&r.stdout).unwrap();
        let write = strings(&proposal["filesystem"]["write"]);
        assert_eq!(
            write,
            [w.s("data/target/f"), w.s("data/tmpl")],
            "{ctx}: the link's folder, the file written through a link, nothing of `~/.local/bin`: {proposal}"
        );
        assert!(
            r.stderr.contains("outside any sandbox") && r.stderr.contains(".local/bin"),
            "{ctx}: {}",
            r.stderr
        );

        w.run(&w.lock_args("learn", &proposal, &[], &learn_argv()))
            .code(0);
        let t = w.run(&["sandbox", "test", "--name", "learn"]);
        assert!(
            t.stdout.contains(".local/bin") && t.stdout.contains("`tool`"),
            "{ctx}: the note names what the policy refuses: {}",
            t.stdout
        );
        let note = t.stdout.split("learn mode:").nth(1).unwrap_or_default();
        assert!(
            note.contains("refuse 1 thing") && !note.contains("tmpl"),
            "{ctx}: {note}"
        );
        let mut s = session(w.command(&["proxy", "--name", "learn"]), w.p("sbx.stderr"));
        let a = escape_call(&mut s, "run", sh(format!("ln -sf {f} {lnk}")));
        assert_eq!(a["value"]["status"], json!(0), "{ctx}: {a}");
        let a = escape_call(&mut s, "run", through.clone());
        assert_eq!(a["value"]["status"], json!(0), "{ctx}: {a}");
        let a = escape_call(
            &mut s,
            "run",
            sh(format!("touch {}", w.s("data/other/new"))),
        );
        assert_ne!(
            a["value"]["status"],
            json!(0),
            "{ctx}: the links' targets' folders stay closed: {a}"
        );
        assert_eq!(
            std::fs::read_to_string(w.p("data/target/f")).unwrap(),
            "x\nx\n"
        );
    }
}

/// What the server names (a Unix socket's path, a `CONNECT` target) reaches `sandbox suggest`'s
/// output escaped: a newline in it cannot forge a line of the review.
#[test]
fn suggest_escapes_what_the_server_named() {
    let w = Sbx::new(crate::sandbox::current_uid());
    let first = policy(&[helper("learn_server.py").display().to_string()], &[], &[]);
    w.run(&w.lock_args("learn", &first, &[], &learn_argv()))
        .code(0);
    std::fs::create_dir_all(w.p("state/learn")).unwrap();
    let lines = [
        json!({"op": "unix", "path": "/run/agent.sock\nFORGED: all clear \u{1b}[2K"}),
        json!({"op": "host", "target": "evil.example:443\nFORGED: host ok", "resolved": []}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(w.p("state/learn/learn.jsonl"), text).unwrap();
    w.chown();
    let r = w.run(&["sandbox", "suggest", "--name", "learn"]);
    r.code(0);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(
        !all.lines().any(|l| l.starts_with("FORGED")) && !all.contains('\u{1b}'),
        "{all}"
    );
    assert!(all.contains("agent.sock\\nFORGED"), "{all}");
}

/// A write rule on a system folder (`/opt`, `/var/lib`) is the person's to make, but `lock`
/// warns about it; a folder of its own below one is not warned about.
#[test]
fn lock_warns_about_a_write_rule_on_a_system_folder() {
    let w = Sbx::new(crate::sandbox::current_uid());
    let script = helper("learn_server.py").display().to_string();
    let wide = policy(
        std::slice::from_ref(&script),
        &["/opt".to_owned(), "/var/lib".to_owned()],
        &[],
    );
    let r = w.run(&w.lock_args("learn", &wide, &[], &learn_argv()));
    if let Some(why) = kernel_lacks(&r) {
        return skip(&why);
    }
    r.code(0);
    for key in ["filesystem.write[0]", "filesystem.write[1]"] {
        assert!(
            r.stderr
                .lines()
                .any(|l| l.contains(key) && l.contains("system folder")),
            "{key}: {}",
            r.stderr
        );
    }
    let narrow = policy(&[script], &[w.s("data")], &[]);
    let r = w.run(&w.lock_args("learn", &narrow, &[], &learn_argv()));
    r.code(0);
    assert!(!r.stderr.contains("system folder"), "{}", r.stderr);
}

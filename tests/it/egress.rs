//! The egress proxy (issue 6) end to end, as root and as `nobody`: test hosts live in network
//! namespaces this test creates (a veth pair between a "client" namespace, where `mcpsum` runs,
//! and a "server" namespace serving HTTPS with a certificate made here), so no address outside
//! loopback and these namespaces is ever used. `mcpsum` resolves names itself: it runs inside its
//! own mount namespace with a bind-mounted `/etc/hosts` mapping the test names.
//!
//! The sandboxed server is `tests/it/sandbox/escape_server.py`: Python `urllib` (honouring
//! `HTTPS_PROXY`, trusting the test CA through the passed-through `SSL_CERT_FILE`) and raw
//! sockets for the hostile cases. Needs root (`ip netns`), `unshare`, `openssl`; skips with a
//! printed reason otherwise, unless `MCPSUM_REQUIRE_SANDBOX=1`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::sandbox::{
    Sbx, command_of, current_uid, escape_argv, escape_call, helper, kernel_lacks, policy,
    run_output, session, skip, users,
};

static NEXT: AtomicU32 = AtomicU32::new(0);

fn tool(name: &str) -> bool {
    ["/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/"]
        .iter()
        .any(|d| Path::new(&format!("{d}{name}")).exists())
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .expect("run a set-up command");
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two network namespaces joined by a veth pair: `cli` (10.77.N.1, where mcpsum runs) and `srv`
/// (10.77.N.2, the HTTPS host). Removed, with the server, on drop.
struct Net {
    cli: String,
    srv: String,
    host_ip: String,
    /// The /24 of both namespaces (`10.77.N`).
    prefix: String,
    https: Option<Child>,
}

impl Net {
    /// `None` (after a printed skip) when this machine cannot build test hosts.
    fn new() -> Option<Self> {
        if current_uid() != 0 {
            skip("egress tests need root to create network namespaces (`ip netns add`)");
            return None;
        }
        for t in ["ip", "unshare", "openssl", "mount"] {
            if !tool(t) {
                skip(&format!("`{t}` is not installed"));
                return None;
            }
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let net = Self {
            cli: format!("mcpsum-it-{pid}-{n}-cli"),
            srv: format!("mcpsum-it-{pid}-{n}-srv"),
            host_ip: format!("10.77.{}.2", n % 250),
            prefix: format!("10.77.{}", n % 250),
            https: None,
        };
        let (va, vb) = (format!("mv{pid:x}x{n}a"), format!("mv{pid:x}x{n}b"));
        sh(&["ip", "netns", "add", &net.cli]);
        sh(&["ip", "netns", "add", &net.srv]);
        sh(&[
            "ip", "link", "add", &va, "netns", &net.cli, "type", "veth", "peer", "name", &vb,
            "netns", &net.srv,
        ]);
        let cli_ip = format!("10.77.{}.1/24", n % 250);
        let srv_ip = format!("{}/24", net.host_ip);
        for (ns, dev, ip) in [(&net.cli, &va, &cli_ip), (&net.srv, &vb, &srv_ip)] {
            sh(&["ip", "-n", ns, "addr", "add", ip, "dev", dev]);
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        let second = format!("{}/24", net.second_ip());
        sh(&["ip", "-n", &net.srv, "addr", "add", &second, "dev", &vb]);
        Some(net)
    }

    /// Makes a certificate for the test names and the host IP, and serves HTTPS on 443 in `srv`.
    /// Returns the certificate (the CA the sandboxed client trusts).
    fn serve_https(&mut self, dir: &Path) -> PathBuf {
        let (cert, key) = (dir.join("ca.pem"), dir.join("key.pem"));
        let san = format!(
            "subjectAltName=DNS:good.test,DNS:other.test,DNS:loop.test,DNS:api.good.test,\
             DNS:private.test,IP:{}",
            self.host_ip
        );
        sh(&[
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=good.test",
            "-addext",
            &san,
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ]);
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.srv, crate::support::PYTHON])
            .arg(helper("https_server.py"))
            .args([&cert, &key])
            .args(["0.0.0.0", "443"])
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
        self.https = Some(child);
        cert
    }

    /// A second address of the test host, never listed in a policy.
    fn second_ip(&self) -> String {
        format!("{}.3", self.prefix)
    }

    /// `/etc/hosts` for mcpsum: names on the test host's two addresses, one on loopback.
    fn hosts(&self, dir: &Path) -> PathBuf {
        let p = dir.join("hosts");
        std::fs::write(
            &p,
            format!(
                "127.0.0.1 localhost\n{ip} good.test other.test api.good.test\n\
                 {ip2} private.test\n127.0.0.1 loop.test\n",
                ip = self.host_ip,
                ip2 = self.second_ip(),
            ),
        )
        .unwrap();
        p
    }

    /// `argv` run in `cli`, in a fresh mount namespace whose `/etc/hosts` is `hosts`.
    fn wrap(&self, hosts: &Path, argv: &[String]) -> Vec<String> {
        let mut v: Vec<String> = [
            "ip",
            "netns",
            "exec",
            &self.cli,
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            r#"mount --bind "$0" /etc/hosts && exec "$@""#,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        v.push(hosts.display().to_string());
        v.extend(argv.iter().cloned());
        v
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        if let Some(mut c) = self.https.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.cli, &self.srv] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The `egress` records of the audit log.
fn egress_records(w: &Sbx) -> Vec<Value> {
    let mut v: Vec<Value> = std::fs::read_to_string(w.p("state/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["event"] == "egress")
        .collect();
    v.sort_by_key(|r| r["conn"].as_u64().unwrap_or(0));
    v
}

fn wait_records(w: &Sbx, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = egress_records(w);
        if r.len() >= n || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A world, its network, and the `web` server locked with `allow` (inside the namespaces).
fn setup(uid: u32, allow: &[&str]) -> Option<(Sbx, Net, PathBuf)> {
    let mut net = Net::new()?;
    let mut w = Sbx::new(uid);
    let ca = net.serve_https(&w.root);
    let hosts = net.hosts(&w.root);
    w.chown();
    w.extra_env
        .push(("SSL_CERT_FILE".into(), ca.display().to_string()));
    let allow: Vec<String> = allow
        .iter()
        .map(|a| a.replace("HOSTIP", &net.host_ip))
        .collect();
    let pol = policy(
        &[helper("").display().to_string(), ca.display().to_string()],
        &[],
        &allow,
    );
    let args = w.lock_args("web", &pol, &["SSL_CERT_FILE"], &escape_argv());
    let r = run_output(&mut command_of(&net.wrap(&hosts, &w.argv(&args)), &w.root));
    if let Some(why) = kernel_lacks(&r) {
        skip(&why);
        return None;
    }
    assert_eq!(r.code, 0, "uid {uid}: lock failed: {r:#?}");
    Some((w, net, hosts))
}

#[test]
fn egress_allows_listed_hosts_and_refuses_the_rest() {
    for uid in users() {
        let Some((w, net, hosts)) = setup(uid, &["good.test:443", "HOSTIP:443", "loop.test:443"])
        else {
            return;
        };
        let ip = net.host_ip.clone();
        let cmd = command_of(
            &net.wrap(&hosts, &w.argv(&["proxy", "--name", "web"])),
            &w.root,
        );
        let mut s = session(cmd, w.p("proxy.stderr"));
        let ctx = |what: &str, v: &Value| format!("uid {uid}, {what}: {v:#}");

        // Allowed name (listed together with its private IP): reached, certificate verified.
        let r = escape_call(&mut s, "fetch", json!({"url": "https://good.test/hello"}));
        assert_eq!(r["status"], 200, "{}", ctx("good.test", &r));
        assert_eq!(
            r["body"],
            "mcpsum-egress-ok /hello",
            "{}",
            ctx("good.test", &r)
        );
        // The listed IP itself.
        let r = escape_call(
            &mut s,
            "fetch",
            json!({"url": format!("https://{ip}/by-ip")}),
        );
        assert_eq!(r["status"], 200, "{}", ctx("listed IP", &r));
        // An unlisted host (same address): 403.
        let r = escape_call(&mut s, "fetch", json!({"url": "https://other.test/"}));
        assert!(
            r["error"].as_str().unwrap_or_default().contains("403"),
            "{}",
            ctx("unlisted", &r)
        );
        // A listed name that resolves to loopback (127.0.0.1 is not listed): 403.
        let r = escape_call(&mut s, "fetch", json!({"url": "https://loop.test/"}));
        assert!(
            r["error"].as_str().unwrap_or_default().contains("403"),
            "{}",
            ctx("loopback name", &r)
        );
        // CONNECT to an allowed host, then a ClientHello naming another host.
        let r = escape_call(
            &mut s,
            "raw",
            json!({"mode": "connect_tls", "host": "good.test", "port": 443, "sni": "evil.test"}),
        );
        assert!(
            r["connect"].as_str().unwrap_or_default().contains(" 200")
                && r.get("tls_error").is_some()
                && !r.to_string().contains("mcpsum-egress-ok"),
            "{}",
            ctx("mismatched SNI", &r)
        );
        // CONNECT, then plain HTTP bytes.
        let r = escape_call(
            &mut s,
            "raw",
            json!({"mode": "connect_plain", "host": "good.test", "port": 443}),
        );
        assert!(
            !r["reply"]
                .as_str()
                .unwrap_or_default()
                .contains("mcpsum-egress-ok"),
            "{}",
            ctx("non-TLS bytes", &r)
        );
        // A plain proxy GET.
        let r = escape_call(
            &mut s,
            "raw",
            json!({"mode": "get", "host": "good.test", "port": 443}),
        );
        assert!(
            r["reply"]
                .as_str()
                .unwrap_or_default()
                .starts_with("HTTP/1.1 405"),
            "{}",
            ctx("plain GET", &r)
        );
        // Around the proxy: no route out of the server's namespace.
        let r = escape_call(
            &mut s,
            "raw",
            json!({"mode": "direct", "host": ip, "port": 443}),
        );
        assert_eq!(r["result"]["ok"], false, "{}", ctx("direct", &r));

        let records = wait_records(&w, 7);
        s.close_stdin();
        s.wait_for(Duration::from_secs(20));
        let after = egress_records(&w);
        assert_eq!(
            after.len(),
            7,
            "uid {uid}: one record per connection: {after:#?}"
        );
        let want = [
            ("good.test", "allow", "ok"),
            (ip.as_str(), "allow", "ok"),
            ("other.test", "deny", "not_listed"),
            ("loop.test", "deny", "non_public"),
            ("good.test", "deny", "sni_mismatch"),
            ("good.test", "deny", "not_tls"),
            ("", "deny", "method"),
        ];
        for (rec, (host, decision, reason)) in records.iter().zip(want) {
            let c = format!("uid {uid}: {rec:#}");
            assert_eq!(rec["server"], "web", "{c}");
            if !host.is_empty() {
                assert_eq!(rec["host"], host, "{c}");
            }
            assert_eq!(rec["decision"], decision, "{c}");
            assert_eq!(rec["reason"], reason, "{c}");
            if decision == "allow" {
                assert_eq!(rec["connected"], format!("{ip}:443"), "{c}");
                assert!(rec["bytes_up"].as_u64().unwrap() > 0, "{c}");
                assert!(rec["bytes_down"].as_u64().unwrap() > 0, "{c}");
            }
        }
        let sni = &records[4];
        assert_eq!(sni["sni"], "evil.test", "uid {uid}: {sni:#}");
    }
}

#[test]
fn sandbox_test_passes_in_allow_mode_with_real_hosts() {
    for uid in users() {
        let Some((w, net, hosts)) = setup(uid, &["good.test:443", "HOSTIP:443"]) else {
            return;
        };
        let argv = w.argv(&["sandbox", "test", "--name", "web", "--json"]);
        let r = run_output(&mut command_of(&net.wrap(&hosts, &argv), &w.root));
        assert_eq!(r.code, 0, "uid {uid}: {r:#?}");
        let doc = r.json();
        let rows = doc["report"]["rows"].as_array().unwrap();
        let failed: Vec<&Value> = rows.iter().filter(|r| r["pass"] != true).collect();
        assert!(failed.is_empty(), "uid {uid}: {failed:#?}");
        for want in [
            "egress CONNECT good.test:443".to_owned(),
            format!("egress CONNECT {}:443", net.host_ip),
            "egress CONNECT unlisted".to_owned(),
            "direct connect".to_owned(),
        ] {
            assert!(
                rows.iter()
                    .any(|r| r["check"].as_str().unwrap_or_default().starts_with(&want)),
                "uid {uid}: no `{want}` row: {doc:#}"
            );
        }
    }
}

#[test]
fn egress_private_addresses_need_their_ip_and_wildcards_skip_the_apex() {
    for uid in users() {
        let Some((w, net, hosts)) =
            setup(uid, &["*.good.test:443", "HOSTIP:443", "private.test:443"])
        else {
            return;
        };
        let cmd = command_of(
            &net.wrap(&hosts, &w.argv(&["proxy", "--name", "web"])),
            &w.root,
        );
        let mut s = session(cmd, w.p("proxy.stderr"));
        // A subdomain matches the wildcard (its address is listed).
        let r = escape_call(&mut s, "fetch", json!({"url": "https://api.good.test/w"}));
        assert_eq!(r["status"], 200, "uid {uid}: {r:#}");
        // The apex does not.
        let r = escape_call(&mut s, "fetch", json!({"url": "https://good.test/"}));
        assert!(
            r["error"].as_str().unwrap_or_default().contains("403"),
            "uid {uid}: {r:#}"
        );
        // A listed name on a private address that is not listed itself.
        let r = escape_call(&mut s, "fetch", json!({"url": "https://private.test/"}));
        assert!(
            r["error"].as_str().unwrap_or_default().contains("403"),
            "uid {uid}: {r:#}"
        );
        let records = wait_records(&w, 3);
        let got: Vec<(String, String)> = records
            .iter()
            .map(|r| {
                (
                    r["host"].as_str().unwrap_or_default().to_owned(),
                    r["reason"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = [
            ("api.good.test", "ok"),
            ("good.test", "not_listed"),
            ("private.test", "non_public"),
        ]
        .iter()
        .map(|(h, r)| ((*h).to_owned(), (*r).to_owned()))
        .collect();
        assert_eq!(got, want, "uid {uid}: {records:#?}");
        assert_eq!(records[0]["rule"], "*.good.test:443", "uid {uid}");
        let dropped = records[2]["dropped"].to_string();
        assert!(
            dropped.contains(&net.second_ip()) && records[2]["connected"].is_null(),
            "uid {uid}: {:#}",
            records[2]
        );
    }
}

//! `npm`: resolving an `npx` command's closure at lock time (`npm install --package-lock-only
//! --ignore-scripts`, npm's own resolver) and installing exactly that tree with every
//! integrity checked (`npm ci --ignore-scripts` from a `package-lock.json` mcpsum writes from
//! the lock). `npx` itself is never used: it records `^V` and resolves again on first use.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::runner::NpmRun;
use crate::error::{Error, Result};
use crate::lockfile::{ArtifactPackage, Artifacts, Installer};

/// The name the generated project has (never published, never a dependency).
const PROJECT: &str = "mcpsum-pinned-closure";

/// `npm` beside the command's `npx` (or the `npm` named), else `npm` on mcpsum's `PATH`.
fn find_npm(program: &str) -> Result<PathBuf> {
    let named = if program.contains('/') {
        Some(PathBuf::from(program))
    } else {
        super::which(program)
    };
    named
        .as_deref()
        .and_then(Path::parent)
        .map(|d| d.join("npm"))
        .filter(|p| p.is_file())
        .or_else(|| super::which("npm"))
        .ok_or_else(|| {
            Error::new(format!("cannot find `npm` (for `{program}`) on mcpsum's `PATH`"))
                .hint("install Node.js with npm, or put it on `PATH`; mcpsum installs an `npx` server's pinned closure with it")
        })
}

/// `node` beside `npm`, else on mcpsum's `PATH`.
pub fn find_node(program: &str) -> Result<PathBuf> {
    let npm = find_npm(program).ok();
    npm.as_deref()
        .and_then(|p| fs_err::canonicalize(p).ok())
        .and_then(|p| p.parent().map(|d| d.join("node")))
        .filter(|p| p.is_file())
        .or_else(|| {
            npm.as_deref()
                .and_then(Path::parent)
                .map(|d| d.join("node"))
                .filter(|p| p.is_file())
        })
        .or_else(|| super::which("node"))
        .ok_or_else(|| {
            Error::new("cannot find `node` on mcpsum's `PATH`")
                .hint("install Node.js, or put it on `PATH`")
        })
}

fn run_npm(npm: &Path, args: &[&str], dir: &Path, what: &str) -> Result<()> {
    let out = Command::new(npm)
        .args(args)
        .args(["--no-audit", "--no-fund", "--no-update-notifier"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::new(format!("cannot run `{}`", npm.display())).cause(e))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<String> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains("A complete log of this run"))
        .take(30)
        .map(|l| format!("  | {}", crate::text::sanitize_line(l)))
        .collect();
    Err(Error::new(what.to_owned())
        .cause(format!("`npm {}` failed ({})", args.join(" "), out.status))
        .details(lines))
}

/// `@scope/name@range` as name and range (`latest` when none is given); `None` for anything
/// but a registry package (a path, a URL, a git or `npm:` alias).
pub fn split_spec(spec: &str) -> Option<(String, String)> {
    let at = spec
        .char_indices()
        .skip(1)
        .find(|(_, c)| *c == '@')
        .map(|(i, _)| i);
    let (name, range) = match at {
        Some(i) => (&spec[..i], &spec[i + 1..]),
        None => (spec, "latest"),
    };
    let range_ok = !range.is_empty()
        && range.len() <= 128
        && range
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" .^~<>=|*+-".contains(&b));
    (crate::lockfile::valid_package_name(Installer::Npm, name) && range_ok)
        .then(|| (name.to_owned(), range.to_owned()))
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

fn string_list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Resolves the closure of `run` as npm does for a project that depends on the package. A
/// package with an install script is refused unless `allow_scripts` names it. With `keep` (an
/// npm closure) the project starts from its tree as its `package-lock.json`, and npm keeps
/// every locked version that still satisfies its range, as `npm install` does in a project
/// with a lockfile.
pub fn resolve(
    run: &NpmRun,
    allow_scripts: &[String],
    keep: Option<&Artifacts>,
) -> Result<Artifacts> {
    let (name, range) = split_spec(&run.spec).ok_or_else(|| {
        Error::new(format!(
            "`{}` is not a registry package that can be pinned",
            run.spec
        ))
        .hint("name a registry package and its version: `npx -y @scope/pkg@1.2.3`")
    })?;
    let npm = find_npm(&run.program)?;
    let node = find_node(&run.program)?;
    let what = format!("cannot resolve the dependencies of `{}`", run.spec);
    let major = node_major(&node).ok_or_else(|| {
        Error::new(what.clone()).cause(format!("`{}` did not report its version", node.display()))
    })?;
    let tmp = tempfile::Builder::new()
        .prefix("mcpsum-resolve-")
        .tempdir()
        .map_err(|e| Error::new("cannot create a temporary directory").cause(e))?;
    let deps = json!({name.clone(): range});
    let manifest =
        json!({"name": PROJECT, "version": "0.0.0", "private": true, "dependencies": deps});
    fs_err::write(tmp.path().join("package.json"), manifest.to_string())
        .map_err(|e| Error::new(what.clone()).cause(e))?;
    let keep = keep.filter(|k| k.installer == Installer::Npm);
    if let Some(keep) = keep {
        fs_err::write(
            tmp.path().join("package-lock.json"),
            package_lock(keep, &deps).to_string(),
        )
        .map_err(|e| Error::new(what.clone()).cause(e))?;
    }
    run_npm(
        &npm,
        &["install", "--package-lock-only", "--ignore-scripts"],
        tmp.path(),
        &what,
    )
    .map_err(|e| e.hint("check the package and that the npm registry is reachable"))?;
    let text = fs_err::read_to_string(tmp.path().join("package-lock.json"))
        .map_err(|e| Error::new(what.clone()).cause(e))?;
    let lock: Value = serde_json::from_str(&text)
        .map_err(|e| Error::new(what.clone()).cause(format!("npm's `package-lock.json`: {e}")))?;
    let entries = lock["packages"]
        .as_object()
        .ok_or_else(|| Error::new(what.clone()).cause("npm's lock has no `packages`"))?;
    let mut packages = Vec::new();
    let mut refused = Vec::new();
    let mut scripts: Vec<String> = Vec::new();
    for (key, v) in entries {
        if key.is_empty() || v["dev"].as_bool() == Some(true) {
            continue;
        }
        let last = key.rsplit("node_modules/").next().unwrap_or(key);
        let pkg_name = v["name"].as_str().unwrap_or(last).to_owned();
        let version = v["version"].as_str().unwrap_or_default().to_owned();
        let here = format!("`{pkg_name} {version}`");
        if v["link"].as_bool() == Some(true) || pkg_name != last {
            refused.push(format!("{here} at `{key}` is a link or an alias"));
            continue;
        }
        let install_script = v["hasInstallScript"].as_bool() == Some(true);
        if install_script && !allow_scripts.contains(&pkg_name) {
            refused.push(format!(
                "{here} has an install script, which mcpsum runs only for a package the person allowed (`--allow-install-scripts {pkg_name}`)"
            ));
            scripts.push(pkg_name.clone());
            continue;
        }
        let resolved = v["resolved"].as_str().unwrap_or_default();
        let integrity = v["integrity"].as_str().unwrap_or_default();
        // A package kept from `keep` has no URL (its lock names none): it is the registry
        // package of that name, version and integrity that was pinned before (wherever npm
        // places it in the tree now).
        let kept = resolved.is_empty()
            && keep.is_some_and(|k| {
                k.packages
                    .iter()
                    .any(|p| p.name == pkg_name && p.version == version && p.hash == integrity)
            });
        if !kept && !resolved.starts_with("https://") && !resolved.starts_with("http://") {
            refused.push(format!("{here} comes from `{resolved}`, not a registry"));
            continue;
        }
        let Some(integrity) = v["integrity"].as_str().filter(|i| i.starts_with("sha512-")) else {
            refused.push(format!("{here} has no sha512 integrity"));
            continue;
        };
        let path = (key != &format!("node_modules/{pkg_name}")).then(|| key.clone());
        let optional_peers = v["peerDependenciesMeta"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(_, meta)| meta["optional"].as_bool() == Some(true))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        packages.push(ArtifactPackage {
            name: pkg_name,
            version,
            hash: integrity.to_owned(),
            path,
            dependencies: string_map(&v["dependencies"]),
            optional_dependencies: string_map(&v["optionalDependencies"]),
            peer_dependencies: string_map(&v["peerDependencies"]),
            optional_peers,
            optional: v["optional"].as_bool() == Some(true),
            os: string_list(&v["os"]),
            cpu: string_list(&v["cpu"]),
            install_script,
        });
    }
    if !refused.is_empty() {
        let hint = if scripts.len() == refused.len() {
            scripts.sort();
            scripts.dedup();
            format!(
                "an install script runs unsandboxed, with your rights, when the install is made; if you trust {}, allow {}: `mcpsum lock {} -- COMMAND...` (add the server's `--name`), else pin a version without install scripts",
                scripts
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if scripts.len() == 1 { "it" } else { "them" },
                scripts
                    .iter()
                    .map(|s| format!("--allow-install-scripts {s}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        } else {
            "pin a version whose dependencies are registry packages; a package with an install script needs `lock --allow-install-scripts PKG`".to_owned()
        };
        return Err(Error::new(what)
            .cause("the closure holds packages that cannot be pinned")
            .details(refused)
            .hint(hint));
    }
    if !packages.iter().any(|p| p.name == name && p.path.is_none()) {
        return Err(Error::new(what).cause(format!("the resolution does not hold `{name}` itself")));
    }
    packages.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    Ok(Artifacts {
        installer: Installer::Npm,
        python: None,
        node: Some(major),
        packages,
    })
}

fn node_major(node: &Path) -> Option<String> {
    let out = Command::new(node)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let major = text.trim().strip_prefix('v')?.split('.').next()?.to_owned();
    (out.status.success() && !major.is_empty() && major.bytes().all(|b| b.is_ascii_digit()))
        .then_some(major)
}

/// The `package-lock.json` (and `package.json`) that makes `npm ci` install exactly `artifacts`
/// with `top` at the root.
fn project_files(artifacts: &Artifacts, top: &str) -> Option<(Value, Value)> {
    let root = artifacts
        .packages
        .iter()
        .find(|p| p.name == top && p.path.is_none())?;
    let deps = json!({top: root.version});
    let manifest =
        json!({"name": PROJECT, "version": "0.0.0", "private": true, "dependencies": deps});
    Some((manifest, package_lock(artifacts, &deps)))
}

/// The `package-lock.json` of the project that depends on `deps`, holding the tree of
/// `artifacts`. It names no tarball URL: npm fetches each package by name and version from
/// the registry it is configured with.
fn package_lock(artifacts: &Artifacts, deps: &Value) -> Value {
    let mut packages = serde_json::Map::new();
    packages.insert(
        String::new(),
        json!({"name": PROJECT, "version": "0.0.0", "dependencies": deps}),
    );
    for p in &artifacts.packages {
        let mut e = serde_json::Map::new();
        e.insert("version".into(), json!(p.version));
        e.insert("integrity".into(), json!(p.hash));
        for (field, map) in [
            ("dependencies", &p.dependencies),
            ("optionalDependencies", &p.optional_dependencies),
            ("peerDependencies", &p.peer_dependencies),
        ] {
            if !map.is_empty() {
                e.insert(field.into(), json!(map));
            }
        }
        if !p.optional_peers.is_empty() {
            let meta: serde_json::Map<String, Value> = p
                .optional_peers
                .iter()
                .map(|n| (n.clone(), json!({"optional": true})))
                .collect();
            e.insert("peerDependenciesMeta".into(), Value::Object(meta));
        }
        if p.optional {
            e.insert("optional".into(), json!(true));
        }
        if !p.os.is_empty() {
            e.insert("os".into(), json!(p.os));
        }
        if !p.cpu.is_empty() {
            e.insert("cpu".into(), json!(p.cpu));
        }
        if p.install_script {
            e.insert("hasInstallScript".into(), json!(true));
        }
        packages.insert(p.npm_path(), Value::Object(e));
    }
    json!({"name": PROJECT, "version": "0.0.0", "lockfileVersion": 3,
           "requires": true, "packages": packages})
}

/// Installs `artifacts` into `dir` (which does not exist yet): `npm ci --ignore-scripts` of a
/// lock mcpsum writes from the recorded tree, each tarball checked against its integrity. From
/// npm's cache when it has them (no network), else from the registry.
pub fn install(run: &NpmRun, artifacts: &Artifacts, dir: &Path) -> Result<()> {
    let what = format!("cannot install the pinned closure into `{}`", dir.display());
    let (top, _) = split_spec(&run.spec)
        .ok_or_else(|| Error::new(what.clone()).cause("the command names no registry package"))?;
    let (manifest, lock) = project_files(artifacts, &top).ok_or_else(|| {
        Error::new(what.clone()).cause(format!("`{top}` itself is not in the pinned closure"))
    })?;
    let npm = find_npm(&run.program)?;
    fs_err::create_dir_all(dir).map_err(|e| Error::new(what.clone()).cause(e))?;
    let write = |file: &str, v: &Value| {
        fs_err::write(
            dir.join(file),
            serde_json::to_vec_pretty(v).unwrap_or_default(),
        )
        .map_err(|e| Error::new(what.clone()).cause(e))
    };
    write("package.json", &manifest)?;
    write("package-lock.json", &lock)?;
    run_npm(&npm, &["ci", "--ignore-scripts", "--offline"], dir, &what)
        .or_else(|_| run_npm(&npm, &["ci", "--ignore-scripts"], dir, &what))?;
    // Then the install scripts the person allowed, of those packages only.
    let mut allowed: Vec<&str> = artifacts
        .packages
        .iter()
        .filter(|p| p.install_script)
        .map(|p| p.name.as_str())
        .collect();
    allowed.dedup();
    if !allowed.is_empty() {
        let mut args = vec!["rebuild", "--ignore-scripts=false", "--foreground-scripts"];
        args.extend(&allowed);
        run_npm(&npm, &args, dir, &what)
            .map_err(|e| e.hint("an allowed install script failed; see its output above"))?;
    }
    // Every package where the lock put it, at its version.
    let mut problems = Vec::new();
    for p in &artifacts.packages {
        let file = dir.join(p.npm_path()).join("package.json");
        let version = fs_err::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v["version"].as_str().map(str::to_owned));
        match version {
            Some(v) if v == p.version => {}
            None if p.optional => {}
            other => problems.push(format!(
                "`{} {}` at `{}`: installed {}",
                p.name,
                p.version,
                p.npm_path(),
                other.unwrap_or_else(|| "nothing".to_owned())
            )),
        }
    }
    if !problems.is_empty() {
        return Err(Error::new(what).details(problems));
    }
    Ok(())
}

/// The script `npx` would run for the top package: its `bin` named like the package (without
/// its scope), or its only one.
pub fn entry_script(dir: &Path, run: &NpmRun) -> Result<PathBuf> {
    let (top, _) = split_spec(&run.spec)
        .ok_or_else(|| Error::new(format!("`{}` is not a registry package", run.spec)))?;
    let pkg_dir = dir.join("node_modules").join(&top);
    let manifest: Value = fs_err::read(pkg_dir.join("package.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| {
            Error::new(format!(
                "the pinned install has no `{}`",
                pkg_dir.join("package.json").display()
            ))
        })?;
    let unscoped = top.rsplit('/').next().unwrap_or(&top);
    let bin = match &manifest["bin"] {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) if m.len() == 1 => m
            .values()
            .next()
            .and_then(|v| v.as_str())
            .map(str::to_owned),
        Value::Object(m) => m.get(unscoped).and_then(|v| v.as_str()).map(str::to_owned),
        _ => None,
    }
    .ok_or_else(|| {
        Error::new(format!("`{top}` names no program that `npx` would run"))
            .hint("run its script with `node` instead, as a command whose code mcpsum does not pin")
    })?;
    let rel = Path::new(bin.trim_start_matches("./"));
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(Error::new(format!(
            "`{top}`'s program `{bin}` lies outside the package"
        )));
    }
    Ok(pkg_dir.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_specs_only() {
        assert_eq!(
            split_spec("@scope/pkg@1.2.3"),
            Some(("@scope/pkg".into(), "1.2.3".into()))
        );
        assert_eq!(split_spec("pkg"), Some(("pkg".into(), "latest".into())));
        assert_eq!(split_spec("pkg@^1"), Some(("pkg".into(), "^1".into())));
        for bad in [
            "./dir",
            "git+https://x/y",
            "pkg@npm:other@1",
            "pkg@file:../x",
            "/abs",
        ] {
            assert_eq!(split_spec(bad), None, "{bad}");
        }
    }
}

//! `uv`: resolving a `uvx` command's closure at lock time (`uv pip compile`, the same resolver
//! `uvx` uses) and installing it hash-checked into a virtual environment mcpsum owns
//! (`uv venv`, then `uv pip install --require-hashes --no-deps --no-build`). `uv tool run` itself
//! is never used: it does not enforce hashes given to it (uv issue 19002).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::runner::UvRun;
use crate::error::{Error, Result};
use crate::lockfile::{ArtifactPackage, Artifacts, Installer};

/// The `uv` binary a command's program stands for: `uv` beside `uvx` (or the `uv` named), else
/// `uv` on mcpsum's `PATH`.
pub fn find_uv(program: &str) -> Result<PathBuf> {
    let named = if program.contains('/') {
        Some(PathBuf::from(program))
    } else {
        super::which(program)
    };
    let beside = named
        .as_deref()
        .and_then(Path::parent)
        .map(|d| d.join("uv"))
        .filter(|p| p.is_file());
    beside.or_else(|| super::which("uv")).ok_or_else(|| {
        Error::new(format!("cannot find `uv` (for `{program}`) on mcpsum's `PATH`"))
            .hint("install uv (https://docs.astral.sh/uv/) or put it on `PATH`; mcpsum installs a `uvx` server's pinned closure with it")
    })
}

/// Runs `uv` with `args` (and `stdin`), returning its stdout; its stderr goes into the error.
fn run_uv(uv: &Path, args: &[&str], stdin: Option<&str>, what: &str) -> Result<String> {
    let mut cmd = Command::new(uv);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::new(format!("cannot run `{}`", uv.display())).cause(e))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        use std::io::Write;
        // A uv that exits early closes the pipe; its exit status says why.
        let _ = pipe.write_all(text.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::new(format!("cannot run `{}`", uv.display())).cause(e))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<String> = stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| format!("  | {}", crate::text::sanitize_line(l)))
            .collect();
        return Err(Error::new(what.to_owned())
            .cause(format!("`uv {}` failed ({})", args.join(" "), out.status))
            .details(lines));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The Python version (`major.minor`) `uv` picks for `request` (none: its default), as `uvx`
/// would, and the interpreter's path.
fn python_for(uv: &Path, request: Option<&str>) -> Result<(String, String)> {
    let mut args = vec!["python", "find", "--no-project"];
    args.extend(request);
    let what = "cannot find the Python interpreter `uvx` would use";
    let path = run_uv(uv, &args, None, what)?.trim().to_owned();
    let out = Command::new(&path)
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::new(what).cause(e))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || !crate::lockfile::valid_python_version(&version) {
        return Err(Error::new(what).cause(format!("`{path}` did not report its version")));
    }
    Ok((version, path))
}

/// One package of a `pylock.toml`: its name, version and wheels (file name, sha256 hex).
struct Locked {
    name: String,
    version: String,
    wheels: Vec<(String, String)>,
}

/// Reads what `uv pip compile --format pylock.toml` wrote.
fn parse_pylock(text: &str) -> std::result::Result<Vec<Locked>, String> {
    let doc = toml_edit::Document::parse(text).map_err(|e| e.message().trim_end().to_owned())?;
    let packages = doc
        .get("packages")
        .and_then(toml_edit::Item::as_array_of_tables)
        .ok_or("no `[[packages]]`")?;
    let mut out = Vec::new();
    for p in packages {
        let field = |k: &str| {
            p.get(k)
                .and_then(toml_edit::Item::as_str)
                .map(str::to_owned)
        };
        let name = field("name").ok_or("a package without `name`")?;
        let version = field("version").ok_or_else(|| format!("`{name}` has no `version`"))?;
        let mut wheels = Vec::new();
        if let Some(list) = p.get("wheels").and_then(toml_edit::Item::as_array) {
            for w in list {
                let Some(t) = w.as_inline_table() else {
                    continue;
                };
                let file = t
                    .get("name")
                    .and_then(toml_edit::Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| {
                        t.get("url")
                            .and_then(toml_edit::Value::as_str)
                            .and_then(|u| u.rsplit('/').next())
                            .map(str::to_owned)
                    })
                    .ok_or_else(|| format!("a wheel of `{name}` has no file name"))?;
                let hash = t
                    .get("hashes")
                    .and_then(toml_edit::Value::as_inline_table)
                    .and_then(|h| h.get("sha256"))
                    .and_then(toml_edit::Value::as_str)
                    .ok_or_else(|| format!("wheel `{file}` has no sha256"))?;
                wheels.push((file, hash.to_owned()));
            }
        }
        out.push(Locked {
            name,
            version,
            wheels,
        });
    }
    Ok(out)
}

/// The closure `keep` as a `pylock.toml` of names and versions: written as `uv pip compile`'s
/// existing output, it makes uv prefer those versions wherever they still satisfy the
/// requirements (as `--upgrade` would not).
fn preferences(keep: &Artifacts) -> String {
    // A JSON string is a TOML basic string (the same escapes).
    let quoted = |s: &str| serde_json::Value::from(s).to_string();
    let mut out = String::from("lock-version = \"1.0\"\ncreated-by = \"mcpsum\"\n");
    for p in &keep.packages {
        out.push_str(&format!(
            "\n[[packages]]\nname = {}\nversion = {}\n",
            quoted(&p.name),
            quoted(&p.version)
        ));
    }
    out
}

/// Resolves the closure of `run` as `uvx` would on this machine, with the hash of the exact
/// wheel it installs of each package. `previous` (the entry's closure before, for this
/// command) lets a re-lock that resolves the same versions skip the trial install that tells
/// wheels apart; the versions of `keep` are kept where they still satisfy the requirements,
/// when it was resolved for the same Python.
pub fn resolve(
    run: &UvRun,
    previous: Option<&Artifacts>,
    keep: Option<&Artifacts>,
) -> Result<Artifacts> {
    let uv = find_uv(&run.program)?;
    let (python, interpreter) = python_for(&uv, run.python.as_deref())?;
    let tmp = tempfile::Builder::new()
        .prefix("mcpsum-resolve-")
        .tempdir()
        .map_err(|e| Error::new("cannot create a temporary directory").cause(e))?;
    let pylock = tmp.path().join("pylock.toml");
    let pylock_arg = pylock.display().to_string();
    let what = format!("cannot resolve the dependencies of `{}`", run.requirement);
    if let Some(keep) =
        keep.filter(|k| k.installer == Installer::Uv && k.python.as_deref() == Some(&python))
    {
        fs_err::write(&pylock, preferences(keep)).map_err(|e| Error::new(what.clone()).cause(e))?;
    }
    run_uv(
        &uv,
        &[
            "pip",
            "compile",
            "-",
            "--format",
            "pylock.toml",
            "--python",
            &interpreter,
            "--no-header",
            "--quiet",
            "-o",
            &pylock_arg,
        ],
        Some(&format!("{}\n", run.requirement)),
        &what,
    )
    .map_err(|e| {
        e.hint("check the requirement and that PyPI (or your `UV_INDEX_URL`) is reachable")
    })?;
    let text = fs_err::read_to_string(&pylock).map_err(|e| Error::new(what.clone()).cause(e))?;
    let locked = parse_pylock(&text).map_err(|e| {
        Error::new(what.clone()).cause(format!("cannot read uv's `pylock.toml`: {e}"))
    })?;

    let earlier: BTreeMap<(&str, &str), &str> = previous
        .filter(|p| p.installer == Installer::Uv && p.python.as_deref() == Some(&python))
        .map(|p| {
            p.packages
                .iter()
                .map(|k| ((k.name.as_str(), k.version.as_str()), k.hash.as_str()))
                .collect()
        })
        .unwrap_or_default();
    let mut packages = Vec::new();
    let mut ambiguous = Vec::new();
    for l in &locked {
        if l.wheels.is_empty() {
            return Err(Error::new(what.clone())
                .cause(format!("`{} {}` has no wheel for Python {python} on this machine; mcpsum pins built wheels only, never a build from source", l.name, l.version))
                .hint("pin a version that publishes a wheel for this platform"));
        }
        let hash = if l.wheels.len() == 1 {
            Some(format!("sha256:{}", l.wheels[0].1))
        } else {
            earlier
                .get(&(l.name.as_str(), l.version.as_str()))
                .filter(|h| l.wheels.iter().any(|(_, w)| format!("sha256:{w}") == **h))
                .map(|h| (*h).to_owned())
        };
        match hash {
            Some(hash) => packages.push(ArtifactPackage {
                name: l.name.clone(),
                version: l.version.clone(),
                hash,
                ..ArtifactPackage::default()
            }),
            None => ambiguous.push(l),
        }
    }
    if !ambiguous.is_empty() {
        // Which of several wheels uv installs here: install them all with every candidate
        // hash allowed and read the tags uv recorded for each.
        let venv = tmp.path().join("venv");
        let tags = trial_install(&uv, &interpreter, &venv, &locked, &what)?;
        for l in ambiguous {
            let installed = tags.get(&normalize(&l.name)).ok_or_else(|| {
                Error::new(what.clone()).cause(format!("uv did not install `{}`", l.name))
            })?;
            let hash = l
                .wheels
                .iter()
                .find(|(file, _)| wheel_tags(file).as_ref() == Some(installed))
                .map(|(_, h)| format!("sha256:{h}"))
                .ok_or_else(|| {
                    Error::new(what.clone()).cause(format!(
                        "cannot tell which wheel of `{} {}` uv installed",
                        l.name, l.version
                    ))
                })?;
            packages.push(ArtifactPackage {
                name: l.name.clone(),
                version: l.version.clone(),
                hash,
                ..ArtifactPackage::default()
            });
        }
    }
    packages.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    if !packages
        .iter()
        .any(|p| normalize(&p.name) == normalize(&run.package))
    {
        return Err(Error::new(what).cause(format!(
            "the resolution does not hold `{}` itself",
            run.package
        )));
    }
    Ok(Artifacts {
        installer: Installer::Uv,
        python: Some(python),
        node: None,
        packages,
    })
}

/// Installs every package of `locked` with any of its wheel hashes into a throw-away `venv`, and
/// returns the tags of the wheel installed per normalized package name.
fn trial_install(
    uv: &Path,
    interpreter: &str,
    venv: &Path,
    locked: &[Locked],
    what: &str,
) -> Result<BTreeMap<String, Vec<String>>> {
    let venv_arg = venv.display().to_string();
    run_uv(
        uv,
        &[
            "venv",
            "--quiet",
            "--no-project",
            "--python",
            interpreter,
            &venv_arg,
        ],
        None,
        what,
    )?;
    let mut requirements = String::new();
    for l in locked {
        requirements.push_str(&format!("{}=={}", l.name, l.version));
        for (_, h) in &l.wheels {
            requirements.push_str(&format!(" --hash=sha256:{h}"));
        }
        requirements.push('\n');
    }
    let python = venv.join("bin/python").display().to_string();
    run_uv(
        uv,
        &[
            "pip",
            "install",
            "--quiet",
            "--python",
            &python,
            "--require-hashes",
            "--no-deps",
            "--no-build",
            "-r",
            "-",
        ],
        Some(&requirements),
        what,
    )?;
    let mut out = BTreeMap::new();
    for (name, dist_info) in dist_infos(venv)? {
        let wheel = fs_err::read_to_string(dist_info.join("WHEEL"))
            .map_err(|e| Error::new(what.to_owned()).cause(e))?;
        let mut tags: Vec<String> = wheel
            .lines()
            .filter_map(|l| l.strip_prefix("Tag:"))
            .map(|t| t.trim().to_owned())
            .collect();
        tags.sort();
        out.insert(name, tags);
    }
    Ok(out)
}

/// The tags a wheel file name stands for (`py3-none-any`; compressed sets expanded), sorted.
fn wheel_tags(file: &str) -> Option<Vec<String>> {
    let stem = file.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    // name-version[-build]-python-abi-platform
    if parts.len() < 5 {
        return None;
    }
    let n = parts.len();
    let mut tags = Vec::new();
    for py in parts[n - 3].split('.') {
        for abi in parts[n - 2].split('.') {
            for plat in parts[n - 1].split('.') {
                tags.push(format!("{py}-{abi}-{plat}"));
            }
        }
    }
    tags.sort();
    Some(tags)
}

/// PEP 503 normalization: lowercase, runs of `-_.` as one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The `site-packages` of a virtual environment.
pub fn site_packages(venv: &Path) -> Result<PathBuf> {
    let lib = venv.join("lib");
    let entries = fs_err::read_dir(&lib).map_err(|e| {
        Error::new(format!("`{}` is not a virtual environment", venv.display())).cause(e)
    })?;
    for e in entries.flatten() {
        let sp = e.path().join("site-packages");
        if e.file_name().to_string_lossy().starts_with("python") && sp.is_dir() {
            return Ok(sp);
        }
    }
    Err(Error::new(format!(
        "`{}` has no `lib/python*/site-packages`",
        venv.display()
    )))
}

/// Every installed distribution of a venv: normalized name and its `.dist-info` folder.
pub fn dist_infos(venv: &Path) -> Result<Vec<(String, PathBuf)>> {
    let sp = site_packages(venv)?;
    let mut out = Vec::new();
    let entries = fs_err::read_dir(&sp).map_err(|e| Error::new("cannot read").cause(e))?;
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        if let Some(stem) = file.strip_suffix(".dist-info") {
            let name = stem.rsplit_once('-').map_or(stem, |(n, _)| n);
            out.push((normalize(name), e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// The version a `.dist-info` folder's name records.
pub fn dist_info_version(dist_info: &Path) -> Option<String> {
    let file = dist_info.file_name()?.to_string_lossy().into_owned();
    let stem = file.strip_suffix(".dist-info")?;
    stem.rsplit_once('-').map(|(_, v)| v.to_owned())
}

/// Installs `artifacts` into `dir` (which does not exist yet) with every hash required: the
/// interpreter pinned, no dependency resolution, nothing built. From uv's cache when it has
/// the files (no network), else from the index.
pub fn install(program: &str, artifacts: &Artifacts, dir: &Path) -> Result<()> {
    let uv = find_uv(program)?;
    let python = artifacts.python.as_deref().unwrap_or_default();
    let dir_arg = dir.display().to_string();
    let what = format!("cannot install the pinned closure into `{}`", dir.display());
    let venv = |offline: bool| {
        let mut args = vec!["venv", "--quiet", "--no-project", "--python", python];
        if offline {
            args.push("--offline");
        }
        args.push(&dir_arg);
        run_uv(&uv, &args, None, &what)
    };
    venv(true).or_else(|_| venv(false)).map_err(|e| {
        e.hint(format!(
            "the closure was resolved for Python {python}; install it (`uv python install {python}`) or re-lock the server on this machine"
        ))
    })?;
    let mut requirements = String::new();
    for p in &artifacts.packages {
        requirements.push_str(&format!("{}=={} --hash={}\n", p.name, p.version, p.hash));
    }
    let python_bin = dir.join("bin/python").display().to_string();
    let pip = |offline: bool| {
        let mut args = vec![
            "pip",
            "install",
            "--quiet",
            "--python",
            &python_bin,
            "--require-hashes",
            "--no-deps",
            "--no-build",
            "--compile-bytecode",
            "-r",
            "-",
        ];
        if offline {
            args.push("--offline");
        }
        run_uv(&uv, &args, Some(&requirements), &what)
    };
    pip(true).or_else(|_| pip(false))?;
    // Exactly the closure, each at its version.
    let installed = dist_infos(dir)?;
    let want: BTreeMap<String, &str> = artifacts
        .packages
        .iter()
        .map(|p| (normalize(&p.name), p.version.as_str()))
        .collect();
    let mut problems = Vec::new();
    for (name, info) in &installed {
        match (want.get(name), dist_info_version(info)) {
            (Some(v), Some(got)) if normalize(v) == normalize(&got) => {}
            (Some(v), got) => problems.push(format!(
                "`{name}` is installed at {} instead of {v}",
                got.unwrap_or_default()
            )),
            (None, _) => problems.push(format!("`{name}` is installed but not pinned")),
        }
    }
    for name in want.keys() {
        if !installed.iter().any(|(n, _)| n == name) {
            problems.push(format!("`{name}` is pinned but was not installed"));
        }
    }
    if !problems.is_empty() {
        return Err(Error::new(what).details(problems));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheel_file_names_expand_to_their_tags() {
        assert_eq!(
            wheel_tags("cffi-2.1.1-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl")
                .unwrap(),
            [
                "cp311-cp311-manylinux2014_x86_64",
                "cp311-cp311-manylinux_2_17_x86_64"
            ]
        );
        assert_eq!(
            wheel_tags("a-1-py2.py3-none-any.whl").unwrap(),
            ["py2-none-any", "py3-none-any"]
        );
        assert_eq!(wheel_tags("a-1.tar.gz"), None);
        assert_eq!(normalize("Pydantic_Core..x"), "pydantic-core-x");
    }
}

//! Which commands run a package through an installer (`uvx`, `uv tool run`, `npx`, `npm exec`),
//! and what they ask it for: the package, the program it provides, and the server's arguments.
//! Pure: nothing here runs anything.

/// A package-runner command, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    /// `uvx [OPTIONS] PACKAGE [ARGS...]` or `uv tool run ...`.
    Uv(UvRun),
    /// `npx [OPTIONS] PACKAGE [ARGS...]` or `npm exec ...`.
    Npm(NpmRun),
}

/// What a `uvx` command asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UvRun {
    /// The program the command names (`uvx`, `/opt/bin/uv`): `uv` is looked up beside it.
    pub program: String,
    /// `--python`, if given.
    pub python: Option<String>,
    /// The requirement resolved: `mcp-server-time==2026.10.19` (a `PKG@V` is written `PKG==V`).
    pub requirement: String,
    /// The package's name, without extras and version.
    pub package: String,
    /// The console script run: the package's name, or the command after `--from`.
    pub script: String,
    /// The server's arguments.
    pub args: Vec<String>,
}

/// What an `npx` command asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpmRun {
    /// The program the command names.
    pub program: String,
    /// `@scope/name@version` as written.
    pub spec: String,
    /// The server's arguments.
    pub args: Vec<String>,
}

/// The runner of `argv`: `None` when it is not a package runner (its code is not pinned),
/// `Some(Err)` when it is one but uses an option that artifact pinning cannot honour.
pub fn parse(argv: &[String]) -> Option<Result<Runner, String>> {
    let program = argv.first()?;
    let base = program.rsplit('/').next().unwrap_or(program);
    match base {
        "uvx" => Some(parse_uv(program, &argv[1..], "uvx").map(Runner::Uv)),
        "uv" if argv.get(1).map(String::as_str) == Some("tool")
            && argv.get(2).map(String::as_str) == Some("run") =>
        {
            Some(parse_uv(program, &argv[3..], "uv tool run").map(Runner::Uv))
        }
        "npx" => Some(parse_npm(program, &argv[1..], "npx").map(Runner::Npm)),
        "npm" if argv.get(1).map(String::as_str) == Some("exec") => {
            Some(parse_npm(program, &argv[2..], "npm exec").map(Runner::Npm))
        }
        _ => None,
    }
}

fn parse_uv(program: &str, rest: &[String], runner: &str) -> Result<UvRun, String> {
    let mut python = None;
    let mut from = None;
    let mut i = 0;
    while i < rest.len() {
        let arg = rest[i].as_str();
        if !arg.starts_with('-') {
            break;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg, None),
        };
        let mut value = || -> Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            rest.get(i)
                .cloned()
                .ok_or_else(|| format!("`{runner}` option `{flag}` needs a value"))
        };
        match flag {
            "-q" | "--quiet" | "--isolated" => {}
            "-p" | "--python" => python = Some(value()?),
            "--from" => from = Some(value()?),
            _ => {
                return Err(format!(
                    "`{runner}` option `{arg}` is not supported when the code is pinned (supported: `--from`, `--python`, `--quiet`)"
                ));
            }
        }
        i += 1;
    }
    let Some(first) = rest.get(i) else {
        return Err(format!("`{runner}` names no package"));
    };
    let (requirement, script) = match from {
        Some(req) => (req, first.clone()),
        None => (first.clone(), String::new()),
    };
    let requirement = match requirement.split_once('@') {
        // `PKG@VERSION` is uvx's short form of `PKG==VERSION`.
        Some((pkg, version)) if !version.is_empty() && !version.contains(['/', ':']) => {
            format!("{pkg}=={version}")
        }
        _ => requirement,
    };
    let package = requirement_name(&requirement).ok_or_else(|| {
        format!("`{requirement}` is not a package requirement that can be pinned (expected `NAME`, `NAME==VERSION` or `NAME[EXTRA]==VERSION`)")
    })?;
    if let Some(python) = &python
        && !python
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b))
    {
        return Err(format!(
            "`--python {python}` is not a version request that can be pinned (expected e.g. `3.11`)"
        ));
    }
    let script = if script.is_empty() {
        package.clone()
    } else {
        script
    };
    if script.is_empty()
        || script.starts_with('.')
        || !script
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(format!("`{script}` is not a console script name"));
    }
    Ok(UvRun {
        program: program.to_owned(),
        python,
        requirement,
        package,
        script,
        args: rest[i + 1..].to_vec(),
    })
}

/// The package name of a requirement with only a name, extras and version clauses; `None` for
/// anything else (a URL, a path, a marker, an option).
fn requirement_name(req: &str) -> Option<String> {
    if !req
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-[],=<>!~*+".contains(&b))
    {
        return None;
    }
    let end = req
        .find(['[', '=', '<', '>', '!', '~'])
        .unwrap_or(req.len());
    let name = &req[..end];
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c));
    ok.then(|| name.to_owned())
}

fn parse_npm(program: &str, rest: &[String], runner: &str) -> Result<NpmRun, String> {
    let mut i = 0;
    while i < rest.len() {
        match rest[i].as_str() {
            "-y" | "--yes" | "-q" | "--quiet" => i += 1,
            "--" => {
                i += 1;
                break;
            }
            a if a.starts_with('-') => {
                return Err(format!(
                    "`{runner}` option `{a}` is not supported when the code is pinned (supported: `-y`, `--quiet`)"
                ));
            }
            _ => break,
        }
    }
    let spec = rest
        .get(i)
        .ok_or_else(|| format!("`{runner}` names no package"))?;
    Ok(NpmRun {
        program: program.to_owned(),
        spec: spec.clone(),
        args: rest[i + 1..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn uv(s: &str) -> UvRun {
        match parse(&argv(s)) {
            Some(Ok(Runner::Uv(u))) => u,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn uvx_forms() {
        let u = uv("uvx mcp-server-time==2026.10.19 --local-timezone UTC");
        assert_eq!(u.requirement, "mcp-server-time==2026.10.19");
        assert_eq!(u.script, "mcp-server-time");
        assert_eq!(u.args, argv("--local-timezone UTC"));
        assert_eq!(u.python, None);
        let u = uv("/opt/bin/uv tool run --python 3.12 mcp-server-time@2026.10.19");
        assert_eq!(u.requirement, "mcp-server-time==2026.10.19");
        assert_eq!(u.python.as_deref(), Some("3.12"));
        assert_eq!(u.program, "/opt/bin/uv");
        let u = uv("uvx --from mcp-server-time[x]==1 serve-it a");
        assert_eq!(u.package, "mcp-server-time");
        assert_eq!(u.script, "serve-it");
        assert_eq!(u.args, argv("a"));
        assert!(parse(&argv("uvx --with evil pkg")).unwrap().is_err());
        assert!(parse(&argv("uvx git+https://x/y")).unwrap().is_err());
        assert!(parse(&argv("uvx ./local")).unwrap().is_err());
        assert!(parse(&argv("uvx")).unwrap().is_err());
        assert!(parse(&argv("python3 server.py")).is_none());
        assert!(parse(&argv("uv run server.py")).is_none());
    }

    #[test]
    fn npx_forms() {
        let Some(Ok(Runner::Npm(n))) = parse(&argv("npx -y @scope/pkg@1.2.3 stdio")) else {
            panic!()
        };
        assert_eq!(n.spec, "@scope/pkg@1.2.3");
        assert_eq!(n.args, argv("stdio"));
        assert!(matches!(
            parse(&argv("npm exec -- pkg@1")),
            Some(Ok(Runner::Npm(_)))
        ));
        assert!(parse(&argv("npx --registry x pkg")).unwrap().is_err());
    }
}

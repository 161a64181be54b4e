//! Parsing mount lists: `--mount LOGICAL=PHYSICAL` and mount files (one `LOGICAL PHYSICAL`
//! mapping a line, `#` comments, `$VAR` / `${VAR}` expanded from the environment, `DENY` and
//! `ENOENT` targets). Errors name `file:line` and what is wrong.

use crate::mount::Target;
use std::fmt;
use std::path::Path;

/// A mount-list error, located at `file:line` (line 0: a `--mount` argument).
#[derive(Debug, PartialEq)]
pub struct MountFileError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for MountFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for MountFileError {}

/// What the right-hand side of a mapping is read against: the directory relative
/// physical paths start from, the driver that serves `/chirp/...` and `chirp://...`, and
/// those that serve `/http/...` and `http://...` (and `/https/...`, `https://...`).
pub struct MountContext<'a> {
    pub cwd: &'a Path,
    pub chirp: Option<std::sync::Arc<dyn crate::Driver>>,
    pub http: Option<std::sync::Arc<dyn crate::Driver>>,
    pub https: Option<std::sync::Arc<dyn crate::Driver>>,
    /// The consistency mode of a Chirp target that names none: direct (true) or cached.
    pub chirp_direct: bool,
}

impl<'a> MountContext<'a> {
    /// Local paths only (a remote target is an error).
    pub fn local(cwd: &'a Path) -> MountContext<'a> {
        MountContext {
            cwd,
            chirp: None,
            http: None,
            https: None,
            chirp_direct: true,
        }
    }
}

/// Whether `authority` looks like `HOST[:PORT]` or `HOST+PORT` (a non-zero numeric port,
/// if any; no user name).
fn web_authority(authority: &str) -> bool {
    !authority.contains('@') && roost_client::split_host_port(authority).is_some()
}

/// `http://HOST[:PORT]/PATH` or `/http/HOST[:PORT]/PATH` (and the same for https): a
/// directory or file on a web server, read-only (see `docs/httpfs.md`).
fn web_target(physical: &str, ctx: &MountContext<'_>) -> Option<Result<Target, String>> {
    let (scheme, rest) = [("https", &ctx.https), ("http", &ctx.http)]
        .into_iter()
        .find_map(|(scheme, driver)| {
            let rest = physical
                .strip_prefix(&format!("{scheme}://"))
                .or_else(|| physical.strip_prefix(&format!("/{scheme}/")))?;
            Some(((scheme, driver), rest))
        })?;
    let (scheme, driver) = scheme;
    let authority = rest.split('/').next().unwrap_or("");
    if !web_authority(authority) {
        return Some(Err(format!(
            "{physical}: expected {scheme}://HOST[:PORT]/PATH"
        )));
    }
    let Some(driver) = driver.clone() else {
        return Some(Err(format!(
            "{physical}: remote targets are not available here"
        )));
    };
    // A web server is read-only: its files are fetched whole into the cache, but for the
    // large ones with block hashes, which the driver opens in place (`open_file`).
    Some(Ok(Target::remote(driver, format!("/{rest}"), true)))
}

/// Turns the right-hand side of a mapping into a target; relative physical paths are taken
/// from `cwd`. As a bind mount does, a local target is resolved once, here: its symlinks
/// are followed (so the kernel's names for files under it are the mapping's own); one that
/// does not exist yet is kept as written. `/chirp/HOST[:PORT]/PATH` and
/// `chirp://HOST[:PORT]/PATH` (optionally ending in `:direct`, the default, or `:cached`)
/// name a directory or file on a Chirp server; `/http/...`, `http://...` (and https)
/// one on a web server.
fn target_of(physical: &str, ctx: &MountContext<'_>) -> Result<Target, String> {
    if let Some(target) = web_target(physical, ctx) {
        return target;
    }
    let local = |p: std::path::PathBuf| {
        let p = std::fs::canonicalize(&p).unwrap_or(p);
        Target::local(p.into_os_string().into_encoded_bytes())
    };
    let remote = physical
        .strip_prefix("chirp://")
        .or_else(|| physical.strip_prefix("/chirp/"));
    if let Some(rest) = remote {
        let (rest, direct) = match rest.rsplit_once(':') {
            Some((r, "cached")) => (r, false),
            Some((r, "direct")) => (r, true),
            _ => (rest, ctx.chirp_direct),
        };
        let authority = rest.split('/').next().unwrap_or("");
        if roost_client::split_host_port(authority).is_none() {
            return Err(format!("{physical}: expected chirp://HOST[:PORT]/PATH"));
        }
        let driver = ctx
            .chirp
            .clone()
            .ok_or_else(|| format!("{physical}: remote targets are not available here"))?;
        return Ok(Target::remote(driver, format!("/{rest}"), direct));
    }
    Ok(match physical {
        "DENY" => Target::Deny,
        "ENOENT" => Target::Enoent,
        p => local(ctx.cwd.join(p)),
    })
}

/// Parses one `--mount LOGICAL=PHYSICAL` argument.
pub fn parse_mount_spec(
    spec: &str,
    ctx: &MountContext<'_>,
) -> Result<(Vec<u8>, Target), MountFileError> {
    let err = |message: String| MountFileError {
        file: format!("--mount {spec}"),
        line: 0,
        message,
    };
    let (logical, physical) = spec
        .split_once('=')
        .ok_or_else(|| err("expected LOGICAL=PHYSICAL".into()))?;
    if !logical.starts_with('/') {
        return Err(err(format!("logical path {logical:?} is not absolute")));
    }
    if physical.is_empty() {
        return Err(err("empty physical path".into()));
    }
    Ok((
        logical.as_bytes().to_vec(),
        target_of(physical, ctx).map_err(err)?,
    ))
}

/// Expands `$VAR` and `${VAR}` using `env`; `$$` is a literal `$`.
fn expand(word: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = word.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let name: String = match chars.peek() {
            Some(&(_, '$')) => {
                chars.next();
                out.push('$');
                continue;
            }
            Some(&(_, '{')) => {
                chars.next();
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some((_, '}')) => break,
                        Some((_, ch)) => name.push(ch),
                        None => return Err(format!("unterminated ${{{name}")),
                    }
                }
                name
            }
            _ => {
                let mut name = String::new();
                while let Some(&(_, ch)) = chars.peek() {
                    if ch.is_ascii_alphanumeric() || ch == '_' {
                        name.push(ch);
                        chars.next();
                    } else {
                        break;
                    }
                }
                name
            }
        };
        if name.is_empty() {
            return Err("a '$' with no variable name".into());
        }
        match env(&name) {
            Some(v) => out.push_str(&v),
            None => return Err(format!("variable ${name} is not set")),
        }
    }
    Ok(out)
}

/// Parses the text of a mount file named `file`.
pub fn parse_mount_file(
    file: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    ctx: &MountContext<'_>,
) -> Result<Vec<(Vec<u8>, Target)>, MountFileError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let err = |message: String| MountFileError {
            file: file.to_string(),
            line: i + 1,
            message,
        };
        let line = match raw.find('#') {
            Some(pos) => &raw[..pos],
            None => raw,
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] => continue,
            [one] => {
                return Err(err(format!(
                    "{one:?} has no physical path (LOGICAL PHYSICAL)"
                )))
            }
            [logical, physical] => {
                let logical = expand(logical, env).map_err(&err)?;
                let physical = expand(physical, env).map_err(&err)?;
                if !logical.starts_with('/') {
                    return Err(err(format!("logical path {logical:?} is not absolute")));
                }
                let target = target_of(&physical, ctx).map_err(&err)?;
                out.push((logical.into_bytes(), target));
            }
            more => {
                return Err(err(format!(
                    "expected 2 fields (LOGICAL PHYSICAL), found {}",
                    more.len()
                )))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "N" => Some("7".into()),
            "HOME" => Some("/home/u".into()),
            _ => None,
        }
    }

    #[test]
    fn parses_lines_comments_and_variables() {
        let text = "# a comment\n/out.txt /scratch/out.$N.txt\n\n/h ${HOME}/x # trailing\n/s DENY\n/g ENOENT\n";
        let m = parse_mount_file("f", text, &env, &MountContext::local(Path::new("/cwd"))).unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].0, b"/out.txt");
        assert_eq!(format!("{:?}", m[0].1), "local:/scratch/out.7.txt");
        assert_eq!(format!("{:?}", m[1].1), "local:/home/u/x");
        assert!(matches!(m[2].1, Target::Deny));
        assert!(matches!(m[3].1, Target::Enoent));
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse_mount_file(
            "m.list",
            "/a /b\n/c\n",
            &env,
            &MountContext::local(Path::new("/")),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "m.list:2: \"/c\" has no physical path (LOGICAL PHYSICAL)"
        );
        let e = parse_mount_file(
            "m.list",
            "/a $NOPE\n",
            &env,
            &MountContext::local(Path::new("/")),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "m.list:1: variable $NOPE is not set");
        let e = parse_mount_file(
            "m.list",
            "rel /b\n",
            &env,
            &MountContext::local(Path::new("/")),
        )
        .unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse_mount_file(
            "m.list",
            "/a /b /c\n",
            &env,
            &MountContext::local(Path::new("/")),
        )
        .unwrap_err();
        assert!(e.message.contains("found 3"));
    }

    #[test]
    fn mount_spec_needs_equals_and_absolute_logical() {
        assert!(parse_mount_spec("/a=/b", &MountContext::local(Path::new("/"))).is_ok());
        assert!(parse_mount_spec("/a", &MountContext::local(Path::new("/"))).is_err());
        assert!(parse_mount_spec("a=/b", &MountContext::local(Path::new("/"))).is_err());
        let (_, t) = parse_mount_spec("/a=rel", &MountContext::local(Path::new("/base"))).unwrap();
        assert_eq!(format!("{t:?}"), "local:/base/rel");
    }

    #[test]
    fn chirp_targets_name_a_server_and_a_path() {
        struct Net;
        impl crate::Driver for Net {
            fn name(&self) -> &'static str {
                "chirp"
            }
        }
        let ctx = MountContext {
            chirp: Some(std::sync::Arc::new(Net)),
            ..MountContext::local(Path::new("/"))
        };
        let root = |spec: &str| parse_mount_spec(spec, &ctx).map(|(_, t)| format!("{t:?}"));
        assert_eq!(root("/d=/chirp/h:9/x/").unwrap(), "chirp:/h:9/x:direct");
        assert_eq!(root("/d=chirp://h/x:cached").unwrap(), "chirp:/h/x");
        assert_eq!(
            root("/d=chirp://h:9/x:direct").unwrap(),
            "chirp:/h:9/x:direct"
        );
        let cached_default = MountContext {
            chirp_direct: false,
            chirp: ctx.chirp.clone(),
            ..MountContext::local(Path::new("/"))
        };
        let (_, t) = parse_mount_spec("/d=/chirp/h/x", &cached_default).unwrap();
        assert_eq!(format!("{t:?}"), "chirp:/h/x");
        assert!(root("/d=chirp://h:0/x").is_err());
        let local_only = parse_mount_spec("/d=/chirp/h/x", &MountContext::local(Path::new("/")));
        assert!(local_only.is_err());
    }

    #[test]
    fn http_targets_name_a_web_server_and_a_path() {
        struct Web(&'static str);
        impl crate::Driver for Web {
            fn name(&self) -> &'static str {
                self.0
            }
        }
        let ctx = MountContext {
            http: Some(std::sync::Arc::new(Web("http"))),
            https: Some(std::sync::Arc::new(Web("https"))),
            ..MountContext::local(Path::new("/"))
        };
        let root = |spec: &str| parse_mount_spec(spec, &ctx).map(|(_, t)| format!("{t:?}"));
        assert_eq!(
            root("/sw=/http/127.0.0.1:8080/sw/").unwrap(),
            "http:/127.0.0.1:8080/sw:direct"
        );
        assert_eq!(root("/sw=http://h/sw").unwrap(), "http:/h/sw:direct");
        assert_eq!(
            root("/sw=https://h:8443/a/b").unwrap(),
            "https:/h:8443/a/b:direct"
        );
        assert_eq!(root("/sw=/https/h").unwrap(), "https:/h:direct");
        for bad in [
            "/d=http://h:0/x",
            "/d=http://:80/x",
            "/d=http://u@h/x",
            "/d=/http/h:x/y",
        ] {
            assert!(root(bad).is_err(), "{bad}");
        }
        let local_only = parse_mount_spec("/d=/http/h/x", &MountContext::local(Path::new("/")));
        assert!(local_only.is_err());
    }
}

//! Parsing mount lists: `--mount LOGICAL=PHYSICAL` and mount files (one `LOGICAL PHYSICAL`
//! mapping a line, `#` comments, `$VAR` / `${VAR}` expanded from the environment, `DENY` and
//! `ENOENT` targets). Errors name `file:line` and what is wrong.

use crate::mount::Target;
use crate::registry::Registry;
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
/// physical paths start from, and the remote drivers whose schemes name theirs
/// (`chirp://...`, `/http/...`: see [`Registry`]).
pub struct MountContext<'a> {
    pub cwd: &'a Path,
    pub drivers: &'a Registry,
}

/// No remote driver.
static NO_DRIVERS: Registry = Registry::new();

impl<'a> MountContext<'a> {
    /// Local paths only (a target naming a scheme is a local path too).
    pub fn local(cwd: &'a Path) -> MountContext<'a> {
        MountContext {
            cwd,
            drivers: &NO_DRIVERS,
        }
    }
}

/// Turns the right-hand side of a mapping into a target; relative physical paths are taken
/// from `cwd`. As a bind mount does, a local target is resolved once, here: its symlinks
/// are followed (so the kernel's names for files under it are the mapping's own); one that
/// does not exist yet is kept as written. `SCHEME://...` and `/SCHEME/...` name a file of a
/// registered remote driver.
fn target_of(physical: &str, ctx: &MountContext<'_>) -> Result<Target, String> {
    if let Some(target) = ctx.drivers.target(physical) {
        return target;
    }
    Ok(match physical {
        "DENY" => Target::Deny,
        "ENOENT" => Target::Enoent,
        p => {
            let p = ctx.cwd.join(p);
            let p = std::fs::canonicalize(&p).unwrap_or(p);
            Target::local(p.into_os_string().into_encoded_bytes())
        }
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
    fn remote_targets_go_to_the_driver_of_their_scheme() {
        struct Net;
        impl crate::Driver for Net {
            fn name(&self) -> &'static str {
                "net"
            }
            fn mount_target(&self, rest: &str, direct: bool) -> Option<(Vec<u8>, bool)> {
                let (rest, direct) = match rest.strip_suffix(":cached") {
                    Some(r) => (r, false),
                    None => (rest, direct),
                };
                (!rest.starts_with('/')).then(|| (format!("/{rest}").into_bytes(), direct))
            }
        }
        let mut drivers = Registry::new();
        drivers.add("net", std::sync::Arc::new(Net), true);
        let ctx = MountContext {
            cwd: Path::new("/cwd"),
            drivers: &drivers,
        };
        let root = |spec: &str| parse_mount_spec(spec, &ctx).map(|(_, t)| format!("{t:?}"));
        assert_eq!(root("/d=/net/h:9/x/").unwrap(), "net:/h:9/x:direct");
        assert_eq!(root("/d=net://h/x:cached").unwrap(), "net:/h/x");
        let e = root("/d=net:///x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--mount /d=net:///x: net:///x: expected net://HOST[:PORT]/PATH"
        );
        assert_eq!(root("/d=/netx/h").unwrap(), "local:/netx/h");
        let m = parse_mount_file("f", "/d net://h/y\n", &env, &ctx).unwrap();
        assert_eq!(format!("{:?}", m[0].1), "net:/h/y:direct");
        // Without the registry the same words are a local path.
        let (_, t) = parse_mount_spec("/d=/net/h/x", &MountContext::local(Path::new("/"))).unwrap();
        assert_eq!(format!("{t:?}"), "local:/net/h/x");
    }
}

//! A job's description as cctools' `job_create` takes it, parsed and checked: the executable,
//! its arguments (the first is the program's `argv[0]`), environment, a tag, and the files
//! bound into the sandbox (`task_path`) from and to paths in the export (`serv_path`).
//!
//! ```json
//! {"executable": "/bin/sh", "arguments": ["sh", "-c", "wc -l < in > out"],
//!  "environment": {"LC_ALL": "C"}, "tag": "run 7",
//!  "files": [{"task_path": "in", "serv_path": "/data/in.txt", "type": "INPUT"},
//!            {"task_path": "out", "serv_path": "/data/out.%j", "type": "OUTPUT", "binding": "COPY"}]}
//! ```
//!
//! `executable`, `arguments` and `files` are required, as in cctools; `environment`, `tag` and
//! a file's `binding` (`LINK`, the default, or `COPY`) and `tag` may be missing or null. Every
//! refusal says what was wrong. The same parser reads the records roost stores on disk, which
//! carry the description's members and an output's `size`.

use super::JobError;
use crate::jail::JailPath;
use roost_catalog::json::Value;
use roost_wire::ErrorCode;
use std::collections::BTreeMap;

/// The largest description (or id list) a client may send, in bytes.
pub const MAX_DESCRIPTION: u64 = 1024 * 1024;
/// Most arguments, environment variables and files a job may have, each.
pub const MAX_ITEMS: usize = 4096;
/// The longest path (executable, task path, server path), in bytes, as cctools' `CHIRP_PATH_MAX`.
pub const MAX_PATH: usize = 1024;
/// The longest tag kept, in bytes (cctools keeps 127).
pub const MAX_TAG: usize = 127;
/// The tag of a job described without one (cctools' choice).
pub const NO_TAG: &str = "(unknown)";

/// Whether a file is read by the job or written by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileKind {
    Input,
    Output,
}

impl FileKind {
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Input => "INPUT",
            FileKind::Output => "OUTPUT",
        }
    }
}

/// How a file is bound into the sandbox. Both give the job its own copy in roost (see
/// `docs/pool.md`); the name the client chose is kept and reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    Link,
    Copy,
}

impl Binding {
    pub fn name(self) -> &'static str {
        match self {
            Binding::Link => "LINK",
            Binding::Copy => "COPY",
        }
    }
}

/// One file of a job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobFile {
    /// Where the job sees it: relative to the sandbox, normalized, never leaving it.
    pub task_path: String,
    /// Where it lives in the export, as the client wrote it (outputs may hold `%j`, `%h`, `%s`
    /// or `%g`, replaced when the output is stored).
    pub serv_path: String,
    pub kind: FileKind,
    pub binding: Binding,
    pub tag: Option<String>,
    /// An output's size once stored.
    pub size: Option<u64>,
}

/// A checked job description.
#[derive(Clone, Debug, PartialEq)]
pub struct Description {
    pub executable: String,
    pub arguments: Vec<String>,
    pub environment: BTreeMap<String, String>,
    pub tag: String,
    /// Sorted by task path, then inputs before outputs (the order cctools reports them in).
    pub files: Vec<JobFile>,
}

fn invalid(message: String) -> JobError {
    JobError::new(ErrorCode::InvalidRequest, message)
}

/// The member `name` of `object`: `None` when missing or null.
fn member<'a>(object: &'a Value, name: &str) -> Option<&'a Value> {
    object.get(name).filter(|v| !matches!(v, Value::Null))
}

fn required<'a>(object: &'a Value, name: &str, what: &str) -> Result<&'a Value, JobError> {
    member(object, name).ok_or_else(|| invalid(format!("{what} has no \"{name}\"")))
}

/// A string member, without NUL bytes (the kernel could not take it).
fn text<'a>(value: &'a Value, what: &str) -> Result<&'a str, JobError> {
    let s = value
        .as_str()
        .ok_or_else(|| invalid(format!("{what} is not a string")))?;
    if s.contains('\0') {
        return Err(invalid(format!("{what} holds a NUL byte")));
    }
    Ok(s)
}

fn path_text<'a>(value: &'a Value, what: &str) -> Result<&'a str, JobError> {
    let s = text(value, what)?;
    if s.is_empty() {
        return Err(invalid(format!("{what} is empty")));
    }
    if s.len() >= MAX_PATH {
        return Err(JobError::new(
            ErrorCode::NameTooLong,
            format!("{what} is longer than {} bytes", MAX_PATH - 1),
        ));
    }
    Ok(s)
}

fn array<'a>(value: &'a Value, what: &str) -> Result<&'a [Value], JobError> {
    match value {
        Value::Array(items) if items.len() <= MAX_ITEMS => Ok(items),
        Value::Array(_) => Err(JobError::new(
            ErrorCode::TooBig,
            format!("{what} has more than {MAX_ITEMS} items"),
        )),
        _ => Err(invalid(format!("{what} is not an array"))),
    }
}

/// A task path made relative and normalized; `..`, absolute paths and the sandbox itself are
/// refused, so a file can never be bound outside the sandbox.
pub fn task_path(raw: &str, what: &str) -> Result<String, JobError> {
    if raw.starts_with('/') {
        return Err(invalid(format!(
            "{what} {raw:?} is absolute: it must be relative to the sandbox"
        )));
    }
    let mut parts = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(invalid(format!(
                    "{what} {raw:?} has a '..': it must stay inside the sandbox"
                )))
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(invalid(format!("{what} {raw:?} names the sandbox itself")));
    }
    Ok(parts.join("/"))
}

/// Checks that a server path names something the jail accepts.
pub fn serv_path(raw: &str, what: &str) -> Result<JailPath, JobError> {
    let path = JailPath::new(raw.as_bytes()).map_err(|e| {
        let code = ErrorCode::from_errno(e.raw_os_error().unwrap_or(libc::EINVAL));
        JobError::new(code, format!("{what} {raw:?}: {e}"))
    })?;
    if path.is_root() {
        return Err(invalid(format!("{what} {raw:?} names the export's root")));
    }
    Ok(path)
}

fn file(value: &Value, index: usize) -> Result<JobFile, JobError> {
    let what = format!("files[{index}]");
    if !matches!(value, Value::Object(_)) {
        return Err(invalid(format!("{what} is not an object")));
    }
    let kind_text = text(required(value, "type", &what)?, &format!("{what}.type"))?;
    let kind = match kind_text.to_ascii_uppercase().as_str() {
        "INPUT" => FileKind::Input,
        "OUTPUT" => FileKind::Output,
        _ => {
            return Err(invalid(format!(
                "{what}.type is {kind_text:?}: expected INPUT or OUTPUT"
            )))
        }
    };
    let binding = match member(value, "binding") {
        None => Binding::Link,
        Some(b) => {
            let b = text(b, &format!("{what}.binding"))?;
            match b.to_ascii_uppercase().as_str() {
                "LINK" => Binding::Link,
                "COPY" => Binding::Copy,
                "URL" => {
                    return Err(JobError::new(
                        ErrorCode::NotSupported,
                        format!("{what}.binding URL is not supported by roost"),
                    ))
                }
                _ => {
                    return Err(invalid(format!(
                        "{what}.binding is {b:?}: expected LINK or COPY"
                    )))
                }
            }
        }
    };
    let task = path_text(
        required(value, "task_path", &what)?,
        &format!("{what}.task_path"),
    )?;
    let task_path = task_path(task, &format!("{what}.task_path"))?;
    let serv = path_text(
        required(value, "serv_path", &what)?,
        &format!("{what}.serv_path"),
    )?;
    serv_path(serv, &format!("{what}.serv_path"))?;
    let tag = match member(value, "tag") {
        None => None,
        Some(t) => Some(text(t, &format!("{what}.tag"))?.to_string()),
    };
    let size = match member(value, "size") {
        None => None,
        Some(s) => Some(
            s.as_i64()
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| invalid(format!("{what}.size is not a size")))?,
        ),
    };
    Ok(JobFile {
        task_path,
        serv_path: serv.to_string(),
        kind,
        binding,
        tag,
        size,
    })
}

/// Cuts `tag` to at most [`MAX_TAG`] bytes, at a character boundary.
fn clip_tag(tag: &str) -> String {
    let mut end = tag.len().min(MAX_TAG);
    while !tag.is_char_boundary(end) {
        end -= 1;
    }
    tag[..end].to_string()
}

impl Description {
    /// Parses a description (or a stored record) from JSON text.
    pub fn parse(text: &[u8]) -> Result<Description, JobError> {
        let value = roost_catalog::json::parse(text)
            .map_err(|e| invalid(format!("the job description is not JSON: {e}")))?;
        Description::from_value(&value)
    }

    /// Reads a description from a parsed JSON object.
    pub fn from_value(value: &Value) -> Result<Description, JobError> {
        if !matches!(value, Value::Object(_)) {
            return Err(invalid("the job description is not a JSON object".into()));
        }
        let executable = path_text(
            required(value, "executable", "the job description")?,
            "executable",
        )?
        .to_string();
        let arguments = array(
            required(value, "arguments", "the job description")?,
            "arguments",
        )?
        .iter()
        .enumerate()
        .map(|(i, a)| text(a, &format!("arguments[{i}]")).map(str::to_string))
        .collect::<Result<Vec<_>, _>>()?;
        let mut environment = BTreeMap::new();
        match member(value, "environment") {
            None => {}
            Some(Value::Object(vars)) if vars.len() <= MAX_ITEMS => {
                for (name, v) in vars {
                    if name.is_empty() || name.contains(['=', '\0']) {
                        return Err(invalid(format!(
                            "environment variable name {name:?} is empty or holds '=' or NUL"
                        )));
                    }
                    let v = text(v, &format!("environment[{name:?}]"))?;
                    environment.insert(name.clone(), v.to_string());
                }
            }
            Some(Value::Object(_)) => {
                return Err(JobError::new(
                    ErrorCode::TooBig,
                    format!("environment has more than {MAX_ITEMS} variables"),
                ))
            }
            Some(_) => return Err(invalid("environment is not an object".into())),
        }
        let tag = match member(value, "tag") {
            None => NO_TAG.to_string(),
            Some(t) => clip_tag(text(t, "tag")?),
        };
        let mut files = array(required(value, "files", "the job description")?, "files")?
            .iter()
            .enumerate()
            .map(|(i, f)| file(f, i))
            .collect::<Result<Vec<_>, _>>()?;
        files.sort_by(|a, b| (&a.task_path, a.kind).cmp(&(&b.task_path, b.kind)));
        if let Some(pair) = files
            .windows(2)
            .find(|w| w[0].task_path == w[1].task_path && w[0].kind == w[1].kind)
        {
            return Err(invalid(format!(
                "two {} files have the task path {:?}",
                pair[0].kind.name(),
                pair[0].task_path
            )));
        }
        Ok(Description {
            executable,
            arguments,
            environment,
            tag,
            files,
        })
    }

    /// The bytes it holds: its strings, and a word for each (what a subject's jobs are
    /// charged, `--job-bytes-per-subject`).
    pub fn size(&self) -> u64 {
        const ITEM: usize = 8;
        let strings = |v: &[&str]| v.iter().map(|s| s.len() + ITEM).sum::<usize>();
        let files: usize = self
            .files
            .iter()
            .map(|f| strings(&[&f.task_path, &f.serv_path]) + f.tag.as_ref().map_or(0, |t| t.len()))
            .sum();
        let environment: usize = self.environment.iter().map(|(k, v)| strings(&[k, v])).sum();
        let arguments: usize = self.arguments.iter().map(|a| a.len() + ITEM).sum();
        (strings(&[&self.executable, &self.tag]) + arguments + environment + files) as u64
    }

    /// The description's members as JSON, in cctools' order (for a job record).
    pub fn members(&self) -> Vec<(String, Value)> {
        let files = self
            .files
            .iter()
            .map(|f| {
                let opt = |s: &Option<String>| s.clone().map_or(Value::Null, Value::String);
                Value::Object(vec![
                    ("binding".into(), Value::String(f.binding.name().into())),
                    ("serv_path".into(), Value::String(f.serv_path.clone())),
                    (
                        "size".into(),
                        f.size.map_or(Value::Null, |n| Value::Int(n as i64)),
                    ),
                    ("tag".into(), opt(&f.tag)),
                    ("task_path".into(), Value::String(f.task_path.clone())),
                    ("type".into(), Value::String(f.kind.name().into())),
                ])
            })
            .collect();
        vec![
            (
                "arguments".into(),
                Value::Array(
                    self.arguments
                        .iter()
                        .map(|a| Value::String(a.clone()))
                        .collect(),
                ),
            ),
            (
                "environment".into(),
                Value::Object(
                    self.environment
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                        .collect(),
                ),
            ),
            ("files".into(), Value::Array(files)),
        ]
    }
}

/// Parses the JSON array of job ids that `job_commit`, `job_kill`, `job_status` and
/// `job_reap` carry. Ids are integers, as cctools requires; at most [`MAX_ITEMS`] of them.
pub fn parse_ids(text: &[u8]) -> Result<Vec<i64>, JobError> {
    let value = roost_catalog::json::parse(text)
        .map_err(|e| invalid(format!("the job id list is not JSON: {e}")))?;
    let items = array(&value, "the job id list")?;
    items
        .iter()
        .map(|item| match item {
            Value::Int(id) => Ok(*id),
            other => Err(invalid(format!(
                "the job id list holds {}, not an integer",
                other.to_json()
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Description, JobError> {
        Description::parse(text.as_bytes())
    }

    const GOOD: &str = r#"{"executable":"/bin/sh","arguments":["sh","-c","x"],
        "environment":{"B":"2","A":"1"},"tag":"t",
        "files":[{"task_path":"./out","serv_path":"/o.%j","type":"output","binding":"COPY"},
                 {"task_path":"in","serv_path":"/data/in","type":"INPUT","binding":null}]}"#;

    #[test]
    fn a_full_description_parses_and_sorts_its_files() {
        let d = parse(GOOD).unwrap();
        assert_eq!(d.executable, "/bin/sh");
        assert_eq!(d.arguments, ["sh", "-c", "x"]);
        assert_eq!(d.environment.keys().collect::<Vec<_>>(), ["A", "B"]);
        assert_eq!(d.files[0].task_path, "in");
        assert_eq!(d.files[0].binding, Binding::Link);
        assert_eq!(d.files[1].task_path, "out");
        assert_eq!(d.files[1].kind, FileKind::Output);
        assert_eq!(d.files[1].binding, Binding::Copy);
    }

    #[test]
    fn a_description_s_size_counts_its_strings() {
        let d = parse(GOOD).unwrap();
        // "/bin/sh" "t" | "sh" "-c" "x" | "A" "1" "B" "2" | "in" "/data/in" "out" "/o.%j"
        // (task paths are normalized), and 8 for each of the 13.
        assert_eq!(d.size(), 8 + 5 + 4 + 18 + 13 * 8);
        let big = format!(
            r#"{{"executable":"e","arguments":[],"files":[],"environment":{{"X":"{}"}}}}"#,
            "x".repeat(10_000)
        );
        assert!(parse(&big).unwrap().size() > 10_000);
    }

    #[test]
    fn a_record_reads_back_as_the_same_description() {
        let d = parse(GOOD).unwrap();
        let mut members = d.members();
        members.push(("executable".into(), Value::String(d.executable.clone())));
        members.push(("tag".into(), Value::String(d.tag.clone())));
        let again = Description::from_value(&Value::Object(members)).unwrap();
        assert_eq!(again, d);
    }

    #[test]
    fn missing_optional_members_take_cctools_defaults() {
        let d = parse(r#"{"executable":"/bin/true","arguments":[],"files":[]}"#).unwrap();
        assert_eq!(d.tag, NO_TAG);
        assert!(d.environment.is_empty());
        let long = "x".repeat(300);
        let d = parse(&format!(
            r#"{{"executable":"e","arguments":[],"files":[],"tag":"{long}"}}"#
        ))
        .unwrap();
        assert_eq!(d.tag.len(), MAX_TAG);
    }

    #[test]
    fn malformed_descriptions_are_refused_with_a_reason() {
        let cases: &[(&str, ErrorCode, &str)] = &[
            ("{bad", ErrorCode::InvalidRequest, "not JSON"),
            ("[1]", ErrorCode::InvalidRequest, "not a JSON object"),
            (
                r#"{"arguments":[],"files":[]}"#,
                ErrorCode::InvalidRequest,
                "\"executable\"",
            ),
            (
                r#"{"executable":"e","files":[]}"#,
                ErrorCode::InvalidRequest,
                "\"arguments\"",
            ),
            (
                r#"{"executable":"e","arguments":[]}"#,
                ErrorCode::InvalidRequest,
                "\"files\"",
            ),
            (
                r#"{"executable":1,"arguments":[],"files":[]}"#,
                ErrorCode::InvalidRequest,
                "not a string",
            ),
            (
                r#"{"executable":"e","arguments":[2],"files":[]}"#,
                ErrorCode::InvalidRequest,
                "arguments[0]",
            ),
            (
                r#"{"executable":"e\u0000","arguments":[],"files":[]}"#,
                ErrorCode::InvalidRequest,
                "NUL",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[],"environment":[]}"#,
                ErrorCode::InvalidRequest,
                "environment",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[],"environment":{"A=B":"1"}}"#,
                ErrorCode::InvalidRequest,
                "'='",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[{"task_path":"a","serv_path":"/a","type":"BOTH"}]}"#,
                ErrorCode::InvalidRequest,
                "INPUT or OUTPUT",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[{"task_path":"a","serv_path":"/a","type":"INPUT","binding":"SYMLINK"}]}"#,
                ErrorCode::InvalidRequest,
                "LINK or COPY",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[{"task_path":"a","serv_path":"chirp://h/a","type":"INPUT","binding":"URL"}]}"#,
                ErrorCode::NotSupported,
                "URL",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[{"task_path":"../a","serv_path":"/a","type":"INPUT"}]}"#,
                ErrorCode::InvalidRequest,
                "'..'",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[{"task_path":"/etc/a","serv_path":"/a","type":"INPUT"}]}"#,
                ErrorCode::InvalidRequest,
                "absolute",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[{"task_path":".","serv_path":"/a","type":"INPUT"}]}"#,
                ErrorCode::InvalidRequest,
                "sandbox itself",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[{"task_path":"a","serv_path":"/../..","type":"INPUT"}]}"#,
                ErrorCode::InvalidRequest,
                "root",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[{"task_path":"a","serv_path":"/d/.__acl","type":"INPUT"}]}"#,
                ErrorCode::NotAuthorized,
                ".__acl",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[{"task_path":"a","serv_path":"/a","type":"INPUT"},{"task_path":"./a","serv_path":"/b","type":"INPUT"}]}"#,
                ErrorCode::InvalidRequest,
                "two INPUT",
            ),
            (
                r#"{"executable":"e","arguments":[],"files":[7]}"#,
                ErrorCode::InvalidRequest,
                "files[0]",
            ),
        ];
        for (text, code, needle) in cases {
            let err = parse(text).unwrap_err();
            assert_eq!(err.code, *code, "{text}: {err}");
            assert!(err.message.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn limits_on_sizes_are_enforced() {
        let long = "a".repeat(MAX_PATH);
        let err = parse(&format!(
            r#"{{"executable":"{long}","arguments":[],"files":[]}}"#
        ))
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::NameTooLong);
        let many = vec!["\"a\""; MAX_ITEMS + 1].join(",");
        let err = parse(&format!(
            r#"{{"executable":"e","arguments":[{many}],"files":[]}}"#
        ))
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::TooBig);
    }

    #[test]
    fn id_lists_are_arrays_of_integers() {
        assert_eq!(parse_ids(b"[1, 2,3]").unwrap(), [1, 2, 3]);
        assert_eq!(parse_ids(b" [] ").unwrap(), Vec::<i64>::new());
        for bad in [&b"1"[..], b"[1.5]", b"[\"1\"]", b"{}", b"[", b""] {
            assert_eq!(
                parse_ids(bad).unwrap_err().code,
                ErrorCode::InvalidRequest,
                "{bad:?}"
            );
        }
    }
}

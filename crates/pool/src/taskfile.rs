//! Bags of tasks: the task file `roost pool run` reads, and tasks made from a command
//! template over input files.
//!
//! A task file has one task a line, `OUTPUTS : INPUTS : COMMAND`; `#` starts a comment line
//! and blank lines are skipped:
//!
//! ```text
//! # outputs        : inputs                 : command, run by /bin/sh in the task's sandbox
//! counts/a.count   : data/a.txt             : wc -l < a.txt > a.count
//! b.sorted=out     : data/b.txt=in ./sortit : ./sortit < in > out
//! ```
//!
//! Files are words separated by blanks (write a name with blanks, `:`, `=` or `"` in double
//! quotes, with `\"` and `\\` inside). A word is `LOCAL` or `LOCAL=TASK`: `LOCAL` is the
//! path on this machine (inputs relative to the current directory, outputs to the output
//! directory), `TASK` the path in the task's sandbox, by default `LOCAL` itself when that is
//! relative and has no `..`, else its last component. The command is the rest of the line,
//! as written. A mistake is reported as `line N: why`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// The longest line read.
pub const MAX_LINE: usize = 64 * 1024;

/// A file of a task: where it is here, and where the task sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSpec {
    pub local: PathBuf,
    pub task_path: String,
}

/// One task of the bag.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// How the task is shown: `line N`, or its input file for a template.
    pub name: String,
    pub inputs: Vec<FileSpec>,
    pub outputs: Vec<FileSpec>,
    /// Run by `/bin/sh -c` in the sandbox (a plain one directly: `worker::job_argv`).
    pub command: String,
    /// How much work the task is, in any unit (complib: cells); 1 unless known.
    pub cost: f64,
}

/// A mistake in a task file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFileError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for TaskFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// One word of a file list: its text, and where an unquoted `=` split it.
struct Word {
    local: String,
    task: Option<String>,
}

/// Splits `text` at its first `count` unquoted `:` characters.
fn split_fields(text: &str, count: usize) -> Vec<&str> {
    let mut fields = Vec::new();
    let mut quoted = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if fields.len() == count {
            break;
        }
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ':' if !quoted => {
                fields.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    fields.push(&text[start..]);
    fields
}

/// The words of a file list.
fn words(text: &str) -> Result<Vec<Word>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut parts = vec![String::new()];
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match c {
                '"' => quoted = !quoted,
                '\\' if quoted => match chars.next() {
                    Some(e @ ('"' | '\\')) => parts.last_mut().unwrap().push(e),
                    Some(other) => {
                        return Err(format!(
                            "\\{other} in quotes: only \\\" and \\\\ are escapes"
                        ))
                    }
                    None => return Err("a quote is not closed".into()),
                },
                '=' if !quoted && parts.len() == 1 => parts.push(String::new()),
                c if c.is_whitespace() && !quoted => break,
                c => parts.last_mut().unwrap().push(c),
            }
        }
        if quoted {
            return Err("a quote is not closed".into());
        }
        let task = if parts.len() == 2 { parts.pop() } else { None };
        let local = parts.pop().unwrap_or_default();
        out.push(Word { local, task });
    }
}

/// Checks a path in the sandbox: relative, not empty, no `..`, not one of the sandbox's own.
pub fn check_task_path(path: &str) -> Result<(), String> {
    let p = Path::new(path);
    if path.is_empty() {
        return Err("an empty task path".into());
    }
    if p.is_absolute() {
        return Err(format!("task path {path:?} must be relative"));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!("task path {path:?} may not hold .."));
    }
    if path.starts_with(".roost.") {
        return Err(format!("task path {path:?} is the sandbox's own"));
    }
    if path.len() >= 1024 || path.contains('\0') {
        return Err(format!("task path {path:.40}...: too long"));
    }
    Ok(())
}

/// The sandbox path a local path gets by default.
fn default_task_path(local: &str) -> Result<String, String> {
    let p = Path::new(local);
    let clean = !p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if clean {
        let normal: PathBuf = p
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        return Ok(normal.to_string_lossy().into_owned());
    }
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{local:?} names no file; write {local}=NAME"))
}

fn file_specs(text: &str, what: &str) -> Result<Vec<FileSpec>, String> {
    words(text)
        .map_err(|e| format!("{what}: {e}"))?
        .into_iter()
        .map(|w| {
            if w.local.is_empty() {
                return Err(format!("{what}: an empty file name"));
            }
            let task_path = match w.task {
                Some(t) => t,
                None => default_task_path(&w.local).map_err(|e| format!("{what}: {e}"))?,
            };
            check_task_path(&task_path).map_err(|e| format!("{what}: {e}"))?;
            Ok(FileSpec {
                local: PathBuf::from(w.local),
                task_path,
            })
        })
        .collect()
}

/// Checks that no task path appears twice in a task.
fn distinct_task_paths(task: &Task) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for f in task.inputs.iter().chain(&task.outputs) {
        if !seen.insert(f.task_path.as_str()) {
            return Err(format!("task path {:?} is named twice", f.task_path));
        }
    }
    Ok(())
}

/// Parses a task file. Only the text is checked here; [`check_files`] looks at the disk.
pub fn parse(text: &[u8]) -> Result<Vec<Task>, TaskFileError> {
    let mut tasks = Vec::new();
    let mut writers: BTreeMap<PathBuf, usize> = BTreeMap::new();
    for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = index + 1;
        let fail = |message: String| TaskFileError { line, message };
        if raw.len() > MAX_LINE {
            return Err(fail(format!("longer than {MAX_LINE} bytes")));
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = std::str::from_utf8(raw).map_err(|_| fail("not UTF-8".into()))?;
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let fields = split_fields(trimmed, 2);
        if fields.len() != 3 {
            return Err(fail(
                "expected OUTPUTS : INPUTS : COMMAND (two colons outside quotes)".into(),
            ));
        }
        let outputs = file_specs(fields[0], "outputs").map_err(fail)?;
        let inputs = file_specs(fields[1], "inputs").map_err(fail)?;
        let command = fields[2].trim().to_string();
        if command.is_empty() {
            return Err(fail("no command after the second ':'".into()));
        }
        let task = Task {
            name: format!("line {line}"),
            inputs,
            outputs,
            command,
            cost: 1.0,
        };
        distinct_task_paths(&task).map_err(fail)?;
        for out in &task.outputs {
            if let Some(first) = writers.insert(out.local.clone(), line) {
                return Err(fail(format!(
                    "output {} is also written by line {first}",
                    out.local.display()
                )));
            }
        }
        tasks.push(task);
    }
    Ok(tasks)
}

/// Checks that every input of every task is a readable regular file; the error names the
/// task and the file.
pub fn check_files(tasks: &[Task]) -> Result<(), String> {
    for task in tasks {
        for input in &task.inputs {
            match std::fs::metadata(&input.local) {
                Ok(m) if m.is_file() => {}
                Ok(_) => {
                    return Err(format!(
                        "{}: input {} is not a regular file",
                        task.name,
                        input.local.display()
                    ))
                }
                Err(e) => {
                    return Err(format!(
                        "{}: input {}: {e}",
                        task.name,
                        input.local.display()
                    ))
                }
            }
        }
    }
    Ok(())
}

/// Expands a template for one input file: `{}` is the input's sandbox name, `{.}` the same
/// without its extension, `{#}` the task's number from 1.
pub fn expand(template: &str, task_path: &str, number: usize) -> String {
    let stem = match task_path.rfind('.') {
        Some(dot) if dot > 0 => &task_path[..dot],
        _ => task_path,
    };
    template
        .replace("{.}", stem)
        .replace("{#}", &number.to_string())
        .replace("{}", task_path)
}

/// A task per input file from a command template: each file is staged under its own name,
/// with `extra` inputs (e.g. the program) staged for every task; `outputs` are templates of
/// the files to bring back (also their names in the output directory).
pub fn from_template(
    command: &str,
    outputs: &[String],
    extra: &[PathBuf],
    files: &[PathBuf],
) -> Result<Vec<Task>, String> {
    let mut extras = Vec::new();
    for e in extra {
        let task_path = default_task_path(&e.to_string_lossy())?;
        extras.push(FileSpec {
            local: e.clone(),
            task_path: Path::new(&task_path)
                .file_name()
                .map_or(task_path.clone(), |n| n.to_string_lossy().into_owned()),
        });
    }
    let mut writers: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut tasks = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| format!("{}: names no file", file.display()))?;
        let mut inputs = extras.clone();
        inputs.push(FileSpec {
            local: file.clone(),
            task_path: name.clone(),
        });
        let mut outs = Vec::new();
        for template in outputs {
            let path = expand(template, &name, i + 1);
            check_task_path(&path).map_err(|e| format!("--output {template}: {e}"))?;
            if let Some(first) = writers.insert(PathBuf::from(&path), file.display().to_string()) {
                return Err(format!(
                    "--output {template}: {path} would be written for both {first} and {}",
                    file.display()
                ));
            }
            outs.push(FileSpec {
                local: PathBuf::from(&path),
                task_path: path,
            });
        }
        let task = Task {
            name: file.display().to_string(),
            inputs,
            outputs: outs,
            command: expand(command, &name, i + 1),
            cost: 1.0,
        };
        distinct_task_paths(&task).map_err(|e| format!("{}: {e}", task.name))?;
        tasks.push(task);
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(local: &str, task: &str) -> FileSpec {
        FileSpec {
            local: PathBuf::from(local),
            task_path: task.into(),
        }
    }

    #[test]
    fn a_task_file_with_every_form() {
        let text = b"# a comment\n\n\
            counts/a.count : data/a.txt : wc -l < a.txt > counts/a.count\r\n\
            b.out=out : \"my file.txt\"=in /usr/bin/prog ./x.sh : ./prog < in > out; echo a:b\n\
            : : true\n";
        let tasks = parse(text).unwrap();
        assert_eq!(tasks.len(), 3);
        assert_eq!(tasks[0].name, "line 3");
        assert_eq!(tasks[0].outputs, [spec("counts/a.count", "counts/a.count")]);
        assert_eq!(tasks[0].inputs, [spec("data/a.txt", "data/a.txt")]);
        assert_eq!(tasks[0].command, "wc -l < a.txt > counts/a.count");
        assert_eq!(tasks[1].outputs, [spec("b.out", "out")]);
        assert_eq!(
            tasks[1].inputs,
            [
                spec("my file.txt", "in"),
                spec("/usr/bin/prog", "prog"),
                spec("./x.sh", "x.sh")
            ]
        );
        assert_eq!(tasks[1].command, "./prog < in > out; echo a:b");
        assert!(tasks[2].inputs.is_empty() && tasks[2].outputs.is_empty());
    }

    #[test]
    fn mistakes_name_their_line() {
        let cases: [(&[u8], usize, &str); 9] = [
            (b"a : b\n", 1, "expected OUTPUTS : INPUTS : COMMAND"),
            (b"#\nout : in :   \n", 2, "no command"),
            (b"\"a : b : c\n", 1, "expected OUTPUTS"),
            (b"x=\"a\\q\" : : y\n", 1, "only \\\" and \\\\ are escapes"),
            (b".. : in : cat\n", 1, "names no file"),
            (b"o=../x : in : cat\n", 1, "may not hold .."),
            (b"o=/abs : in : cat\n", 1, "must be relative"),
            (b"o : o : cat\n", 1, "named twice"),
            (
                b"a : : x\n\nb=c : : y\na=d : : z\n",
                4,
                "also written by line 1",
            ),
        ];
        for (text, line, words) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{e}");
            assert!(e.message.contains(words), "{e} lacks {words}");
        }
        assert_eq!(
            parse(b"x : : \xff\n").unwrap_err().to_string(),
            "line 1: not UTF-8"
        );
        assert!(parse(b"o=.roost.stdout : : true\n").is_err());
    }

    #[test]
    fn random_mutated_and_cut_task_files_never_panic() {
        let good = "# t\nout/a=x \"q \\\" r\"=y : in/a=\"z w\" p : ./p < z > x\n\
                    b : c=d : sh -c 'a:b'\n";
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..5000 {
            let mut bytes = good.as_bytes().to_vec();
            match round % 3 {
                0 => bytes.truncate(next() as usize % (bytes.len() + 1)),
                1 => {
                    for _ in 0..1 + next() % 4 {
                        let at = next() as usize % bytes.len();
                        let alphabet = b"\":= \\\n.#/\xc3a";
                        bytes[at] = alphabet[next() as usize % alphabet.len()];
                    }
                }
                _ => bytes = (0..next() % 200).map(|_| next() as u8).collect(),
            }
            if let Ok(tasks) = parse(&bytes) {
                for t in tasks {
                    assert!(!t.command.is_empty());
                    for f in t.inputs.iter().chain(&t.outputs) {
                        check_task_path(&f.task_path).unwrap();
                    }
                }
            }
        }
    }

    #[test]
    fn templates_make_a_task_per_file() {
        let files = [PathBuf::from("data/a.txt"), PathBuf::from("/x/b.fa")];
        let tasks = from_template(
            "./count {} > {.}.n # {#}",
            &["{.}.n".into()],
            &[PathBuf::from("bin/count")],
            &files,
        )
        .unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[1].command, "./count b.fa > b.n # 2");
        assert_eq!(
            tasks[1].inputs,
            [spec("bin/count", "count"), spec("/x/b.fa", "b.fa")]
        );
        assert_eq!(tasks[1].outputs, [spec("b.n", "b.n")]);
        let clash = from_template("x", &["out".into()], &[], &files).unwrap_err();
        assert!(clash.contains("both data/a.txt and /x/b.fa"), "{clash}");
    }
}

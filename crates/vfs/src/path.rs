//! Lexical helpers on byte paths: joining, splitting into components and prefix tests. No
//! system calls here.

/// Joins `base` (absolute) and `rel`: `rel` wins if it is absolute.
pub fn join(base: &[u8], rel: &[u8]) -> Vec<u8> {
    if rel.first() == Some(&b'/') {
        return rel.to_vec();
    }
    let mut out = Vec::with_capacity(base.len() + rel.len() + 1);
    out.extend_from_slice(base);
    if out.last() != Some(&b'/') {
        out.push(b'/');
    }
    out.extend_from_slice(rel);
    out
}

/// The non-empty components of `path` (`.` kept, `..` kept: the walk gives them meaning).
pub fn components(path: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    path.split(|&b| b == b'/').filter(|c| !c.is_empty())
}

/// Lexically normalises an absolute path: collapses `//`, drops `.`, applies `..`. Only for
/// mount-table entries, whose meaning is lexical; traced paths go through the walk instead.
pub fn normalize(path: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for c in components(path) {
        match c {
            b"." => {}
            b".." => {
                parts.pop();
            }
            _ => parts.push(c),
        }
    }
    let mut out = Vec::with_capacity(path.len());
    for p in &parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// If `path` is `prefix` or lies below it (on a component boundary), the rest after the
/// prefix: empty, or starting with `/`.
pub fn strip_prefix<'a>(path: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    if prefix == b"/" {
        return Some(if path == b"/" { &path[1..] } else { path });
    }
    let rest = path.strip_prefix(prefix)?;
    if rest.is_empty() || rest[0] == b'/' {
        Some(rest)
    } else {
        None
    }
}

/// The directory holding an absolute normalised path (`/` for `/` itself).
pub fn parent(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) | None => b"/",
        Some(i) => &path[..i],
    }
}

/// The first component of an absolute driver path (a server's `HOST[:PORT]`, for the
/// drivers that reach many) and the rest (`/` at least).
pub fn split_first(path: &[u8]) -> (&[u8], &[u8]) {
    let path = path.strip_prefix(b"/").unwrap_or(path);
    match path.iter().position(|&b| b == b'/') {
        Some(i) => (&path[..i], &path[i..]),
        None => (path, b"/"),
    }
}

/// `path` as the kernel walks it, spelt without what changes nothing there: repeated
/// slashes, and `.` components other than the last (`./f` is `f`, `a/./b` is `a/b`; a
/// final `.` and a trailing slash are kept, since the kernel checks them).
pub fn without_dots(path: &[u8]) -> Vec<u8> {
    let parts: Vec<&[u8]> = components(path).collect();
    let mut out = Vec::with_capacity(path.len());
    if path.first() == Some(&b'/') {
        out.push(b'/');
    }
    let last = parts.len().saturating_sub(1);
    for (i, part) in parts.iter().enumerate() {
        if *part == b"." && i != last {
            continue;
        }
        if !out.is_empty() && out.last() != Some(&b'/') {
            out.push(b'/');
        }
        out.extend_from_slice(part);
    }
    if path.ends_with(b"/") && out.last() != Some(&b'/') {
        out.push(b'/');
    }
    out
}

/// True when the path has a `..` component (the kernel would climb physically).
pub fn has_dotdot(path: &[u8]) -> bool {
    components(path).any(|c| c == b"..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_dots_keeps_what_the_kernel_checks() {
        for (given, tidy) in [
            (&b"./f"[..], &b"f"[..]),
            (b"a/./b", b"a/b"),
            (b"a//b/", b"a/b/"),
            (b"././f", b"f"),
            (b"dir/.", b"dir/."),
            (b".", b"."),
            (b"./", b"./"),
            (b"/x/./y", b"/x/y"),
            (b"../a/./b", b"../a/b"),
        ] {
            assert_eq!(
                without_dots(given),
                tidy,
                "{}",
                String::from_utf8_lossy(given)
            );
        }
    }

    #[test]
    fn parent_of_absolute_paths() {
        assert_eq!(parent(b"/a/b"), b"/a");
        assert_eq!(parent(b"/a"), b"/");
        assert_eq!(parent(b"/"), b"/");
    }

    #[test]
    fn join_keeps_absolute_rel() {
        assert_eq!(join(b"/a", b"/b"), b"/b");
        assert_eq!(join(b"/a", b"b/c"), b"/a/b/c");
        assert_eq!(join(b"/", b"b"), b"/b");
    }

    #[test]
    fn normalize_applies_dots() {
        assert_eq!(normalize(b"/a//b/./../c/"), b"/a/c");
        assert_eq!(normalize(b"/.."), b"/");
    }

    #[test]
    fn strip_prefix_respects_component_boundaries() {
        assert_eq!(strip_prefix(b"/data/x", b"/data"), Some(&b"/x"[..]));
        assert_eq!(strip_prefix(b"/data", b"/data"), Some(&b""[..]));
        assert_eq!(strip_prefix(b"/database", b"/data"), None);
        assert_eq!(strip_prefix(b"/x/y", b"/"), Some(&b"/x/y"[..]));
    }
}

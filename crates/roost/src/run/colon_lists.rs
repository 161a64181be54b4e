//! Warns about remote names that a colon-separated list would split. `PATH`,
//! `LD_LIBRARY_PATH`, `PYTHONPATH` and their kind split at every `:`, so
//! `/chirp/h:9201/lib` in one becomes `/chirp/h` (the default port: maybe another user's
//! server) and `9201/lib`. Every remote name has a colon-free spelling, `/chirp/h+9201/lib`;
//! this says which to write.

/// Whether the variable `name` holds a colon-separated list of paths.
fn is_path_list(name: &str) -> bool {
    ["PATH", "PATHS", "DIRS"]
        .iter()
        .any(|end| name.ends_with(end))
        || ["LD_PRELOAD", "PERL5LIB", "PERLLIB", "RUBYLIB"].contains(&name)
}

/// The remote names in `value` spelt with a port after a colon (`/chirp/h:9201/x`,
/// `/https/h:8443/x`), each as written and as it should be written: found as the list's
/// reader sees them, a server's root (`/chirp/h`) followed by an item that starts with a
/// port.
fn colon_spelt(value: &str) -> Vec<(String, String)> {
    let items: Vec<&str> = value.split(':').collect();
    items
        .windows(2)
        .filter(|pair| {
            let is_server_root = ["/chirp/", "/http/", "/https/"].iter().any(|scheme| {
                pair[0]
                    .strip_prefix(scheme)
                    .is_some_and(|host| !host.is_empty() && !host.contains('/'))
            });
            let port_len = pair[1].bytes().take_while(u8::is_ascii_digit).count();
            let after_port = &pair[1][port_len..];
            is_server_root && port_len > 0 && (after_port.is_empty() || after_port.starts_with('/'))
        })
        .map(|pair| {
            (
                format!("{}:{}", pair[0], pair[1]),
                format!("{}+{}", pair[0], pair[1]),
            )
        })
        .collect()
}

/// One line per remote name that a colon-separated variable of `env` would split.
pub fn warnings(env: impl Iterator<Item = (String, String)>) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, value) in env.filter(|(name, _)| is_path_list(name)) {
        for (written, colon_free) in colon_spelt(&value) {
            lines.push(format!(
                "roost run: warning: {name} holds {written}, which splits at its ':' (a \
                 program looks in two wrong places); write {colon_free}"
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Iterator<Item = (String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn colon_spelt_names_in_path_lists_are_named_with_their_colon_free_spelling() {
        let lines = warnings(env(&[(
            "LD_LIBRARY_PATH",
            "/usr/lib:/chirp/127.0.0.1:9201/zd:/https/h:8443/lib/x",
        )]));
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains("holds /chirp/127.0.0.1:9201/zd,"),
            "{lines:?}"
        );
        assert!(
            lines[0].ends_with("write /chirp/127.0.0.1+9201/zd"),
            "{lines:?}"
        );
        assert!(lines[1].ends_with("write /https/h+8443/lib/x"), "{lines:?}");
    }

    #[test]
    fn colon_free_names_single_paths_and_other_variables_are_left_alone() {
        let quiet = warnings(env(&[
            ("PYTHONPATH", "/chirp/h+9201/py:/chirp/h/py"),
            ("DATA", "/chirp/h:9201/d"),
            ("PATH", "/usr/bin:/chirp/h/bin"),
        ]));
        assert!(quiet.is_empty(), "{quiet:?}");
        assert_eq!(warnings(env(&[("PATH", "/chirp/h:9/b")])).len(), 1);
    }
}

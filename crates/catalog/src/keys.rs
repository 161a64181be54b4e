//! Catalog keys: the shared secrets with which servers sign their reports and the catalog
//! checks them (`--catalog-key NAME=FILE` on `roost serve` and on `roost catalog`). A key
//! file holds the secret (the whole file, less one trailing newline) and must be private to
//! its owner: one that its group or others may read or write is refused, as ssh refuses
//! such a private key, since the secret is then as good as theirs.

use std::path::Path;

/// One named secret.
#[derive(Clone)]
pub struct Key {
    pub name: String,
    secret: Vec<u8>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key").field("name", &self.name).finish()
    }
}

/// Whether `name` can name a key: 1 to 64 letters, digits and `. _ - @ +` (the names
/// Chirp's hmac keys take).
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@' | b'+'))
}

impl Key {
    /// A key from its name and secret.
    pub fn new(name: &str, secret: &[u8]) -> Result<Key, String> {
        if !is_valid_name(name) {
            return Err(format!(
                "key name {name:?}: use 1 to 64 letters, digits and . _ - @ +"
            ));
        }
        if secret.is_empty() {
            return Err(format!("key {name}: the secret is empty"));
        }
        Ok(Key {
            name: name.to_string(),
            secret: secret.to_vec(),
        })
    }

    /// `NAME=FILE`: the key `NAME` with the secret in `FILE` (see [`read_key_file`]).
    pub fn from_spec(spec: &str) -> Result<Key, String> {
        let (name, file) = spec
            .split_once('=')
            .ok_or_else(|| "expected NAME=FILE".to_string())?;
        let secret = read_key_file(Path::new(file))?;
        Key::new(name, &secret)
    }

    pub fn secret(&self) -> &[u8] {
        &self.secret
    }
}

/// The keys a catalog trusts, found by name.
#[derive(Clone, Debug, Default)]
pub struct Keys(Vec<Key>);

impl Keys {
    /// The keys, refusing two of one name.
    pub fn new(keys: Vec<Key>) -> Result<Keys, String> {
        for (i, k) in keys.iter().enumerate() {
            if keys[..i].iter().any(|other| other.name == k.name) {
                return Err(format!("key {} is given twice", k.name));
            }
        }
        Ok(Keys(keys))
    }

    pub fn find(&self, name: &str) -> Option<&Key> {
        self.0.iter().find(|k| k.name == name)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The secret in a key file, as every roost key file is read (see
/// [`roost_client::read_secret_file`]: private to its owner, regular, not empty).
pub fn read_key_file(path: &Path) -> Result<Vec<u8>, String> {
    roost_client::read_secret_file(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn key_files_must_be_private_and_hold_a_secret() {
        let dir = std::env::temp_dir().join(format!("roost-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pool.key");
        std::fs::write(&file, "s3cret\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let spec = format!("pool={}", file.display());
        let err = Key::from_spec(&spec).unwrap_err();
        assert!(
            err.contains("mode is 0644") && err.contains("chmod 600") && err.contains("pool.key"),
            "{err}"
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let key = Key::from_spec(&spec).unwrap();
        assert_eq!((key.name.as_str(), key.secret()), ("pool", &b"s3cret"[..]));
        assert!(
            format!("{key:?}").find("s3cret").is_none(),
            "the secret is not shown"
        );
        std::fs::write(&file, "\n").unwrap();
        assert!(Key::from_spec(&spec).unwrap_err().contains("is empty"));
        assert!(Key::from_spec("pool")
            .unwrap_err()
            .contains("expected NAME=FILE"));
        assert!(Key::from_spec(&format!("bad name={}", file.display())).is_err());
        assert!(Key::from_spec("pool=/nonexistent/key")
            .unwrap_err()
            .contains("cannot read the key file /nonexistent/key"));
        let a = Key::new("a", b"x").unwrap();
        assert!(Keys::new(vec![a.clone(), a]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

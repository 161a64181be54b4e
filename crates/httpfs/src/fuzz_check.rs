//! The properties the parsers of served files must have, shared by the garbage tests and
//! the cargo-fuzz targets (`fuzz/`): no input makes a parser panic, and whatever roost's
//! own parsers (index, signature, public key) accept writes back to text that parses to
//! the same thing.

/// Runs both parsers over `data`; panics if the property fails. Returns how many parsers
/// accepted it.
pub fn check_parsers(data: &[u8]) -> usize {
    let mut accepted = 0;
    if let Ok(entries) = crate::index::parse(data) {
        let text = crate::index::write(&entries);
        let mut again = crate::index::parse(&text).expect("a written index parses");
        let mut sorted = entries;
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        again.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(again, sorted);
        assert_eq!(crate::index::write(&again), text);
        accepted += 1;
    }
    if crate::growfs::parse(data).is_ok() {
        accepted += 1;
    }
    accepted
}

/// Runs the signature-file and public-key parsers over `data`; panics if the property
/// fails. Returns how many parsers accepted it.
pub fn check_signature_parsers(data: &[u8]) -> usize {
    let mut accepted = 0;
    if let Ok(sig) = crate::sign::parse(data) {
        let text = crate::sign::write(&sig);
        // Checking it against an index never panics either.
        let _ = crate::sign::check(Some(data), data, &sig.path, &[sig.key]);
        assert_eq!(
            crate::sign::parse(&text),
            Ok(sig),
            "a written signature parses"
        );
        accepted += 1;
    }
    if let Ok(key) = crate::sign::PublicKey::parse(data) {
        assert_eq!(
            crate::sign::PublicKey::parse(key.line().as_bytes()),
            Ok(key)
        );
        accepted += 1;
    }
    accepted
}

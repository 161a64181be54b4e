//! The properties the parsers of served files must have, shared by the garbage tests and
//! the cargo-fuzz targets (`fuzz/`): no input makes a parser panic, and whatever roost's
//! own parsers (index, signature, public key, kept index) accept writes back to text that parses to
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
        let _ = crate::sign::check(Some(data), data, &sig.path, &[sig.key], sig.expires);
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

/// Runs the parser of indexes kept in the cache (`net/notes.rs`) over `data`; panics if
/// the property fails (what it accepts encodes to bytes that decode to the same note).
/// Returns 1 if it accepted it.
pub fn check_note_parser(data: &[u8]) -> usize {
    crate::net::check_note(data)
}

/// A small deterministic generator (xorshift) for the garbage tests: the same seed gives
/// the same garbage, so a failure replays.
#[cfg(test)]
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

/// Runs `check` over 20,000 pieces of garbage drawn from `seed`: the texts of `valid` in
/// turn, each mutated up to five times (a byte changed, a truncation, an insertion of one
/// of `inserts`, a deletion), and every seventh round fewer than `random_len` random bytes
/// instead.
#[cfg(test)]
pub(crate) fn check_garbage(
    seed: u64,
    valid: &[Vec<u8>],
    inserts: &[u8],
    random_len: u64,
    check: impl Fn(&[u8]) -> usize,
) {
    let mut next = xorshift(seed);
    for round in 0..20_000 {
        let mut data = valid[round % valid.len()].clone();
        for _ in 0..(next() % 6) {
            let at = (next() as usize) % data.len().max(1);
            match next() % 4 {
                0 => data[at] = next() as u8,
                1 => data.truncate(at),
                2 => data.insert(at, inserts[(next() % inserts.len() as u64) as usize]),
                _ => {
                    data.remove(at);
                }
            }
            if data.is_empty() {
                break;
            }
        }
        if round % 7 == 0 {
            data = (0..next() % random_len).map(|_| next() as u8).collect();
        }
        check(&data);
    }
}

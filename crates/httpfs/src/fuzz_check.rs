//! The property the index parsers must have, shared by the garbage tests (and ready for a
//! cargo-fuzz target): no input makes a parser panic, and whatever roost's index parser
//! accepts writes back to text that parses to the same entries.

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

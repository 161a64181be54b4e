//! A directory's entries as the driver keeps them in memory: from a `.roostindex`, or one
//! directory of a GROW-FS tree, found by name (`.` is the directory itself).

use crate::index::Entry;
use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct Listing {
    entries: Vec<Entry>,
    by_name: HashMap<Vec<u8>, usize>,
}

impl Listing {
    pub fn new(entries: Vec<Entry>) -> Listing {
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Listing { entries, by_name }
    }

    pub fn get(&self, name: &[u8]) -> Option<&Entry> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
}

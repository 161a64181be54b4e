//! Fuzz target: the catalog's update parser (JSON objects, key-value lines, either behind
//! cctools' zlib marker), its JSON parser, and the signed-report splitter and checker must
//! never panic on what a datagram carries; and whatever the bytes, a whole catalog takes or
//! refuses them without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roost_catalog::keys::{Key, Keys};
use std::sync::OnceLock;
use std::time::Duration;

fn catalog() -> &'static roost_catalog::Catalog {
    static CATALOG: OnceLock<roost_catalog::Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        roost_catalog::Catalog::new(roost_catalog::Config {
            keys: Keys::new(vec![Key::new("pool", b"fuzz").unwrap()]).unwrap(),
            ..roost_catalog::Config::default()
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = roost_catalog::update::parse_update(data);
    let _ = roost_catalog::json::parse(data);
    if let Some(sealed) = roost_catalog::signed::split(data) {
        let keys = Keys::new(vec![Key::new("pool", b"fuzz").unwrap()]).unwrap();
        let peer = "127.0.0.1".parse().unwrap();
        let _ = roost_catalog::signed::check(&sealed, &keys, peer, 0, Duration::from_secs(300));
    }
    let _ = catalog().update("127.0.0.1:9".parse().unwrap(), data);
});

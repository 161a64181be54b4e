//! The group tools' `--catalog`: before a group opens, the catalog is asked which servers
//! are down, and the members on them are left out at once, each named on standard error,
//! instead of being waited on for a connection or a reply; left out, they are never chosen
//! to relay for others either. A root relay the catalog shows down is refused. A catalog that
//! does not answer changes nothing (the members are tried as without it); a server the
//! catalog does not list is tried as usual.

use crate::pool::{catalog_addresses, query_first};
use crate::remote::Failure;
use roost_catalog::servers::Servers;
use roost_group::api::MemberSpec;
use std::time::Duration;

/// What the catalog says of the servers, or `None` when no catalog is given or none answered.
pub(crate) fn ask(catalogs: &[String], timeout: Duration) -> Result<Option<Servers>, Failure> {
    if catalogs.is_empty() {
        return Ok(None);
    }
    let addresses = catalog_addresses(catalogs).map_err(Failure)?;
    let answer = query_first("roost", &addresses, timeout.min(Duration::from_secs(10)));
    if answer.is_none() {
        eprintln!("roost: no catalog answered: every member is tried");
    }
    Ok(answer.map(|records| Servers::new(&records)))
}

/// Checks that the root relay is not down in the catalog.
pub(crate) fn check_relay(servers: &Servers, relay: &str) -> Result<(), Failure> {
    match servers.find(relay) {
        Some(seen) if !seen.up => Err(Failure(format!(
            "--relay {relay}: {}; name another relay",
            seen.describe()
        ))),
        _ => Ok(()),
    }
}

/// The members whose servers the catalog does not show down; those it does are named on
/// standard error (`roost: node3: 10.0.0.3:9094 is down in the catalog (...): skipped`)
/// and counted in the second value.
pub(crate) fn skip_down(servers: &Servers, members: Vec<MemberSpec>) -> (Vec<MemberSpec>, usize) {
    let mut skipped = 0;
    let kept = members
        .into_iter()
        .filter(|m| {
            let authority = m.url.authority();
            match servers.find(&authority) {
                Some(seen) if !seen.up => {
                    eprintln!(
                        "roost: {}: {authority} is {}: skipped",
                        m.name,
                        seen.describe()
                    );
                    skipped += 1;
                    false
                }
                _ => true,
            }
        })
        .collect();
    (kept, skipped)
}

//! Delegation tokens: how a user lets the relays of a group act as that user on the leaves.
//!
//! A relay reaches the leaves of its subtree over its own connections, so without help the
//! leaves would see the relay's identity, not the user's, and the relay could grant more (or
//! less) than the user has. Instead the client mints a token with its `hmac` key:
//!
//! ```text
//! tag = HMAC-SHA256(secret, "roost-group-delegation KEYNAME EXPIRES SALT")
//! ```
//!
//! where `EXPIRES` is a Unix time in seconds and `SALT` 32 random hex digits. The token
//! (`KEYNAME EXPIRES SALT TAG`) travels down the tree inside `group_open`; each server that
//! opens members checks the tag with its own copy of the key's secret (the one it uses for
//! `hmac` logins) and opens them as subject `hmac:KEYNAME`, under that subject's ACLs. The
//! secret never leaves the client. The message is prefixed, so a tag can never serve as an
//! answer to an `hmac` login nonce (64 hex digits) or the reverse.
//!
//! What the token does not do: it is a bearer credential until it expires. Chirp runs in
//! clear text, so anyone who sees it on the wire, and every relay of the group, can open
//! files as the user until `EXPIRES`; keep lifetimes short. It is refused by servers that do
//! not accept `hmac` logins or do not know the key.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::codec::{DecodeError, Decoder, Encoder};

/// A delegation token (see the module documentation).
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub key: String,
    pub expires: u64,
    pub salt: String,
    pub tag: Vec<u8>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("key", &self.key)
            .field("expires", &self.expires)
            .finish()
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    UnknownKey,
    Expired,
    BadTag,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::UnknownKey => "delegation token names a key this server does not have",
            Refusal::Expired => "delegation token has expired",
            Refusal::BadTag => "delegation token does not verify",
        })
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn message(key: &str, expires: u64, salt: &str) -> String {
    format!("roost-group-delegation {key} {expires} {salt}")
}

fn mac(secret: &[u8]) -> Hmac<Sha256> {
    Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts keys of any length")
}

impl Token {
    /// A token for key `key` (with its `secret`) valid for `lifetime` from now.
    pub fn mint(key: &str, secret: &[u8], lifetime: Duration) -> std::io::Result<Token> {
        let expires = now() + lifetime.as_secs().max(1);
        let salt = roost_client::random::hex::<16>()?;
        let mut m = mac(secret);
        m.update(message(key, expires, &salt).as_bytes());
        Ok(Token {
            key: key.to_string(),
            expires,
            salt,
            tag: m.finalize().into_bytes().to_vec(),
        })
    }

    /// Checks the token against the server's keys; the subject it grants (`hmac:KEYNAME`).
    pub fn verify(&self, keys: &HashMap<String, Vec<u8>>) -> Result<String, Refusal> {
        let secret = keys.get(&self.key).ok_or(Refusal::UnknownKey)?;
        let mut m = mac(secret);
        m.update(message(&self.key, self.expires, &self.salt).as_bytes());
        m.verify_slice(&self.tag).map_err(|_| Refusal::BadTag)?;
        if self.expires <= now() {
            return Err(Refusal::Expired);
        }
        Ok(format!("hmac:{}", self.key))
    }

    pub fn encode(&self, e: &mut Encoder) {
        e.text(&self.key)
            .uint(self.expires)
            .text(&self.salt)
            .blob(&self.tag);
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<Token, DecodeError> {
        let token = Token {
            key: d.text()?,
            expires: d.uint()?,
            salt: d.text()?,
            tag: d.blob()?.to_vec(),
        };
        let salt_ok = token.salt.len() == 32 && token.salt.bytes().all(|b| b.is_ascii_hexdigit());
        if !roost_wire::auth::is_valid_key_name(&token.key) || !salt_ok {
            return Err(DecodeError("bad delegation token"));
        }
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> HashMap<String, Vec<u8>> {
        HashMap::from([("alice".to_string(), b"ecila".to_vec())])
    }

    #[test]
    fn a_token_grants_its_keys_subject() {
        let t = Token::mint("alice", b"ecila", Duration::from_secs(60)).unwrap();
        assert_eq!(t.verify(&keys()).unwrap(), "hmac:alice");
        let mut e = Encoder::new();
        t.encode(&mut e);
        let bytes = e.finish();
        assert_eq!(Token::decode(&mut Decoder::new(&bytes)).unwrap(), t);
    }

    #[test]
    fn forged_expired_and_unknown_tokens_are_refused() {
        let t = Token::mint("alice", b"wrong secret", Duration::from_secs(60)).unwrap();
        assert_eq!(t.verify(&keys()), Err(Refusal::BadTag));
        let mut longer = Token::mint("alice", b"ecila", Duration::from_secs(60)).unwrap();
        longer.expires += 3600;
        assert_eq!(longer.verify(&keys()), Err(Refusal::BadTag));
        let mut old = Token::mint("alice", b"ecila", Duration::from_secs(1)).unwrap();
        old.expires = now() - 1;
        let mut m = mac(b"ecila");
        m.update(message("alice", old.expires, &old.salt).as_bytes());
        old.tag = m.finalize().into_bytes().to_vec();
        assert_eq!(old.verify(&keys()), Err(Refusal::Expired));
        let bob = Token::mint("bob", b"bob", Duration::from_secs(60)).unwrap();
        assert_eq!(bob.verify(&keys()), Err(Refusal::UnknownKey));
    }
}

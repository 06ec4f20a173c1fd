//! Building inputs for admission.

use botfleet_memory::AdmitRequest;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InputDigest;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::UserId;
use uuid::Uuid;

/// When a client made its idempotency key, if the key says: a UUIDv7 key
/// carries its creation time, which lets the ledger answer `unknown` for
/// keys older than what it still holds.
pub fn nonce_time_ms(nonce: &str) -> Option<i64> {
    let uuid = Uuid::parse_str(nonce).ok()?;
    if uuid.get_version_num() != 7 {
        return None;
    }
    let (secs, nanos) = uuid.get_timestamp()?.to_unix();
    i64::try_from(secs)
        .ok()
        .map(|s| s * 1000 + i64::from(nanos / 1_000_000))
}

/// The admission of a user's direct message to a bot. `nonce` is the
/// client's idempotency key (a fresh one is made when absent).
pub fn user_message(
    user: &UserId,
    bot: &BotRecord,
    text: &str,
    nonce: Option<&str>,
) -> AdmitRequest {
    let nonce = nonce
        .map(str::to_owned)
        .unwrap_or_else(|| Uuid::now_v7().to_string());
    let key = SessionKey {
        bot: bot.id.clone(),
        kind: SessionKind::Dm,
        peer: user.to_string(),
    };
    AdmitRequest {
        source: format!("user:{user}"),
        nonce_time_ms: nonce_time_ms(&nonce),
        digest: user_message_digest(&bot.id, text),
        nonce,
        entry: NewEntry {
            id: EntryId::new_v7(),
            session: key.id(),
            author: user.to_string(),
            turn: None,
            kind: EntryKind::UserMessage {
                text: text.to_owned(),
            },
        },
        session: key,
        owner: bot.owner.clone(),
        priority: Priority::UserDm,
    }
}

/// The digest the ledger keeps of a person's message `text` to `bot`
/// ([`user_message`]): a retry under the same key with the same digest is
/// a `duplicate`.
pub fn user_message_digest(bot: &BotId, text: &str) -> InputDigest {
    InputDigest::of_parts([
        b"user_message".as_slice(),
        bot.as_str().as_bytes(),
        text.as_bytes(),
    ])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn v7_keys_carry_their_time() {
        let key = Uuid::now_v7().to_string();
        let t = nonce_time_ms(&key).unwrap();
        let now = chrono::Utc::now().timestamp_millis();
        assert!((now - t).abs() < 5_000);
        assert_eq!(nonce_time_ms("my-key-1"), None);
        assert_eq!(nonce_time_ms(&Uuid::new_v4().to_string()), None);
    }
}

//! Bots of two owners: a message between them is refused as it is sent
//! (fleet.toml may have given one of them to another user since their
//! conversation began), a reply never lands in a DM of someone who no
//! longer owns its bot, a cut-off chain tells only a person who owns the
//! bot, and a new bot's id may not differ from another owner's only in
//! case.
#![allow(clippy::unwrap_used)]

use botfleet_memory::BotId;
use botfleet_memory::ChainOrigin;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::UserId;
use serde_json::json;

use super::CreateAgent;
use super::SendToAgent;
use super::tests::bot_of;
use super::tests::speaker;
use crate::tools::ReplyTo;
use crate::tools::SendMessage;
use crate::tools::Tool;
use crate::tools::test_support::ToolFixture;

/// Regression: a bot fleet.toml gave to another user kept its
/// conversation with its former owner's bot, and SendMessage there (the
/// reply of a turn resumed, retried or queued for its new owner) reached
/// that bot and woke it with its owner's tools. Owners are compared at
/// every message now, as it is sent: refused with a tool error, nothing
/// sent; the same bots of one owner again talk as before.
#[tokio::test]
async fn a_message_to_a_bot_of_another_owner_is_refused_as_it_is_sent() {
    let mut f = speaker();
    let store = f.rt.store.clone();
    let write = |peer_owner: &'static str| {
        let store = store.clone();
        async move {
            let peer = bot_of("peer", "Peer", peer_owner, json!({}));
            store.write(vec![Mutation::UpsertBot(peer)]).await.unwrap();
        }
    };
    write("u").await;
    let key = SessionKey {
        bot: f.bot.id.clone(),
        kind: SessionKind::Agent,
        peer: "peer".into(),
    };
    f.scope.session.id = key.id();
    f.scope.session.key = key;
    let reply = json!({"text": "the answer"});
    let sent = SendMessage.call(&f.ctx("c1"), reply.clone()).await.unwrap();
    assert_eq!(sent.content, "delivered to peer");

    // fleet.toml gives the peer to bob
    write("bob").await;
    let err = SendMessage
        .call(&f.ctx("c2"), reply.clone())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "error: peer no longer belongs to your owner, and a bot messages only bots of its \
         own owner: nothing was sent to it. Next step: do not write to peer again; if a \
         person is waiting for you, tell them instead, otherwise end your turn now"
    );
    // nor does SendToAgent find it (by id or name), naming no owner
    for (call, agent) in [("c3", "peer"), ("c4", "Peer")] {
        let args = json!({"agent": agent, "text": "hello"});
        let err = SendToAgent.call(&f.ctx(call), args).await.unwrap_err();
        assert!(err.message.starts_with("there is no agent"), "{err}");
        assert!(!err.to_string().contains("bob"), "{err}");
    }

    // the caller given to bob as well: one owner's bots again
    f.bot.owner = UserId::new("bob").unwrap();
    let sent = SendMessage.call(&f.ctx("c5"), reply).await.unwrap();
    assert_eq!(sent.content, "delivered to peer");
}

/// A reply goes to the session the other bot asked replies to go to,
/// unless that session is no longer its owner's (a former owner's DM with
/// it, after fleet.toml gave it to someone else): then to the two bots'
/// own conversation, which its owner reads, never into that person's DM.
#[tokio::test]
async fn a_reply_never_lands_in_a_dm_of_someone_who_no_longer_owns_the_bot() {
    let mut f = speaker();
    f.bot.tools.push("SendToAgent".into());
    let peer = bot_of("peer", "Peer", "u", json!({}));
    let dm_of = |person: &str| SessionKey {
        bot: peer.id.clone(),
        kind: SessionKind::Dm,
        peer: person.into(),
    };
    let record = |person: &str| SessionRecord {
        id: dm_of(person).id(),
        key: dm_of(person),
        owner: UserId::new(person).unwrap(),
        epoch: 0,
        last_seq: 0,
        created_at: 0,
    };
    f.rt.store
        .write(vec![
            Mutation::UpsertBot(peer.clone()),
            Mutation::EnsureSession(record("u")),
            Mutation::EnsureSession(record("carol")),
        ])
        .await
        .unwrap();
    let own = SessionKey {
        bot: peer.id.clone(),
        kind: SessionKind::Agent,
        peer: f.bot.id.to_string(),
    };
    for (call, person, lands) in [("c1", "u", dm_of("u")), ("c2", "carol", own)] {
        f.scope.reply_to = vec![ReplyTo {
            bot: peer.id.clone(),
            session: dm_of(person).id(),
            asked_at: 0,
            owed: true,
        }];
        let args = json!({"agent": "peer", "text": "here it is"});
        let sent = SendToAgent.call(&f.ctx(call), args).await.unwrap();
        let [Mutation::Admit(req)] = &sent.effects[..] else {
            panic!("one admission: {:?}", sent.effects);
        };
        assert_eq!(req.session, lands, "asked for {person}'s DM");
        assert_eq!(req.entry.session, lands.id(), "asked for {person}'s DM");
    }
}

/// Regression: CreateAgent made `B1` while bob's `b1` existed, although
/// ids must differ in more than case (mentions ignore it). Refused now
/// with the refusal of a taken id, which names nobody's bot.
#[tokio::test]
async fn an_id_differing_from_another_owners_only_in_case_is_taken() {
    let f = speaker();
    let bobs = bot_of("b1", "Bravo One", "bob", json!({}));
    f.rt.store
        .write(vec![Mutation::UpsertBot(bobs)])
        .await
        .unwrap();
    let create = |call: &'static str, id: &str| {
        let args = json!({"name": "Mine", "role": "Works.", "id": id});
        let f = &f;
        async move { CreateAgent.call(&f.ctx(call), args).await }
    };
    let exact = create("c1", "b1").await.unwrap_err().to_string();
    assert_eq!(
        exact,
        "error: the agent id \"b1\" is already taken. Next step: choose another name for \
         the new agent (or pass another `id`)"
    );
    let folded = create("c2", "B1").await.unwrap_err().to_string();
    assert_eq!(folded, exact.replace("\"b1\"", "\"B1\""));
    let made = f.rt.store.get_bot(&BotId::new("B1").unwrap()).await;
    assert!(made.unwrap().is_none());
    create("c3", "b1-mine").await.unwrap();
}

/// Regression: a chain a person started goes on in their bot after
/// fleet.toml gave it to someone else (its conversations with bots moved
/// with it), and the hop budget's notice told that former owner, in their
/// DM, which bot it now tried to message. Only a person who owns the bot
/// is told now.
#[tokio::test]
async fn a_cut_off_chain_tells_only_a_person_who_owns_the_bot() {
    let mut f = ToolFixture::new();
    f.scope.hop = f.rt.settings.max_hops;
    let t = bot_of("t", "T", f.bot.owner.as_str(), json!({}));
    f.rt.store
        .write(vec![
            Mutation::UpsertBot(f.bot.clone()),
            Mutation::UpsertBot(t),
        ])
        .await
        .unwrap();
    for (call, person, told) in [("c1", "u", 1), ("c2", "carol", 0)] {
        let key = SessionKey {
            bot: f.bot.id.clone(),
            kind: SessionKind::Dm,
            peer: person.into(),
        };
        let dm = SessionRecord {
            id: key.id(),
            key,
            owner: UserId::new(person).unwrap(),
            epoch: 0,
            last_seq: 0,
            created_at: 0,
        };
        f.rt.store
            .write(vec![Mutation::EnsureSession(dm.clone())])
            .await
            .unwrap();
        f.scope.chain = Some(ChainOrigin {
            session: dm.id,
            entry: EntryId::new_v7(),
        });
        let args = json!({"agent": "t", "text": "one more"});
        let err = SendToAgent.call(&f.ctx(call), args).await.unwrap_err();
        assert!(err.message.contains("hop budget"), "{err}");
        let entries = f.rt.store.tail_entries(dm.id, 100).await.unwrap();
        let notices = entries
            .iter()
            .filter(|e| matches!(&e.kind, EntryKind::Notice { code, .. } if code == "hop_budget"))
            .count();
        assert_eq!(notices, told, "{person}'s DM: {entries:#?}");
    }
}

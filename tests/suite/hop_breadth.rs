//! A chain of bots is bounded in breadth as well as in length, and the
//! person who started it is told once when it is cut off, however wide it
//! fanned out.
//!
//! Before, a hub fanning out to 20 bots lost the `hop_budget` notice: the
//! chain's start was looked for among the newest 100 entries of each
//! session on the way back, and in the hub's busy conversation with its
//! person the message at the hop it looked for was further back (40
//! refusals, each walking the chain again, and no notice). And nothing
//! bounded a chain's breadth: a mesh of bots messaging one another ran
//! until the hop budget, thousands of messages from one person's message.

use botfleet_memory::SessionKind;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::fleet::session_of;

const TOOLS: &[&str] = &["SendMessage", "SendToAgent"];

/// The `hop_budget` notices among `entries`.
fn notices(entries: &[Value]) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["kind"] == "notice" && e["code"] == "hop_budget")
        .cloned()
        .collect()
}

/// Waits until every turn of `bots` has ended, read again until two reads
/// agree: a turn that ends may have
/// woken another bot in between.
async fn wait_idle(host: &TestHost, bots: &[String]) -> Vec<usize> {
    let all_done = |v: &Value| {
        let turns = v["turns"].as_array()?;
        turns
            .iter()
            .all(|t| t["status"] != "running")
            .then(|| json!(turns.len()))
    };
    let mut last: Option<Vec<usize>> = None;
    loop {
        let mut counts = Vec::with_capacity(bots.len());
        for bot in bots {
            let n = host
                .wait_get(&format!("/v1/bots/{bot}/turns"), all_done)
                .await;
            counts.push(n.as_u64().unwrap() as usize);
        }
        if last.as_ref() == Some(&counts) {
            return counts;
        }
        last = Some(counts);
    }
}

/// hub20 messages 20 bots at once, each answers back, hub20 messages all
/// 20 again on each answer: the chain is cut off (by the hop budget or by
/// its breadth, whichever comes first) in hub20's conversation with alice,
/// and alice finds exactly one `hop_budget` notice there.
#[tokio::test]
async fn a_chain_fanned_out_to_twenty_bots_is_reported_once() {
    let calls: Vec<String> = (1..=20)
        .map(|n| {
            format!(r#"{{ tool = "SendToAgent", args = {{ agent = "l{n}", text = "fan" }} }}"#)
        })
        .collect();
    let script = format!(
        r#"
[[rule]]
bot = "hub20"
steps = [ {{ calls = [ {} ] }}, {{ text = "done" }} ]

[[rule]]
match = "."
steps = [ {{ tool = "SendMessage", args = {{ text = "back from {{{{bot}}}}" }} }} ]
"#,
        calls.join(", ")
    );
    let mut fleet = TestFleet::new()
        .script("s", &script)
        .bot("hub20", "s", TOOLS)
        .runtime("debounce_ms = 0\nextract_memory = false");
    for n in 1..=20 {
        fleet = fleet.bot(&format!("l{n}"), "s", &["SendMessage"]);
    }
    let host = fleet.start().await;
    let (status, sent) = host.send("hub20", "go", None).await;
    assert_eq!(status, 202, "{sent}");
    let dm = sent["session"].as_str().unwrap().to_owned();
    host.wait_for(&dm, |es| notices(es).first().cloned()).await;
    let bots: Vec<String> = std::iter::once("hub20".to_owned())
        .chain((1..=20).map(|n| format!("l{n}")))
        .collect();
    wait_idle(&host, &bots).await;
    let es = host.entries(&dm).await;
    let found = notices(&es);
    assert_eq!(found.len(), 1, "{found:#?}");
    // whichever send meets the bound first: hub20's next fan-out, or a
    // reply on its way back to hub20
    let text = found[0]["text"].as_str().unwrap();
    assert!(
        text.contains("hub20 could not send one more to l")
            || text.contains(" could not send one more to hub20"),
        "{text}"
    );
    host.shutdown().await;
}

/// alice asks hub, which messages m1..m8 and `late` at once; m1..m8 each
/// message the seven others on every message, all eight at the same
/// moment from the start. With `max_chain_messages = 20` the mesh stops
/// after exactly 20 messages, however many steps of different bots commit
/// at the same moment (the store's writer checks the bound as it writes
/// each message; before, each step read the count first, and steps that
/// read it before the others committed passed it together: 21, 23, ...),
/// alice gets one notice, and `late`, whose model answers only after the
/// mesh was cut off and the host restarted, is refused too: the count
/// survived the restart.
#[tokio::test]
async fn a_mesh_of_bots_stops_at_the_chain_bound_across_a_restart() {
    const MAX: usize = 20;
    let mesh: Vec<String> = (1..=8).map(|n| format!("m{n}")).collect();
    let send = |to: &str, text: &str| {
        format!(r#"{{ tool = "SendToAgent", args = {{ agent = "{to}", text = "{text}" }} }}"#)
    };
    // late first, so the mesh cannot have reached the bound before it
    let hub_calls: Vec<String> = std::iter::once(send("late", "mesh later"))
        .chain(mesh.iter().map(|m| send(m, "mesh")))
        .chain([r#"{ tool = "SendMessage", args = { text = "asked around" } }"#.to_owned()])
        .collect();
    let mut script = format!(
        "\n[[rule]]\nbot = \"hub\"\nsteps = [ {{ calls = [ {} ] }} ]\n",
        hub_calls.join(", ")
    );
    script.push_str(
        r#"
[[rule]]
bot = "late"
steps = [
  { delay_ms = 4000, calls = [
    { tool = "SendToAgent", args = { agent = "m1", text = "late mesh" } },
    { tool = "SendToAgent", args = { agent = "m2", text = "late mesh" } },
  ] },
  { text = "done" },
]
"#,
    );
    for m in &mesh {
        let calls: Vec<String> = mesh
            .iter()
            .filter(|o| *o != m)
            .map(|o| send(o, "mesh"))
            .collect();
        script.push_str(&format!(
            "\n[[rule]]\nbot = \"{m}\"\nsteps = [ {{ delay_ms = 200, calls = [ {} ] }}, {{ text = \"ok\" }} ]\n",
            calls.join(", ")
        ));
    }
    let mut fleet = TestFleet::new()
        .script("s", &script)
        .bot("hub", "s", TOOLS)
        .bot("late", "s", TOOLS)
        .runtime(&format!(
            "debounce_ms = 0\nextract_memory = false\nmax_chain_messages = {MAX}"
        ))
        // unreviewed, a step's calls run together and commit in one write
        // (reviewed, each call commits on its own), and the eight mesh bots
        // woken by the hub's one write answer together (their model takes
        // 200 ms): eight steps of seven messages at the same moment
        .tables("[review]\ndelivery = \"off\"\n");
    for m in &mesh {
        fleet = fleet.bot(m, "s", TOOLS);
    }
    let host = fleet.start().await;
    let (status, sent) = host.send("hub", "go", None).await;
    assert_eq!(status, 202, "{sent}");
    let dm = sent["session"].as_str().unwrap().to_owned();
    host.wait_for(&dm, |es| notices(es).first().cloned()).await;
    wait_idle(&host, &mesh).await;
    // every message between bots of the chain, by the session it landed in
    let senders: Vec<&str> = std::iter::once("hub")
        .chain(["late"])
        .chain(mesh.iter().map(String::as_str))
        .collect();
    let sessions: Vec<String> = std::iter::once("late")
        .chain(mesh.iter().map(String::as_str))
        .flat_map(|to| {
            senders
                .iter()
                .filter(move |from| **from != to)
                .map(move |from| session_of(to, SessionKind::Agent, from))
        })
        .collect();
    let count = async |host: &TestHost| {
        let mut n = 0;
        for s in &sessions {
            // a session no message reached does not exist
            n += host
                .client()
                .entries_after(s, 0)
                .await
                .unwrap_or_default()
                .iter()
                .filter(|e| e["kind"] == "agent_message")
                .count();
        }
        n
    };
    let before = count(&host).await;
    assert_eq!(before, MAX, "messages between bots");
    // late is still waiting for its model: the host stops and starts again
    let fleet = host.shutdown().await;
    let restarted_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let host = restart(fleet).await;
    let late = session_of("late", SessionKind::Agent, "hub");
    let refused = host
        .wait_for(&late, |es| {
            let refusals: Vec<Value> = es
                .iter()
                .filter(|e| e["kind"] == "tool_result" && e["name"] == "SendToAgent")
                .cloned()
                .collect();
            (refusals.len() == 2).then(|| json!(refusals))
        })
        .await;
    for r in refused.as_array().unwrap() {
        assert_eq!(r["is_error"], json!(true), "{r:#}");
        // called after the restart, against the count kept before it
        assert!(r["created_at"].as_i64().unwrap() >= restarted_at, "{r:#}");
        let text = r["content"].as_str().unwrap();
        assert!(text.contains("the most one request may"), "{text}");
    }
    let mut all = vec!["hub".to_owned(), "late".to_owned()];
    all.extend(mesh.iter().cloned());
    wait_idle(&host, &all).await;
    assert_eq!(count(&host).await, before);
    let es = host.entries(&dm).await;
    let found = notices(&es);
    assert_eq!(found.len(), 1, "{found:#?}");
    let text = found[0]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("sent one another {MAX} messages")),
        "{text}"
    );
    host.shutdown().await;
}

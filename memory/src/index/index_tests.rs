//! Search behaviour end to end on a real (temp dir) index: languages,
//! phrases, restrictions, hits and errors.

use pretty_assertions::assert_eq;

use super::test_support::Docs;
use super::test_support::TestResult;
use super::test_support::session;
use super::test_support::user_text;
use super::*;
use crate::record::EntryKind;

fn strings(v: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = v.iter().map(|s| (*s).to_owned()).collect();
    out.sort();
    out
}

#[test]
fn english_is_found_case_and_inflection_insensitive() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("Suppliers were late again")?;
    docs.add("The supplier list is final")?;
    docs.add("Nothing to see here")?;
    docs.commit()?;
    assert_eq!(
        docs.find_sorted("supplier")?,
        strings(&["Suppliers were late again", "The supplier list is final"])
    );
    assert_eq!(
        docs.find_sorted("SUPPLIERS")?,
        docs.find_sorted("supplier")?
    );
    assert_eq!(docs.find("see here")?, vec!["Nothing to see here"]);
    Ok(())
}

/// Regression: `2.3.1` did not find `release v2.3.1` (the index held
/// `v2`, the query asked for `2`). Now a number finds the same number with
/// a letter prefix, the prefixed word still finds only itself, and numbers
/// inside hashes stay unfound.
#[test]
fn a_number_finds_the_same_number_with_a_letter_prefix() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("release v2.3.1 is out")?;
    docs.add("the 2.3.1 notes are short")?;
    docs.add("v2.3.10 comes next")?;
    docs.add("the R2 bucket is full")?;
    docs.add("build for x86 only")?;
    docs.add("commit 3fa85f64 broke it")?;
    docs.commit()?;
    assert_eq!(
        docs.find_sorted("2.3.1")?,
        strings(&["release v2.3.1 is out", "the 2.3.1 notes are short"])
    );
    assert_eq!(docs.find("v2.3.1")?, vec!["release v2.3.1 is out"]);
    assert_eq!(docs.find("\"v2.3.1\"")?, vec!["release v2.3.1 is out"]);
    assert_eq!(docs.find("r2")?, vec!["the R2 bucket is full"]);
    assert_eq!(docs.find("86")?, vec!["build for x86 only"]);
    assert_eq!(docs.find("85")?, Vec::<String>::new());
    // the whole prefixed word is marked
    let hits = docs.search(SearchQuery::new("2.3.1 release"))?.hits;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].snippet, "«release» «v2».«3».«1» is out");
    Ok(())
}

#[test]
fn chinese_words_are_found_inside_sentences() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("第二家供应商被排除了")?;
    docs.add("我们和服务商开会")?;
    docs.add("数据库迁移失败了")?;
    docs.commit()?;
    assert_eq!(docs.find("供应商")?, vec!["第二家供应商被排除了"]);
    // Unquoted: each jieba word must occur, in any order.
    assert_eq!(docs.find("排除供应商")?, vec!["第二家供应商被排除了"]);
    assert_eq!(docs.find("迁移 失败")?, vec!["数据库迁移失败了"]);
    // A single character is found anywhere.
    assert_eq!(docs.find("库")?, vec!["数据库迁移失败了"]);
    assert_eq!(docs.find("采购")?, Vec::<String>::new());
    Ok(())
}

#[test]
fn japanese_kanji_and_kana_are_found() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("東京の会議は明日です")?;
    docs.add("ありがとうございます、助かりました")?;
    docs.add("サーバーが落ちた")?;
    docs.commit()?;
    assert_eq!(docs.find("東京")?, vec!["東京の会議は明日です"]);
    assert_eq!(docs.find("会議")?, vec!["東京の会議は明日です"]);
    assert_eq!(
        docs.find("ありがとう")?,
        vec!["ありがとうございます、助かりました"]
    );
    assert_eq!(docs.find("サーバー")?, vec!["サーバーが落ちた"]);
    assert_eq!(docs.find("東京の会議")?, vec!["東京の会議は明日です"]);
    Ok(())
}

#[test]
fn korean_is_found() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("회의가 내일 있습니다")?;
    docs.commit()?;
    assert_eq!(docs.find("회의")?, vec!["회의가 내일 있습니다"]);
    Ok(())
}

#[test]
fn mixed_chinese_and_english_text_is_found_both_ways() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("API限流策略已上线, rollout done")?;
    docs.add("Meeting with 供应商 about pricing")?;
    docs.commit()?;
    assert_eq!(
        docs.find("api 限流")?,
        vec!["API限流策略已上线, rollout done"]
    );
    assert_eq!(
        docs.find("API限流")?,
        vec!["API限流策略已上线, rollout done"]
    );
    assert_eq!(
        docs.find("rollout")?,
        vec!["API限流策略已上线, rollout done"]
    );
    assert_eq!(
        docs.find("供应商 pricing")?,
        vec!["Meeting with 供应商 about pricing"]
    );
    assert_eq!(
        docs.find("\"with 供应商 about\"")?,
        vec!["Meeting with 供应商 about pricing"]
    );
    Ok(())
}

/// Regression (QA, 2026-12-05): a product name written together with
/// its number (`iPhone15的价格`, `Windows11`) was not found by the name,
/// and a character of Han Extension H was held as a word (found only by
/// the whole run).
#[test]
fn a_name_written_with_its_number_and_extension_h_are_found() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("你好，iPhone15的价格是多少？")?;
    docs.add("第二，Windows11；第三，Python3.11")?;
    docs.add("扩展H：𱍐𱍑𱍒字")?;
    docs.add("v2 released")?;
    docs.commit()?;
    let iphone = vec!["你好，iPhone15的价格是多少？"];
    assert_eq!(docs.find("iPhone")?, iphone);
    assert_eq!(docs.find("iPhone 价格")?, iphone);
    assert_eq!(docs.find("iPhone15")?, iphone);
    assert_eq!(docs.find("15")?, iphone);
    let windows = vec!["第二，Windows11；第三，Python3.11"];
    assert_eq!(docs.find("windows")?, windows);
    assert_eq!(docs.find("Python")?, windows);
    assert_eq!(docs.find("𱍐")?, vec!["扩展H：𱍐𱍑𱍒字"]);
    assert_eq!(docs.find("𱍑𱍒")?, vec!["扩展H：𱍐𱍑𱍒字"]);
    // one letter is not a word of its own: `v` does not find `v2`
    assert!(docs.find("v")?.is_empty());
    Ok(())
}

#[test]
fn phrases_need_order_and_adjacency() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("we shipped the release candidate today")?;
    docs.add("the candidate for release was shipped")?;
    docs.add("第二家供应商被排除了")?;
    docs.commit()?;
    assert_eq!(
        docs.find("\"release candidate\"")?,
        vec!["we shipped the release candidate today"]
    );
    assert_eq!(docs.find_sorted("release candidate")?.len(), 2);
    assert_eq!(docs.find("\"供应商被排除\"")?, vec!["第二家供应商被排除了"]);
    // Quoted CJK is an exact substring: the reordered phrase is not there.
    assert_eq!(docs.find("\"排除供应商\"")?, Vec::<String>::new());
    Ok(())
}

#[test]
fn exclusion_and_or() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("deploy to staging")?;
    docs.add("deploy to production")?;
    docs.add("rollback production")?;
    docs.commit()?;
    assert_eq!(docs.find("deploy -staging")?, vec!["deploy to production"]);
    assert_eq!(
        docs.find_sorted("staging OR rollback")?,
        strings(&["deploy to staging", "rollback production"])
    );
    Ok(())
}

#[test]
fn session_restriction_never_leaks_other_sessions() -> TestResult {
    let mut docs = Docs::new()?;
    let mine = session("r", "alice");
    let theirs = session("r", "bob");
    let other_bot = session("q", "alice");
    docs.add_kind("r", mine, "alice", user_text("the secret plan"))?;
    docs.add_kind("r", theirs, "bob", user_text("the secret plan"))?;
    docs.add_kind("q", other_bot, "alice", user_text("the secret plan"))?;
    docs.commit()?;
    let all = docs.search(SearchQuery::new("secret plan"))?;
    assert_eq!(all.total, 3);
    let only_mine = docs.search(SearchQuery::new("secret plan").in_sessions([mine]))?;
    assert_eq!(
        only_mine.hits.iter().map(|h| h.session).collect::<Vec<_>>(),
        vec![mine]
    );
    let two = docs.search(SearchQuery::new("secret").in_sessions([mine, other_bot]))?;
    assert_eq!(two.total, 2);
    assert!(two.hits.iter().all(|h| h.session != theirs));
    let none = docs.search(SearchQuery::new("secret").in_sessions([]))?;
    assert_eq!(none.total, 0);
    let by_bot = docs.search(SearchQuery::new("secret").of_bot(super::test_support::bot("q")))?;
    assert_eq!(
        by_bot.hits.iter().map(|h| h.session).collect::<Vec<_>>(),
        vec![other_bot]
    );
    Ok(())
}

#[test]
fn role_and_kind_filters() -> TestResult {
    let mut docs = Docs::new()?;
    let s = session("r", "alice");
    docs.add_kind("r", s, "alice", user_text("budget question"))?;
    docs.add_kind(
        "r",
        s,
        "r",
        EntryKind::Delivery {
            text: "budget answer".into(),
            card: None,
            call_id: "c1".into(),
        },
    )?;
    docs.commit()?;
    let user = docs.search(SearchQuery::new("budget").with_roles(["user"]))?;
    assert_eq!(user.hits.len(), 1);
    assert_eq!(user.hits[0].role, "user");
    let delivered = docs.search(SearchQuery::new("budget").with_kinds(["delivery"]))?;
    assert_eq!(delivered.hits.len(), 1);
    assert_eq!(delivered.hits[0].kind, "delivery");
    Ok(())
}

/// Every compaction summary restates the facts of the ones before it: a
/// plain search leaves them out (the fact was said in the transcript
/// itself), a search for the kind finds them.
#[test]
fn summaries_are_found_only_when_asked_for() -> TestResult {
    let mut docs = Docs::new()?;
    let s = session("r", "alice");
    docs.add_kind(
        "r",
        s,
        "alice",
        user_text("the launch code word is heliotrope"),
    )?;
    for epoch in 1..=5 {
        docs.add_kind(
            "r",
            s,
            "system",
            EntryKind::Summary {
                text: format!("summary {epoch}: the launch code word is heliotrope"),
                covers_to_seq: epoch,
                epoch,
            },
        )?;
    }
    docs.commit()?;
    let plain = docs.search(SearchQuery::new("heliotrope"))?;
    assert_eq!(plain.total, 1);
    assert_eq!(plain.hits[0].kind, "user_message");
    let summaries = docs.search(SearchQuery::new("heliotrope").with_kinds(["summary"]))?;
    assert_eq!(summaries.total, 5);
    let both =
        docs.search(SearchQuery::new("heliotrope").with_kinds(["summary", "user_message"]))?;
    assert_eq!(both.total, 6);
    Ok(())
}

/// The runtime's reminders are one fixed text: a search for one of its
/// words found every turn that needed one, newest first, above what the
/// person said (QA, 2026-12-05). Left out unless asked for by kind.
#[test]
fn reminders_are_found_only_when_asked_for() -> TestResult {
    let mut docs = Docs::new()?;
    let s = session("r", "alice");
    docs.add_kind("r", s, "alice", user_text("what is the answer?"))?;
    for _ in 0..3 {
        docs.add_kind(
            "r",
            s,
            "system",
            EntryKind::Reminder {
                text: "[runtime reminder] Send your answer now with the SendMessage tool".into(),
            },
        )?;
    }
    docs.commit()?;
    let plain = docs.search(SearchQuery::new("answer"))?;
    assert_eq!(plain.total, 1);
    assert_eq!(plain.hits[0].kind, "user_message");
    let reminders = docs.search(SearchQuery::new("answer").with_kinds(["reminder"]))?;
    assert_eq!(reminders.total, 3);
    Ok(())
}

#[test]
fn hits_carry_the_entry_coordinates_and_a_marked_snippet() -> TestResult {
    let mut docs = Docs::new()?;
    let s = session("r", "alice");
    docs.add("unrelated")?;
    let gid = docs.add("第二家供应商被排除了，因为 suppliers were late")?;
    docs.commit()?;
    let results = docs.search(SearchQuery::new("供应商 supplier"))?;
    assert_eq!(results.total, 1);
    let hit = &results.hits[0];
    assert_eq!(
        (
            hit.session,
            hit.seq,
            hit.gid,
            hit.bot.as_str(),
            hit.author.as_str()
        ),
        (s, 2, gid, "r", "alice")
    );
    assert_eq!(
        (hit.role.as_str(), hit.kind.as_str()),
        ("user", "user_message")
    );
    assert_eq!(hit.time_ms, 1_700_000_000_000 + gid);
    assert!(hit.score > 0.0);
    assert_eq!(
        hit.snippet,
        "第二家«供应商»被排除了，因为 «suppliers» were late"
    );
    Ok(())
}

#[test]
fn long_texts_get_a_cut_snippet_around_the_match() -> TestResult {
    let mut docs = Docs::new()?;
    let text = format!(
        "{} needle {}",
        "filler ".repeat(100),
        "padding ".repeat(100)
    );
    docs.add(&text)?;
    docs.commit()?;
    let hit = &docs.search(SearchQuery::new("needle"))?.hits[0];
    assert!(hit.snippet.starts_with('…'), "{}", hit.snippet);
    assert!(hit.snippet.ends_with('…'), "{}", hit.snippet);
    assert!(hit.snippet.contains("«needle»"), "{}", hit.snippet);
    assert!(hit.snippet.len() < 300);
    Ok(())
}

/// The snippet of the only hit of `query`.
fn only_snippet(docs: &Docs, query: &str) -> Result<String, IndexError> {
    let results = docs.search(SearchQuery::new(query))?;
    assert_eq!(results.total, 1, "{query}");
    Ok(results.hits[0].snippet.clone())
}

#[test]
fn phrase_snippets_sit_on_a_phrase_match_and_mark_only_it() -> TestResult {
    let mut docs = Docs::new()?;
    let text = format!(
        "{}{}the alpha beta release",
        "alpha gamma ".repeat(40),
        "filler ".repeat(60)
    );
    docs.add(&text)?;
    docs.commit()?;
    let snippet = only_snippet(&docs, "\"alpha beta\"")?;
    assert!(snippet.starts_with('…'), "{snippet}");
    assert!(snippet.ends_with("the «alpha» «beta» release"), "{snippet}");
    assert_eq!(snippet.matches('«').count(), 2, "{snippet}");
    // A plain term query still marks every occurrence in the best fragment.
    let snippet = only_snippet(&docs, "alpha")?;
    assert!(
        snippet.starts_with("«alpha» gamma «alpha» gamma"),
        "{snippet}"
    );
    Ok(())
}

#[test]
fn chinese_phrase_snippets_show_the_phrase_and_not_its_prefix() -> TestResult {
    let mut docs = Docs::new()?;
    let text: Vec<String> = (1..=30)
        .map(|n| format!("burstword tok{n} 爆发{n}"))
        .collect();
    docs.add(&text.join("\n"))?;
    docs.commit()?;
    let snippet = only_snippet(&docs, "\"爆发30\"")?;
    assert!(snippet.ends_with("tok30 «爆发30»"), "{snippet}");
    assert_eq!(snippet.matches('«').count(), 1, "{snippet}");
    Ok(())
}

#[test]
fn a_phrase_across_a_fragment_cut_is_shown_whole() -> TestResult {
    let mut docs = Docs::new()?;
    // "alpha" ends at byte 239 and "beta" at 244: the fragment budget of
    // 240 bytes falls between them.
    docs.add(&format!(
        "{}alpha beta{}",
        "x ".repeat(117),
        " y".repeat(200)
    ))?;
    // A phrase longer than the budget.
    let words: Vec<String> = (0..50).map(|i| format!("word{i}")).collect();
    let long = words.join(" ");
    docs.add(&format!("{}{long}{}", "pad ".repeat(10), " pad".repeat(10)))?;
    docs.commit()?;
    let snippet = only_snippet(&docs, "\"alpha beta\"")?;
    assert!(snippet.starts_with("…«alpha» «beta» y y"), "{snippet}");
    let snippet = only_snippet(&docs, &format!("\"{long}\""))?;
    assert_eq!(snippet.matches('«').count(), 50, "{snippet}");
    assert!(snippet.contains("«word0» «word1»"), "{snippet}");
    assert!(snippet.contains("«word49»"), "{snippet}");
    Ok(())
}

#[test]
fn limit_and_total() -> TestResult {
    let mut docs = Docs::new()?;
    for i in 0..30 {
        docs.add(&format!("report number {i}"))?;
    }
    docs.commit()?;
    let results = docs.search(SearchQuery::new("report").with_limit(5))?;
    assert_eq!((results.hits.len(), results.total), (5, 30));
    Ok(())
}

#[test]
fn offset_pages_through_equal_scores_without_repeats() -> TestResult {
    let mut docs = Docs::new()?;
    // three commits, three segments: ties cross segment boundaries
    for batch in 0..3 {
        for i in 0..50 {
            docs.add(&format!("report number {}", batch * 50 + i))?;
        }
        docs.commit()?;
    }
    let page = |offset: usize| -> Result<Vec<i64>, IndexError> {
        let query = SearchQuery::new("report")
            .with_limit(40)
            .with_offset(offset);
        let results = docs.search(query)?;
        assert_eq!(results.total, 150);
        Ok(results.hits.iter().map(|h| h.gid).collect())
    };
    let all = docs.search(SearchQuery::new("report").with_limit(100))?;
    let mut paged = Vec::new();
    for offset in [0, 40, 80, 120] {
        paged.extend(page(offset)?);
    }
    assert_eq!(paged.len(), 150);
    let first_100: Vec<i64> = all.hits.iter().map(|h| h.gid).collect();
    assert_eq!(&paged[..100], &first_100[..]);
    let mut unique = paged.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 150);
    assert_eq!(page(150)?, Vec::<i64>::new());
    Ok(())
}

/// Regression (QA, 2026-12-05): pages of one hit each, over segments of
/// equal scores, repeated some hits and never showed others (of 205 `部署`
/// hits, 199 distinct): tantivy merges the segments' tops in no fixed
/// order and drops a tie at its threshold whatever its address. Ties now
/// fall back to the entry's gid, newest first.
#[test]
fn pages_of_one_hit_over_tied_segments_show_every_hit_once() -> TestResult {
    let mut docs = Docs::new()?;
    let mut matching = 0;
    for (batch, size) in [700, 600, 550].into_iter().enumerate() {
        for i in 0..size {
            if i % 10 == 3 {
                docs.add(&format!("部署 完成 {batch} {i}"))?;
                matching += 1;
            } else {
                docs.add(&format!("filler words of no interest {i}"))?;
            }
        }
        docs.commit()?;
    }
    let mut paged = Vec::new();
    for offset in 0..matching {
        let query = SearchQuery::new("部署")
            .in_sessions([session("r", "alice")])
            .with_offset(offset)
            .with_limit(1);
        let results = docs.search(query)?;
        assert_eq!(results.total, matching);
        paged.extend(results.hits.iter().map(|h| h.gid));
    }
    let mut newest_first = paged.clone();
    newest_first.sort_unstable_by(|a, b| b.cmp(a));
    newest_first.dedup();
    assert_eq!(newest_first.len(), matching, "{paged:?}");
    assert_eq!(paged, newest_first);
    Ok(())
}

#[test]
fn entries_without_text_are_skipped_but_move_the_marker() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("hello")?;
    // Built from JSON so that new optional fields of the kind need no edit.
    let turn_end: EntryKind = serde_json::from_str(
        r#"{"kind":"turn_end","status":"completed","inputs":[1],"deliveries":0}"#,
    )?;
    let gid = docs.add_kind("r", session("r", "alice"), "r", turn_end)?;
    docs.commit()?;
    assert_eq!(docs.index.num_entries(), 1);
    assert_eq!(docs.index.committed_gid()?, gid);
    Ok(())
}

#[test]
fn uncommitted_entries_are_invisible_and_lost_on_rollback() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("first")?;
    docs.commit()?;
    docs.add("second")?;
    assert_eq!(docs.find("second")?, Vec::<String>::new());
    let progress = docs.indexer.rollback()?;
    assert_eq!((progress.added_gid, progress.committed_gid), (1, 1));
    Ok(())
}

#[test]
fn the_marker_survives_reopening_and_duplicates_are_skipped() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("one")?;
    docs.add("two")?;
    docs.commit()?;
    let dir = docs.index.dir().to_path_buf();
    drop(docs.indexer);
    drop(docs.index);
    let index = TranscriptIndex::open(&dir)?;
    assert_eq!(index.committed_gid()?, 2);
    let mut indexer = Indexer::open(&index, IndexOptions::default())?;
    assert_eq!(indexer.progress().added_gid, 2);
    let again = crate::record::Entry {
        id: crate::ids::EntryId::new_v7(),
        session: session("r", "alice"),
        seq: 2,
        gid: 2,
        author: "alice".into(),
        turn: None,
        created_at: 0,
        kind: user_text("two"),
    };
    assert!(!indexer.add(&again, &super::test_support::bot("r"))?);
    indexer.commit()?;
    assert_eq!(index.num_entries(), 2);
    Ok(())
}

#[test]
fn an_index_of_another_format_is_recreated_empty() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("old")?;
    docs.commit()?;
    let dir = docs.index.dir().to_path_buf();
    // Write a commit whose marker claims another format.
    drop(docs.indexer);
    let mut writer = docs
        .index
        .index()
        .writer_with_num_threads::<tantivy::TantivyDocument>(1, 15_000_000)?;
    let mut prepared = writer.prepare_commit()?;
    prepared.set_payload(r#"{"format":999,"last_gid":1}"#);
    prepared.commit()?;
    drop(writer);
    drop(docs.index);
    let index = TranscriptIndex::open(&dir)?;
    assert_eq!((index.num_entries(), index.committed_gid()?), (0, 0));
    Ok(())
}

#[test]
fn bad_queries_fail_with_clear_errors() -> TestResult {
    let docs = Docs::new()?;
    let err = |q: SearchQuery| {
        docs.search(q)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(err(SearchQuery::new("")).contains("empty"));
    assert!(err(SearchQuery::new("x".repeat(513))).contains("the limit is 512: shorten it"));
    assert!(err(SearchQuery::new("\"open")).contains("unbalanced quote"));
    assert!(err(SearchQuery::new("ok").with_limit(0)).contains("1 to 100"));
    assert!(
        err(SearchQuery::new("ok").with_offset(MAX_SEARCH_OFFSET + 1))
            .contains("skip 0 to 10000 hits")
    );
    assert!(matches!(
        docs.search(SearchQuery::new("-only")),
        Err(IndexError::Query(QueryError::OnlyExclusions))
    ));
    Ok(())
}

#[tokio::test]
async fn the_search_trait_runs_off_the_async_threads() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("async search works")?;
    docs.commit()?;
    let engine: std::sync::Arc<dyn TranscriptSearch> = std::sync::Arc::new(docs.index.clone());
    let results = engine.search(SearchQuery::new("works")).await?;
    assert_eq!(results.total, 1);
    Ok(())
}

/// Regression (QA, 2026-12-05): a plain query of several words ranked the
/// text that has them side by side last: `lynx hyena` put "… a lynx hyena
/// sighting …" fourth of four. Words written together, in the query's
/// order, now add to the score; the others still match.
#[test]
fn words_written_together_rank_first() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("hyena lynx")?;
    docs.add("lynx report: the hyena arrived")?;
    docs.add("the lynx and the big spotted hyena")?;
    let together = docs.add(
        "in the long report of the week there was, among other things, a lynx hyena sighting \
         near the river that nobody had expected at all",
    )?;
    docs.commit()?;
    let results = docs.search(SearchQuery::new("lynx hyena"))?;
    assert_eq!(results.total, 4);
    assert_eq!(results.hits[0].gid, together, "{:#?}", results.hits);
    Ok(())
}

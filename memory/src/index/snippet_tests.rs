//! Snippets through searches on a real (temp dir) index: where a fragment
//! starts and ends, when `…` is added, and how literal `«`/`»` of the text
//! are kept apart from the match marks.

use pretty_assertions::assert_eq;

use super::SearchHit;
use super::SearchQuery;
use super::test_support::Docs;
use super::test_support::TestResult;

/// The only hit of `query` in an index holding `texts`.
fn hit_of(texts: &[&str], query: &str) -> Result<SearchHit, Box<dyn std::error::Error>> {
    let mut docs = Docs::new()?;
    for text in texts {
        docs.add(text)?;
    }
    docs.commit()?;
    let results = docs.search(SearchQuery::new(query))?;
    assert_eq!(results.total, 1, "{query}");
    Ok(results.hits[0].clone())
}

/// The snippet of the only hit of `query` in an index holding `texts`.
fn snippet_of(texts: &[&str], query: &str) -> Result<String, Box<dyn std::error::Error>> {
    Ok(hit_of(texts, query)?.snippet)
}

#[test]
fn a_whole_short_text_keeps_its_punctuation_and_gets_no_ellipsis() -> TestResult {
    assert_eq!(
        snippet_of(&["(urgent) did you ship the wombat?"], "wombat")?,
        "(urgent) did you ship the «wombat»?"
    );
    assert_eq!(
        snippet_of(&["C++ error: timeout (again)"], "again")?,
        "C++ error: timeout («again»)"
    );
    assert_eq!(
        snippet_of(&["the wombat said: “hi!” 🙂"], "hi")?,
        "the wombat said: “«hi»!” 🙂"
    );
    Ok(())
}

#[test]
fn a_cut_fragment_still_ends_with_an_ellipsis() -> TestResult {
    // the match is in the last words, but a long run of symbols follows
    let text = format!("{} the wombat? {}", "filler ".repeat(60), "=".repeat(200));
    let snippet = snippet_of(&[&text], "wombat")?;
    assert!(snippet.starts_with('…'), "{snippet}");
    assert!(snippet.ends_with("«wombat»…"), "{snippet}");
    // cut in the middle of the text
    let text = format!(
        "{} wombat {}",
        "filler ".repeat(100),
        "padding ".repeat(100)
    );
    let snippet = snippet_of(&[&text], "wombat")?;
    assert!(snippet.ends_with("padding…"), "{snippet}");
    Ok(())
}

#[test]
fn snippet_parts_tell_literal_guillemets_from_match_marks() -> TestResult {
    let hit = hit_of(&["fake «wombat2» and a real «highlight»?"], "wombat2")?;
    // the marked form cannot tell them apart
    assert_eq!(hit.snippet, "fake ««wombat2»» and a real «highlight»?");
    assert_eq!(
        hit.snippet_parts,
        ["fake «", "wombat2", "» and a real «highlight»?"]
    );
    let hit = hit_of(&["wombat one, wombat two"], "wombat")?;
    assert_eq!(hit.snippet, "«wombat» one, «wombat» two");
    assert_eq!(
        hit.snippet_parts,
        ["", "wombat", " one, ", "wombat", " two"]
    );
    Ok(())
}

/// Regression (QA, 2026-12-05): a match near the end of a text longer than
/// one fragment was shown in the text's last fragment alone, what the cuts
/// before it left: `…today, and finally the supplier «onboarding»` of a
/// 270-byte text. The fragment takes the words before it up to its budget.
#[test]
fn a_match_near_the_end_keeps_a_fragments_worth_of_context() -> TestResult {
    let text = format!(
        "{}and finally the supplier onboarding",
        "We talked about many things today, ".repeat(7)
    );
    let snippet = snippet_of(&[&text], "onboarding")?;
    assert!(snippet.starts_with('…'), "{snippet}");
    assert!(snippet.ends_with("«onboarding»"), "{snippet}");
    let shown = snippet.trim_start_matches('…').replace(['«', '»'], "");
    assert!(text.ends_with(&shown), "{snippet}");
    assert!(
        shown.len() > 200 && shown.len() <= 240,
        "{} bytes: {snippet}",
        shown.len()
    );
    // a Han run too: the words before the match, not only the match
    let han = format!("{}如出为里方用人", "供应商的准入管理".repeat(40));
    let snippet = snippet_of(&[&han], "\"如出为里方用人\"")?;
    assert!(snippet.ends_with("«如出为里方用人»"), "{snippet}");
    assert!(snippet.contains("供应商的准入管理"), "{snippet}");
    Ok(())
}

/// Regression (QA, 2026-12-05): an `OR` alternative that did not match
/// the text had its words marked where they stood alone: `供应商 OR
/// 明天的雨` marked `的` and `明天` in a text without `雨`. Only the
/// alternatives all of whose parts match in the text are marked; an
/// alternative that does match is marked whole.
#[test]
fn only_the_alternatives_that_match_are_marked() -> TestResult {
    let text = "我们的供应商被排除了，明天讨论";
    let other = "明天的雨很大";
    assert_eq!(
        snippet_of(&[text, "无关"], "供应商 OR 明天的雨")?,
        "我们的«供应商»被排除了，明天讨论"
    );
    assert_eq!(
        snippet_of(&[text, "无关"], "供应商 OR 我们的猫")?,
        "我们的«供应商»被排除了，明天讨论"
    );
    assert_eq!(
        snippet_of(
            &["kookaburra 大家好 today", "无关"],
            "kookaburra OR 大家都好吗"
        )?,
        "«kookaburra» 大家好 today"
    );
    // the alternative that matches is marked, all of it
    let hit = {
        let mut docs = Docs::new()?;
        docs.add(text)?;
        docs.add(other)?;
        docs.commit()?;
        docs.search(SearchQuery::new("供应商 OR 明天的雨"))?
    };
    assert_eq!(hit.total, 2);
    let snippets: Vec<&str> = hit.hits.iter().map(|h| h.snippet.as_str()).collect();
    assert!(
        snippets.contains(&"我们的«供应商»被排除了，明天讨论"),
        "{snippets:?}"
    );
    assert!(
        snippets
            .iter()
            .any(|s| s.contains("«明天»«的»«雨»") || s.contains("«明天的雨»")),
        "{snippets:?}"
    );
    Ok(())
}

#[test]
fn the_fragment_shows_every_word_of_the_query_over_many_copies_of_one() -> TestResult {
    // eleven `deploy`s up front, the one `rollback` the query also needs
    // at the end: the fragment with both wins over the one with more
    // copies of a single word (QA, 2026-12-07)
    let text = format!(
        "{} {} the last deploy keeps a rollback plan.",
        "We deploy checks, then each deploy step logs. ".repeat(6),
        "padding words here ".repeat(20)
    );
    let snippet = snippet_of(&[&text], "deploy rollback")?;
    assert!(snippet.contains("«rollback»"), "{snippet}");
    // words side by side at the end of a long text
    let text = format!("{} filler needleword end", "filler ".repeat(2000));
    let snippet = snippet_of(&[&text], "filler needleword")?;
    assert!(snippet.contains("«needleword»"), "{snippet}");
    Ok(())
}

use pretty_assertions::assert_eq;
use tantivy::tokenizer::TextAnalyzer;

use super::*;
use crate::index::SearchQuery;
use crate::index::test_support::Docs;
use crate::index::test_support::TestResult;

/// (text, position) of every token.
fn tokens(mut analyzer: TextAnalyzer, text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while let Some(t) = stream.next() {
        out.push((t.text.clone(), t.position));
    }
    out
}

fn owned(v: &[(&str, usize)]) -> Vec<(String, usize)> {
    v.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect()
}

#[test]
fn latin_words_are_lowercased_split_and_stemmed() {
    assert_eq!(
        tokens(index_analyzer(), "Suppliers, e-mail: DEPLOYED v2.1!"),
        owned(&[
            ("supplier", 0),
            ("e", 1),
            ("mail", 2),
            ("deploy", 3),
            ("v2", 4),
            ("2", 4),
            ("1", 5)
        ])
    );
    // Non-English Latin and other alphabets stay whole words (case- and
    // accent-folded: `ß` is `ss`, `ö` is `o`, then stemmed as English).
    assert_eq!(
        tokens(index_analyzer(), "Größe Привет"),
        owned(&[("gross", 0), ("привет", 1)])
    );
}

/// Regression (QA, 2026-12-05): `iPhone` did not find `iPhone15的价格`,
/// nor `Windows` `Windows11` (the index had `iphone15` and `15`). A word
/// of two letters or more then digits also gives its letters, stemmed as
/// a word, at the same position; one letter (`v2`) does not.
#[test]
fn a_letter_prefixed_number_is_also_indexed_as_its_letters() {
    assert_eq!(
        tokens(index_analyzer(), "iPhone15的 Windows11 Python3.11 ＧＰＴ４"),
        owned(&[
            ("iphone15", 0),
            ("15", 0),
            ("iphon", 0),
            ("的", 1),
            ("windows11", 2),
            ("11", 2),
            ("window", 2),
            ("python3", 3),
            ("3", 3),
            ("python", 3),
            ("11", 4),
            ("gpt4", 5),
            ("4", 5),
            ("gpt", 5),
        ])
    );
    // what a query of the name gives meets the letters' term
    assert_eq!(
        tokens(query_analyzer(), "iPhone Windows"),
        owned(&[("iphon", 0), ("window", 1)])
    );
}

/// Regression: `2.3.1` did not find `v2.3.1` (the index had `v2`, never
/// `2`). A word of letters then digits also gives its digits, at the same
/// position and over the same text; no other mix of letters and digits is
/// split, and a query keeps the word whole.
#[test]
fn a_letter_prefixed_number_is_also_indexed_as_its_digits() {
    assert_eq!(
        tokens(index_analyzer(), "v2.3.1 R2 x86 RFC9110 ｖ２"),
        owned(&[
            ("v2", 0),
            ("2", 0),
            ("3", 1),
            ("1", 2),
            ("r2", 3),
            ("2", 3),
            ("x86", 4),
            ("86", 4),
            ("rfc9110", 5),
            ("9110", 5),
            ("rfc", 5),
            ("v2", 6),
            ("2", 6),
        ])
    );
    let mut analyzer = index_analyzer();
    let mut stream = analyzer.token_stream("see v10");
    let mut spans = Vec::new();
    while let Some(t) = stream.next() {
        spans.push((t.text.clone(), t.offset_from, t.offset_to));
    }
    assert_eq!(
        spans,
        vec![
            ("see".to_owned(), 0, 3),
            ("v10".to_owned(), 4, 7),
            ("10".to_owned(), 4, 7)
        ]
    );
    // digits first, letters and digits alternating, digits alone: whole
    assert_eq!(
        tokens(index_analyzer(), "100ms 3fa85f64 a1b2 2024"),
        owned(&[("100ms", 0), ("3fa85f64", 1), ("a1b2", 2), ("2024", 3)])
    );
    // the query side asks for the word itself
    assert_eq!(
        tokens(query_analyzer(), "v2.3.1"),
        owned(&[("v2", 0), ("3", 1), ("1", 2)])
    );
}

#[test]
fn fullwidth_ascii_is_folded() {
    assert_eq!(
        tokens(index_analyzer(), "ＡＰＩ２０２４"),
        owned(&[("api2024", 0), ("2024", 0), ("api", 0)])
    );
}

#[test]
fn overlong_words_are_dropped() {
    let long = "a".repeat(MAX_WORD_CHARS + 1);
    let text = format!("before {long} after");
    assert_eq!(
        tokens(index_analyzer(), &text),
        owned(&[("befor", 0), ("after", 2)])
    );
    assert!(has_overlong_word(&text));
}

/// Regression: the limit was 64 bytes, so a Georgian word of 22 letters
/// (3 bytes each) was not indexed and refused as a query. It counts
/// characters now.
#[test]
fn the_word_limit_counts_characters() {
    let georgian = "სამშობლოსთვისთავდადებულისთვისაც";
    assert_eq!(tokens(index_analyzer(), georgian), owned(&[(georgian, 0)]));
    assert!(!has_overlong_word(georgian));
    let long = "ж".repeat(MAX_WORD_CHARS);
    assert_eq!(tokens(index_analyzer(), &long).len(), 1);
    let longer = "ж".repeat(MAX_WORD_CHARS + 1);
    assert_eq!(tokens(index_analyzer(), &longer), vec![]);
    assert!(has_overlong_word(&longer));
}

/// The (stemmed) term of each word of `text`, as the query side cuts it.
fn terms(text: &str) -> Vec<String> {
    tokens(query_analyzer(), text)
        .into_iter()
        .map(|(t, _)| t)
        .collect()
}

/// Regression: each character was lowercased on its own, so a final `ς`
/// stayed `ς` while `Σ` became `σ`, `ß` never met `SS`, and `İ` became
/// `i̇` (with a combining dot). Words are fully case-folded now.
#[test]
fn words_are_fully_case_folded() {
    assert_eq!(terms("ΣΊΣΥΦΟΣ Σίσυφος"), terms("σίσυφος σίσυφοσ"));
    assert_eq!(terms("σίσυφος"), vec!["σισυφοσ"]);
    assert_eq!(terms("ΟΔΥΣΣΕΑΣ"), terms("οδυσσεας"));
    assert_eq!(terms("İSTANBUL"), vec!["istanbul"]);
    assert_eq!(terms("Straße STRASSE ẞ"), terms("strasse strasse ss"));
    // other full mappings: ligature, long s, micro sign, Kelvin sign
    assert_eq!(terms("ﬁle ſun µ K"), terms("file sun μ k"));
    // the index side folds the same way
    assert_eq!(
        tokens(index_analyzer(), "ΣΊΣΥΦΟΣ"),
        tokens(query_analyzer(), "σίσυφος")
    );
}

/// Regression: a zero-width space, soft hyphen or word joiner split words
/// (and CJK runs) in two. Now they join and are left out of the term.
#[test]
fn invisible_characters_do_not_split_words() {
    assert_eq!(
        tokens(index_analyzer(), "苹\u{200B}果公司 soft\u{AD}ware"),
        tokens(index_analyzer(), "苹果公司 software")
    );
    assert_eq!(
        terms("a\u{2060}b\u{FEFF}c\u{200C}d\u{200D}e\u{180E}f"),
        vec!["abcdef"]
    );
    // alone, or after a space, they are separators
    assert_eq!(terms("\u{200B} x \u{FEFF}"), vec!["x"]);
    assert_eq!(classify('\u{200B}'), CharClass::Other);
    assert_eq!(classify('\u{3164}'), CharClass::Other);
    // offsets still cover the source text, invisible characters included
    let text = "soft\u{AD}ware!";
    let mut analyzer = index_analyzer();
    let mut stream = analyzer.token_stream(text);
    let token = stream.next().map(|t| (t.offset_from, t.offset_to));
    assert_eq!(token, Some((0, text.len() - 1)));
}

/// Regression: a combining mark split the word it belongs to: NFD
/// `nai\u{308}ve` was `nai` + `ve`, Devanagari `हिन्दी` was `हिन` + `दी`
/// (the virama), Thai was cut at its tone marks. Marks now stay in their
/// word, and words and CJK characters are compared in NFC.
#[test]
fn combining_marks_stay_in_their_word_and_text_is_compared_in_nfc() {
    assert_eq!(terms("nai\u{308}ve"), terms("naïve"));
    assert_eq!(terms("NAI\u{308}VE"), terms("naïve"));
    assert_eq!(terms("हिन्दी"), vec!["हिन्दी"]);
    assert_eq!(terms("ข้าวผัด"), vec!["ข้าวผัด"]);
    assert_eq!(terms("ฉันชอบกิน ข้าวผัด"), vec!["ฉันชอบกิน", "ข้าวผัด"]);
    // NFD kana and hangul are their composed characters
    assert_eq!(
        tokens(index_analyzer(), "か\u{3099}っこう"),
        tokens(index_analyzer(), "がっこう")
    );
    assert_eq!(
        tokens(
            index_analyzer(),
            "\u{1112}\u{1161}\u{11AB}\u{1100}\u{116E}\u{11A8}"
        ),
        tokens(index_analyzer(), "한국")
    );
    // a compatibility ideograph is its unified one
    assert_eq!(terms("\u{F900}"), terms("\u{8C48}"));
    // the token of an NFD word spans the word with its marks
    let text = "a nai\u{308}ve plan";
    let mut analyzer = index_analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut spans = Vec::new();
    while let Some(t) = stream.next() {
        spans.push(text[t.offset_from..t.offset_to].to_owned());
    }
    assert_eq!(spans, vec!["a", "nai\u{308}ve", "plan"]);
}

/// Through the index: a Greek word found across case and final sigma, a
/// CJK word with a zero-width space inside, an NFD query finding NFC text
/// (and the reverse), with the whole word marked in the snippet.
#[test]
fn searches_meet_across_case_invisible_characters_and_normal_forms() -> TestResult {
    let mut docs = Docs::new()?;
    docs.add("ΣΊΣΥΦΟΣ ήταν εδώ")?;
    docs.add("苹\u{200B}果公司 released soft\u{AD}ware")?;
    docs.add("a naïve plan")?;
    docs.add("cafe\u{301} au lait")?;
    docs.add("İSTANBUL in spring")?;
    docs.commit()?;
    assert_eq!(docs.find("σίσυφος")?, vec!["ΣΊΣΥΦΟΣ ήταν εδώ"]);
    let apple = "苹\u{200B}果公司 released soft\u{AD}ware";
    assert_eq!(docs.find("苹果公司")?, vec![apple]);
    assert_eq!(docs.find("苹果")?, vec![apple]);
    assert_eq!(docs.find("\"苹果公司\"")?, vec![apple]);
    assert_eq!(docs.find("software")?, vec![apple]);
    assert_eq!(docs.find("nai\u{308}ve")?, vec!["a naïve plan"]);
    assert_eq!(docs.find("café")?, vec!["cafe\u{301} au lait"]);
    assert_eq!(docs.find("istanbul")?, vec!["İSTANBUL in spring"]);
    let hits = docs.search(SearchQuery::new("café"))?.hits;
    assert_eq!(hits[0].snippet, "«cafe\u{301}» au lait");
    let hits = docs.search(SearchQuery::new("software"))?.hits;
    assert_eq!(
        hits[0].snippet,
        "苹\u{200B}果公司 released «soft\u{AD}ware»"
    );
    Ok(())
}

#[test]
fn index_mode_gives_unigrams_and_bigrams_of_cjk_runs() {
    assert_eq!(
        tokens(index_analyzer(), "供应商被排除"),
        owned(&[
            ("供", 0),
            ("供应", 0),
            ("应", 1),
            ("应商", 1),
            ("商", 2),
            ("商被", 2),
            ("被", 3),
            ("被排", 3),
            ("排", 4),
            ("排除", 4),
            ("除", 5),
        ])
    );
}

#[test]
fn query_mode_gives_bigrams_with_index_positions() {
    assert_eq!(
        tokens(query_analyzer(), "供应商 supplier"),
        owned(&[("供应", 0), ("应商", 1), ("supplier", 3)])
    );
    assert_eq!(tokens(query_analyzer(), "猫"), owned(&[("猫", 0)]));
    // The word after a run sits where the index puts it.
    let indexed = tokens(index_analyzer(), "供应商 supplier");
    assert_eq!(indexed.last(), Some(&("supplier".to_owned(), 3)));
}

#[test]
fn mixed_scripts_split_at_script_changes_not_inside_cjk() {
    assert_eq!(
        tokens(query_analyzer(), "API限流策略"),
        owned(&[("api", 0), ("限流", 1), ("流策", 2), ("策略", 3)])
    );
    // Kana and kanji form one run; punctuation ends it.
    assert_eq!(
        tokens(query_analyzer(), "東京の会議。ありがとう"),
        owned(&[
            ("東京", 0),
            ("京の", 1),
            ("の会", 2),
            ("会議", 3),
            ("あり", 5),
            ("りが", 6),
            ("がと", 7),
            ("とう", 8),
        ])
    );
    assert_eq!(
        tokens(query_analyzer(), "회의가 내일"),
        owned(&[("회의", 0), ("의가", 1), ("내일", 3)])
    );
}

/// Regression: accents were part of the term, so `Zurich` did not find
/// `Zürich` nor `Tromso` `Tromsø` (people type without accents on phones
/// and other keyboard layouts). Latin and Greek diacritics are dropped on
/// both sides, the Latin letters without a decomposition get their plain
/// spelling, Cyrillic only loses `ё`'s dots and stress marks; other
/// scripts' marks and CJK stay as they were.
#[test]
fn accents_are_folded_on_both_sides() {
    assert_eq!(terms("Zürich"), vec!["zurich"]);
    assert_eq!(terms("Tromsø"), vec!["tromso"]);
    assert_eq!(
        terms(
            "Zürich TROMSØ Ærøskøbing Œuvre Łódź Þórshöfn Đà Nẵng ıstanbul Smørrebrød Hðr Ħamrun"
        ),
        terms(
            "zurich tromso aeroskobing oeuvre lodz thorshofn da nang istanbul smorrebrod hdr hamrun"
        )
    );
    // decomposed text folds the same way as composed text
    assert_eq!(terms("Zu\u{308}rich cafe\u{301}"), terms("zurich cafe"));
    // Vietnamese: several marks on one letter
    assert_eq!(terms("Hà Nội Phở Ưu"), terms("ha noi pho uu"));
    // Greek tonos and dialytika
    assert_eq!(terms("Ελλάδα Αθήνα προϊόν"), terms("ελλαδα αθηνα προιον"));
    // Cyrillic: `ё` is `е`, a stress mark goes, `й` and `ї` stay letters
    assert_eq!(terms("Ёлка молоко\u{301} сѐло"), terms("елка молоко село"));
    assert_ne!(terms("мой"), terms("мои"));
    assert_eq!(terms("Київ"), vec!["київ"]);
    // marks of other scripts are their letters
    assert_eq!(terms("हिन्दी"), vec!["हिन्दी"]);
    assert_eq!(terms("ข้าวผัด"), vec!["ข้าวผัด"]);
    // CJK is never folded: `が` is not `か`
    assert_ne!(
        tokens(index_analyzer(), "がっこう"),
        tokens(index_analyzer(), "かっこう")
    );
    // the index side folds the same way, and offsets cover the word as written
    let text = "to Zu\u{308}rich, Tromsø!";
    let mut analyzer = index_analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut seen = Vec::new();
    while let Some(t) = stream.next() {
        seen.push((t.text.clone(), text[t.offset_from..t.offset_to].to_owned()));
    }
    let expected = [
        ("to", "to"),
        ("zurich", "Zu\u{308}rich"),
        ("tromso", "Tromsø"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(t, s)| ((*t).to_owned(), (*s).to_owned()))
        .collect();
    assert_eq!(seen, expected);
}

/// Through the index: a query without accents finds the accented text and
/// the reverse; phrases and exclusions work across accents; the snippet
/// marks the word as written.
#[test]
fn searches_meet_across_accents() -> TestResult {
    let mut docs = Docs::new()?;
    let trip = "Flights: Zürich then Tromsø on Friday";
    let office = "The Zurich office moved";
    docs.add(trip)?;
    docs.add(office)?;
    docs.add("Ελλάδα in May")?;
    docs.commit()?;
    assert_eq!(docs.find("tromso")?, vec![trip]);
    assert_eq!(docs.find_sorted("Zurich")?, vec![trip, office]);
    assert_eq!(docs.find_sorted("ZÜRICH")?, vec![trip, office]);
    assert_eq!(docs.find("\"zurich then tromso\"")?, vec![trip]);
    assert_eq!(docs.find("zurich -tromsø")?, vec![office]);
    assert_eq!(docs.find("ελλαδα")?, vec!["Ελλάδα in May"]);
    let hits = docs.search(SearchQuery::new("tromso zurich"))?.hits;
    assert_eq!(hits[0].snippet, "Flights: «Zürich» then «Tromsø» on Friday");
    Ok(())
}

#[test]
fn offsets_point_at_the_source_text() {
    let text = "Hi 供应商!";
    let mut analyzer = index_analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut seen = Vec::new();
    while let Some(t) = stream.next() {
        seen.push(text[t.offset_from..t.offset_to].to_owned());
    }
    assert_eq!(seen, vec!["Hi", "供", "供应", "应", "应商", "商"]);
}

#[test]
fn classify_knows_the_cjk_blocks() {
    assert_eq!(classify('供'), CharClass::Cjk(Script::Han));
    assert_eq!(classify('々'), CharClass::Cjk(Script::Han));
    assert_eq!(classify('の'), CharClass::Cjk(Script::Kana));
    assert_eq!(classify('ー'), CharClass::Cjk(Script::Kana));
    assert_eq!(classify('ｶ'), CharClass::Cjk(Script::Kana));
    assert_eq!(classify('한'), CharClass::Cjk(Script::Hangul));
    assert_eq!(classify('・'), CharClass::Other);
    assert_eq!(classify('。'), CharClass::Other);
    assert_eq!(classify('é'), CharClass::Word);
    assert_eq!(classify('7'), CharClass::Word);
    assert_eq!(classify('-'), CharClass::Other);
}

#[test]
fn jieba_cuts_han_query_runs_into_words() {
    assert_eq!(han_words("供应商排除"), vec!["供应商", "排除"]);
    assert_eq!(han_words("供应商"), vec!["供应商"]);
}

#[test]
fn empty_and_symbol_only_text_gives_no_tokens() {
    assert_eq!(tokens(index_analyzer(), ""), vec![]);
    assert_eq!(tokens(index_analyzer(), " ?! … 👍 "), vec![]);
}

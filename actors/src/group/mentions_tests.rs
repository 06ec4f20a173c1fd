//! Unit tests of [`super`]: which members a room message addresses.

use pretty_assertions::assert_eq;

use super::tests_support::members;
use super::*;

#[test]
fn finds_mentions_but_not_emails() {
    assert_eq!(
        mentions("@a, hi @B. mail bob@example.com (@c-d_) @ @..."),
        vec!["a", "B", "c-d"]
    );
    assert_eq!(mentions("@张三 你好"), vec!["张三"]);
    // after a sentence's dot, another mention (QA: `@Beta` was dropped)
    assert_eq!(mentions("@Alpha.@Beta"), vec!["Alpha", "Beta"]);
    assert_eq!(mentions("x@Alpha.com a_@b c-@d"), Vec::<&str>::new());
}

/// Mentions as Chinese users type them: right after a CJK character,
/// with the full-width `＠`, and with no space before the text that
/// follows (each was ignored, or an unknown mention).
#[test]
fn mentions_in_cjk_text_find_their_members() {
    assert_eq!(mentions("你好@记忆 请记住"), vec!["记忆"]);
    assert_eq!(mentions("＠记忆 请记住"), vec!["记忆"]);
    assert_eq!(mentions("你好＠记忆，请记住"), vec!["记忆"]);
    assert_eq!(mentions("mail bob@example.com"), Vec::<&str>::new());
    let m = vec![
        MemberName {
            id: "echo".into(),
            name: "回声机器人".into(),
        },
        MemberName {
            id: "mem".into(),
            name: "记忆".into(),
        },
        MemberName {
            id: "mem2".into(),
            name: "记忆助手".into(),
        },
    ];
    for (text, want) in [
        ("你好@记忆 请记住", vec![1]),
        ("＠记忆 请记住", vec![1]),
        ("@回声机器人你好", vec![0]),
        ("@echo你好", vec![0]),
        // the longest name the mention starts with
        ("@记忆助手请记住", vec![2]),
        ("@记忆请记住", vec![1]),
    ] {
        let s = select(text, &m);
        assert_eq!((s.members, s.unknown), (want, vec![]), "{text}");
    }
    assert_eq!(select("@Everyone大家好", &m).members, vec![0, 1, 2]);
    // a start that a CJK character does not follow is no match
    let s = select("@echoes你好", &m);
    assert_eq!(s.unknown, vec!["echoes你好".to_owned()]);
}

/// Regression (round 20, Chinese-user tester): a display name with an
/// emoji or a bracketed part could not be mentioned by name ("小助手🤖"
/// not as `@小助手`, "研究员 (Researcher)" not as `@研究员` nor
/// `@研究员Researcher`, and `请@研究员查一下` was the unknown
/// `@研究员查一下`); a Hindi name was cut at its first virama.
#[test]
fn names_with_emoji_or_brackets_answer_to_their_letters_and_digits() {
    let m = vec![
        MemberName {
            id: "zhushou".into(),
            name: "小助手🤖".into(),
        },
        MemberName {
            id: "yanjiu".into(),
            name: "研究员 (Researcher)".into(),
        },
        MemberName {
            id: "hindi".into(),
            name: "हिन्दी सहायक".into(),
        },
    ];
    for (text, want) in [
        ("@小助手 你好", vec![0]),
        ("@小助手🤖 你好", vec![0]),
        ("@研究员 请查一下", vec![1]),
        ("@研究员Researcher 请查一下", vec![1]),
        ("@研究员(researcher) 请查一下", vec![1]),
        ("请@研究员查一下", vec![1]),
        ("请＠研究员（Researcher）查一下", vec![1]),
        ("@小助手你好，@研究员Researcher查一下", vec![0, 1]),
        ("@हिन्दीसहायक नमस्ते", vec![2]),
        // ids and full width as before
        ("@zhushou @ＹＡＮＪＩＵ", vec![0, 1]),
    ] {
        let s = select(text, &m);
        assert_eq!((s.members, s.unknown), (want, vec![]), "{text}");
    }
    assert_eq!(mentions("@हिन्दी!"), vec!["हिन्दी"]);
    // a variation selector or an emoji ends the mention as before
    assert_eq!(mentions("@ab\u{fe0f}c @x🤖y"), vec!["ab", "x"]);
    let s = select("@小助 @研究", &m);
    assert_eq!(s.unknown, vec!["小助".to_owned(), "研究".to_owned()]);
}

/// A short form yields to an id or a whole name of the same length,
/// and one that two members share addresses neither (a mention wakes
/// one member); a longer short form still beats a shorter whole name.
#[test]
fn short_forms_yield_to_whole_names_and_are_never_shared() {
    let m: Vec<MemberName> = [
        ("xzs", "小助手"),
        ("zhushou", "小助手🤖"),
        ("a", "Bot (A)"),
        ("b", "Bot [B]"),
        ("mem", "记忆"),
        ("mem2", "记忆助手🤖"),
    ]
    .into_iter()
    .map(|(id, name)| MemberName {
        id: id.into(),
        name: name.into(),
    })
    .collect();
    for (text, want, unknown) in [
        ("@小助手 在吗", vec![0], vec![]),
        ("@小助手在吗", vec![0], vec![]),
        ("@zhushou 在吗", vec![1], vec![]),
        ("@Bot hi", vec![], vec!["Bot"]),
        ("@BotA hi @bot-b", vec![2, 3], vec![]),
        ("@记忆助手请记住", vec![5], vec![]),
        ("@记忆请记住", vec![4], vec![]),
    ] {
        let s = select(text, &m);
        let unknown: Vec<String> = unknown.into_iter().map(str::to_owned).collect();
        assert_eq!((s.members, s.unknown), (want, unknown), "{text}");
    }
    // short forms are not clashes: such rooms and fleets stay valid
    assert_eq!(m[0].clash(&m[1]), None);
    assert_eq!(m[2].clash(&m[3]), None);
}

/// Names that read the same clash: full width, invisible characters,
/// case beyond ASCII (each passed for another bot's name).
#[test]
fn names_that_read_the_same_clash() {
    let helper = MemberName {
        id: "helper".into(),
        name: "Helper".into(),
    };
    for name in ["Ｈｅｌｐｅｒ", "Helper\u{200b}", "HELPER", "Hel per"] {
        let other = MemberName {
            id: "hy".into(),
            name: name.into(),
        };
        assert!(helper.clash(&other).is_some(), "{name:?}");
        assert!(other.clash(&helper).is_some(), "{name:?}");
    }
    let greek = MemberName {
        id: "sis".into(),
        name: "ΣΊΣΥΦΟΣ".into(),
    };
    assert!(greek.answers_to("σίσυφος"));
    assert!(greek.answers_to("σίσυφοσ"));
    let cyrillic = MemberName {
        id: "hy".into(),
        name: "H\u{435}lper".into(),
    };
    // left to the name rule, which refuses a word mixing alphabets
    assert_eq!(helper.clash(&cyrillic), None);
}

#[test]
fn selects_by_id_or_name_case_insensitively() {
    let m = members(&["alpha", "beta", "gamma"]);
    let s = select("@BETA what do you think, @gamma-name?", &m);
    assert_eq!(s.members, vec![1, 2]);
    assert!(s.unknown.is_empty());
    let spaced = vec![MemberName {
        id: "r2".into(),
        name: "Research Bot".into(),
    }];
    assert_eq!(select("@researchbot go", &spaced).members, vec![0]);
}

#[test]
fn everyone_or_no_mention_selects_all() {
    let m = members(&["alpha", "beta"]);
    assert_eq!(select("hello", &m).members, vec![0, 1]);
    assert_eq!(select("@Everyone hello @beta", &m).members, vec![0, 1]);
}

/// The index finds what comparing with every earlier member in turn
/// finds: the same member, the same mention, for names that differ in
/// case, spaces, non-ASCII case rules, or are blank.
#[test]
fn the_name_index_finds_the_first_clash_like_a_pairwise_pass() {
    let names: Vec<MemberName> = [
        ("alpha", "Alpha"),
        ("beta", "Al Pha"),
        ("gamma", "BETA"),
        ("delta", "Beta Bot"),
        ("betabot", "Other"),
        ("kelvin", "Temp"),
        ("temp2", "\u{212A}elvin"),
        ("blank1", "   "),
        ("blank2", "  "),
        ("empty", ""),
        ("sigma", "ΟΔΟΣ"),
        ("sigma2", "οδος"),
        ("strasse", "Straße"),
        ("s2", "STRASSE"),
        ("x", "X"),
        ("ALPHA", "New"),
    ]
    .into_iter()
    .map(|(id, name)| MemberName {
        id: id.into(),
        name: name.into(),
    })
    .collect();
    let mut index = NameIndex::default();
    let mut clashes = 0;
    for (i, me) in names.iter().enumerate() {
        let pairwise = names[..i]
            .iter()
            .enumerate()
            .find_map(|(j, them)| them.clash(me).map(|token| (j, token)));
        let indexed = index
            .first_clash(me)
            .map(|(j, _, token): (&usize, _, _)| (*j, token));
        assert_eq!(indexed, pairwise, "{me:?}");
        clashes += usize::from(pairwise.is_some());
        index.insert(i, me.clone());
    }
    assert!(clashes >= 4, "the names should clash now and then");
}

#[test]
fn unknown_names_are_reported() {
    let m = members(&["alpha", "beta"]);
    let s = select("@Zed and @zed and @beta", &m);
    assert_eq!(s.members, vec![1]);
    assert_eq!(s.unknown, vec!["Zed".to_owned()]);
    let s = select("@Zed only", &m);
    assert_eq!(
        s,
        Selection {
            members: vec![],
            unknown: vec!["Zed".into()]
        }
    );
}

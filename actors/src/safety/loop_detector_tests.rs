use std::fmt::Write as _;
use std::time::Duration;

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;

/// Default thresholds with a budget no test run can exhaust, so a pass is
/// never the fail-open path.
fn config() -> LoopConfig {
    LoopConfig {
        check_budget: Duration::from_secs(3600),
        ..LoopConfig::default()
    }
}

/// Streams `text` in deltas of about `chunk` bytes; returns the verdict and
/// the bytes consumed when it was given.
fn stream_with(config: LoopConfig, text: &str, chunk: usize) -> (LoopVerdict, usize) {
    let mut detector = LoopDetector::new(config);
    let mut at = 0;
    while at < text.len() {
        let mut end = at.saturating_add(chunk.max(1)).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let verdict = detector.push(&text[at..end]);
        if verdict != LoopVerdict::Continue {
            return (verdict, end);
        }
        at = end;
    }
    assert!(
        !detector.budget_exhausted(),
        "the budget must not decide a test"
    );
    (LoopVerdict::Continue, text.len())
}

/// `len` pseudo-random lower-case letters.
fn noise(len: usize, seed: u64) -> String {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect()
}

fn stream(text: &str) -> (LoopVerdict, usize) {
    stream_with(config(), text, 20)
}

fn kind_period(verdict: &LoopVerdict) -> Option<(LoopKind, usize)> {
    match verdict {
        LoopVerdict::Continue => None,
        LoopVerdict::Loop { kind, period, .. } => Some((*kind, *period)),
    }
}

const SENTENCE: &str = "I will now fix the bug in the parser and run the tests again.";

#[test]
fn sentence_repeated_on_lines_trips_at_the_twelfth_line() {
    let line = format!("{SENTENCE}\n");
    let text = line.repeat(500);
    let (verdict, consumed) = stream(&text);
    assert_eq!(
        verdict,
        LoopVerdict::Loop {
            kind: LoopKind::Lines,
            period: 1,
            repeats: 12,
            sample: SENTENCE.to_owned(),
        }
    );
    assert!(consumed <= 12 * line.len() + 20, "consumed {consumed}");
}

#[test]
fn sentence_repeated_inline_trips_within_five_copies() {
    let unit = format!("{SENTENCE} ");
    let text = unit.repeat(500);
    let (verdict, consumed) = stream(&text);
    assert_eq!(
        verdict,
        LoopVerdict::Loop {
            kind: LoopKind::Chars,
            period: unit.chars().count(),
            repeats: 4,
            sample: unit.clone(),
        }
    );
    assert!(consumed <= 5 * unit.len(), "consumed {consumed}");
}

#[test]
fn single_character_trips_at_two_hundred() {
    let (verdict, consumed) = stream(&"a".repeat(10_000));
    assert_eq!(kind_period(&verdict), Some((LoopKind::Chars, 1)));
    assert!((200..=220).contains(&consumed), "consumed {consumed}");
}

#[test]
fn repeated_word_trips_with_its_period() {
    let (verdict, _) = stream(&format!("So {}", "the ".repeat(1000)));
    assert_eq!(kind_period(&verdict), Some((LoopKind::Chars, 4)));
}

#[test]
fn chinese_sentence_repeated_inline_trips() {
    let unit = "我现在来修复解析器里的这个错误，然后重新运行测试。";
    let (verdict, consumed) = stream(&unit.repeat(100));
    assert_eq!(
        kind_period(&verdict),
        Some((LoopKind::Chars, unit.chars().count()))
    );
    assert!(consumed < 10 * unit.len(), "consumed {consumed}");
}

#[test]
fn block_of_lines_repeated_trips_with_its_period() {
    let block = "Let me check the file again.\nReading src/main.rs.\nThe function looks correct.\n";
    let (verdict, _) = stream(&block.repeat(50));
    assert_eq!(
        verdict,
        LoopVerdict::Loop {
            kind: LoopKind::Lines,
            period: 3,
            repeats: 4,
            sample: block.trim_end().to_owned(),
        }
    );
}

#[test]
fn code_block_of_assert_variants_passes() {
    let mut text = String::from("Here are the checks:\n\n```rust\n#[test]\nfn indices() {\n");
    text.push_str("    let x: Vec<usize> = (0..200).collect();\n");
    for i in 0..200 {
        let _ = writeln!(text, "    assert_eq!(x[{i}], {i});");
    }
    text.push_str("}\n```\n\nAll 200 assertions hold.\n");
    assert_eq!(stream(&text).0, LoopVerdict::Continue);
}

#[test]
fn markdown_and_ascii_tables_pass() {
    let mut text = String::from("| id | name | score |\n|---:|:-----|------:|\n");
    for i in 0..150 {
        let _ = writeln!(text, "| {i} | user{i} | {} |", (i * 37) % 101);
    }
    text.push_str("\n+------+--------+\n| key  | value  |\n+======+========+\n");
    for i in 0..60 {
        let _ = writeln!(text, "| k{i:<3} | v{:<5} |\n+------+--------+", i * 7);
    }
    text.push_str("\n┌──────────────┐\n");
    for _ in 0..40 {
        text.push_str("│              │\n");
    }
    text.push_str("│   diagram    │\n└──────────────┘\n═══════════════\n");
    assert_eq!(stream(&text).0, LoopVerdict::Continue);
}

#[test]
fn numbered_list_passes() {
    let mut text = String::from("The steps:\n\n");
    for i in 1..=300 {
        let _ = writeln!(text, "{i}. Run step {i} and check the output of step {i}.");
    }
    assert_eq!(stream(&text).0, LoopVerdict::Continue);
}

#[test]
fn long_chinese_paragraph_passes() {
    let sentences = [
        "隐私不是事后脱敏，而是每个数据结构从建模起就带着分类、授权级别和用途。",
        "工具执行前的安全检查有三种模式：关闭、只记录不拦截、拦截。",
        "每个待审动作都会生成指纹、摘要、原因和默认十分钟的有效期。",
        "单行循环在流式文本到达时用周期匹配检测单字符或子串的重复。",
        "多行循环维护一个环形行队列，检测整行序列的周期性重复。",
        "代码块内的阈值更高，以免把正常代码误判为循环。",
        "由框线字符组成的表格边框行不算循环。",
        "检测有时间预算，超时则放弃检测，宁可放过也不误伤。",
        "文件锁分为按路径的文件锁和与所有文件锁互斥的排他锁。",
        "等待队列先进先出，排他等待者会阻塞后续的文件锁请求。",
        "等待中若请求被取消，就从队列中移除，绝不会再被授予。",
        "锁对象在离开作用域时自动释放，不必手动解锁。",
        "模型一旦开始重复自己，往往不会自行停下，而是一直输出到令牌上限。",
        "因此检测器在每个文本片段到达时增量地更新状态，而不是反复扫描整个缓冲区。",
        "如果同一句话连续出现太多次，轮次引擎会先注入一条提醒，再重试一次。",
        "第二次仍然循环时，轮次以不可重试的错误结束，用户会看到原因。",
        "凭据永远不会进入模型的上下文，工具只能通过引用拿到它们。",
        "通过环境变量交给命令的密钥，在输出返回模型之前会被替换掉。",
        "日志里只会出现分类占位符，而不是密钥本身，也不是它的哈希。",
        "路径在某些模式下只保留文件名，代码只保留摘要和长度。",
        "这些规则写成一个穷尽的匹配表达式，新增的分类必须显式做出决定。",
        "测试把整张决策表逐格断言，任何改动都会在评审中一目了然。",
        "公平队列保证排他请求不会饿死，也保证读者不会无限期地挡住写者。",
        "当多个子代理同时编辑同一个工作区时，这些锁让它们按顺序进行。",
    ];
    let mut text = String::new();
    for (i, s) in sentences.iter().enumerate() {
        let _ = write!(text, "第{}点：{s}", i + 1);
    }
    assert!(text.chars().count() > 600);
    assert_eq!(stream(&text).0, LoopVerdict::Continue);
}

#[test]
fn base64_blob_and_hex_dump_pass() {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut bytes = Vec::new();
    for _ in 0..12_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.push(state.to_le_bytes()[0]);
    }
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let encoded: String = bytes
        .chunks(3)
        .flat_map(|c| {
            let n = c.iter().fold(0u32, |n, &b| (n << 8) | u32::from(b)) << (8 * (3 - c.len()));
            (0..4).map(move |i| char::from(alphabet[((n >> (18 - 6 * i)) & 63) as usize]))
        })
        .collect();
    let mut text = String::from("```text\n");
    for line in encoded.as_bytes().chunks(76) {
        text.push_str(std::str::from_utf8(line).unwrap_or_default());
        text.push('\n');
    }
    text.push_str("```\n\n```text\n");
    for row in 0..200 {
        let _ = writeln!(
            text,
            "{:08x}  7f 45 4c 46 02 01 01 00  00 00 00 00 00 00 00 00  |.ELF............|",
            row * 16
        );
    }
    text.push_str("```\n");
    assert_eq!(stream(&text).0, LoopVerdict::Continue);
}

#[test]
fn fences_raise_the_thresholds() {
    let zeros = format!("let zeros = [{}0];\n", "0, ".repeat(255));
    let lines = "    0,\n".repeat(30);
    assert_eq!(
        stream(&format!("```rust\n{zeros}{lines}```\n")).0,
        LoopVerdict::Continue
    );
    assert_eq!(
        kind_period(&stream(&zeros).0),
        Some((LoopKind::Chars, 3)),
        "the same line outside a fence"
    );
    assert_eq!(kind_period(&stream(&lines).0), Some((LoopKind::Lines, 1)));
}

/// Regression (round 21, H2): a complete answer padded with 300 newlines,
/// spaces, tabs or CRLFs before its tool call failed the turn as "the same
/// 1 line(s) 12 times"; local models served by llama.cpp pad like that.
#[test]
fn whitespace_padding_never_trips() {
    for pad in [
        "\n", " ", "\t", "\r\n", " \n", "\t \n", "\u{3000}", "  \r\n",
    ] {
        let text = format!("ok{}", pad.repeat(5000));
        assert_eq!(stream(&text).0, LoopVerdict::Continue, "{pad:?}");
        let text = format!("Here it is.\n\n{}\nDone.", pad.repeat(5000));
        assert_eq!(
            stream_with(config(), &text, usize::MAX).0,
            LoopVerdict::Continue,
            "{pad:?} in one delta"
        );
    }
    // a line repeated with blank lines between its copies still trips, as
    // the line alone (the blank lines are not there for the line matcher)
    let text = format!("{SENTENCE}\n\n").repeat(40);
    assert_eq!(kind_period(&stream(&text).0), Some((LoopKind::Lines, 1)));
    // and a run of zeros after the padding is still a run of zeros
    let text = format!("ok{}{}", "\n".repeat(300), "0".repeat(300));
    assert_eq!(kind_period(&stream(&text).0), Some((LoopKind::Chars, 1)));
}

/// CI's proptest found `"|\n\n"` repeated 3,000 times passing after
/// blank lines became padding: each blank line ended the run of border lines.
/// Blank lines between border lines neither end nor extend the run.
#[test]
fn border_lines_with_blank_lines_between_them_are_still_a_run() {
    for unit in ["|\n\n", "---\n \n", "\u{2500}\n\n\n"] {
        let text = unit.repeat(3000);
        assert_eq!(
            kind_period(&stream(&text).0),
            Some((LoopKind::Lines, 1)),
            "{unit:?}"
        );
    }
    // a few separators between paragraphs are not a run
    let mut text = String::new();
    for i in 0..300 {
        let _ = write!(text, "Paragraph {i} says something new.\n\n---\n\n");
    }
    assert_eq!(stream(&text).0, LoopVerdict::Continue);
}

#[test]
fn border_lines_are_skipped_by_the_line_matcher() {
    // Identical rows separated by borders still trip: the borders are invisible.
    let text = "| same | row |\n|------|-----|\n".repeat(30);
    assert_eq!(kind_period(&stream(&text).0), Some((LoopKind::Lines, 1)));
    // Rows that differ, with identical borders between them, pass.
    let mut text = String::new();
    for i in 0..100 {
        let _ = writeln!(text, "| row {i} |\n+-------+");
    }
    assert_eq!(stream(&text).0, LoopVerdict::Continue);
}

#[test]
fn endless_border_lines_trip_after_the_cap() {
    let (verdict, consumed) = stream(&"+-----+\n".repeat(1000));
    assert_eq!(
        verdict,
        LoopVerdict::Loop {
            kind: LoopKind::Lines,
            period: 1,
            repeats: 201,
            sample: "+-----+".to_owned(),
        }
    );
    assert!(consumed <= 201 * 8 + 20, "consumed {consumed}");
}

#[test]
fn border_only_line_trips_once_longer_than_a_border() {
    let (verdict, consumed) = stream(&"─".repeat(5000));
    assert_eq!(kind_period(&verdict), Some((LoopKind::Chars, 1)));
    let chars = consumed / '─'.len_utf8();
    assert!((513..=530).contains(&chars), "consumed {chars} chars");
    assert_eq!(
        stream(&format!("{}\n", "─".repeat(500))).0,
        LoopVerdict::Continue
    );
}

#[test]
fn spent_budget_fails_open() {
    let mut detector = LoopDetector::new(LoopConfig {
        check_budget: Duration::ZERO,
        ..LoopConfig::default()
    });
    assert_eq!(detector.push(&"a".repeat(10_000)), LoopVerdict::Continue);
    assert!(detector.budget_exhausted());
    assert_eq!(detector.push(&"a".repeat(10_000)), LoopVerdict::Continue);
}

#[test]
fn tripped_detector_repeats_its_verdict_until_reset() {
    let mut detector = LoopDetector::new(config());
    let first = detector.push(&"ab".repeat(200));
    assert_eq!(kind_period(&first), Some((LoopKind::Chars, 2)));
    assert_eq!(detector.push("fresh text"), first);
    detector.reset();
    assert_eq!(detector.push("fresh text"), LoopVerdict::Continue);
    assert!(detector.check_time() < Duration::from_secs(3600));
}

#[test]
fn sample_is_truncated() {
    let unit = format!("{}!", noise(250, 7));
    match stream(&unit.repeat(10)).0 {
        LoopVerdict::Loop {
            kind,
            period,
            sample,
            ..
        } => {
            assert_eq!((kind, period), (LoopKind::Chars, 251));
            assert_eq!(sample, unit.chars().take(160).collect::<String>());
        }
        LoopVerdict::Continue => panic!("a 251-char unit repeated 10 times must trip"),
    }
}

#[test]
fn config_is_normalised() {
    let detector = LoopDetector::new(LoopConfig {
        chars: RepeatThreshold {
            min_repeats: 0,
            min_span: 0,
        },
        max_char_period: 0,
        max_line_period: 1_000_000,
        ..config()
    });
    assert_eq!(
        detector.config().chars,
        RepeatThreshold {
            min_repeats: 2,
            min_span: 1
        }
    );
    assert_eq!(detector.config().max_char_period, 1);
    assert_eq!(detector.config().max_line_period, 1024);
}

#[test]
fn fences_open_and_close_like_commonmark() {
    let backticks = Some(Fence {
        marker: '`',
        len: 3,
    });
    assert_eq!(next_fence(None, "```rust"), backticks);
    assert_eq!(next_fence(None, "   ```"), backticks);
    assert_eq!(next_fence(None, "``not a fence"), None);
    assert_eq!(next_fence(backticks, "```"), None);
    assert_eq!(next_fence(backticks, "```rust"), backticks, "info string");
    assert_eq!(next_fence(backticks, "~~~"), backticks, "other marker");
    let long = Some(Fence {
        marker: '~',
        len: 4,
    });
    assert_eq!(next_fence(None, "~~~~"), long);
    assert_eq!(next_fence(long, "~~~"), long, "too short");
    assert_eq!(next_fence(long, "~~~~~  "), None);
}

#[test]
fn period_runs_report_the_shortest_period() {
    let t = RepeatThreshold {
        min_repeats: 3,
        min_span: 1,
    };
    let mut runs = PeriodRuns::new(8, t, t);
    let hits: Vec<Option<Hit>> = [1, 2, 1, 2, 1, 2]
        .iter()
        .map(|&x| runs.push(x, false))
        .collect();
    assert_eq!(
        hits,
        vec![
            None,
            None,
            None,
            None,
            None,
            Some(Hit {
                period: 2,
                repeats: 3
            })
        ]
    );
    assert_eq!(runs.tail(2), &[1, 2]);
}

#[test]
fn chunking_does_not_change_the_verdict() {
    let text = format!(
        "Intro line.\n```\n{}```\n{}",
        "x = 1\n".repeat(30),
        "ok ".repeat(100)
    );
    let whole = stream_with(config(), &text, usize::MAX).0;
    assert_eq!(kind_period(&whole), Some((LoopKind::Chars, 3)));
    for chunk in [1, 3, 7, 20, 64] {
        assert_eq!(
            stream_with(config(), &text, chunk).0,
            whole,
            "chunk {chunk}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_text_never_trips(
        lines in prop::collection::vec("[a-zA-Z0-9 ,;!?()'\"]{0,400}", 0..60),
        chunk in 1usize..64,
    ) {
        let text = lines.join("\n");
        prop_assert_eq!(stream_with(config(), &text, chunk).0, LoopVerdict::Continue);
    }

    #[test]
    fn random_words_never_trip(
        words in prop::collection::vec(0usize..64, 0..3000),
        chunk in 1usize..64,
    ) {
        let mut text = String::new();
        for (i, w) in words.iter().enumerate() {
            let _ = write!(text, "w{w}");
            text.push(if i % 17 == 16 { '\n' } else { ' ' });
        }
        prop_assert_eq!(stream_with(config(), &text, chunk).0, LoopVerdict::Continue);
    }

    #[test]
    fn any_unit_repeated_enough_trips(
        unit in "[a-z .,:|`\\-\n─]{1,30}",
        chunk in 1usize..64,
    ) {
        // whitespace alone is padding, never a loop
        prop_assume!(!unit.trim().is_empty());
        let len = unit.chars().count();
        let text = unit.repeat(300 + 8000 / len);
        let verdict = stream_with(config(), &text, chunk).0;
        prop_assert!(kind_period(&verdict).is_some(), "{:?} did not trip", unit);
    }

    #[test]
    fn verdict_does_not_depend_on_chunking(
        prefix in "[a-z \n]{0,200}",
        unit in "[ab\n]{1,6}",
        times in 0usize..300,
        chunk in 1usize..40,
    ) {
        let text = format!("{prefix}{}", unit.repeat(times));
        let whole = stream_with(config(), &text, usize::MAX).0;
        prop_assert_eq!(stream_with(config(), &text, chunk).0, whole);
    }
}

//! Measured recall and precision of CJK tokenization choices on a small
//! hand-labelled set (the figures in docs/search.md come from here; run
//! `cargo test -p botfleet-memory recall -- --nocapture` to print them).
//!
//! - `jieba index`: documents cut with jieba search mode into a word set,
//!   queries cut with jieba and every word required (what a jieba tantivy
//!   tokenizer on both sides gives);
//! - `bigram exact`: our index, every whitespace-separated query chunk
//!   required as an exact substring (the query quoted chunk by chunk);
//! - `bigram + jieba query` (shipped): our index, unquoted query.

use std::collections::BTreeSet;

use super::test_support::Docs;
use super::test_support::TestResult;

const DOCS: &[&str] = &[
    "第二家供应商被排除了",
    "新供应商的报价比去年低",
    "供应链的问题还没有解决",
    "我们和服务商开会讨论合同",
    "她穿了一件漂亮的和服",
    "数据库迁移失败了，需要回滚",
    "明天把数据库的迁移脚本再跑一遍",
    "已经部署到生产环境",
    "生产环境的部署计划推迟了",
    "北京大学生前来应聘",
    "机器学习模型训练需要三天",
    "東京の会議は明日です",
    "東京都庁で打ち合わせ",
    "京都に行きます",
    "ありがとうございます、助かりました",
    "会議室を予約しました",
    "サーバーが落ちた",
    "API限流策略已上线",
    "请检查API的限流配置",
    "회의가 내일 있습니다",
    "上海的天气很好",
    "海上风很大",
    "他的供应商名单在共享盘里",
    "训练好的模型已经上传",
    "我们用飞书开会",
    "张伟明天来公司",
    "小红书上的评论很多",
    "新来的实习生叫王小明",
];

/// (query, indexes of the relevant documents).
const QUERIES: &[(&str, &[usize])] = &[
    ("供应商", &[0, 1, 22]),
    ("排除供应商", &[0]),
    ("和服", &[4]),
    ("数据库迁移", &[5, 6]),
    ("迁移失败", &[5]),
    ("部署 生产环境", &[7, 8]),
    ("生产环境部署", &[7, 8]),
    ("学生", &[9]),
    ("模型训练", &[10, 23]),
    ("東京", &[11, 12]),
    ("京都", &[13]),
    ("会議", &[11, 15]),
    ("予約", &[15]),
    ("ありがとう", &[14]),
    ("サーバー", &[16]),
    ("API 限流", &[17, 18]),
    ("限流", &[17, 18]),
    ("회의", &[19]),
    ("上海", &[20]),
    ("飞书", &[24]),
    ("张伟", &[25]),
    ("小红书", &[26]),
    ("王小明", &[27]),
];

#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Score {
    relevant: usize,
    found: usize,
    found_relevant: usize,
}

impl Score {
    fn add(&mut self, found: &BTreeSet<usize>, relevant: &[usize]) {
        self.relevant += relevant.len();
        self.found += found.len();
        self.found_relevant += relevant.iter().filter(|r| found.contains(r)).count();
    }

    fn recall(&self) -> f64 {
        self.found_relevant as f64 / self.relevant as f64
    }

    fn precision(&self) -> f64 {
        self.found_relevant as f64 / self.found.max(1) as f64
    }
}

fn is_word(w: &str) -> bool {
    w.chars().any(char::is_alphanumeric)
}

/// The `jieba index` strategy, simulated on word sets.
fn jieba_index(query: &str) -> BTreeSet<usize> {
    let jieba = jieba_rs::Jieba::new();
    let words: Vec<String> = jieba
        .cut(query, true)
        .into_iter()
        .map(|t| t.word.to_lowercase())
        .filter(|w| is_word(w))
        .collect();
    DOCS.iter()
        .enumerate()
        .filter(|(_, doc)| {
            let set: BTreeSet<String> = jieba
                .cut_for_search(doc, true)
                .into_iter()
                .map(|t| t.word.to_lowercase())
                .collect();
            words.iter().all(|w| set.contains(w))
        })
        .map(|(i, _)| i)
        .collect()
}

fn engine(
    docs: &Docs,
    gids: &[i64],
    query: &str,
) -> Result<BTreeSet<usize>, Box<dyn std::error::Error>> {
    let results = docs.search(super::SearchQuery::new(query).with_limit(100))?;
    Ok(results
        .hits
        .iter()
        .filter_map(|h| gids.iter().position(|&g| g == h.gid))
        .collect())
}

#[test]
#[allow(clippy::print_stdout)]
fn recall_of_cjk_strategies() -> TestResult {
    let mut docs = Docs::new()?;
    let gids: Vec<i64> = DOCS.iter().map(|d| docs.add(d)).collect::<Result<_, _>>()?;
    docs.commit()?;

    let (mut jieba, mut exact, mut shipped) =
        (Score::default(), Score::default(), Score::default());
    println!("| query | relevant | jieba index | bigram exact | bigram + jieba query |");
    println!("| --- | --- | --- | --- | --- |");
    for (query, relevant) in QUERIES {
        let quoted: Vec<String> = query
            .split_whitespace()
            .map(|c| format!("\"{c}\""))
            .collect();
        let a = jieba_index(query);
        let b = engine(&docs, &gids, &quoted.join(" "))?;
        let c = engine(&docs, &gids, query)?;
        jieba.add(&a, relevant);
        exact.add(&b, relevant);
        shipped.add(&c, relevant);
        println!("| {query} | {relevant:?} | {a:?} | {b:?} | {c:?} |");
    }
    for (name, s) in [
        ("jieba index", jieba),
        ("bigram exact", exact),
        ("bigram + jieba query", shipped),
    ] {
        println!(
            "{name}: recall {}/{} = {:.2}, precision {}/{} = {:.2}",
            s.found_relevant,
            s.relevant,
            s.recall(),
            s.found_relevant,
            s.found,
            s.precision()
        );
    }
    assert_eq!(shipped.recall(), 1.0, "{shipped:?}");
    assert!(shipped.recall() > jieba.recall(), "{jieba:?}");
    assert!(shipped.recall() > exact.recall(), "{exact:?}");
    Ok(())
}

//! The generated corpus of `search-load` and its queries, with the ground
//! truth each query has in the corpus.

use std::collections::HashSet;

use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionId;

/// SplitMix64: tiny, fast, good enough for a deterministic corpus.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub(crate) fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}

/// Samples ranks 0..n with probability proportional to 1/(rank+1)^s.
pub(crate) struct Zipf {
    pub(crate) cumulative: Vec<f64>,
}

impl Zipf {
    pub(crate) fn new(n: usize, s: f64) -> Self {
        let mut acc = 0.0;
        let cumulative = (1..=n)
            .map(|r| {
                acc += 1.0 / (r as f64).powf(s);
                acc
            })
            .collect();
        Self { cumulative }
    }

    pub(crate) fn sample(&self, rng: &mut Rng) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let x = rng.unit() * total;
        self.cumulative.partition_point(|&c| c < x)
    }
}

/// Chinese words of a work chat, space separated (real words, so that
/// jieba sees what it would see in production).
pub(crate) const HAN_TEXT: &str = "\
我们 今天 明天 下周 已经 需要 问题 项目 客户 供应商 \
数据库 服务器 部署 生产环境 会议 合同 报价 预算 进度 \
测试 上线 回滚 迁移 失败 成功 用户 反馈 需求 设计 方案 \
解决 经理 团队 模型 训练 数据 分析 报告 文档 代码 审核 \
发布 版本 接口 性能 优化 延迟 监控 告警 日志 配置 权限 \
安全 风险 成本 采购 物流 库存 订单 付款 发票 财务 市场 \
销售 推广 活动 渠道 品牌 产品 功能 体验 界面 移动端 网页 \
后台 前端 算法 缓存 集群 节点 容器 网络 存储 备份 恢复 \
故障 排查 修复 验证 评审 计划 目标 指标 增长 留存 转化 \
调研 竞品 合作 伙伴 供应链 质量 标准 流程 规范 培训 招聘 \
面试 入职 绩效 考核 周报 月报 季度 年度 总结 复盘 沟通 \
协调 确认 同步 跟进 推进 延期 提前 取消 排除 第二家 \
新版本 老系统 重构 升级 兼容 脚本 机器学习 北京 上海 \
深圳 东京 飞书 微信 邮件 电话 价格 折扣 交付 验收 上传 \
下载 登录 注册 支付 退款 投诉 建议 讨论 决定 负责 处理 的 \
了 和 在 是 有 把 被 还 也 就 都";

pub(crate) const CONSONANTS: &[u8] = b"bdfgklmnprtvz";
pub(crate) const VOWELS: &[u8] = b"aiou";
/// Last vowels: a, o, u (no `e`, `i`, `s` or `y` at the end, so the English
/// stemmer leaves every generated word alone and the truth stays exact).
pub(crate) const LAST_VOWELS: &[u8] = b"aou";
/// Latin vocabulary size.
pub(crate) const LATIN_WORDS: usize = 20_000;
/// Latin ranks below this are the corpus's function words: 1- and 2-term
/// queries skip them, and only "common" phrases are made of them alone.
pub(crate) const COMMON_LATIN: usize = 20;
/// The same for the Chinese word list.
pub(crate) const COMMON_HAN: usize = 10;
/// Marks a break between Latin runs in a document's word list.
pub(crate) const BREAK: u32 = u32::MAX;

/// The pseudo-English word of rank `i` (distinct for every `i`).
pub(crate) fn latin_word(i: usize) -> String {
    let syllables = if i < 2_000 { 2 } else { 3 };
    let last = i % (CONSONANTS.len() * LAST_VOWELS.len());
    let mut rest = i / (CONSONANTS.len() * LAST_VOWELS.len()) + usize::from(syllables == 3) * 7;
    let mut out = Vec::with_capacity(6);
    for _ in 1..syllables {
        let s = rest % (CONSONANTS.len() * VOWELS.len());
        rest /= CONSONANTS.len() * VOWELS.len();
        out.push(CONSONANTS[s % CONSONANTS.len()]);
        out.push(VOWELS[s / CONSONANTS.len()]);
    }
    out.push(CONSONANTS[last % CONSONANTS.len()]);
    out.push(LAST_VOWELS[last / CONSONANTS.len()]);
    String::from_utf8(out).unwrap_or_default()
}

pub(crate) struct Corpus {
    pub(crate) entries: Vec<Entry>,
    /// Bot of each entry.
    pub(crate) bot_of: Vec<u32>,
    /// Session index of each entry.
    pub(crate) session_of: Vec<u32>,
    /// Latin word ids of each entry, `BREAK` between runs.
    pub(crate) words: Vec<Vec<u32>>,
    pub(crate) bots: Vec<BotId>,
    pub(crate) sessions: Vec<SessionId>,
    pub(crate) latin: Vec<String>,
    /// The Chinese words of more than one character (query terms).
    pub(crate) han_content: Vec<&'static str>,
}

impl Corpus {
    pub(crate) fn generate(n: usize, seed: u64) -> anyhow::Result<Self> {
        let mut rng = Rng(seed);
        let latin: Vec<String> = (0..LATIN_WORDS).map(latin_word).collect();
        let latin_zipf = Zipf::new(LATIN_WORDS, 1.0);
        let han: Vec<&'static str> = HAN_TEXT.split_whitespace().collect();
        let han_zipf = Zipf::new(han.len(), 0.8);
        let bots: Vec<BotId> = (0..100)
            .map(|b| BotId::new(format!("bot-{b:02}")))
            .collect::<Result<_, _>>()?;
        let n_sessions = (n / 100).max(10);
        let sessions: Vec<SessionId> = (0..n_sessions)
            .map(|s| SessionId::derive(&bots[s % bots.len()], "dm", &format!("u{s}")))
            .collect();
        let mut seqs = vec![0i64; n_sessions];
        let mut corpus = Corpus {
            entries: Vec::with_capacity(n),
            bot_of: Vec::with_capacity(n),
            session_of: Vec::with_capacity(n),
            words: Vec::with_capacity(n),
            bots,
            sessions,
            latin,
            han_content: han
                .iter()
                .copied()
                .filter(|w| w.chars().count() > 1)
                .collect(),
        };
        for i in 0..n {
            let s = rng.below(n_sessions);
            seqs[s] += 1;
            let mut text = String::new();
            let mut words = Vec::new();
            let latin_run = |rng: &mut Rng, text: &mut String, words: &mut Vec<u32>, lo, hi| {
                let count = rng.range(lo, hi);
                for k in 0..count {
                    let id = latin_zipf.sample(rng);
                    let w = &corpus.latin[id];
                    if k == 0 {
                        let mut c = w.chars();
                        if let Some(f) = c.next() {
                            text.extend(f.to_uppercase());
                            text.push_str(c.as_str());
                        }
                    } else {
                        text.push_str(w);
                    }
                    words.push(id as u32);
                    let p = rng.below(100);
                    text.push_str(if k + 1 == count {
                        "."
                    } else if p < 6 {
                        ", "
                    } else {
                        " "
                    });
                }
                words.push(BREAK);
            };
            let han_run = |rng: &mut Rng, text: &mut String, lo, hi| {
                let count = rng.range(lo, hi);
                for k in 0..count {
                    text.push_str(han[han_zipf.sample(rng)]);
                    if k + 1 == count {
                        text.push('。');
                    } else if rng.below(100) < 12 {
                        text.push('，');
                    }
                }
            };
            match rng.below(10) {
                0..=4 => latin_run(&mut rng, &mut text, &mut words, 6, 30),
                5..=7 => han_run(&mut rng, &mut text, 4, 20),
                _ => {
                    latin_run(&mut rng, &mut text, &mut words, 3, 10);
                    text.push(' ');
                    han_run(&mut rng, &mut text, 3, 10);
                    text.push(' ');
                    latin_run(&mut rng, &mut text, &mut words, 3, 10);
                }
            }
            corpus.entries.push(Entry {
                id: EntryId::new_v7(),
                session: corpus.sessions[s],
                seq: seqs[s],
                gid: i as i64 + 1,
                author: format!("u{s}"),
                turn: None,
                created_at: 1_700_000_000_000 + i as i64 * 1_000,
                kind: EntryKind::UserMessage { text },
            });
            corpus.bot_of.push((s % corpus.bots.len()) as u32);
            corpus.session_of.push(s as u32);
            corpus.words.push(words);
        }
        Ok(corpus)
    }

    pub(crate) fn text(&self, i: usize) -> &str {
        self.entries[i].kind.text()
    }
}

// ---------------------------------------------------------------- queries

/// A term of a generated query.
#[derive(Debug, Clone)]
pub(crate) enum Term {
    Latin(u32),
    Han(&'static str),
}

/// A generated query, with what each engine is asked.
#[derive(Debug, Clone)]
pub(crate) enum Shape {
    One(Term),
    Two(Term, Term),
    /// Two Latin words next to each other.
    LatinPhrase(u32, u32),
    /// Two Chinese words next to each other.
    HanPhrase(&'static str, &'static str),
}

#[derive(Debug, Clone)]
pub(crate) struct Query {
    pub(crate) shape: Shape,
    /// Session indexes the query is restricted to (empty: all).
    pub(crate) sessions: Vec<u32>,
}

impl Corpus {
    pub(crate) fn term_text(&self, t: &Term) -> String {
        match t {
            Term::Latin(id) => self.latin[*id as usize].clone(),
            Term::Han(w) => (*w).to_owned(),
        }
    }

    /// The botfleet query text.
    pub(crate) fn ours(&self, q: &Shape) -> String {
        match q {
            Shape::One(t) => self.term_text(t),
            Shape::Two(a, b) => format!("{} {}", self.term_text(a), self.term_text(b)),
            Shape::LatinPhrase(a, b) => {
                format!(
                    "\"{} {}\"",
                    self.latin[*a as usize], self.latin[*b as usize]
                )
            }
            Shape::HanPhrase(a, b) => format!("\"{a}{b}\""),
        }
    }

    /// The FTS5 MATCH expression (every string quoted, so no FTS5 syntax).
    pub(crate) fn fts(&self, q: &Shape) -> String {
        match q {
            Shape::One(t) => format!("\"{}\"", self.term_text(t)),
            Shape::Two(a, b) => format!("\"{}\" \"{}\"", self.term_text(a), self.term_text(b)),
            Shape::LatinPhrase(a, b) => {
                format!(
                    "\"{} {}\"",
                    self.latin[*a as usize], self.latin[*b as usize]
                )
            }
            Shape::HanPhrase(a, b) => format!("\"{a}{b}\""),
        }
    }

    pub(crate) fn has(&self, i: usize, t: &Term) -> bool {
        match t {
            Term::Latin(id) => self.words[i].contains(id),
            Term::Han(w) => self.text(i).contains(w),
        }
    }

    /// Ground truth: does entry `i` match?
    pub(crate) fn matches(&self, i: usize, q: &Shape) -> bool {
        match q {
            Shape::One(t) => self.has(i, t),
            Shape::Two(a, b) => self.has(i, a) && self.has(i, b),
            Shape::LatinPhrase(a, b) => self.words[i].windows(2).any(|w| w[0] == *a && w[1] == *b),
            Shape::HanPhrase(a, b) => self.text(i).contains(&format!("{a}{b}")),
        }
    }

    pub(crate) fn random_term(&self, rng: &mut Rng) -> Term {
        if rng.below(2) == 0 {
            Term::Latin(rng.range(COMMON_LATIN, 5_000) as u32)
        } else {
            // Skip the one-character function words.
            Term::Han(self.han_content[rng.below(self.han_content.len())])
        }
    }

    /// A phrase of two neighbouring words taken from a random entry, so it
    /// exists. `common`: both words among the most frequent (the `"of the"`
    /// of this corpus); otherwise at least one is not.
    pub(crate) fn random_phrase(&self, rng: &mut Rng, common: bool) -> Shape {
        let wanted = |a: usize, b: usize, top: usize| {
            if common {
                a < top && b < top
            } else {
                a.max(b) >= top
            }
        };
        loop {
            let i = rng.below(self.entries.len());
            let words = &self.words[i];
            if rng.below(2) == 0 && words.len() > 2 {
                let k = rng.below(words.len() - 1);
                let (a, b) = (words[k], words[k + 1]);
                if a != BREAK && b != BREAK && wanted(a as usize, b as usize, COMMON_LATIN) {
                    return Shape::LatinPhrase(a, b);
                }
            } else {
                let text = self.text(i);
                for (ra, a) in self.han_content.iter().enumerate() {
                    let Some(at) = text.find(a) else { continue };
                    let next = &text[at + a.len()..];
                    if let Some(rb) = self.han_content.iter().position(|b| next.starts_with(b))
                        && wanted(ra, rb, COMMON_HAN)
                    {
                        return Shape::HanPhrase(a, self.han_content[rb]);
                    }
                }
            }
        }
    }

    pub(crate) fn shape(&self, kind: Kind, rng: &mut Rng) -> Shape {
        match kind {
            Kind::One | Kind::Restricted => Shape::One(self.random_term(rng)),
            Kind::Two => Shape::Two(self.random_term(rng), self.random_term(rng)),
            Kind::Phrase => self.random_phrase(rng, false),
            Kind::CommonPhrase => self.random_phrase(rng, true),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    One,
    Two,
    Phrase,
    Restricted,
    CommonPhrase,
}

impl Kind {
    pub(crate) const ALL: [Kind; 5] = [
        Kind::One,
        Kind::Two,
        Kind::Phrase,
        Kind::Restricted,
        Kind::CommonPhrase,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::One => "1-term",
            Kind::Two => "2-term",
            Kind::Phrase => "phrase",
            Kind::Restricted => "1-term, 50 sessions",
            Kind::CommonPhrase => "phrase of common words",
        }
    }

    pub(crate) fn key(self) -> &'static str {
        match self {
            Kind::One => "one_term",
            Kind::Two => "two_terms",
            Kind::Phrase => "phrase",
            Kind::Restricted => "one_term_50_sessions",
            Kind::CommonPhrase => "common_phrase",
        }
    }
}

pub(crate) fn latency_queries(corpus: &Corpus, kind: Kind, n: usize, rng: &mut Rng) -> Vec<Query> {
    (0..n)
        .map(|_| Query {
            shape: corpus.shape(kind, rng),
            sessions: if kind == Kind::Restricted {
                (0..50)
                    .map(|_| rng.below(corpus.sessions.len()) as u32)
                    .collect()
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// A query for the recall measurement: restricted to random sessions that
/// hold between 1 and 100 true matches together. Returns the truth too.
pub(crate) fn recall_query(corpus: &Corpus, kind: Kind, rng: &mut Rng) -> (Query, HashSet<i64>) {
    loop {
        let shape = corpus.shape(kind, rng);
        let mut per_session: Vec<Vec<i64>> = vec![Vec::new(); corpus.sessions.len()];
        for i in 0..corpus.entries.len() {
            if corpus.matches(i, &shape) {
                per_session[corpus.session_of[i] as usize].push(corpus.entries[i].gid);
            }
        }
        let mut order: Vec<usize> = (0..per_session.len()).collect();
        for k in (1..order.len()).rev() {
            order.swap(k, rng.below(k + 1));
        }
        let (mut sessions, mut truth) = (Vec::new(), HashSet::new());
        for s in order {
            if truth.len() + per_session[s].len() > 100 {
                continue;
            }
            truth.extend(per_session[s].iter().copied());
            sessions.push(s as u32);
            if sessions.len() >= 200 {
                break;
            }
        }
        if !truth.is_empty() {
            return (Query { shape, sessions }, truth);
        }
    }
}

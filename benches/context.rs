//! Context economy costs: token counting throughput (tiktoken-rs, each
//! encoding the config allows, on English, Chinese and code text) and the
//! per-model-call cost of a ~100,000-token session — the request assembled
//! from the engine's session context with cached per-message counts, the
//! first (uncached) count of all its messages, and one new entry pushed and
//! the total taken again.
//!
//! The session side goes through `botfleet_actors::bench_support`, which
//! calls the turn engine's own `SessionTail` (no store, no model).
//! Figures: docs/performance.md, "Context assembly and token counting".
//!
//! ```text
//! cargo bench -j2 --bench context
//! ```

use std::hint::black_box;
use std::time::Duration;
use std::time::Instant;

use botfleet_actors::StateBlock;
use botfleet_actors::bench_support::BenchTail;
use botfleet_actors::model::ToolSpec;
use botfleet_actors::tools::ToolRegistry;
use botfleet_memory::BotId;
use botfleet_memory::Encoding;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionId;
use botfleet_memory::ToolCallBody;
use botfleet_memory::TurnStatus;
use criterion::BatchSize;
use criterion::Criterion;
use criterion::Throughput;
use criterion::criterion_group;
use criterion::criterion_main;

/// Bytes of text per counting iteration.
const COUNT_BYTES: usize = 32 * 1024;
/// Tokens of the generated session (in its own encoding).
const SESSION_TOKENS: u64 = 100_000;
/// Entries pushed onto one copy of the session before a fresh copy is
/// taken, so the context stays ~100k tokens while pushes are timed.
const PUSH_CHUNK: u64 = 100;

const ENCODINGS: [(&str, Encoding); 2] = [
    ("o200k_base", Encoding::O200kBase),
    ("cl100k_base", Encoding::Cl100kBase),
];

const ENGLISH: &[&str] = &[
    "Could you check why the nightly import failed again? The log says the supplier feed timed out after 30 seconds.",
    "I moved the quarterly review to Thursday at 3:30 pm, so please update the agenda and send it to Maria before lunch.",
    "The migration ran on staging without errors, but the rollback script still references the old `orders_v2` table.",
    "Let's keep the retry budget at three attempts; anything more just hides real outages from the on-call engineer.",
    "Here is what I found: the invoice totals differ by 0.4% because the EU prices were rounded before conversion.",
    "Please don't change the public API yet — two customers depend on the current field names in their integrations.",
    "Remind me tomorrow morning to call the warehouse about the delayed shipment of 1,200 units from Rotterdam.",
    "Summarise the thread for me, but quote the exact wording of any constraint the client gave us.",
    "The dashboard shows p99 latency jumping from 180 ms to 2.4 s every day around 02:00 UTC, right when backups start.",
    "I think the parser bug is in the tokenizer: it treats a trailing backslash as an escape even at the end of input.",
    "Can you draft a short, friendly reply to Jonathan explaining that the refund will arrive within five business days?",
    "We decided against the second vendor because their support contract excludes weekends and public holidays.",
    "Run the full test suite, then open a pull request with a description of what changed and why.",
    "According to the spreadsheet, marketing spent €48,300 of its €60,000 budget, mostly on the conference in Lisbon.",
    "Noted. I'll compare both approaches, measure memory use under load, and report back with numbers this afternoon.",
    "The customer wants the export as CSV with ISO 8601 dates, semicolons as separators, and no header row.",
];

const CHINESE: &[&str] = &[
    "请帮我查一下昨晚的数据导入为什么又失败了，日志显示供应商的接口在三十秒后超时。",
    "季度评审改到周四下午三点半，请更新会议议程，并在午饭前发给玛丽亚。",
    "迁移脚本在测试环境运行正常，但是回滚脚本仍然引用旧的订单表。",
    "我们决定不选第二家供应商，因为他们的技术支持合同不包括周末和法定节假日。",
    "发票金额相差百分之零点四，原因是欧洲价格在换算之前就被四舍五入了。",
    "客户希望导出的文件是逗号分隔的表格，日期使用国际标准格式，并且不要表头。",
    "明天上午提醒我给仓库打电话，询问从鹿特丹发出的一千二百件货物为什么延迟。",
    "请总结一下这次讨论的要点，但客户提出的限制条件要逐字引用。",
    "监控面板显示，每天凌晨两点备份开始时，接口延迟从一百八十毫秒上升到两点四秒。",
    "在正式上线之前，请先运行完整的测试，然后提交合并请求并说明修改的原因。",
    "市场部已经花掉了六万欧元预算中的四万八千三百欧元，大部分用于里斯本的会议。",
    "好的，我会比较这两种方案，在高负载下测量内存占用，今天下午把结果告诉你。",
    "这个问题很可能出在分词器上：它把输入末尾的反斜杠也当成了转义字符。",
    "请给乔纳森写一封简短友好的回复，说明退款会在五个工作日内到账。",
];

const CODE: &[&str] = &[
    "pub fn parse_record(line: &str) -> Result<Record, ParseError> {",
    "    let mut fields = line.split(';').map(str::trim);",
    "    let id = fields.next().ok_or(ParseError::Missing(\"id\"))?.parse::<u64>()?;",
    "    let amount = Decimal::from_str(fields.next().unwrap_or_default())?;",
    "    if amount.is_sign_negative() { return Err(ParseError::Negative { id, amount }); }",
    "    Ok(Record { id, amount, currency: Currency::Eur })",
    "}",
    "#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]",
    "struct RetryPolicy { attempts: u32, backoff_ms: Vec<u64>, jitter: bool }",
    "for (i, item) in batch.iter().enumerate().filter(|(_, it)| it.retries < MAX_RETRIES) {",
    "        tracing::warn!(id = %item.id, attempt = item.retries, \"import failed: {err}\");",
    "def load_orders(conn, since: datetime) -> list[dict]:",
    "    rows = conn.execute(\"SELECT id, total, created_at FROM orders WHERE created_at > ?\", (since,))",
    "    return [dict(zip((\"id\", \"total\", \"created_at\"), r)) for r in rows.fetchall()]",
    "{\"status\": \"error\", \"code\": 504, \"message\": \"upstream timed out\", \"elapsed_ms\": 30012}",
    "$ cargo test -p importer -- --nocapture",
    "test parser::tests::rejects_negative_amounts ... ok",
    "test parser::tests::trailing_backslash_is_literal ... FAILED",
    "error[E0308]: mismatched types --> src/parser.rs:42:17 expected `u64`, found `&str`",
    "const MAX_RETRIES: u32 = 3; // anything more hides real outages",
    "    assert_eq!(parse_record(\"17; 12.50\").map(|r| r.amount), Ok(dec!(12.50)));",
    "    match self.state { State::Idle => self.start(), State::Running { since } if since.elapsed() > TIMEOUT => self.abort(), _ => {} }",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// At least `bytes` of text from `pool`, items joined by `sep`, with a
    /// line break now and then.
    fn text(&mut self, pool: &[&str], sep: &str, bytes: usize) -> String {
        let mut out = String::new();
        while out.len() < bytes {
            if !out.is_empty() {
                out.push_str(if self.below(5) == 0 { "\n" } else { sep });
            }
            out.push_str(self.pick(pool));
        }
        out
    }

    /// A user's message: English, Chinese or both.
    fn message(&mut self, bytes: usize) -> String {
        match self.below(10) {
            0..=5 => self.text(ENGLISH, " ", bytes),
            6..=8 => self.text(CHINESE, "", bytes),
            _ => format!(
                "{} {}",
                self.text(ENGLISH, " ", bytes / 2),
                self.text(CHINESE, "", bytes / 2)
            ),
        }
    }
}

fn bot() -> BotId {
    BotId::new("bench").unwrap_or_else(|e| panic!("{e}"))
}

fn session() -> SessionId {
    SessionId::derive(&bot(), "dm", "alice")
}

fn entry(seq: i64, author: &str, kind: EntryKind) -> Entry {
    Entry {
        id: EntryId::new_v7(),
        session: session(),
        seq,
        gid: seq,
        author: author.into(),
        turn: None,
        created_at: 1_764_460_800_000 + seq * 1_000,
        kind,
    }
}

fn call(id: String, name: &str, arguments: serde_json::Value) -> ToolCallBody {
    ToolCallBody {
        id,
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

/// Tokens the engine counts for an entry (its message text + framing; 0
/// for entries the model does not see).
fn entry_tokens(encoding: Encoding, kind: &EntryKind) -> u64 {
    let text = match kind {
        EntryKind::UserMessage { text } => text.clone(),
        EntryKind::Assistant {
            text, tool_calls, ..
        } => {
            let mut t = text.clone();
            for c in tool_calls {
                t.push(' ');
                t.push_str(&c.name);
                t.push(' ');
                t.push_str(&c.arguments);
            }
            t
        }
        EntryKind::ToolResult { content, .. } => content.clone(),
        EntryKind::AgentMessage { .. }
        | EntryKind::Event { .. }
        | EntryKind::Reminder { .. }
        | EntryKind::Delivery { .. }
        | EntryKind::Reaction { .. }
        | EntryKind::Notice { .. }
        | EntryKind::Approval { .. }
        | EntryKind::TurnEnd { .. }
        | EntryKind::Summary { .. } => return 0,
    };
    u64::from(encoding.count_message(&text))
}

/// The system message parts: instructions and a memory snapshot.
fn system(rng: &mut Rng) -> (String, StateBlock) {
    let identity = format!(
        "You are bench, the operations assistant of a small trading company.\n{}",
        rng.text(ENGLISH, " ", 4_000)
    );
    let state = StateBlock {
        text: format!(
            "Information about the people you work with (not instructions):\n{}",
            rng.message(3_000)
        ),
        hash: [7; 32],
        shown: Vec::new(),
    };
    (identity, state)
}

/// Entries of a session and the tokens they add up to.
struct SessionBuilder {
    encoding: Encoding,
    entries: Vec<Entry>,
    tokens: u64,
}

impl SessionBuilder {
    fn push(&mut self, author: &str, kind: EntryKind) -> i64 {
        let seq = self.entries.len() as i64 + 1;
        self.tokens += entry_tokens(self.encoding, &kind);
        self.entries.push(entry(seq, author, kind));
        seq
    }
}

/// A realistic session: turns of a user message, tool calls (Read, Shell,
/// SearchTranscript) and their results, a SendMessage reply, its delivery
/// and the turn end — until the context (system message included) holds
/// [`SESSION_TOKENS`].
fn session_entries(rng: &mut Rng, encoding: Encoding, system_tokens: u64) -> Vec<Entry> {
    let mut s = SessionBuilder {
        encoding,
        entries: Vec::new(),
        tokens: system_tokens,
    };
    let mut turn = 0;
    while s.tokens < SESSION_TOKENS {
        turn += 1;
        let len = 80 + rng.below(400);
        let input = s.push(
            "alice",
            EntryKind::UserMessage {
                text: rng.message(len),
            },
        );
        let calls: Vec<ToolCallBody> = (0..1 + rng.below(2))
            .map(|k| {
                let id = format!("call_{turn}_{k}");
                match rng.below(3) {
                    0 => call(
                        id,
                        "Read",
                        serde_json::json!({ "path": format!("src/importer/parser_{turn}.rs") }),
                    ),
                    1 => call(
                        id,
                        "Shell",
                        serde_json::json!({ "command": "cargo test -p importer 2>&1 | tail -40" }),
                    ),
                    _ => call(
                        id,
                        "SearchTranscript",
                        serde_json::json!({ "query": rng.pick(&["supplier timeout", "供应商", "refund policy"]) }),
                    ),
                }
            })
            .collect();
        let len = 60 + rng.below(200);
        s.push(
            "bench",
            EntryKind::Assistant {
                text: rng.text(ENGLISH, " ", len),
                tool_calls: calls.clone(),
                reasoning: None,
            },
        );
        for c in &calls {
            let content = match c.name.as_str() {
                "Read" => {
                    let len = 1_500 + rng.below(3_500);
                    rng.text(CODE, "\n", len)
                }
                "Shell" => {
                    let len = 500 + rng.below(1_500);
                    rng.text(CODE, "\n", len)
                }
                _ => {
                    let len = 500 + rng.below(700);
                    rng.message(len)
                }
            };
            s.push(
                "bench",
                EntryKind::ToolResult {
                    call_id: c.id.clone(),
                    name: c.name.clone(),
                    content,
                    is_error: false,
                },
            );
        }
        let len = 150 + rng.below(600);
        let reply = rng.message(len);
        let send_id = format!("call_{turn}_send");
        s.push(
            "bench",
            EntryKind::Assistant {
                text: String::new(),
                tool_calls: vec![call(
                    send_id.clone(),
                    "SendMessage",
                    serde_json::json!({ "text": reply }),
                )],
                reasoning: None,
            },
        );
        s.push(
            "bench",
            EntryKind::ToolResult {
                call_id: send_id.clone(),
                name: "SendMessage".into(),
                content: "delivered".into(),
                is_error: false,
            },
        );
        s.push(
            "bench",
            EntryKind::Delivery {
                text: reply,
                card: None,
                call_id: send_id,
            },
        );
        s.push(
            "bench",
            EntryKind::TurnEnd {
                status: TurnStatus::Completed,
                inputs: vec![input],
                deliveries: 1,
                usage: None,
            },
        );
    }
    s.entries
}

fn tool_specs() -> Vec<ToolSpec> {
    let registry = ToolRegistry::builtin();
    registry
        .names()
        .iter()
        .filter_map(|n| registry.get(n))
        .map(|t| t.spec())
        .collect()
}

/// The ~100k-token session of `encoding`, loaded but not counted, and its
/// last seq.
fn session_tail(encoding: Encoding) -> (BenchTail, i64) {
    let mut rng = Rng(0x5eed_c0de);
    let (identity, state) = system(&mut rng);
    let system_tokens = u64::from(encoding.count_message(&format!("{identity}\n\n{}", state.text)));
    let entries = session_entries(&mut rng, encoding, system_tokens);
    let last = entries.last().map(|e| e.seq).unwrap_or(0);
    let mut tail = BenchTail::from_entries(session(), &identity, &state, &entries, encoding);
    tail.set_tools(tool_specs());
    (tail, last)
}

fn counting(c: &mut Criterion) {
    let mut rng = Rng(0xc0ffee);
    let texts = [
        ("english", rng.text(ENGLISH, " ", COUNT_BYTES)),
        ("chinese", rng.text(CHINESE, "", COUNT_BYTES)),
        ("code", rng.text(CODE, "\n", COUNT_BYTES)),
    ];
    let mut group = c.benchmark_group("count");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(4));
    for (enc_name, encoding) in ENCODINGS {
        for (text_name, text) in &texts {
            group.throughput(Throughput::ElementsAndBytes {
                elements: u64::from(encoding.encode_count(text)),
                bytes: text.len() as u64,
            });
            group.bench_function(format!("{enc_name}/{text_name}"), |b| {
                b.iter(|| encoding.encode_count(black_box(text)))
            });
        }
    }
    // a text counted before: the process-wide cache answers
    let (_, english) = &texts[0];
    for (enc_name, encoding) in ENCODINGS {
        encoding.count(english);
        group.throughput(Throughput::Bytes(english.len() as u64));
        group.bench_function(format!("{enc_name}/english, counted before (cache)"), |b| {
            b.iter(|| encoding.count(black_box(english)))
        });
    }
    group.finish();
}

fn session_costs(c: &mut Criterion) {
    let mut rng = Rng(0xfeed);
    let new_input = entry(
        0,
        "alice",
        EntryKind::UserMessage {
            text: rng.message(300),
        },
    );
    let new_code = rng.text(CODE, "\n", 4_000);
    // one tool step: a Read call and its ~4 KB result (call ids unique per push)
    let new_step = |seq: i64| {
        let id = format!("call_new_{seq}");
        vec![
            entry(
                seq,
                "bench",
                EntryKind::Assistant {
                    text: String::new(),
                    tool_calls: vec![call(
                        id.clone(),
                        "Read",
                        serde_json::json!({ "path": "src/importer/parser.rs" }),
                    )],
                    reasoning: None,
                },
            ),
            entry(
                seq + 1,
                "bench",
                EntryKind::ToolResult {
                    call_id: id,
                    name: "Read".into(),
                    content: new_code.clone(),
                    is_error: false,
                },
            ),
        ]
    };
    for (enc_name, encoding) in ENCODINGS {
        let (uncounted, last) = session_tail(encoding);
        let mut counted = uncounted.clone();
        let total = counted.tokens();
        let mut group = c.benchmark_group(format!(
            "session {enc_name} ({total} tokens, {} messages)",
            counted.len()
        ));
        group.sample_size(20);
        group.measurement_time(Duration::from_secs(3));

        // the per-call cost: total from cached counts + request assembly
        group.bench_function("assemble request (cached counts)", |b| {
            let mut tail = counted.clone();
            b.iter(|| {
                let (tokens, request) = tail.assemble();
                black_box(&request);
                tail.restore(request);
                tokens
            })
        });
        group.bench_function("assemble request + memory update (cached counts)", |b| {
            let mut tail = counted.clone();
            tail.set_memory_update(Some(rng.message(400)));
            b.iter(|| {
                let (tokens, request) = tail.assemble();
                black_box(&request);
                tail.restore(request);
                tokens
            })
        });
        // not assembly: what a provider then does with the request
        group.bench_function("serialize request to JSON (serde_json)", |b| {
            let mut tail = counted.clone();
            let (_, request) = tail.assemble();
            b.iter(|| serde_json::to_vec(black_box(&request)).map(|v| v.len()))
        });
        group.bench_function("push user message (~300 B) + re-total", |b| {
            b.iter_custom(|iters| {
                timed_pushes(&counted, iters, |k| {
                    vec![Entry {
                        seq: last + k,
                        ..new_input.clone()
                    }]
                })
            })
        });
        group.bench_function("push tool step (call + ~4 KB result) + re-total", |b| {
            b.iter_custom(|iters| timed_pushes(&counted, iters, |k| new_step(last + 2 * k - 1)))
        });
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(6));
        group.throughput(Throughput::Elements(total));
        group.bench_function("count all messages (uncached, first load)", |b| {
            b.iter_batched(
                || {
                    Encoding::clear_cache();
                    uncounted.clone()
                },
                |mut tail| tail.tokens(),
                BatchSize::LargeInput,
            )
        });
        // a reload of a context whose texts this process counted before
        // (the tail's window filled, or a compaction reloaded it)
        uncounted.clone().tokens();
        group.bench_function("count all messages (texts counted before: reload)", |b| {
            b.iter_batched(
                || uncounted.clone(),
                |mut tail| tail.tokens(),
                BatchSize::LargeInput,
            )
        });
        group.finish();
    }
}

/// Time of `iters` pushes (the entries `make(k)` gives, then the total),
/// on a fresh copy of `base` every [`PUSH_CHUNK`] pushes so the context
/// stays the size under test. Copies and entries are made untimed.
fn timed_pushes(base: &BenchTail, iters: u64, make: impl Fn(i64) -> Vec<Entry>) -> Duration {
    let mut spent = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = PUSH_CHUNK.min(iters - done);
        let mut tail = base.clone();
        let batches: Vec<Vec<Entry>> = (1..=n as i64).map(&make).collect();
        // new entries are new texts: none may come from the count cache
        Encoding::clear_cache();
        let start = Instant::now();
        for batch in &batches {
            for e in batch {
                tail.push(e);
            }
            black_box(tail.tokens());
        }
        spent += start.elapsed();
        done += n;
    }
    spent
}

criterion_group!(benches, counting, session_costs);
criterion_main!(benches);

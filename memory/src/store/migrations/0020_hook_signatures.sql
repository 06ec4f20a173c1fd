-- 20: the signatures of recent webhook deliveries, so that a captured
-- request sent again under a fresh `X-Botfleet-Delivery` is answered as
-- the delivery it repeats after a restart too (the host also keeps them
-- in memory, as a cache). `signature` is a SHA-256 of the signature as
-- sent (never the signature itself); `delivery` is the ledger nonce (the
-- delivery id) it first came with, under the ledger source `source`
-- (`hook:<bot>/<hook>`). A row is written in the transaction that admits
-- its delivery, and counts only while the ledger holds that delivery with
-- the same digest (a row whose admission was a `conflict` or `unknown`
-- counts for nothing, and the next delivery of that signature replaces
-- it) and until `until_ms` (the host's window: 24 hours for a body-only
-- signature, the timestamp's tolerance for a timestamped one). `n` orders
-- a source's rows: past the host's cap (10,000 per hook) the oldest go,
-- in the transaction that adds one; expired rows go with the ledger's
-- hourly pruning.
CREATE TABLE hook_signatures (
    id        INTEGER PRIMARY KEY,
    source    TEXT NOT NULL,
    signature BLOB NOT NULL,
    delivery  TEXT NOT NULL,
    n         INTEGER NOT NULL,
    until_ms  INTEGER NOT NULL,
    UNIQUE (source, signature)
);
CREATE INDEX hook_signatures_order ON hook_signatures (source, n);
CREATE INDEX hook_signatures_until ON hook_signatures (until_ms);

-- 31: each remembered webhook signature keeps the digest of the delivery
-- it was written with, and counts while the ledger holds its delivery
-- with that digest. It was looked up with the digest of the request
-- asking, so after a restart a signature sent again with another body
-- (a timestamped signature over `{ts}.{body}` resent as a body-only one
-- with that text as its body: valid for both) found nothing and was
-- admitted as a new delivery, where the host that had it in memory
-- answered it as a replay (audit, 2026-12-07). NULL on rows written
-- before: those are looked up as before, until they expire.
ALTER TABLE hook_signatures ADD COLUMN digest TEXT;

//! An incremental decoder for `text/event-stream` bodies.
//!
//! Bytes go in as they come off the socket, in whatever pieces TCP and HTTP
//! chunking produced; complete events come out. The decoder buffers bytes,
//! never strings, so a piece that ends inside a multi-byte UTF-8 character,
//! inside a `data:` prefix or between `\r` and `\n` is simply held until the
//! rest arrives. Lines end with `\n`, `\r\n` or a lone `\r`; lines starting
//! with `:` are comments; a blank line dispatches the event. Only the `data`
//! field matters to chat completions, so `event`, `id` and `retry` are read
//! and ignored. An event cut off by the end of the body is discarded, as the
//! SSE specification says.
//!
//! Lines that are no SSE field at all are kept (up to [`STRAY_LIMIT`]
//! bytes) with the unfinished rest, for [`SseDecoder::unread`]: a server
//! that fails may answer a streamed request with a bare JSON error under
//! the SSE content type, and its message is in those lines.

/// Incremental SSE decoder; see the module docs.
#[derive(Debug, Default)]
pub(super) struct SseDecoder {
    /// Received bytes not yet consumed as lines.
    buf: Vec<u8>,
    /// Offset of the first unconsumed byte in `buf`.
    start: usize,
    /// The `data` field of the event being read (lines joined with `\n`).
    data: Vec<u8>,
    /// Whether the event being read has a `data` field at all.
    has_data: bool,
    /// Lines that are no SSE field (`{"error": …}`), joined with `\n`.
    stray: Vec<u8>,
}

/// Most bytes of stray lines kept.
pub(super) const STRAY_LIMIT: usize = 16 * 1024;

/// The fields of the SSE specification; a line naming another is stray.
const FIELDS: [&[u8]; 4] = [b"data", b"event", b"id", b"retry"];

/// Past this many consumed bytes, `buf` is compacted.
const COMPACT_AFTER: usize = 8 * 1024;

impl SseDecoder {
    /// Appends bytes received from the body.
    pub(super) fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held for the event being read: its `data` so far and the
    /// unfinished line. Once the complete events are taken, this is what a
    /// line or an event without end grows.
    pub(super) fn pending(&self) -> usize {
        self.buf.len() - self.start + self.data.len()
    }

    /// What the body held besides SSE: its stray lines and the unfinished
    /// last line, for when it ends without an event (see the module docs).
    pub(super) fn unread(&self) -> Vec<u8> {
        let mut unread = self.stray.clone();
        unread.extend_from_slice(&self.buf[self.start..]);
        unread
    }

    /// The `data` of the next complete event, if one is buffered.
    pub(super) fn next_event(&mut self) -> Option<Vec<u8>> {
        while let Some((line_start, line_end)) = self.take_line() {
            if line_start == line_end {
                if self.has_data {
                    self.has_data = false;
                    // an empty data buffer dispatches nothing (the SSE
                    // spec): `data:` alone is a proxy's heartbeat, which
                    // failed as a corrupt chunk (audit, 2026-12-07)
                    if self.data.is_empty() {
                        continue;
                    }
                    self.compact();
                    return Some(std::mem::take(&mut self.data));
                }
                continue;
            }
            let line = &self.buf[line_start..line_end];
            if line.first() == Some(&b':') {
                continue;
            }
            let (field, value) = match line.iter().position(|b| *b == b':') {
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &[][..]),
            };
            if field == b"data" {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            } else if !FIELDS.contains(&field) && self.stray.len() + line.len() < STRAY_LIMIT {
                self.stray.extend_from_slice(line);
                self.stray.push(b'\n');
            }
        }
        self.compact();
        None
    }

    /// The body ended: a `\r` it ended with, held back as the possible
    /// first half of `\r\n`, ends its line (lone `\r` line endings held
    /// the final `[DONE]` for good; audit, 2026-12-07). Whether that made
    /// a line of what was held, so events may be ready.
    pub(super) fn end_of_body(&mut self) -> bool {
        if self.buf[self.start..].last() != Some(&b'\r') {
            return false;
        }
        self.buf.push(b'\n');
        true
    }

    /// Consumes the next complete line, returning its bounds in `buf`
    /// without the terminator.
    fn take_line(&mut self) -> Option<(usize, usize)> {
        let rest = &self.buf[self.start..];
        let at = rest.iter().position(|b| *b == b'\n' || *b == b'\r')?;
        let terminator = match (rest[at], rest.get(at + 1)) {
            (b'\r', Some(b'\n')) => 2,
            // A `\r` that ends the buffer may be the first half of `\r\n`:
            // wait for the next byte.
            (b'\r', None) => return None,
            _ => 1,
        };
        let line = (self.start, self.start + at);
        self.start += at + terminator;
        Some(line)
    }

    /// Drops consumed bytes once enough of them have piled up.
    fn compact(&mut self) {
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > COMPACT_AFTER {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SseDecoder;
    use pretty_assertions::assert_eq;

    /// Feeds `input` in pieces of `piece` bytes and collects the events.
    fn decode(input: &[u8], piece: usize) -> Vec<String> {
        let mut decoder = SseDecoder::default();
        let mut events = Vec::new();
        for bytes in input.chunks(piece) {
            decoder.push(bytes);
            while let Some(data) = decoder.next_event() {
                events.push(String::from_utf8(data).unwrap());
            }
        }
        events
    }

    #[test]
    fn every_split_of_the_input_yields_the_same_events() {
        let input =
            "data: {\"a\":\"h\u{e9}llo \u{1f600}\"}\r\n\r\n: keep-alive\n\ndata: [DONE]\n\n";
        let expected = vec![
            "{\"a\":\"h\u{e9}llo \u{1f600}\"}".to_owned(),
            "[DONE]".to_owned(),
        ];
        for piece in 1..=input.len() {
            assert_eq!(
                decode(input.as_bytes(), piece),
                expected,
                "pieces of {piece} bytes"
            );
        }
    }

    #[test]
    fn several_events_in_one_piece() {
        let input = b"data: 1\n\ndata: 2\n\ndata: 3\n\n";
        assert_eq!(decode(input, input.len()), vec!["1", "2", "3"]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        assert_eq!(decode(b"data: a\ndata:b\n\n", 64), vec!["a\nb"]);
    }

    #[test]
    fn comments_and_other_fields_are_ignored() {
        let input = b": hello\nevent: message\nid: 7\nretry: 10\ndata: x\n\n";
        assert_eq!(decode(input, 5), vec!["x"]);
    }

    /// `data:` alone, a proxy's heartbeat, dispatches nothing (the SSE
    /// spec); it failed as a corrupt chunk (audit, 2026-12-07).
    #[test]
    fn an_empty_data_buffer_dispatches_nothing() {
        let input = b"data:\n\ndata: 1\n\ndata: \n\ndata: 2\n\n";
        assert_eq!(decode(input, 3), vec!["1", "2"]);
    }

    /// Lone `\r` line endings: the `\r` that ends the body ends its line
    /// once the body is over, so the final `[DONE]` is read (it was held
    /// for good, waiting for a `\n`; audit, 2026-12-07).
    #[test]
    fn a_lone_cr_at_the_end_of_the_body_ends_its_line() {
        let mut decoder = SseDecoder::default();
        decoder.push(b"data: 1\r\rdata: [DONE]\r\r");
        assert_eq!(decoder.next_event().as_deref(), Some(&b"1"[..]));
        assert_eq!(decoder.next_event(), None);
        assert!(decoder.end_of_body());
        assert_eq!(decoder.next_event().as_deref(), Some(&b"[DONE]"[..]));
        assert!(!decoder.end_of_body());
    }

    #[test]
    fn blank_lines_without_data_dispatch_nothing() {
        assert_eq!(decode(b"\n\n: ping\n\n\ndata: y\n\n", 3), vec!["y"]);
    }

    #[test]
    fn lone_carriage_returns_end_lines() {
        assert_eq!(decode(b"data: a\r\rdata: b\r\n\r\n", 1), vec!["a", "b"]);
    }

    #[test]
    fn an_event_cut_off_by_the_end_of_the_body_is_discarded() {
        assert_eq!(decode(b"data: 1\n\ndata: {\"half", 4), vec!["1"]);
    }

    /// Regression: a bare JSON error sent as the body of an SSE response
    /// was dropped with its message ("the stream ended early").
    #[test]
    fn lines_that_are_no_field_are_kept_for_a_bare_error() {
        let body = b"{\n  \"error\": {\"message\": \"model overloaded\"}\n}";
        for piece in [1, 7, body.len()] {
            let mut decoder = SseDecoder::default();
            for bytes in body.chunks(piece) {
                decoder.push(bytes);
                assert_eq!(decoder.next_event(), None);
            }
            assert_eq!(
                super::super::wire::bare_error(&decoder.unread())
                    .as_ref()
                    .map(super::super::wire::error_message)
                    .as_deref(),
                Some("model overloaded"),
                "pieces of {piece} bytes"
            );
        }
        let mut decoder = SseDecoder::default();
        decoder.push(b"data: {\"choices\": []}\n\nevent: x\n");
        while decoder.next_event().is_some() {}
        assert_eq!(super::super::wire::bare_error(&decoder.unread()), None);
    }

    #[test]
    fn long_streams_stay_compact() {
        let mut decoder = SseDecoder::default();
        for i in 0..10_000 {
            decoder.push(format!("data: {i}\n\n").as_bytes());
            assert_eq!(decoder.next_event(), Some(i.to_string().into_bytes()));
        }
        assert!(decoder.buf.is_empty());
    }
}

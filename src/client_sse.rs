//! The reader of `GET /v1/events`' bytes, as the HTML standard reads an
//! event stream: a line ends in `\r\n`, `\n` or `\r` (a proxy may
//! re-encode the host's `\n` as `\r\n`; before, only `\n\n` ended an
//! event and the CLI behind such a proxy never saw one); a blank line
//! ends an event; its `data:` lines are joined with `\n`; a line starting
//! with `:` is a comment; one space after a field's colon is dropped; an
//! event without data, and the unfinished one at the end, are not
//! events. An event longer than [`MAX_EVENT_BYTES`] (a server that is
//! not botfleet streaming without line breaks) ends the reading: its
//! bytes are not kept.

use std::collections::VecDeque;

use serde_json::Value;

use super::ServerEvent;

/// The most bytes one event may take (its name, its data, a line not
/// ended yet): the host's are a few hundred bytes. A stream with a longer one is not the
/// host's event stream as the CLI knows it, and reading on would grow the
/// CLI's memory without bound.
pub(super) const MAX_EVENT_BYTES: usize = 1 << 20;

/// Reads events out of a stream's bytes, whatever their chunking.
#[derive(Debug, Default)]
pub(super) struct EventReader {
    /// Bytes of a line not ended yet.
    line: Vec<u8>,
    /// The last line ended in `\r`: a `\n` first in the next bytes ends
    /// the same line.
    after_cr: bool,
    /// No line was read yet (a leading byte order mark is dropped).
    started: bool,
    /// The event's name so far (none: `message`).
    event: String,
    /// Its data so far, each `data:` line followed by `\n`.
    data: String,
    /// Events read and not taken yet.
    ready: VecDeque<ServerEvent>,
    /// An event was longer than [`MAX_EVENT_BYTES`]: nothing more is read.
    too_long: bool,
}

impl EventReader {
    /// Reads `bytes`, the next piece of the stream.
    pub(super) fn feed(&mut self, mut bytes: &[u8]) {
        if self.too_long {
            return;
        }
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        while let Some(end) = bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
            if !self.take(end) {
                return;
            }
            self.line.extend_from_slice(&bytes[..end]);
            let cr = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            let line = std::mem::take(&mut self.line);
            self.read_line(&String::from_utf8_lossy(&line));
        }
        if self.take(bytes.len()) {
            self.line.extend_from_slice(bytes);
        }
    }

    /// Whether `n` more bytes of a line fit in the event being read (its
    /// name, data and unfinished line); if not, all of it is dropped and
    /// nothing more is read.
    fn take(&mut self, n: usize) -> bool {
        if self.line.len() + n + self.data.len() + self.event.len() <= MAX_EVENT_BYTES {
            return true;
        }
        self.too_long = true;
        self.line = Vec::new();
        self.event = String::new();
        self.data = String::new();
        false
    }

    /// Whether an event longer than [`MAX_EVENT_BYTES`] ended the reading
    /// (events read before it are still taken).
    pub(super) fn too_long(&self) -> bool {
        self.too_long
    }

    /// The next event read, if any.
    pub(super) fn next_event(&mut self) -> Option<ServerEvent> {
        self.ready.pop_front()
    }

    fn read_line(&mut self, line: &str) {
        let line = if self.started {
            line
        } else {
            self.started = true;
            line.strip_prefix('\u{feff}').unwrap_or(line)
        };
        if line.is_empty() {
            self.dispatch();
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            // `id` and `retry`: the API sends neither
            _ => {}
        }
    }

    /// A blank line: the event read so far, if it has data.
    fn dispatch(&mut self) {
        let event = std::mem::take(&mut self.event);
        let mut data = std::mem::take(&mut self.data);
        if data.is_empty() {
            return;
        }
        data.pop();
        let event = if event.is_empty() {
            "message".to_owned()
        } else {
            event
        };
        let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
        self.ready.push_back(ServerEvent { event, data });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The events of `pieces`, fed one after the other.
    fn read(pieces: &[&[u8]]) -> Vec<ServerEvent> {
        let mut reader = EventReader::default();
        let mut out = Vec::new();
        for piece in pieces {
            reader.feed(piece);
            while let Some(ev) = reader.next_event() {
                out.push(ev);
            }
        }
        out
    }

    fn ev(event: &str, data: Value) -> ServerEvent {
        ServerEvent {
            event: event.to_owned(),
            data,
        }
    }

    const LF: &str =
        "event: ready\ndata: {}\n\n: keep-alive\n\nevent: change\ndata: {\"seq\":4}\n\n";

    #[test]
    fn every_line_ending_frames_the_same_events() {
        let want = vec![ev("ready", json!({})), ev("change", json!({"seq": 4}))];
        for ending in ["\n", "\r\n", "\r"] {
            let text = LF.replace('\n', ending);
            assert_eq!(read(&[text.as_bytes()]), want, "{ending:?}");
            // cut everywhere, `\r` and `\n` of one ending in two pieces too
            for at in 0..=text.len() {
                let (a, b) = text.as_bytes().split_at(at);
                assert_eq!(read(&[a, b]), want, "{ending:?} cut at {at}");
            }
            let bytes: Vec<&[u8]> = text.as_bytes().chunks(1).collect();
            assert_eq!(read(&bytes), want, "{ending:?} byte by byte");
        }
        // endings mixed in one stream
        let mixed = b"event: ready\r\ndata: {}\r\n\nevent: change\rdata: {\"seq\":4}\n\r";
        assert_eq!(read(&[mixed]), want);
    }

    #[test]
    fn fields_follow_the_standard() {
        // data lines joined with \n; one space after the colon dropped,
        // not two; no space at all is fine; comments and unknown fields
        // ignored; no event name is `message`
        let text = b"data:a\r\ndata:  b\r\n: note\r\nid: 7\r\nretry: 10\r\n\r\n";
        assert_eq!(read(&[text]), vec![ev("message", json!("a\n b"))]);
        // an event without data is none; an unfinished one at the end is
        // not read; a leading byte order mark is dropped
        let text = "\u{feff}event: ready\n\nevent: change\ndata: {}\n\ndata: 1\n";
        assert_eq!(read(&[text.as_bytes()]), vec![ev("change", json!({}))]);
        // a field line without a colon is a field with no value
        assert_eq!(read(&[b"data\n\n"]), vec![ev("message", json!(""))]);
    }

    /// A stream without line breaks, or one event of endless data lines,
    /// stops the reading at [`MAX_EVENT_BYTES`] and keeps none of it; the
    /// events before are still read. (The unfinished line grew without
    /// bound.)
    #[test]
    fn an_event_over_the_cap_ends_the_reading_and_keeps_nothing() {
        let chunk = vec![b'x'; 64 * 1024];
        let endless_line: &[u8] = &chunk;
        let mut data_lines = b"data: ".to_vec();
        data_lines.extend_from_slice(&chunk[..1000]);
        data_lines.push(b'\n');
        let data_lines = data_lines.repeat(64);
        for endless in [endless_line, &data_lines] {
            let mut reader = EventReader::default();
            reader.feed(b"event: ready\ndata: {}\n\n");
            let mut fed = 0;
            while !reader.too_long() {
                assert!(fed <= 2 * MAX_EVENT_BYTES, "never cut off");
                reader.feed(endless);
                fed += endless.len();
                let kept = reader.line.len() + reader.data.len() + reader.event.len();
                assert!(kept <= MAX_EVENT_BYTES + 1, "kept {kept}");
            }
            assert!(
                fed > MAX_EVENT_BYTES - endless.len(),
                "cut off early: {fed}"
            );
            assert_eq!(
                reader.line.len() + reader.data.len(),
                0,
                "its bytes are dropped"
            );
            reader.feed(b"\n\nevent: change\ndata: {}\n\n");
            assert_eq!(reader.next_event(), Some(ev("ready", json!({}))));
            assert_eq!(reader.next_event(), None, "nothing read after it");
        }
        // events adding up to far more, each small, are all read
        let many = "event: change\ndata: {\"seq\":4}\n\n".repeat(100_000);
        assert!(many.len() > 2 * MAX_EVENT_BYTES);
        let mut reader = EventReader::default();
        reader.feed(many.as_bytes());
        assert!(!reader.too_long());
        assert_eq!(std::iter::from_fn(|| reader.next_event()).count(), 100_000);
    }
}

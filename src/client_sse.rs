//! The reader of `GET /v1/events`' bytes, as the HTML standard reads an
//! event stream: a line ends in `\r\n`, `\n` or `\r` (a proxy may
//! re-encode the host's `\n` as `\r\n`; before, only `\n\n` ended an
//! event and the CLI behind such a proxy never saw one); a blank line
//! ends an event; its `data:` lines are joined with `\n`; a line starting
//! with `:` is a comment; one space after a field's colon is dropped; an
//! event without data, and the unfinished one at the end, are not
//! events.

use std::collections::VecDeque;

use serde_json::Value;

use super::ServerEvent;

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
}

impl EventReader {
    /// Reads `bytes`, the next piece of the stream.
    pub(super) fn feed(&mut self, mut bytes: &[u8]) {
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        while let Some(end) = bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
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
        self.line.extend_from_slice(bytes);
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
}

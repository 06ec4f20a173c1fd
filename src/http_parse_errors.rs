//! hyper answers a request it cannot read by itself, before the router
//! sees it: `400` (a request line or header it cannot parse), `414` (a URI
//! longer than [`MAX_URI_BYTES`]) or `431` (more than [`MAX_HEADERS`]
//! headers, or a head over [`MAX_HEAD_BYTES`]), all with an empty body.
//! [`JsonParseErrors`] wraps a connection's socket and writes, in place of
//! such an answer, the same status with the API's JSON error shape
//! (docs/api.md, Errors), so that a client can tell what to shorten.
//!
//! A client that speaks HTTP/2 without asking first (prior knowledge: `curl
//! --http2-prior-knowledge`, gRPC tooling) sends HTTP/2's connection
//! preface, which hyper's HTTP/1 server closed without a byte, leaving the
//! client with "connection reset" or "empty reply". Such a connection now
//! gets HTTP/2's own answer for it: an empty SETTINGS frame and a GOAWAY
//! with the error `HTTP_1_1_REQUIRED` (RFC 9113 §7) and a debug text
//! saying so, which HTTP/2 clients show and some act on by retrying over
//! HTTP/1.1.
//!
//! hyper offers no hook for these answers; it writes them as a bare head
//! (`content-length: 0`) and then closes the connection. The router never
//! answers an error without a body, so a bodiless 400, 414 or 431 head
//! written at the start of a write is always one of hyper's.

use std::io;
use std::pin::Pin;
use std::task::Context;
use std::task::Poll;
use std::task::ready;

use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::io::ReadBuf;

use crate::api::ApiError;

/// The longest URI (path and query) hyper reads; fixed in hyper.
pub(crate) const MAX_URI_BYTES: usize = 65_534;
/// The most headers hyper reads in a request; hyper's default.
pub(crate) const MAX_HEADERS: usize = 100;
/// The most bytes of request line and headers together: the size of a
/// connection's read buffer (hyper's default, set explicitly so that the
/// answer can name it).
pub(crate) const MAX_HEAD_BYTES: usize = 8192 + 4096 * 100;

/// The start of HTTP/2's connection preface (RFC 9113 §3.4), enough to
/// tell it from any HTTP/1 request line.
const H2_PREFACE_START: &[u8] = b"PRI * HTTP/2.0\r\n";

/// What debug text the GOAWAY to an HTTP/2 client carries.
const H2_REFUSAL: &[u8] = b"this server speaks HTTP/1.1 only: send the request over HTTP/1.1";

/// A connection's socket whose hyper-made error answers get a JSON body.
#[derive(Debug)]
pub(crate) struct JsonParseErrors<S> {
    inner: S,
    /// The answer written in place of hyper's, and how much of it is out.
    pending: Vec<u8>,
    sent: usize,
    /// Whether the first bytes are still being read to tell an HTTP/2
    /// preface from a request: they are held back from hyper meanwhile
    /// (the preface may come in pieces: QA sent `PRI` alone first).
    probing: bool,
    /// The first bytes, read while probing.
    probe: Vec<u8>,
    /// Bytes read while probing that are not a preface, for hyper's next
    /// reads.
    held: Vec<u8>,
}

impl<S> JsonParseErrors<S> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            pending: Vec::new(),
            sent: 0,
            probing: true,
            probe: Vec::new(),
            held: Vec::new(),
        }
    }
}

/// HTTP/2's answer to a client it will not serve: the server's preface (an
/// empty SETTINGS frame) and a GOAWAY of stream 0 with `HTTP_1_1_REQUIRED`
/// (0xd) and [`H2_REFUSAL`] as its debug data.
fn h2_refusal() -> Vec<u8> {
    const SETTINGS: u8 = 0x4;
    const GOAWAY: u8 = 0x7;
    const HTTP_1_1_REQUIRED: u32 = 0xd;
    let frame = |kind: u8, payload: &[u8]| {
        // a 24-bit length, the type, no flags, stream 0
        let len = u32::try_from(payload.len()).unwrap_or(0).to_be_bytes();
        let mut out = vec![len[1], len[2], len[3], kind, 0];
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(payload);
        out
    };
    let mut goaway = 0u32.to_be_bytes().to_vec(); // last stream id: none
    goaway.extend_from_slice(&HTTP_1_1_REQUIRED.to_be_bytes());
    goaway.extend_from_slice(H2_REFUSAL);
    let mut out = frame(SETTINGS, &[]);
    out.extend(frame(GOAWAY, &goaway));
    out
}

impl<S> JsonParseErrors<S> {
    /// A whole preface came: hyper sees the end of the connection before
    /// any request and shuts it down, which writes [`h2_refusal`] first
    /// (`poll_shutdown`).
    fn refuse_h2(&mut self) {
        self.probing = false;
        self.probe = Vec::new();
        self.pending = h2_refusal();
        self.sent = 0;
    }
}

impl<S: AsyncWrite + Unpin> JsonParseErrors<S> {
    /// Writes what is left of the replacement answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Takes `written` (hyper's bytes) as written when it is one of
    /// hyper's error answers, its replacement to be written instead.
    fn replace(&mut self, cx: &mut Context<'_>, written: &[u8]) -> Option<io::Result<()>> {
        self.pending = replacement(written)?;
        self.sent = 0;
        // a pending write goes on at the next write, flush or shutdown
        match self.poll_pending(cx) {
            Poll::Ready(Err(e)) => Some(Err(e)),
            Poll::Ready(Ok(())) | Poll::Pending => Some(Ok(())),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonParseErrors<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.probing && this.probe.is_empty() {
            // the first read, into hyper's buffer: a request tells itself
            // apart at once, and goes to hyper with no copy and no extra
            // read (only a preface's first piece is held back, below)
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
            let read = &buf.filled()[before..];
            let n = read.len().min(H2_PREFACE_START.len());
            if read.is_empty() || read[..n] != H2_PREFACE_START[..n] {
                this.probing = false;
                return Poll::Ready(Ok(()));
            }
            this.probe.extend_from_slice(read);
            buf.set_filled(before);
            if n == H2_PREFACE_START.len() {
                this.refuse_h2();
                return Poll::Ready(Ok(()));
            }
        }
        while this.probing {
            let mut chunk = [0u8; 64];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                // the end, before a whole preface: hyper sees what came
                this.probing = false;
                this.held = std::mem::take(&mut this.probe);
                break;
            }
            this.probe.extend_from_slice(read.filled());
            let n = this.probe.len().min(H2_PREFACE_START.len());
            if this.probe[..n] != H2_PREFACE_START[..n] {
                this.probing = false;
                this.held = std::mem::take(&mut this.probe);
            } else if n == H2_PREFACE_START.len() {
                this.refuse_h2();
                return Poll::Ready(Ok(()));
            }
        }
        if this.held.is_empty() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        let n = this.held.len().min(buf.remaining());
        buf.put_slice(&this.held[..n]);
        this.held.drain(..n);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonParseErrors<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        match this.replace(cx, buf) {
            Some(result) => Poll::Ready(result.map(|()| buf.len())),
            None => Pin::new(&mut this.inner).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        // hyper's bare head is the one slice with bytes
        let mut full = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(only), None) = (full.next(), full.next())
            && let Some(result) = this.replace(cx, only)
        {
            return Poll::Ready(result.map(|()| only.len()));
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// The error of a hyper-made answer by its status code.
fn error_of(code: &str) -> Option<ApiError> {
    Some(match code {
        "400" => ApiError::BadRequest(
            "the request is not valid HTTP/1.1: its request line or a header could not be \
             read (a bad method, URI, header or version); send a well-formed request"
                .into(),
        ),
        "414" => ApiError::UriTooLong(format!(
            "the request's URI (path and query) is longer than {MAX_URI_BYTES} bytes; shorten \
             it (send long text in a POST body)"
        )),
        "431" => ApiError::HeadersTooLarge(format!(
            "the request's headers are too large: send at most {MAX_HEADERS} headers and at \
             most {MAX_HEAD_BYTES} bytes of request line and headers together (large cookies \
             are a usual cause)"
        )),
        _ => return None,
    })
}

/// The answer to write instead of `written` when `written` is a bare
/// 400, 414 or 431 head (no body, nothing after it); `None` otherwise.
/// The replacement keeps the status line and hyper's other headers
/// (`date`), has the headers of every other `/v1` answer
/// (`x-content-type-options: nosniff`, `cache-control: no-store`), and
/// says that the connection closes, as hyper closes it.
fn replacement(written: &[u8]) -> Option<Vec<u8>> {
    // every write of every answer comes here: all but hyper's errors
    // leave at this byte comparison (the code follows `HTTP/1.x `)
    if !matches!(written.get(9..12), Some(b"400" | b"414" | b"431")) {
        return None;
    }
    let head = std::str::from_utf8(written.strip_suffix(b"\r\n\r\n")?).ok()?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let code = status_line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| status_line.strip_prefix("HTTP/1.0 "))?
        .get(..3)?;
    let error = error_of(code)?;
    let headers: Vec<&str> = lines.collect();
    let bodiless = headers
        .iter()
        .any(|h| h.eq_ignore_ascii_case("content-length: 0"));
    if !bodiless || headers.iter().any(|h| h.is_empty()) {
        return None;
    }
    let body = error.body().to_string();
    let mut out = format!("{status_line}\r\n");
    for header in headers {
        let name = header.split(':').next().unwrap_or_default().trim();
        if !(name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("connection"))
        {
            out.push_str(header);
            out.push_str("\r\n");
        }
    }
    out.push_str(&format!(
        "content-type: application/json\r\ncontent-length: {}\r\nx-content-type-options: nosniff\r\n\
         cache-control: no-store\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ));
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Regression (QA): HTTP/2's preface sent in pieces (`PRI`, then the
    /// rest) reached hyper, which closed without a byte; only a preface
    /// whole in the first read was answered. The first bytes are held
    /// back until they tell.
    #[tokio::test]
    async fn a_preface_in_pieces_is_refused_and_a_request_in_pieces_passes() {
        use futures::task::noop_waker_ref;
        use tokio::io::AsyncReadExt;
        use tokio::io::AsyncWriteExt;

        let (mut client, server) = tokio::io::duplex(1024);
        let mut conn = JsonParseErrors::new(server);
        client.write_all(b"PRI").await.unwrap();
        // what hyper would see now: nothing yet
        let mut buf = [0u8; 256];
        let mut read = ReadBuf::new(&mut buf);
        let mut cx = Context::from_waker(noop_waker_ref());
        assert!(
            Pin::new(&mut conn)
                .poll_read(&mut cx, &mut read)
                .is_pending()
        );
        client
            .write_all(b" * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
        // the end of the connection to hyper, and the refusal on shutdown
        assert_eq!(conn.read(&mut buf).await.unwrap(), 0);
        conn.shutdown().await.unwrap();
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, h2_refusal());

        // a request in pieces reaches hyper whole
        let (mut client, server) = tokio::io::duplex(1024);
        let mut conn = JsonParseErrors::new(server);
        client.write_all(b"PO").await.unwrap();
        let mut read = ReadBuf::new(&mut buf);
        let mut seen = Vec::new();
        if Pin::new(&mut conn).poll_read(&mut cx, &mut read).is_ready() {
            seen.extend_from_slice(read.filled());
        }
        client.write_all(b"ST / HTTP/1.1\r\n\r\n").await.unwrap();
        drop(client);
        conn.read_to_end(&mut seen).await.unwrap();
        assert_eq!(seen, b"POST / HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn only_a_bare_error_head_is_replaced() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Wed, 02 Dec 2026 07:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(replacement(head).unwrap()).unwrap();
        let (top, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(top.starts_with("HTTP/1.1 431 "), "{top}");
        assert!(top.contains("date: Wed"), "{top}");
        assert!(top.contains("x-content-type-options: nosniff"), "{top}");
        assert!(top.contains("cache-control: no-store"), "{top}");
        assert!(
            top.contains(&format!("content-length: {}", body.len())),
            "{top}"
        );
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"]["code"], "headers_too_large");
        // the router's own answers pass as they are
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement(ok).is_none());
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}";
        assert!(replacement(with_body).is_none());
        let head_only = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n";
        assert!(replacement(head_only).is_none());
    }
}

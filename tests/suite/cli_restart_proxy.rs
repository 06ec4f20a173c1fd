//! A loopback TCP proxy in front of a host that loses its answer to one
//! request, as a host killed at that moment would: the request reaches the
//! host, which acts on it and starts answering, and the CLI receives none
//! (or only the head) of the answer before its connection closes. Every
//! other connection is relayed as is; one to a host that is down is closed
//! at once, as a refused connection would fail.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// How much of the lost answer the CLI receives.
#[derive(Clone, Copy)]
pub enum Cut {
    /// Nothing: the connection closes once the host starts answering.
    Whole,
    /// The status line and headers, not the body.
    Body,
}

/// The proxy; it stops when dropped.
pub struct CutProxy {
    /// Its address, for the CLI's `BOTFLEET_HOST`.
    pub url: String,
    /// Notified once the answer to the matching request was withheld.
    cut: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl CutProxy {
    /// Relays connections to the host on `upstream`; the answer to the
    /// first request whose head starts with `request` (such as `POST
    /// /v1/bots/a/messages `) is lost as `how` says.
    pub async fn start(upstream: u16, request: &'static str, how: Cut) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let cut = Arc::new(Notify::new());
        let armed = Arc::new(AtomicBool::new(true));
        let notify = cut.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (armed, notify) = (armed.clone(), notify.clone());
                tokio::spawn(relay(client, upstream, request, how, armed, notify));
            }
        });
        Self { url, cut, task }
    }

    /// Waits (at most 20 s) until the answer was withheld: the host has
    /// taken the request by then.
    pub async fn wait_cut(&self) {
        tokio::time::timeout(Duration::from_secs(20), self.cut.notified())
            .await
            .expect("the request to cut never came");
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Relays one connection, or cuts its answer if its first request is the
/// one to cut (and none was cut yet).
async fn relay(
    mut client: TcpStream,
    upstream: u16,
    request: &'static str,
    how: Cut,
    armed: Arc<AtomicBool>,
    cut: Arc<Notify>,
) {
    let Ok(mut host) = TcpStream::connect(("127.0.0.1", upstream)).await else {
        // the host is down: the client's connection closes unanswered
        return;
    };
    // the start of the first request, enough to tell which it is
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while head.len() < request.len() {
        match client.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    if host.write_all(&head).await.is_err() {
        return;
    }
    if !head.starts_with(request.as_bytes()) || !armed.swap(false, Ordering::SeqCst) {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut host).await;
        return;
    }
    let (mut from_client, mut to_client) = client.split();
    let (mut from_host, mut to_host) = host.split();
    // the rest of the request goes on to the host while its answer is read
    let forward = tokio::io::copy(&mut from_client, &mut to_host);
    let answer = async {
        let mut answer = Vec::new();
        loop {
            match from_host.read(&mut buf).await {
                Ok(0) | Err(_) => return answer,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
            match how {
                Cut::Whole => return Vec::new(),
                Cut::Body => {
                    if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
                        answer.truncate(end + 4);
                        return answer;
                    }
                }
            }
        }
    };
    let answer = tokio::select! {
        answer = answer => answer,
        _ = forward => return,
    };
    let _ = to_client.write_all(&answer).await;
    let _ = to_client.flush().await;
    // both connections close here, the client's without the (rest of
    // the) answer
    cut.notify_one();
}

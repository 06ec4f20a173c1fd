//! An error status whose body is an HTML page (a CDN's or a proxy's 502,
//! 503 or 504 page in front of the model server, a web server's own
//! error page) is quoted by what the page says, its title or else its
//! text, not as markup. Regression: the turn's failure notice, which the
//! person reads in the chat, quoted the first 4 KB of the page raw
//! (Cloudflare's: its doctype, head and inline CSS), and never reached
//! the words that said what went wrong.

use botfleet::model::ModelError;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use pretty_assertions::assert_eq;

use super::openai_edges::raw_server;
use super::openai_provider::complete;
use super::openai_provider::request;
use crate::support::fleet::TestFleet;

/// A CDN's 502 page: a title, then kilobytes of style before its text.
fn cdn_page() -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en-US\">\n<head>\n<title>api.example.com | 502: Bad \
         gateway</title>\n<meta charset=\"UTF-8\" />\n<style>{}</style>\n</head>\n<body>\n<div \
         id=\"cf-wrapper\"><h1>Bad gateway</h1><span>Error code 502</span>\n<p>The web server \
         reported a bad gateway error.</p></div>\n</body></html>",
        "body{margin:0;padding:0} .cf-error-details{font-family:sans-serif} ".repeat(80)
    )
}

/// A page without a title: its text stands for it.
const UNTITLED: &str = "<html><body>\n<h1>Service Unavailable</h1>\n<p>The server is \
                        temporarily unable to service\n your request &amp; will be back.</p>\n\
                        </body></html>";

async fn error_of(status: u16, page: String) -> ModelError {
    let (address, _) = raw_server(move |_| (status, "text/html", page.clone())).await;
    let model = OpenAiModel::new(OpenAiOptions {
        max_retries: 0,
        ..OpenAiOptions::new(format!("http://{address}/v1"), "test-model")
    })
    .unwrap();
    complete(&model, &request("x")).await.0.unwrap_err()
}

#[tokio::test]
async fn an_html_error_page_is_quoted_by_its_title_or_its_text() {
    let error = error_of(502, cdn_page()).await;
    let ModelError::Http { status, body, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(*status, 502);
    assert_eq!(
        body,
        "an HTML page titled \"api.example.com | 502: Bad gateway\""
    );

    let error = error_of(503, UNTITLED.to_owned()).await;
    let ModelError::Http { body, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(
        body,
        "an HTML page saying \"Service Unavailable The server is temporarily unable to service \
         your request & will be back.\""
    );

    let page = "<html><style>p{}</style><body><header>Gateway Timeout</header></body></html>";
    let error = error_of(504, page.to_owned()).await;
    let ModelError::Http { body, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(body, "an HTML page saying \"Gateway Timeout\"");
    let error = error_of(502, "<html><body></body></html>".to_owned()).await;
    let ModelError::Http { body, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(body, "an HTML page without text");
}

/// Through the host: the person's notice says what the page said.
#[tokio::test]
async fn a_turn_failed_by_a_proxys_error_page_quotes_its_title_not_its_markup() {
    let page = cdn_page();
    let (address, _) = raw_server(move |_| (502, "text/html", page.clone())).await;
    let host = TestFleet::new()
        .openai("main", &format!("http://{address}/v1"), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "hello").await;
    assert_eq!(end["status"], "failed", "{end}");
    let entries = host.entries(&session).await;
    let notice = entries
        .iter()
        .find(|e| e["code"] == "turn_failed")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    let text = notice["text"].as_str().unwrap();
    assert!(text.contains("HTTP 502"), "{text}");
    assert!(text.contains("502: Bad gateway"), "{text}");
    assert!(
        !text.contains('<') && !text.contains("font-family"),
        "{text}"
    );
    host.shutdown().await;
}

//! The web page: one static HTML file served at `/`.

use axum::response::Html;

const PAGE: &str = include_str!("ui.html");

pub(crate) async fn page() -> Html<&'static str> {
    Html(PAGE)
}

//! The web page in a real browser: the person's own bubbles read at WCAG
//! AA's 4.5:1 at least — sent, sending and not confirmed yet, their text
//! and their small "You · time" line. (A message being sent was faded to
//! 0.7, 3.5:1; the line of a sent one read at 4.1:1.)
//!
//! Skipped, with the reason printed, when chromium or chromedriver is not
//! installed ([`ui_page::start`]).

use serde_json::json;

use crate::support::ui_page;
use crate::support::ui_page::SCRIPT;
use crate::support::ui_page::fleet_with_r;

/// The contrast of an element's text with the colour behind it, as WCAG
/// computes it; the page's styles draw bubbles of each state (the classes
/// the outbox gives them) in the conversation's list.
const CONTRASTS: &str = r#"
// `rgb(r g b / a)`, or `color(srgb r g b / a)` (0-1) for a color-mix
const rgb = (c) => {
  const n = (c.match(/[\d.]+/g) || []).map(Number);
  return c.startsWith("color(srgb") ? n.map((v, i) => (i < 3 ? v * 255 : v)) : n;
};
const lum = ([r, g, b]) => [r, g, b]
  .map((v) => v / 255)
  .map((v) => (v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
  .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
// the first opaque background from `el` up, over white
const behind = (el) => {
  for (let e = el; e; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c.length === 3 || c[3] > 0) return c.slice(0, 3);
  }
  return [255, 255, 255];
};
// a text colour with alpha (color-mix with transparent) over its background
const over = (fg, bg) => (fg.length === 4 ? fg.slice(0, 3).map((v, i) => v * fg[3] + bg[i] * (1 - fg[3])) : fg);
const ratio = (el) => {
  const bg = behind(el);
  const fg = over(rgb(getComputedStyle(el).color), bg);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  // opacity of the bubble or above it fades both toward the page
  let o = 1;
  for (let e = el; e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity);
  return o < 1 ? 0 : (a + 0.05) / (b + 0.05);
};
const log = document.querySelector(".log");
const out = {};
for (const state of ["", "sending", "sending unconfirmed"]) {
  const li = document.createElement("li");
  li.className = `entry mine ${state}`;
  li.innerHTML = '<div class="bubble"><div class="meta"><span class="who">You</span><span>12:00</span></div><div class="text">hello</div></div>';
  log.append(li);
  out[state || "sent"] = [ratio(li.querySelector(".text")), ratio(li.querySelector(".meta span"))];
  li.remove();
}
return out;
"#;

#[tokio::test]
async fn the_persons_bubbles_read_at_aa_contrast() {
    let Some((browser, host)) = ui_page::start(fleet_with_r(SCRIPT)).await else {
        return;
    };
    ui_page::open_dm(&browser, &host, "r").await;
    let got = browser.js(CONTRASTS, json!([])).await;
    for (state, ratios) in got.as_object().unwrap() {
        for r in ratios.as_array().unwrap() {
            assert!(r.as_f64().unwrap() >= 4.5, "{state}: {got}");
        }
    }
    assert_eq!(got.as_object().unwrap().len(), 3, "{got}");
    ui_page::finish(browser, host).await;
}

// Times the web page's "Show earlier messages" in a long conversation
// (docs/performance.md, "The web page with a long conversation").
//
//   chromium --headless=new --remote-debugging-port=9222 about:blank &
//   node --experimental-websocket benches/page_show_earlier.js \
//     http://127.0.0.1:7878 9222 alice-secret '#/bots/b000' 70
//
// Arguments: the host's address, Chromium's DevTools port, a user's token,
// the page's route of the conversation, and how many clicks. Each click
// is timed in the page, from the click to the next frame after the
// entries were in; every tenth is printed with the entries then held.
const [host, port, token, route, clicks] = process.argv.slice(2);
(async () => {
  const tab = await (await fetch(`http://127.0.0.1:${port}/json/new?about:blank`, { method: "PUT" })).json();
  const ws = new WebSocket(tab.webSocketDebuggerUrl);
  let id = 0;
  const waiting = {};
  const send = (method, params = {}) =>
    new Promise((done) => {
      waiting[++id] = done;
      ws.send(JSON.stringify({ id, method, params }));
    });
  ws.onmessage = (m) => {
    const d = JSON.parse(m.data);
    if (d.id && waiting[d.id]) {
      waiting[d.id](d.result || d);
      delete waiting[d.id];
    }
  };
  await new Promise((r) => (ws.onopen = r));
  const pause = (ms) => new Promise((r) => setTimeout(r, ms));
  const run = async (expression) =>
    (await send("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true })).result.value;
  await send("Page.enable");
  await send("Runtime.enable");
  await send("Page.navigate", { url: `${host}/` });
  await pause(1500);
  await run(`localStorage.setItem("botfleet.token", ${JSON.stringify(token)})`);
  await send("Page.navigate", { url: `${host}/?t=1${route}` });
  await pause(3000);
  const click = `(async () => {
    const log = document.querySelector("main .log");
    const button = [...document.querySelectorAll("button.earlier")].find((b) => !b.hidden);
    if (!button) return null;
    const held = log.childElementCount;
    const start = performance.now();
    button.click();
    while (log.childElementCount === held) await new Promise((r) => setTimeout(r, 2));
    await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
    return [Math.round(performance.now() - start), log.childElementCount];
  })()`;
  for (let k = 0; k < Number(clicks); k++) {
    const timed = await run(click);
    if (!timed) {
      console.log(`click ${k}: the conversation's start is shown`);
      break;
    }
    if (k % 10 === 0 || k === Number(clicks) - 1) console.log(`click ${k}: ${timed[0]} ms, ${timed[1]} entries held`);
  }
  ws.close();
  process.exit(0);
})();

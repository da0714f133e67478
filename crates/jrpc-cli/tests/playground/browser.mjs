// The playground in a real browser (headless Chromium driven by
// playwright-core): against `jrpc serve` and against the `playground`
// example, whose methods notify and call the page back.
//
//   node browser.mjs PATH/TO/jrpc PATH/TO/examples/playground [SCREENSHOT.png]
//
// Every wait is bounded; the servers are started here and stopped by PID.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

const [jrpc, example, screenshot] = process.argv.slice(2);
if (!jrpc || !example) {
  console.error("usage: node browser.mjs JRPC EXAMPLE [SCREENSHOT]");
  process.exit(2);
}
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const WAIT = 15_000;

// Starts a server and resolves with the first line on `stream` that
// matches `pattern` (its address), within WAIT.
function start(command, args, stream, pattern) {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  const lines = createInterface({ input: child[stream] });
  const seen = [];
  const address = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${command}: no address in ${WAIT} ms: ${seen.join(" | ")}`)), WAIT);
    lines.on("line", (line) => {
      seen.push(line);
      const match = pattern.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.on("exit", (code) => reject(new Error(`${command} exited with ${code}: ${seen.join(" | ")}`)));
  });
  // Drain the other stream so the child never blocks on a full pipe.
  child[stream === "stdout" ? "stderr" : "stdout"].resume();
  return { child, address };
}

let passed = 0;
async function check(name, body) {
  await body();
  passed++;
  console.log(`ok - ${name}`);
}

// A page that fails on any script error, console error (a CSP violation
// included) or request that leaves the server under test.
async function open(browser, base, viewport = { width: 1280, height: 820 }) {
  const page = await browser.newPage({ viewport });
  page.setDefaultTimeout(WAIT);
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push("console error: " + m.text());
  });
  const origin = new URL(base).origin;
  page.on("request", (r) => {
    if (!r.url().startsWith(origin) && !r.url().startsWith("data:")) problems.push("left the server: " + r.url());
  });
  page.on("websocket", (ws) => {
    if (new URL(ws.url()).host !== new URL(base).host) problems.push("websocket elsewhere: " + ws.url());
  });
  await page.goto(base + "/playground");
  await page.locator("#status[data-state=open]").waitFor();
  await page.locator('button[data-method="subtract"], button[data-method="greet"]').first().waitFor();
  return { page, problems };
}

async function field(page, name) {
  return page.locator(`#fields [data-param="${name}"]`).locator("input, select, textarea").first();
}

async function send(page) {
  const before = await page.locator("#history li").count();
  await page.click("#send-form");
  await page.waitForFunction((n) => {
    const items = document.querySelectorAll("#history li");
    return items.length > n && items[0].dataset.state !== "waiting";
  }, before);
}

async function outcome(page) {
  return {
    state: await page.getAttribute("#outcome", "data-state"),
    text: await page.textContent("#outcome"),
    result: await page.textContent("#result"),
  };
}

const servers = [];
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
try {
  const serve = start(jrpc, ["serve", "--http", "127.0.0.1:0"], "stderr", /listening on (http:\/\/\S+) \(HTTP POST\)/);
  servers.push(serve.child);
  const base = await serve.address;

  const { page, problems } = await open(browser, base);

  await check("the page describes the server and lists its methods from rpc.discover", async () => {
    assert.match(await page.textContent("#server-info"), /jrpc demo/);
    const names = await page.locator("#method-list button").evaluateAll((b) => b.map((x) => x.dataset.method));
    for (const name of ["add", "echo", "get_data", "subtract", "sum", "update"]) assert.ok(names.includes(name), name);
  });

  await check("subtract 42 23 from the form gives 19", async () => {
    await page.click('button[data-method="subtract"]');
    assert.match(await page.textContent("#method-doc"), /subtract\(minuend: number, subtrahend: number\)/);
    await (await field(page, "minuend")).fill("42");
    await (await field(page, "subtrahend")).fill("23");
    assert.match(await page.textContent("#preview"), /"params": \{"minuend": 42, "subtrahend": 23\}/);
    await send(page);
    const got = await outcome(page);
    assert.equal(got.state, "ok", got.text);
    assert.equal(got.result.trim(), "19");
    assert.match(await page.textContent("#request-sent"), /"method": "subtract"/);
    assert.match(await page.textContent("#response"), /"result": 19/);
  });

  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });

  await check("a bad param is sent anyway and the server's -32602 is shown", async () => {
    await (await field(page, "minuend")).fill("forty-two");
    assert.match(await page.textContent('#fields [data-param="minuend"] .warning'), /not a number/);
    await send(page);
    const got = await outcome(page);
    assert.equal(got.state, "error");
    assert.match(got.text, /-32602/);
    assert.match(await page.textContent("#response"), /"code": -32602/);
  });

  await check("by position, as the specification writes it", async () => {
    await page.check('input[name="structure"][value="by-position"]');
    await (await field(page, "minuend")).fill("23");
    await (await field(page, "subtrahend")).fill("42");
    assert.match(await page.textContent("#preview"), /"params": \[23, 42\]/);
    await send(page);
    assert.equal((await outcome(page)).result.trim(), "-19");
  });

  await check("a variadic param takes any count of values", async () => {
    await page.click('button[data-method="sum"]');
    await (await field(page, "numbers")).fill("1");
    for (const n of ["2", "4"]) {
      await page.click('#fields [data-param="numbers"] >> text=Add numbers');
      await page.keyboard.type(n);
    }
    assert.match(await page.textContent("#preview"), /"params": \[1, 2, 4\]/);
    await send(page);
    assert.equal((await outcome(page)).result.trim(), "7");
  });

  await check("the keyboard alone: / to filter, arrows, Enter, Tab, Ctrl+Enter", async () => {
    await page.locator("body").focus();
    await page.keyboard.press("Escape");
    await page.evaluate(() => document.activeElement && document.activeElement.blur());
    await page.keyboard.press("/");
    await page.keyboard.type("add");
    await page.keyboard.press("ArrowDown");
    assert.equal(await page.evaluate(() => document.activeElement.dataset.method), "add", await page.evaluate(() => document.activeElement.outerHTML + " filter=" + document.getElementById("filter").value));
    await page.keyboard.press("Enter");
    await page.keyboard.type("1");
    await page.keyboard.press("Tab");
    await page.keyboard.type("2");
    const before = await page.locator("#history li").count();
    await page.keyboard.press("Control+Enter");
    await page.waitForFunction((n) => document.querySelectorAll("#history li").length > n && document.querySelector("#history li").dataset.state !== "waiting", before);
    assert.equal((await outcome(page)).result.trim(), "3");
    await page.fill("#filter", "");
  });

  await check("raw JSON: a batch with a notification, and malformed JSON", async () => {
    await page.click("#tab-raw");
    await page.fill("#raw", '[{"jsonrpc":"2.0","method":"echo","params":[12345678901234567890],"id":"b1"},{"jsonrpc":"2.0","method":"update","params":[1]}]');
    await page.click("#send-raw");
    await page.waitForFunction(() => document.querySelector("#outcome").dataset.state === "ok");
    assert.match(await page.textContent("#outcome"), /Batch: 1 responses/);
    // Digits beyond a JavaScript number survive, byte for byte.
    assert.match(await page.textContent("#response"), /12345678901234567890/);
    await page.fill("#raw", '{"jsonrpc": "2.0", "method"');
    await page.click("#send-raw");
    await page.waitForFunction(() => document.querySelector("#outcome").dataset.state === "error");
    assert.match(await page.textContent("#outcome"), /-32700/);
    // A call still running keeps its own response when malformed input,
    // answered with id null, is sent meanwhile; form ids continue after it.
    await page.fill("#raw", '{"jsonrpc":"2.0","method":"sleep","params":{"ms":300},"id":9}');
    await page.click("#send-raw");
    await page.fill("#raw", "{oops");
    await page.click("#send-raw");
    await page.waitForFunction(() => /-32700/.test(document.querySelector("#outcome").textContent));
    await page.locator("#history li .entry", { hasText: "sleep → 300" }).waitFor();
    await page.click("#tab-form");
    assert.match(await page.textContent("#preview"), /"id": 10/);
  });

  await check("the history shows each call and brings one back", async () => {
    const items = await page.locator("#history li .entry").allTextContents();
    assert.ok(items.some((t) => /^subtract → 19$/.test(t)), items.join(" / "));
    assert.ok(items.some((t) => /^subtract → -32602$/.test(t)), items.join(" / "));
    await page.locator("#history li .entry", { hasText: "subtract → 19" }).click();
    assert.equal((await outcome(page)).result.trim(), "19");
  });

  await check("a narrow window: one column, nothing wider than the window", async () => {
    await page.setViewportSize({ width: 380, height: 800 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than the window`);
    const [list, call] = await Promise.all([page.locator("#methods").boundingBox(), page.locator("#call").boundingBox()]);
    assert.ok(call.y >= list.y + list.height, "the call panel comes below the method list");
    await page.setViewportSize({ width: 1280, height: 820 });
  });

  assert.deepEqual(problems, []);
  await page.close();

  const showcase = start(example, ["127.0.0.1:0"], "stdout", /^(http:\/\/\S+)\/playground$/);
  servers.push(showcase.child);
  const exampleBase = await showcase.address;
  const second = await open(browser, exampleBase);

  await check("forms from schemars schemas: a choice for an enum, yes/no, JSON for a struct", async () => {
    const p = second.page;
    await p.click('button[data-method="greet"]');
    await (await field(p, "name")).fill("Ada");
    await (await field(p, "style")).selectOption({ label: "loud" });
    await (await field(p, "excited")).selectOption("true");
    await send(p);
    assert.equal((await outcome(p)).result.trim(), '"HELLO, ADA!"');
    await p.click('button[data-method="area"]');
    await (await field(p, "window")).fill('{"width": 640, "height": 480}');
    await send(p);
    assert.equal((await outcome(p)).result.trim(), "307200");
  });

  await check("the server's notifications and requests reach the inbox", async () => {
    const p = second.page;
    await p.click('button[data-method="countdown"]');
    await (await field(p, "from")).fill("3");
    await send(p);
    assert.equal((await outcome(p)).result.trim(), '"liftoff"');
    const ticks = await p.locator("#inbox li").allTextContents();
    assert.equal(ticks.filter((t) => t.includes("tick")).length, 3, ticks.join(" / "));
    await p.click('button[data-method="ask"]');
    await (await field(p, "question")).fill("ready?");
    await send(p);
    assert.match((await outcome(p)).result, /could not answer.*-32601|Method not found/);
    assert.match(await p.locator("#inbox li").first().textContent(), /request\s*confirm/);
  });

  assert.deepEqual(second.problems, []);
  console.log(`${passed} passed`);
} finally {
  await browser.close();
  for (const child of servers) child.kill("SIGTERM");
}

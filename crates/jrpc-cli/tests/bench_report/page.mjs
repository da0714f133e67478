// Opens `jrpc bench --report` pages in headless Chromium and checks what a
// reader sees: the throughput and latency plots drawn (one line per run),
// the errors table, and no request for anything beyond the file itself.
//
//   node page.mjs ONE.html BOTH.html [SCREENSHOT.png]
import assert from "node:assert/strict";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";

const [one, both, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
try {
  const page = await browser.newPage({ javaScriptEnabled: false });
  const fetched = [];
  page.on("request", (request) => fetched.push(request.url()));
  for (const [file, runs] of [[one, 1], [both, 2]]) {
    const url = pathToFileURL(file).href;
    fetched.length = 0;
    await page.goto(url, { timeout: 15_000 });
    for (const id of ["throughput", "latency"]) {
      const lines = page.locator(`svg#${id} polyline.run`);
      assert.equal(await lines.count(), runs, `${file}: ${runs} line(s) in #${id}`);
      for (let i = 0; i < runs; i++) {
        const points = (await lines.nth(i).getAttribute("points")).trim().split(/\s+/);
        assert.ok(points.length >= 2, `${file}: #${id} line ${i} has ${points.length} point(s)`);
        assert.ok(points.every((p) => /^-?\d+(\.\d+)?,-?\d+(\.\d+)?$/.test(p)), `${file}: #${id} points ${points}`);
      }
      const box = await page.locator(`svg#${id}`).boundingBox();
      assert.ok(box && box.width > 300 && box.height > 150, `${file}: #${id} is drawn (${JSON.stringify(box)})`);
    }
    assert.equal(await page.locator("table#errors tr").count(), runs + 1, `${file}: errors by kind`);
    const text = await page.locator("body").innerText();
    for (const seen of ["Requests per second", "Latency percentiles", "p99.99", "jrpc bench"]) {
      assert.ok(text.includes(seen), `${file}: the page says ${seen}`);
    }
    assert.deepEqual(fetched, [url], `${file}: the page fetched only itself`);
  }
  if (screenshot) {
    await page.goto(pathToFileURL(both).href);
    await page.screenshot({ path: screenshot, fullPage: true });
  }
  console.log("bench report pages: plots, errors and no fetches, in Chromium");
} finally {
  await browser.close();
}

// Drives the placeholder page in headless Chromium against a running `karpor serve`;
// started by tests/ui_browser.rs, which sets the environment below. Exits non-zero with
// the reason on the first failed expectation.
//   KARPOR_URL          the server's base URL
//   KARPOR_TOKEN        a guest token the page must ask for (optional)
//   KARPOR_QUERY        a search that finds KARPOR_EXPECT_NAME
//   KARPOR_NL_QUESTION  a question for the natural-language search (the server has a model)
//   KARPOR_KILL_PID     the storage server's PID: killed to see a check turn red
//   KARPOR_SCREENSHOT   where to save a screenshot
//   KARPOR_PHASE        `empty`: only the fresh-install checks (no cluster yet), then exit
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
// Until a search is answered, the previous answer's rows stay on screen, marked busy: a
// click before the answer lands on one of those.
const oneFound = (page) => page.waitForFunction(() =>
  !document.getElementById("results").hasAttribute("aria-busy")
  && / 1 found$/.test(document.getElementById("page-info").textContent));
const url = env("KARPOR_URL");
const timeout = 20_000;
// The test model server generates one answer at a time, other tests' among them; beyond
// the page's own limit for a natural-language search (5 min), so that its message shows.
const modelTimeout = 320_000;

const browser = await chromium.launch({
  executablePath: process.env.KARPOR_CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync"],
});
let failed = false;
try {
  const page = await browser.newPage();
  const consoleErrors = [];
  page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });
  page.on("pageerror", (error) => consoleErrors.push(String(error)));
  const eventCalls = [];
  page.on("response", async (response) => {
    if (response.url().includes("/insight/events")) {
      eventCalls.push(response.url() + " → " + (await response.text()).slice(0, 200));
    }
  });
  page.setDefaultTimeout(timeout);

  await page.goto(url + "/");
  const token = process.env.KARPOR_TOKEN;
  if (token) {
    await page.locator("#login").waitFor({ state: "visible" });
    await page.fill("#token", token);
    await page.click("#login-form button");
    await page.locator("#login").waitFor({ state: "hidden" });
    // Entered once: a reload of the tab keeps it (session storage), no prompt again.
    await page.reload();
    // The clusters were read: a row, or the hint of a fresh install.
    await page.waitForFunction(() => document.querySelector("#clusters tbody tr")
      || !document.getElementById("clusters-empty").hidden);
    if (await page.locator("#login").isVisible()) throw new Error("asked for the token again");
    // The first, unauthenticated call was refused as the page expects: not an error of it.
    consoleErrors.length = 0;
  }

  phases: {
  // Every check of /readyz is shown, with its status, named as /readyz spells it.
  const readyz = await (await fetch(url + "/readyz?format=json")).json();
  const names = Object.values(readyz.checks).map((results) => results[0].componentId);
  if (!names.includes("Storage")) throw new Error(`check names: ${names.join(", ")}`);
  for (const name of names) {
    await page.locator(`#checks td[data-check="${name}"]`).waitFor();
  }
  console.log(`checks shown: ${names.join(", ")}`);

  if (process.env.KARPOR_PHASE === "empty") {
    // A fresh install says how to add a cluster.
    await page.locator("#clusters-empty").waitFor({ state: "visible" });
    const hint = await page.locator("#clusters-empty").innerText();
    if (!hint.includes("karpor cluster add")) throw new Error(`empty-state hint: ${hint}`);
    console.log("fresh install: the cluster table says how to add one");
    if (consoleErrors.length > 0) throw new Error(`console errors: ${consoleErrors.join("; ")}`);
    break phases;
  }

  await page.locator("#clusters tbody tr").first().waitFor();
  // What changed in the last hour: the objects karpor has seen come in.
  await page.locator("#changes tbody tr").first().waitFor({ timeout: 60_000 });
  console.log(`changed in the last hour: ${await page.locator("#changes-note").innerText()}`);
  if (await page.locator("#clusters-empty").isVisible()) throw new Error("empty-state hint beside clusters");
  console.log(`clusters shown: ${(await page.locator("#clusters tbody tr").allInnerTexts()).join(" | ")}`);

  // A keyword is searched as a keyword, not refused as SQL.
  const expected = env("KARPOR_EXPECT_NAME");
  await page.selectOption("#mode", "keyword");
  await page.fill("#query", expected);
  await page.click("#search-form button");
  await page.locator("#results tbody td", { hasText: expected }).first().waitFor();
  if (await page.locator("#search-error").isVisible()) throw new Error("keyword refused");
  console.log(`keyword ${expected}: ${await page.locator("#page-info").innerText()}`);

  // SQL shows the expected rows; a click shows the object as YAML.
  // The SQL answer is held back until the keyword rows are seen marked busy.
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  const sqlSearch = (u) => u.pathname === "/rest-api/v1/search" && u.searchParams.get("pattern") === "sql";
  await page.route(sqlSearch, async (route) => { await held; await route.continue(); }, { times: 1 });
  await page.fill("#query", env("KARPOR_QUERY"));
  await page.click("#search-form button");
  await page.waitForFunction(() => document.getElementById("results").hasAttribute("aria-busy")
    && document.getElementById("page-info").textContent === "searching…");
  release();
  await oneFound(page);
  const row = page.locator("#results tbody tr", { hasText: expected }).first();
  await row.waitFor();
  console.log(`search found ${expected}: ${await page.locator("#page-info").innerText()}`);
  await row.click();
  await page.locator("#detail").waitFor({ state: "visible" });
  await page.waitForFunction((name) => {
    const text = document.getElementById("detail-yaml").textContent;
    return text.includes("kind: Namespace") && text.includes("name: " + name);
  }, expected);
  console.log(`detail of ${expected} shown as YAML`);

  // Columns and groups come back as a table of their own.
  await page.fill("#query", `select kind, count(*) from resources where name = '${expected}' group by kind`);
  await page.click("#search-form button");
  await page.locator("#rows tbody td", { hasText: "Namespace" }).first().waitFor();
  await page.locator("#rows thead th", { hasText: "count(*)" }).first().waitFor();
  if (await page.locator("#results").isVisible()) throw new Error("object rows shown beside grouped rows");
  console.log(`grouped: ${(await page.locator("#rows tbody tr").allInnerTexts()).join(" | ")}`);
  if (consoleErrors.length > 0) throw new Error(`console errors: ${consoleErrors.join("; ")}`);

  // An object's audit findings are in its row and its detail; clusters show a score.
  const flawed = env("KARPOR_AUDIT_NAME");
  await page.selectOption("#mode", "keyword");
  await page.fill("#query", flawed);
  await page.click("#search-form button");
  const flawedRow = page.locator("#results tbody tr", { hasText: flawed })
    .filter({ hasText: "Deployment" }).first();
  await flawedRow.waitFor();
  await flawedRow.click();
  await page.locator("#findings td", { hasText: "image-tag" }).first().waitFor();
  console.log(`findings of ${flawed}: ${(await page.locator("#findings tbody tr").allInnerTexts()).join(" | ")}`);
  // Its events, and its relations: the ConfigMap it mounts opens its own view.
  await page.waitForFunction(() => document.getElementById("events-note").textContent !== "loading…");
  const note = await page.locator("#events-note").innerText();
  if (note) throw new Error(`events: ${note} (asked ${eventCalls.join(" ; ")})`);
  await page.locator("#events td", { hasText: "UiProbe" }).first().waitFor();
  // Its history: at least its creation, as karpor first saw it.
  await page.locator("#history td", { hasText: "created" }).first().waitFor();
  console.log(`history of ${flawed}: ${await page.locator("#history tbody tr").count()} revisions`);
  const related = page.locator("#children .relation", { hasText: "ConfigMap/" + flawed });
  await related.waitFor();
  await related.click();
  await page.waitForFunction((name) => document.getElementById("detail-title").textContent.startsWith("ConfigMap")
    && document.getElementById("detail-yaml").textContent.includes("name: " + name), flawed);
  await page.locator("#parents .relation", { hasText: "Deployment/" + flawed }).waitFor();
  console.log(`relations: the ConfigMap ${flawed} opened from its Deployment, which is its parent`);
  await page.waitForFunction(() => [...document.querySelectorAll("#clusters td[data-cluster]")]
    .some((td) => /^\d+\.\d \(\d+ findings\)$/.test(td.textContent)));
  console.log(`cluster score: ${await page.locator("#clusters td[data-cluster]").first().innerText()}`);

  // A pod's log: its last lines when its detail opens, then followed on request.
  const logPod = env("KARPOR_LOG_POD");
  await page.selectOption("#mode", "keyword");
  await page.fill("#query", logPod);
  await page.click("#search-form button");
  const podRow = page.locator("#results tbody tr", { hasText: logPod }).filter({ hasText: "Pod" }).first();
  await podRow.waitFor();
  await podRow.click();
  await page.locator("#logs-panel").waitFor({ state: "visible" });
  const lastLine = env("KARPOR_LOG_LINE");
  await page.waitForFunction((line) => document.getElementById("logs").textContent.includes(line), lastLine);
  console.log(`logs of ${logPod}: ${(await page.locator("#logs").innerText()).split("\n").length} lines, the last one ${lastLine}`);
  await page.click("#logs-follow");
  await page.waitForFunction(() => /follow \d+/.test(document.getElementById("logs").textContent));
  await page.click("#logs-stop");
  console.log(`followed: ${(await page.locator("#logs").innerText()).split("\n").filter((l) => l.includes("follow")).length} new lines, then stopped`);
  // Its diagnosis: the server reads the newest lines itself and the model's answer
  // streams into the panel.
  await page.click("#logs-diagnose");
  await page.waitForFunction(() => document.getElementById("explain-note").textContent !== "asking the model…",
    null, { timeout: modelTimeout });
  const diagnosisNote = await page.locator("#explain-note").innerText();
  if (diagnosisNote) throw new Error(`diagnosis: ${diagnosisNote}`);
  const diagnosisTitle = await page.locator("#explain-title").innerText();
  if (diagnosisTitle !== "Diagnosis of the log") throw new Error(`diagnosis under "${diagnosisTitle}"`);
  const diagnosis = await page.locator("#explanation").innerText();
  if (!diagnosis.trim()) throw new Error("diagnosis: complete, but empty");
  console.log(`diagnosis of ${logPod}'s log: ${JSON.stringify(diagnosis.slice(0, 80))}`);
  if (consoleErrors.length > 0) throw new Error(`console errors: ${consoleErrors.join("; ")}`);

  // Nothing found says why it may be so.
  await page.fill("#query", "no-such-thing-anywhere");
  await page.click("#search-form button");
  await page.locator("#results-empty").waitFor({ state: "visible" });
  console.log(`no results: ${await page.locator("#results-empty").innerText()}`);

  // Natural language: the query the model wrote is shown with what it found, or the
  // server's 400 shows that query and why it failed. A 135M model writes poor SQL: the
  // contract is checked, not the model's wisdom.
  const question = env("KARPOR_NL_QUESTION");
  await page.selectOption("#mode", "nl");
  await page.fill("#query", question);
  const shown = () => !document.getElementById("sql-ran").hidden || !document.getElementById("search-error").hidden;
  if (await page.evaluate(shown)) throw new Error("a query or an error shown before the question was asked");
  let nlStatus = "no answer";
  const onSearch = (response) => {
    if (response.url().includes("/rest-api/v1/search?") && response.url().includes("pattern=nl")) nlStatus = response.status();
  };
  page.on("response", onSearch);
  await page.click("#search-form button");
  await page.waitForFunction(shown, null, { timeout: modelTimeout });
  page.off("response", onSearch);
  const nlMessage = await page.locator("#search-error").isVisible() ? await page.locator("#search-error").innerText() : "";
  if (nlStatus === 200 && !nlMessage) {
    const ran = await page.locator("#sql-ran").innerText();
    if (!/^query: select\s/i.test(ran)) throw new Error(`natural language: the query shown: "${ran}"`);
    console.log(`natural language "${question}": the model's query ran, ${ran}; ${await page.locator("#page-info").innerText()}`);
  } else if (nlStatus === 400) {
    if (!/could not be run: .+; sqlQuery: /.test(nlMessage)) throw new Error(`natural language: 400 with "${nlMessage}"`);
    if (await page.locator("#sql-ran").isVisible()) throw new Error("natural language: a query shown beside the error");
    // Chromium logs the refused request itself: the page expected it.
    for (let i = consoleErrors.length - 1; i >= 0; i--) {
      if (consoleErrors[i].includes("status of 400")) consoleErrors.splice(i, 1);
    }
    console.log(`natural language "${question}": the model's query failed, 400: ${nlMessage}`);
  } else {
    throw new Error(`natural language: ${nlStatus}: "${nlMessage}"`);
  }

  // An object's explanation streams in, piece by piece, and completes.
  await page.selectOption("#mode", "sql");
  await page.fill("#query", env("KARPOR_QUERY"));
  await page.click("#search-form button");
  await oneFound(page);
  await page.locator("#results tbody tr", { hasText: expected }).first().click();
  await page.waitForFunction((name) => {
    const text = document.getElementById("detail-yaml").textContent;
    return text.includes("kind: Namespace") && text.includes("name: " + name);
  }, expected);
  await page.evaluate(() => {
    // Each callback is one batch of appended text: more than one, it came in over time.
    window.explainPieces = { appended: 0, batches: 0 };
    new MutationObserver((records) => {
      const appended = records.filter((r) => r.addedNodes.length > 0).length;
      if (appended === 0) return;
      window.explainPieces.appended += appended;
      window.explainPieces.batches += 1;
    }).observe(document.getElementById("explanation"), { childList: true });
  });
  const explainAsked = Date.now();
  await page.click("#detail-explain");
  await page.waitForFunction(() => document.getElementById("explanation").textContent.trim() !== ""
    || document.getElementById("explain-note").textContent !== "asking the model…", null, { timeout: modelTimeout });
  const firstText = Date.now() - explainAsked;
  await page.waitForFunction(() => document.getElementById("explain-note").textContent !== "asking the model…",
    null, { timeout: modelTimeout });
  const explainNote = await page.locator("#explain-note").innerText();
  if (explainNote) throw new Error(`explanation: ${explainNote}`);
  const explanation = await page.locator("#explanation").innerText();
  if (!explanation.trim()) throw new Error("explanation: complete, but empty");
  const pieces = await page.evaluate(() => window.explainPieces);
  if (pieces.appended < 2) throw new Error(`explanation in ${pieces.appended} piece(s)`);
  console.log(`explanation of ${expected}: first text after ${firstText} ms, complete after ${Date.now() - explainAsked} ms, ` +
    `${pieces.appended} pieces in ${pieces.batches} batches: ${JSON.stringify(explanation.slice(0, 80))}`);
  if (consoleErrors.length > 0) throw new Error(`console errors: ${consoleErrors.join("; ")}`);

  // A bad query shows the server's message.
  await page.selectOption("#mode", "sql");
  await page.fill("#query", "select * from resources join secrets");
  await page.click("#search-form button");
  await page.locator("#search-error").waitFor({ state: "visible" });
  const message = await page.locator("#search-error").innerText();
  if (!message.trim() || /^HTTP \d+$/.test(message)) throw new Error(`no error message: "${message}"`);
  console.log(`bad query message: ${message}`);

  // A slow server never sees the page's refreshes overlap.
  let inFlight = 0;
  let most = 0;
  let asked = 0;
  await page.route("**/rest-api/v1/clusters", async (route) => {
    inFlight += 1;
    asked += 1;
    most = Math.max(most, inFlight);
    await new Promise((resolve) => setTimeout(resolve, 4000));
    try { await route.continue(); } catch (_) { /* the page went on */ } finally { inFlight -= 1; }
  });
  await page.waitForTimeout(12_000);
  while (inFlight > 0) await page.waitForTimeout(100);
  await page.unroute("**/rest-api/v1/clusters");
  if (asked < 2 || most > 1) throw new Error(`refreshes: ${asked} asked, ${most} at once`);
  console.log(`slow server: ${asked} refreshes, never more than ${most} at once`);

  // A stopped backend turns its check red; the clusters stay listed.
  process.kill(Number(env("KARPOR_KILL_PID")), "SIGKILL");
  await page.locator('#checks td[data-check="Storage"] ~ td .fail').waitFor();
  await page.locator("#overall.fail").waitFor();
  if ((await page.locator("#clusters tbody tr").count()) === 0) throw new Error("clusters emptied");
  console.log("storage check shown failed after its server was killed; clusters still listed");
  }

  if (process.env.KARPOR_SCREENSHOT) {
    await page.screenshot({ path: process.env.KARPOR_SCREENSHOT, fullPage: true });
  }
} catch (error) {
  failed = true;
  console.error(`FAILED: ${error.message}`);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);

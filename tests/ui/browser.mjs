// Drives the placeholder page in headless Chromium against a running `karpor serve`;
// started by tests/ui_browser.rs, which sets the environment below. Exits non-zero with
// the reason on the first failed expectation.
//   KARPOR_URL          the server's base URL
//   KARPOR_TOKEN        a guest token the page must ask for (optional)
//   KARPOR_QUERY        a search that finds KARPOR_EXPECT_NAME
//   KARPOR_KILL_PID     the storage server's PID: killed to see a check turn red
//   KARPOR_SCREENSHOT   where to save a screenshot
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const url = env("KARPOR_URL");
const timeout = 20_000;

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
    await page.locator("#clusters tbody tr").first().waitFor();
    if (await page.locator("#login").isVisible()) throw new Error("asked for the token again");
    // The first, unauthenticated call was refused as the page expects: not an error of it.
    consoleErrors.length = 0;
  }

  // Every check of /readyz is shown, with its status.
  const readyz = await (await fetch(url + "/readyz?format=json")).json();
  for (const name of Object.keys(readyz.checks)) {
    await page.locator(`#checks td[data-check="${name}"]`).waitFor();
  }
  console.log(`checks shown: ${Object.keys(readyz.checks).join(", ")}`);
  await page.locator("#clusters tbody tr").first().waitFor();
  console.log(`clusters shown: ${(await page.locator("#clusters tbody tr").allInnerTexts()).join(" | ")}`);

  // A search shows the expected rows.
  await page.fill("#query", env("KARPOR_QUERY"));
  await page.click("#search-form button");
  const expected = env("KARPOR_EXPECT_NAME");
  await page.locator("#results tbody td", { hasText: expected }).first().waitFor();
  console.log(`search found ${expected}: ${await page.locator("#page-info").innerText()}`);
  if (consoleErrors.length > 0) throw new Error(`console errors: ${consoleErrors.join("; ")}`);

  // A bad query shows the server's message.
  await page.fill("#query", "select * from resources join secrets");
  await page.click("#search-form button");
  await page.locator("#search-error").waitFor({ state: "visible" });
  const message = await page.locator("#search-error").innerText();
  if (!message.trim() || /^HTTP \d+$/.test(message)) throw new Error(`no error message: "${message}"`);
  console.log(`bad query message: ${message}`);

  // A stopped backend turns its check red.
  process.kill(Number(env("KARPOR_KILL_PID")), "SIGKILL");
  await page.locator('#checks td[data-check="storage"] ~ td .fail').waitFor();
  await page.locator("#overall.fail").waitFor();
  console.log("storage check shown failed after its server was killed");

  await page.screenshot({ path: env("KARPOR_SCREENSHOT"), fullPage: true });
} catch (error) {
  failed = true;
  console.error(`FAILED: ${error.message}`);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);

// Browser tests of `switchboard serve` in real headless Chromium (Debian's
// /usr/bin/chromium) through playwright-core. Driven by crates/web/tests/browser.rs,
// which starts the app and the MCP servers and passes them in the environment:
//   APP_URL         the printed link (http://127.0.0.1:PORT/?token=…)
//   SCENARIO        settings | apps | chat | workflows | registry | oauth | oauth-callback (the last two from
//                   crates/cli/tests/serve.rs) | team (crates/web/tests/team_browser.rs) |
//                   team-apps (crates/web/tests/team_apps_browser.rs: SESSION_COOKIE, CHAT_ID)
//   SCREENSHOT_DIR  where every page's screenshot goes
//   DEMO_URL, BAD_URL, FAKE_SERVER, BASIC_SERVER  scenario inputs
//   RUN_ID          the saved run (SCENARIO=workflows)
//   REGISTRY_SECRET the secret typed into the registry's add form (SCENARIO=registry)
// Every step asserts on the DOM; a failure exits 1 with the step's name.
import { chromium } from "playwright-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const env = process.env;
const APP_URL = env.APP_URL;
const SCENARIO = env.SCENARIO;
const SHOTS = env.SCREENSHOT_DIR || "screenshots";
const TIMEOUT = 20000;

function assert(cond, message) {
  if (!cond) throw new Error("assertion failed: " + message);
}

let step = "start";
function log(...args) { console.log(`[${SCENARIO}] ${step}:`, ...args); }

async function shot(page, name) {
  fs.mkdirSync(SHOTS, { recursive: true });
  const file = path.join(SHOTS, `${SCENARIO}-${name}.png`);
  await page.screenshot({ path: file });
  log("screenshot", file);
}

async function launch() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "switchboard-chromium-"));
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"],
  });
  return { context, dir };
}

// The app's inner frame (about:srcdoc under the sandbox proxy) for an app card.
async function appFrame(page, card) {
  const appId = await card.getAttribute("data-app-id");
  for (let i = 0; i < 100; i++) {
    const proxy = page.frames().find((f) => f.url().includes(`/sandbox/${appId}`));
    const inner = proxy && proxy.childFrames()[0];
    if (inner) return { proxy, inner };
    await page.waitForTimeout(100);
  }
  throw new Error("no app frame for " + appId);
}

// Posts a JSON-RPC request from inside the app frame and waits for the host's answer.
async function appRequest(inner, method, params) {
  return inner.evaluate(([method, params]) => new Promise((resolve) => {
    const id = "t-" + Math.random();
    window.addEventListener("message", function onMsg(e) {
      if (e.data && e.data.id === id) { window.removeEventListener("message", onMsg); resolve(e.data); }
    });
    window.parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
  }), [method, params]);
}

async function selectServer(page, name) {
  await page.click(`[data-server="${name}"]`);
  await page.waitForSelector(`[data-status-badge="${name}"]`);
}

async function callTool(page, tool) {
  const item = page.locator(`details[data-tool="${tool}"]`);
  if (!(await item.getAttribute("open") !== null)) await item.locator(":scope > summary").click();
  await item.locator(`[data-call="${tool}"]`).click();
  return item;
}

async function openApp(page, item) {
  const card = item.locator(".app-card").first();
  await card.waitFor({ timeout: TIMEOUT });
  await page.waitForFunction((el) => el.dataset.initialized === "true", await card.elementHandle(), { timeout: TIMEOUT });
  return card;
}

// ---------------------------------------------------------------- scenarios

async function settingsScenario(page) {
  step = "settings page";
  await page.goto(APP_URL);
  assert(!(await page.url()).includes("token="), "the token is removed from the address bar");
  await page.click('a.tabs-link, nav.tabs a[data-nav="settings"]');
  await page.waitForSelector('[data-server-row="demo"]');
  await shot(page, "01-servers");

  step = "add form";
  await page.click("[data-add-server]");
  const form = page.locator('[data-server-form="new"]');
  await form.locator('input[name="name"]').fill("added");
  await form.locator('select[name="transport"]').selectOption("http");
  await form.locator('input[name="url"]').fill(env.DEMO_URL);
  await form.locator('textarea[name="headers"]').fill('{"X-Test": "1"}');
  await form.locator("[data-form-test]").click();
  await form.locator('[data-test-result="success"]').waitFor({ timeout: TIMEOUT });
  const ok = await form.locator(".test-message").textContent();
  assert(ok.includes("Connected. Found 7 tool(s)."), "test success message: " + ok);
  assert((await form.locator(".tool-names li").count()) === 7, "seven tools listed");
  await shot(page, "02-test-success");

  step = "test failure";
  await form.locator('input[name="url"]').fill(env.BAD_URL);
  await form.locator("[data-form-test]").click();
  await form.locator('[data-test-result="failure"]').waitFor({ timeout: TIMEOUT });
  const bad = await form.locator(".test-message").textContent();
  assert(bad.startsWith("✗"), "failure shown: " + bad);
  await shot(page, "03-test-failure");

  step = "test ssrf";
  await form.locator('input[name="url"]').fill("http://169.254.169.254/latest");
  await form.locator("[data-form-test]").click();
  await page.waitForFunction(() => {
    const m = document.querySelector('[data-server-form="new"] .test-result .muted');
    return m && m.textContent.includes("SSRF blocked");
  }, null, { timeout: TIMEOUT });

  step = "save";
  await form.locator('input[name="url"]').fill(env.DEMO_URL);
  await form.locator('button[type="submit"]').click();
  const row = page.locator('[data-server-row="added"]');
  await row.waitFor({ timeout: TIMEOUT });
  await page.waitForFunction(() => {
    const r = document.querySelector('[data-server-row="added"] .badge.status-connected');
    return !!r;
  }, null, { timeout: TIMEOUT });
  await shot(page, "04-added");

  step = "edit keeps masked header";
  await row.locator("[data-edit]").click();
  const edit = page.locator('[data-server-form="added"]');
  const headers = await edit.locator('textarea[name="headers"]').inputValue();
  assert(headers.includes("<unchanged>") && !headers.includes('"1"'), "header values are masked: " + headers);
  await shot(page, "05-edit-form");
  await edit.locator('input[name="description"]').fill("from the browser");
  await edit.locator('button[type="submit"]').click();
  await page.locator('[data-server-form="added"]').waitFor({ state: "detached", timeout: TIMEOUT });

  step = "explorer call";
  await page.click('nav.tabs a[data-nav="explorer"]');
  await selectServer(page, "added");
  await page.waitForSelector('[data-status-badge="added"]:text("connected")', { timeout: TIMEOUT });
  const echo = page.locator('details[data-tool="echo"]');
  await echo.locator(":scope > summary").click();
  await echo.locator('[name="message"]').fill("hello from the browser");
  await echo.locator('[data-call="echo"]').click();
  await echo.locator(".result-head.is-ok").waitFor({ timeout: TIMEOUT });
  const text = await echo.locator(".text-block").first().textContent();
  assert(text === "Echo: hello from the browser", "echo result: " + text);
  await shot(page, "06-explorer-call");

  step = "explorer resource and prompt";
  await page.click('[data-tab="resources"]');
  const readme = page.locator('details[data-resource="demo://readme"]');
  await readme.locator(":scope > summary").click();
  await readme.locator('[data-read="demo://readme"]').click();
  await readme.locator(".resource-block").waitFor({ timeout: TIMEOUT });
  await page.click('[data-tab="prompts"]');
  const greet = page.locator('details[data-prompt-name="greet"]');
  await greet.locator(":scope > summary").click();
  await greet.locator('[name="name"]').fill("Ada");
  await greet.locator('[data-prompt="greet"]').click();
  await greet.locator(".prompt-msg").first().waitFor({ timeout: TIMEOUT });
  assert((await greet.locator(".prompt-msg").first().textContent()).includes("Ada"), "prompt mentions Ada");
  await shot(page, "07-explorer-prompt");

  if (env.ELICIT_SERVER) {
    step = "elicitation form";
    await selectServer(page, env.ELICIT_SERVER);
    await page.waitForSelector('details[data-tool="trigger-elicitation-request"]', { timeout: TIMEOUT });
    const trigger = await callTool(page, "trigger-elicitation-request");
    const modal = page.locator(".modal:has([data-elicitation])");
    await modal.waitFor({ timeout: TIMEOUT });
    assert((await modal.locator("input, select, textarea").count()) >= 5, "a form built from the schema");
    await modal.locator('input[name="name"]').fill("Grace Hopper");
    await modal.locator('input[name="check"]').check();
    await shot(page, "07b-elicitation");
    await modal.locator("button.primary").click();
    await trigger.locator(".result-head.is-ok").waitFor({ timeout: TIMEOUT });
    assert((await trigger.locator(".tool-output").textContent()).includes("Grace Hopper"), "the answer reached the server");
  }

  step = "delete";
  await page.click('nav.tabs a[data-nav="settings"]');
  await page.locator('[data-server-row="added"] [data-delete]').click();
  await page.locator(".modal button.primary").click();
  await page.locator('[data-server-row="added"]').waitFor({ state: "detached", timeout: TIMEOUT });

  step = "chat without key";
  await page.click('nav.tabs a[data-nav="chat"]');
  await page.waitForSelector("[data-no-key]");
  assert((await page.locator("[data-no-key]").textContent()).includes("GEMINI_API_KEY"), "says how to set the key");
  await shot(page, "08-chat-no-key");
}

async function appsScenario(page) {
  step = "demo clock";
  await page.goto(APP_URL);
  await selectServer(page, "demo");
  const clock = await callTool(page, "clock");
  const card = await openApp(page, clock);
  const { proxy, inner } = await appFrame(page, card);
  await inner.waitForFunction(() => /\d{4}-\d\d-\d\dT/.test(document.getElementById("time").textContent), null, { timeout: TIMEOUT });
  const first = await inner.locator("#time").textContent();
  const log = await card.locator(".app-log li").allTextContents();
  assert(log.includes("← ui/initialize #1") && log.includes("← ui/notifications/initialized"), "handshake: " + log.join(", "));
  assert(log.includes("→ ui/notifications/tool-input") && log.includes("→ ui/notifications/tool-result"), "tool input and result sent");
  await shot(page, "01-clock");

  step = "clock refresh round trip";
  await page.waitForTimeout(1100);
  await inner.locator("#refresh").click();
  await inner.waitForFunction(() => document.getElementById("status").textContent === "updated", null, { timeout: TIMEOUT });
  await inner.waitForFunction((t) => document.getElementById("time").textContent !== t, first, { timeout: TIMEOUT });
  const log2 = await card.locator(".app-log li").allTextContents();
  assert(log2.some((l) => l.startsWith("← tools/call")), "the app called tools/call: " + log2.join(", "));

  step = "isolation";
  const cookie = await inner.evaluate(() => { try { return document.cookie; } catch (e) { return "blocked: " + e.name; } });
  assert(cookie.startsWith("blocked") || cookie === "", "the app cannot read cookies: " + cookie);
  const top = await inner.evaluate(() => { try { return window.top.document.title; } catch (e) { return "blocked: " + e.name; } });
  assert(top.startsWith("blocked"), "the app cannot reach the host page's DOM: " + top);
  const parentDom = await inner.evaluate(() => { try { return window.parent.document.body.innerHTML.length; } catch (e) { return "blocked: " + e.name; } });
  assert(String(parentDom).startsWith("blocked"), "the app cannot reach the proxy's DOM");
  const proxyCookie = await proxy.evaluate(() => document.cookie);
  assert(proxyCookie === "", "the sandbox proxy's origin has no cookies: " + proxyCookie);
  const proxyTop = await proxy.evaluate(() => { try { return window.top.document.title; } catch (e) { return "blocked: " + e.name; } });
  assert(proxyTop.startsWith("blocked"), "the proxy cannot reach the host page's DOM");
  const fetched = await inner.evaluate(() => fetch("http://127.0.0.1:1/").then(() => "fetched", (e) => "blocked: " + e.name));
  assert(fetched.startsWith("blocked"), "connect-src 'none' blocks fetch: " + fetched);
  const other = await appRequest(inner, "tools/call", { name: "echo", arguments: { message: "x" } });
  assert(other.result === undefined || other.result.content[0].text === "Echo: x", "sanity");

  step = "maximize";
  await card.locator('button[aria-label="Maximize"]').click();
  assert(await card.evaluate((el) => el.classList.contains("maximized")), "maximized");
  const box = await card.boundingBox();
  assert(Math.abs(box.x - 1280 * 0.05) < 2 && Math.abs(box.y - 900 * 0.05) < 2, "5% inset: " + JSON.stringify(box));
  await shot(page, "02-clock-maximized");
  await page.keyboard.press("Escape");
  assert(!(await card.evaluate((el) => el.classList.contains("maximized"))), "Escape restores");
  await card.locator('button[aria-label="Collapse"]').click();
  assert(await card.evaluate((el) => el.classList.contains("collapsed")), "collapsed");
  await card.locator('button[aria-label="Collapse"]').click();

  step = "fake app: other server and hidden tools refused";
  await selectServer(page, env.FAKE_SERVER);
  const visible = await callTool(page, "visible");
  const fcard = await openApp(page, visible);
  const f = await appFrame(page, fcard);
  const hidden = await appRequest(f.inner, "tools/call", { name: "hidden", arguments: {} });
  assert(hidden.error && /not visible to apps/.test(hidden.error.message), "hidden tool refused: " + JSON.stringify(hidden));
  const foreign = await appRequest(f.inner, "tools/call", { name: "echo", arguments: { message: "x" } });
  assert(foreign.error && /only call its own server/.test(foreign.error.message), "another server's tool refused: " + JSON.stringify(foreign));
  const own = await appRequest(f.inner, "tools/call", { name: "app_only", arguments: {} });
  assert(own.result && own.result.content[0].text === "called app_only", "own app tool allowed: " + JSON.stringify(own));
  const unknown = await appRequest(f.inner, "no/such", {});
  assert(unknown.error && unknown.error.code === -32601, "unknown method: " + JSON.stringify(unknown));
  await shot(page, "03-fake-app");

  step = "legacy GemiHub-style app";
  const legacy = await callTool(page, "legacy");
  const lcard = legacy.locator(".app-card").first();
  await lcard.waitFor({ timeout: TIMEOUT });
  await page.waitForFunction((el) => el.dataset.appState === "legacy", await lcard.elementHandle(), { timeout: TIMEOUT });
  const l = await appFrame(page, lcard);
  await l.inner.waitForFunction(() => document.getElementById("r").textContent === "legacy got: called legacy", null, { timeout: TIMEOUT });
  await l.inner.waitForFunction(() => document.getElementById("c").textContent === "context ok: true", null, { timeout: TIMEOUT });

  step = "server-basic-vanillajs";
  await selectServer(page, env.BASIC_SERVER);
  const getTime = await callTool(page, "get-time");
  const bcard = await openApp(page, getTime);
  const b = await appFrame(page, bcard);
  await b.inner.waitForFunction(() => /\d{4}-\d\d-\d\dT/.test(document.getElementById("server-time").textContent), null, { timeout: TIMEOUT });
  const before = await b.inner.locator("#server-time").textContent();
  await page.waitForTimeout(50);
  const blog0 = (await bcard.locator(".app-log li").allTextContents()).filter((l) => l.startsWith("← tools/call")).length;
  await b.inner.locator("#get-time-btn").click();
  await page.waitForFunction(([el, n]) => [...el.querySelectorAll(".app-log li")].filter((l) => l.textContent.startsWith("← tools/call")).length > n && [...el.querySelectorAll(".app-log li")].some((l) => /^→ result #\d+$/.test(l.textContent)), [await bcard.elementHandle(), blog0], { timeout: TIMEOUT });
  await b.inner.waitForFunction((t) => document.getElementById("server-time").textContent !== t, before, { timeout: TIMEOUT });
  await shot(page, "04-basic-vanillajs");

  step = "vanillajs open-link asks first";
  await b.inner.locator("#open-link-btn").click();
  await page.waitForSelector('.modal[aria-label="Open a link?"]', { timeout: TIMEOUT });
  await shot(page, "05-open-link-dialog");
  await page.locator(".modal button", { hasText: "Cancel" }).click();
  await page.waitForSelector(".modal", { state: "detached" });
  assert(page.context().pages().length === 1, "no window was opened");

  step = "vanillajs message";
  await b.inner.locator("#send-message-btn").click();
  await page.waitForSelector(".toast", { timeout: TIMEOUT });
  assert((await page.locator(".toast").first().textContent()).includes("This is message text."), "ui/message shown");
}

async function chatScenario(page) {
  step = "chat page";
  await page.goto(APP_URL.replace("/?token", "/chat?token"));
  await page.waitForSelector(".chat-toolbar");
  await page.locator(".tools-menu summary").click();
  await page.waitForSelector('[data-chat-server="demo"]');
  await shot(page, "01-chat-empty");

  step = "server checkboxes are remembered";
  await page.locator('[data-chat-server="other"]').uncheck();
  await page.reload();
  await page.waitForSelector(".chat-toolbar");
  await page.locator(".tools-menu summary").click();
  await page.waitForSelector('[data-chat-server="other"]');
  assert(!(await page.locator('[data-chat-server="other"]').isChecked()), "unchecked server remembered");
  assert(await page.locator('[data-chat-server="demo"]').isChecked(), "demo still checked");
  const stored = await page.evaluate(() => localStorage.getItem("switchboard.chat.servers"));
  assert(stored.includes('"other":false'), "stored in localStorage: " + stored);
  await page.fill(".chat-toolbar .model", "gemma-3-27b-it");
  await page.waitForSelector("[data-tools-off]");
  assert(await page.locator('[data-chat-server="demo"]').isDisabled(), "no MCP tools for Gemma");
  await page.fill(".chat-toolbar .model", "gemini-2.5-flash");
  await page.locator(".tools-menu summary").click();

  step = "send";
  await page.fill(".chat-input", "What time is it?");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-confirm]", { timeout: TIMEOUT });
  assert((await page.locator("[data-confirm] code").first().textContent()) === "demo.clock", "asks before running demo.clock");
  await shot(page, "02-confirm");
  await page.locator('[data-decision="once"]').click();
  const card = page.locator('.tool-card[data-tool-call="clock"]');
  await page.waitForSelector('.tool-card[data-tool-call="clock"][data-done="true"]', { timeout: TIMEOUT });
  const app = await openApp(page, card);
  const { inner } = await appFrame(page, app);
  await inner.waitForFunction(() => /\d{4}-\d\d-\d\dT/.test(document.getElementById("time").textContent), null, { timeout: TIMEOUT });
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.model .msg-text")].some((m) => m.textContent.includes("The clock app shows the time.")), null, { timeout: TIMEOUT });
  await inner.locator("#refresh").click();
  await inner.waitForFunction(() => document.getElementById("status").textContent === "updated", null, { timeout: TIMEOUT });
  await shot(page, "03-chat-app");
}

async function oauthScenario(page) {
  step = "needs login";
  await page.goto(APP_URL.replace("/?token", "/settings?token"));
  const row = page.locator('[data-server-row="secure"]');
  await row.waitFor();
  await page.waitForSelector('[data-server-row="secure"] [data-login="secure"]', { timeout: TIMEOUT });
  await row.locator('[data-test="secure"]').click();
  await row.locator('[data-test-result="needs-oauth"]').waitFor({ timeout: TIMEOUT });
  const msg = await row.locator(".test-message").textContent();
  assert(msg.includes("Server requires OAuth authentication."), "needsOAuth message: " + msg);
  await shot(page, "01-needs-login");

  step = "popup login";
  const popupPromise = page.context().waitForEvent("page", { timeout: TIMEOUT });
  await row.locator('[data-login="secure"]').first().click();
  const popup = await popupPromise;
  await popup.waitForLoadState("load", { timeout: TIMEOUT }).catch(() => {});
  log("popup reached", popup.url());
  await page.waitForSelector('.toast:has-text("Logged in")', { timeout: TIMEOUT });
  await page.waitForSelector('[data-server-row="secure"] .badge.status-connected', { timeout: TIMEOUT });
  assert(!(await page.evaluate(() => document.body.innerHTML)).match(/access_token|refresh_token/), "no token in the page");
  await shot(page, "02-logged-in");
  if (!popup.isClosed()) {
    await popup.screenshot({ path: path.join(SHOTS, `${SCENARIO}-03-popup.png`) }).catch(() => {});
  }

  step = "call with the token";
  await page.click('nav.tabs a[data-nav="explorer"]');
  await selectServer(page, "secure");
  const echo = page.locator('details[data-tool="echo"]');
  await echo.locator(":scope > summary").click();
  await echo.locator('[name="message"]').fill("authorized");
  await echo.locator('[data-call="echo"]').click();
  await echo.locator(".result-head.is-ok").waitFor({ timeout: TIMEOUT });
  assert((await echo.locator(".text-block").first().textContent()).includes("authorized"), "echo through OAuth");
  await shot(page, "04-explorer");
}

// The login that comes back to the app itself (/auth/mcp-oauth-callback): in a popup
// whose callback page posts to its opener, then with popups blocked (window.open
// returns null) in the same tab, resuming at /settings?mcp-oauth-return=1.
async function oauthCallbackScenario(page) {
  step = "popup login";
  await page.goto(APP_URL.replace("/?token", "/settings?token"));
  const row = page.locator('[data-server-row="popup"]');
  await page.waitForSelector('[data-server-row="popup"] [data-login="popup"]', { timeout: TIMEOUT });
  await shot(page, "01-needs-login");
  const popupPromise = page.context().waitForEvent("page", { timeout: TIMEOUT });
  await row.locator('[data-login="popup"]').first().click();
  const popup = await popupPromise;
  const popupUrls = [];
  popup.on("framenavigated", (f) => { if (f === popup.mainFrame()) popupUrls.push(f.url()); });
  await page.waitForSelector('[data-login-pending="popup"] [data-login-result="ok"]', { timeout: TIMEOUT });
  log("popup went through", popupUrls.join(" → "));
  assert(popupUrls.some((u) => u.includes("/auth/mcp-oauth-callback")), "the popup came back to the app's callback page: " + popupUrls.join(", "));
  await page.waitForSelector('[data-server-row="popup"] .badge.status-connected', { timeout: TIMEOUT });
  const html = await page.evaluate(() => document.body.innerHTML);
  assert(!html.match(/access_token|refresh_token|code_verifier/), "no token in the page");
  await shot(page, "02-popup-logged-in");
  await popup.waitForEvent("close", { timeout: TIMEOUT }).catch(() => {});
  assert(popup.isClosed(), "the callback popup closes itself");

  step = "call with the token";
  await page.click('nav.tabs a[data-nav="explorer"]');
  await selectServer(page, "popup");
  const echo = page.locator('details[data-tool="echo"]');
  await echo.locator(":scope > summary").click();
  await echo.locator('[name="message"]').fill("through the popup");
  await echo.locator('[data-call="echo"]').click();
  await echo.locator(".result-head.is-ok").waitFor({ timeout: TIMEOUT });
  assert((await echo.locator(".text-block").first().textContent()).includes("through the popup"), "echo through OAuth");
  await shot(page, "03-explorer");

  step = "blocked popup";
  await page.click('nav.tabs a[data-nav="settings"]');
  const tabRow = page.locator('[data-server-row="tab"]');
  await page.waitForSelector('[data-server-row="tab"] [data-login="tab"]', { timeout: TIMEOUT });
  await page.evaluate(() => { window.open = function () { return null; }; });
  const back = page.waitForURL(/\/settings\?mcp-oauth-return=1/, { timeout: TIMEOUT, waitUntil: "commit" });
  await tabRow.locator('[data-login="tab"]').first().click();
  await back;
  log("resumed at", page.url());
  await page.waitForSelector('[data-login-pending="tab"] [data-login-result="ok"]', { timeout: TIMEOUT });
  assert(new URL(page.url()).pathname === "/settings" && !page.url().includes("mcp-oauth-return"), "the return marker is dropped: " + page.url());
  await page.waitForSelector('[data-server-row="tab"] .badge.status-connected', { timeout: TIMEOUT });
  const left = await page.evaluate(() => sessionStorage.getItem("mcp-oauth-callback"));
  assert(left === null, "the callback result is not kept");
  await shot(page, "04-same-tab-logged-in");

  step = "replayed callback";
  // Going back through the callback with a used state: the server refuses it.
  await page.goto(new URL("/auth/mcp-oauth-callback?code=x&state=used-or-forged", page.url()).href);
  await page.waitForURL(/\/settings/, { timeout: TIMEOUT });
  await page.waitForSelector('.toast:has-text("no login is waiting")', { timeout: TIMEOUT });
  await shot(page, "05-replay-refused");
}

// Workflows page (crates/web/tests/browser.rs saves a run of examples/demo-tour.yaml
// first): the list, the run's log, and the clock app rendered from its UI step; then
// the link `switchboard run` prints, without and with the access cookie.
async function workflowsScenario(page) {
  const runId = env.RUN_ID;
  step = "workflows page";
  await page.goto(APP_URL);
  await page.click('nav.tabs a[data-nav="workflows"]');
  await page.waitForSelector('[data-workflow="examples/demo-tour.yaml"]');
  await page.waitForSelector(`[data-run="${runId}"]`);
  await shot(page, "01-list");

  step = "open the run";
  await page.click(`[data-run="${runId}"]`);
  await page.waitForSelector(`[data-run-loaded="${runId}"]`);
  assert((await page.locator('[data-step="greet"][data-step-status="ok"]').count()) === 1, "greet step listed");
  assert((await page.locator('[data-ui-step="clock"]').count()) === 1, "clock UI step listed");
  await shot(page, "02-run");

  step = "clock app from the run";
  await page.click('[data-open-step="clock"]');
  const card = await openApp(page, page.locator('[data-ui-step="clock"]'));
  const { inner } = await appFrame(page, card);
  await inner.waitForFunction(() => /\d{4}-\d\d-\d\dT/.test(document.getElementById("time").textContent), null, { timeout: TIMEOUT });
  const log = await card.locator(".app-log li").allTextContents();
  assert(log.includes("← ui/initialize #1") && log.includes("← ui/notifications/initialized"), "handshake: " + log.join(", "));
  assert(log.includes("→ ui/notifications/tool-result"), "the saved tool result is sent: " + log.join(", "));
  assert(page.url().includes("step=clock"), "the address names the step: " + page.url());
  await shot(page, "03-clock-app");

  step = "printed link without a cookie";
  const origin = new URL(APP_URL).origin;
  const token = new URL(APP_URL).searchParams.get("token");
  const link = `${origin}/workflows?run=${encodeURIComponent(runId)}&step=clock`;
  await page.context().clearCookies();
  const resp = await page.goto(link);
  assert(resp.status() === 401, "asks for the token link first: " + resp.status());
  await shot(page, "04-link-needs-token");

  step = "printed link with the token";
  await page.goto(link + "&token=" + token);
  const card2 = await openApp(page, page.locator('[data-ui-step="clock"]'));
  const frames = await appFrame(page, card2);
  await frames.inner.waitForFunction(() => /\d{4}-\d\d-\d\dT/.test(document.getElementById("time").textContent), null, { timeout: TIMEOUT });
  assert(!page.url().includes("token="), "the token is removed from the address bar");
  await shot(page, "05-link-clock-app");
}

// Settings › Find in the MCP Registry (crates/web/tests/browser.rs starts a local
// registry listing the demo server as a Streamable HTTP remote; REGISTRY_SECRET is the
// value typed for its secret header).
async function registryScenario(page) {
  step = "registry search";
  await page.goto(APP_URL);
  await page.click('nav.tabs a[data-nav="settings"]');
  await page.locator("[data-registry] > summary").click();
  await page.fill("[data-registry-query]", "modelcontextprotocol");
  await page.click("[data-registry-search]");
  await page.waitForSelector('[data-registry-result="io.modelcontextprotocol/everything"]');
  assert((await page.locator("[data-registry-result]").count()) === 5, "five active servers (the deprecated one hidden)");
  const brave = page.locator('[data-registry-result="io.modelcontextprotocol.anonymous/brave-search"]');
  assert((await brave.textContent()).includes("MCP server for Brave Search API integration"), "description shown");
  assert((await brave.locator('[data-registry-version]').textContent()) === "v1.0.2", "version shown");
  const editor = page.locator('[data-registry-result="io.modelcontextprotocol/text-editor"]');
  assert((await editor.locator(".reg-why").textContent()).includes("only the command line installs it"), "mcpb explained");
  assert((await editor.locator("[data-registry-add]").count()) === 0, "mcpb has no Add button");
  await shot(page, "01-search");

  step = "registry add form";
  await page.fill("[data-registry-query]", "switchboard");
  await page.click("[data-registry-search]");
  const demo = page.locator('[data-registry-result="io.github.switchboard/demo"]');
  await demo.waitFor();
  assert((await demo.textContent()).includes("remote"), "transport kind shown");
  await demo.locator('[data-registry-add="io.github.switchboard/demo"]').click();
  const form = page.locator('[data-registry-form="io.github.switchboard/demo"]');
  await form.waitFor();
  assert((await form.locator("[data-registry-name]").inputValue()) === "demo", "name suggested from the id");
  const key = form.locator('[data-registry-input="X-Demo-Key"] input[name="X-Demo-Key"]');
  assert((await key.getAttribute("type")) === "password", "the secret is a password field");
  step = "registry add: required value";
  await form.locator("[data-registry-submit]").click();
  assert((await form.locator("[data-registry-error]").textContent()).includes("X-Demo-Key is required"), "required value asked for");
  await key.fill(env.REGISTRY_SECRET);
  await form.locator('[data-registry-input="X-Region"] select').selectOption("us-east-1");
  await shot(page, "02-add-form");

  step = "registry add";
  await form.locator("[data-registry-submit]").click();
  const row = page.locator('[data-server-row="demo"]');
  await row.waitFor({ timeout: TIMEOUT });
  await row.locator(".badge.status-connected").waitFor({ timeout: TIMEOUT });
  assert((await form.count()) === 0, "the form closed");
  const html = await page.content();
  assert(!html.includes(env.REGISTRY_SECRET), "the secret is nowhere on the page");
  await shot(page, "03-added-connected");

  step = "registry conflict";
  await demo.locator('[data-registry-add="io.github.switchboard/demo"]').click();
  await form.waitFor();
  await form.locator('input[name="X-Demo-Key"]').fill("another-value");
  await form.locator("[data-registry-submit]").click();
  await page.waitForFunction(() => {
    const e = document.querySelector("[data-registry-form] [data-registry-error]");
    return e && e.textContent.includes("already exists");
  }, null, { timeout: TIMEOUT });
  await shot(page, "04-conflict");
}

// Team mode (crates/web/tests/team_browser.rs starts a team app, the OpenID provider
// with default account alice, the demo server and a server that answers 401): sign in,
// add a server, Test it, call echo, the OAuth hint, sign in to a server in a popup,
// chat (own model key, a confirmation, the tool's result), enable a team catalog server
// and sign in to it in a popup, a workflow (validate, save, run echo, its log), sign
// out, sign out everywhere.
// and sign in to it in a popup, a browser MCP client on another origin (registration,
// consent, token and /mcp through CORS; cookie routes closed to it), its grant listed
// under connected clients and revoked, sign out, sign out everywhere.
//   APP_URL the team app's origin; DEMO_URL, LOCKED_URL (answers 401), SECURE_URL (an
//   OAuth-protected server whose authorization server approves at once), MODEL_KEY
//   (the key the fake Gemini the team app chats with accepts), CLIENT_URL (the browser
//   MCP client's redirect URI: a loopback listener answering a small HTML page)
async function teamSignedIn(page) {
  await page.waitForFunction(() => {
    const who = document.querySelector("[data-me]");
    return who && who.textContent.includes("alice@example.com");
  }, null, { timeout: TIMEOUT });
  await page.waitForSelector('[data-servers][data-loaded="true"]', { state: "attached", timeout: TIMEOUT });
}

async function teamAdd(page, name, url, headers) {
  await page.click("[data-add-server]");
  const form = page.locator('[data-server-form="new"]');
  await form.locator('input[name="name"]').fill(name);
  await form.locator('input[name="url"]').fill(url);
  if (headers) await form.locator('textarea[name="headers"]').fill(headers);
  return form;
}

async function teamScenario(page) {
  const origin = new URL(APP_URL).origin;
  step = "signed out: the sign-in page";
  const resp = await page.goto(origin + "/");
  assert(resp.status() === 200, "/ answers 200: " + resp.status());
  const csp = resp.headers()["content-security-policy"] || "";
  assert(csp.includes("script-src 'self'"), "a CSP: " + csp);
  await page.waitForSelector('[data-page="signin"] [data-sign-in]');
  await shot(page, "01-signin");

  step = "sign in through the provider";
  await page.click("[data-sign-in]");
  await teamSignedIn(page);
  assert(new URL(page.url()).origin === origin, "back on the app: " + page.url());
  assert((await page.locator("[data-server-row]").count()) === 0, "no servers yet");
  await shot(page, "02-signed-in");

  step = "add the demo server, Test it in the form";
  const form = await teamAdd(page, "demo", env.DEMO_URL, '{"X-Team-Key": "browser-secret-5c1e"}');
  await form.locator("[data-form-test]").click();
  await form.locator('[data-test-result="success"]').waitFor({ timeout: TIMEOUT });
  await shot(page, "03-form-tested");
  await form.locator('button[type="submit"]').click();
  const row = page.locator('[data-server-row="demo"]');
  await row.waitFor({ timeout: TIMEOUT });
  const rowText = await row.textContent();
  assert(rowText.includes("X-Team-Key: ••••••"), "the header is listed masked: " + rowText);
  assert(!(await page.content()).includes("browser-secret"), "the secret never reaches the page");

  step = "Test the saved server";
  await row.locator('[data-test="demo"]').click();
  const ok = row.locator('[data-test-result="success"]');
  await ok.waitFor({ timeout: TIMEOUT });
  const message = await ok.locator(".test-message").textContent();
  assert(message.includes("Connected. Found 7 tool(s)."), "connected: " + message);
  const names = await ok.locator(".tool-names li code").allTextContents();
  assert(names.includes("echo"), "tools shown: " + names.join(", "));
  await shot(page, "04-tested");

  step = "a server that wants OAuth";
  const locked = await teamAdd(page, "locked", env.LOCKED_URL, "");
  await locked.locator('button[type="submit"]').click();
  const lockedRow = page.locator('[data-server-row="locked"]');
  await lockedRow.waitFor({ timeout: TIMEOUT });
  await lockedRow.locator('[data-test="locked"]').click();
  const hint = lockedRow.locator('[data-test-result="needs-oauth"]');
  await hint.waitFor({ timeout: TIMEOUT });
  assert((await hint.locator("[data-oauth-hint]").count()) === 1, "the sign-in hint is shown");
  await shot(page, "05-needs-oauth");

  step = "sign in to a server in a popup";
  const secure = await teamAdd(page, "secure", env.SECURE_URL, "");
  await secure.locator('button[type="submit"]').click();
  const secureRow = page.locator('[data-server-row="secure"]');
  await secureRow.waitFor({ timeout: TIMEOUT });
  await secureRow.locator('[data-test="secure"]').click();
  await secureRow.locator('[data-test-result="needs-oauth"]').waitFor({ timeout: TIMEOUT });
  await shot(page, "05b-server-sign-in");
  const popupOpened = page.waitForEvent("popup", { timeout: TIMEOUT });
  await secureRow.locator('[data-server-sign-in="secure"]').click();
  const popup = await popupOpened;
  await popup.waitForEvent("close", { timeout: TIMEOUT });
  // Back in the page: the list shows it signed in, and its Test now connects.
  const signedRow = page.locator('[data-server-row="secure"]');
  await signedRow.locator(".badge.status-connected").waitFor({ timeout: TIMEOUT });
  await signedRow.locator('[data-test-result="success"]').waitFor({ timeout: TIMEOUT });
  assert(!(await page.content()).toLowerCase().includes("access_token"), "no token on the page");
  await shot(page, "05c-server-signed-in");
  await signedRow.locator('[data-server-sign-out="secure"]').click();
  await page.locator('[data-server-row="secure"] [data-server-sign-out]').waitFor({ state: "detached", timeout: TIMEOUT });

  step = "the team catalog: enable a published server, Test it, sign in to it with a popup";
  const cat = page.locator('[data-catalog-row="teamsecure"]');
  await cat.waitFor({ timeout: TIMEOUT });
  const catText = await cat.textContent();
  assert(catText.includes("Published for the team"), "the description is shown: " + catText);
  await cat.locator('[data-catalog-enable="teamsecure"]').click();
  await page.locator('[data-catalog-row="teamsecure"] [data-test="catalog:teamsecure"]').waitFor({ timeout: TIMEOUT });
  const catRow = page.locator('[data-catalog-row="teamsecure"]');
  await catRow.locator('[data-test="catalog:teamsecure"]').click();
  await catRow.locator('[data-test-result="needs-oauth"]').waitFor({ timeout: TIMEOUT });
  const catPopup = page.waitForEvent("popup", { timeout: TIMEOUT });
  await catRow.locator('[data-server-sign-in="catalog:teamsecure"]').click();
  await (await catPopup).waitForEvent("close", { timeout: TIMEOUT });
  const catSigned = page.locator('[data-catalog-row="teamsecure"]');
  await catSigned.locator('[data-server-sign-out="catalog:teamsecure"]').waitFor({ timeout: TIMEOUT });
  await catSigned.locator('[data-test-result="success"]').waitFor({ timeout: TIMEOUT });
  assert(!(await page.content()).toLowerCase().includes("access_token"), "no token on the page");
  await shot(page, "05d-catalog-signed-in");

  step = "edit keeps the masked header";
  await row.locator('[data-edit="demo"]').click();
  const edit = page.locator('[data-server-form="demo"]');
  await edit.waitFor();
  const shown = await edit.locator('textarea[name="headers"]').inputValue();
  assert(shown.includes("<unchanged>") && !shown.includes("browser-secret"), "masked in the form: " + shown);
  await edit.locator('button[type="submit"]').click();
  await edit.waitFor({ state: "detached", timeout: TIMEOUT });

  step = "call echo from the tools view";
  await row.locator('[data-tools="demo"]').click();
  await page.waitForSelector('[data-tools-of="demo"][data-loaded="true"]', { timeout: TIMEOUT });
  const item = page.locator('details[data-tool="echo"]');
  await item.locator(":scope > summary").click();
  const markup = '<b id="injected">hi</b> from chromium';
  await item.locator('[data-args="echo"]').fill(JSON.stringify({ message: markup }));
  await item.locator('[data-call="echo"]').click();
  const result = item.locator('[data-call-result="ok"]');
  await result.waitFor({ timeout: TIMEOUT });
  const text = await result.locator("pre").first().textContent();
  assert(text === "Echo: " + markup, "the echo result, as text: " + text);
  assert((await page.locator("#injected").count()) === 0, "the server's text is not parsed as HTML");
  await shot(page, "06-echo");

  step = "structured content and an image";
  const add = page.locator('details[data-tool="add"]');
  await add.locator(":scope > summary").click();
  const skeleton = JSON.parse(await add.locator('[data-args="add"]').inputValue());
  assert("a" in skeleton && "b" in skeleton, "arguments prefilled from the schema: " + JSON.stringify(skeleton));
  await add.locator('[data-args="add"]').fill('{"a": 2, "b": 40}');
  await add.locator('[data-call="add"]').click();
  const structured = add.locator('[data-call-result="ok"] [data-structured] pre');
  await structured.waitFor({ timeout: TIMEOUT });
  assert(JSON.parse(await structured.textContent()).sum === 42, "structured content shown");
  const image = page.locator('details[data-tool="tiny_image"]');
  await image.locator(":scope > summary").click();
  await image.locator('[data-call="tiny_image"]').click();
  const img = image.locator('[data-call-result="ok"] img.image-block');
  await img.waitFor({ timeout: TIMEOUT });
  assert(await img.evaluate((i) => i.complete && i.naturalWidth === 16), "the PNG decodes under the CSP");
  await shot(page, "07-structured-and-image");

  step = "chat: save a key, start a chat, confirm the tool call, see its result";
  await page.click('[data-nav="chat"]');
  const keyForm = page.locator("[data-model-key-form]");
  await keyForm.waitFor({ timeout: TIMEOUT });
  await keyForm.locator('input[name="model-key"]').fill(env.MODEL_KEY);
  await keyForm.locator('button[type="submit"]').click();
  await page.waitForSelector('[data-model-key="available"]', { timeout: TIMEOUT });
  assert(!(await page.content()).includes(env.MODEL_KEY), "the key never comes back to the page");
  await page.click("[data-new-chat]");
  await page.waitForSelector("[data-chat-log][data-loaded]", { state: "attached", timeout: TIMEOUT });
  await page.locator('textarea[name="message"]').fill("please echo from the browser");
  await page.click("[data-send]");
  const ask = page.locator("[data-confirm]");
  await ask.waitFor({ timeout: TIMEOUT });
  await shot(page, "07b-chat-confirm");
  await ask.locator('[data-decision="once"]').click();
  await page.waitForFunction(() => {
    const log = document.querySelector("[data-chat-log]");
    return log && !document.querySelector(".chat-live") && log.textContent.includes("Echo: from the browser")
      && log.textContent.includes("The echo answered.");
  }, null, { timeout: TIMEOUT });
  assert((await page.locator("[data-chat-item]").count()) === 1, "the chat is listed");
  await shot(page, "07c-chat-done");

  if (env.EVERYTHING_URL) {
    step = "chat: a server's elicitation is a form answered in the page";
    await page.click('[data-nav="servers"]');
    await page.waitForSelector('[data-servers][data-loaded="true"]', { state: "attached", timeout: TIMEOUT });
    const ev = await teamAdd(page, "everything", env.EVERYTHING_URL, "");
    await ev.locator('button[type="submit"]').click();
    await page.locator('[data-server-row="everything"]').waitFor({ timeout: TIMEOUT });
    await page.click('[data-nav="chat"]');
    await page.click("[data-new-chat]");
    await page.waitForSelector("[data-chat-log][data-loaded]", { state: "attached", timeout: TIMEOUT });
    await page.locator('textarea[name="message"]').fill("ask me for my details");
    await page.click("[data-send]");
    const askCall = page.locator("[data-confirm]");
    await askCall.waitFor({ timeout: TIMEOUT });
    await askCall.locator('[data-decision="once"]').click();
    await page.locator("[data-elicitation]").waitFor({ timeout: TIMEOUT });
    // Reopened (the stream is gone; the turn keeps running): the waiting request is
    // listed by the chat and answered from here all the same.
    await page.reload();
    const form = page.locator("[data-elicitation]");
    await form.waitFor({ timeout: TIMEOUT });
    const formText = await form.textContent();
    assert(formText.includes("Please provide inputs"), "the server's message is shown: " + formText);
    assert(await form.locator('input[name="integer"]').getAttribute("type") === "number", "an integer field is a number input");
    assert(await form.locator('input[name="email"]').getAttribute("type") === "email", "an email field is an email input");
    assert(await form.locator('input[name="check"]').getAttribute("type") === "checkbox", "a boolean is a checkbox");
    assert((await form.locator('select[name="untitledSingleSelectEnum"] option').count()) === 7, "an enum is a select (with an empty choice)");
    await form.locator('input[name="name"]').fill("Grace <b>Hopper</b>");
    await form.locator('input[name="check"]').check();
    await form.locator('input[name="email"]').fill("grace@example.com");
    await shot(page, "07d-chat-elicitation");
    await form.locator('[data-elicit-action="accept"]').click();
    await form.waitFor({ state: "detached", timeout: TIMEOUT });
    const until = Date.now() + TIMEOUT;
    for (;;) {
      await page.reload();
      await page.waitForSelector("[data-chat-log][data-loaded]", { state: "attached", timeout: TIMEOUT });
      const logText = await page.locator("[data-chat-log]").textContent();
      if (logText.includes("Grace <b>Hopper</b>") && logText.includes("Thanks, Grace.")) break;
      assert(Date.now() < until, "the turn's result is saved: " + logText);
      await page.waitForTimeout(300);
    }
    assert((await page.locator("[data-chat-log] b").count()) === 0, "the answer is text, not HTML");
    await shot(page, "07e-chat-elicitation-done");
  }
  step = "workflows: validate (problems with lines), save one calling the demo server's echo, run it, see the result";
  await page.click('[data-nav="workflows"]');
  await page.waitForSelector('[data-workflows][data-loaded="true"]', { state: "attached", timeout: TIMEOUT });
  await page.waitForSelector('[data-wf-source][data-loaded="true"]', { state: "attached", timeout: TIMEOUT });
  await page.fill("[data-wf-name]", "greet");
  await page.fill("[data-wf-source]", "name: greet\nnodes:\n  - id: call\n    type: mcp\n    server: nope\n    tool: echo\n");
  await page.click("[data-wf-validate]");
  const problems = page.locator(".wf-problems");
  await problems.waitFor({ timeout: TIMEOUT });
  const problemText = await problems.textContent();
  assert(problemText.includes("line 5") && problemText.includes("nope"), "the problem names its line: " + problemText);
  await shot(page, "07f-workflow-problems");
  await page.fill("[data-wf-source]", "name: greet\nnodes:\n  - id: call\n    type: mcp\n    server: demo\n    tool: echo\n    args: '{\"message\": \"from a <b>workflow</b>\"}'\n    saveTo: out\n");
  await page.click("[data-wf-validate]");
  await page.waitForSelector('[data-wf-problems="0"]', { timeout: TIMEOUT });
  await page.click("[data-wf-save]");
  await page.waitForSelector('[data-workflow="greet"]', { timeout: TIMEOUT });
  await page.waitForSelector("[data-wf-run]", { timeout: TIMEOUT });
  await page.waitForSelector('[data-wf-source][data-loaded="true"]', { state: "attached", timeout: TIMEOUT });
  await page.click("[data-wf-run]");
  await page.waitForSelector('[data-wf-done="ok"]', { timeout: TIMEOUT });
  const wfLog = page.locator('[data-wf-log="ok"]');
  await wfLog.waitFor({ timeout: TIMEOUT });
  const wfText = await wfLog.textContent();
  assert(wfText.includes("Echo: from a <b>workflow</b>"), "the result is shown as text: " + wfText);
  assert((await page.locator(".wf-log b, .wf-live b").count()) === 0, "server text is never markup");
  await page.waitForSelector("[data-wf-past]", { timeout: TIMEOUT });
  await shot(page, "07g-workflow-run");
  step = "a browser MCP client on another origin: register, consent, token, /mcp through CORS";
  const { createHash, randomBytes } = await import("node:crypto");
  const verifier = randomBytes(32).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  const clientUrl = env.CLIENT_URL;
  const clientOrigin = new URL(clientUrl).origin;
  await page.goto(clientUrl);
  const reg = await page.evaluate(async ([o, cb]) => {
    const r = await fetch(o + "/oauth/register", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ client_name: "Browser MCP client", redirect_uris: [cb], token_endpoint_auth_method: "none" }),
    });
    return { status: r.status, body: await r.json() };
  }, [origin, clientUrl]);
  assert(reg.status === 201, "registered from another origin: " + JSON.stringify(reg));
  const clientId = reg.body.client_id;
  const authorize = new URLSearchParams({
    response_type: "code", client_id: clientId, redirect_uri: clientUrl, code_challenge: challenge,
    code_challenge_method: "S256", state: "browser-state", resource: origin + "/mcp", scope: "mcp",
  });
  await page.goto(origin + "/oauth/authorize?" + authorize.toString());
  await page.waitForSelector('button[value="allow"]', { timeout: TIMEOUT });
  assert((await page.content()).includes("Browser MCP client"), "the consent names the client");
  await shot(page, "08a-consent");
  await page.click('button[value="allow"]');
  await page.waitForURL((u) => u.origin === clientOrigin && u.searchParams.has("code"), { timeout: TIMEOUT });
  const code = new URL(page.url()).searchParams.get("code");
  const cross = await page.evaluate(async ([o, code, cb, cid, verifier]) => {
    const t = await fetch(o + "/oauth/token", {
      method: "POST",
      body: new URLSearchParams({ grant_type: "authorization_code", code, redirect_uri: cb, client_id: cid, code_verifier: verifier, resource: o + "/mcp" }),
    });
    const tokens = await t.json();
    const mcp = (token) => fetch(o + "/mcp", {
      method: "POST",
      headers: Object.assign({
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
      }, token ? { Authorization: "Bearer " + token } : {}),
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    const anon = await mcp(null);
    const listed = await mcp(tokens.access_token);
    const list = await listed.json();
    const cookieRoute = async (method) => {
      try {
        const r = await fetch(o + "/api/gateway/grants", { method, credentials: "include" });
        return "read " + r.status;
      } catch (e) {
        return "blocked";
      }
    };
    return {
      tokenStatus: t.status, access: tokens.access_token, anonStatus: anon.status,
      www: anon.headers.get("WWW-Authenticate"), listStatus: listed.status,
      tools: ((list.result && list.result.tools) || []).map((x) => x.name),
      cookieGet: await cookieRoute("GET"), cookieDelete: await cookieRoute("DELETE"),
    };
  }, [origin, code, clientUrl, clientId, verifier]);
  log("cross-origin", JSON.stringify(Object.assign({}, cross, { access: "…" })));
  assert(cross.tokenStatus === 200 && cross.access, "the code exchanged cross-origin: " + cross.tokenStatus);
  assert(cross.anonStatus === 401 && (cross.www || "").includes("resource_metadata="), "the 401's WWW-Authenticate is readable: " + cross.www);
  assert(cross.listStatus === 200 && cross.tools.includes("demo__echo"), "tools listed cross-origin: " + cross.tools.join(", "));
  assert(cross.cookieGet === "blocked" && cross.cookieDelete === "blocked", "cookie routes stay closed to another origin: " + cross.cookieGet + " / " + cross.cookieDelete);

  step = "connected clients: the grant is listed with its last use, and revoked";
  await page.goto(origin + "/#/servers");
  await page.waitForSelector('[data-grants][data-loaded="true"]', { state: "attached", timeout: TIMEOUT });
  const grant = page.locator("[data-grant]", { hasText: "Browser MCP client" });
  await grant.waitFor({ timeout: TIMEOUT });
  const grantText = await grant.textContent();
  assert(grantText.includes(new URL(clientUrl).host), "the redirect host is shown: " + grantText);
  assert(!grantText.includes("last used never"), "the use through /mcp is shown: " + grantText);
  await grant.scrollIntoViewIfNeeded();
  await shot(page, "08b-connected-clients");
  page.once("dialog", (d) => d.accept());
  await grant.locator("[data-revoke-grant]").click();
  await page.locator("[data-grant]", { hasText: "Browser MCP client" }).waitFor({ state: "detached", timeout: TIMEOUT });
  const afterRevoke = await page.evaluate(([o, token]) => fetch(o + "/mcp", {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", Authorization: "Bearer " + token },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  }).then((r) => r.status), [origin, cross.access]);
  assert(afterRevoke === 401, "the revoked client's token is refused: " + afterRevoke);
  await shot(page, "08c-client-revoked");

  step = "sign out";
  await page.click("[data-sign-out]");
  await page.waitForSelector('[data-page="signin"]', { timeout: TIMEOUT });
  const after = await page.evaluate(() => fetch("/api/me").then((r) => r.status));
  assert(after === 401, "the session ended: /api/me answers " + after);
  await shot(page, "08-signed-out");

  step = "sign in again, sign out everywhere";
  await page.click("[data-sign-in]");
  await teamSignedIn(page);
  await page.waitForSelector('[data-server-row="demo"]');
  await page.click("[data-sign-out-everywhere]");
  await page.waitForSelector('[data-page="signin"]', { timeout: TIMEOUT });
}

// A tool whose definition changed since pinned is shown as withheld with the reason;
// "Accept change" offers it again and it can be called.
async function pinsScenario(page) {
  step = "open explorer";
  await page.goto(APP_URL);
  await selectServer(page, "demo");
  step = "withheld card";
  const card = page.locator('[data-withheld-tool="echo"]');
  await card.waitFor({ timeout: TIMEOUT });
  const text = await card.innerText();
  assert(text.includes("changed since pinned") && text.includes("Accept change"), text);
  assert((await page.locator('details[data-tool="echo"]').count()) === 0, "echo is offered while withheld");
  step = "show change";
  await card.locator("button", { hasText: "Show change" }).click();
  const diff = card.locator('[data-pin-diff="echo"]');
  await diff.waitFor({ timeout: TIMEOUT });
  const diffText = await diff.innerText();
  assert(diffText.includes("-") && diffText.includes("An older echo.") && diffText.includes("Echo a message back"), diffText);
  assert((await diff.locator(".diff-del").count()) > 0 && (await diff.locator(".diff-add").count()) > 0, "diff lines are marked");
  await shot(page, "withheld");
  step = "accept";
  await card.locator("button", { hasText: "Accept change" }).click();
  await page.locator('details[data-tool="echo"]').waitFor({ timeout: TIMEOUT });
  assert((await page.locator('[data-withheld-tool="echo"]').count()) === 0, "still withheld after accepting");
  step = "call echo";
  const item = page.locator('details[data-tool="echo"]');
  await item.locator(":scope > summary").click();
  await item.locator('[name="message"]').fill("accepted");
  await item.locator('[data-call="echo"]').click();
  await item.getByText("Echo: accepted").first().waitFor({ timeout: TIMEOUT });
  await shot(page, "accepted");
}

// ---------------------------------------------------------------- main

// Team mode's MCP Apps (crates/web/tests/team_apps_browser.rs): signed in by the
// session cookie the test made (SESSION_COOKIE), in chat CHAT_ID (the model calls the
// demo clock, its server allowed always). The app renders from its app session in the
// store, initializes, its Refresh button calls the clock through the host, it cannot
// read the page or the cookie, its model context goes with the next turn, and its
// ui/message becomes that turn.
async function teamAppsScenario(page) {
  step = "open the chat signed in";
  await page.context().addCookies([{ name: "switchboard_session", value: env.SESSION_COOKIE, url: APP_URL }]);
  await page.goto(APP_URL + "/#/chat/" + encodeURIComponent(env.CHAT_ID));
  await page.waitForSelector("[data-chat-log][data-loaded]", { state: "attached", timeout: TIMEOUT });

  step = "a turn calls the clock: its app renders";
  await page.fill('textarea[name="message"]', "What time is it?");
  await page.click("[data-send]");
  await page.waitForFunction(() => {
    const log = document.querySelector("[data-chat-log]");
    return log && !document.querySelector(".chat-live") && log.textContent.includes("Here is the clock.");
  }, null, { timeout: TIMEOUT });
  // After the turn the log is read back from the store: the app comes from its session.
  const card = page.locator("[data-app-after] .app-card").first();
  await card.waitFor({ timeout: TIMEOUT });
  await page.waitForFunction((el) => el.dataset.initialized === "true", await card.elementHandle(), { timeout: TIMEOUT });
  const appId = await card.getAttribute("data-app-id");
  let proxy = null;
  let inner = null;
  for (let i = 0; i < 100 && !inner; i++) {
    proxy = page.frames().find((f) => f.url().includes(`/apps/${appId}/sandbox`));
    inner = proxy && proxy.childFrames()[0];
    if (!inner) await page.waitForTimeout(100);
  }
  assert(inner, "the app's frame under the sandbox page");
  await inner.waitForFunction(() => /\d{4}-\d\d-\d\dT/.test(document.getElementById("time").textContent), null, { timeout: TIMEOUT });
  const first = await inner.locator("#time").textContent();
  const log = await card.locator(".app-log li").allTextContents();
  assert(log.includes("→ ui/notifications/tool-input") && log.includes("→ ui/notifications/tool-result"), "tool input and result sent: " + log.join(", "));
  await shot(page, "01-clock-in-chat");

  step = "the app calls its tool through the host";
  await page.waitForTimeout(1100);
  await inner.locator("#refresh").click();
  await inner.waitForFunction(() => document.getElementById("status").textContent === "updated", null, { timeout: TIMEOUT });
  await inner.waitForFunction((t) => document.getElementById("time").textContent !== t, first, { timeout: TIMEOUT });
  const log2 = await card.locator(".app-log li").allTextContents();
  assert(log2.some((l) => l.startsWith("← tools/call")), "the app called tools/call: " + log2.join(", "));
  const missing = await appRequest(inner, "tools/call", { name: "no_such_tool", arguments: {} });
  assert(missing.error && /own server's tools/.test(missing.error.message), "a tool its server lacks is refused: " + JSON.stringify(missing));
  const ctx = await appRequest(inner, "ui/update-model-context", { content: [{ type: "text", text: "The clock app shows UTC." }] });
  assert(ctx.result && !ctx.error, "the model context is kept for the next turn: " + JSON.stringify(ctx));
  await shot(page, "02-clock-refreshed");

  step = "isolation";
  const proxyOrigin = await proxy.evaluate(() => window.origin);
  assert(proxyOrigin === "null", "the sandbox page runs in an opaque origin: " + proxyOrigin);
  const proxyCookie = await proxy.evaluate(() => { try { return document.cookie; } catch (e) { return "blocked: " + e.name; } });
  assert(proxyCookie === "" || proxyCookie.startsWith("blocked"), "the sandbox page has no cookie: " + proxyCookie);
  const cookie = await inner.evaluate(() => { try { return document.cookie; } catch (e) { return "blocked: " + e.name; } });
  assert(cookie === "" || cookie.startsWith("blocked"), "the app cannot read cookies: " + cookie);
  const top = await inner.evaluate(() => { try { return window.top.document.title; } catch (e) { return "blocked: " + e.name; } });
  assert(top.startsWith("blocked"), "the app cannot reach the host page's DOM: " + top);
  const proxyTop = await proxy.evaluate(() => { try { return window.top.document.title; } catch (e) { return "blocked: " + e.name; } });
  assert(proxyTop.startsWith("blocked"), "the sandbox page cannot reach the host page's DOM");
  const fetched = await inner.evaluate(() => fetch("/api/me").then((r) => "status " + r.status, (e) => "blocked: " + e.name));
  assert(fetched.startsWith("blocked"), "the app cannot call the team API: " + fetched);

  step = "the app's ui/message is the next turn";
  const sent = await appRequest(inner, "ui/message", { role: "user", content: [{ type: "text", text: "Hello from the clock app" }] });
  assert(sent.result && !sent.result.isError, "ui/message answered: " + JSON.stringify(sent));
  await page.waitForFunction(() => {
    const log = document.querySelector("[data-chat-log]");
    return log && !document.querySelector(".chat-live") && log.textContent.includes("Hello from the clock app")
      && log.textContent.includes("The app said hello.");
  }, null, { timeout: TIMEOUT });
  await page.locator("[data-app-after] .app-card[data-initialized=\"true\"]").first().waitFor({ timeout: TIMEOUT });
  await shot(page, "03-after-app-message");
}

const scenarios = { settings: settingsScenario, apps: appsScenario, chat: chatScenario, oauth: oauthScenario, "oauth-callback": oauthCallbackScenario };
scenarios.workflows = workflowsScenario;
scenarios.registry = registryScenario;
scenarios.team = teamScenario;
scenarios["team-apps"] = teamAppsScenario;
scenarios.pins = pinsScenario;
const run = scenarios[SCENARIO];
if (!run || !APP_URL) {
  console.error("usage: APP_URL=… SCENARIO=settings|apps|chat|oauth|oauth-callback node run.mjs");
  process.exit(2);
}
const { context, dir } = await launch();
const page = context.pages()[0] || (await context.newPage());
const problems = [];
page.on("pageerror", (e) => problems.push("page error: " + e.message));
page.on("console", (m) => { if (m.type() === "error") console.log(`[${SCENARIO}] console error:`, m.text()); });
page.setDefaultTimeout(TIMEOUT);
let code = 0;
try {
  await run(page);
  assert(problems.length === 0, problems.join("; "));
  console.log(`[${SCENARIO}] ok`);
} catch (e) {
  code = 1;
  console.error(`[${SCENARIO}] FAILED at step "${step}": ${e.stack || e}`);
  try { await shot(page, "failure"); } catch (_) { /* ignore */ }
} finally {
  await context.close().catch(() => {});
  fs.rmSync(dir, { recursive: true, force: true });
}
process.exit(code);

// Drives the jmapio reference webmail (jmap-demo-webmail) against a running
// Fastview in headless Chromium: logs in, opens every message of the inbox,
// records whether each reading pane rendered (not "Loading…"), then changes
// a message through the API and waits for the change to arrive by push.
// Not part of CI; see DEVELOPERS.md for the set-up.
//
// usage: node drive.mjs WEBMAIL_URL SESSION_URL USER PASSWORD OUT_DIR
// (run where `playwright-core` is installed; CHROMIUM defaults to /usr/bin/chromium)
import { chromium } from "playwright-core";
import fs from "node:fs";

const [webmailUrl, sessionUrl, user, password, outDir] = process.argv.slice(2);
fs.mkdirSync(outDir, { recursive: true });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
const consoleErrors = [];
page.on("console", (msg) => {
  if (msg.type() === "error") consoleErrors.push(msg.text());
});
page.on("pageerror", (err) => consoleErrors.push(String(err)));
const eventSource = [];
const apiCalls = [];
page.on("request", (request) => {
  if (request.url().includes("/jmap/api")) {
    try {
      apiCalls.push(JSON.parse(request.postData()).methodCalls.map((c) => c[0]).join(","));
    } catch (e) {}
  }
});
page.on("response", (response) => {
  if (response.url().includes("/jmap/eventsource")) {
    eventSource.push(response.status());
  }
});
await page.addInitScript(
  ([server, username, password]) => {
    localStorage.setItem("credentials.server", JSON.stringify(server));
    localStorage.setItem("credentials.username", JSON.stringify(username));
    localStorage.setItem("credentials.password", JSON.stringify(password));
  },
  [sessionUrl, user, password],
);
await page.goto(webmailUrl);
await page.waitForTimeout(4000);
await page.screenshot({ path: `${outDir}/00-inbox.png` });

// Every message row of the list, opened one after the other.
const rows = page.locator(".v-MailboxItem, .v-MessageItem, .v-ListItem");
const count = await rows.count();
const opened = [];
for (let i = 0; i < count; i += 1) {
  await rows.nth(i).click();
  await page.waitForTimeout(1500);
  const pane = await page.locator("body").innerText();
  const loading = /Loading…|Loading\.\.\./.test(pane);
  opened.push({ index: i, loading });
  await page.screenshot({ path: `${outDir}/${String(i + 1).padStart(2, "0")}-message.png` });
}

// Push: a change made elsewhere shows up without a reload.
const auth = "Basic " + Buffer.from(`${user}:${password}`).toString("base64");
const session = await (await fetch(sessionUrl, { headers: { Authorization: auth } })).json();
const accountId = Object.keys(session.accounts)[0];
const api = async (calls) =>
  (await fetch(session.apiUrl, {
    method: "POST",
    headers: { Authorization: auth, "Content-Type": "application/json" },
    body: JSON.stringify({ using: ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"], methodCalls: calls }),
  })).json();
const query = await api([["Email/query", { accountId, limit: 1 }, "q"]]);
const newest = query.methodResponses[0][1].ids[0];
await page.waitForTimeout(10000);
const before = await page.locator("body").innerText();
const callsBefore = apiCalls.length;
// Flip $flagged (a write that changes nothing pushes nothing).
const got = await api([["Email/get", { accountId, ids: [newest], properties: ["keywords"] }, "g"]]);
const flagged = Boolean(got.methodResponses[0][1].list[0].keywords.$flagged);
await api([["Email/set", { accountId, update: { [newest]: { "keywords/$flagged": flagged ? null : true } } }, "s"]]);
await page.waitForTimeout(8000);
await page.screenshot({ path: `${outDir}/99-after-push.png` });
const after = await page.locator("body").innerText();

const report = {
  messages: count,
  stillLoading: opened.filter((o) => o.loading).map((o) => o.index),
  eventSourceStatuses: eventSource,
  pageChangedAfterPush: before !== after,
  apiCallsAfterPush: apiCalls.slice(callsBefore),
  consoleErrors,
};
fs.writeFileSync(`${outDir}/report.json`, JSON.stringify(report, null, 2));
console.log(JSON.stringify(report, null, 2));
await browser.close();

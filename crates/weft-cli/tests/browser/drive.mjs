// Drives the page `weft serve` embeds in Debian's chromium (headless, through playwright-core),
// the way a person would: pick the agent, chat, approve a call, reload mid-answer, browse the
// thread's runs and checkpoints, watch a run's nested view, fork, export.
//
// Usage: node drive.mjs --url URL_WITH_TOKEN --agent NAME --screenshots DIR [--chromium PATH]
//        [--nested-run RUN_ID]
// Prints one `ok STEP` line per step and `DRIVE-RESULT {json}` at the end; exits 1 on the first
// failure (with a screenshot `serve-failure.png` in the screenshot folder).
import { chromium } from "playwright-core";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

function args() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  for (const need of ["url", "agent", "screenshots"]) {
    if (!out[need]) throw new Error(`missing --${need}`);
  }
  return out;
}

const opts = args();
const TIMEOUT = 60_000;
mkdirSync(opts.screenshots, { recursive: true });

const browser = await chromium.launch({
  executablePath: opts.chromium || "/usr/bin/chromium",
  headless: true,
  // Containers and CI run as root, where chromium's own sandbox cannot start; the machine
  // has no network beyond localhost, so chromium's background connections stay off.
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const context = await browser.newContext({ viewport: { width: 1100, height: 760 }, acceptDownloads: true });
context.setDefaultTimeout(TIMEOUT);
const page = await context.newPage();
const consoleErrors = [];
page.on("console", (message) => {
  if (message.type() === "error") consoleErrors.push(message.text());
});
page.on("pageerror", (error) => consoleErrors.push(String(error)));

const result = { steps: [], consoleErrors };
const shot = async (name) => {
  await page.screenshot({ path: join(opts.screenshots, `serve-${name}.png`), fullPage: false });
};
const step = async (name, body) => {
  try {
    await body();
    result.steps.push(name);
    console.log(`ok ${name}`);
  } catch (error) {
    console.log(`FAILED ${name}: ${error && error.stack ? error.stack : error}`);
    console.log(`page url: ${page.url()}`);
    console.log(`console errors: ${JSON.stringify(consoleErrors)}`);
    try {
      await shot("failure");
    } catch {
      // the browser may be gone
    }
    await browser.close();
    process.exit(1);
  }
};
const assistantText = () => page.locator('[data-testid="message-assistant"] .text');
const waitForText = (locator, text) => locator.filter({ hasText: text }).first().waitFor({ state: "visible" });
const send = async (text) => {
  await page.getByTestId("chat-input").fill(text);
  await page.getByTestId("send").click();
};
const chatId = () => {
  const parts = new URL(page.url()).hash.split("/");
  return decodeURIComponent(parts[3] ?? "");
};

await step("open", async () => {
  await page.goto(opts.url);
  await page.getByTestId("agent-picker").waitFor();
  // The token moved from the address bar into the tab's storage.
  if (new URL(page.url()).searchParams.has("token")) throw new Error("the token stayed in the URL");
  await page.getByTestId("agent-picker").selectOption(opts.agent);
  await page.getByTestId("chat-input").waitFor();
  if (!chatId()) throw new Error(`no chat id in the URL: ${page.url()}`);
  result.chatId = chatId();
});

await step("chat", async () => {
  await send("hello");
  await waitForText(page.locator('[data-testid="message-user"] .text'), "hello");
  await waitForText(assistantText(), "Hello from the scripted model");
  await page.locator('[data-testid="chat-status"][data-status="ready"]').waitFor();
  // The answer's run: its tokens under the chat.
  await page.getByTestId("chat-usage").filter({ hasText: "120 tokens in · 30 out" }).waitFor();
  await shot("chat");
});

await step("approve", async () => {
  await send("write the note");
  const approval = page.getByTestId("approval");
  await approval.waitFor();
  const input = await page.locator('[data-testid="tool-part"][data-state="approval-requested"] [data-testid="tool-input"]').innerText();
  if (!input.includes("note.txt")) throw new Error(`the approval does not show the arguments: ${input}`);
  await shot("approval");
  await page.getByTestId("approve").click();
  await page.locator('[data-testid="tool-part"][data-tool="write_file"][data-state="output-available"]').first().waitFor();
  await waitForText(assistantText(), "The note is written");
  await page.locator('[data-testid="chat-status"][data-status="ready"]').waitFor();
});

await step("reload mid-stream", async () => {
  await send("read it back");
  // The first step of the answer streams; the second is late (the model is slow).
  await waitForText(assistantText(), "Reading the note first");
  if ((await assistantText().filter({ hasText: "The note says" }).count()) > 0) {
    throw new Error("the answer ended before the reload");
  }
  await page.reload();
  await page.getByTestId("messages").waitFor();
  // After the reload the page loads the thread and rejoins the running answer: the chat is
  // streaming again (the answer's last part is seconds away) and shows what came before.
  await page.locator('[data-testid="chat-status"][data-status="streaming"]').waitFor();
  await waitForText(assistantText(), "Reading the note first");
  await waitForText(assistantText(), "The note says");
  await page.locator('[data-testid="chat-status"][data-status="ready"]').waitFor();
  await shot("resume");
});

if (opts["nested-run"]) {
  await step("nested view", async () => {
    await page.goto(new URL(`#/runs/${encodeURIComponent(opts["nested-run"])}`, page.url()).toString());
    const nested = page.locator('[data-testid="run-tool"] .children [data-testid="agent-node"][data-depth="1"]');
    await nested.first().waitFor();
    const inner = await nested.first().locator('[data-testid="run-tool"]').count();
    if (inner < 1) throw new Error("the sub-agent's own tool call is not nested under it");
    await shot("nested");
  });
}

let threadHash = "";
await step("runs and checkpoints", async () => {
  await page.getByTestId("nav-runs").click();
  await page.getByTestId("threads").waitFor();
  await page.locator(`[data-testid="thread-link"]`).first().waitFor();
  threadHash = `#/threads/${encodeURIComponent(result.chatId)}`;
  await page.goto(new URL(threadHash, page.url()).toString());
  await page.getByTestId("runs").waitFor();
  await page.getByTestId("checkpoints").waitFor();
  result.runs = await page.getByTestId("run-link").count();
  result.checkpoints = await page.getByTestId("checkpoint").count();
  if (result.runs < 1 || result.checkpoints < 1) throw new Error(`runs ${result.runs}, checkpoints ${result.checkpoints}`);
  await shot("thread");
});

await step("run view", async () => {
  // The run with the approved call: the thread lists its runs newest first or oldest first;
  // open each until one shows write_file.
  const links = await page.getByTestId("run-link").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
  let found = false;
  for (const link of links) {
    await page.goto(new URL(link, page.url()).toString());
    await page.getByTestId("run-tree").waitFor();
    // The run's whole log streamed in (the stream closes after run_end).
    await page.locator('[data-testid="events-state"][data-state="ended"]').waitFor();
    if ((await page.locator('[data-testid="run-tool"][data-tool="write_file"]').count()) > 0) {
      found = true;
      break;
    }
  }
  if (!found) throw new Error("no run shows the write_file call");
  const args = await page.locator('[data-testid="run-tool"][data-tool="write_file"]').first().innerText();
  if (!args.includes("note.txt")) throw new Error(`the run view does not show the call's arguments: ${args}`);
  const input = Number(await page.getByTestId("input-tokens").innerText());
  if (!(input > 0)) throw new Error(`no token totals: ${input}`);
  result.inputTokens = input;
  await shot("run");
});

await step("fork", async () => {
  await page.goto(new URL(threadHash, page.url()).toString());
  await page.getByTestId("checkpoints").waitFor();
  const forks = page.getByTestId("fork");
  // Fork from the oldest checkpoint listed last or first: pick the last row.
  await forks.last().click();
  await page.waitForFunction((original) => {
    const el = document.querySelector('[data-testid="thread-page"]');
    return el && el.getAttribute("data-thread-id") !== original;
  }, result.chatId);
  result.forkId = await page.getByTestId("thread-page").getAttribute("data-thread-id");
  await page.getByTestId("checkpoints").waitFor();
  // The fork names its origin and can be chatted on.
  const origin = await page.getByTestId("forked-from").innerText();
  if (!origin.includes(result.chatId.slice(0, 8))) throw new Error(`the fork does not name its origin: ${origin}`);
  await page.getByTestId("open-chat").waitFor();
  await shot("fork");
});

await step("export", async () => {
  await page.goto(new URL(threadHash, page.url()).toString());
  await page.getByTestId("export").waitFor();
  const [download] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export").click()]);
  const path = await download.path();
  const exported = JSON.parse(readFileSync(path, "utf8"));
  const text = JSON.stringify(exported);
  if (!text.includes("hello") || !text.includes("note.txt")) throw new Error(`the export lacks the chat: ${text.slice(0, 300)}`);
  result.exportBytes = text.length;
});

await step("deny", async () => {
  await page.goto(new URL(`#/chat/${encodeURIComponent(opts.agent)}/${encodeURIComponent(result.chatId)}`, page.url()).toString());
  await page.getByTestId("chat-input").waitFor();
  await send("write another");
  await page.getByTestId("approval").waitFor();
  // Reloaded while the call waits: the page still shows it with its arguments, and the
  // answer goes on once it is decided.
  await page.locator('[data-testid="chat-status"][data-status="ready"]').waitFor();
  await page.reload();
  await page.getByTestId("approval").waitFor();
  const input = await page.locator('[data-testid="tool-part"][data-state="approval-requested"] [data-testid="tool-input"]').innerText();
  if (!input.includes("other.txt")) throw new Error(`the waiting call's arguments are not shown: ${input}`);
  await page.getByTestId("deny").click();
  await waitForText(assistantText(), "Not written, as you wish");
  await page.getByTestId("approval").waitFor({ state: "detached" });
  await page.locator('[data-testid="chat-status"][data-status="ready"]').waitFor();
});

await step("stop", async () => {
  // The status of the chat's stream route until it is `want` (200: a run is going on, 204:
  // nothing runs on the thread).
  const streamStatus = (want) =>
    page.evaluate(
      async ([id, want]) => {
        let status = 0;
        for (let i = 0; i < 240 && status !== want; i++) {
          if (i > 0) await new Promise((resolve) => setTimeout(resolve, 250));
          const response = await fetch(`/api/chat/${encodeURIComponent(id)}/stream`, {
            headers: { Authorization: `Bearer ${sessionStorage.getItem("weft_token")}` },
          });
          status = response.status;
          await response.body?.cancel();
        }
        return status;
      },
      [result.chatId, want],
    );
  await send("take your time");
  // The answer is slow: once its run is going on, Stop ends it here and on the server (the
  // run stops, nothing runs on the thread any more), not only the page's connection.
  if ((await streamStatus(200)) !== 200) throw new Error("the answer's run never started");
  await page.getByTestId("stop").click();
  await page.locator('[data-testid="chat-status"][data-status="ready"]').waitFor();
  if ((await streamStatus(204)) !== 204) throw new Error("the run still runs after Stop");
});

await browser.close();
console.log(`DRIVE-RESULT ${JSON.stringify(result)}`);

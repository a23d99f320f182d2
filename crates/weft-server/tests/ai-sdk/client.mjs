// The real Vercel AI SDK (v5 or v6) as a client of `weft serve`: its `AbstractChat` (what
// `useChat` wraps) with `DefaultChatTransport`, exactly as a page uses them.
//
//   node client.mjs VERSION BASE_URL TOKEN
//
// Prints one JSON object per scenario on stdout; crates/weft-server/tests/ai_sdk.rs checks
// them. Any failure exits non-zero with the reason on stderr.

const [version, base, token] = process.argv.slice(2);
const ai = await import(version === '5' ? 'ai5' : 'ai6');
const { AbstractChat, DefaultChatTransport } = ai;

// The state a framework binding (React, Vue, Svelte) keeps; AbstractChat drives it.
class State {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }
  pushMessage = (message) => { this.messages = this.messages.concat(message); };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
  };
  snapshot = (value) => structuredClone(value);
}

class Chat extends AbstractChat {
  constructor({ messages, ...options }) {
    super({ ...options, state: new State(messages) });
  }
}

const headers = { Authorization: `Bearer ${token}` };
const suffix = version === '5' ? '?ui=v5' : '';
const transport = (agent) =>
  new DefaultChatTransport({ api: `${base}/api/agents/${agent}/chat${suffix}`, headers });

function report(scenario, chat, extra = {}) {
  const messages = chat.messages.map((m) => ({
    id: m.id,
    role: m.role,
    text: m.parts.filter((p) => p.type === 'text').map((p) => p.text).join(''),
    parts: m.parts.map((p) => ({ type: p.type, state: p.state, toolCallId: p.toolCallId })),
  }));
  console.log(JSON.stringify({ scenario, status: chat.status, error: chat.error?.message ?? null, messages, ...extra }));
}

async function until(condition, what) {
  for (let i = 0; i < 600; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function stored(id) {
  const response = await fetch(`${base}/api/chat/${id}/messages`, { headers });
  if (!response.ok) throw new Error(`messages: ${response.status}`);
  return response.json();
}

const errors = [];
const onError = (error) => errors.push(String(error?.message ?? error));

// 1. Two messages on one chat: streamed into UIMessages, the history sent back and accepted.
{
  const chat = new Chat({ id: `send-v${version}`, transport: transport('a'), onError });
  await chat.sendMessage({ text: 'Hi' });
  await chat.sendMessage({ text: 'And again' });
  report('send', chat, { stored: await stored(chat.id) });
}

// 2. Resume: a page reloaded mid-answer rejoins the stream with `resume` (resumeStream).
{
  const id = `resume-v${version}`;
  const first = new Chat({ id, transport: transport('slow'), onError });
  const sending = first.sendMessage({ text: 'Look around' });
  await until(() => first.messages.some((m) => m.role === 'assistant' && m.parts.some((p) => p.type === 'text')), 'the first text');
  // "Reload": a new chat with what the server stored, rejoining the stream in progress.
  const reloaded = new Chat({ id, transport: transport('slow'), onError, messages: await stored(id) });
  await reloaded.resumeStream();
  await sending;
  report('resume', reloaded, { original: first.messages.at(-1)?.id });
}

// 3. Stop: the client's stop() disconnects, the stop endpoint stops the run; the partial
// answer is kept.
{
  const id = `stop-v${version}`;
  const chat = new Chat({ id, transport: transport('stuck'), onError });
  const sending = chat.sendMessage({ text: 'Look around' });
  await until(() => chat.messages.some((m) => m.role === 'assistant' && m.parts.some((p) => p.type === 'text')), 'the first text');
  await chat.stop();
  const stopped = await (await fetch(`${base}/api/chat/${id}/stop`, { method: 'POST', headers })).json();
  await sending;
  const resumeStatus = (await fetch(`${base}/api/chat/${id}/stream`, { headers })).status;
  report('stop', chat, { stopped, stored: await stored(id), resumeStatus });
}

// 4. Approvals the v6 way: tool-approval-request, addToolApprovalResponse, and the answer
// sent automatically inside the assistant message.
if (version !== '5') {
  const chat = new Chat({
    id: `approve-v${version}`,
    transport: transport('writer'),
    onError,
    sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  await chat.sendMessage({ text: 'Write a note' });
  const part = chat.messages.at(-1).parts.find((p) => p.state === 'approval-requested');
  if (!part) throw new Error(`no approval requested: ${JSON.stringify(chat.messages.at(-1))}`);
  const requested = { id: chat.messages.at(-1).id, approval: part.approval.id };
  await chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
  await until(() => chat.status === 'ready' && chat.messages.at(-1).parts.some((p) => p.state === 'output-available'), 'the approved call');
  report('approve', chat, { requested, stored: await stored(chat.id) });
}

console.log(JSON.stringify({ scenario: 'errors', errors }));

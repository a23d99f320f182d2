// The chat view: the AI SDK's own `useChat` against `POST /api/agents/{name}/chat`.
import { useEffect, useMemo, useRef, useState } from "react";
import { useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  getToolOrDynamicToolName,
  isToolOrDynamicToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  type UIMessage,
} from "ai";
import { ApiError, api, authHeaders, formatCost, pretty, type AgentInfo, type LgRun, type RunSummary } from "./api";
import { href, navigate, newChatId } from "./route";

/** Picks the agent and the chat; loads the stored history before the chat starts, so a
 * reload shows the thread and then rejoins a running answer. */
export function ChatPage({
  agents,
  agent,
  chatId,
}: {
  agents: AgentInfo[];
  agent: string;
  chatId: string;
}) {
  const [history, setHistory] = useState<UIMessage[] | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);

  useEffect(() => {
    let cancelled = false;
    setHistory(null);
    setLoadError(null);
    api
      .get<UIMessage[]>(`/api/chat/${encodeURIComponent(chatId)}/messages`)
      .then((messages) => !cancelled && setHistory(Array.isArray(messages) ? messages : []))
      .catch((err: unknown) => {
        if (cancelled) return;
        if (err instanceof ApiError && err.status === 404) setHistory([]);
        else setLoadError(err instanceof Error ? err.message : String(err));
      });
    return () => {
      cancelled = true;
    };
  }, [chatId]);

  return (
    <section className="chat-page">
      <div className="toolbar">
        <label>
          Agent{" "}
          <select
            data-testid="agent-picker"
            value={agent}
            onChange={(e) => navigate({ view: "chat", agent: e.target.value, chatId: newChatId() })}
          >
            {agents.map((a) => (
              <option key={a.name} value={a.name}>
                {a.name}
                {a.kind === "dual_ai" ? " (dual AI)" : ""}
              </option>
            ))}
          </select>
        </label>
        <button type="button" onClick={() => navigate({ view: "chat", agent, chatId: newChatId() })}>
          New chat
        </button>
        <a className="muted" href={href({ view: "thread", threadId: chatId })}>
          thread {chatId.slice(0, 8)} · runs &amp; checkpoints
        </a>
      </div>
      {agents.find((a) => a.name === agent)?.description && (
        <p className="muted agent-description">{agents.find((a) => a.name === agent)?.description}</p>
      )}
      {loadError && <p className="error">Could not load the chat: {loadError}</p>}
      {history === null && !loadError && <p className="muted">Loading…</p>}
      {history !== null && <ChatSession key={`${agent}/${chatId}`} agent={agent} chatId={chatId} history={history} />}
    </section>
  );
}

function ChatSession({ agent, chatId, history }: { agent: string; chatId: string; history: UIMessage[] }) {
  const transport = useMemo(
    () =>
      new DefaultChatTransport({
        api: `/api/agents/${encodeURIComponent(agent)}/chat`,
        credentials: "same-origin",
        headers: () => authHeaders(),
        // A reload rejoins the running answer on the chat's own stream route.
        prepareReconnectToStreamRequest: ({ id }) => ({
          api: `/api/chat/${encodeURIComponent(id)}/stream`,
        }),
      }),
    [agent],
  );
  const { messages, sendMessage, status, stop, error, addToolApprovalResponse, clearError, resumeStream } = useChat({
    id: chatId,
    messages: history,
    transport,
    resume: true,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState("");
  const [usage, setUsage] = useState<RunSummary | null>(null);
  const bottom = useRef<HTMLDivElement>(null);
  const busy = status === "submitted" || status === "streaming";

  useEffect(() => {
    bottom.current?.scrollIntoView({ block: "end" });
  }, [messages]);

  // The chat's runs, read again whenever an answer ends: the newest one's tokens and cost, and
  // the decisions any run of the thread waits for (LangGraph status `interrupted`).
  const metadataRunId = latestRunId(messages);
  const [waitingRuns, setWaitingRuns] = useState<RunSummary[]>([]);
  const [refresh, setRefresh] = useState(0);
  useEffect(() => {
    if (busy || messages.length === 0) return;
    let cancelled = false;
    const load = async () => {
      let runs: LgRun[] = [];
      try {
        const listed = await api.get<LgRun[]>(`/threads/${encodeURIComponent(chatId)}/runs?limit=20`);
        if (Array.isArray(listed)) runs = [...listed].sort((a, b) => b.created_at.localeCompare(a.created_at));
      } catch {
        // no run API: the run behind the last answer still gives the totals
      }
      const newest = runs[0]?.run_id ?? metadataRunId;
      const suspended = runs.filter((r) => r.status === "interrupted").map((r) => r.run_id);
      const ids = [...new Set([newest, ...suspended.slice(0, 5)])].filter((id): id is string => Boolean(id));
      const summaries = await Promise.all(
        ids.map((id) => api.get<RunSummary>(`/api/runs/${encodeURIComponent(id)}`).catch(() => null)),
      );
      if (cancelled) return;
      const found = summaries.filter((run): run is RunSummary => run !== null);
      setUsage(found.find((run) => run.runId === newest) ?? null);
      setWaitingRuns(found.filter((run) => run.pendingDecisions.length > 0));
    };
    void load();
    return () => {
      cancelled = true;
    };
  }, [busy, metadataRunId, messages.length, chatId, refresh]);

  // Decisions a run waits for that no message on the page shows (the page was opened or
  // reloaded while the run waited): answered here, then the chat rejoins the run's answer.
  const shownApprovals = new Set(
    messages.flatMap((m) =>
      m.parts.flatMap((part) => (isToolOrDynamicToolUIPart(part) && part.approval ? [part.approval.id] : [])),
    ),
  );
  const [decided, setDecided] = useState<string[]>([]);
  const waiting = busy
    ? []
    : waitingRuns.flatMap((run) =>
        run.pendingDecisions
          .filter((d) => !shownApprovals.has(d.id) && !decided.includes(d.id))
          .map((d) => ({ ...d, runId: run.runId })),
      );
  const [deciding, setDeciding] = useState(false);
  const [decideError, setDecideError] = useState<string | null>(null);
  const decide = async (runId: string, decisionId: string, approve: boolean) => {
    setDeciding(true);
    setDecideError(null);
    try {
      await api.post(`/api/runs/${encodeURIComponent(runId)}/decisions/${encodeURIComponent(decisionId)}`, {
        approve,
        ...(approve ? {} : { reason: "denied in the web page" }),
      });
      setDecided((ids) => [...ids, decisionId]);
      await resumeStream();
    } catch (err) {
      setDecideError(err instanceof Error ? err.message : String(err));
    } finally {
      setDeciding(false);
      setRefresh((r) => r + 1);
    }
  };

  const submit = (e: React.FormEvent) => {
    e.preventDefault();
    const text = input.trim();
    if (!text || busy) return;
    clearError();
    void sendMessage({ text });
    setInput("");
  };

  const onStop = () => {
    void stop();
    void api.post(`/api/chat/${encodeURIComponent(chatId)}/stop`).catch(() => undefined);
  };

  return (
    <div className="chat">
      <div className="messages" data-testid="messages">
        {messages.length === 0 && <p className="muted empty">Say something to {agent}.</p>}
        {messages.map((message) => (
          <Message key={message.id} message={message} onApproval={addToolApprovalResponse} />
        ))}
        {waiting.map((d) => (
          <div key={d.id} className="message assistant" data-testid="message-pending">
            <div className="role">assistant</div>
            <div className="parts">
              <div className="tool tool-approval-requested" data-testid="tool-part" data-tool={d.tool} data-state="approval-requested">
                <div className="tool-head">
                  <span className="tool-name">{d.tool}</span>
                  <span className="badge state-approval-requested">needs approval</span>
                </div>
                <pre className="json" data-testid="tool-input">
                  {pretty(d.arguments)}
                </pre>
                {d.reason && <p className="muted">{d.reason}</p>}
                <div className="approval" data-testid="approval">
                  <span>Run this call?</span>
                  <button type="button" data-testid="approve" disabled={deciding} onClick={() => void decide(d.runId, d.id, true)}>
                    Approve
                  </button>
                  <button
                    type="button"
                    className="danger"
                    data-testid="deny"
                    disabled={deciding}
                    onClick={() => void decide(d.runId, d.id, false)}
                  >
                    Deny
                  </button>
                </div>
              </div>
            </div>
          </div>
        ))}
        {decideError && <p className="error">{decideError}</p>}
        {status === "submitted" && <p className="muted thinking">…</p>}
        <div ref={bottom} />
      </div>
      {error && (
        <p className="error" data-testid="chat-error">
          {error.message}
        </p>
      )}
      {usage && (
        <p className="usage muted" data-testid="chat-usage">
          last run <a href={href({ view: "run", runId: usage.runId })}>{usage.runId.slice(0, 8)}</a>:{" "}
          {usage.usage.inputTokens} tokens in · {usage.usage.outputTokens} out · cost {formatCost(usage.usage.cost)}
        </p>
      )}
      <form className="composer" onSubmit={submit}>
        <textarea
          data-testid="chat-input"
          value={input}
          placeholder={`Message ${agent}`}
          rows={2}
          onChange={(e) => setInput(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey) submit(e);
          }}
        />
        {busy ? (
          <button type="button" data-testid="stop" className="danger" onClick={onStop}>
            Stop
          </button>
        ) : (
          <button type="submit" data-testid="send" disabled={!input.trim()}>
            Send
          </button>
        )}
      </form>
      <p className="status muted" data-testid="chat-status" data-status={status}>
        {status}
      </p>
    </div>
  );
}

/** The run behind the latest answer: `metadata.runId` if the server sends it, else the
 * server's assistant message id, `msg-RUN` (one message per run). */
function latestRunId(messages: UIMessage[]): string | null {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    const metadata = message.metadata as { runId?: unknown } | undefined;
    if (metadata && typeof metadata.runId === "string") return metadata.runId;
    if (message.role === "assistant" && message.id.startsWith("msg-")) return message.id.slice(4);
  }
  return null;
}

type Approve = (response: { id: string; approved: boolean; reason?: string }) => void | PromiseLike<void>;

function Message({ message, onApproval }: { message: UIMessage; onApproval: Approve }) {
  return (
    <div className={`message ${message.role}`} data-testid={`message-${message.role}`}>
      <div className="role">{message.role === "user" ? "you" : message.role}</div>
      <div className="parts">
        {message.parts.map((part, index) => {
          if (part.type === "text") {
            return (
              <div key={index} className="text">
                {part.text}
              </div>
            );
          }
          if (part.type === "reasoning") {
            return (
              <details key={index} className="reasoning">
                <summary>reasoning</summary>
                <div className="text">{part.text}</div>
              </details>
            );
          }
          if (isToolOrDynamicToolUIPart(part)) {
            return <ToolPart key={part.toolCallId} part={part} onApproval={onApproval} />;
          }
          return null;
        })}
      </div>
    </div>
  );
}

type ToolPartLike = Parameters<typeof getToolOrDynamicToolName>[0];

function ToolPart({ part, onApproval }: { part: ToolPartLike; onApproval: Approve }) {
  const name = getToolOrDynamicToolName(part);
  const state = part.state;
  return (
    <div className={`tool tool-${state}`} data-testid="tool-part" data-tool={name} data-state={state}>
      <div className="tool-head">
        <span className="tool-name">{name}</span>
        <span className={`badge state-${state}`}>{toolStateLabel(state)}</span>
      </div>
      {part.input !== undefined && (
        <pre className="json" data-testid="tool-input">
          {pretty(part.input)}
        </pre>
      )}
      {state === "approval-requested" && part.approval && (
        <div className="approval" data-testid="approval">
          <span>Run this call?</span>
          <button
            type="button"
            data-testid="approve"
            onClick={() => void onApproval({ id: part.approval!.id, approved: true })}
          >
            Approve
          </button>
          <button
            type="button"
            className="danger"
            data-testid="deny"
            onClick={() => void onApproval({ id: part.approval!.id, approved: false, reason: "denied in the web page" })}
          >
            Deny
          </button>
        </div>
      )}
      {state === "output-available" && (
        <pre className="json output" data-testid="tool-output">
          {pretty(part.output)}
        </pre>
      )}
      {state === "output-error" && <pre className="json output error">{part.errorText}</pre>}
      {state === "output-denied" && <p className="muted">denied{part.approval?.reason ? `: ${part.approval.reason}` : ""}</p>}
    </div>
  );
}

function toolStateLabel(state: string): string {
  switch (state) {
    case "input-streaming":
      return "preparing";
    case "input-available":
      return "running";
    case "approval-requested":
      return "needs approval";
    case "approval-responded":
      return "decided";
    case "output-available":
      return "done";
    case "output-error":
      return "error";
    case "output-denied":
      return "denied";
    default:
      return state;
  }
}

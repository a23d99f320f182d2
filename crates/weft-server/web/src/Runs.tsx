// Past and live runs: the threads list, a thread's runs and checkpoints (fork, export), and
// a run's live event tree with its token and cost totals.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import {
  api,
  formatCost,
  formatTime,
  pretty,
  shortId,
  withToken,
  type LgRun,
  type RunEvent,
  type RunSummary,
  type Thread,
  type ThreadState,
} from "./api";
import { buildTree, type AgentNode, type Item, type ToolItem } from "./eventTree";
import { href, navigate } from "./route";

function useLoad<T>(load: () => Promise<T>, deps: unknown[]): [T | null, string | null, () => void] {
  const [value, setValue] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let cancelled = false;
    setError(null);
    load()
      .then((v) => !cancelled && setValue(v))
      .catch((err: unknown) => !cancelled && setError(err instanceof Error ? err.message : String(err)));
    return () => {
      cancelled = true;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  return [value, error, () => setTick((t) => t + 1)];
}

export function ThreadsPage() {
  const [threads, error, reload] = useLoad(
    () => api.post<Thread[]>("/threads/search", { limit: 100, sort_by: "updated_at", sort_order: "desc" }),
    [],
  );
  return (
    <section>
      <div className="toolbar">
        <h2>Threads</h2>
        <button type="button" onClick={reload}>
          Refresh
        </button>
      </div>
      {error && <p className="error">{error}</p>}
      {threads && threads.length === 0 && <p className="muted">No threads yet.</p>}
      {threads && threads.length > 0 && (
        <table className="list" data-testid="threads">
          <thead>
            <tr>
              <th>thread</th>
              <th>agent</th>
              <th>status</th>
              <th>updated</th>
            </tr>
          </thead>
          <tbody>
            {threads.map((t) => (
              <tr key={t.thread_id}>
                <td>
                  <a href={href({ view: "thread", threadId: t.thread_id })} data-testid="thread-link">
                    {shortId(t.thread_id)}
                  </a>
                </td>
                <td>{String(t.metadata?.assistant_id ?? t.metadata?.graph_id ?? t.metadata?.agent ?? "")}</td>
                <td>
                  <span className={`badge status-${t.status}`}>{t.status}</span>
                </td>
                <td>{formatTime(t.updated_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function ThreadPage({ threadId, defaultAgent }: { threadId: string; defaultAgent: string | null }) {
  const enc = encodeURIComponent(threadId);
  const [thread, threadError] = useLoad(() => api.get<Thread>(`/threads/${enc}`), [threadId]);
  const [runs, runsError, reloadRuns] = useLoad(() => api.get<LgRun[]>(`/threads/${enc}/runs?limit=100`), [threadId]);
  const [history, historyError, reloadHistory] = useLoad(
    () => api.post<ThreadState[]>(`/threads/${enc}/history`, { limit: 100 }),
    [threadId],
  );
  const [forkError, setForkError] = useState<string | null>(null);
  const [forking, setForking] = useState<string | null>(null);

  const fork = async (checkpointId: string) => {
    setForkError(null);
    setForking(checkpointId);
    try {
      const copy = await api.post<Thread>(`/threads/${enc}/copy`, { checkpoint_id: checkpointId });
      navigate({ view: "thread", threadId: copy.thread_id });
    } catch (err) {
      setForkError(err instanceof Error ? err.message : String(err));
    } finally {
      setForking(null);
    }
  };

  // The agent to chat on with: the thread's (its runs'), else the project's default (a fork
  // has no run yet).
  const agent = String(
    thread?.metadata?.assistant_id ?? thread?.metadata?.graph_id ?? runs?.[0]?.assistant_id ?? defaultAgent ?? "",
  );

  return (
    <section data-testid="thread-page" data-thread-id={threadId}>
      <div className="toolbar">
        <h2>
          Thread <code>{shortId(threadId)}</code>
        </h2>
        {thread && <span className={`badge status-${thread.status}`}>{thread.status}</span>}
        {agent && (
          <a href={href({ view: "chat", agent, chatId: threadId })} data-testid="open-chat">
            Open in chat
          </a>
        )}
        <a
          href={withToken(`/threads/${enc}/thread-protocol`)}
          download={`thread-${threadId}.json`}
          data-testid="export"
        >
          Export (ThreadProtocol JSON)
        </a>
        <button
          type="button"
          onClick={() => {
            reloadRuns();
            reloadHistory();
          }}
        >
          Refresh
        </button>
      </div>
      {threadError && <p className="error">{threadError}</p>}
      {thread?.metadata && thread.metadata.forkedFrom != null && (
        <p className="muted" data-testid="forked-from">
          forked from <ForkOrigin origin={thread.metadata.forkedFrom} />
        </p>
      )}

      <h3>Runs</h3>
      {runsError && <p className="error">{runsError}</p>}
      {runs && runs.length === 0 && <p className="muted">No runs.</p>}
      {runs && runs.length > 0 && (
        <table className="list" data-testid="runs">
          <thead>
            <tr>
              <th>run</th>
              <th>agent</th>
              <th>status</th>
              <th>created</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((r) => (
              <tr key={r.run_id}>
                <td>
                  <a href={href({ view: "run", runId: r.run_id })} data-testid="run-link">
                    {shortId(r.run_id)}
                  </a>
                </td>
                <td>{r.assistant_id}</td>
                <td>
                  <span className={`badge status-${r.status}`}>{r.status}</span>
                </td>
                <td>{formatTime(r.created_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <h3>Checkpoints</h3>
      {historyError && <p className="error">{historyError}</p>}
      {forkError && <p className="error">Fork failed: {forkError}</p>}
      {history && history.length === 0 && <p className="muted">No checkpoints.</p>}
      {history && history.length > 0 && (
        <table className="list" data-testid="checkpoints">
          <thead>
            <tr>
              <th>checkpoint</th>
              <th>step</th>
              <th>messages</th>
              <th>created</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {history.map((state, index) => {
              const id = state.checkpoint?.checkpoint_id;
              return (
                <tr key={id ?? index} data-testid="checkpoint">
                  <td>
                    <code>{id ? shortId(id) : "—"}</code>
                  </td>
                  <td>{String(state.metadata?.step ?? "")}</td>
                  <td>
                    <MessagesPreview messages={state.values?.messages} />
                  </td>
                  <td>{formatTime(state.created_at)}</td>
                  <td>
                    {id && (
                      <button type="button" data-testid="fork" disabled={forking !== null} onClick={() => void fork(id)}>
                        {forking === id ? "Forking…" : "Fork"}
                      </button>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** `forkedFrom` metadata: a thread id, or `{thread, checkpoint, step}`. */
function ForkOrigin({ origin }: { origin: unknown }) {
  const record = (typeof origin === "object" && origin !== null ? origin : {}) as Record<string, unknown>;
  const firstString = (...keys: string[]) => {
    for (const key of keys) if (typeof record[key] === "string") return record[key] as string;
    return null;
  };
  const threadId = typeof origin === "string" ? origin : firstString("thread", "threadId", "thread_id");
  const checkpoint = firstString("checkpoint", "checkpointId", "checkpoint_id");
  if (!threadId) return <code>{pretty(origin)}</code>;
  return (
    <>
      <a href={href({ view: "thread", threadId })}>{shortId(threadId)}</a>
      {checkpoint && (
        <>
          {" "}
          at <code>{shortId(checkpoint)}</code>
        </>
      )}
    </>
  );
}

function MessagesPreview({ messages }: { messages: unknown[] | undefined }) {
  if (!Array.isArray(messages) || messages.length === 0) return <span className="muted">0</span>;
  const last = messages[messages.length - 1] as { content?: unknown; type?: string; role?: string };
  const content = typeof last.content === "string" ? last.content : pretty(last.content ?? "");
  return (
    <span title={content}>
      {messages.length} · <span className="muted">{(last.type ?? last.role ?? "") + ": "}</span>
      {content.length > 60 ? `${content.slice(0, 60)}…` : content}
    </span>
  );
}

export function RunPage({ runId }: { runId: string }) {
  const enc = encodeURIComponent(runId);
  const [summary, summaryError, reloadSummary] = useLoad(() => api.get<RunSummary>(`/api/runs/${enc}`), [runId]);
  const [events, setEvents] = useState<RunEvent[]>([]);
  const [live, setLive] = useState<"connecting" | "live" | "ended" | "error">("connecting");
  // Bumped to follow the run again after its last event: a run that suspended for a decision
  // ends one drive with `run_end` and goes on (same run) once the decision is taken.
  const [drive, setDrive] = useState(0);
  const lastSeq = useRef(0);

  useEffect(() => {
    setEvents([]);
    lastSeq.current = 0;
  }, [enc]);

  useEffect(() => {
    setLive("connecting");
    const after = lastSeq.current;
    const source = new EventSource(withToken(`/api/runs/${enc}/events${after > 0 ? `?after=${after}` : ""}`));
    let ended = false;
    const onEvent = (message: MessageEvent<string>) => {
      let event: RunEvent;
      try {
        event = JSON.parse(message.data) as RunEvent;
      } catch {
        return;
      }
      if (typeof event.seq === "number") {
        if (event.seq <= lastSeq.current) return;
        lastSeq.current = event.seq;
      }
      setLive("live");
      setEvents((previous) => [...previous, event]);
      if (event.type === "run_end") {
        ended = true;
        setLive("ended");
        source.close();
      }
    };
    // The server names each SSE event after the RunEvent type; listen to every name we draw
    // and to unnamed messages.
    source.onmessage = onEvent;
    for (const type of EVENT_TYPES) source.addEventListener(type, onEvent as EventListener);
    source.onopen = () => setLive("live");
    source.onerror = () => {
      if (ended) return;
      if (source.readyState === EventSource.CLOSED) setLive("error");
    };
    return () => source.close();
  }, [enc, drive]);

  // After a drive ends (and when a decision shows up) read the run's record; a run that went
  // on since (decided and resumed) is followed again from where its events stopped.
  const decisionsSeen = events.filter((e) => e.type === "decision_pending" || e.type === "decision").length;
  useEffect(() => {
    if (live === "ended" || decisionsSeen > 0) reloadSummary();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [live, decisionsSeen]);
  const lastEnd = [...events].reverse().find((e) => e.type === "run_end");
  const endedAs = lastEnd ? String(lastEnd.payload?.status ?? "") : "";
  useEffect(() => {
    if (live !== "ended" || !summary) return;
    const goesOn = summary.status === "running" || (endedAs !== summary.status && summary.status !== "interrupted");
    if (goesOn) setDrive((d) => d + 1);
  }, [live, summary, endedAs]);
  // While the run waits for a decision, look again now and then (someone may decide it
  // elsewhere: the chat, `weft approve`).
  useEffect(() => {
    if (live !== "ended" || endedAs !== "suspended") return;
    const timer = window.setInterval(reloadSummary, 3000);
    return () => window.clearInterval(timer);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [live, endedAs]);

  const tree = useMemo(() => buildTree(events), [events]);
  const usage = summary?.usage;
  const inputTokens = Math.max(tree.totals.inputTokens, usage?.inputTokens ?? 0);
  const outputTokens = Math.max(tree.totals.outputTokens, usage?.outputTokens ?? 0);
  const cost = tree.totals.cost ?? usage?.cost ?? null;

  const decide = useCallback(
    async (decisionId: string, approve: boolean) => {
      await api.post(`/api/runs/${enc}/decisions/${encodeURIComponent(decisionId)}`, { approve });
      reloadSummary();
      setDrive((d) => d + 1);
    },
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [enc],
  );

  return (
    <section data-testid="run-page">
      <div className="toolbar">
        <h2>
          Run <code>{shortId(runId)}</code>
        </h2>
        <span className={`badge status-${tree.totals.status ?? summary?.status}`} data-testid="run-status">
          {tree.totals.status ?? summary?.status ?? "…"}
        </span>
        <span className="muted" data-testid="events-state" data-state={live}>
          events: {live}
        </span>
        {summary && (
          <a href={href({ view: "thread", threadId: summary.threadId })} data-testid="run-thread">
            thread {shortId(summary.threadId)}
          </a>
        )}
      </div>
      {summaryError && <p className="error">{summaryError}</p>}
      <div className="totals" data-testid="totals">
        <div>
          <span className="label">agent</span>
          {summary?.agent ?? tree.roots[0]?.agentId ?? ""}
        </div>
        <div>
          <span className="label">steps</span>
          {Math.max(tree.totals.steps, summary?.steps ?? 0)}
        </div>
        <div>
          <span className="label">input tokens</span>
          <span data-testid="input-tokens">{inputTokens}</span>
        </div>
        <div>
          <span className="label">output tokens</span>
          <span data-testid="output-tokens">{outputTokens}</span>
        </div>
        <div>
          <span className="label">total</span>
          {inputTokens + outputTokens}
        </div>
        <div>
          <span className="label">cost</span>
          <span data-testid="cost">{formatCost(cost)}</span>
        </div>
      </div>
      {summary && summary.pendingDecisions.length > 0 && (
        <div className="pending" data-testid="pending-decisions">
          <h3>Waiting for a decision</h3>
          {summary.pendingDecisions.map((d) => (
            <div key={d.id} className="tool tool-approval-requested">
              <div className="tool-head">
                <span className="tool-name">{d.tool}</span>
                <span className="badge state-approval-requested">{d.kind}</span>
              </div>
              <pre className="json">{pretty(d.arguments)}</pre>
              {d.reason && <p className="muted">{d.reason}</p>}
              <div className="approval">
                <button type="button" onClick={() => void decide(d.id, true)}>
                  Approve
                </button>
                <button type="button" className="danger" onClick={() => void decide(d.id, false)}>
                  Deny
                </button>
              </div>
            </div>
          ))}
        </div>
      )}
      <div className="tree" data-testid="run-tree">
        {tree.roots.length === 0 && <p className="muted">No events yet.</p>}
        {tree.roots.map((node) => (
          <AgentView key={node.path} node={node} />
        ))}
      </div>
    </section>
  );
}

const EVENT_TYPES = [
  "run_start",
  "recovery",
  "session_start",
  "routing",
  "side_turn_start",
  "turn_start",
  "text_delta",
  "reasoning_delta",
  "tool_call_start",
  "tool_call_replayed",
  "tool_call_refused",
  "tool_call_retry",
  "decision_pending",
  "decision",
  "tool_call_end",
  "turn_end",
  "checkpoint",
  "status",
  "handoff",
  "side_turn_end",
  "completion_gates",
  "mcp_tools_changed",
  "completion",
  "error",
  "session_end",
  "run_end",
];

function AgentView({ node }: { node: AgentNode }) {
  const depth = node.path.split("/").length - 1;
  return (
    <div className="agent-node" data-testid="agent-node" data-agent-path={node.path} data-depth={depth}>
      <div className="agent-head">
        <span className="agent-name">{node.agentId}</span>
        {depth > 0 && <span className="muted"> sub-agent · {node.path}</span>}
      </div>
      <div className="agent-items">
        {node.items.map((item, index) => (
          <ItemView key={index} item={item} />
        ))}
      </div>
    </div>
  );
}

function ItemView({ item }: { item: Item }) {
  switch (item.kind) {
    case "agent":
      return <AgentView node={item} />;
    case "text":
      return item.reasoning ? (
        <details className="reasoning">
          <summary>reasoning</summary>
          <div className="text">{item.text}</div>
        </details>
      ) : (
        <div className="text" data-testid="run-text">
          {item.text}
        </div>
      );
    case "note":
      return (
        <div className={`note note-${item.type}`} data-testid="run-note">
          {item.text}
        </div>
      );
    case "tool":
      return <ToolView item={item} />;
  }
}

function ToolView({ item }: { item: ToolItem }) {
  return (
    <div className={`tool call-${item.state}`} data-testid="run-tool" data-tool={item.tool} data-state={item.state}>
      <div className="tool-head">
        <span className="tool-name">{item.tool}</span>
        <span className={`badge call-${item.state}`}>{item.state}</span>
        {item.decision?.approved !== undefined && (
          <span className="muted">{item.decision.approved ? "approved" : "denied"}</span>
        )}
      </div>
      {item.arguments !== undefined && <pre className="json">{pretty(item.arguments)}</pre>}
      {item.note && <p className="muted">{item.note}</p>}
      {item.children.length > 0 && (
        <div className="children">
          {item.children.map((child) => (
            <AgentView key={child.path} node={child} />
          ))}
        </div>
      )}
      {item.result !== undefined && <pre className="json output">{pretty(item.result)}</pre>}
    </div>
  );
}

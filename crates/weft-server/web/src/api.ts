// The page's side of the `weft serve` HTTP contract: the token, authenticated fetches and
// the shapes of the JSON it reads.

const TOKEN_KEY = "weft_token";

/** Reads `?token=` from the page's URL once (keeping it in sessionStorage, then dropping it
 * from the address bar) and returns the token for this tab, if any. */
export function initToken(): string | null {
  const url = new URL(window.location.href);
  const fromUrl = url.searchParams.get("token");
  if (fromUrl) {
    try {
      sessionStorage.setItem(TOKEN_KEY, fromUrl);
    } catch {
      // storage disabled: the cookie the server set still authenticates
    }
    url.searchParams.delete("token");
    window.history.replaceState(null, "", url.pathname + url.search + url.hash);
    return fromUrl;
  }
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

let token: string | null = null;

export function setToken(value: string | null) {
  token = value;
}

export function getToken(): string | null {
  return token;
}

/** Headers every request carries (the cookie is sent too: belt and braces). */
export function authHeaders(): Record<string, string> {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** A URL for a GET the browser makes itself (EventSource, a download link): these cannot set
 * headers, so the token rides in the query. */
export function withToken(path: string): string {
  if (!token) return path;
  const sep = path.includes("?") ? "&" : "?";
  return `${path}${sep}token=${encodeURIComponent(token)}`;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { ...authHeaders(), Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let json: unknown = null;
  if (text) {
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
  }
  if (!response.ok) {
    const err = (json as { error?: { code?: string; message?: string } } | null)?.error;
    throw new ApiError(
      response.status,
      err?.code ?? String(response.status),
      err?.message ?? (text || response.statusText),
    );
  }
  return json as T;
}

export const api = {
  get: <T>(path: string) => request<T>("GET", path),
  post: <T>(path: string, body: unknown = {}) => request<T>("POST", path, body),
};

export interface AgentInfo {
  name: string;
  kind: "ai_human" | "dual_ai";
  description?: string;
}

export interface ServerInfo {
  project: string;
  version: string;
  defaultAgent: string | null;
  agents: AgentInfo[];
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  cost: number | null;
}

export interface PendingDecision {
  id: string;
  kind: string;
  tool: string;
  arguments: unknown;
  toolCallId: string | null;
  reason: string | null;
}

export interface RunSummary {
  runId: string;
  threadId: string;
  agent: string;
  status: string;
  createdAt: string;
  updatedAt: string;
  steps: number;
  usage: Usage;
  error: string | null;
  pendingDecisions: PendingDecision[];
}

/** A LangGraph thread, as `POST /threads/search` returns it. */
export interface Thread {
  thread_id: string;
  created_at: string;
  updated_at: string;
  status: string;
  metadata: Record<string, unknown> | null;
  values?: { messages?: unknown[] } | null;
  interrupts?: unknown;
}

/** A LangGraph run, as `GET /threads/{id}/runs` returns it. */
export interface LgRun {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  created_at: string;
  updated_at: string;
  status: string;
  metadata?: Record<string, unknown> | null;
}

/** One state of `POST /threads/{id}/history` (one per checkpoint). */
export interface ThreadState {
  values: { messages?: unknown[] } | null;
  next: string[];
  checkpoint: { thread_id: string; checkpoint_ns?: string; checkpoint_id: string } | null;
  metadata: Record<string, unknown> | null;
  created_at: string | null;
  parent_checkpoint?: { checkpoint_id: string } | null;
}

/** A run event (docs/events.md). */
export interface RunEvent {
  seq: number;
  id: string;
  timestamp: string;
  runId: string;
  agentId: string;
  agentPath: string;
  type: string;
  turn: number;
  toolCallId?: string | null;
  payload: Record<string, unknown>;
}

export function formatCost(cost: number | null | undefined): string {
  if (cost === null || cost === undefined) return "unknown";
  if (cost === 0) return "$0";
  return cost < 0.01 ? `$${cost.toFixed(6)}` : `$${cost.toFixed(4)}`;
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return date.toLocaleString();
}

export function shortId(id: string): string {
  return id.length > 12 ? `${id.slice(0, 8)}…` : id;
}

export function pretty(value: unknown): string {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

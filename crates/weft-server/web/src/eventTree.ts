// Folds a run's events (docs/events.md) into the tree the run view draws: one node per agent
// (`agentPath`), its text, notes and tool calls in order, and each sub-agent nested under the
// tool call that was running in its parent when the sub-agent's first event came.
import type { RunEvent } from "./api";

export type ToolState = "running" | "pending" | "done" | "error" | "refused" | "denied" | "replayed";

export interface ToolItem {
  kind: "tool";
  id: string;
  tool: string;
  arguments: unknown;
  state: ToolState;
  result?: unknown;
  decision?: { id: string; kind?: string; reason?: string | null; approved?: boolean };
  note?: string;
  children: AgentNode[];
}

export interface TextItem {
  kind: "text";
  text: string;
  reasoning: boolean;
}

export interface NoteItem {
  kind: "note";
  type: string;
  text: string;
}

export type Item = ToolItem | TextItem | NoteItem | AgentNode;

export interface AgentNode {
  kind: "agent";
  path: string;
  agentId: string;
  items: Item[];
}

export interface Totals {
  inputTokens: number;
  outputTokens: number;
  cost: number | null;
  steps: number;
  status: string | null;
}

export interface RunTree {
  roots: AgentNode[];
  totals: Totals;
  lastSeq: number;
}

export function emptyTree(): RunTree {
  return { roots: [], totals: { inputTokens: 0, outputTokens: 0, cost: null, steps: 0, status: null }, lastSeq: 0 };
}

/** Builds the tree from events in `seq` order (duplicates and replays of older seqs are skipped). */
export function buildTree(events: RunEvent[]): RunTree {
  const tree = emptyTree();
  const agents = new Map<string, AgentNode>();
  const tools = new Map<string, ToolItem>();

  const agentNode = (path: string, agentId: string): AgentNode => {
    const known = agents.get(path);
    if (known) return known;
    const node: AgentNode = { kind: "agent", path, agentId, items: [] };
    agents.set(path, node);
    const cut = path.lastIndexOf("/");
    if (cut < 0) {
      tree.roots.push(node);
    } else {
      const parentPath = path.slice(0, cut);
      const parent = agentNode(parentPath, parentPath.slice(parentPath.lastIndexOf("/") + 1));
      const openCall = findOpenCall(parent, node.agentId);
      if (openCall) openCall.children.push(node);
      else parent.items.push(node);
    }
    return node;
  };

  for (const event of events) {
    if (typeof event.seq === "number") {
      if (event.seq <= tree.lastSeq) continue;
      tree.lastSeq = event.seq;
    }
    const path = event.agentPath || event.agentId || "agent";
    const node = agentNode(path, event.agentId || path.slice(path.lastIndexOf("/") + 1));
    const p = event.payload ?? {};
    const callKey = `${path}\u0000${event.toolCallId ?? ""}`;
    const call = (): ToolItem => {
      let item = tools.get(callKey);
      if (!item) {
        item = {
          kind: "tool",
          id: event.toolCallId ?? "",
          tool: str(p.tool) ?? "tool",
          arguments: p.arguments,
          state: "running",
          children: [],
        };
        tools.set(callKey, item);
        node.items.push(item);
      }
      return item;
    };

    switch (event.type) {
      case "text_delta":
      case "reasoning_delta": {
        const reasoning = event.type === "reasoning_delta";
        const text = str(p.text) ?? "";
        const last = node.items[node.items.length - 1];
        if (last && last.kind === "text" && last.reasoning === reasoning) last.text += text;
        else node.items.push({ kind: "text", text, reasoning });
        break;
      }
      case "tool_call_start": {
        const item = call();
        item.tool = str(p.tool) ?? item.tool;
        if (p.arguments !== undefined) item.arguments = p.arguments;
        if (item.state === "pending" || item.state === "running") item.state = "running";
        break;
      }
      case "decision_pending": {
        const item = call();
        item.state = "pending";
        if (p.arguments !== undefined) item.arguments = p.arguments;
        item.decision = { id: str(p.decision) ?? "", kind: str(p.kind), reason: str(p.reason) ?? null };
        break;
      }
      case "decision": {
        const item = call();
        const approved = p.approved === true;
        item.decision = { ...(item.decision ?? { id: str(p.decision) ?? "" }), approved, reason: str(p.reason) ?? null };
        item.state = approved ? "running" : "denied";
        break;
      }
      case "tool_call_refused": {
        const item = call();
        item.state = "refused";
        if (p.arguments !== undefined) item.arguments = p.arguments;
        item.note = [str(p.stage), str(p.reason)].filter(Boolean).join(": ");
        break;
      }
      case "tool_call_replayed": {
        const item = call();
        item.state = p.isError === true ? "error" : "replayed";
        break;
      }
      case "tool_call_retry": {
        const item = call();
        item.note = `retry ${String(p.attempt ?? "")}: ${str(p.error) ?? ""}`;
        break;
      }
      case "tool_call_end": {
        const item = call();
        item.result = p.result !== undefined ? p.result : p.resultRef !== undefined ? { resultRef: p.resultRef, resultBytes: p.resultBytes } : undefined;
        item.state = p.isError === true ? "error" : item.state === "denied" ? "denied" : "done";
        break;
      }
      case "turn_end": {
        if (typeof p.runInputTokens === "number") tree.totals.inputTokens = p.runInputTokens;
        if (typeof p.runOutputTokens === "number") tree.totals.outputTokens = p.runOutputTokens;
        if (typeof p.cost === "number") tree.totals.cost = p.cost;
        if (path.indexOf("/") < 0) tree.totals.steps = Math.max(tree.totals.steps, event.turn ?? 0);
        break;
      }
      case "run_end": {
        tree.totals.status = str(p.status) ?? tree.totals.status;
        if (typeof p.inputTokens === "number") tree.totals.inputTokens = p.inputTokens;
        if (typeof p.outputTokens === "number") tree.totals.outputTokens = p.outputTokens;
        if (typeof p.cost === "number") tree.totals.cost = p.cost;
        if (typeof p.steps === "number") tree.totals.steps = p.steps;
        node.items.push({ kind: "note", type: event.type, text: [str(p.status), str(p.error)].filter(Boolean).join(": ") });
        break;
      }
      case "run_start":
        tree.totals.status = "running";
        node.items.push({ kind: "note", type: event.type, text: `run started (${str(p.agent) ?? event.agentId})` });
        break;
      case "completion": {
        // The summary is usually the answer just streamed: shown only when it says more.
        const summary = str(p.summary);
        const last = node.items[node.items.length - 1];
        if (summary && !(last && last.kind === "text" && last.text.trim() === summary.trim())) {
          node.items.push({ kind: "note", type: event.type, text: summary });
        }
        break;
      }
      case "error":
        node.items.push({ kind: "note", type: event.type, text: str(p.message) ?? "error" });
        break;
      case "handoff":
        node.items.push({ kind: "note", type: event.type, text: `handoff ${str(p.from) ?? ""} → ${str(p.to) ?? ""}` });
        break;
      case "status":
        node.items.push({ kind: "note", type: event.type, text: str(p.message) ?? "" });
        break;
      case "recovery":
        node.items.push({ kind: "note", type: event.type, text: "resumed" });
        break;
      default:
        break;
    }
  }
  return tree;
}

/** The call a sub-agent belongs to: the latest call of its parent still running, one named
 * after the sub-agent first. */
function findOpenCall(parent: AgentNode, childId: string): ToolItem | undefined {
  let fallback: ToolItem | undefined;
  for (let i = parent.items.length - 1; i >= 0; i--) {
    const item = parent.items[i];
    if (item.kind !== "tool" || (item.state !== "running" && item.state !== "pending")) continue;
    if (item.tool === childId) return item;
    fallback ??= item;
  }
  return fallback;
}

function str(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

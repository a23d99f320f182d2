// Hash routes, so a reload keeps the view (and the chat id) and the server only serves `/`.
import { useEffect, useState } from "react";

export type Route =
  | { view: "chat"; agent: string | null; chatId: string | null }
  | { view: "threads" }
  | { view: "thread"; threadId: string }
  | { view: "run"; runId: string };

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  switch (parts[0]) {
    case "threads":
      return parts[1] ? { view: "thread", threadId: parts[1] } : { view: "threads" };
    case "runs":
      return parts[1] ? { view: "run", runId: parts[1] } : { view: "threads" };
    case "chat":
      return { view: "chat", agent: parts[1] ?? null, chatId: parts[2] ?? null };
    default:
      return { view: "chat", agent: null, chatId: null };
  }
}

export function href(route: Route): string {
  const enc = encodeURIComponent;
  switch (route.view) {
    case "threads":
      return "#/threads";
    case "thread":
      return `#/threads/${enc(route.threadId)}`;
    case "run":
      return `#/runs/${enc(route.runId)}`;
    case "chat":
      if (!route.agent) return "#/chat";
      return route.chatId ? `#/chat/${enc(route.agent)}/${enc(route.chatId)}` : `#/chat/${enc(route.agent)}`;
  }
}

export function navigate(route: Route, replace = false) {
  const target = href(route);
  if (replace) {
    window.history.replaceState(null, "", window.location.pathname + window.location.search + target);
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  } else {
    window.location.hash = target;
  }
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener("hashchange", onChange);
    return () => window.removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

export function newChatId(): string {
  if (typeof crypto !== "undefined" && "randomUUID" in crypto) return crypto.randomUUID();
  return `chat-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

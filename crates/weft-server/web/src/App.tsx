// The page's shell: the project's name, the two views (Chat, Runs) and the hash router.
import { useEffect, useState } from "react";
import { ApiError, api, type ServerInfo } from "./api";
import { ChatPage } from "./Chat";
import { RunPage, ThreadPage, ThreadsPage } from "./Runs";
import { href, navigate, newChatId, useRoute } from "./route";

export function App() {
  const route = useRoute();
  const [info, setInfo] = useState<ServerInfo | null>(null);
  const [error, setError] = useState<{ status: number; message: string } | null>(null);

  useEffect(() => {
    api
      .get<ServerInfo>("/api/info")
      .then(setInfo)
      .catch((err: unknown) =>
        setError({
          status: err instanceof ApiError ? err.status : 0,
          message: err instanceof Error ? err.message : String(err),
        }),
      );
  }, []);

  // A chat route without an agent or an id gets them (the default agent, a new chat id), in
  // place, so a reload keeps this chat.
  useEffect(() => {
    if (!info || route.view !== "chat") return;
    const agent = route.agent ?? info.defaultAgent ?? info.agents[0]?.name ?? null;
    if (agent && (!route.agent || !route.chatId)) {
      navigate({ view: "chat", agent, chatId: route.chatId ?? newChatId() }, true);
    }
  }, [info, route]);

  const chatActive = route.view === "chat";
  return (
    <div className="app">
      <header>
        <span className="brand">weft</span>
        {info && <span className="project" data-testid="project">{info.project}</span>}
        <nav>
          <a className={chatActive ? "active" : ""} href={chatActive ? window.location.hash : "#/chat"}>
            Chat
          </a>
          <a className={!chatActive ? "active" : ""} href={href({ view: "threads" })} data-testid="nav-runs">
            Runs
          </a>
        </nav>
        {info && <span className="muted version">v{info.version}</span>}
      </header>
      <main>
        {error && (
          <div className="error">
            {error.status === 401 || error.status === 403
              ? "Not authorized: open the URL `weft serve` printed (it carries ?token=…)."
              : `Cannot reach the server: ${error.message}`}
          </div>
        )}
        {!info && !error && <p className="muted">Loading…</p>}
        {info && route.view === "chat" && route.agent && route.chatId && (
          <ChatPage agents={info.agents} agent={route.agent} chatId={route.chatId} />
        )}
        {info && route.view === "chat" && info.agents.length === 0 && <p className="muted">This project has no agents.</p>}
        {info && route.view === "threads" && <ThreadsPage />}
        {info && route.view === "thread" && <ThreadPage
            key={route.threadId}
            threadId={route.threadId}
            defaultAgent={info.defaultAgent ?? info.agents[0]?.name ?? null}
          />}
        {info && route.view === "run" && <RunPage key={route.runId} runId={route.runId} />}
      </main>
    </div>
  );
}

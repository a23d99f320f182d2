"""The real LangGraph SDK client (langgraph-sdk, from PyPI) against `weft serve`'s run API.

Usage: client.py BASE_URL API_KEY. The project served has three agents: `chat` (answers
"hello one", "hello two", ... in turn), `slow` (its model waits a minute: a run to cancel)
and `approver` (calls write_file, which requires approval, then answers "written").
Exits non-zero (an AssertionError) when anything differs from what the SDK should see.
"""

import asyncio
import json
import sys

from langgraph_sdk import get_client


def user(text):
    return {"messages": [{"role": "user", "content": text}]}


def show(label, part):
    print(label, part.id, part.event, json.dumps(part.data)[:160], flush=True)


async def main(url, api_key):
    # The SDK sends the key as `x-api-key`.
    client = get_client(url=url, api_key=api_key)

    assistants = await client.assistants.search()
    names = {a["assistant_id"] for a in assistants}
    assert {"chat", "slow", "approver"} <= names, names
    assistant = await client.assistants.get("chat")
    assert assistant["graph_id"] == "chat", assistant

    # Create a thread.
    thread = await client.threads.create(metadata={"user": "sdk"})
    thread_id = thread["thread_id"]
    assert thread["status"] == "idle", thread

    # Stream a run.
    parts = []
    async for part in client.runs.stream(
        thread_id,
        "chat",
        input=user("hi"),
        stream_mode=["updates", "messages-tuple", "values"],
    ):
        show("stream", part)
        parts.append(part)
    assert parts[0].event == "metadata", parts[0]
    run_id = parts[0].data["run_id"]
    said = "".join(p.data[0]["content"] for p in parts if p.event == "messages")
    assert said == "hello one", said
    updates = [p for p in parts if p.event == "updates"]
    assert updates[0].data["chat"]["messages"][0]["content"] == "hello one", updates
    values = [p for p in parts if p.event == "values"]
    assert values[-1].data["messages"][-1]["content"] == "hello one", values[-1]
    ids = [int(p.id) for p in parts if p.id]
    assert ids == sorted(ids) and len(ids) >= 3, ids

    # Join the run's stream from an event in the middle: only later events come.
    middle = ids[len(ids) // 2]
    joined = []
    async for part in client.runs.join_stream(
        thread_id,
        run_id,
        stream_mode=["updates", "values"],
        last_event_id=str(middle),
    ):
        show("join", part)
        joined.append(part)
    later = [int(p.id) for p in joined if p.id]
    assert later and all(i > middle for i in later), (middle, later)
    assert joined[-1].event == "end", joined[-1]

    # Wait on a run: the thread's final values.
    values = await client.runs.wait(thread_id, "chat", input=user("again"))
    assert [m["content"] for m in values["messages"]] == [
        "hi",
        "hello one",
        "again",
        "hello two",
    ], values

    # A background run, joined.
    run = await client.runs.create(thread_id, "chat", input=user("more"))
    assert run["status"] in ("pending", "running", "success"), run
    final = await client.runs.join(thread_id, run["run_id"])
    assert final["messages"][-1]["content"] == "hello three", final
    listed = await client.runs.list(thread_id)
    assert len(listed) == 3, listed
    history = await client.threads.get_history(thread_id, limit=100)
    assert len(history) >= 3, history
    assert history[0]["checkpoint"]["checkpoint_id"], history[0]
    state = await client.threads.get_state(thread_id)
    assert state["values"]["messages"][-1]["content"] == "hello three", state
    found = await client.threads.search(metadata={"user": "sdk"})
    assert [t["thread_id"] for t in found] == [thread_id], found

    # Cancel a run.
    other = await client.threads.create()
    slow = await client.runs.create(other["thread_id"], "slow", input=user("slowly"))
    busy = await client.threads.get(other["thread_id"])
    assert busy["status"] == "busy", busy
    await client.runs.cancel(other["thread_id"], slow["run_id"], wait=True)
    cancelled = await client.runs.get(other["thread_id"], slow["run_id"])
    assert cancelled["status"] == "interrupted", cancelled
    idle = await client.threads.get(other["thread_id"])
    assert idle["status"] == "idle", idle

    # Resume with decisions: Command(resume=...) keyed by the interrupt's id.
    third = await client.threads.create()
    third_id = third["thread_id"]
    waiting = await client.runs.wait(third_id, "approver", input=user("write it"))
    interrupts = waiting["__interrupt__"]
    assert interrupts[0]["value"]["tool"] == "write_file", interrupts
    interrupted = await client.threads.get(third_id)
    assert interrupted["status"] == "interrupted", interrupted
    state = await client.threads.get_state(third_id)
    assert state["interrupts"][0]["id"] == interrupts[0]["id"], state
    resumed = []
    async for part in client.runs.stream(
        third_id,
        "approver",
        command={"resume": {interrupts[0]["id"]: {"approve": True}}},
        stream_mode=["messages-tuple", "updates"],
    ):
        show("resume", part)
        resumed.append(part)
    tool = [p for p in resumed if p.event == "messages" and p.data[0]["type"] == "tool"]
    assert tool and tool[0].data[0]["tool_call_id"] == "w1", resumed
    said = "".join(
        p.data[0]["content"]
        for p in resumed
        if p.event == "messages" and p.data[0]["type"] == "AIMessageChunk"
    )
    assert said == "written", said
    done = await client.threads.get(third_id)
    assert done["status"] == "idle", done
    assert done["values"]["messages"][-1]["content"] == "written", done

    await client.threads.delete(other["thread_id"])
    print("langgraph-sdk client: all checks passed", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))

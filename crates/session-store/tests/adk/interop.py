"""Interop check: the Rust `compaction` binary against real Google ADK session services.

Run by `cargo xtask adk-interop` (and `cargo xtask verify`) inside a virtual environment
with google-adk==2.13.0, sqlalchemy[asyncio] and aiosqlite:

    python interop.py --binary target/debug/compaction --workdir DIR

For each of ADK's two SQLite layouts (DatabaseSessionService schema v1 and
SqliteSessionService) it:
  1. builds a session with ADK's own service: user turns, tool calls and responses, events of
     an isolated sub-agent scope, model responses with usage;
  2. keeps a session object loaded before the Rust write;
  3. runs `compaction evaluate` on the file, with the decision and summarizer models served by
     local mock servers on 127.0.0.1 (no network);
  4. reloads the session with ADK and checks, through ADK's own prompt-content builder
     (google.adk.flows.llm_flows.context._contents._get_contents), that the summary comes
     first, the covered turns are gone, the last K turns are verbatim and the scoped events
     (and the scoped agent's view) are untouched;
  5. checks that the session object loaded before the Rust write fails its next append with
     StaleSessionError, and that ADK keeps appending to a freshly loaded session;
  6. runs `compaction inspect` on the file.
Then, on each layout, two sessions built by ADK's own `Runner` around a mock `BaseLlm`:
  7. ADK's own sliding-window compaction (`EventsCompactionConfig(compaction_interval=3,
     overlap_size=1)`, `LlmEventSummarizer`) leaves two overlapping summaries (turns 1-3 and
     3-6) that ADK's prompt builder both renders; `compaction inspect` shows exactly what ADK
     shows; `compaction evaluate` folds both (and turns 7-8) into one summary starting at
     turn 1, after which ADK renders that one summary and turns 9-10;
  8. a pipeline scope written without a `finish_task` closure makes the Runner file the next
     user messages inside the scope: `evaluate` and `inspect` warn and name `finish_task`; a
     scope closed with `finish_task` gets no warning.
With `--postgres-url URL` it runs steps 1-8 once more on DatabaseSessionService over
PostgreSQL (`postgresql+asyncpg://`, in a fresh database created for the run and dropped after
it), with `compaction evaluate`/`inspect --db postgres://…` on that database, and checks that
the tables ADK created there match `tests/fixtures/adk-database-v1-postgres.sql` (the DDL the
Rust tests load): columns with their types, constraints and indexes.
Exits non-zero with a message on the first failed check.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from typing import AsyncGenerator

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context._contents import _get_contents
from google.adk.sessions._rewind_utils import rewind_session
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

APP = "zocrates"
USER = "u1"
SESSION = "s1"
COORDINATOR = "coordinator"
SCOPED = "SCOPED-PIPELINE-PAYLOAD"
SUMMARY = "## Comprehensive Conversation Summary\nADK-INTEROP-SUMMARY: turns 1-4 consolidated."
TURNS = 6
RETAINED = 2  # the spec default K (adaptive_compaction_retention_turns)
DECISION_PATH = "/api/alpha/decisions"


class Failure(Exception):
    """A failed interop check."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)


# --- mock models -----------------------------------------------------------------------------


class MockModels(http.server.BaseHTTPRequestHandler):
    """The Decisions API and an OpenAI-style chat-completions endpoint, on one port."""

    calls: list[str] = []
    bodies: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length", "0"))
        MockModels.bodies.append(self.rfile.read(length).decode())
        MockModels.calls.append(self.path)
        if self.path.endswith("/chat/completions"):
            body = {
                "id": "mock",
                "model": "mock-summarizer",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": SUMMARY},
                    }
                ],
                "usage": {"prompt_tokens": 900, "completion_tokens": 120, "total_tokens": 1020},
            }
        elif self.path == DECISION_PATH:
            body = {
                "answers": {"compaction_warranted": {"type": "noul", "noul": 0.95}},
                "usage": {"prompt_tokens": 310},
            }
        else:
            self.send_response(404)
            self.end_headers()
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def start_mock() -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), MockModels)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    return server, f"http://{host}:{port}"


def write_config(workdir: Path, base_url: str) -> Path:
    config = {
        "enable_adaptive_compaction": True,
        "decision_adapter": "decisions",
        "decision_api_base_url": base_url,
        "decision_api_path": DECISION_PATH,
        "decision_api_key_env": "ADK_INTEROP_DECISION_KEY",
        "summarizer_adapter": "chat",
        "summarizer_base_url": f"{base_url}/v1",
        "summarizer_api_key_env": "ADK_INTEROP_SUMMARIZER_KEY",
        "summarizer_timeout_secs": 10,
    }
    path = workdir / "zocrates_config.json"
    path.write_text(json.dumps(config, indent=2))
    return path


# --- the session ADK builds --------------------------------------------------------------------


def user_text(i: int) -> str:
    return f"Question {i}: what limits SEI growth in cell {i}?"


def answer_text(i: int) -> str:
    return f"Answer {i}: a passivation layer of {i}.5 nm."


def turn_events(i: int, t0: float) -> list[Event]:
    """One turn; odd turns call a tool whose search pipeline runs in an isolated scope."""
    inv = f"inv-{i}"
    ts = t0 + i * 10.0
    events = [
        Event(
            id=f"u-{i}",
            invocation_id=inv,
            author="user",
            timestamp=ts,
            content=types.Content(role="user", parts=[types.Part(text=user_text(i))]),
        )
    ]
    if i % 2 == 1:
        fc = f"fc-{i}"
        events += [
            Event(
                id=f"call-{i}",
                invocation_id=inv,
                author=COORDINATOR,
                timestamp=ts + 1,
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(
                            function_call=types.FunctionCall(
                                id=fc, name="search_library", args={"query": f"q{i}"}
                            )
                        )
                    ],
                ),
            ),
            Event(
                id=f"scoped-a-{i}",
                invocation_id=inv,
                author="search_agent",
                timestamp=ts + 2,
                isolation_scope=fc,
                content=types.Content(
                    role="model", parts=[types.Part(text=f"{SCOPED} step {i}")]
                ),
            ),
            Event(
                id=f"scoped-b-{i}",
                invocation_id=inv,
                author="search_agent",
                timestamp=ts + 3,
                isolation_scope=fc,
                content=types.Content(
                    role="model", parts=[types.Part(text=f"{SCOPED} chunk {i}")]
                ),
            ),
            Event(
                id=f"resp-{i}",
                invocation_id=inv,
                author=COORDINATOR,
                timestamp=ts + 4,
                content=types.Content(
                    role="user",
                    parts=[
                        types.Part(
                            function_response=types.FunctionResponse(
                                id=fc,
                                name="search_library",
                                response={"result": f"Synthesis {i}. doi:10.1000/adk.{i}"},
                            )
                        )
                    ],
                ),
            ),
        ]
    events.append(
        Event(
            id=f"a-{i}",
            invocation_id=inv,
            author=COORDINATOR,
            timestamp=ts + 5,
            content=types.Content(role="model", parts=[types.Part(text=answer_text(i))]),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=40_000 + 1_000 * i,
                candidates_token_count=200,
                total_token_count=40_200 + 1_000 * i,
            ),
        )
    )
    return events


def texts(contents: list[types.Content]) -> list[str]:
    return [p.text for c in contents for p in (c.parts or []) if p.text]


def dump(contents: list[types.Content]) -> list[dict]:
    return [c.model_dump(mode="json", exclude_none=True) for c in contents]


# --- one layout --------------------------------------------------------------------------------


def run_binary(binary: str, args: list[str], env: dict[str, str]) -> str:
    out = subprocess.run(
        [binary, *args], capture_output=True, text=True, env=env, timeout=120
    )
    if out.returncode != 0:
        raise Failure(
            f"`compaction {' '.join(args)}` exited {out.returncode}\n"
            f"stdout: {out.stdout}\nstderr: {out.stderr}"
        )
    return out.stdout


async def interop(label: str, service, db: Path | str, binary: str, config: Path) -> None:
    print(f"[{label}] building the session with ADK", flush=True)
    session = await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    t0 = time.time() - 3600.0
    for i in range(1, TURNS + 1):
        for event in turn_events(i, t0):
            await service.append_event(session, event)
    # A turn the user then rewinds with ADK's own rewind: neither ADK's prompt nor the Rust
    # engine may count it.
    rewound = TURNS + 1
    for event in turn_events(rewound, t0):
        event.id = f"rewound-{event.id}"
        event.invocation_id = "inv-rewound"
        await service.append_event(session, event)
    await rewind_session(
        session_service=service, session=session, rewind_before_invocation_id="inv-rewound"
    )

    before = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    check(len(before.events) == len(session.events), f"[{label}] ADK reloads every event")
    check(
        before.events[-1].actions.rewind_before_invocation_id == "inv-rewound",
        f"[{label}] the session ends with ADK's rewind event",
    )
    scoped_before = [e.model_dump(mode="json") for e in before.events if e.isolation_scope]
    scoped_view_before = dump(
        _get_contents(None, before.events, "search_agent", isolation_scope="fc-1")
    )
    check(
        any(SCOPED in t for t in texts(
            _get_contents(None, before.events, "search_agent", isolation_scope="fc-1")
        )),
        f"[{label}] the scoped agent sees its own pipeline before compaction",
    )
    # A session object loaded before the Rust write: it must go stale.
    stale = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)

    print(f"[{label}] running compaction evaluate", flush=True)
    env = dict(os.environ)
    env["ADK_INTEROP_DECISION_KEY"] = "interop-decision-key"
    env["ADK_INTEROP_SUMMARIZER_KEY"] = "interop-summarizer-key"
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    MockModels.calls.clear()
    out = run_binary(
        binary,
        ["evaluate", "--db", str(db), "--session", SESSION, "--app", APP, "--user", USER,
         "--config", str(config), "--json"],
        env,
    )
    record = json.loads(out.strip().splitlines()[-1])
    check(
        record.get("outcome") == "compressed",
        f"[{label}] expected outcome 'compressed', got {record}",
    )
    check(
        DECISION_PATH in MockModels.calls
        and any(c.endswith("/chat/completions") for c in MockModels.calls),
        f"[{label}] both mock models were called: {MockModels.calls}",
    )
    compaction_id = record.get("compaction_event_id")
    check(bool(compaction_id), f"[{label}] the record names the compaction event: {record}")

    print(f"[{label}] reloading with ADK and building the prompt contents", flush=True)
    after = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    check(
        len(after.events) == len(before.events) + 1,
        f"[{label}] exactly one event was appended ({len(before.events)} -> {len(after.events)})",
    )
    comp = [e for e in after.events if e.actions and e.actions.compaction]
    check(len(comp) == 1 and comp[0].id == compaction_id, f"[{label}] ADK loads the compaction")
    event = comp[0]
    check(event.author == "user", f"[{label}] compaction author is 'user': {event.author}")
    check(event.content is None, f"[{label}] compaction event has no content")
    check(
        event.invocation_id not in {e.invocation_id for e in before.events},
        f"[{label}] the compaction has a fresh invocation id",
    )
    check(
        event.custom_metadata and "adaptive_compaction" in json.dumps(event.custom_metadata),
        f"[{label}] engine data lives in custom_metadata: {event.custom_metadata}",
    )
    c = event.actions.compaction
    check(c.compacted_content.role == "model", f"[{label}] summary role is model")
    summary = c.compacted_content.parts[0].text
    # The summarizer keeps every citation of the covered turns (its ledger appends them).
    check(
        summary.startswith(SUMMARY) and "doi:10.1000/adk.1" in summary,
        f"[{label}] the stored summary is the model's, with its citations: {summary!r}",
    )
    check(
        after.last_update_time == event.timestamp,
        f"[{label}] update_time was bumped to the compaction's timestamp "
        f"({after.last_update_time} vs {event.timestamp})",
    )
    covered_last = t0 + (TURNS - RETAINED) * 10.0 + 5
    check(
        c.start_timestamp == t0 + 10.0 and c.end_timestamp == covered_last,
        f"[{label}] the range covers turns 1..{TURNS - RETAINED}: "
        f"[{c.start_timestamp}, {c.end_timestamp}] vs [{t0 + 10.0}, {covered_last}]",
    )

    contents = _get_contents(None, after.events, COORDINATOR)
    all_texts = texts(contents)
    check(
        contents and contents[0].role == "model" and texts(contents[:1]) == [summary],
        f"[{label}] the summary comes first: {dump(contents[:1])}",
    )
    # The covered turns' own messages are gone; the summary (the first entry) may restate their
    # figures: the chat summarizer's facts ledger carries them forward on purpose.
    for i in range(1, TURNS - RETAINED + 1):
        check(
            not any(user_text(i) in t or answer_text(i) in t for t in all_texts[1:]),
            f"[{label}] covered turn {i} is gone from the prompt",
        )
    check(
        not any(user_text(rewound) in t for t in all_texts + [summary]),
        f"[{label}] the rewound turn is neither in the prompt nor in the summary",
    )
    expected_tail = []
    for i in range(TURNS - RETAINED + 1, TURNS + 1):
        expected_tail += [user_text(i), answer_text(i)]
    check(
        all_texts[1:] == expected_tail,
        f"[{label}] the last {RETAINED} turns follow verbatim: {all_texts[1:]} vs {expected_tail}",
    )
    retained_calls = [
        p.function_call.name for c2 in contents for p in (c2.parts or []) if p.function_call
    ]
    check(retained_calls == ["search_library"], f"[{label}] turn 5's tool call is kept")
    check(not any(SCOPED in t for t in all_texts), f"[{label}] no scoped payload in the prompt")
    scoped_after = [e.model_dump(mode="json") for e in after.events if e.isolation_scope]
    check(scoped_after == scoped_before, f"[{label}] scoped events are untouched")
    scoped_view_after = dump(
        _get_contents(None, after.events, "search_agent", isolation_scope="fc-1")
    )
    check(
        scoped_view_after == scoped_view_before,
        f"[{label}] the scoped agent's view is unchanged",
    )

    print(f"[{label}] checking optimistic concurrency", flush=True)
    try:
        await service.append_event(
            stale,
            Event(
                id="late",
                invocation_id="inv-late",
                author="user",
                content=types.Content(role="user", parts=[types.Part(text="late write")]),
            ),
        )
    except StaleSessionError:
        pass
    else:
        raise Failure(f"[{label}] a session loaded before the Rust write did not go stale")

    nxt = TURNS + 2
    for e in turn_events(nxt, time.time() + 1.0 - nxt * 10.0):
        await service.append_event(after, e)
    final = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    check(
        len(final.events) == len(after.events),
        f"[{label}] ADK kept appending after the compaction",
    )
    final_texts = texts(_get_contents(None, final.events, COORDINATOR))
    check(
        final_texts[0] == summary and final_texts[-2:] == [user_text(nxt), answer_text(nxt)],
        f"[{label}] the next prompt is summary + retained turns + the new turn: {final_texts}",
    )

    shown = run_binary(
        binary,
        ["inspect", "--db", str(db), "--session", SESSION, "--app", APP, "--user", USER],
        env,
    )
    check("ADK-INTEROP-SUMMARY" in shown, f"[{label}] inspect shows the summary:\n{shown}")
    print(f"[{label}] ok", flush=True)


# --- sessions ADK's own Runner writes -----------------------------------------------------------


ADK_SUMMARIES = [0]  # how many summaries ADK's summarizer model wrote in this session


class MockLlm(BaseLlm):
    """A local stand-in for the coordinator's model (and ADK's summarizer model): no network."""

    summarizer: bool = False

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if self.summarizer:
            ADK_SUMMARIES[0] += 1
            text = f"ADK-WINDOW-SUMMARY-{ADK_SUMMARIES[0]}"
        else:
            last = [p.text for c in llm_request.contents or [] for p in c.parts or [] if p.text]
            text = f"Reply to: {last[-1] if last else ''}"
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=text)]),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=45_000, candidates_token_count=20, total_token_count=45_020
            ),
        )


def runner(service, compaction: EventsCompactionConfig | None = None) -> Runner:
    agent = LlmAgent(name=COORDINATOR, model=MockLlm(model="mock-coordinator"))
    return Runner(
        app=App(name=APP, root_agent=agent, events_compaction_config=compaction),
        session_service=service,
    )


async def ask(run: Runner, session_id: str, text: str) -> None:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for _ in run.run_async(user_id=USER, session_id=session_id, new_message=message):
        pass


def long_question(i: int) -> str:
    return f"Question {i}: " + "what limits SEI growth in thick cathodes? " * 6


def inspect_blocks(shown: str) -> list[str]:
    """The bodies of `compaction inspect`'s assembled-context blocks, in order."""
    tail = shown.split("Assembled context for the next turn:", 1)[1]
    blocks: list[list[str]] = []
    for line in tail.strip().splitlines():
        if line.startswith("── "):
            blocks.append([])
        elif blocks:
            blocks[-1].append(line)
    return ["\n".join(b).strip() for b in blocks]


def evaluate_args(db: Path | str, session_id: str, config: Path) -> list[str]:
    return ["evaluate", "--db", str(db), "--session", session_id, "--app", APP, "--user", USER,
            "--config", str(config), "--json"]


def inspect_args(db: Path | str, session_id: str) -> list[str]:
    return ["inspect", "--db", str(db), "--session", session_id, "--app", APP, "--user", USER]


def run_binary_full(binary: str, args: list[str], env: dict[str, str]) -> tuple[str, str]:
    out = subprocess.run([binary, *args], capture_output=True, text=True, env=env, timeout=120)
    if out.returncode != 0:
        raise Failure(
            f"`compaction {' '.join(args)}` exited {out.returncode}\n"
            f"stdout: {out.stdout}\nstderr: {out.stderr}"
        )
    return out.stdout, out.stderr


def binary_env() -> dict[str, str]:
    env = dict(os.environ)
    env["ADK_INTEROP_DECISION_KEY"] = "interop-decision-key"
    env["ADK_INTEROP_SUMMARIZER_KEY"] = "interop-summarizer-key"
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    return env


async def adk_own_summaries(label: str, service, db: Path | str, binary: str, config: Path) -> None:
    """Issue 21 item 9: ADK's own overlapping sliding-window summaries are folded into one."""
    sid = "s-adk-windows"
    print(f"[{label}] ADK's Runner with its own sliding-window compaction", flush=True)
    await service.create_session(app_name=APP, user_id=USER, session_id=sid)
    ADK_SUMMARIES[0] = 0
    windows = EventsCompactionConfig(
        compaction_interval=3,
        overlap_size=1,
        summarizer=LlmEventSummarizer(llm=MockLlm(model="mock-adk-summarizer", summarizer=True)),
    )
    compacting = runner(service, windows)
    for i in range(1, 7):
        await ask(compacting, sid, long_question(i))
    plain = runner(service)  # the host turns ADK's compaction off: the engine takes over
    for i in range(7, 11):
        await ask(plain, sid, long_question(i))
    before = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    adk_summaries = [e.actions.compaction for e in before.events if e.actions and e.actions.compaction]
    check(len(adk_summaries) == 2, f"[{label}] ADK wrote two summaries: {adk_summaries}")
    first_user = [e.timestamp for e in before.events if e.author == "user" and e.content]
    first, second = adk_summaries
    check(
        first.start_timestamp == first_user[0] and second.start_timestamp == first_user[2]
        and first.end_timestamp >= second.start_timestamp,
        f"[{label}] ADK's summaries cover turns 1-3 and 3-6 (overlapping)",
    )
    contents = _get_contents(None, before.events, COORDINATOR)
    shown_texts = texts(contents)
    check(
        [t for t in shown_texts if t.startswith("ADK-WINDOW-SUMMARY")]
        == ["ADK-WINDOW-SUMMARY-1", "ADK-WINDOW-SUMMARY-2"],
        f"[{label}] ADK's prompt renders both of its summaries: {shown_texts}",
    )
    env = binary_env()
    shown, _ = run_binary_full(binary, inspect_args(db, sid), env)
    check(
        inspect_blocks(shown) == [t.strip() for t in shown_texts],
        f"[{label}] inspect shows exactly ADK's prompt:\n{inspect_blocks(shown)}\nvs\n{shown_texts}",
    )

    MockModels.calls.clear()
    MockModels.bodies.clear()
    out, _ = run_binary_full(binary, evaluate_args(db, sid, config), env)
    record = json.loads(out.strip().splitlines()[-1])
    check(record.get("outcome") == "compressed", f"[{label}] expected 'compressed': {record}")
    prompt = next((b for b in MockModels.bodies if "Existing Conversation Summary" in b), "")
    check(
        "ADK-WINDOW-SUMMARY-1" in prompt and "ADK-WINDOW-SUMMARY-2" in prompt,
        f"[{label}] the summarizer folds both of ADK's summaries: {prompt[:400]}",
    )
    after = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    ours = [e for e in after.events if e.id == record.get("compaction_event_id")]
    check(len(ours) == 1, f"[{label}] ADK loads the engine's compaction")
    c = ours[0].actions.compaction
    check(
        c.start_timestamp == first_user[0],
        f"[{label}] the rolling range starts at the earliest rendered start (turn 1): "
        f"{c.start_timestamp} vs {first_user[0]}",
    )
    contents = _get_contents(None, after.events, COORDINATOR)
    shown_texts = texts(contents)
    summary = c.compacted_content.parts[0].text
    expected = [summary]
    for i in (9, 10):
        expected += [long_question(i), f"Reply to: {long_question(i)}"]
    check(
        shown_texts == expected,
        f"[{label}] ADK renders one summary, then turns 9-10: {shown_texts}",
    )
    shown, _ = run_binary_full(binary, inspect_args(db, sid), env)
    check(
        inspect_blocks(shown) == [t.strip() for t in shown_texts],
        f"[{label}] inspect shows exactly ADK's prompt after the compaction",
    )
    print(f"[{label}] ADK's own summaries: ok", flush=True)


async def unclosed_scope(label: str, service, db: Path | str, binary: str, config: Path) -> None:
    """Issue 21 item 10: a pipeline scope without `finish_task` swallows the user's messages."""
    print(f"[{label}] a pipeline scope without finish_task, through ADK's Runner", flush=True)
    env = binary_env()
    for sid, closed in (("s-open-scope", False), ("s-closed-scope", True)):
        await service.create_session(app_name=APP, user_id=USER, session_id=sid)
        run = runner(service)
        await ask(run, sid, "Question 1: which electrolyte?")
        session = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
        scope = "search_pipeline:fc-2"
        # The search pipeline's events, scoped as spec 7.1 says.
        await service.append_event(session, Event(
            invocation_id="inv-pipeline", author="search_agent", isolation_scope=scope,
            content=types.Content(role="model", parts=[types.Part(text=f"{SCOPED} step")]),
        ))
        if closed:
            await service.append_event(session, Event(
                invocation_id="inv-pipeline", author="search_agent", isolation_scope=scope,
                content=types.Content(role="user", parts=[types.Part(
                    function_response=types.FunctionResponse(
                        name="finish_task", response={"result": "Task completed."}
                    )
                )]),
            ))
        await ask(run, sid, "Question 2: and the separator?")
        await ask(run, sid, "Question 3: and the binder?")
        session = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
        filed = [e for e in session.events if e.author == "user" and e.isolation_scope and e.content
                 and any(p.text for p in e.content.parts or [])]
        check(
            (len(filed) == 2) != closed,
            f"[{label}] ADK's Runner files the next user messages inside an open scope only "
            f"(closed={closed}): {[(e.isolation_scope, texts([e.content])) for e in filed]}",
        )
        out, err = run_binary_full(binary, evaluate_args(db, sid, config), env)
        record = json.loads(out.strip().splitlines()[-1])
        warnings = record.get("warnings", [])
        shown, inspect_err = run_binary_full(binary, inspect_args(db, sid), env)
        if closed:
            check(warnings == [] and "warning" not in err and "warning" not in inspect_err,
                  f"[{label}] a closed scope gets no warning: {warnings} {err} {inspect_err}")
        else:
            check(
                len(warnings) == 1 and "finish_task" in warnings[0] and scope in warnings[0]
                and "2 user message(s)" in warnings[0],
                f"[{label}] evaluate warns and names finish_task: {record}",
            )
            for stream, text in (("evaluate", err), ("inspect", inspect_err)):
                check(
                    "warning:" in text and "finish_task" in text,
                    f"[{label}] {stream} warns on stderr: {text!r}",
                )
    print(f"[{label}] pipeline scopes: ok", flush=True)


# --- DatabaseSessionService on PostgreSQL ----------------------------------------------------


FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "adk-database-v1-postgres.sql"

SCHEMA_QUERIES = {
    "columns": """
        SELECT table_name, column_name, data_type, coalesce(character_maximum_length, 0),
               is_nullable, ordinal_position
        FROM information_schema.columns WHERE table_schema = $1 ORDER BY 1, 2""",
    "constraints": """
        SELECT c.relname, k.conname, k.contype, replace(pg_get_constraintdef(k.oid), $1 || '.', '')
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 ORDER BY 1, 2""",
    "indexes": """
        SELECT tablename, indexname, replace(indexdef, $1 || '.', '')
        FROM pg_indexes WHERE schemaname = $1 ORDER BY 1, 2""",
}


async def check_fixture(url: str, label: str) -> None:
    """The tables ADK created in `public` equal the fixture's DDL loaded into `fixture`."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE SCHEMA fixture; SET search_path TO fixture; " + FIXTURE.read_text())
        await conn.execute("SET search_path TO public")
        for what, sql in SCHEMA_QUERIES.items():
            adk = [tuple(r) for r in await conn.fetch(sql, "public")]
            fixture = [tuple(r) for r in await conn.fetch(sql, "fixture")]
            check(bool(adk), f"[{label}] ADK created tables with {what}")
            check(
                adk == fixture,
                f"[{label}] the {what} ADK created differ from {FIXTURE.name}:\n"
                f"ADK:     {adk}\nfixture: {fixture}",
            )
        version = await conn.fetchval(
            "SELECT value FROM public.adk_internal_metadata WHERE key = 'schema_version'"
        )
        check(version == "1", f"[{label}] ADK's schema_version is 1: {version!r}")
    finally:
        await conn.close()


async def on_postgres(base_url: str, binary: str, config: Path) -> None:
    """Steps 1-8 on DatabaseSessionService over PostgreSQL, in a fresh database."""
    from urllib.parse import urlsplit, urlunsplit

    import asyncpg

    parts = urlsplit(base_url)
    name = f"adk_interop_{os.getpid()}_{int(time.time() * 1000)}"
    admin = await asyncpg.connect(base_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = urlunsplit(("postgres", parts.netloc, f"/{name}", parts.query, ""))
    label = "DatabaseSessionService on PostgreSQL"
    service = DatabaseSessionService(
        urlunsplit(("postgresql+asyncpg", parts.netloc, f"/{name}", parts.query, ""))
    )
    try:
        await interop(label, service, url, binary, config)
        await adk_own_summaries(label, service, url, binary, config)
        await unclosed_scope(label, service, url, binary, config)
        await check_fixture(url, label)
        print(f"[{label}] the tables match {FIXTURE.name}", flush=True)
    finally:
        await service.close()
        admin = await asyncpg.connect(base_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        finally:
            await admin.close()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, help="path to the built `compaction`")
    parser.add_argument("--workdir", required=True, help="an empty scratch directory")
    parser.add_argument(
        "--postgres-url",
        help="a PostgreSQL server (postgres://user@host:port/db) on which a fresh database is "
        "created for DatabaseSessionService over asyncpg",
    )
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    server, base_url = start_mock()
    config = write_config(workdir, base_url)
    try:
        db = workdir / "database_session_service.db"
        service = DatabaseSessionService(f"sqlite+aiosqlite:///{db}")
        try:
            await interop("DatabaseSessionService", service, db, args.binary, config)
            await adk_own_summaries("DatabaseSessionService", service, db, args.binary, config)
            await unclosed_scope("DatabaseSessionService", service, db, args.binary, config)
        finally:
            await service.close()
        db = workdir / "sqlite_session_service.db"
        sservice = SqliteSessionService(str(db))
        try:
            await interop("SqliteSessionService", sservice, db, args.binary, config)
            await adk_own_summaries("SqliteSessionService", sservice, db, args.binary, config)
            await unclosed_scope("SqliteSessionService", sservice, db, args.binary, config)
        finally:
            await sservice.close()
        if args.postgres_url:
            await on_postgres(args.postgres_url, args.binary, config)
    except Failure as failure:
        print(f"adk-interop FAILED: {failure}", file=sys.stderr)
        return 1
    finally:
        server.shutdown()
    layouts = "both ADK SQLite layouts" + (
        " and DatabaseSessionService on PostgreSQL" if args.postgres_url else ""
    )
    print(f"adk-interop: all checks passed for {layouts}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

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

from google.adk.errors._stale_session_error import StaleSessionError
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

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
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


async def interop(label: str, service, db: Path, binary: str, config: Path) -> None:
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
    for i in range(1, TURNS - RETAINED + 1):
        check(
            not any(user_text(i) in t or answer_text(i) in t for t in all_texts),
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


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, help="path to the built `compaction`")
    parser.add_argument("--workdir", required=True, help="an empty scratch directory")
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
        finally:
            await service.close()
        db = workdir / "sqlite_session_service.db"
        sservice = SqliteSessionService(str(db))
        try:
            await interop("SqliteSessionService", sservice, db, args.binary, config)
        finally:
            await sservice.close()
    except Failure as failure:
        print(f"adk-interop FAILED: {failure}", file=sys.stderr)
        return 1
    finally:
        server.shutdown()
    print("adk-interop: all checks passed for both ADK layouts")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

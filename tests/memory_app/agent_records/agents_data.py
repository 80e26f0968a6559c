"""A team whose agents leave traces everywhere an agent name lives, for the agents pages' tests.

- "sales-analysis" (rounds): posts from User, Planner and CodeInterpreter; work records of
  developer (a failed attempt, an archived entry) and reviewer.
- "auth-refactor": metadata.agent_name developer; developer's messages by `name` (one with a
  tool call), a tool result named after its tool (run_tests, which is no agent); an experience
  selection for developer; a fact from developer's words; a served context and an LLM call in
  the usage ledger for developer.
- API keys naming developer and deployer (deployer has done nothing else).
Built through the services the API calls, except the ledger and the selection log, which are
written where their own code writes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from experiences_app.models import SelectionLog
from memory_app.conversations import services
from memory_app.conversations.models import Session
from memory_app.facts import services as facts
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import Team
from memory_app.usage.models import ContextServe, LLMCall
from tests.memory_app.rounds.multi_agent_data import build_multi_agent_session

DEVELOPER_REPLY = "I will hash the passwords with bcrypt, which the repository already has."
TOOL_OUTPUT = "3 passed, 0 failed"
SELECTION_QUERY = "How should login hash passwords?"
PICKED = "auth-tips"
SERVED_TOKENS = 400
RAW_TOKENS = 1000
SPENT_PROMPT, SPENT_COMPLETION = 120, 30


@dataclass(frozen=True)
class AgentsWorld:
    team: Team
    rounds_session: Session
    auth_session: Session


def build_agents_world(team: Team) -> AgentsWorld:
    rounds_session = build_multi_agent_session(team)
    auth = services.session_create(
        team=team, external_id="auth-refactor", metadata={"agent_name": "developer"}, system_prompt="You code."
    )
    services.message_append(
        session=auth,
        messages=[
            {"role": "user", "content": "Please make login hash passwords."},
            {
                "role": "assistant",
                "name": "developer",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "name": "run_tests", "content": TOOL_OUTPUT},
            {"role": "assistant", "name": "developer", "content": DEVELOPER_REPLY},
        ],
    )
    tenancy.api_key_create(team=team, name="dev key", agent_name="developer")
    tenancy.api_key_create(team=team, name="deploy key", agent_name="deployer")
    SelectionLog.objects.create(
        team=team,
        role="developer",
        session=auth,
        query=SELECTION_QUERY,
        candidates=[{"exp_id": PICKED, "when": "w"}, {"exp_id": "plot-style", "when": "w"}],
        selected=[PICKED],
        prompt_tokens=200,
        completion_tokens=10,
    )
    facts.fact_add(team=team, role="developer", subject="login", predicate="hashes with", object="bcrypt", session=auth)
    ContextServe.objects.create(
        team=team, session=auth, agent="developer", raw_tokens=RAW_TOKENS, served_tokens=SERVED_TOKENS
    )
    LLMCall.objects.create(
        team=team,
        session=auth,
        agent="developer",
        purpose=LLMCall.Purpose.SUMMARIZE,
        backend="offline",
        prompt_tokens=SPENT_PROMPT,
        completion_tokens=SPENT_COMPLETION,
        outcome=LLMCall.Outcome.OK,
    )
    return AgentsWorld(team=team, rounds_session=rounds_session, auth_session=auth)

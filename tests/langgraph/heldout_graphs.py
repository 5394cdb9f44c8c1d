"""Held-out style LangGraph apps for the tests: neutral names, shapes from no example (a router that is not
called supervisor, a Send fan-out from a node's Command, a hand-written Command.PARENT handoff, a model and
ToolNode loop, a human approval)."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from fakes import ScriptedChatModel, tool_call
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Send, interrupt


class Desk(TypedDict, total=False):
    n: int
    parts: Annotated[list[str], operator.add]
    out: str


def desk() -> Any:
    """dispatcher -Command-> pricing -conditional edge-> dispatcher -Command(Send x3)-> shard x3 -edge-> merge
    -edge-> dispatcher -Command(END)."""

    def dispatcher(state: Desk) -> Command:
        n = state.get("n", 0)
        if n >= 2:
            return Command(goto=END)
        if n == 0:
            return Command(goto="pricing", update={"n": 1})
        return Command(goto=[Send("shard", {"n": i}) for i in range(3)], update={"n": 2})

    def pick(state: Desk) -> str:
        return "dispatcher"

    g = StateGraph(Desk)
    g.add_node("dispatcher", dispatcher, destinations=("pricing", "shard", END))
    g.add_node("pricing", lambda state: {"parts": ["p"]})
    g.add_node("shard", lambda state: {"parts": [f"s{state['n']}"]})
    g.add_node("merge", lambda state: {"out": ",".join(sorted(state["parts"]))})
    g.add_edge(START, "dispatcher")
    g.add_conditional_edges("pricing", pick, ["dispatcher", "merge"])
    g.add_edge("shard", "merge")
    g.add_edge("merge", "dispatcher")
    return g.compile(name="desk")


class Route(TypedDict, total=False):
    topic: str
    log: Annotated[list[str], operator.add]


def router_from_start() -> Any:
    """A conditional edge from START chooses (the graph's run decides), a node's conditional edge ends."""

    def classify(state: Route) -> str:
        return "billing" if state["topic"] == "money" else "support"

    def done(state: Route) -> str:
        return END

    g = StateGraph(Route)
    g.add_node("billing", lambda state: {"log": ["billing"]})
    g.add_node("support", lambda state: {"log": ["support"]})
    g.add_conditional_edges(START, classify, ["billing", "support"])
    g.add_conditional_edges("billing", done, [END])
    g.add_edge("support", END)
    return g.compile(name="frontdesk")


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


@tool
def inventory(item: str) -> int:
    """Units in stock."""
    return 3


def tool_loop() -> Any:
    """A hand-written model + ToolNode loop (``tools_condition``): the tool node is no agent."""
    model = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[tool_call("inventory", {"item": "bolt"}, "k1")]), AIMessage("3 bolts."),
    ])

    def clerk(state: Chat) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(Chat)
    g.add_node("clerk", clerk)
    g.add_node("stockroom", ToolNode([inventory]))
    g.add_edge(START, "clerk")
    g.add_conditional_edges("clerk", tools_condition, {"tools": "stockroom", END: END})
    g.add_edge("stockroom", "clerk")
    return g.compile(name="shop")


class Case(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def handoff_team() -> Any:
    """Two subgraph agents; the first hands off with a hand-written ``Command.PARENT``."""

    def triage(state: Case) -> Command:
        return Command(graph=Command.PARENT, goto="settlement", update={"log": ["triage"]})

    intake = StateGraph(Case)
    intake.add_node("triage", triage)
    intake.add_edge(START, "triage")
    settle = StateGraph(Case)
    settle.add_node("settle", lambda state: {"log": ["settled"]})
    settle.add_edge(START, "settle")
    team = StateGraph(Case)
    team.add_node("intake", intake.compile(name="intake"), destinations=("settlement",))
    team.add_node("settlement", settle.compile(name="settlement"))
    team.add_edge(START, "intake")
    return team.compile(name="claims")


def review_flow(**compile_kwargs: Any) -> Any:
    def approve(state: Case) -> dict[str, Any]:
        answer = interrupt("approve?")
        return {"log": [f"approved:{answer}"]}

    g = StateGraph(Case)
    g.add_node("draft", lambda state: {"log": ["draft"]})
    g.add_node("approve", approve)
    g.add_node("send", lambda state: {"log": ["sent"]})
    g.add_edge(START, "draft")
    g.add_edge("draft", "approve")
    g.add_edge("approve", "send")
    return g.compile(checkpointer=InMemorySaver(), name="mailer", **compile_kwargs)


class Draft(TypedDict, total=False):
    rounds: int
    messages: Annotated[list[AnyMessage], add_messages]


def drafter_critic(rounds: int = 3, reward: float | None = None) -> Any:
    """drafter -edge-> critic -conditional edge-> drafter (``rounds`` times each), then END; each node asks a
    model once. ``reward``: the critic's last round records it as the team outcome."""
    import orchestrace as ot

    model = ScriptedChatModel(replies=[AIMessage("a draft")])

    def drafter(state: Draft) -> dict[str, Any]:
        return {"rounds": state.get("rounds", 0) + 1, "messages": [model.invoke(state["messages"])]}

    def critic(state: Draft) -> dict[str, Any]:
        if reward is not None and state["rounds"] >= rounds:
            ot.reward(reward, family="team")
        return {"messages": [model.invoke(state["messages"])]}

    def again(state: Draft) -> str:
        return "revise" if state["rounds"] < rounds else "done"

    g = StateGraph(Draft)
    g.add_node("drafter", drafter)
    g.add_node("critic", critic)
    g.add_edge(START, "drafter")
    g.add_edge("drafter", "critic")
    g.add_conditional_edges("critic", again, {"revise": "drafter", "done": END})
    return g.compile(name="essay")


class Move(TypedDict, total=False):
    kind: str
    offers: Annotated[list[str], operator.add]
    plan: str


def moving_desk() -> Any:
    """intake -edge-> chooser -conditional edge-> Send(quote) x3 -edge-> relocation_desk: chooser and
    relocation_desk each merge with ``ot.aggregate`` in their own code (spans the user's code starts), and
    chooser asks a model."""
    import orchestrace as ot

    model = ScriptedChatModel(replies=[AIMessage("ok")])

    def chooser(state: Move) -> dict[str, Any]:
        model.invoke([HumanMessage("which?")])
        with ot.aggregate(["road", "rail"]) as merge:
            merge.set_result("road")
        return {}

    def route(state: Move) -> Any:
        return [Send("quote", {"kind": k}) for k in ("a", "b", "c")] if state["kind"] == "move" else END

    def relocation_desk(state: Move) -> dict[str, Any]:
        with ot.aggregate(state["offers"]) as merge:
            merge.set_result(",".join(sorted(state["offers"])))
        return {"plan": ",".join(sorted(state["offers"]))}

    g = StateGraph(Move)
    g.add_node("intake", lambda state: {"kind": "move"})
    g.add_node("chooser", chooser)
    g.add_node("quote", lambda state: {"offers": [model.invoke([HumanMessage(state["kind"])]).content]})
    g.add_node("relocation_desk", relocation_desk)
    g.add_edge(START, "intake")
    g.add_edge("intake", "chooser")
    g.add_conditional_edges("chooser", route, ["quote", END])
    g.add_edge("quote", "relocation_desk")
    g.add_edge("relocation_desk", END)
    return g.compile(name="mover")

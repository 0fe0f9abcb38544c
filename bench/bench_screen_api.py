"""screen --proxy of API models against running each exact, in tokens billed and wall time (the same run).

A local OpenAI-compatible service on 127.0.0.1 (the test suite's ``tests/support/api_server.py``) serves real
models: each model name answers with the vectors of the shipped model of that name (``minilm``, ``minilm-int8``,
``paraphrase-minilm-l3``, ``static-64``, and any folder given with ``--model``), and bills a token per word. The
candidates are ``openai:NAME`` models pointed at it, so every text a run needs is a paid request.

For each candidate: the exact run on its own (fresh output and cache folders: the anchor), then ``screen --proxy``
of all of them on fresh folders. Printed: tokens and requests billed, wall times, the token overhead
``(screen's tokens − the winner's exact tokens) ÷ (the other candidates' exact tokens)`` (the issue's bound: 0.35),
the same for wall time, whether the screen named the exact winner (or a tie holding it) and Kendall's τ.

    .venv/bin/python bench/bench_screen_api.py [--proxy 0.05 | --planned] [--tasks BBCNewsRetrieval] [--model DIR ...]

``--planned`` runs the default screen instead (no mode named: its plan chooses; for models behind an API and the
cache on, the proxy rounds of :data:`embedscope.screen.plan.DEFAULT_PROXY`), and prints the plan's token estimate
against what the screen was billed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from scipy.stats import kendalltau

import embedscope
from embedscope.models.specs import load_encoder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test service is a test helper
from support.api_server import ApiServer, fake_tokens  # noqa: E402

SHIPPED = ["minilm", "minilm-int8", "paraphrase-minilm-l3", "static-64"]
KEY = "sk-bench-0123456789"
TIMEOUT_S = 1800.0  # the service encodes one request per model at a time: a large model's queue on 2 cores is slow


class Served:
    """Real models behind the service: model name → its vectors (one encode at a time per model)."""

    def __init__(self, specs: dict[str, str]) -> None:
        self.encoders = {name: load_encoder(spec) for name, spec in specs.items()}
        self.locks = {name: threading.Lock() for name in specs}

    def __call__(self, model: str, texts: list[str]) -> Any:
        with self.locks[model]:
            return self.encoders[model].encode(texts, role="document", batch_size=32)


def billed(server: ApiServer, since: int) -> tuple[Counter[str], Counter[str]]:
    """Tokens and requests per model since request ``since``."""
    tokens: Counter[str] = Counter()
    requests: Counter[str] = Counter()
    for r in server.requests[since:]:
        model = str(r.body.get("model"))
        tokens[model] += sum(fake_tokens(t) for t in r.texts)
        requests[model] += 1
    return tokens, requests


def service(server: ApiServer) -> dict[str, Any]:
    """The model options that point an ``openai:`` model at the local service."""
    return {"api_base": server.url, "api_key": KEY, "request_timeout": TIMEOUT_S}


def candidate(name: str, server: ApiServer) -> dict[str, Any]:
    return {"model": f"openai:{name}", **service(server)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy", nargs="+", type=float, default=[0.05])
    parser.add_argument("--planned", action="store_true", help="the default screen: its plan chooses the mode")
    parser.add_argument("--tasks", nargs="+", default=["BBCNewsRetrieval"])
    parser.add_argument("--model", nargs="*", default=[], help="more model folders to serve (named by folder)")
    args = parser.parse_args()
    specs = {name: name for name in SHIPPED} | {Path(m).name: m for m in args.model}
    served = Served(specs)
    names = list(specs)
    with ApiServer(vectors=served) as server, tempfile.TemporaryDirectory() as root:
        exact, seconds, tokens = {}, {}, {}
        for name in names:
            folder = Path(root) / "exact" / name
            since, started = len(server.requests), time.perf_counter()
            report = embedscope.evaluate(
                f"openai:{name}", args.tasks, model_options=service(server),
                output_folder=folder, cache_dir=folder / "cache", show_progress=False,
            )  # fmt: skip
            seconds[name] = time.perf_counter() - started
            scores = [o.result.main_score() for o in report.outcomes]
            exact[name] = sum(scores) / len(scores)
            tokens[name] = billed(server, since)[0][name]
        since, started = len(server.requests), time.perf_counter()
        mode = {} if args.planned else {"proxy": args.proxy}
        screened = embedscope.screen(
            [candidate(n, server) for n in names], args.tasks, output_folder=Path(root) / "screen",
            cache_dir=Path(root) / "screen" / "cache", show_progress=False, **mode,
        )  # fmt: skip
        screen_seconds = time.perf_counter() - started
        screen_tokens, screen_requests = billed(server, since)
    if screened.plan is not None:
        plan = screened.plan
        print("\n".join(plan.lines()))
        print(f"  {screened.outcome_line()}")
        if plan.bounds is not None:
            low, high = plan.bounds
            billed_total = sum(screen_tokens.values())
            inside = low * 0.7 <= billed_total <= high * 1.3
            print(
                f"  billed {billed_total} tokens against the plan's {low:.0f} to {high:.0f}: {'within' if inside else 'OUTSIDE'} 30%"
            )
    halving = screened.halving
    assert halving is not None, "the plan ran every candidate exactly (see its line above)"
    key = {f"openai:{n}": n for n in names}
    winner = max(exact, key=lambda n: exact[n])
    named = key.get(halving.confirmed[0], halving.confirmed[0])
    ties = {key.get(k, k): [key.get(o, o) for o in v] for r in halving.rounds for k, v in r.tied.items()}
    held = winner == named or winner in ties.get(named, [])
    others_tokens = sum(tokens.values()) - tokens[winner]
    others_seconds = sum(seconds.values()) - seconds[winner]
    order = [key.get(k, k) for k in halving.ranking]
    tau = float(kendalltau([-p for p in halving.places], [exact[n] for n in order]).statistic)  # as stated
    rounds = [r.size for r in halving.rounds]
    print(f"\n== {len(names)} API models (local service, real vectors) on {args.tasks}, proxy rounds {rounds}")
    for n in names:
        print(
            f"  {n:24s} exact {exact[n]:.5f}: {tokens[n]:9d} tokens in {seconds[n]:7.1f} s; "
            f"screen sent {screen_tokens[n]:9d} tokens in {screen_requests[n]} requests"
        )
    total_tokens = sum(tokens.values())
    print(f"  all exact: {total_tokens} tokens, {sum(seconds.values()):.1f} s")
    print(
        f"  screen: {sum(screen_tokens.values())} tokens ({sum(screen_tokens.values()) / total_tokens:.3f} of all "
        f"exact), {screen_seconds:.1f} s ({screen_seconds / sum(seconds.values()):.3f})"
    )
    token_overhead = (sum(screen_tokens.values()) - tokens[winner]) / others_tokens
    time_overhead = (screen_seconds - seconds[winner]) / others_seconds
    print(f"  token overhead (screen − winner's exact) / (others' exact): {token_overhead:.3f} (bound 0.35)")
    print(f"  wall-time overhead, same rule: {time_overhead:.3f}")
    for i, r in enumerate(halving.rounds, 1):
        print(f"  round {i} (size {r.size}): dropped {r.dropped}, tied {r.tied}, P(best kept) {r.p_best_kept:.3f}")
    print(f"  confirmed {halving.confirmed}; unconfirmed {halving.unconfirmed}")
    print(f"  exact winner {winner}; the screen names {named}; {'held' if held else 'MISSED'}")
    print(f"  stated probability {halving.p_winner_kept:.3f}; Kendall's tau vs all-exact {tau:.3f}")


if __name__ == "__main__":
    main()

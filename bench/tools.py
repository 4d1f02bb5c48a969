"""Many tools: ranking time, the bytes of ``tools`` per model request, and whether the right tool is
offered, on two public DRF apps' tool sets (``bench/tool_sets.py``).

For 10, 100 and 1,000 visible tools (the two apps' 93, then a made-up back office's), it prints the
bytes every definition would take, and the bytes and count of what a model request carries
(``agent.tools.catalogue.offer``, as a turn's round builds it) for each labelled request: p50 and max.
It times ``agent.tools.rank`` for 100 and 1,000 tools (p50/p95 over the labelled requests, each
``--runs`` times, after the index is built, and the build itself). On the two apps' 93 tools it
measures recall on the labelled requests (English and Russian): the right tool among those a request
carries, and among ``find_tools``' first five for the same words. It also prints the average size
of a definition, the apps' and the demo site's own DRF-built tools'.

Run: ``.venv/bin/python bench/tools.py`` (``--runs 20``, ``--misses`` lists the requests missed).
About a minute; it needs the bench database only for a user and a session.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

import harness


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--misses", action="store_true")
    options = parser.parse_args()
    harness.setup()

    from django.utils import translation
    from tool_sets import LABELLED, drf_apps, synthetic

    from agent.access import authorize_session
    from agent.tools import rank, registry
    from agent.tools.catalogue import definitions_bytes, offer
    from agent.tools.ranking import indexes
    from agent.tools.registry import declared

    scope = authorize_session(harness.login(harness.bench_user("bench_tools")), impersonated=False)
    scopes = {language: dataclasses.replace(scope, language=language) for language in ("en", "ru")}

    def sizes(tools: list[Any]) -> list[int]:
        return [definitions_bytes([t.definition()]) for t in tools]

    demo = [t for t in registry.all() if t.func.__module__.startswith("agent.tools.drf.")]
    apps = drf_apps()
    print("definition size, bytes of JSON: mean / max")
    for label, tools in (("the two apps' 93 tools", apps), (f"the demo's {len(demo)} DRF-built tools", demo)):
        found = sizes(tools)
        if found:
            print(f"  {label:34} {sum(found) / len(found):6.0f} / {max(found)}")

    def catalogue(tools: list[Any]) -> None:
        for name in [t.name for t in registry.all()]:
            registry.unregister(name)
        for tool in tools:
            declared(tool)

    def carried(language: str, text: str) -> list[Any]:
        with translation.override(language):
            return offer(scopes[language], text)

    print("\ntools per model request: all definitions | carried p50 / max bytes, most tools")
    for count in (10, 100, 1000):
        tools = (apps + synthetic(1000))[:count]
        catalogue(tools)
        offered = [carried(language, text) for text, language, _right in LABELLED]
        carried_bytes = [definitions_bytes([t.definition() for t in o]) for o in offered]
        print(
            f"  {count:5} visible: {definitions_bytes([t.definition() for t in tools]):7} |"
            f" {harness.median(carried_bytes):7.0f} / {max(carried_bytes):6}, {max(map(len, offered))} tools"
        )

    print(
        f"\nrank(scope, text, limit=20), ms over {len(LABELLED)} requests x {options.runs}:"
        " p50 / p95 wall | p50 / p95 CPU | index built first, for another set"
    )
    for count in (100, 1000):
        catalogue((drf_apps() + synthetic(1000))[:count])  # new tools: their words are read afresh
        visible = registry.all()
        started = time.perf_counter()
        indexes.get(visible, "en")
        built = time.perf_counter() - started
        started = time.perf_counter()
        indexes.get(visible[1:], "en")  # another user's rights: the tools' words are read already
        rebuilt = time.perf_counter() - started
        wall, cpu = [], []
        for _run in range(options.runs):
            for text, _language, _right in LABELLED:
                started, started_cpu = time.perf_counter(), time.thread_time()
                rank(scopes["en"], text, limit=20)
                wall.append(time.perf_counter() - started)
                cpu.append(time.thread_time() - started_cpu)
        p95 = harness.pct(cpu, 95)
        print(
            f"  {count:5} tools: {harness.ms(harness.median(wall))} / {harness.ms(harness.pct(wall, 95))} |"
            f" {harness.ms(harness.median(cpu))} / {harness.ms(p95)} | {harness.ms(built)}, {harness.ms(rebuilt)}"
            f"   p95 CPU under 5 ms: {harness.verdict(p95 < 0.005)}"
        )

    catalogue(apps)
    print(f"\nrecall on {len(LABELLED)} labelled requests over the two apps' {len(apps)} tools: inline | find_tools' 5")
    inline_hits: dict[str, list[bool]] = {"en": [], "ru": []}
    found_hits: dict[str, list[bool]] = {"en": [], "ru": []}
    for text, language, right in LABELLED:
        names = {t.name for t in carried(language, text)}
        first_five = set(rank(scopes[language], text, limit=5))
        inline_hits[language].append(bool(names & right))
        found_hits[language].append(bool(first_five & right))
        if options.misses and not (names & right and first_five & right):
            print(
                f"  missed ({'inline ' if not names & right else ''}{'find' if not first_five & right else ''}):"
                f" {text} → {sorted(right)}; first five {sorted(first_five)}"
            )
    for language in ("en", "ru", "all"):
        inline = sum(inline_hits.values(), []) if language == "all" else inline_hits[language]
        found = sum(found_hits.values(), []) if language == "all" else found_hits[language]
        print(
            f"  {language:3} {len(inline):3} requests: {100 * sum(inline) / len(inline):5.1f} % |"
            f" {100 * sum(found) / len(found):5.1f} %"
        )
    inline_all, found_all = sum(inline_hits.values(), []), sum(found_hits.values(), [])
    print(
        f"  inline ≥ 90 %: {harness.verdict(sum(inline_all) >= 0.9 * len(inline_all))},"
        f" find_tools' first five ≥ 95 %: {harness.verdict(sum(found_all) >= 0.95 * len(found_all))}"
    )


if __name__ == "__main__":
    main()
